//! The one error type of the crate: what is wrong with a diff or with applying it, with the
//! file, hunk and line it concerns, and (in its message) how to fix it.

/// Why a diff was refused. Nothing is applied when any of these is returned.
///
/// `line` fields count lines of the diff (1-based); `hunk` fields count a file's hunks
/// (1-based); paths are the diff's paths (refused paths are shown with control bytes and
/// invalid UTF-8 escaped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// The diff is larger than [`crate::Limits::max_diff_bytes`].
    #[error(
        "the diff is {size} bytes, more than the limit of {limit}: split the change into smaller diffs"
    )]
    DiffTooLarge {
        /// The diff's size in bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The diff patches more files than [`crate::Limits::max_files`].
    #[error("the diff patches more than {limit} files: split the change into smaller diffs")]
    TooManyFiles {
        /// The limit.
        limit: usize,
    },
    /// A file (declared or produced) is larger than [`crate::Limits::max_file_bytes`].
    #[error(
        "{path}: the file would be {size} bytes, more than the limit of {limit}: such a file cannot be proposed as a diff"
    )]
    FileTooLarge {
        /// The file.
        path: String,
        /// Its (declared or produced) size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// No `diff --git` patch was found.
    #[error(
        "the input holds no `diff --git` patch: give the output of `git diff --binary BASE` (or `git format-patch --binary`)"
    )]
    NoPatches,
    /// A patch in another format than Git's (`---`/`+++` without `diff --git`).
    #[error(
        "line {line}: a patch without a `diff --git` header: only Git's diff format is accepted; make the diff with `git diff --binary BASE`"
    )]
    NotGitDiff {
        /// The diff line of its `---` line.
        line: usize,
    },
    /// The diff is not well formed at this line.
    #[error(
        "line {line}: corrupt diff: {what}; give the unedited output of `git diff --binary BASE`"
    )]
    Corrupt {
        /// The diff line.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// A hunk is not well formed (its header, its counts or its lines).
    #[error(
        "{path}: hunk #{hunk} (line {line}): {what}; give the unedited output of `git diff --binary BASE`"
    )]
    BadHunk {
        /// The file.
        path: String,
        /// The hunk (1-based).
        hunk: usize,
        /// The diff line.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// A path sf never writes: absolute, with `..`, `.` or empty components, a `.git`
    /// component in any case, NUL or other control bytes, or not UTF-8.
    #[error("line {line}: refused path {path:?}: {reason}")]
    UnsafePath {
        /// The diff line.
        line: usize,
        /// The path, escaped.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The names of one file's patch disagree (`diff --git a/X b/Y`, `---`, `+++`,
    /// `rename`/`copy` lines).
    #[error(
        "line {line}: the patch names {first:?} and {second:?} for the same side of one file; give the unedited output of `git diff --binary BASE`"
    )]
    NameMismatch {
        /// The diff line.
        line: usize,
        /// One name.
        first: String,
        /// The name that disagrees with it.
        second: String,
    },
    /// A mode sf does not carry (a submodule, a directory) or that is not a Git mode.
    #[error(
        "line {line}: mode {mode} is not supported: only regular files (100644), executables (100755) and symbolic links (120000) can be patched"
    )]
    UnsupportedMode {
        /// The diff line.
        line: usize,
        /// The mode as written.
        mode: String,
    },
    /// `Binary files a/X and b/Y differ`: the diff carries no data for a binary file.
    #[error(
        "{path}: the diff says the binary file differs but carries no data: make the diff with `git diff --binary BASE`"
    )]
    BinaryWithoutData {
        /// The file.
        path: String,
    },
    /// A `GIT binary patch` that cannot be decoded or applied.
    #[error(
        "{path}: corrupt binary patch: {what}; make the diff against the Slice's base with `git diff --binary BASE`"
    )]
    CorruptBinary {
        /// The file.
        path: String,
        /// What is wrong.
        what: String,
    },
    /// A path patched more than once (or removed and changed by two patches).
    #[error(
        "{path}: patched more than once in one diff: give one patch per file, as `git diff` does"
    )]
    Duplicate {
        /// The path.
        path: String,
    },
    /// A file is created where the base already has an entry.
    #[error(
        "{path}: the diff creates it but the base already has it: make the diff against the Slice's base with `git diff --binary BASE`"
    )]
    AlreadyExists {
        /// The path.
        path: String,
    },
    /// A file is changed, renamed, copied or deleted but the base has no entry there.
    #[error(
        "{path}: the diff changes it but the base has no such file: make the diff against the Slice's base with `git diff --binary BASE`"
    )]
    Missing {
        /// The path.
        path: String,
    },
    /// The pre-image's blob id does not start with the `index` line's old id.
    #[error(
        "{path}: the diff was made against blob {expected} but the base holds blob {actual}: make the diff against the Slice's base with `git diff --binary BASE`"
    )]
    WrongBase {
        /// The path.
        path: String,
        /// The id in the `index` line.
        expected: String,
        /// The base entry's blob id.
        actual: String,
    },
    /// The base entry's mode is not the diff's old mode.
    #[error(
        "{path}: the diff expects mode {expected} but the base has {actual}: make the diff against the Slice's base with `git diff --binary BASE`"
    )]
    ModeMismatch {
        /// The path.
        path: String,
        /// The diff's old mode.
        expected: String,
        /// The base's mode.
        actual: String,
    },
    /// A file becomes a symbolic link (or the reverse) in one patch; Git writes such a change as
    /// a deletion and a creation.
    #[error(
        "{path}: one patch changes the entry's type (file to symbolic link or back): give the unedited output of `git diff --binary BASE`"
    )]
    TypeChange {
        /// The path.
        path: String,
    },
    /// A hunk's context or removed lines are not in the pre-image.
    #[error(
        "{path}: hunk #{hunk} does not apply: at line {line} the diff expects {expected:?} but the file has {actual:?}; make the diff against the Slice's base with `git diff --binary BASE`"
    )]
    HunkMismatch {
        /// The path.
        path: String,
        /// The hunk (1-based).
        hunk: usize,
        /// The line of the file (1-based, as patched by the earlier hunks) where they first differ.
        line: u64,
        /// The diff's line (lossy UTF-8, at most 200 bytes).
        expected: String,
        /// The file's line (lossy UTF-8, at most 200 bytes), or `(end of file)`.
        actual: String,
    },
    /// A deletion whose hunks leave content behind.
    #[error(
        "{path}: the diff deletes the file but its hunks leave content: make the diff against the Slice's base with `git diff --binary BASE`"
    )]
    DeletionLeavesContent {
        /// The path.
        path: String,
    },
    /// The applied result's blob id does not start with the `index` line's new id.
    #[error(
        "{path}: applying the diff gave blob {actual}, not the blob {expected} its index line names; give the unedited output of `git diff --binary BASE`"
    )]
    ResultMismatch {
        /// The path.
        path: String,
        /// The id in the `index` line.
        expected: String,
        /// The result's blob id.
        actual: String,
    },
    /// A symbolic link whose target is empty or holds a NUL byte.
    #[error("{path}: a symbolic link's target must be non-empty and hold no NUL byte")]
    BadSymlink {
        /// The path.
        path: String,
    },
    /// A path under a symbolic link, or under an entry that is a file, in the base or the
    /// result.
    #[error(
        "{path}: refused: {prefix} {reason}, so {path} cannot be written beneath it; change the link or file in a diff of its own"
    )]
    PathConflict {
        /// The path.
        path: String,
        /// Its leading directory that is not a directory.
        prefix: String,
        /// What that prefix is, and where.
        reason: &'static str,
    },
    /// The base could not be read.
    #[error("{path}: reading the base failed: {message}")]
    Base {
        /// The path.
        path: String,
        /// The reader's message.
        message: String,
    },
}
