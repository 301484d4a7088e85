//! Tree records: the per-directory digests ([`tree_digest`], `sf-tree/1`) of a stored tree,
//! kept in the owned repository beside it, so that a seal finds the digests of an unchanged
//! subtree without reading its bytes.
//!
//! A record is keyed by the Git tree it describes and written once: `refs/sf/trees/<tree id>`
//! (create-only) names a record commit (`sf-tree-record/1`, sf's identity, no parent, its
//! message naming the tree) whose tree is the record's *shadow* of the source tree: for each
//! directory, a tree holding `n`, the directory's node (a blob, `sf-tree-node/1`), and `x` +
//! the name of each subdirectory, that subdirectory's shadow. A change therefore writes the
//! nodes and shadows of the directories above it, and shares every other one with its base,
//! exactly as Git's own trees do.
//!
//! A node lists, for each entry of the directory, what sf knew when it wrote the record from
//! verified bytes: the entry's Git id, its kind and, for a file, the SHA-256 and size of its
//! bytes, for a link its target, for a subdirectory its digest and totals. When a node is read
//! it is bound to the tree it describes: it must name that tree, and list exactly its entries
//! (names, kinds and Git ids; a link's Git id is checked against the target it records). What
//! a node adds beyond Git's own ids (a file's SHA-256 for a blob id, a subtree's digest for a
//! tree id) is trusted as sf wrote it (see docs/tree-identity.md, "Trust").

use std::collections::BTreeMap;

use crate::canonical::Digest;
use crate::contracts::EncodedObject;
use crate::contracts::tree_digest::{self, Directory, DirectoryDigest, Node, Totals};
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity::IDENT;
use super::source::SourceFile;

/// The prefix of every tree record's ref.
pub const TREE_RECORD_REF_PREFIX: &str = "refs/sf/trees/";
/// The first line of a record commit's message.
pub const TREE_RECORD_PROTOCOL: &str = "sf-tree-record/1";
/// The first line of a node.
pub const TREE_NODE_PROTOCOL: &str = "sf-tree-node/1";
/// The name of a directory's node in its shadow tree.
const NODE_NAME: &str = "n";
/// What a subdirectory's shadow is named by in its parent's shadow: this, then its name.
const CHILD_PREFIX: char = 'x';

/// The ref that publishes the record of `tree`.
pub fn tree_record_ref(tree: &ObjectId) -> crate::contracts::RefName {
    // 14 + 40 bytes of lowercase hex: always a valid name.
    crate::contracts::RefName::parse(&format!("{TREE_RECORD_REF_PREFIX}{tree}"))
        .expect("tree record ref names are valid")
}

/// The message of the record commit of `tree`.
pub fn tree_record_message(tree: &ObjectId) -> String {
    format!("{TREE_RECORD_PROTOCOL}\n\ntree: {tree}\n")
}

/// One directory as a record holds it: the Git tree it describes, its entries' digests (the
/// `sf-tree/1` directory) and their Git ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryRecord {
    /// The Git tree of the directory.
    pub tree: ObjectId,
    /// The entries with their digests.
    pub directory: Directory,
    /// Each entry's Git id (a blob for a file or a link, a tree for a subdirectory), by name.
    pub ids: BTreeMap<String, ObjectId>,
}

impl DirectoryRecord {
    /// Joins a Git tree's entries and the digests of the same entries, checking that they
    /// name the same entries of the same kinds (and that each link's blob is its target).
    pub fn join(
        tree: ObjectId,
        entries: &[TreeEntry],
        directory: Directory,
    ) -> Result<Self, String> {
        if entries.len() != directory.len() {
            return Err(format!(
                "tree {tree} holds {} entries, its record {}",
                entries.len(),
                directory.len()
            ));
        }
        let mut ids = BTreeMap::new();
        for entry in entries {
            let node = directory.get(&entry.name).ok_or_else(|| {
                format!("tree {tree} holds {}, which its record lacks", entry.name)
            })?;
            let kind_matches = match (entry.mode, node) {
                (EntryMode::File, Node::File { executable, .. }) => !executable,
                (EntryMode::Executable, Node::File { executable, .. }) => *executable,
                (EntryMode::Symlink, Node::Symlink { target }) => {
                    git_object::object_id(ObjectKind::Blob, target.as_bytes()) == entry.id
                }
                (EntryMode::Tree, Node::Directory { .. }) => true,
                _ => false,
            };
            if !kind_matches {
                return Err(format!(
                    "tree {tree}: the record's {} is not the tree's entry of that name",
                    entry.name
                ));
            }
            ids.insert(entry.name.clone(), entry.id);
        }
        Ok(Self {
            tree,
            directory,
            ids,
        })
    }

