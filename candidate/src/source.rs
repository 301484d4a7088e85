//! Source trees in Git's tree model: regular files, executables and symbolic links of any
//! bytes under directories; checking them against the tree rules and the repository's
//! limits, and building their blobs and trees (sf-host walks stored trees back).

use std::collections::BTreeMap;

use crate::canonical::Digest;
use crate::contracts::EncodedObject;
use crate::contracts::tree_path::{self, EntryMode as Mode, Leaf, TreePolicy};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::error::{Rejection, RepositoryError};
use super::identity::{REPOSITORY_LIMITS, RepositoryLimits};

/// A text file as a caller gives it: a path and its text, stored with mode `100644`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceText {
    /// The file's path in the tree.
    pub path: String,
    /// The file's text.
    pub text: String,
}

impl From<SourceText> for SourceFile {
    fn from(file: SourceText) -> Self {
        SourceFile::new(file.path, Mode::Regular, file.text.into_bytes())
    }
}

/// One leaf of a source tree with its identities: a file (its bytes) or a symbolic link (its
/// target bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The path in the tree.
    pub path: String,
    /// Regular, executable or symbolic link.
    pub mode: Mode,
    /// The Git blob id of the content.
    pub blob: ObjectId,
    /// The SHA-256 of the content.
    pub sha256: Digest,
    /// The content's length in bytes.
    pub bytes: u64,
    /// The bytes: a file's content or a link's target.
    pub content: Vec<u8>,
}

impl std::fmt::Debug for SourceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceFile")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("blob", &self.blob)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl SourceFile {
    /// The leaf's identities computed from its content.
    pub fn new(path: String, mode: Mode, content: Vec<u8>) -> Self {
        Self {
            blob: git_object::object_id(ObjectKind::Blob, &content),
            sha256: Digest::of(&content),
            bytes: content.len() as u64,
            path,
            mode,
            content,
        }
    }

    /// A regular file holding `text`.
    pub fn text(path: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(path.into(), Mode::Regular, text.into().into_bytes())
    }

    /// The content as text, when it is UTF-8.
    pub fn as_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.content).ok()
    }
}

/// The files of one factory commit, sorted by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSnapshot {
    /// The commit.
    pub commit: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// Every leaf of the tree, sorted by path.
    pub files: Vec<SourceFile>,
}

/// The file mode of the files of `sf-candidate/1` and `/2` manifests, which list text files
/// only.
pub const FILE_MODE: &str = "100644";

const LFS_POINTER_PREFIXES: [&str; 2] = [
    "version https://git-lfs.github.com/spec/",
    "version https://hawser.github.com/spec/",
];

/// Checks the text of an edit: what a proposal's `text` may hold (UTF-8 is the type's
/// guarantee). Files already in a tree are content and carry no such rule.
pub(crate) fn check_text(text: &str) -> Result<(), (Rejection, &'static str)> {
    if text.len() > REPOSITORY_LIMITS.max_file_bytes {
        return Err((
            Rejection::FileTooLarge,
            "the text is larger than the per-file limit",
        ));
    }
    if text.contains('\0') {
        return Err((Rejection::NulByte, "the edit's text holds a NUL character"));
    }
    if LFS_POINTER_PREFIXES
        .iter()
        .any(|prefix| text.starts_with(prefix))
    {
        return Err((
            Rejection::LfsPointer,
            "the edit's text is a Git LFS pointer",
        ));
    }
    Ok(())
}

/// Whether `text` may be an edit's `text` (not too large, no NUL, not a Git LFS pointer):
/// other content is an edit's `bytes`.
pub fn is_edit_text(text: &str) -> bool {
    check_text(text).is_ok()
}

/// One thing a source tree holds that it may not, with the rule in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFault {
    /// The reason, whose code names the rule.
    pub reason: Rejection,
    /// The path at fault, or `(the whole tree)` for a limit of the whole.
    pub path: String,
    /// The rule broken, in words.
    pub rule: String,
}

/// The path a limit of the whole tree is reported at.
pub const WHOLE_TREE: &str = "(the whole tree)";

impl SourceFault {
    #[doc(hidden)]
    pub fn new(reason: Rejection, path: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            reason,
            path: path.into(),
            rule: rule.into(),
        }
    }
}

