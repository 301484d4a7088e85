//! Source trees: the supported subset of text files, building their blobs and trees, and
//! reading them back from a store with every object re-hashed and every rule re-checked.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::canonical::Digest;
use crate::contracts::{EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreExt};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};
use crate::source_path::{self, PathRule};

use super::error::{Rejection, RepositoryError};
use super::identity::{MAX_TREE_LEVEL_BYTES, REPOSITORY_LIMITS};

/// A file as a caller gives it: a path and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceText {
    /// The file's path relative to the root, in the source path grammar.
    pub path: String,
    /// The file's whole text (UTF-8, no NUL, not an LFS pointer).
    pub text: String,
}

/// A stored file with its identities. The mode is always `100644`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// The file's path relative to the root.
    pub path: String,
    /// The Git blob id (SHA-1) of its bytes.
    pub blob: ObjectId,
    /// The `sha256:` of its bytes.
    pub sha256: Digest,
    /// Its length in bytes.
    pub bytes: u64,
    /// Its whole text.
    pub text: String,
}

impl SourceFile {
    /// The file's identities computed from its text.
    pub fn new(path: String, text: String) -> Self {
        Self {
            blob: git_object::object_id(ObjectKind::Blob, text.as_bytes()),
            sha256: Digest::of(text.as_bytes()),
            bytes: text.len() as u64,
            path,
            text,
        }
    }
}

/// The files of one factory commit, sorted by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSnapshot {
    /// The commit read.
    pub commit: ObjectId,
    /// Its tree, re-hashed from `files` when read.
    pub tree: ObjectId,
    /// Every file of the tree, sorted by path.
    pub files: Vec<SourceFile>,
}

/// The file mode sf stores.
pub const FILE_MODE: &str = "100644";

const LFS_POINTER_PREFIXES: [&str; 2] = [
    "version https://git-lfs.github.com/spec/",
    "version https://hawser.github.com/spec/",
];

/// Checks one file's text against the supported subset (UTF-8 is the type's guarantee).
pub(crate) fn check_text(text: &str) -> Result<(), (Rejection, &'static str)> {
    if text.len() > REPOSITORY_LIMITS.max_file_bytes {
        return Err((
            Rejection::FileTooLarge,
            "a file holds at most 1 MiB of UTF-8",
        ));
    }
    if text.contains('\0') {
        return Err((Rejection::NulByte, "a file holds no NUL character"));
    }
    if LFS_POINTER_PREFIXES
        .iter()
        .any(|prefix| text.starts_with(prefix))
    {
        return Err((Rejection::LfsPointer, "a file is not a Git LFS pointer"));
    }
    Ok(())
}

pub(crate) fn path_rejection(rule: PathRule) -> Rejection {
    match rule {
        PathRule::Grammar => Rejection::BadPath,
        PathRule::DotSegment => Rejection::DotSegment,
        PathRule::GitSegment => Rejection::GitSegment,
        PathRule::TooLong => Rejection::PathTooLong,
        PathRule::CaseCollision => Rejection::CaseCollision,
        PathRule::FileDirectoryClash => Rejection::FileDirectoryClash,
        PathRule::Duplicate => Rejection::DuplicatePath,
    }
}

/// Checks a whole source tree: every path, every text, the set rules and the limits. The
/// error names the offending path (or `files` for a limit of the whole).
pub(crate) fn check_source(files: &[SourceFile]) -> Result<(), (Rejection, String, String)> {
    if files.len() > REPOSITORY_LIMITS.max_files {
        return Err((
            Rejection::TooManyFiles,
            "files".into(),
            format!(
                "a source holds at most {} files",
                REPOSITORY_LIMITS.max_files
            ),
        ));
    }
    source_path::check_path_set(files.iter().map(|file| file.path.as_str()))
        .map_err(|(path, rule)| (path_rejection(rule), path, rule.describe().to_owned()))?;
    let mut total = 0usize;
    for file in files {
        check_text(&file.text)
            .map_err(|(reason, rule)| (reason, file.path.clone(), rule.into()))?;
        total += file.text.len();
    }
    if total > REPOSITORY_LIMITS.max_source_bytes {
        return Err((
            Rejection::SourceTooLarge,
            "files".into(),
            format!(
                "a source holds at most {} bytes",
                REPOSITORY_LIMITS.max_source_bytes
            ),
        ));
    }
    Ok(())
}

/// The blobs and trees of a checked source tree, and its root tree id.
pub(crate) struct BuiltTree {
    pub tree: ObjectId,
    pub objects: Vec<EncodedObject>,
}

/// Builds the blobs and nested trees of `files` (already checked).
pub(crate) fn build_tree(files: &[SourceFile]) -> BuiltTree {
    let mut objects: Vec<EncodedObject> = files
        .iter()
        .map(|file| EncodedObject::new(ObjectKind::Blob, file.text.as_bytes().to_vec()))
        .collect();
    let entries: Vec<(&str, ObjectId)> = files.iter().map(|f| (f.path.as_str(), f.blob)).collect();
    let tree = build_level(&entries, &mut objects);
    objects.sort_by_key(|object| object.id);
    objects.dedup_by_key(|object| object.id);
    BuiltTree { tree, objects }
}

