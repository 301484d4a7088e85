//! Git object encoding: blobs, trees and commits as bytes, and their SHA-1 ids. Pure functions;
//! nothing here touches a repository.

use std::fmt;

use sha1::{Digest as _, Sha1};

crate::word_enum! {
    /// The kind of a Git object sf writes or reads, by Git's name for it; tags and anything
    /// else do not parse (sf never stores them).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum ObjectKind {
        /// A file's bytes.
        "blob" Blob,
        /// A directory listing: names, modes and ids of blobs and trees.
        "tree" Tree,
        /// A tree with its parents, identity and message.
        "commit" Commit,
    }
}

impl ObjectKind {
    /// Git's numeric pack type.
    pub fn pack_type(self) -> u8 {
        match self {
            Self::Commit => 1,
            Self::Tree => 2,
            Self::Blob => 3,
        }
    }
}

/// A full SHA-1 object id, always 40 lowercase hex characters when written.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId([u8; 20]);

impl ObjectId {
    /// The all-zero id Git uses for "absent"; never the id of an object sf writes.
    pub const ZERO: Self = Self([0; 20]);

    /// The id whose 20 raw bytes are `bytes` (no hashing: `bytes` is the id).
    pub fn from_bytes(bytes: [u8; 20]) -> Self {
        Self(bytes)
    }

    /// The 20 raw bytes of the id, as a tree entry holds them.
    pub fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// Parses exactly 40 lowercase hex characters.
    pub fn parse_hex(text: &str) -> Option<Self> {
        if text.len() != 40
            || !text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        let mut bytes = [0; 20];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(Self(bytes))
    }

    /// The 40 lowercase hex characters of the id.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.to_hex())
    }
}

/// The rule an object id's text follows.
pub const OBJECT_ID_RULE: &str = "must be a full object id: 40 lowercase hex characters";

/// An object id writes itself as its 40 lowercase hex characters.
impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// An object id reads itself from exactly 40 lowercase hex characters.
impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(crate::canonical::TextVisitor {
            parse: Self::parse_hex,
            rule: OBJECT_ID_RULE,
        })
    }
}

/// The header Git hashes in front of an object's body.
pub fn object_header(kind: ObjectKind, len: usize) -> Vec<u8> {
    format!("{} {len}\0", kind.as_str()).into_bytes()
}

/// The SHA-1 id of an object of `kind` with `body`.
pub fn object_id(kind: ObjectKind, body: &[u8]) -> ObjectId {
    let mut hasher = Sha1::new();
    hasher.update(object_header(kind, body.len()));
    hasher.update(body);
    ObjectId(hasher.finalize().into())
}

/// The mode of a tree entry: Git's tree model without submodules (sf never creates,
/// materialises or runs one; an imported tree holding one is refused by name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryMode {
    /// A regular, non-executable file (a blob), Git mode `100644`.
    File,
    /// An executable regular file (a blob), Git mode `100755`.
    Executable,
    /// A symbolic link (a blob holding the target), Git mode `120000`.
    Symlink,
    /// A directory (a tree), Git mode `40000`.
    Tree,
}

impl EntryMode {
    /// The mode as a tree entry writes it, in octal without leading zeros.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "100644",
            Self::Executable => "100755",
            Self::Symlink => "120000",
            Self::Tree => "40000",
        }
    }

    /// The mode a tree entry writes as `text`; `None` for a submodule (`160000`), a
    /// zero-padded mode (`040000`) or one Git does not write (`100664`).
    pub fn from_octal(text: &[u8]) -> Option<Self> {
        [Self::File, Self::Executable, Self::Symlink, Self::Tree]
            .into_iter()
            .find(|mode| mode.as_str().as_bytes() == text)
    }

    /// The leaf this mode names; `None` for a directory.
    pub fn leaf(self) -> Option<crate::tree_path::EntryMode> {
        match self {
            Self::File => Some(crate::tree_path::EntryMode::Regular),
            Self::Executable => Some(crate::tree_path::EntryMode::Executable),
            Self::Symlink => Some(crate::tree_path::EntryMode::Symlink),
            Self::Tree => None,
        }
    }

    /// The tree entry mode of a leaf.
    pub fn of_leaf(leaf: crate::tree_path::EntryMode) -> Self {
        match leaf {
            crate::tree_path::EntryMode::Regular => Self::File,
            crate::tree_path::EntryMode::Executable => Self::Executable,
            crate::tree_path::EntryMode::Symlink => Self::Symlink,
        }
    }
}

/// One entry of a tree object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    /// Whether the entry is a file or a directory.
    pub mode: EntryMode,
    /// The entry's name within the tree: one path component, without `/` or NUL.
    pub name: String,
    /// The id of the entry's blob (a file) or tree (a directory).
    pub id: ObjectId,
}