/// Describes faults one per line, each with its path, rule and code.
pub fn describe_faults(faults: &[SourceFault]) -> String {
    let mut text = format!(
        "{} path(s) break the rules of the tree model:",
        faults.len()
    );
    for fault in faults {
        text.push_str(&format!(
            "\n  {}: {} ({})",
            fault.path,
            fault.rule,
            fault.reason.code()
        ));
    }
    text
}

/// Checks a whole source tree (`files` sorted by path) against the tree rules of
/// [`tree_path`] and `limits`, returning every fault, sorted by path.
pub fn check_source(
    files: &[SourceFile],
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Vec<SourceFault> {
    let total: u64 = files.iter().map(|file| file.bytes).sum();
    check_listing(
        files.iter().map(|file| Listed {
            path: &file.path,
            mode: file.mode,
            bytes: file.bytes,
            content: &file.content,
        }),
        (files.len() as u64, total),
        limits,
        policy,
    )
}

/// One leaf of a tree as [`check_listing`] checks it: its path, mode and size, and for a link
/// its target (a file's bytes are not needed).
pub struct Listed<'a> {
    /// The leaf's path.
    pub path: &'a str,
    /// Its mode.
    pub mode: Mode,
    /// Its size.
    pub bytes: u64,
    /// A link's target (a file's bytes are not needed).
    pub content: &'a [u8],
}

impl Listed<'_> {
    fn leaf(&self) -> Leaf<'_> {
        match self.mode {
            Mode::Symlink => Leaf::Symlink(self.content),
            Mode::Regular | Mode::Executable => Leaf::File,
        }
    }
}

/// [`check_source`] of a listing whose leaves number `totals.0` and hold `totals.1` bytes:
/// the limits of the whole, each leaf's size, and the tree rules, every fault sorted by path.
pub fn check_listing<'a>(
    leaves: impl Iterator<Item = Listed<'a>>,
    totals: (u64, u64),
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Vec<SourceFault> {
    let (count, total) = totals;
    let mut faults = Vec::new();
    if count > limits.max_files as u64 {
        faults.push(SourceFault::new(
            Rejection::TooManyFiles,
            WHOLE_TREE,
            format!(
                "holds {count} files; a tree holds at most {}",
                limits.max_files
            ),
        ));
    }
    if total > limits.max_source_bytes as u64 {
        faults.push(SourceFault::new(
            Rejection::SourceTooLarge,
            WHOLE_TREE,
            format!(
                "holds {total} bytes; a tree holds at most {}",
                limits.max_source_bytes
            ),
        ));
    }
    let leaves: Vec<Listed<'a>> = leaves.collect();
    for leaf in &leaves {
        if leaf.bytes > limits.max_file_bytes as u64 {
            faults.push(SourceFault::new(
                Rejection::FileTooLarge,
                leaf.path,
                format!(
                    "is {} bytes; a file holds at most {}",
                    leaf.bytes, limits.max_file_bytes
                ),
            ));
        }
    }
    for fault in tree_path::check_tree(leaves.iter().map(|leaf| (leaf.path, leaf.leaf())), policy) {
        let mut rule = fault.rule.describe().to_owned();
        if let Some(with) = &fault.with {
            rule.push_str(&format!(" ({with})"));
        }
        faults.push(SourceFault::new(
            Rejection::Tree(fault.rule),
            fault.path,
            rule,
        ));
    }
    faults.sort_by(|a, b| a.path.cmp(&b.path));
    faults
}

/// The first of `faults`, as a rejection of a proposal's resulting tree.
pub fn first_fault(faults: Vec<SourceFault>) -> Result<(), RepositoryError> {
    match faults.into_iter().next() {
        None => Ok(()),
        Some(fault) => Err(RepositoryError::rejected(
            fault.reason,
            format!("resulting source: {}", fault.path),
            fault.rule,
        )),
    }
}

/// The blobs and trees of a checked source tree, and its root tree id.
pub struct BuiltTree {
    /// The root tree's id.
    pub tree: ObjectId,
    /// Every blob and tree, sorted by id, each once.
    pub objects: Vec<EncodedObject>,
}

