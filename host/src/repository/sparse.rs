//! Reading a stored tree in proportion to a change: the Git trees and the tree record's
//! directories on the changed paths ([`tree_record`](super::tree_record)), each bound to the
//! other, and the leaves at the changed paths, each re-hashed. A tree without a record (one
//! written by an sf older than records) is read whole once and its record derived from its
//! bytes, to be written with the operation that needed it.

use std::collections::{BTreeMap, BTreeSet};

use crate::contracts::tree_digest::{Directory, Node};
use crate::contracts::{EncodedObject, RefValue};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity::{IDENT, MAX_COMMIT_BYTES, MAX_TREE_LEVEL_BYTES};
use super::source::{self, SourceFile};
use super::tree_record::{
    self, DirectoryRecord, Shadow, record_objects, tree_record_message, tree_record_ref,
};
use super::tree_surgery::TreeIndex;
use super::{Repository, RepositoryError};

/// Where a sparse tree's record came from.
#[derive(Debug)]
pub(crate) enum RecordSource {
    /// The stored record.
    Stored,
    /// Derived here from the tree's bytes (read whole): its record commit and objects, to be
    /// written (and its ref created) with the operation that needed it.
    Derived {
        commit: ObjectId,
        objects: Vec<EncodedObject>,
    },
    /// Not read: the Git trees alone ([`Repository::git_sparse`]).
    Unread,
}

/// A stored tree as far as a change needs it.
#[derive(Debug)]
pub(crate) struct SparseTree {
    /// The root tree.
    pub tree: ObjectId,
    /// The Git entries of every directory read (each touched directory the tree holds).
    pub index: TreeIndex,
    /// The record of each directory read, bound to its Git tree.
    pub records: BTreeMap<String, DirectoryRecord>,
    /// The record's shadow of each directory read.
    pub shadows: BTreeMap<String, Shadow>,
    /// Where the record came from.
    pub record: RecordSource,
}

impl SparseTree {
    /// The digest directories of the directories read, by path, as
    /// [`tree_digest::apply`](crate::contracts::tree_digest::apply) takes them.
    pub(crate) fn directories(&self) -> BTreeMap<String, Directory> {
        self.records
            .iter()
            .map(|(path, record)| (path.clone(), record.directory.clone()))
            .collect()
    }

    /// The node at `path` (a leaf or a directory), when its directory was read.
    pub(crate) fn node(&self, path: &str) -> Option<&Node> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        self.records
            .get(dir)
            .and_then(|record| record.directory.get(name))
    }
}

impl Repository {
    /// Reads `tree` (a stored tree: a factory commit's) along the directories `touched`
    /// names ([`tree_digest::touched`](crate::contracts::tree_digest::touched)): from its
    /// record, or, for a tree without one, whole. `what` names the tree in errors.
    pub(crate) fn sparse_tree(
        &self,
        tree: ObjectId,
        touched: &BTreeSet<String>,
        what: &str,
    ) -> Result<SparseTree, RepositoryError> {
        match self.stored_sparse(tree, touched, what)? {
            Some(sparse) => Ok(sparse),
            None => self.derived_sparse(tree, what),
        }
    }

