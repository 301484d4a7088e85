//! The identity of a tree, directory by directory (`sf-tree/1`): a SHA-256 Merkle digest in
//! which each directory's digest covers its entries' names, kinds, sizes and digests, and a
//! subdirectory's digest stands for everything below it. A change then costs the digests of
//! the directories above the changed paths, never a pass over the whole tree.
//!
//! The encoding is the Remote Execution API's (REAPI v2) `Directory` message, serialised
//! deterministically, so that a directory's digest here is exactly the digest a REAPI content
//! store gives it, and a tree named here can be handed to a remote executor as its input root
//! without being hashed again:
//!
//! ```text
//! Directory  { repeated FileNode files = 1; repeated DirectoryNode directories = 2;
//!              repeated SymlinkNode symlinks = 3; }
//! FileNode   { string name = 1; Digest digest = 2; bool is_executable = 4; }
//! DirectoryNode { string name = 1; Digest digest = 2; }
//! SymlinkNode   { string name = 1; string target = 2; }
//! Digest     { string hash = 1; int64 size_bytes = 2; }
//! ```
//!
//! Each of the three lists is sorted by name (UTF-8 bytes, that is code points), every field
//! is written in field-number order, and a field holding its default (an empty string, a zero
//! size, `is_executable` false) is left out, as protocol buffers' canonical form does. A file's
//! digest is the SHA-256 of its bytes with their length; a directory's is the SHA-256 of its
//! own encoding with the encoding's length. The hash is written as 64 lowercase hex digits.
//! No node properties are written (sf keeps no modification times or permissions beyond the
//! execute bit).
//!
//! Besides the digest each directory carries its [`Totals`] (how many files and links, how
//! many bytes, how many links lie below it): not part of the digest, they let a caller check a
//! tree's limits from the directories on the changed paths alone.
//!
//! Pure functions: [`build`] digests a whole tree from its leaves, [`apply`] updates the
//! directories of a base for a set of changed paths, touching only their ancestors, and the
//! two always agree (the tests hold them to it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::canonical::Digest;

/// The protocol string naming this encoding.
pub const TREE_DIGEST_PROTOCOL: &str = "sf-tree/1";

/// What lies below a directory: its files and links, their bytes (a link's target counted as
/// its bytes), and how many of them are links. Not part of any digest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Totals {
    /// Files (regular or executable) and symbolic links.
    pub leaves: u64,
    /// The bytes of every file and link target.
    pub bytes: u64,
    /// Symbolic links alone.
    pub links: u64,
}

impl Totals {
    /// These totals and `other` together (saturating: totals past 2^64 cannot be held by any
    /// tree within a repository's limits).
    pub fn plus(self, other: Self) -> Self {
        Self {
            leaves: self.leaves.saturating_add(other.leaves),
            bytes: self.bytes.saturating_add(other.bytes),
            links: self.links.saturating_add(other.links),
        }
    }
}

/// A directory's REAPI digest: the SHA-256 of its encoding and the encoding's length.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DirectoryDigest {
    /// The SHA-256 of the encoding.
    pub hash: Digest,
    /// The encoding's length in bytes.
    pub size: u64,
}

impl fmt::Display for DirectoryDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.hash, self.size)
    }
}

/// One entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// A regular file, or an executable one.
    File {
        /// Whether any execute bit is set (Git mode `100755`).
        executable: bool,
        /// The SHA-256 of the file's bytes.
        digest: Digest,
        /// The file's length in bytes.
        size: u64,
    },
    /// A symbolic link.
    Symlink {
        /// The link's target, as the link holds it.
        target: String,
    },
    /// A subdirectory.
    Directory {
        /// The subdirectory's own digest.
        digest: DirectoryDigest,
        /// What lies below it (not part of the digest).
        totals: Totals,
    },
}

impl Node {
    /// A regular or executable file of `bytes`.
    pub fn file(executable: bool, bytes: &[u8]) -> Self {
        Self::File {
            executable,
            digest: Digest::of(bytes),
            size: bytes.len() as u64,
        }
    }

    /// What the node counts for in its directory's totals.
    pub fn totals(&self) -> Totals {
        match self {
            Self::File { size, .. } => Totals {
                leaves: 1,
                bytes: *size,
                links: 0,
            },
            Self::Symlink { target } => Totals {
                leaves: 1,
                bytes: target.len() as u64,
                links: 1,
            },
            Self::Directory { totals, .. } => *totals,
        }
    }

