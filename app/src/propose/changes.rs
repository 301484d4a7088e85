//! The changes of a source, whatever it is, turned into a proposal's edits: each path's new
//! entry compared with the base's, its prior the base entry's digest, the form of the edit
//! (text, bytes, link, mode, deletion) chosen from the bytes.

use sf_host::assurance::trusted::TreeEntry as Kind;
use sf_host::canonical::Digest;
use sf_host::contracts::tree_path::EntryMode as Mode;
use sf_host::git_object::ObjectId;
use sf_host::repository::{FileEdit, FileMode, Repository, is_edit_text};

use crate::error::{AppError, repository_error};

/// One path's entry after the change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum After {
    /// A regular file (`Regular` or `Executable`) or a link (`Symlink`: the bytes are its
    /// target).
    Entry(Mode, Vec<u8>),
    /// No entry.
    Absent,
}

/// One path a source changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The path in the tree.
    pub path: String,
    /// Its entry after the change.
    pub after: After,
}

/// The `--only` paths, without a trailing `/`; an empty or absolute one is refused.
pub(super) fn check_only(only: &[String]) -> Result<Vec<String>, AppError> {
    only.iter()
        .map(|path| {
            let trimmed = path.trim_end_matches('/');
            if trimmed.is_empty() || trimmed.starts_with('/') {
                Err(AppError::coded(
                    "invalid-input",
                    format!("--only {path:?}"),
                    "is a path in the tree, relative to its root (a file or a directory)",
                ))
            } else {
                Ok(trimmed.to_owned())
            }
        })
        .collect()
}

/// Whether `path` is one of `only` or below one.
pub(super) fn under(path: &str, only: &[String]) -> bool {
    only.iter().any(|keep| {
        path == keep
            || path
                .strip_prefix(keep.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// The changes at or under `only` (all when it is empty), and the paths of the others.
pub(super) fn keep_only(changes: Vec<Change>, only: &[String]) -> (Vec<Change>, Vec<String>) {
    if only.is_empty() {
        return (changes, Vec::new());
    }
    let (kept, left): (Vec<Change>, Vec<Change>) = changes
        .into_iter()
        .partition(|change| under(&change.path, only));
    (kept, left.into_iter().map(|change| change.path).collect())
}

/// The edits that make the base `base` hold `changes`: a change that leaves a path as the
/// base holds it is no edit.
pub(super) fn edits(
    repository: &Repository,
    base: &ObjectId,
    changes: Vec<Change>,
) -> Result<Vec<FileEdit>, AppError> {
    let tree = repository
        .tree_at(base)
        .map_err(|error| repository_error(&format!("the Slice's base {base}"), &error))?;
    let mut edits = Vec::new();
    for change in changes {
        let failed =
            |error| repository_error(&format!("the Slice's base {base}: {}", change.path), &error);
        if tree.find(&change.path).map_err(failed)? == Some(Kind::Directory) {
            return Err(AppError::coded(
                "invalid-input",
                &change.path,
                "is a directory in the Slice's base, which the change would make a file or \
                 remove: make the change against the Slice's base",
            ));
        }
        let before = tree.read(&change.path).map_err(failed)?;
        if let Some(edit) = edit(change, before)? {
            edits.push(edit);
        }
    }
    Ok(edits)
}

/// The edit from `before` (the base's entry) to `change`, or `None` when they are the same.
fn edit(change: Change, before: Option<(Mode, Vec<u8>)>) -> Result<Option<FileEdit>, AppError> {
    let prior = before.as_ref().map(|(_, bytes)| Digest::of(bytes));
    let path = change.path;
    let edit = match (change.after, before) {
        (After::Absent, None) => {
            return Err(AppError::coded(
                "invalid-input",
                path,
                "the change removes it, and the Slice's base holds no entry there: make the \
                 change against the Slice's base",
            ));
        }
        (After::Absent, Some(_)) => FileEdit::text(path, prior, None),
        (After::Entry(mode, bytes), Some((was, old))) if mode == was && bytes == old => {
            return Ok(None);
        }
        (After::Entry(Mode::Symlink, target), _) => {
            let target = String::from_utf8(target).map_err(|_| {
                AppError::coded(
                    "invalid-input",
                    &path,
                    "is a symbolic link whose target is not UTF-8, which a tree cannot hold",
                )
            })?;
            FileEdit {
                path,
                prior,
                text: None,
                bytes: None,
                link: Some(target),
                mode: None,
            }
        }
        (After::Entry(mode, bytes), Some((Mode::Regular | Mode::Executable, old)))
            if bytes == old =>
        {
            FileEdit {
                path,
                prior,
                text: None,
                bytes: None,
                link: None,
                mode: Some(FileMode(mode)),
            }
        }
        (After::Entry(mode, bytes), before) => {
            // An edited file keeps its mode, and a new one (or one replacing a link) is
            // 100644, unless the edit says otherwise.
            let kept = match before {
                Some((Mode::Regular | Mode::Executable, _)) => before.map(|(mode, _)| mode),
                _ => Some(Mode::Regular),
            };
            let mut edit = content_edit(path, prior, bytes);
            if kept != Some(mode) {
                edit.mode = Some(FileMode(mode));
            }
            edit
        }
    };
    Ok(Some(edit))
}

/// A regular file's edit: `text` when the bytes are text a proposal may carry (UTF-8, no NUL,
/// not a Git LFS pointer), `bytes` otherwise.
fn content_edit(path: String, prior: Option<Digest>, bytes: Vec<u8>) -> FileEdit {
    match String::from_utf8(bytes) {
        Ok(text) if is_edit_text(&text) => FileEdit::text(path, prior, Some(text)),
        Ok(text) => FileEdit::bytes(path, prior, text.into_bytes()),
        Err(error) => FileEdit::bytes(path, prior, error.into_bytes()),
    }
}
