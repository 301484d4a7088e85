//! The repository's typed errors: a stable code each, the input at fault and the rule.

use std::path::PathBuf;

use crate::contracts::ObjectStoreError;
use crate::contracts::tree_path::TreeRule;

/// Why a proposal was rejected. Each reason has a stable code; a rejected proposal wrote
/// nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rejection {
    /// The proposal is not well-formed JSON (syntax, numbers, nesting, size).
    InvalidJson,
    /// The proposal is not valid UTF-8.
    InvalidUtf8,
    /// A key appears twice in one object.
    DuplicateKey,
    /// A field that the record does not declare, including a claimed `passed` or `verified`.
    UnknownField,
    /// A declared field is absent.
    MissingField,
    /// A field has the wrong JSON type or an invalid value (a malformed digest, say).
    WrongType,
    /// No edits at all.
    NoEdits,
    /// More edits than the limit.
    TooManyEdits,
    /// `prior` is null for a deletion or a mode change: an edit that does nothing.
    EmptyEdit,
    /// `prior` names a digest other than the current file's.
    WrongPrior,
    /// `prior` is given but no such file exists.
    AbsentFile,
    /// `prior` is null but the file exists.
    FileExists,
    /// The edit leaves the entry as it is (the same mode and bytes).
    NoChange,
    /// A path appears twice (compared ignoring case).
    DuplicatePath,
    /// A path is outside the frozen scope.
    OutsideScope,
    /// A path the Slice protects (its tests, its harness's configuration): no proposal may
    /// create, change or delete it, even inside the scope.
    ProtectedPath,
    /// A path, or the tree the edits leave, breaks a rule of Git's tree model (a path rule,
    /// a path beneath a file or link, a case collision, a link that leaves the tree, …).
    Tree(TreeRule),
    /// An edit creates a symbolic link named `.gitattributes`, `.gitignore` or `.mailmap`
    /// (Git never follows them, so they are never useful and only confuse).
    SymlinkedDotFile,
    /// An entry the tree model does not hold: a submodule, a mode Git does not write, a
    /// name that is not UTF-8, an empty directory.
    UnsupportedEntry,
    /// Text holds a NUL character.
    NulByte,
    /// Text is a Git LFS pointer.
    LfsPointer,
    /// A file larger than the per-file limit.
    FileTooLarge,
    /// The resulting source holds more files than the limit.
    TooManyFiles,
    /// The resulting source holds more bytes than the limit.
    SourceTooLarge,
    /// A file's content is not UTF-8 where text is required.
    NotText,
    /// The proposal's paths, contents and link targets together exceed the Slice's bound,
    /// or its document the largest proposal document.
    ProposalTooLarge,
    /// An edit says more than one change (text and bytes, a link with a mode, a deletion
    /// with anything else).
    AmbiguousEdit,
    /// An edit's change does not fit the entry it names (a mode for a symbolic link).
    WrongKind,
    /// The proposal's message breaks a rule (title, body).
    InvalidMessage,
    /// The proposal's author breaks a rule (name, email, time, offset).
    InvalidAuthor,
    /// An edit adds a construct the Slice forbids (forcing the process's exit from an exit
    /// handler, patching the test framework): its new content holds it more often than the
    /// entry it replaces.
    ForbiddenConstruct,
}

impl Rejection {
    /// The stable kebab-case code of the reason.
    pub fn code(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid-json",
            Self::InvalidUtf8 => "invalid-utf8",
            Self::DuplicateKey => "duplicate-key",
            Self::UnknownField => "unknown-field",
            Self::MissingField => "missing-field",
            Self::WrongType => "wrong-type",
            Self::NoEdits => "no-edits",
            Self::TooManyEdits => "too-many-edits",
            Self::EmptyEdit => "empty-edit",
            Self::WrongPrior => "wrong-prior",
            Self::AbsentFile => "absent-file",
            Self::FileExists => "file-exists",
            Self::NoChange => "no-change",
            Self::DuplicatePath => "duplicate-path",
            Self::OutsideScope => "outside-scope",
            Self::ProtectedPath => "protected-path",
            Self::ForbiddenConstruct => "forbidden-construct",
            Self::Tree(rule) => rule.code(),
            Self::SymlinkedDotFile => "symlinked-dot-file",
            Self::UnsupportedEntry => "unsupported-entry",
            Self::NulByte => "nul-byte",
            Self::LfsPointer => "lfs-pointer",
            Self::FileTooLarge => "file-too-large",
            Self::TooManyFiles => "too-many-files",
            Self::SourceTooLarge => "source-too-large",
            Self::NotText => "not-text",
            Self::ProposalTooLarge => "proposal-too-large",
            Self::AmbiguousEdit => "ambiguous-edit",
            Self::WrongKind => "wrong-kind",
            Self::InvalidMessage => "invalid-message",
            Self::InvalidAuthor => "invalid-author",
        }
    }
}

