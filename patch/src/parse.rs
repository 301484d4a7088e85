//! Splitting a diff into its files' patches: everything outside `diff --git` sections (mail
//! headers, commit messages, diffstats, the `-- ` signature) is skipped, but a patch in another
//! format is refused rather than silently dropped.

use crate::binary::parse_binary;
use crate::header::Header;
use crate::hunk::parse_hunks;
use crate::lines::{Lines, trim_end};
use crate::{Body, FilePatch, Limits, Operation, PatchError};

/// Parses a diff with the default [`Limits`].
pub fn parse_diff(diff: &[u8]) -> Result<Vec<FilePatch>, PatchError> {
    parse_diff_with(diff, &Limits::default())
}

/// Parses a diff (`git diff [--binary]`, `git format-patch` output) into its files' patches,
/// in the diff's order, within `limits`.
pub fn parse_diff_with(diff: &[u8], limits: &Limits) -> Result<Vec<FilePatch>, PatchError> {
    if diff.len() as u64 > limits.max_diff_bytes {
        return Err(PatchError::DiffTooLarge {
            size: diff.len() as u64,
            limit: limits.max_diff_bytes,
        });
    }
    let mut lines = Lines::new(diff);
    let mut patches = Vec::new();
    while let Some(line) = lines.peek() {
        if line.starts_with(b"diff --git ") {
            if patches.len() >= limits.max_files {
                return Err(PatchError::TooManyFiles {
                    limit: limits.max_files,
                });
            }
            patches.push(parse_file(&mut lines, limits)?);
        } else {
            refuse_other_formats(&lines)?;
            lines.next_line();
        }
    }
    if patches.is_empty() {
        return Err(PatchError::NoPatches);
    }
    Ok(patches)
}

/// A `---` line followed by a `+++` line outside a `diff --git` section is a unified diff Git
/// did not write (or a section whose header was cut off).
fn refuse_other_formats(lines: &Lines) -> Result<(), PatchError> {
    let minus = lines.peek().is_some_and(|l| l.starts_with(b"--- "));
    let plus = lines.peek_second().is_some_and(|l| l.starts_with(b"+++ "));
    if minus && plus {
        return Err(PatchError::NotGitDiff {
            line: lines.number(),
        });
    }
    Ok(())
}

/// One `diff --git` section: its header, then hunks, a binary patch, or nothing.
fn parse_file(lines: &mut Lines, limits: &Limits) -> Result<FilePatch, PatchError> {
    let line = lines.number();
    let head = Header::parse(lines)?.resolve()?;
    let path = head
        .new_path
        .clone()
        .or(head.old_path.clone())
        .unwrap_or_default();
    let next = lines.peek().map(trim_end);
    let body = match next {
        Some(l) if l.starts_with(b"@@ ") => Body::Text(parse_hunks(lines, &path)?),
        Some(b"GIT binary patch") => Body::Binary(parse_binary(lines, &path, limits)?),
        Some(l) if l.starts_with(b"Binary files ") && l.ends_with(b" differ") => {
            lines.next_line();
            Body::BinaryWithoutData
        }
        _ => Body::None,
    };
    let changes_metadata = head.operation != Operation::Modify || head.old_mode != head.new_mode;
    let corrupt = |what: &str| PatchError::Corrupt {
        line,
        what: format!("{path}: {what}"),
    };
    if body == Body::None && head.has_names {
        return Err(corrupt("`---` and `+++` lines without hunks"));
    }
    if body == Body::None && !changes_metadata {
        return Err(corrupt("a patch that changes nothing"));
    }
    if head.has_names && !matches!(body, Body::Text(_)) {
        return Err(corrupt("`---` and `+++` lines before a binary patch"));
    }
    Ok(FilePatch {
        operation: head.operation,
        old_path: head.old_path,
        new_path: head.new_path,
        old_mode: head.old_mode,
        new_mode: head.new_mode,
        old_id: head.old_id,
        new_id: head.new_id,
        body,
        line,
    })
}
