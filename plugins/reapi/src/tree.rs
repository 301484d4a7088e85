//! Snapshots as REAPI Merkle trees, and back.
//!
//! A snapshot's entries become a tree of `Directory` messages: a regular file a `FileNode`
//! (`is_executable` false), an executable a `FileNode` with `is_executable`, a symbolic link a
//! `SymlinkNode` with its target, each directory a `DirectoryNode` naming its own message's
//! digest; every list sorted by name, as REAPI requires, so that one snapshot always gives one
//! root digest. A snapshot has no empty directories, so the trees made here have none.
//!
//! Reading a tree back ([`Walk`]) is done on a worker from messages a cluster served: every
//! name is checked (one path segment, no NUL), a name twice in one directory, an empty
//! directory, a digest that is not SHA-256 and node properties are refused, the number of
//! directories and entries and the bytes they name are bounded before any file is fetched,
//! and the entries are then checked as a snapshot by the Executor, like any other.

use std::collections::{BTreeMap, HashMap};

use prost::Message as _;
use sf_contracts::snapshot::{MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SnapshotFile};
use sf_contracts::tree_path::EntryMode;

use crate::digest;
use crate::proto::execution::{Digest, Directory, DirectoryNode, FileNode, SymlinkNode};

/// Blobs by hash, each with its digest: what a tree or an Action needs in the CAS.
#[derive(Clone, Debug, Default)]
pub struct Blobs(BTreeMap<String, (Digest, Vec<u8>)>);

impl Blobs {
    /// Adds `bytes` (once, however often it is added) and returns its digest.
    pub fn add(&mut self, bytes: Vec<u8>) -> Digest {
        let digest = digest::of(&bytes);
        self.0
            .entry(digest.hash.clone())
            .or_insert_with(|| (digest.clone(), bytes));
        digest
    }

    /// Adds the encoding of `message` and returns its digest.
    pub fn add_message(&mut self, message: &impl prost::Message) -> Digest {
        self.add(message.encode_to_vec())
    }

    /// The digests of every blob.
    pub fn digests(&self) -> Vec<Digest> {
        self.0.values().map(|(digest, _)| digest.clone()).collect()
    }

    /// The blob of `digest`.
    pub fn get(&self, digest: &Digest) -> Option<&[u8]> {
        self.0
            .get(&digest.hash)
            .filter(|(known, _)| known == digest)
            .map(|(_, bytes)| bytes.as_slice())
    }

    /// How many blobs there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A snapshot's entries as nested directories, by name.
#[derive(Default)]
struct Node {
    files: BTreeMap<String, FileNode>,
    links: BTreeMap<String, SymlinkNode>,
    dirs: BTreeMap<String, Node>,
}

/// Adds the tree of `files` to `blobs` (every file and every directory message) and returns
/// the digest of its root directory. `Err` names an entry REAPI cannot carry: a link target
/// that is not UTF-8 (a `SymlinkNode`'s target is a string).
pub fn add_snapshot(files: &[SnapshotFile], blobs: &mut Blobs) -> Result<Digest, String> {
    let mut root = Node::default();
    for file in files {
        let mut segments: Vec<&str> = file.path.split('/').collect();
        let name = segments.pop().unwrap_or_default().to_owned();
        let mut node = &mut root;
        for segment in segments {
            node = node.dirs.entry(segment.to_owned()).or_default();
        }
        match file.mode {
            EntryMode::Regular | EntryMode::Executable => {
                let digest = blobs.add(file.content.clone());
                node.files.insert(
                    name.clone(),
                    FileNode {
                        name,
                        digest: Some(digest),
                        is_executable: file.mode == EntryMode::Executable,
                        node_properties: None,
                    },
                );
            }
            EntryMode::Symlink => {
                let target = String::from_utf8(file.content.clone()).map_err(|_| {
                    format!(
                        "the link {:?} has a target that is not UTF-8, which a REAPI tree \
                         cannot hold",
                        file.path
                    )
                })?;
                node.links.insert(
                    name.clone(),
                    SymlinkNode {
                        name,
                        target,
                        node_properties: None,
                    },
                );
            }
        }
    }
    Ok(add_node(root, blobs))
}

fn add_node(node: Node, blobs: &mut Blobs) -> Digest {
    let directories = node
        .dirs
        .into_iter()
        .map(|(name, child)| DirectoryNode {
            name,
            digest: Some(add_node(child, blobs)),
        })
        .collect();
    blobs.add_message(&Directory {
        files: node.files.into_values().collect(),
        directories,
        symlinks: node.links.into_values().collect(),
        node_properties: None,
    })
}

/// An entry of a tree read back: a file (by digest) or a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// A file's digest, and whether it is executable.
    File(Digest, bool),
    /// A link's target.
    Symlink(String),
}

/// The most directory messages one run's trees may hold: a snapshot of
/// [`MAX_SNAPSHOT_FILES`] entries needs no more directories than entries, and a run has three
/// snapshots and a few fixed directories.
pub const MAX_DIRECTORIES: usize = 3 * MAX_SNAPSHOT_FILES + 8;

