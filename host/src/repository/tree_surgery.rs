//! Tree surgery: a Candidate's tree built from its base's stored trees and the changed paths
//! alone. Only the directories on a changed path are encoded and hashed again; every other
//! subtree keeps the id it was read under, so the objects a seal writes are the changed
//! blobs and the trees above them, however large the tree.
//!
//! The result is the tree [`build_tree`](super::source::build_tree) would build from the
//! whole file list (the same Git encoding, so the same id); export rebuilds it from the files
//! and compares, so a surgery that went wrong could never publish a Candidate that exports.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::contracts::EncodedObject;
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};

/// The trees of one stored tree as a walk read them: each directory's id and entries, by
/// its path (`""` is the root).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TreeIndex {
    dirs: HashMap<String, (ObjectId, Vec<TreeEntry>)>,
}

impl TreeIndex {
    /// Records directory `path` as tree `id` holding `entries`.
    pub(crate) fn insert(&mut self, path: String, id: ObjectId, entries: Vec<TreeEntry>) {
        self.dirs.insert(path, (id, entries));
    }

    /// The root tree's id; `None` for an index that holds nothing.
    #[cfg(test)]
    fn root(&self) -> Option<ObjectId> {
        self.dirs.get("").map(|(id, _)| *id)
    }

    /// Directory `path`'s tree id and entries, when the index holds it.
    pub(crate) fn get(&self, path: &str) -> Option<&(ObjectId, Vec<TreeEntry>)> {
        self.dirs.get(path)
    }

    /// The entry called `name` in directory `dir`, when the index holds the directory.
    pub(crate) fn entry(&self, dir: &str, name: &str) -> Option<&TreeEntry> {
        self.dirs
            .get(dir)
            .and_then(|(_, entries)| entries.iter().find(|entry| entry.name == name))
    }
}

/// A leaf as a tree entry names it: its mode and its blob.
pub(crate) type Leaf = (EntryMode, ObjectId);

/// One changed path: its new leaf, or `None` when it was deleted.
pub(crate) type Change = (String, Option<Leaf>);

/// The rebuilt tree: its root id, the tree objects that are new (every directory on a
/// changed path that still holds something), deepest first, and each directory on a changed
/// path that still holds something, with its id and entries, by path.
#[derive(Debug)]
pub(crate) struct Rebuilt {
    pub tree: ObjectId,
    pub objects: Vec<EncodedObject>,
    pub directories: BTreeMap<String, (ObjectId, Vec<TreeEntry>)>,
}