    fn is_directory(&self) -> bool {
        matches!(self, Self::Directory { .. })
    }
}

/// One directory: its entries by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Directory {
    entries: BTreeMap<String, Node>,
}

impl Directory {
    /// An empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entries, sorted by name bytes.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.entries
            .iter()
            .map(|(name, node)| (name.as_str(), node))
    }

    /// The entry called `name`.
    pub fn get(&self, name: &str) -> Option<&Node> {
        self.entries.get(name)
    }

    /// Sets the entry called `name` (one segment of a path: the caller's paths are checked
    /// with the tree rules), returning the one it replaces.
    pub fn insert(&mut self, name: impl Into<String>, node: Node) -> Option<Node> {
        self.entries.insert(name.into(), node)
    }

    /// Removes the entry called `name`.
    pub fn remove(&mut self, name: &str) -> Option<Node> {
        self.entries.remove(name)
    }

    /// How many entries the directory holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the directory holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What lies below the directory.
    pub fn totals(&self) -> Totals {
        self.entries
            .values()
            .fold(Totals::default(), |sum, node| sum.plus(node.totals()))
    }

    /// The REAPI `Directory` message of the entries (module documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, node) in &self.entries {
            if let Node::File {
                executable,
                digest,
                size,
            } = node
            {
                message(&mut out, 1, |file| {
                    string(file, 1, name);
                    message(file, 2, |d| digest_fields(d, digest, *size));
                    if *executable {
                        varint_field(file, 4, 1);
                    }
                });
            }
        }
        for (name, node) in &self.entries {
            if let Node::Directory { digest, .. } = node {
                message(&mut out, 2, |dir| {
                    string(dir, 1, name);
                    message(dir, 2, |d| digest_fields(d, &digest.hash, digest.size));
                });
            }
        }
        for (name, node) in &self.entries {
            if let Node::Symlink { target } = node {
                message(&mut out, 3, |link| {
                    string(link, 1, name);
                    string(link, 2, target);
                });
            }
        }
        out
    }

    /// The directory's digest.
    pub fn digest(&self) -> DirectoryDigest {
        let encoding = self.encode();
        DirectoryDigest {
            hash: Digest::of(&encoding),
            size: encoding.len() as u64,
        }
    }

    /// The directory as its parent names it.
    pub fn as_node(&self) -> Node {
        Node::Directory {
            digest: self.digest(),
            totals: self.totals(),
        }
    }
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u64, value: u64) {
    if value != 0 {
        varint(out, field << 3);
        varint(out, value);
    }
}

fn length_delimited(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn string(out: &mut Vec<u8>, field: u64, text: &str) {
    if !text.is_empty() {
        length_delimited(out, field, text.as_bytes());
    }
}

fn message(out: &mut Vec<u8>, field: u64, fill: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    fill(&mut inner);
    length_delimited(out, field, &inner);
}

fn digest_fields(out: &mut Vec<u8>, hash: &Digest, size: u64) {
    string(out, 1, &hash.hex());
    varint_field(out, 2, size);
}

/// Why a set of leaves or changes has no tree digest.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TreeDigestError {
    /// A path has an empty segment (or is empty).
    #[error("path {0:?} has an empty segment")]
    EmptySegment(String),
    /// A path is given twice, or lies beneath another leaf.
    #[error("path {0:?} is given twice or lies beneath a file or link")]
    Clash(String),
    /// A leaf was given as a directory node.
    #[error("path {0:?} is given a directory node; leaves are files and links")]
    NotALeaf(String),
    /// The base lacks a directory a change lies in, though its parent names it.
    #[error("the base's directory {0:?} is not given")]
    MissingDirectory(String),
}

/// Every directory of a tree by its path (`""` is the root), and the root's digest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Digested {
    /// The root directory's digest.
    pub root: DirectoryDigest,
    /// The directories, by path: every directory of the tree for [`build`]; for [`apply`],
    /// those on a changed path that still hold something.
    pub directories: BTreeMap<String, Directory>,
}