/// A tree read back from directory messages, one round of fetches at a time: the caller asks
/// [`Walk::missing`] which directory messages it still needs, fetches them, hands each to
/// [`Walk::add`], and once none is missing takes the entries with [`Walk::entries`].
#[derive(Debug)]
pub struct Walk {
    root: Digest,
    directories: HashMap<String, Directory>,
    wanted: Vec<Digest>,
}

impl Walk {
    /// A walk of the tree whose root directory is `root`.
    pub fn new(root: Digest) -> Self {
        Self {
            wanted: vec![root.clone()],
            root,
            directories: HashMap::new(),
        }
    }

    /// The directory messages to fetch next (none once the tree is whole).
    pub fn missing(&self) -> &[Digest] {
        &self.wanted
    }

    /// Takes the message `bytes` of the wanted directory `digest` (its hash already checked
    /// by the caller); `Err` names what is wrong with it.
    pub fn add(&mut self, digest: &Digest, bytes: &[u8]) -> Result<(), String> {
        let directory = Directory::decode(bytes)
            .map_err(|error| format!("directory {}: {error}", digest::text(digest)))?;
        check_directory(&directory)
            .map_err(|rule| format!("directory {}: {rule}", digest::text(digest)))?;
        self.directories.insert(digest.hash.clone(), directory);
        if self.directories.len() > MAX_DIRECTORIES {
            return Err(format!(
                "the tree holds more than {MAX_DIRECTORIES} directories"
            ));
        }
        self.wanted.retain(|wanted| wanted.hash != digest.hash);
        Ok(())
    }

    /// Marks the end of a round: every child directory not yet fetched is wanted next.
    pub fn next_round(&mut self) {
        let mut wanted: BTreeMap<String, Digest> = BTreeMap::new();
        for directory in self.directories.values() {
            for child in &directory.directories {
                if let Some(digest) = &child.digest
                    && !self.directories.contains_key(&digest.hash)
                {
                    wanted.insert(digest.hash.clone(), digest.clone());
                }
            }
        }
        self.wanted = wanted.into_values().collect();
    }

    /// The root directory message.
    pub fn root(&self) -> Option<&Directory> {
        self.directories.get(&self.root.hash)
    }

    /// The directory message of `digest`, if fetched.
    pub fn directory(&self, digest: &Digest) -> Option<&Directory> {
        self.directories.get(&digest.hash)
    }

    /// Every entry below `directory`, by its path relative to it, once the tree is whole. At
    /// most [`MAX_SNAPSHOT_FILES`] entries naming at most [`MAX_SNAPSHOT_BYTES`] of content
    /// (links' targets included); an empty directory below `directory` is refused, since no
    /// snapshot has one.
    pub fn entries(&self, directory: &Digest) -> Result<Vec<(String, Leaf)>, String> {
        let mut entries = Vec::new();
        let mut bytes = 0u64;
        self.collect(directory, "", &mut entries, &mut bytes, 0)?;
        Ok(entries)
    }

    fn collect(
        &self,
        digest: &Digest,
        prefix: &str,
        entries: &mut Vec<(String, Leaf)>,
        bytes: &mut u64,
        depth: usize,
    ) -> Result<(), String> {
        // A path of 4096 bytes has at most 2048 segments.
        if depth > 2048 {
            return Err("the tree is deeper than any path".to_owned());
        }
        let directory = self
            .directories
            .get(&digest.hash)
            .ok_or_else(|| format!("directory {} was not fetched", digest::text(digest)))?;
        let empty = directory.files.is_empty()
            && directory.directories.is_empty()
            && directory.symlinks.is_empty();
        // The snapshot's own root may be empty (a run without a harness); a directory below
        // it never is.
        if empty && depth > 0 {
            return Err(format!(
                "the directory {prefix:?} is empty, which no snapshot holds"
            ));
        }
        let path = |name: &str| {
            if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            }
        };
        for file in &directory.files {
            let digest = file.digest.clone().unwrap_or_default();
            *bytes += digest::size(&digest);
            entries.push((path(&file.name), Leaf::File(digest, file.is_executable)));
        }
        for link in &directory.symlinks {
            *bytes += link.target.len() as u64;
            entries.push((path(&link.name), Leaf::Symlink(link.target.clone())));
        }
        if entries.len() > MAX_SNAPSHOT_FILES || *bytes > MAX_SNAPSHOT_BYTES {
            return Err(format!(
                "the tree holds more than a snapshot may ({MAX_SNAPSHOT_FILES} entries, \
                 {MAX_SNAPSHOT_BYTES} bytes)"
            ));
        }
        for child in &directory.directories {
            let digest = child.digest.clone().unwrap_or_default();
            self.collect(&digest, &path(&child.name), entries, bytes, depth + 1)?;
        }
        Ok(())
    }
}

