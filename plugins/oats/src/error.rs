//! The one error type of the crate: a stable code, the input at fault, and what is wrong.
//!
//! Every refusal names the field or input it is about (`subject`, a JSON-pointer-like path
//! such as `hooks.retire.required` for manifest fields, a capability id, a path) and carries a
//! stable code. Lowercase kebab-case codes are oats engine codes or sf's own; `E_…` codes are
//! the oats kernel CLI codes, kept verbatim so that envelopes read the same as oats's.

use std::fmt;

/// The stable code of an [`OatsError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A document is not strict JSON (syntax, UTF-8, nesting, entries).
    InvalidJson,
    /// A JSON object holds one key twice.
    DuplicateKey,
    /// A document is larger than its bound.
    TooLarge,
    /// A manifest field breaks the 0.24.0 contract (type, pattern, unknown key, cross-field
    /// rule).
    InvalidManifest,
    /// A field the contract added after 0.24.0 (`binding.reasons`, `private`, …).
    UnsupportedField,
    /// A hook event other than `soul-scaffold`, `spawn` and `retire`.
    UnsupportedHook,
    /// A capability id or environment name outside its grammar.
    InvalidId,
    /// `compatibility.oats` does not admit the contract version sf implements.
    Incompatible,
    /// A declared path is absolute, has a `..` segment, a drive letter, `~`, a backslash or
    /// a NUL.
    PathEscape,
    /// A declared path is missing, or resolves (after symbolic links) outside the artifact,
    /// or a link below it is broken or escapes.
    NotSelfContained,
    /// The artifact holds a FIFO, socket or device, or a name that is not UTF-8.
    UnsupportedFile,
    /// The artifact is larger than a run can carry, or deeper or wider than the walk allows.
    ArtifactTooLarge,
    /// An artifact path does not fit the path grammar of a program snapshot.
    UnsupportedPath,
    /// Another directory is registered under the same capability id.
    DuplicateCapabilityId,
    /// Another registered capability claims the same `command` namespace.
    DuplicateNamespace,
    /// No capability is registered under the id.
    UnknownCapability,
    /// A frozen Slice pins the capability, so the change asked for would void its checks.
    Pinned,
    /// The artifact's bytes differ from the registered integrity.
    IntegrityDrift,
    /// The registry file is not what sf wrote.
    RegistryCorrupt,
    /// The state directory is unusable (owner, mode, not a directory).
    StateDirectory,
    /// A file system operation failed.
    Io,
    /// A setting value is outside the manifest's `values`, or a value is not acceptable.
    InvalidSetting,
    /// An environment value or name given for a run breaks the rules.
    InvalidEnvironment,
    /// The capability's executable surface is not trusted (`E_CAPABILITY_BLOCKED`).
    CapabilityBlocked,
    /// The command is not declared (`E_UNKNOWN_COMMAND`).
    UnknownCommand,
    /// The operation is not declared (`E_OPERATION_UNKNOWN`).
    OperationUnknown,
    /// The operation cannot run here (`E_OPERATION_UNAVAILABLE`).
    OperationUnavailable,
    /// Arguments unknown, missing or malformed (`E_BAD_ARGS`).
    BadArgs,
    /// The capability declares no `binding`, or not the phase asked for.
    BindingUndeclared,
    /// The Executor started nothing (it refused the request, or confinement is unavailable).
    ExecutorUnavailable,
    /// A required hook of an untrusted capability (`E_REQUIRED_HOOK_UNTRUSTED`).
    RequiredHookUntrusted,
    /// The home directory exists already, or is not where a home can be made.
    HomeUnavailable,
    /// The home has neither sf's instance record nor a quarantine marker
    /// (`E_UNIDENTIFIED_INSTANCE_HOME`).
    HomeUnidentified,
    /// A quarantine marker or instance record is unusable.
    HomeCorrupt,
    /// A retry of a quarantined home could rerun none of the outstanding hooks, so nothing
    /// can be proven done.
    RollbackIncomplete,
}

impl ErrorCode {
    /// The stable code text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid-json",
            Self::DuplicateKey => "duplicate-key",
            Self::TooLarge => "too-large",
            Self::InvalidManifest => "invalid-manifest",
            Self::UnsupportedField => "unsupported-field",
            Self::UnsupportedHook => "unsupported-hook",
            Self::InvalidId => "invalid-id",
            Self::Incompatible => "incompatible",
            Self::PathEscape => "path-escape",
            Self::NotSelfContained => "capability-not-self-contained",
            Self::UnsupportedFile => "unsupported-file",
            Self::ArtifactTooLarge => "artifact-too-large",
            Self::UnsupportedPath => "unsupported-path",
            Self::DuplicateCapabilityId => "duplicate-capability-id",
            Self::DuplicateNamespace => "duplicate-namespace",
            Self::UnknownCapability => "unknown-capability",
            Self::Pinned => "pinned",
            Self::IntegrityDrift => "integrity-drift",
            Self::RegistryCorrupt => "registry-corrupt",
            Self::StateDirectory => "state-directory",
            Self::Io => "io",
            Self::InvalidSetting => "invalid-setting",
            Self::InvalidEnvironment => "invalid-environment",
            Self::CapabilityBlocked => "E_CAPABILITY_BLOCKED",
            Self::UnknownCommand => "E_UNKNOWN_COMMAND",
            Self::OperationUnknown => "E_OPERATION_UNKNOWN",
            Self::OperationUnavailable => "E_OPERATION_UNAVAILABLE",
            Self::BadArgs => "E_BAD_ARGS",
            Self::BindingUndeclared => "binding-undeclared",
            Self::ExecutorUnavailable => "executor-unavailable",
            Self::RequiredHookUntrusted => "E_REQUIRED_HOOK_UNTRUSTED",
            Self::HomeUnavailable => "home-unavailable",
            Self::HomeUnidentified => "E_UNIDENTIFIED_INSTANCE_HOME",
            Self::HomeCorrupt => "home-corrupt",
            Self::RollbackIncomplete => "rollback-incomplete",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why sf refused, before anything of the capability ran.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{subject}: {message} ({code})")]
pub struct OatsError {
    /// The stable code.
    pub code: ErrorCode,
    /// The field, path, id or input at fault.
    pub subject: String,
    /// What is wrong, and where there is one, the fix.
    pub message: String,
}

impl OatsError {
    /// An error with `code` about `subject`.
    pub fn new(code: ErrorCode, subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            subject: subject.into(),
            message: message.into(),
        }
    }

    /// The stable code text.
    pub fn code(&self) -> &'static str {
        self.code.as_str()
    }

    pub(crate) fn io(subject: impl fmt::Display, error: &std::io::Error) -> Self {
        Self::new(ErrorCode::Io, subject.to_string(), error.to_string())
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = OatsError> = std::result::Result<T, E>;
