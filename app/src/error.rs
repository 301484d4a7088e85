//! The one error a use case answers with: a stable kebab-case code and a message that names
//! the input at fault and the fix. Callers print both as they are (the command line's
//! `--json` envelope carries exactly these two fields), so every message is written here once,
//! in the words the user typed (`--candidate …`, `--slice …`).

use sf_host::repository::RepositoryError;

/// A use case's failure: a stable kebab-case code and a message naming the input at fault and
/// the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppError {
    /// The stable kebab-case code.
    pub code: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl AppError {
    /// The error with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }

    /// `code`, with the message `what: detail`.
    pub fn coded(code: &str, what: impl std::fmt::Display, detail: impl std::fmt::Display) -> Self {
        Self::new(code, format!("{what}: {detail}"))
    }

    /// `invalid-input`, with the message `what: detail`.
    pub fn invalid(what: impl std::fmt::Display, detail: impl std::fmt::Display) -> Self {
        Self::coded("invalid-input", what, detail)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for AppError {}

/// A repository error, with `what` naming the input or repository at fault, and the fix its
/// kind calls for.
pub fn repository_error(what: &str, error: &RepositoryError) -> AppError {
    let fix = match error {
        RepositoryError::Rejected { .. } => {
            "; fix the proposal and seal again (nothing was written)"
        }
        RepositoryError::InvalidInput { .. } => "; fix that input (nothing was written)",
        RepositoryError::Exists { .. } => "",
        RepositoryError::Missing { .. } => "; check the digest or commit against `sf seal` output",
        RepositoryError::Corrupt { .. } => {
            "; the repository's data failed verification: it is reported, never repaired"
        }
        _ => "",
    };
    AppError::new(error.code(), format!("{what}: {error}{fix}"))
}

/// A repository error of an effect's invoke or inspect: a Git failure there started nothing,
/// and says what to do before anything else (`started` is what did not start: `started`,
/// `pushed`).
pub(crate) fn effect_error(what: &str, error: &RepositoryError, started: &str) -> AppError {
    let mut app = repository_error(what, error);
    if matches!(error, RepositoryError::GitFailed { .. }) {
        app.message.push_str(&format!(
            "; nothing was {started}: inspect before deciding anything else"
        ));
    }
    app
}

/// A directory that cannot be read as a tree (`what` names it): a limit of the repository's
/// tree is `invalid-input`, the same refusal whether the walk or the tree's own check meets
/// it first; anything else keeps the walk's code.
pub(crate) fn source_dir_error(what: &str, error: sf_host::source_dir::SourceDirError) -> AppError {
    let code = match error {
        sf_host::source_dir::SourceDirError::TooLarge { .. } => "invalid-input",
        _ => error.code(),
    };
    AppError::new(code, format!("{what}: {error}"))
}