/// The rules every directory message of a tree sf reads keeps.
fn check_directory(directory: &Directory) -> Result<(), String> {
    if directory.node_properties.is_some()
        || directory
            .files
            .iter()
            .any(|file| file.node_properties.is_some())
        || directory
            .symlinks
            .iter()
            .any(|link| link.node_properties.is_some())
    {
        return Err("it carries node properties, which sf never writes".to_owned());
    }
    let mut names = std::collections::BTreeSet::new();
    let digests = directory
        .files
        .iter()
        .map(|file| (&file.name, file.digest.as_ref()))
        .chain(
            directory
                .directories
                .iter()
                .map(|child| (&child.name, child.digest.as_ref())),
        );
    for (name, digest) in digests {
        if !digest.is_some_and(digest::is_valid) {
            return Err(format!("{name:?} has no SHA-256 digest"));
        }
    }
    for name in directory
        .files
        .iter()
        .map(|file| &file.name)
        .chain(directory.directories.iter().map(|child| &child.name))
        .chain(directory.symlinks.iter().map(|link| &link.name))
    {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(format!("{name:?} is not one path segment"));
        }
        if !names.insert(name) {
            return Err(format!("{name:?} is named twice"));
        }
    }
    Ok(())
}

/// The snapshot of `entries`, each file's bytes taken from `blobs` (fetched and checked
/// against their digests by the caller).
pub fn snapshot(entries: &[(String, Leaf)], blobs: &Blobs) -> Result<Vec<SnapshotFile>, String> {
    entries
        .iter()
        .map(|(path, leaf)| match leaf {
            Leaf::File(digest, executable) => {
                let content = blobs
                    .get(digest)
                    .ok_or_else(|| format!("the file {path:?} was not fetched"))?;
                let mode = if *executable {
                    EntryMode::Executable
                } else {
                    EntryMode::Regular
                };
                Ok(SnapshotFile::new(path.clone(), mode, content.to_vec()))
            }
            Leaf::Symlink(target) => Ok(SnapshotFile::symlink(
                path.clone(),
                target.as_bytes().to_vec(),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sf_contracts::snapshot::snapshot_digest;

    fn read_back(root: &Digest, blobs: &Blobs) -> Result<Vec<SnapshotFile>, String> {
        let mut walk = Walk::new(root.clone());
        while !walk.missing().is_empty() {
            for digest in walk.missing().to_vec() {
                let bytes = blobs.get(&digest).ok_or("missing blob")?.to_vec();
                walk.add(&digest, &bytes)?;
            }
            walk.next_round();
        }
        snapshot(&walk.entries(root)?, blobs)
    }

    #[test]
    fn a_snapshot_round_trips_with_its_modes() {
        let files = vec![
            SnapshotFile::regular("a.txt", b"a".to_vec()),
            SnapshotFile::executable("bin/run", b"#!/bin/sh\n".to_vec()),
            SnapshotFile::symlink("bin/link", b"run".to_vec()),
            SnapshotFile::regular("deep/er/still/file", b"a".to_vec()),
        ];
        let mut blobs = Blobs::default();
        let root = add_snapshot(&files, &mut blobs).unwrap();
        let back = read_back(&root, &blobs).unwrap();
        assert_eq!(
            snapshot_digest(&back).unwrap(),
            snapshot_digest(&files).unwrap()
        );
        let mut listed = files.clone();
        listed.reverse();
        let mut other = Blobs::default();
        assert_eq!(
            add_snapshot(&listed, &mut other).unwrap(),
            root,
            "order does not matter"
        );
        let mut moded = files.clone();
        moded[0].mode = EntryMode::Executable;
        assert_ne!(add_snapshot(&moded, &mut Blobs::default()).unwrap(), root);
    }

    #[test]
    fn hostile_trees_are_refused() {
        let file = |name: &str| FileNode {
            name: name.to_owned(),
            digest: Some(digest::of(b"x")),
            is_executable: false,
            node_properties: None,
        };
        let cases = [
            Directory {
                files: vec![file("a/b")],
                ..Directory::default()
            },
            Directory {
                files: vec![file("..")],
                ..Directory::default()
            },
            Directory {
                files: vec![file("a"), file("a")],
                ..Directory::default()
            },
            Directory {
                files: vec![FileNode {
                    digest: None,
                    ..file("a")
                }],
                ..Directory::default()
            },
        ];
        for directory in cases {
            let bytes = directory.encode_to_vec();
            let digest = digest::of(&bytes);
            assert!(
                Walk::new(digest.clone()).add(&digest, &bytes).is_err(),
                "{directory:?}"
            );
        }
        let mut blobs = Blobs::default();
        let empty = blobs.add_message(&Directory::default());
        assert_eq!(
            read_back(&empty, &blobs).unwrap(),
            vec![],
            "the empty snapshot"
        );
        let holding_empty = Directory {
            directories: vec![DirectoryNode {
                name: "dir".into(),
                digest: Some(empty),
            }],
            ..Directory::default()
        };
        let root = blobs.add_message(&holding_empty);
        assert!(
            read_back(&root, &blobs).is_err(),
            "an empty directory is no snapshot's"
        );
        let mut blobs = Blobs::default();
        let big = Directory {
            files: (0..=MAX_SNAPSHOT_FILES)
                .map(|n| file(&format!("f{n}")))
                .collect(),
            ..Directory::default()
        };
        let root = blobs.add_message(&big);
        let error = read_back(&root, &blobs).unwrap_err();
        assert!(error.contains("more than a snapshot may"), "{error}");
    }
}
