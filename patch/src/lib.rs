//! sf-patch: parses a Git diff and applies it to a base tree, giving each changed path's new
//! state exactly as `git apply` would, or a typed [`PatchError`] and nothing.
//!
//! Supported, as Git writes them (`git diff`, `git diff --binary`, `git format-patch`, whose
//! mail headers, message, diffstat and `-- ` signature are skipped):
//! - `diff --git a/X b/Y` sections with their extended headers: `new file mode`,
//!   `deleted file mode`, `old mode`/`new mode` (a mode-only change has no hunks),
//!   `rename from/to`, `copy from/to`, `similarity index`/`dissimilarity index`, and `index`,
//!   whose old blob id (full or abbreviated) must be the pre-image's Git blob id and whose new
//!   id must be the result's: a diff made against another base is refused;
//! - `---`/`+++` names and `/dev/null`; names quoted C-style (`"a/sp ace\t\303\251"`);
//! - unified hunks with context, `-`, `+` lines and `\ No newline at end of file` on either
//!   side; context must match exactly, byte for byte (no fuzz, no whitespace leniency); a hunk
//!   is found at another line when the file moved (Git's offsets, nearest first, below before
//!   above), but only after the previous hunk, as `git diff` orders them; one that starts at
//!   line 1 (or 0) must match at the start, and one without trailing context at the end;
//! - regular files, executables and symbolic links (mode 120000, the content being the target);
//!   a type change is a deletion and a creation of the same path, as Git writes it;
//! - `GIT binary patch` with `literal` and `delta` hunks (base85, zlib, Git's pack delta); the
//!   reverse hunk after it is checked to give the pre-image back.
//!
//! Refused, with a typed error and nothing applied:
//! - `Binary files ... differ` (no data: make the diff with `--binary`); submodules (160000)
//!   and other modes; a type change inside one patch; patches in other formats than Git's;
//! - a path patched twice (only a deletion and a creation of one path may go together); a
//!   creation where the base has the path, a change or deletion where it has none; a pre-image
//!   or result whose blob id is not the `index` line's; a mode that is not the base's; a hunk
//!   that does not match; a deletion that leaves content; an empty or NUL-holding link target;
//! - paths that are absolute, have empty, `.`, `..` or `.git` (any case) components, hold NUL
//!   or control bytes other than tab, are not UTF-8, or are longer than 4096 bytes; names that
//!   disagree between the `diff --git`, `---`/`+++` and `rename`/`copy` lines;
//! - a path beneath a symbolic link, in the base (even one the diff deletes: replacing a link by
//!   a directory takes two diffs) or in the result, and a path beneath a file (one that would be
//!   both a file and a directory) — checked before any content is read from the base;
//! - hunk headers whose numbers overflow or whose counts do not match the lines that follow;
//!   binary hunks whose declared size passes the limit (checked before inflating; inflation
//!   stops one byte past the declared size), that are truncated or not base85, do not inflate
//!   to their declared size, or whose delta copies past its source, writes past its declared
//!   size or has an overflowing size; more files, a larger diff or a larger file than the
//!   [`Limits`]; failed hunk searches past a per-file budget.
//!
//! Not known to this crate: what a directory of the base holds ([`BaseFiles`] is read by path),
//! so a file created where the base has a directory is not refused here; and where a link
//! points (a target such as `/etc` is content like any other: only writing beneath a link is
//! refused).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod apply;
mod base;
mod binary;
mod blob_id;
mod delta;
mod error;
mod file_patch;
mod header;
mod hunk;
mod lines;
mod parse;
mod path;
mod plan;
mod text;

pub use apply::apply_patches;
pub use error::PatchError;
pub use file_patch::{
    BinaryHunk, BinaryPatch, Body, FilePatch, Hunk, HunkLine, LineKind, Operation,
};
pub use parse::{parse_diff, parse_diff_with};

/// A file's mode in Git's tree model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// 100644.
    Regular,
    /// 100755.
    Executable,
    /// 120000: the content is the link's target.
    Symlink,
}

impl Mode {
    /// The mode as Git writes it (`100644`, `100755`, `120000`).
    pub fn octal(self) -> &'static str {
        match self {
            Mode::Regular => "100644",
            Mode::Executable => "100755",
            Mode::Symlink => "120000",
        }
    }
}

/// A base entry: its bytes (a link's target for Symlink) and its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseEntry {
    /// The file's bytes, or the link's target.
    pub content: Vec<u8>,
    /// Its mode.
    pub mode: Mode,
}

/// Where the pre-image comes from: the base tree, read by path (None = no entry there, which
/// includes a path that is a directory).
pub trait BaseFiles {
    /// The entry at `path` (`/`-separated, relative to the tree's root).
    fn read(&mut self, path: &str) -> Result<Option<BaseEntry>, String>;
}

/// The post-image of one path: a file with its bytes and mode (Regular/Executable), a link
/// (Symlink, content = target), or no entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// The path holds this entry.
    Entry(BaseEntry),
    /// The path holds no entry.
    Absent,
}

/// One changed path and its post-image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The path, `/`-separated, relative to the tree's root.
    pub path: String,
    /// Its new state.
    pub after: After,
}

/// Bounds on what a diff may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest diff read, in bytes.
    pub max_diff_bytes: u64,
    /// The largest file a patch may produce (or a binary hunk declare), in bytes.
    pub max_file_bytes: u64,
    /// The most file patches in one diff.
    pub max_files: usize,
}

impl Default for Limits {
    /// 64 MiB of diff, 100 MiB a file, 100,000 files.
    fn default() -> Self {
        Limits {
            max_diff_bytes: 64 << 20,
            max_file_bytes: 100 << 20,
            max_files: 100_000,
        }
    }
}

/// Parses `diff` (the output of `git diff`, `git diff --binary`, `git format-patch`: mail
/// headers and the trailing `-- \n2.x` signature are skipped) and applies every file's patch to
/// `base`; the changes sorted by path, each path once. Nothing partial: any error and no result.
pub fn apply_diff(
    diff: &[u8],
    base: &mut dyn BaseFiles,
    limits: &Limits,
) -> Result<Vec<Changed>, PatchError> {
    let patches = parse_diff_with(diff, limits)?;
    apply_patches(&patches, base, limits)
}