/// Builds the blobs and nested trees of `files` (already checked).
pub fn build_tree(files: &[SourceFile]) -> BuiltTree {
    let mut objects: Vec<EncodedObject> = files
        .iter()
        .map(|file| EncodedObject::new(ObjectKind::Blob, file.content.clone()))
        .collect();
    let tree = build_level(&leaf_entries(files), &mut objects);
    objects.sort_by_key(|object| object.id);
    objects.dedup_by_key(|object| object.id);
    BuiltTree { tree, objects }
}

/// The id of the tree [`build_tree`] builds from `files`, without their blobs: the tree's
/// entries name each file by its `blob` id either way, so a check of a tree's id need not
/// copy and hash every file's bytes once more.
pub fn tree_id(files: &[SourceFile]) -> ObjectId {
    build_level(&leaf_entries(files), &mut Vec::new())
}

fn leaf_entries(files: &[SourceFile]) -> Vec<(&str, EntryMode, ObjectId)> {
    files
        .iter()
        .map(|f| (f.path.as_str(), EntryMode::of_leaf(f.mode), f.blob))
        .collect()
}

/// Builds the tree of `entries` (paths relative to this level, with their modes and ids) and
/// every tree below it, adding each to `objects`; the tree's id.
pub fn build_level(
    entries: &[(&str, EntryMode, ObjectId)],
    objects: &mut Vec<EncodedObject>,
) -> ObjectId {
    let mut tree_entries = Vec::new();
    let mut directories: BTreeMap<&str, Vec<(&str, EntryMode, ObjectId)>> = BTreeMap::new();
    for &(path, mode, id) in entries {
        match path.split_once('/') {
            None => tree_entries.push(TreeEntry {
                mode,
                name: path.to_owned(),
                id,
            }),
            Some((directory, rest)) => directories
                .entry(directory)
                .or_default()
                .push((rest, mode, id)),
        }
    }
    for (name, children) in directories {
        let id = build_level(&children, objects);
        tree_entries.push(TreeEntry {
            mode: EntryMode::Tree,
            name: name.to_owned(),
            id,
        });
    }
    let object = EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&tree_entries));
    let id = object.id;
    objects.push(object);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_trees_match_git_layout() {
        let files = vec![
            SourceFile::text("a-b", "1"),
            SourceFile::text("a/x", "2"),
            SourceFile::new("a/y/z".into(), Mode::Executable, b"3".to_vec()),
            SourceFile::new("l".into(), Mode::Symlink, b"a/x".to_vec()),
        ];
        let built = build_tree(&files);
        assert_eq!(tree_id(&files), built.tree);
        // root, a, a/y, and four blobs
        assert_eq!(built.objects.len(), 7);
        assert!(built.objects.iter().all(EncodedObject::verify));
        assert!(built.objects.iter().any(|o| o.id == built.tree));
    }

    #[test]
    fn text_rules() {
        assert!(check_text("fine\n").is_ok());
        assert_eq!(check_text("a\0b").unwrap_err().0, Rejection::NulByte);
        assert_eq!(
            check_text("version https://git-lfs.github.com/spec/v1\noid sha256:x\nsize 1\n")
                .unwrap_err()
                .0,
            Rejection::LfsPointer
        );
    }

    #[test]
    fn every_fault_of_a_source_is_listed() {
        let limits = RepositoryLimits {
            max_files: 3,
            max_file_bytes: 4,
            ..REPOSITORY_LIMITS
        };
        let files = vec![
            SourceFile::text(".git/config", "x"),
            SourceFile::text("big", "12345"),
            SourceFile::new("out".into(), Mode::Symlink, b"../x".to_vec()),
            SourceFile::new("png".into(), Mode::Regular, vec![0x89, b'P', 0, 0xff]),
        ];
        let codes: Vec<(String, &str)> = check_source(&files, &limits, TreePolicy::default())
            .into_iter()
            .map(|fault| (fault.path, fault.reason.code()))
            .collect();
        assert_eq!(
            codes,
            [
                (WHOLE_TREE.to_owned(), "too-many-files"),
                (".git".to_owned(), "git-segment"),
                ("big".to_owned(), "file-too-large"),
                ("out".to_owned(), "link-escapes"),
            ]
        );
    }
}