    /// The Git entries the record describes.
    pub fn entries(&self) -> Vec<TreeEntry> {
        self.directory
            .entries()
            .map(|(name, node)| TreeEntry {
                mode: match node {
                    Node::File {
                        executable: true, ..
                    } => EntryMode::Executable,
                    Node::File { .. } => EntryMode::File,
                    Node::Symlink { .. } => EntryMode::Symlink,
                    Node::Directory { .. } => EntryMode::Tree,
                },
                name: name.to_owned(),
                id: self.ids[name],
            })
            .collect()
    }

    /// The node's bytes (`sf-tree-node/1`): the protocol line, `tree <id>`, then one line
    /// per entry in name order: `file|exec <blob> <sha256 hex> <size> <name>`, `link <blob>
    /// <name>\t<target>`, `dir <tree> <digest hex> <size> <leaves> <bytes> <links> <name>`.
    /// Names and targets hold no control character (the tree rules), so no line can hold a
    /// second one.
    pub fn encode(&self) -> Vec<u8> {
        let mut text = format!("{TREE_NODE_PROTOCOL}\ntree {}\n", self.tree);
        for (name, node) in self.directory.entries() {
            let id = self.ids[name];
            match node {
                Node::File {
                    executable,
                    digest,
                    size,
                } => {
                    let kind = if *executable { "exec" } else { "file" };
                    text.push_str(&format!("{kind} {id} {} {size} {name}\n", digest.hex()));
                }
                Node::Symlink { target } => text.push_str(&format!("link {id} {name}\t{target}\n")),
                Node::Directory { digest, totals } => text.push_str(&format!(
                    "dir {id} {} {} {} {} {} {name}\n",
                    digest.hash.hex(),
                    digest.size,
                    totals.leaves,
                    totals.bytes,
                    totals.links
                )),
            }
        }
        text.into_bytes()
    }

    /// Reads a node's bytes strictly: they must be exactly what [`Self::encode`] writes for
    /// what they say.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "a node is UTF-8 text".to_owned())?;
        let mut lines = text.split_terminator('\n');
        if lines.next() != Some(TREE_NODE_PROTOCOL) {
            return Err(format!("a node starts with {TREE_NODE_PROTOCOL}"));
        }
        let tree = lines
            .next()
            .and_then(|line| line.strip_prefix("tree "))
            .and_then(ObjectId::parse_hex)
            .ok_or("a node names its tree on its second line")?;
        let mut directory = Directory::new();
        let mut ids = BTreeMap::new();
        for line in lines {
            let (name, id, node) =
                decode_entry(line).ok_or_else(|| format!("bad entry {line:?}"))?;
            if name.is_empty() || name.contains(['/', '\0', '\t']) {
                return Err(format!("bad name {name:?}"));
            }
            ids.insert(name.to_owned(), id);
            if directory.insert(name, node).is_some() {
                return Err(format!("{name} is listed twice"));
            }
        }
        let record = Self {
            tree,
            directory,
            ids,
        };
        if record.encode() != bytes {
            return Err("the node is not in its canonical form".into());
        }
        Ok(record)
    }
}

fn decode_entry(line: &str) -> Option<(&str, ObjectId, Node)> {
    let (kind, rest) = line.split_once(' ')?;
    let (id, rest) = rest.split_once(' ')?;
    let id = ObjectId::parse_hex(id)?;
    let hex_digest = |hex: &str| Digest::parse(&format!("sha256:{hex}"));
    let number = |text: &str| {
        text.parse::<u64>()
            .ok()
            .filter(|value| value.to_string() == text)
    };
    match kind {
        "file" | "exec" => {
            let (digest, rest) = rest.split_once(' ')?;
            let (size, name) = rest.split_once(' ')?;
            Some((
                name,
                id,
                Node::File {
                    executable: kind == "exec",
                    digest: hex_digest(digest)?,
                    size: number(size)?,
                },
            ))
        }
        "link" => {
            let (name, target) = rest.split_once('\t')?;
            Some((
                name,
                id,
                Node::Symlink {
                    target: target.to_owned(),
                },
            ))
        }
        "dir" => {
            let mut fields = rest.splitn(6, ' ');
            let hash = hex_digest(fields.next()?)?;
            let size = number(fields.next()?)?;
            let leaves = number(fields.next()?)?;
            let bytes = number(fields.next()?)?;
            let links = number(fields.next()?)?;
            let name = fields.next()?;
            Some((
                name,
                id,
                Node::Directory {
                    digest: DirectoryDigest { hash, size },
                    totals: Totals {
                        leaves,
                        bytes,
                        links,
                    },
                },
            ))
        }
        _ => None,
    }
}