    fn stored_sparse(
        &self,
        tree: ObjectId,
        touched: &BTreeSet<String>,
        what: &str,
    ) -> Result<Option<SparseTree>, RepositoryError> {
        let name = tree_record_ref(&tree);
        let corrupt =
            |why: String| RepositoryError::corrupt(format!("tree record {name} ({what}): {why}"));
        let commit = match self.store.read_ref(&name, self.deadline())? {
            None => return Ok(None),
            Some(RefValue::Direct(commit)) => commit,
            Some(RefValue::Symbolic(to)) => return Err(corrupt(format!("a symbolic ref to {to}"))),
        };
        let body = source::read_verified(
            self.store.as_ref(),
            &[commit],
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            &format!("tree record {name}"),
            self.deadline(),
        )?
        .remove(0);
        let shadow_root = git_object::decode_commit(&body)
            .filter(|decoded| {
                decoded.is_by(IDENT)
                    && decoded.parents.is_empty()
                    && decoded.message == tree_record_message(&tree)
            })
            .map(|decoded| decoded.tree)
            .ok_or_else(|| corrupt(format!("commit {commit} is not a record of this tree")))?;
        let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for dir in touched.iter().filter(|dir| !dir.is_empty()) {
            let (parent, child) = dir.rsplit_once('/').unwrap_or(("", dir));
            children.entry(parent).or_default().push(child);
        }
        let mut sparse = SparseTree {
            tree,
            index: TreeIndex::default(),
            records: BTreeMap::new(),
            shadows: BTreeMap::new(),
            record: RecordSource::Stored,
        };
        let mut level: Vec<(String, ObjectId, ObjectId)> = vec![(String::new(), tree, shadow_root)];
        while !level.is_empty() {
            // This level's Git trees and shadows in one read, then their nodes in another.
            let ids: Vec<ObjectId> = level
                .iter()
                .flat_map(|(_, source, shadow)| [*source, *shadow])
                .collect();
            let bodies = source::read_verified(
                self.store.as_ref(),
                &ids,
                ObjectKind::Tree,
                MAX_TREE_LEVEL_BYTES.saturating_mul(2),
                what,
                self.deadline(),
            )?;
            let mut read = Vec::with_capacity(level.len());
            for ((path, source_id, shadow_id), pair) in level.iter().zip(bodies.chunks(2)) {
                let entries = git_object::decode_tree(&pair[0]).ok_or_else(|| {
                    RepositoryError::corrupt(format!(
                        "{what}: tree {source_id} is not in Git's canonical form"
                    ))
                })?;
                let shadow = Shadow::decode(&pair[1])
                    .map_err(|why| corrupt(format!("shadow {shadow_id} of {path:?}: {why}")))?;
                read.push((path.clone(), *source_id, entries, shadow));
            }
            let nodes: Vec<ObjectId> = read.iter().map(|(_, _, _, shadow)| shadow.node).collect();
            let node_bodies = source::read_verified(
                self.store.as_ref(),
                &nodes,
                ObjectKind::Blob,
                MAX_TREE_LEVEL_BYTES.saturating_mul(4),
                &format!("tree record {name}"),
                self.deadline(),
            )?;
            let mut next = Vec::new();
            for ((path, source_id, entries, shadow), node) in read.into_iter().zip(node_bodies) {
                let record = DirectoryRecord::decode(&node)
                    .map_err(|why| corrupt(format!("the node of {path:?}: {why}")))?;
                let bound = DirectoryRecord::join(source_id, &entries, record.directory.clone())
                    .map_err(|why| corrupt(format!("the node of {path:?}: {why}")))?;
                if record.tree != source_id || bound.ids != record.ids {
                    return Err(corrupt(format!(
                        "the node of {path:?} does not describe tree {source_id}"
                    )));
                }
                for child in children.get(path.as_str()).into_iter().flatten() {
                    let Some(entry) = entries
                        .iter()
                        .find(|entry| entry.name == *child && entry.mode == EntryMode::Tree)
                    else {
                        continue;
                    };
                    let shadow_child = shadow.children.get(*child).ok_or_else(|| {
                        corrupt(format!(
                            "the shadow of {path:?} lacks its directory {child}"
                        ))
                    })?;
                    next.push((tree_record::join(&path, child), entry.id, *shadow_child));
                }
                sparse.index.insert(path.clone(), source_id, entries);
                sparse.records.insert(path.clone(), record);
                sparse.shadows.insert(path, shadow);
            }
            level = next;
        }
        Ok(Some(sparse))
    }

    /// `tree` along the directories `touched` names, from its Git trees alone (no record):
    /// what an export, which relies on nothing but the Candidate's own objects, reads of its
    /// base.
    pub(crate) fn git_sparse(
        &self,
        tree: ObjectId,
        touched: &BTreeSet<String>,
        what: &str,
    ) -> Result<SparseTree, RepositoryError> {
        let mut index = TreeIndex::default();
        self.walk_levels(
            tree,
            what,
            |child| touched.contains(child),
            |path, id, entries| index.insert(path.to_owned(), id, entries),
        )?;
        Ok(SparseTree {
            tree,
            index,
            records: BTreeMap::new(),
            shadows: BTreeMap::new(),
            record: RecordSource::Unread,
        })
    }