/// A repository operation's failure. The code says what kind; the fields name the input at
/// fault. Every error from `create_repository`, `seal` and `export_candidate` before their
/// first write means nothing was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RepositoryError {
    /// An argument breaks a rule; nothing was read or written.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// The argument or field at fault (`productId`, `files: <path>`, ...).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// A proposal was rejected; nothing was written.
    #[error("proposal rejected ({}): {input}: {detail}", reason.code())]
    Rejected {
        /// Why, with its stable code.
        reason: Rejection,
        /// The part of the proposal at fault (a field or an edit's path).
        input: String,
        /// What about it broke the rule.
        detail: String,
    },
    /// The path to create exists; sf never adopts it.
    #[error("{} already exists; sf never adopts an existing path: choose a new path", path.display())]
    Exists {
        /// The repository path that was asked for.
        path: PathBuf,
    },
    /// The owned root is missing, replaced or tampered with, or the store cannot be used.
    #[error("repository unavailable: {reason}")]
    Unavailable {
        /// What made the root or the store unusable.
        reason: String,
    },
    /// The Candidate or object asked for does not exist.
    #[error("not found: {what}")]
    Missing {
        /// The Candidate, commit or object that is absent.
        what: String,
    },
    /// Stored data failed verification; it is reported, never repaired.
    #[error("corrupt: {what}")]
    Corrupt {
        /// The stored object or ref that failed, and how.
        what: String,
    },
    /// A different record already holds this identity.
    #[error("conflict: {what}")]
    Conflict {
        /// What already holds another record (an action occurrence's intent, say) and which.
        what: String,
    },
    /// Git (or the store's tool) failed or did not answer in time.
    #[error("git failed: {detail}")]
    GitFailed {
        /// The operation that failed and what the store reported.
        detail: String,
    },
}

impl RepositoryError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
            Self::Rejected { .. } => "rejected",
            Self::Exists { .. } => "exists",
            Self::Unavailable { .. } => "unavailable",
            Self::Missing { .. } => "missing",
            Self::Corrupt { .. } => "corrupt",
            Self::Conflict { .. } => "conflict",
            Self::GitFailed { .. } => "git-failed",
        }
    }

    /// The rejection reason, for a rejected proposal.
    pub fn rejection(&self) -> Option<Rejection> {
        match self {
            Self::Rejected { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    #[doc(hidden)]
    pub fn invalid(input: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::InvalidInput {
            input: input.into(),
            rule: rule.into(),
        }
    }

    pub(crate) fn rejected(
        reason: Rejection,
        input: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self::Rejected {
            reason,
            input: input.into(),
            detail: detail.into(),
        }
    }

    #[doc(hidden)]
    pub fn corrupt(what: impl Into<String>) -> Self {
        Self::Corrupt { what: what.into() }
    }
}

impl From<ObjectStoreError> for RepositoryError {
    fn from(error: ObjectStoreError) -> Self {
        match error {
            ObjectStoreError::InvalidInput { input, rule } => Self::InvalidInput {
                input,
                rule: rule.to_owned(),
            },
            ObjectStoreError::Exists { path } => Self::Exists { path },
            ObjectStoreError::Unavailable { reason } => Self::Unavailable { reason },
            // Stored data larger than anything sf writes, or a ref of ours turned symbolic,
            // can only be tampering.
            ObjectStoreError::Corrupt { what } | ObjectStoreError::Limit { what } => {
                Self::Corrupt { what }
            }
            ObjectStoreError::SymbolicRef { name } => Self::Corrupt {
                what: format!("ref {name} is symbolic"),
            },
            ObjectStoreError::Timeout { what } => Self::GitFailed {
                detail: format!("timed out: {what}"),
            },
            ObjectStoreError::Failed { operation, detail } => Self::GitFailed {
                detail: format!("{operation}: {detail}"),
            },
            // A variant added to the contract after this code: the store refused, and
            // nothing is known to have been changed.
            other => Self::Unavailable {
                reason: other.to_string(),
            },
        }
    }
}