/// The leaf a source file is in a directory's digest.
pub fn leaf_node(file: &SourceFile) -> Node {
    match file.mode {
        crate::contracts::tree_path::EntryMode::Symlink => Node::Symlink {
            target: String::from_utf8_lossy(&file.content).into_owned(),
        },
        mode => Node::File {
            executable: mode == crate::contracts::tree_path::EntryMode::Executable,
            digest: file.sha256.clone(),
            size: file.bytes,
        },
    }
}

/// The `sf-tree/1` digest of the tree of `files` (checked, any order).
pub fn tree_digest_of(files: &[SourceFile]) -> Result<Digest, String> {
    tree_digest::build(
        files
            .iter()
            .map(|file| (file.path.as_str(), leaf_node(file))),
    )
    .map(|digested| digested.root.hash)
    .map_err(|error| error.to_string())
}

/// Every directory of the tree of `files` (checked, sorted by path) as a record, by path
/// (`""` is the root). Their Git trees are the ones [`super::source::build_tree`] builds.
pub fn whole(files: &[SourceFile]) -> Result<BTreeMap<String, DirectoryRecord>, String> {
    let digested = tree_digest::build(
        files
            .iter()
            .map(|file| (file.path.as_str(), leaf_node(file))),
    )
    .map_err(|error| error.to_string())?;
    let mut blobs: BTreeMap<&str, ObjectId> = BTreeMap::new();
    for file in files {
        blobs.insert(file.path.as_str(), file.blob);
    }
    // Deepest first, so that each directory's subtrees have their Git ids.
    let mut order: Vec<&String> = digested.directories.keys().collect();
    order.sort_by_key(|dir| std::cmp::Reverse(depth(dir)));
    let mut records: BTreeMap<String, DirectoryRecord> = BTreeMap::new();
    for dir in order {
        let directory = digested.directories[dir].clone();
        let mut entries = Vec::with_capacity(directory.len());
        for (name, node) in directory.entries() {
            let path = join(dir, name);
            let (mode, id) = match node {
                Node::Directory { .. } => (EntryMode::Tree, records[&path].tree),
                Node::Symlink { .. } => (EntryMode::Symlink, blobs[path.as_str()]),
                Node::File { executable, .. } => (
                    if *executable {
                        EntryMode::Executable
                    } else {
                        EntryMode::File
                    },
                    blobs[path.as_str()],
                ),
            };
            entries.push(TreeEntry {
                mode,
                name: name.to_owned(),
                id,
            });
        }
        let tree = git_object::object_id(ObjectKind::Tree, &git_object::encode_tree(&entries));
        let record = DirectoryRecord::join(tree, &entries, directory)?;
        records.insert(dir.clone(), record);
    }
    Ok(records)
}

/// `dir/name`, or `name` at the root.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

fn depth(dir: &str) -> usize {
    if dir.is_empty() {
        0
    } else {
        dir.split('/').count()
    }
}

/// A directory's shadow as read: its node blob and its subdirectories' shadows, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shadow {
    /// The node blob.
    pub node: ObjectId,
    /// Each subdirectory's shadow tree, by the subdirectory's name.
    pub children: BTreeMap<String, ObjectId>,
}

impl Shadow {
    /// Reads a shadow tree's entries strictly: `n` a blob, every other entry `x<name>` a tree.
    pub fn decode(body: &[u8]) -> Result<Self, String> {
        let entries = git_object::decode_tree(body).ok_or("a shadow is a Git tree")?;
        let mut children = BTreeMap::new();
        let mut node = None;
        for entry in entries {
            match (entry.mode, entry.name.as_str()) {
                (EntryMode::File, NODE_NAME) => node = Some(entry.id),
                (EntryMode::Tree, name) if name.starts_with(CHILD_PREFIX) && name.len() > 1 => {
                    children.insert(name[1..].to_owned(), entry.id);
                }
                _ => return Err(format!("a shadow holds no entry {:?}", entry.name)),
            }
        }
        Ok(Self {
            node: node.ok_or("a shadow holds its node")?,
            children,
        })
    }