/// Applies `changes` (distinct paths, already checked against the tree rules as a whole) to
/// the tree `base` indexes.
pub(crate) fn rebuild(base: &TreeIndex, changes: &[Change]) -> Rebuilt {
    // The leaf changes of each directory, and every directory above a change.
    let mut leaves: HashMap<&str, Vec<(&str, Option<Leaf>)>> = HashMap::new();
    let mut touched: BTreeSet<(usize, &str)> = BTreeSet::new();
    for (path, leaf) in changes {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        leaves.entry(dir).or_default().push((name, *leaf));
        let mut at = dir;
        loop {
            touched.insert((depth(at), at));
            match at.rsplit_once('/') {
                Some((parent, _)) => at = parent,
                None if !at.is_empty() => at = "",
                None => break,
            }
        }
    }
    // Deepest first, so that a directory's children are rebuilt before it.
    let mut rebuilt: HashMap<&str, Option<ObjectId>> = HashMap::new();
    let mut objects = Vec::new();
    let mut directories = BTreeMap::new();
    for &(_, dir) in touched.iter().rev() {
        let mut entries: BTreeMap<String, TreeEntry> = base
            .dirs
            .get(dir)
            .map(|(_, entries)| {
                entries
                    .iter()
                    .map(|entry| (entry.name.clone(), entry.clone()))
                    .collect()
            })
            .unwrap_or_default();
        // Children first: a directory that became empty goes, one rebuilt takes its new id.
        for (child, id) in rebuilt
            .iter()
            .filter(|(child, _)| parent_of(child) == Some(dir))
        {
            let name = child.rsplit_once('/').map_or(*child, |(_, name)| name);
            match id {
                Some(id) => {
                    entries.insert(
                        name.to_owned(),
                        TreeEntry {
                            mode: EntryMode::Tree,
                            name: name.to_owned(),
                            id: *id,
                        },
                    );
                }
                None => {
                    if entries
                        .get(name)
                        .is_some_and(|entry| entry.mode == EntryMode::Tree)
                    {
                        entries.remove(name);
                    }
                }
            }
        }
        // Then the leaves: a deletion removes a leaf only (the name may now be a directory
        // the same proposal created), a write sets it.
        for &(name, leaf) in leaves.get(dir).into_iter().flatten() {
            match leaf {
                Some((mode, id)) => {
                    entries.insert(
                        name.to_owned(),
                        TreeEntry {
                            mode,
                            name: name.to_owned(),
                            id,
                        },
                    );
                }
                None => {
                    if entries
                        .get(name)
                        .is_some_and(|entry| entry.mode != EntryMode::Tree)
                    {
                        entries.remove(name);
                    }
                }
            }
        }
        let id = if entries.is_empty() && !dir.is_empty() {
            None
        } else {
            let entries: Vec<TreeEntry> = entries.into_values().collect();
            let object = EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&entries));
            let id = object.id;
            objects.push(object);
            directories.insert(dir.to_owned(), (id, entries));
            Some(id)
        };
        rebuilt.insert(dir, id);
    }
    let tree = rebuilt
        .get("")
        .copied()
        .flatten()
        .unwrap_or_else(|| EncodedObject::new(ObjectKind::Tree, Vec::new()).id);
    // A tree of the same bytes as one already stored is not new, and one built twice (two
    // new directories alike) is written once.
    let mut known: HashSet<ObjectId> = base.dirs.values().map(|(id, _)| *id).collect();
    objects.retain(|object| known.insert(object.id));
    Rebuilt {
        tree,
        objects,
        directories,
    }
}

fn depth(dir: &str) -> usize {
    if dir.is_empty() {
        0
    } else {
        dir.split('/').count()
    }
}