/// Git's tree order: names compared bytewise, a tree's name as if followed by `/`.
fn tree_order_key(entry: &TreeEntry) -> Vec<u8> {
    let mut key = entry.name.as_bytes().to_vec();
    if entry.mode == EntryMode::Tree {
        key.push(b'/');
    }
    key
}

/// Encodes a tree body. Entries are sorted into Git's order; duplicate names are the caller's
/// bug and are checked by the callers that build trees from validated paths.
pub fn encode_tree(entries: &[TreeEntry]) -> Vec<u8> {
    let mut sorted: Vec<&TreeEntry> = entries.iter().collect();
    sorted.sort_by_key(|entry| tree_order_key(entry));
    let mut body = Vec::new();
    for entry in sorted {
        body.extend_from_slice(entry.mode.as_str().as_bytes());
        body.push(b' ');
        body.extend_from_slice(entry.name.as_bytes());
        body.push(0);
        body.extend_from_slice(entry.id.as_bytes());
    }
    body
}

/// One entry of a tree object as its bytes say, before any rule: the mode text, the name
/// bytes and the id. How a foreign tree is read, so that every entry at fault can be named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawTreeEntry {
    /// The mode as written (`100644`, `160000`, `040000`, …).
    pub mode: Vec<u8>,
    /// The name as written (Git does not promise UTF-8).
    pub name: Vec<u8>,
    /// The object the entry names.
    pub id: ObjectId,
}

/// Splits a tree body into its entries, checking only the framing (`<mode> <name>\0<20
/// bytes>` repeated): `None` when the body is not a sequence of entries.
pub fn split_tree(body: &[u8]) -> Option<Vec<RawTreeEntry>> {
    let mut entries = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let space = rest.iter().position(|&b| b == b' ')?;
        let mode = rest[..space].to_vec();
        rest = &rest[space + 1..];
        let nul = rest.iter().position(|&b| b == 0)?;
        let name = rest[..nul].to_vec();
        rest = &rest[nul + 1..];
        if rest.len() < 20 {
            return None;
        }
        let mut id = [0; 20];
        id.copy_from_slice(&rest[..20]);
        rest = &rest[20..];
        entries.push(RawTreeEntry {
            mode,
            name,
            id: ObjectId(id),
        });
    }
    Some(entries)
}

/// Decodes a tree body in Git's canonical form, the form sf writes and `git fsck` accepts:
/// modes of [`EntryMode`] only (no zero padding), UTF-8 names without `/` or NUL, no name
/// twice, strictly in Git's order. Anything else is `None`.
pub fn decode_tree(body: &[u8]) -> Option<Vec<TreeEntry>> {
    let mut entries = Vec::new();
    for raw in split_tree(body)? {
        let mode = EntryMode::from_octal(&raw.mode)?;
        let name = String::from_utf8(raw.name).ok()?;
        if name.is_empty() || name.contains('/') {
            return None;
        }
        entries.push(TreeEntry {
            mode,
            name,
            id: raw.id,
        });
    }
    // Strict order also refuses a name twice, and a file beside a directory of one name
    // (their keys differ only by the `/`, so they would sort apart only if both were listed).
    let in_order = entries
        .windows(2)
        .all(|pair| tree_order_key(&pair[0]) < tree_order_key(&pair[1]));
    let names: std::collections::BTreeSet<&str> =
        entries.iter().map(|entry| entry.name.as_str()).collect();
    (in_order && names.len() == entries.len()).then_some(entries)
}

/// A commit as sf writes it: one tree, zero or more parents, an author and a committer
/// identity line, and a message. No other header (an encoding, a signature) is ever written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// The id of the commit's root tree.
    pub tree: ObjectId,
    /// The ids of the parent commits, in order; empty for a root commit.
    pub parents: Vec<ObjectId>,
    /// The author line: name, `<email>`, seconds since the epoch and time-zone offset
    /// (`Ada <ada@example.org> 1764600000 +0100`).
    pub author: String,
    /// The committer line, in the author's form.
    pub committer: String,
    /// The message, everything after the blank line that ends the headers.
    pub message: String,
}

impl Commit {
    /// A commit whose author and committer are both `ident`: how sf writes its own records.
    pub fn by(tree: ObjectId, parents: Vec<ObjectId>, ident: &str, message: String) -> Self {
        Self {
            tree,
            parents,
            author: ident.to_owned(),
            committer: ident.to_owned(),
            message,
        }
    }

    /// Whether `ident` is both the author and the committer.
    pub fn is_by(&self, ident: &str) -> bool {
        self.author == ident && self.committer == ident
    }
}

/// Encodes a commit body.
pub fn encode_commit(commit: &Commit) -> Vec<u8> {
    let mut body = format!("tree {}\n", commit.tree);
    for parent in &commit.parents {
        body.push_str(&format!("parent {parent}\n"));
    }
    body.push_str(&format!(
        "author {}\ncommitter {}\n\n{}",
        commit.author, commit.committer, commit.message
    ));
    body.into_bytes()
}

