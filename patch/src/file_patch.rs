//! The parsed form of a diff: one [`FilePatch`] per `diff --git` section, with its names,
//! modes, blob ids and body (text hunks or a binary patch).

use crate::Mode;

/// What a file's patch does to the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Changes the content and/or mode of `old_path` (= `new_path`).
    Modify,
    /// Creates `new_path` (`new file mode`, or `--- /dev/null`).
    Create,
    /// Deletes `old_path` (`deleted file mode`, or `+++ /dev/null`).
    Delete,
    /// Moves `old_path` to `new_path`, with the hunks applied (`rename from`/`rename to`).
    Rename,
    /// Writes `new_path` as `old_path` with the hunks applied; `old_path` stays
    /// (`copy from`/`copy to`).
    Copy,
}

/// One file's patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// What it does.
    pub operation: Operation,
    /// The pre-image's path (None when the file is created).
    pub old_path: Option<String>,
    /// The post-image's path (None when the file is deleted).
    pub new_path: Option<String>,
    /// The mode the diff says the pre-image has (`old mode`, `deleted file mode`, or the
    /// mode of the `index` line), when it says one.
    pub old_mode: Option<Mode>,
    /// The post-image's mode (`new mode`, `new file mode`, or the `index` line's), when the
    /// diff says one; otherwise the pre-image's mode is kept.
    pub new_mode: Option<Mode>,
    /// The `index` line's pre-image blob id (full or abbreviated, lowercase hex).
    pub old_id: Option<String>,
    /// The `index` line's post-image blob id (full or abbreviated, lowercase hex).
    pub new_id: Option<String>,
    /// The hunks or binary patch.
    pub body: Body,
    /// The diff line of its `diff --git` header (1-based).
    pub line: usize,
}

impl FilePatch {
    /// The path this patch is about: the new path, or the old one for a deletion.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or_default()
    }
}

/// The content change of a file's patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// No content change (mode change, pure rename or copy, empty file created or deleted).
    None,
    /// Unified hunks.
    Text(Vec<Hunk>),
    /// A `GIT binary patch`.
    Binary(BinaryPatch),
    /// `Binary files a/X and b/Y differ`: a change without its data (refused when applied).
    BinaryWithoutData,
}

/// One `@@ -a,b +c,d @@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// `a`: the first pre-image line (0 when the pre-image part is empty at the start).
    pub old_start: u64,
    /// `b`: the number of pre-image lines (context and removed).
    pub old_count: u64,
    /// `c`: the first post-image line.
    pub new_start: u64,
    /// `d`: the number of post-image lines (context and added).
    pub new_count: u64,
    /// The hunk's lines, in order.
    pub lines: Vec<HunkLine>,
    /// The diff line of its `@@` header (1-based).
    pub line: usize,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkLine {
    /// Context, removed or added.
    pub kind: LineKind,
    /// The line's bytes, with its `\n` unless `\ No newline at end of file` followed it.
    pub text: Vec<u8>,
}

/// Which side(s) of the file a hunk line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// ` `: in both.
    Context,
    /// `-`: in the pre-image only.
    Removed,
    /// `+`: in the post-image only.
    Added,
}

/// A `GIT binary patch`: the forward hunk, and the reverse one Git writes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryPatch {
    /// Turns the pre-image into the post-image.
    pub forward: BinaryHunk,
    /// Turns the post-image back into the pre-image (checked when present).
    pub reverse: Option<BinaryHunk>,
}

/// A binary hunk, inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinaryHunk {
    /// `literal N`: the whole post-image.
    Literal(Vec<u8>),
    /// `delta N`: a Git pack delta against the pre-image.
    Delta(Vec<u8>),
}