fn parent_of(dir: &str) -> Option<&str> {
    if dir.is_empty() {
        None
    } else {
        Some(dir.rsplit_once('/').map_or("", |(parent, _)| parent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::tree_path::EntryMode as Mode;
    use crate::repository::source::{SourceFile, build_tree};

    /// The index `build_tree` would leave for `files`, as a walk reads it.
    fn index_of(files: &[SourceFile]) -> TreeIndex {
        let built = build_tree(files);
        let mut trees: HashMap<ObjectId, Vec<TreeEntry>> = HashMap::new();
        for object in &built.objects {
            if object.kind == ObjectKind::Tree {
                trees.insert(object.id, git_object::decode_tree(&object.body).unwrap());
            }
        }
        let mut index = TreeIndex::default();
        let mut pending = vec![(String::new(), built.tree)];
        while let Some((path, id)) = pending.pop() {
            let entries = trees[&id].clone();
            for entry in &entries {
                if entry.mode == EntryMode::Tree {
                    let child = if path.is_empty() {
                        entry.name.clone()
                    } else {
                        format!("{path}/{}", entry.name)
                    };
                    pending.push((child, entry.id));
                }
            }
            index.insert(path, id, entries);
        }
        index
    }

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile::text(path, text)
    }

    /// Applies `edits` (path, new text or deletion) to `base` both ways and compares.
    fn check(base: &[SourceFile], edits: &[(&str, Option<&str>)]) {
        let mut files: BTreeMap<String, SourceFile> = base
            .iter()
            .map(|file| (file.path.clone(), file.clone()))
            .collect();
        let mut changes = Vec::new();
        for (path, text) in edits {
            match text {
                Some(text) => {
                    let new = file(path, text);
                    changes.push((
                        path.to_string(),
                        Some((EntryMode::of_leaf(new.mode), new.blob)),
                    ));
                    files.insert(path.to_string(), new);
                }
                None => {
                    files.remove(*path);
                    changes.push((path.to_string(), None));
                }
            }
        }
        let files: Vec<SourceFile> = files.into_values().collect();
        let index = index_of(base);
        let rebuilt = rebuild(&index, &changes);
        let whole = build_tree(&files);
        assert_eq!(rebuilt.tree, whole.tree, "{edits:?}");
        // Every new tree is one the whole build has, and none is a base tree.
        let base_trees: BTreeSet<ObjectId> =
            build_tree(base).objects.iter().map(|o| o.id).collect();
        let whole_trees: BTreeSet<ObjectId> = whole.objects.iter().map(|o| o.id).collect();
        for object in &rebuilt.objects {
            assert!(object.verify());
            assert!(whole_trees.contains(&object.id), "{edits:?}");
            assert!(!base_trees.contains(&object.id), "{edits:?}");
        }
        // Every tree of the result that the base lacks is among the new objects.
        let new: BTreeSet<ObjectId> = rebuilt.objects.iter().map(|o| o.id).collect();
        for object in &whole.objects {
            if object.kind == ObjectKind::Tree && !base_trees.contains(&object.id) {
                assert!(new.contains(&object.id), "{edits:?}: a new tree is missing");
            }
        }
        assert_eq!(index.root(), Some(build_tree(base).tree));
    }

    fn base() -> Vec<SourceFile> {
        let mut files = vec![
            file("README", "r"),
            file("a/b/c.txt", "c"),
            file("a/b/d.txt", "d"),
            file("a/e.txt", "e"),
            file("a-b", "dash sorts before a/ in Git's order"),
            file("x/y/z/deep.txt", "deep"),
            SourceFile::new("run".into(), Mode::Executable, b"#!/bin/sh\n".to_vec()),
            SourceFile::new("link".into(), Mode::Symlink, b"a/e.txt".to_vec()),
        ];
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    #[test]
    fn edits_rebuild_the_tree_the_whole_build_gives() {
        let base = base();
        check(&base, &[("a/b/c.txt", Some("changed"))]);
        check(&base, &[("README", Some("top"))]);
        check(&base, &[("new/dir/file", Some("created"))]);
        check(&base, &[("a/b/c.txt", None)]);
        // The last files of a directory deleted: the directory and its empty parents go.
        check(&base, &[("x/y/z/deep.txt", None)]);
        check(&base, &[("a/b/c.txt", None), ("a/b/d.txt", None)]);
        // A file replaced by a directory of the same name, and the other way round.
        check(
            &base,
            &[("README", None), ("README/inside", Some("now a dir"))],
        );
        check(
            &base,
            &[("x/y/z/deep.txt", None), ("x", Some("now a file"))],
        );
        // Many at once, across levels; and every file deleted.
        check(
            &base,
            &[
                ("a/b/c.txt", Some("1")),
                ("a/e.txt", None),
                ("a/f/g.txt", Some("2")),
                ("x/y/z/deep.txt", Some("3")),
                ("zz", Some("4")),
            ],
        );
        let everything: Vec<(&str, Option<&str>)> =
            base.iter().map(|file| (file.path.as_str(), None)).collect();
        check(&base, &everything);
        // Content equal to a file elsewhere, and a tree equal to one of the base.
        check(&base, &[("b/c.txt", Some("c")), ("b/d.txt", Some("d"))]);
    }

    #[test]
    fn untouched_subtrees_keep_their_ids() {
        let base = base();
        let index = index_of(&base);
        let changed = file("a/b/c.txt", "changed");
        let rebuilt = rebuild(
            &index,
            &[(
                changed.path.clone(),
                Some((EntryMode::of_leaf(changed.mode), changed.blob)),
            )],
        );
        // a/b, a and the root: three new trees, nothing for x/ or its levels.
        assert_eq!(rebuilt.objects.len(), 3);
    }
}