/// Decodes a commit body written in sf's canonical shape; anything else (extra headers,
/// signatures, non-UTF-8) is `None`. Callers compare what they decode with what they expect,
/// and the decode itself re-encodes and compares, so a decode is never a repair.
pub fn decode_commit(body: &[u8]) -> Option<Commit> {
    let text = std::str::from_utf8(body).ok()?;
    let (headers, message) = text.split_once("\n\n")?;
    let mut lines = headers.split('\n');
    let tree = ObjectId::parse_hex(lines.next()?.strip_prefix("tree ")?)?;
    let mut parents = Vec::new();
    let mut line = lines.next()?;
    while let Some(parent) = line.strip_prefix("parent ") {
        parents.push(ObjectId::parse_hex(parent)?);
        line = lines.next()?;
    }
    let author = line.strip_prefix("author ")?;
    let committer = lines.next()?.strip_prefix("committer ")?;
    if lines.next().is_some() {
        return None;
    }
    let commit = Commit {
        tree,
        parents,
        author: author.to_owned(),
        committer: committer.to_owned(),
        message: message.to_owned(),
    };
    (encode_commit(&commit) == body).then_some(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_match_git() {
        // `git hash-object -t blob --stdin </dev/null` and `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            object_id(ObjectKind::Blob, b"").to_hex(),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
        assert_eq!(
            object_id(ObjectKind::Blob, b"hello\n").to_hex(),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        // The empty tree.
        assert_eq!(
            object_id(ObjectKind::Tree, &encode_tree(&[])).to_hex(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
    }

    #[test]
    fn tree_order_puts_directories_after_dotted_files() {
        let id = object_id(ObjectKind::Blob, b"");
        let entries = vec![
            TreeEntry {
                mode: EntryMode::Tree,
                name: "a".into(),
                id,
            },
            TreeEntry {
                mode: EntryMode::File,
                name: "a.b".into(),
                id,
            },
        ];
        let body = encode_tree(&entries);
        let decoded = decode_tree(&body).unwrap();
        assert_eq!(decoded[0].name, "a.b");
        assert_eq!(decoded[1].name, "a");
    }

    #[test]
    fn decode_refuses_out_of_order_and_foreign_modes() {
        let id = object_id(ObjectKind::Blob, b"");
        let mut body = Vec::new();
        for name in ["b", "a"] {
            body.extend_from_slice(b"100644 ");
            body.extend_from_slice(name.as_bytes());
            body.push(0);
            body.extend_from_slice(id.as_bytes());
        }
        assert!(decode_tree(&body).is_none());
        // The tree model's modes are decoded; a submodule, a zero-padded or a legacy mode,
        // a name twice, `.`/`..`-free framing errors are not.
        let entry = |mode: &str, name: &str| {
            let mut bytes = format!("{mode} {name}\0").into_bytes();
            bytes.extend_from_slice(id.as_bytes());
            bytes
        };
        let modes: Vec<EntryMode> =
            decode_tree(&[entry("100755", "a"), entry("120000", "b")].concat())
                .unwrap()
                .iter()
                .map(|entry| entry.mode)
                .collect();
        assert_eq!(modes, [EntryMode::Executable, EntryMode::Symlink]);
        for foreign in ["160000", "040000", "100664", "100600"] {
            assert!(decode_tree(&entry(foreign, "x")).is_none(), "{foreign}");
        }
        assert!(decode_tree(&[entry("100644", "x"), entry("100644", "x")].concat()).is_none());
        assert!(decode_tree(&entry("100644", "x")[..10]).is_none());
        let raw = split_tree(&entry("160000", "sub")).unwrap();
        assert_eq!(
            (raw[0].mode.as_slice(), raw[0].name.as_slice()),
            (&b"160000"[..], &b"sub"[..])
        );
    }

    #[test]
    fn commit_round_trip_is_exact() {
        let commit = Commit {
            tree: object_id(ObjectKind::Tree, &[]),
            parents: vec![object_id(ObjectKind::Blob, b"x")],
            author: "Ada <ada@example.org> 1764600000 +0100".into(),
            committer: "sf <sf@invalid> 1764600000 +0100".into(),
            message: "hello\n".into(),
        };
        let body = encode_commit(&commit);
        assert_eq!(decode_commit(&body), Some(commit));
        let mut signed = body.clone();
        signed.splice(0..0, b"gpgsig x\n".iter().copied());
        assert!(decode_commit(&signed).is_none());
    }

    #[test]
    fn parse_hex_is_strict() {
        assert!(ObjectId::parse_hex(&"a".repeat(40)).is_some());
        assert!(ObjectId::parse_hex(&"A".repeat(40)).is_none());
        assert!(ObjectId::parse_hex(&"a".repeat(39)).is_none());
        assert!(ObjectId::parse_hex(&"g".repeat(40)).is_none());
    }
}