    /// Reads the stored tree `root` a level at a time (one read per level), every tree
    /// re-hashed and decoded, descending into the subdirectories whose path `descend` admits,
    /// and hands each directory's path, id and entries to `visit`.
    pub(crate) fn walk_levels(
        &self,
        root: ObjectId,
        what: &str,
        descend: impl Fn(&str) -> bool,
        mut visit: impl FnMut(&str, ObjectId, Vec<TreeEntry>),
    ) -> Result<(), RepositoryError> {
        let mut level = vec![(String::new(), root)];
        while !level.is_empty() {
            let ids: Vec<ObjectId> = level.iter().map(|(_, id)| *id).collect();
            let bodies = source::read_verified(
                self.store.as_ref(),
                &ids,
                ObjectKind::Tree,
                MAX_TREE_LEVEL_BYTES,
                what,
                self.deadline(),
            )?;
            let mut next = Vec::new();
            for ((path, id), body) in level.iter().zip(bodies) {
                let entries = git_object::decode_tree(&body).ok_or_else(|| {
                    RepositoryError::corrupt(format!(
                        "{what}: tree {id} is not in Git's canonical form"
                    ))
                })?;
                for entry in &entries {
                    let child = tree_record::join(path, &entry.name);
                    if entry.mode == EntryMode::Tree && descend(&child) {
                        next.push((child, entry.id));
                    }
                }
                visit(path, *id, entries);
            }
            level = next;
        }
        Ok(())
    }

    /// The sparse tree of a tree without a record: read whole (every object re-hashed and
    /// every rule checked, as any whole read is), its record derived from its bytes.
    fn derived_sparse(&self, tree: ObjectId, what: &str) -> Result<SparseTree, RepositoryError> {
        let (files, index) = source::read_tree_indexed(
            self.store.as_ref(),
            tree,
            &self.identity.settings(),
            what,
            self.deadline(),
        )?;
        derive_record(tree, &files, index, what)
    }

    /// The leaves at `paths` (those the sparse tree holds as files or links), each read and
    /// re-hashed, and checked against what the record says of it (when one was read).
    pub(crate) fn leaves_at<'a>(
        &self,
        sparse: &SparseTree,
        paths: impl IntoIterator<Item = &'a str>,
        what: &str,
    ) -> Result<BTreeMap<String, SourceFile>, RepositoryError> {
        let mut wanted = Vec::new();
        for path in paths {
            let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
            if let Some(entry) = sparse.index.entry(dir, name)
                && let Some(mode) = entry.mode.leaf()
            {
                wanted.push((path.to_owned(), mode, entry.id));
            }
        }
        if wanted.is_empty() {
            return Ok(BTreeMap::new());
        }
        let limits = self.identity.settings().limits();
        let budget = (limits.max_file_bytes as u64)
            .saturating_mul(wanted.len() as u64)
            .min(limits.max_source_bytes as u64);
        let ids: Vec<ObjectId> = wanted.iter().map(|(_, _, id)| *id).collect();
        let bodies = source::read_verified(
            self.store.as_ref(),
            &ids,
            ObjectKind::Blob,
            budget,
            what,
            self.deadline(),
        )?;
        let mut leaves = BTreeMap::new();
        for ((path, mode, _), body) in wanted.into_iter().zip(bodies) {
            let file = SourceFile::new(path.clone(), mode, body);
            let recorded = !matches!(sparse.record, RecordSource::Unread);
            if recorded && sparse.node(&path) != Some(&tree_record::leaf_node(&file)) {
                return Err(RepositoryError::corrupt(format!(
                    "the tree record of {what} does not describe {path} as its bytes are"
                )));
            }
            leaves.insert(path, file);
        }
        Ok(leaves)
    }
}

/// The sparse tree of a tree read whole (`files`, indexed by `index`), its record derived
/// from the bytes read.
pub(crate) fn derive_record(
    tree: ObjectId,
    files: &[SourceFile],
    index: TreeIndex,
    what: &str,
) -> Result<SparseTree, RepositoryError> {
    let records = tree_record::whole(files)
        .map_err(|why| RepositoryError::corrupt(format!("{what}: {why}")))?;
    if records.get("").map(|root| root.tree) != Some(tree) {
        return Err(RepositoryError::corrupt(format!(
            "{what}: its files do not build tree {tree}"
        )));
    }
    let objects = record_objects(&records, &BTreeMap::new())
        .map_err(|why| RepositoryError::corrupt(format!("{what}: {why}")))?;
    Ok(SparseTree {
        tree,
        index,
        records,
        shadows: objects.shadows,
        record: RecordSource::Derived {
            commit: objects.commit,
            objects: objects.objects,
        },
    })
}
