//! A Git diff as a proposal's source (`git diff --binary`, `git format-patch`): applied to the
//! Slice's base by sf-patch as `git apply` would (every hunk's context exact, the `index`
//! lines' blob ids checked, binary patches, renames, modes and links), the base read by
//! path. A diff that does not apply is refused whole, naming the file, the hunk and the first
//! line that differs.

use std::io::Read as _;
use std::path::Path;

use sf_host::contracts::tree_path::EntryMode as Mode;
use sf_host::git_object::ObjectId;
use sf_host::repository::{Repository, TreeAt};
use sf_patch::{BaseEntry, BaseFiles, Limits, apply_patches, parse_diff_with};

use super::changes::{After, Change, under};
use crate::error::{AppError, repository_error};
use crate::input::read_input_within;

/// The largest diff read.
pub const MAX_DIFF_BYTES: u64 = 64 * 1024 * 1024;

/// The changes the diff in `file` (`-`: standard input) makes to the base `base`, its files
/// at or under `only` (all when empty; a rename or copy is kept when either of its paths
/// is), and the paths of the files left out.
pub(super) fn changes(
    repository: &Repository,
    base: &ObjectId,
    file: &Path,
    only: &[String],
) -> Result<(Vec<Change>, Vec<String>), AppError> {
    let diff = read_diff(file)?;
    let limits = repository.identity().settings().limits();
    let limits = Limits {
        max_diff_bytes: MAX_DIFF_BYTES,
        max_file_bytes: limits.max_file_bytes as u64,
        max_files: limits.max_files,
    };
    let named = format!("--diff {}", file.display());
    let refused = |error: sf_patch::PatchError| {
        AppError::new(
            "diff-refused",
            format!("{named}: {error} (nothing was written)"),
        )
    };
    let patches = parse_diff_with(&diff, &limits).map_err(refused)?;
    let (kept, left): (Vec<_>, Vec<_>) = patches.into_iter().partition(|patch| {
        only.is_empty()
            || [&patch.old_path, &patch.new_path]
                .into_iter()
                .flatten()
                .any(|path| under(path, only))
    });
    let left_out = left.iter().map(|patch| patch.path().to_owned()).collect();
    let tree = repository
        .tree_at(base)
        .map_err(|error| repository_error(&format!("the Slice's base {base}"), &error))?;
    let mut files = BaseTree { tree: &tree };
    let changed = apply_patches(&kept, &mut files, &limits).map_err(refused)?;
    let changes = changed
        .into_iter()
        .map(|changed| Change {
            path: changed.path,
            after: match changed.after {
                sf_patch::After::Entry(entry) => After::Entry(mode_of(entry.mode), entry.content),
                sf_patch::After::Absent => After::Absent,
            },
        })
        .collect();
    Ok((changes, left_out))
}

/// The diff's bytes, within [`MAX_DIFF_BYTES`].
fn read_diff(file: &Path) -> Result<Vec<u8>, AppError> {
    if file != Path::new("-") {
        return read_input_within(file, "--diff", MAX_DIFF_BYTES);
    }
    let mut diff = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_DIFF_BYTES + 1)
        .read_to_end(&mut diff)
        .map_err(|error| {
            AppError::new(
                "unreadable-input",
                format!("--diff -: standard input: {error}"),
            )
        })?;
    if diff.len() as u64 > MAX_DIFF_BYTES {
        return Err(AppError::new(
            "too-large",
            format!("--diff -: a diff holds at most {MAX_DIFF_BYTES} bytes"),
        ));
    }
    Ok(diff)
}

/// The Slice's base as sf-patch reads it: a file or link by path, nothing for a directory
/// (sf-patch asks for the directories above each path, to refuse one beneath a link; a file
/// made over a directory is refused with the edits), an error for a read that fails.
struct BaseTree<'t, 'r> {
    tree: &'t TreeAt<'r>,
}

impl BaseFiles for BaseTree<'_, '_> {
    fn read(&mut self, path: &str) -> Result<Option<BaseEntry>, String> {
        let read = self.tree.read(path).map_err(|error| error.to_string())?;
        Ok(read.map(|(mode, content)| BaseEntry {
            content,
            mode: match mode {
                Mode::Regular => sf_patch::Mode::Regular,
                Mode::Executable => sf_patch::Mode::Executable,
                Mode::Symlink => sf_patch::Mode::Symlink,
            },
        }))
    }
}

fn mode_of(mode: sf_patch::Mode) -> Mode {
    match mode {
        sf_patch::Mode::Regular => Mode::Regular,
        sf_patch::Mode::Executable => Mode::Executable,
        sf_patch::Mode::Symlink => Mode::Symlink,
    }
}