impl Default for DirectoryDigest {
    fn default() -> Self {
        Directory::new().digest()
    }
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

fn parent_of(dir: &str) -> Option<&str> {
    (!dir.is_empty()).then(|| split(dir).0)
}

fn depth(dir: &str) -> usize {
    if dir.is_empty() {
        0
    } else {
        dir.split('/').count()
    }
}

/// The digest of the tree whose leaves (files and links, by path) are `leaves`, and every
/// directory of it. Directories are the leaves' prefixes: an empty directory cannot be held.
pub fn build<'a>(
    leaves: impl IntoIterator<Item = (&'a str, Node)>,
) -> Result<Digested, TreeDigestError> {
    let mut directories: BTreeMap<String, Directory> = BTreeMap::new();
    directories.insert(String::new(), Directory::new());
    let mut leaf_paths = BTreeSet::new();
    for (path, node) in leaves {
        if node.is_directory() {
            return Err(TreeDigestError::NotALeaf(path.to_owned()));
        }
        if path.split('/').any(str::is_empty) {
            return Err(TreeDigestError::EmptySegment(path.to_owned()));
        }
        let (dir, name) = split(path);
        leaf_paths.insert(path.to_owned());
        if directories
            .entry(dir.to_owned())
            .or_default()
            .insert(name, node)
            .is_some()
        {
            return Err(TreeDigestError::Clash(path.to_owned()));
        }
        let mut at = dir;
        while let Some(parent) = parent_of(at) {
            directories.entry(parent.to_owned()).or_default();
            at = parent;
        }
    }
    // A leaf where a directory also is.
    if let Some(path) = directories.keys().find(|dir| leaf_paths.contains(*dir)) {
        return Err(TreeDigestError::Clash(path.clone()));
    }
    let order: Vec<String> = ordered_deepest_first(directories.keys());
    for dir in order {
        let Some(parent) = parent_of(&dir) else {
            continue;
        };
        let node = directories[&dir].as_node();
        let (_, name) = split(&dir);
        let parent = directories.entry(parent.to_owned()).or_default();
        parent.insert(name, node);
    }
    Ok(Digested {
        root: directories[""].digest(),
        directories,
    })
}

fn ordered_deepest_first<'a>(dirs: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut order: Vec<String> = dirs.cloned().collect();
    order.sort_by(|a, b| depth(b).cmp(&depth(a)).then_with(|| a.cmp(b)));
    order
}

/// Every directory a change of `changes` lies in, and every directory above one, root
/// included: the directories [`apply`] reads from the base and writes anew.
pub fn touched<'a>(changes: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut dirs = BTreeSet::new();
    for path in changes {
        let mut at = split(path).0;
        loop {
            if !dirs.insert(at.to_owned()) {
                break;
            }
            match parent_of(at) {
                Some(parent) => at = parent,
                None => break,
            }
        }
    }
    dirs
}

/// The tree `base` changed by `changes` (each a path and its new leaf, or `None` for a
/// deletion; distinct paths, already checked against the tree rules as a whole): the new
/// root digest and the directories on the changed paths that still hold something.
///
/// `base` holds the base's directory at each path [`touched`] names that the base has (more
/// is allowed). A deletion removes a leaf only (the name may be a directory the same changes
/// create), a write sets it, and a directory left empty goes from its parent: the same rules
/// Git's tree surgery follows, so that [`build`] of the changed leaves gives the same digest.
pub fn apply(
    base: &BTreeMap<String, Directory>,
    changes: &[(String, Option<Node>)],
) -> Result<Digested, TreeDigestError> {
    let mut leaves: BTreeMap<&str, Vec<(&str, Option<&Node>)>> = BTreeMap::new();
    for (path, node) in changes {
        if node.as_ref().is_some_and(Node::is_directory) {
            return Err(TreeDigestError::NotALeaf(path.clone()));
        }
        if path.split('/').any(str::is_empty) {
            return Err(TreeDigestError::EmptySegment(path.clone()));
        }
        let (dir, name) = split(path);
        leaves.entry(dir).or_default().push((name, node.as_ref()));
    }
    let touched = touched(changes.iter().map(|(path, _)| path.as_str()));
    let mut rebuilt: BTreeMap<String, Option<Directory>> = BTreeMap::new();
    for dir in ordered_deepest_first(touched.iter()) {
        let mut directory = match base.get(&dir) {
            Some(directory) => directory.clone(),
            None => {
                // A directory the base names must be given; one it lacks is new.
                if base_names_directory(base, &dir) {
                    return Err(TreeDigestError::MissingDirectory(dir));
                }
                Directory::new()
            }
        };
        // Children first: a directory that became empty goes, one rebuilt takes its digest.
        for (child, result) in rebuilt
            .iter()
            .filter(|(child, _)| parent_of(child) == Some(dir.as_str()))
        {
            let (_, name) = split(child);
            match result {
                Some(child) => {
                    directory.insert(name, child.as_node());
                }
                None => {
                    if directory.get(name).is_some_and(Node::is_directory) {
                        directory.remove(name);
                    }
                }
            }
        }
        for &(name, node) in leaves.get(dir.as_str()).into_iter().flatten() {
            match node {
                Some(node) => {
                    directory.insert(name, node.clone());
                }
                None => {
                    if directory.get(name).is_some_and(|node| !node.is_directory()) {
                        directory.remove(name);
                    }
                }
            }
        }
        let keep = !directory.is_empty() || dir.is_empty();
        rebuilt.insert(dir, keep.then_some(directory));
    }
    let root = rebuilt
        .get("")
        .and_then(Option::as_ref)
        .map(Directory::digest)
        .unwrap_or_default();
    Ok(Digested {
        root,
        directories: rebuilt
            .into_iter()
            .filter_map(|(path, directory)| directory.map(|directory| (path, directory)))
            .collect(),
    })
}