    fn encode(&self) -> EncodedObject {
        let mut entries = vec![TreeEntry {
            mode: EntryMode::File,
            name: NODE_NAME.into(),
            id: self.node,
        }];
        for (name, id) in &self.children {
            entries.push(TreeEntry {
                mode: EntryMode::Tree,
                name: format!("{CHILD_PREFIX}{name}"),
                id: *id,
            });
        }
        EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&entries))
    }
}

/// A record's objects as [`record_objects`] makes them.
#[derive(Debug)]
pub struct RecordObjects {
    /// The record commit.
    pub commit: ObjectId,
    /// Every object, nodes and shadows deepest first, the commit last; each once.
    pub objects: Vec<EncodedObject>,
    /// The shadow of each directory written, by path.
    pub shadows: BTreeMap<String, Shadow>,
}

/// The objects of a record: `records` are the directories written anew (each directory on
/// a changed path, or every directory of a whole tree), `kept` the shadows of their base's
/// directories (whose untouched subdirectories keep their shadows).
pub fn record_objects(
    records: &BTreeMap<String, DirectoryRecord>,
    kept: &BTreeMap<String, Shadow>,
) -> Result<RecordObjects, String> {
    let root = records.get("").ok_or("a record holds its root directory")?;
    let mut order: Vec<&String> = records.keys().collect();
    order.sort_by_key(|dir| std::cmp::Reverse(depth(dir)));
    let mut shadows: BTreeMap<&str, ObjectId> = BTreeMap::new();
    let mut written: BTreeMap<String, Shadow> = BTreeMap::new();
    let mut objects = Vec::new();
    for dir in order {
        let record = &records[dir];
        let node = EncodedObject::new(ObjectKind::Blob, record.encode());
        let mut shadow = Shadow {
            node: node.id,
            children: BTreeMap::new(),
        };
        objects.push(node);
        for (name, node) in record.directory.entries() {
            if !matches!(node, Node::Directory { .. }) {
                continue;
            }
            let path = join(dir, name);
            let child = match shadows.get(path.as_str()) {
                Some(id) => *id,
                None => *kept
                    .get(dir.as_str())
                    .and_then(|shadow| shadow.children.get(name))
                    .ok_or_else(|| format!("no shadow is known for directory {path}"))?,
            };
            shadow.children.insert(name.to_owned(), child);
        }
        let encoded = shadow.encode();
        shadows.insert(dir.as_str(), encoded.id);
        objects.push(encoded);
        written.insert(dir.clone(), shadow);
    }
    let commit = EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit::by(
            shadows[""],
            Vec::new(),
            IDENT,
            tree_record_message(&root.tree),
        )),
    );
    let id = commit.id;
    objects.push(commit);
    // Two directories alike share their node and shadow: each object once.
    let mut seen = std::collections::HashSet::new();
    objects.retain(|object| seen.insert(object.id));
    Ok(RecordObjects {
        commit: id,
        objects,
        shadows: written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::tree_path::EntryMode as Mode;
    use crate::source::{build_tree, tree_id};

    fn files() -> Vec<SourceFile> {
        let mut files = vec![
            SourceFile::text("README", "r"),
            SourceFile::text("a/b/c.txt", "c"),
            SourceFile::text("a/e.txt", "e"),
            SourceFile::new("run".into(), Mode::Executable, b"#!/bin/sh\n".to_vec()),
            SourceFile::new("link".into(), Mode::Symlink, b"a/e.txt".to_vec()),
            SourceFile::text("x y/name with space", "s"),
        ];
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    #[test]
    fn a_whole_record_describes_the_trees_git_builds() {
        let files = files();
        let records = whole(&files).unwrap();
        assert_eq!(records[""].tree, tree_id(&files));
        let built = build_tree(&files);
        for record in records.values() {
            let tree = built
                .objects
                .iter()
                .find(|object| object.id == record.tree)
                .expect("every record names a tree Git builds");
            assert_eq!(
                git_object::encode_tree(&record.entries()),
                tree.body,
                "{}",
                record.tree
            );
            assert_eq!(DirectoryRecord::decode(&record.encode()).unwrap(), *record);
        }
        let digest = tree_digest::build(files.iter().map(|f| (f.path.as_str(), leaf_node(f))))
            .unwrap()
            .root;
        assert_eq!(records[""].directory.digest(), digest);
    }

    /// The node's bytes, written out by hand from docs/formats.md.
    #[test]
    fn a_node_is_written_as_the_format_says() {
        let files = vec![
            SourceFile::text("d/x", "x"),
            SourceFile::new("l".into(), Mode::Symlink, b"d/x".to_vec()),
            SourceFile::new("run".into(), Mode::Executable, b"#!".to_vec()),
            SourceFile::text("z z", ""),
        ];
        let records = whole(&files).unwrap();
        let root = &records[""];
        let d = &records["d"];
        let digest = |bytes: &[u8]| Digest::of(bytes).hex();
        let blob = |bytes: &[u8]| git_object::object_id(ObjectKind::Blob, bytes);
        let d_digest = d.directory.digest();
        let expected = format!(
            "sf-tree-node/1\ntree {}\ndir {} {} {} 1 1 0 d\nlink {} l\td/x\nexec {} {} 2 run\nfile {} {} 0 z z\n",
            root.tree,
            d.tree,
            d_digest.hash.hex(),
            d_digest.size,
            blob(b"d/x"),
            blob(b"#!"),
            digest(b"#!"),
            blob(b""),
            digest(b""),
        );
        assert_eq!(String::from_utf8(root.encode()).unwrap(), expected);
        assert_eq!(
            tree_record_message(&root.tree),
            format!("sf-tree-record/1\n\ntree: {}\n", root.tree)
        );
    }

    #[test]
    fn a_node_is_bound_to_its_tree() {
        let records = whole(&files()).unwrap();
        let root = &records[""];
        let entries = root.entries();
        // Another id for an entry, a missing entry, or a link whose blob is not its target.
        let mut other = entries.clone();
        other[0].id = ObjectId::from_bytes([7; 20]);
        assert_eq!(
            DirectoryRecord::join(root.tree, &other, root.directory.clone())
                .map(|record| record.ids == root.ids),
            Ok(false)
        );
        assert!(DirectoryRecord::join(root.tree, &entries[1..], root.directory.clone()).is_err());
        let mut relinked = entries.clone();
        let link = relinked.iter_mut().find(|e| e.name == "link").unwrap();
        link.id = git_object::object_id(ObjectKind::Blob, b"elsewhere");
        assert!(DirectoryRecord::join(root.tree, &relinked, root.directory.clone()).is_err());
        let mut moded = entries.clone();
        let run = moded.iter_mut().find(|e| e.name == "run").unwrap();
        run.mode = EntryMode::File;
        assert!(DirectoryRecord::join(root.tree, &moded, root.directory.clone()).is_err());
    }

    #[test]
    fn a_node_reads_back_only_in_its_canonical_form() {
        let records = whole(&files()).unwrap();
        let bytes = records[""].encode();
        let text = String::from_utf8(bytes.clone()).unwrap();
        for bad in [
            text.replace("sf-tree-node/1", "sf-tree-node/2"),
            text.replacen(" 1 ", " 01 ", 1),
            format!(
                "{text}file {} {} 1 README\n",
                ObjectId::ZERO,
                "0".repeat(64)
            ),
            text.replace('\n', "\r\n"),
        ] {
            assert!(DirectoryRecord::decode(bad.as_bytes()).is_err(), "{bad}");
        }
        assert!(DirectoryRecord::decode(&bytes).is_ok());
    }

    #[test]
    fn record_objects_share_untouched_shadows() {
        let records = whole(&files()).unwrap();
        let RecordObjects {
            commit, objects, ..
        } = record_objects(&records, &BTreeMap::new()).unwrap();
        assert_eq!(objects.last().unwrap().id, commit);
        assert!(objects.iter().all(EncodedObject::verify));
        // The root's shadow, read back, names a child for every subdirectory.
        let root_shadow = objects
            .iter()
            .filter(|object| object.kind == ObjectKind::Tree)
            .map(|object| Shadow::decode(&object.body).unwrap())
            .find(|shadow| shadow.children.len() == 2)
            .unwrap();
        assert!(root_shadow.children.contains_key("a"));
        assert!(root_shadow.children.contains_key("x y"));
        // Rewriting the root alone keeps the children's shadows.
        let mut only_root = BTreeMap::new();
        only_root.insert(String::new(), records[""].clone());
        let kept: BTreeMap<String, Shadow> = [(String::new(), root_shadow.clone())].into();
        let again = record_objects(&only_root, &kept).unwrap().objects;
        assert_eq!(again.len(), 3, "the root's node, its shadow and the commit");
        assert!(record_objects(&only_root, &BTreeMap::new()).is_err());
    }
}