fn build_level(entries: &[(&str, ObjectId)], objects: &mut Vec<EncodedObject>) -> ObjectId {
    let mut tree_entries = Vec::new();
    let mut directories: BTreeMap<&str, Vec<(&str, ObjectId)>> = BTreeMap::new();
    for &(path, id) in entries {
        match path.split_once('/') {
            None => tree_entries.push(TreeEntry {
                mode: EntryMode::File,
                name: path.to_owned(),
                id,
            }),
            Some((directory, rest)) => directories.entry(directory).or_default().push((rest, id)),
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

/// Reads objects ([`ObjectStoreExt::read_verified`]: one answer per id, each hashing to its
/// id) and checks each is of the expected kind; a missing object is `corrupt` (what names
/// what was being read), because a published ref named it.
pub(crate) fn read_verified(
    store: &dyn ObjectStore,
    ids: &[ObjectId],
    kind: ObjectKind,
    body_budget: u64,
    what: &str,
    deadline: Instant,
) -> Result<Vec<Vec<u8>>, RepositoryError> {
    let answers = store
        .read_verified(ids, body_budget, deadline)
        .map_err(|error| match error {
            ObjectStoreError::Corrupt { what: detail } => {
                RepositoryError::corrupt(format!("{detail} while reading {what}"))
            }
            other => other.into(),
        })?;
    ids.iter()
        .zip(answers)
        .map(|(id, answer)| {
            let object = answer.ok_or_else(|| {
                RepositoryError::corrupt(format!("{what}: {} {id} is missing", kind.as_str()))
            })?;
            if object.kind != kind {
                return Err(RepositoryError::corrupt(format!(
                    "{what}: object {id} is not the {} it should be",
                    kind.as_str()
                )));
            }
            Ok(object.body)
        })
        .collect()
}

/// Reads the source tree `tree` back: trees level by level (4 MiB a level), then every blob
/// (within the source limit), re-checking every rule. Files come back sorted by path.
pub(crate) fn read_tree(
    store: &dyn ObjectStore,
    tree: ObjectId,
    what: &str,
    deadline: Instant,
) -> Result<Vec<SourceFile>, RepositoryError> {
    let mut level: Vec<(String, ObjectId)> = vec![(String::new(), tree)];
    let mut blobs: Vec<(String, ObjectId)> = Vec::new();
    while !level.is_empty() {
        if blobs.len() + level.len() > REPOSITORY_LIMITS.max_files + 1 {
            return Err(RepositoryError::corrupt(format!(
                "{what}: the tree holds more entries than any source sf stores"
            )));
        }
        let ids: Vec<ObjectId> = level.iter().map(|(_, id)| *id).collect();
        let bodies = read_verified(
            store,
            &ids,
            ObjectKind::Tree,
            MAX_TREE_LEVEL_BYTES,
            what,
            deadline,
        )?;
        let mut next = Vec::new();
        for ((prefix, id), body) in level.iter().zip(bodies) {
            let entries = git_object::decode_tree(&body).ok_or_else(|| {
                RepositoryError::corrupt(format!("{what}: tree {id} is not in sf's tree form"))
            })?;
            if entries.is_empty() && !prefix.is_empty() {
                return Err(RepositoryError::corrupt(format!(
                    "{what}: tree {id} at {prefix} is empty"
                )));
            }
            for entry in entries {
                let path = if prefix.is_empty() {
                    entry.name
                } else {
                    format!("{prefix}/{}", entry.name)
                };
                match entry.mode {
                    EntryMode::File => blobs.push((path, entry.id)),
                    EntryMode::Tree => next.push((path, entry.id)),
                }
            }
        }
        level = next;
    }
    if blobs.len() > REPOSITORY_LIMITS.max_files {
        return Err(RepositoryError::corrupt(format!(
            "{what}: more files than any source sf stores"
        )));
    }
    let ids: Vec<ObjectId> = blobs.iter().map(|(_, id)| *id).collect();
    let bodies = read_verified(
        store,
        &ids,
        ObjectKind::Blob,
        REPOSITORY_LIMITS.max_source_bytes as u64,
        what,
        deadline,
    )?;
    let mut files = Vec::with_capacity(blobs.len());
    for ((path, _), body) in blobs.into_iter().zip(bodies) {
        let text = String::from_utf8(body)
            .map_err(|_| RepositoryError::corrupt(format!("{what}: {path} is not UTF-8")))?;
        files.push(SourceFile::new(path, text));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    check_source(&files).map_err(|(reason, path, rule)| {
        RepositoryError::corrupt(format!(
            "{what}: {path}: outside the supported subset ({}): {rule}",
            reason.code()
        ))
    })?;
    // Rebuilding from the files must give the tree that was read: a stored tree in any other
    // shape (an empty directory, say) never qualifies.
    if build_tree(&files).tree != tree {
        return Err(RepositoryError::corrupt(format!(
            "{what}: tree {tree} is not the tree of its own files"
        )));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_trees_match_git_layout() {
        let files = vec![
            SourceFile::new("a-b".into(), "1".into()),
            SourceFile::new("a/x".into(), "2".into()),
            SourceFile::new("a/y/z".into(), "3".into()),
        ];
        let built = build_tree(&files);
        // root, a, a/y, and three blobs
        assert_eq!(built.objects.len(), 6);
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
        assert_eq!(
            check_text(&"a".repeat(REPOSITORY_LIMITS.max_file_bytes + 1))
                .unwrap_err()
                .0,
            Rejection::FileTooLarge
        );
        assert!(check_text(&"a".repeat(REPOSITORY_LIMITS.max_file_bytes)).is_ok());
    }
}