/// Whether the base's parent of `dir` (given in `base`) names `dir` as a directory.
fn base_names_directory(base: &BTreeMap<String, Directory>, dir: &str) -> bool {
    let Some(parent) = parent_of(dir) else {
        return false;
    };
    let (_, name) = split(dir);
    base.get(parent)
        .and_then(|parent| parent.get(name))
        .is_some_and(Node::is_directory)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Node {
        Node::file(false, text.as_bytes())
    }

    fn link(target: &str) -> Node {
        Node::Symlink {
            target: target.into(),
        }
    }

    fn base() -> Vec<(&'static str, Node)> {
        vec![
            ("README", file("r")),
            ("a/b/c.txt", file("c")),
            ("a/b/d.txt", file("d")),
            ("a/e.txt", file("e")),
            ("a-b", file("dash")),
            ("x/y/z/deep.txt", file("deep")),
            ("run", Node::file(true, b"#!/bin/sh\n")),
            ("link", link("a/e.txt")),
        ]
    }

    /// Applies `edits` both ways (incrementally on the base's directories, and by building
    /// the changed leaves whole) and compares.
    fn check(edits: &[(&str, Option<Node>)]) {
        let base_leaves = base();
        let digested = build(base_leaves.iter().map(|(p, n)| (*p, n.clone()))).unwrap();
        let mut leaves: BTreeMap<String, Node> = base_leaves
            .iter()
            .map(|(path, node)| (path.to_string(), node.clone()))
            .collect();
        for (path, node) in edits {
            match node {
                Some(node) => leaves.insert(path.to_string(), node.clone()),
                None => leaves.remove(*path),
            };
        }
        let whole = build(leaves.iter().map(|(p, n)| (p.as_str(), n.clone()))).unwrap();
        let changes: Vec<(String, Option<Node>)> = edits
            .iter()
            .map(|(path, node)| (path.to_string(), node.clone()))
            .collect();
        let applied = apply(&digested.directories, &changes).unwrap();
        assert_eq!(applied.root, whole.root, "{edits:?}");
        for (path, directory) in &applied.directories {
            assert_eq!(Some(directory), whole.directories.get(path), "{path}");
        }
        // Only directories above a change are rebuilt.
        let touched = touched(edits.iter().map(|(path, _)| *path));
        assert!(applied.directories.keys().all(|dir| touched.contains(dir)));
    }

    #[test]
    fn changes_give_the_digest_the_whole_build_gives() {
        check(&[("a/b/c.txt", Some(file("changed")))]);
        check(&[("README", Some(file("top")))]);
        check(&[("new/dir/file", Some(file("created")))]);
        check(&[("a/b/c.txt", None)]);
        check(&[("x/y/z/deep.txt", None)]);
        check(&[("a/b/c.txt", None), ("a/b/d.txt", None)]);
        check(&[("README", None), ("README/inside", Some(file("now a dir")))]);
        check(&[("x/y/z/deep.txt", None), ("x", Some(file("now a file")))]);
        check(&[("run", Some(Node::file(false, b"#!/bin/sh\n")))]);
        check(&[("link", Some(link("README")))]);
        check(&[
            ("a/b/c.txt", Some(file("1"))),
            ("a/e.txt", None),
            ("a/f/g.txt", Some(file("2"))),
            ("x/y/z/deep.txt", Some(file("3"))),
            ("zz", Some(link("a"))),
        ]);
        let everything: Vec<(&str, Option<Node>)> =
            base().into_iter().map(|(path, _)| (path, None)).collect();
        check(&everything);
    }

    #[test]
    fn every_part_of_an_entry_is_in_its_digest() {
        let digest = |leaves: Vec<(&str, Node)>| build(leaves).unwrap().root;
        let one = digest(vec![("a", file("x"))]);
        assert_ne!(one, digest(vec![("b", file("x"))]), "name");
        assert_ne!(one, digest(vec![("a", file("y"))]), "bytes");
        assert_ne!(one, digest(vec![("a", Node::file(true, b"x"))]), "mode");
        assert_ne!(one, digest(vec![("a", link("x"))]), "kind");
        assert_ne!(one, digest(vec![("d/a", file("x"))]), "place");
        // Totals are not part of the digest, but they add up.
        let built = build(base()).unwrap();
        assert_eq!(
            built.directories[""].totals(),
            Totals {
                leaves: 8,
                bytes: 1 + 1 + 1 + 1 + 4 + 4 + 10 + 7,
                links: 1,
            }
        );
        assert_eq!(built.directories["a"].totals().leaves, 3);
    }

    #[test]
    fn bad_leaves_are_refused() {
        assert_eq!(
            build(vec![("a//b", file("x"))]),
            Err(TreeDigestError::EmptySegment("a//b".into()))
        );
        assert_eq!(
            build(vec![("a", file("x")), ("a/b", file("y"))]),
            Err(TreeDigestError::Clash("a".into()))
        );
        assert_eq!(
            build(vec![("a", file("x")), ("a", file("y"))]),
            Err(TreeDigestError::Clash("a".into()))
        );
        let base = build(base()).unwrap();
        let mut partial = base.directories.clone();
        partial.remove("a/b");
        assert_eq!(
            apply(&partial, &[("a/b/c.txt".into(), None)]),
            Err(TreeDigestError::MissingDirectory("a/b".into()))
        );
    }

    /// Digests computed outside Rust, by protocol buffers' own (Python) serialiser from the
    /// Remote Execution API's message definitions: the tree `README.md`, `bin/run`
    /// (executable), `docs/empty`, `docs/guide.txt`, `docs/up -> ../README.md` and
    /// `link -> docs/guide.txt`.
    #[test]
    fn the_remote_execution_api_gives_the_same_digests() {
        let built = build(vec![
            ("README.md", file("hello\n")),
            ("bin/run", Node::file(true, b"#!/bin/sh\necho hi\n")),
            ("docs/empty", file("")),
            ("docs/guide.txt", file(&"read me\n".repeat(40))),
            ("docs/up", link("../README.md")),
            ("link", link("docs/guide.txt")),
        ])
        .unwrap();
        let digest = |path: &str| built.directories[path].digest();
        let expect = |hash: &str, size| DirectoryDigest {
            hash: Digest::parse(&format!("sha256:{hash}")).unwrap(),
            size,
        };
        assert_eq!(
            digest("bin"),
            expect(
                "fa8057204f14d559ad1194a9561b39df7a4609fca1cd4277943b0ce29883be75",
                79
            )
        );
        assert_eq!(
            digest("docs"),
            expect(
                "09bdaed4bb5a546cea8f34ca745dc406df4d7b980281d8984628d85337190246",
                181
            )
        );
        assert_eq!(
            built.root,
            expect(
                "faff44abb876afa57dafd0a3ebf830d7620bd368f17577c042db8cd6efba3b4a",
                263
            )
        );
    }

    /// The encoding, written out by hand from the protocol buffers wire format.
    #[test]
    fn a_directory_encodes_as_the_remote_execution_api_does() {
        let mut dir = Directory::new();
        dir.insert("run", Node::file(true, b""));
        dir.insert("l", link("run"));
        let mut expected = Vec::new();
        let hash = Digest::of(b"").hex();
        // files: name "run", digest {hash, no size (zero)}, is_executable true
        let mut file = vec![0x0a, 3];
        file.extend_from_slice(b"run");
        file.extend_from_slice(&[0x12, 66, 0x0a, 64]);
        file.extend_from_slice(hash.as_bytes());
        file.extend_from_slice(&[0x20, 1]);
        expected.push(0x0a);
        expected.push(file.len() as u8);
        expected.extend_from_slice(&file);
        // symlinks: name "l", target "run"
        expected.extend_from_slice(&[0x1a, 8, 0x0a, 1, b'l', 0x12, 3, b'r', b'u', b'n']);
        assert_eq!(dir.encode(), expected);
        assert_eq!(Directory::new().encode(), Vec::<u8>::new());
        assert_eq!(Directory::new().digest().hash, Digest::of(b""));
    }
}
