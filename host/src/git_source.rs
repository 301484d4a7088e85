//! Reading the text files of a foreign Git repository's tree, as the source of a new owned
//! repository (`sf repo create --from-git REPO --rev REV`).
//!
//! Git runs in sf-git's reader ([`sf_git::tree`]): the repository is checked against sf's
//! ownership and shape rules first, three fixed commands run on the hardened runner, and
//! every blob is re-hashed against its id. This module holds the source rules only.
//!
//! Whatever the source subset cannot hold is refused with the list of every path at fault
//! and the rule each breaks: a mode other than `100644` (an executable `100755` file too: sf
//! stores `100644` only, and silently dropping the bit would change the program), a symbolic
//! link, a submodule, a path outside the grammar, a file that is not UTF-8 text, holds a NUL,
//! is a Git LFS pointer or is over the limits. Nothing is skipped.

use std::path::Path;
use std::time::{Duration, Instant};

use sf_git::tree::{LS_TREE_CAP, TreeReadError, TreeReader};

use crate::git_object::ObjectId;
use crate::repository::{REPOSITORY_LIMITS, SourceText, source};
use crate::source_path;

/// How long the whole read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// One path the source subset cannot hold, with the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The path in the tree, or `(the whole tree)` for a limit of the whole.
    pub path: String,
    /// The stable kebab-case code of the rule (`invalid-utf8`, `too-many-files`, ...).
    pub code: &'static str,
    /// The rule the path breaks, as a sentence.
    pub rule: String,
}

/// Why a repository's tree cannot be read as a source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitSourceError {
    /// The tree could not be read (Git unavailable, not a repository, a bad revision, a
    /// refused repository, a Git failure).
    #[error(transparent)]
    Read(TreeReadError),
    /// The tree holds paths the source subset cannot hold; every one is listed.
    #[error("{}", describe_faults(.0))]
    Unsupported(Vec<Fault>),
}

impl GitSourceError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Read(error) => error.code(),
            Self::Unsupported(_) => "unsupported-source",
        }
    }
}

impl From<TreeReadError> for GitSourceError {
    fn from(error: TreeReadError) -> Self {
        match error {
            TreeReadError::ListingTooLarge => Self::Unsupported(vec![Fault {
                path: "(the whole tree)".into(),
                code: "too-many-files",
                rule: format!(
                    "lists more than {LS_TREE_CAP} bytes of entries; a source holds at most {} \
                     files",
                    REPOSITORY_LIMITS.max_files
                ),
            }]),
            other => Self::Read(other),
        }
    }
}

fn describe_faults(faults: &[Fault]) -> String {
    let mut text = format!(
        "{} path(s) cannot be held by an sf source (UTF-8 text files of mode 100644 only):",
        faults.len()
    );
    for fault in faults {
        text.push_str(&format!(
            "\n  {}: {} ({})",
            fault.path, fault.rule, fault.code
        ));
    }
    text
}

/// Reads the files of the tree of `rev` in the repository at `repo` (a work tree with a
/// `.git`, or a bare repository), sorted by path.
pub fn read_git_source(repo: &Path, rev: &str) -> Result<Vec<SourceText>, GitSourceError> {
    let reader = TreeReader::open(repo, rev, Instant::now() + READ_TIMEOUT)?;
    let entries = reader.list()?;
    let mut faults = Vec::new();
    let mut wanted: Vec<(String, ObjectId)> = Vec::new();
    let mut total: u64 = 0;
    for entry in &entries {
        let path = String::from_utf8_lossy(&entry.path).into_owned();
        let mut fault = |code: &'static str, rule: &str| {
            faults.push(Fault {
                path: path.clone(),
                code,
                rule: rule.to_owned(),
            })
        };
        match (entry.mode.as_str(), entry.kind.as_str()) {
            ("100644", "blob") => {}
            ("100755", "blob") => {
                fault(
                    "executable",
                    "is executable (mode 100755); sf stores mode 100644 only",
                );
                continue;
            }
            ("120000", _) => {
                fault(
                    "symlink",
                    "is a symbolic link; sf stores regular files only",
                );
                continue;
            }
            ("160000", _) => {
                fault(
                    "submodule",
                    "is a submodule (gitlink); sf stores the files of one tree only",
                );
                continue;
            }
            (mode, kind) => {
                fault(
                    "unsupported-mode",
                    &format!("is a {kind} of mode {mode}; sf stores files of mode 100644 only"),
                );
                continue;
            }
        }
        let Ok(text_path) = std::str::from_utf8(&entry.path) else {
            fault("bad-path", source_path::PathRule::Grammar.describe());
            continue;
        };
        if let Err(rule) = source_path::check_path(text_path) {
            fault(rule.code(), rule.describe());
            continue;
        }
        let size: u64 = entry.size.parse().map_err(|_| {
            GitSourceError::Read(TreeReadError::Git(format!(
                "git ls-tree: the size of {path} is not a number: {}",
                entry.size
            )))
        })?;
        if size > REPOSITORY_LIMITS.max_file_bytes as u64 {
            fault(
                "file-too-large",
                &format!(
                    "is {size} bytes; a file holds at most {} bytes",
                    REPOSITORY_LIMITS.max_file_bytes
                ),
            );
            continue;
        }
        let id = ObjectId::parse_hex(&entry.id).ok_or_else(|| {
            GitSourceError::Read(TreeReadError::Git(format!(
                "git ls-tree: the id of {path} is not 40 hex digits"
            )))
        })?;
        total += size;
        wanted.push((text_path.to_owned(), id));
    }
    // The set rules (case collisions and the like) on the paths that passed alone.
    if let Err((path, rule)) = source_path::check_path_set(wanted.iter().map(|(p, _)| p.as_str())) {
        faults.push(Fault {
            path,
            code: rule.code(),
            rule: rule.describe().to_owned(),
        });
    }
    if entries.len() > REPOSITORY_LIMITS.max_files {
        faults.push(Fault {
            path: "(the whole tree)".into(),
            code: "too-many-files",
            rule: format!(
                "holds {} entries; a source holds at most {} files",
                entries.len(),
                REPOSITORY_LIMITS.max_files
            ),
        });
    }
    if total > REPOSITORY_LIMITS.max_source_bytes as u64 {
        faults.push(Fault {
            path: "(the whole tree)".into(),
            code: "source-too-large",
            rule: format!(
                "its files hold {total} bytes; a source holds at most {} bytes",
                REPOSITORY_LIMITS.max_source_bytes
            ),
        });
        // Nothing more is read past the limit.
        return Err(GitSourceError::Unsupported(faults));
    }

    let ids: Vec<ObjectId> = wanted.iter().map(|(_, id)| *id).collect();
    let bodies = reader.read_blobs(&ids, total)?;
    let mut files = Vec::with_capacity(wanted.len());
    for ((path, _), body) in wanted.into_iter().zip(bodies) {
        let text = match String::from_utf8(body) {
            Ok(text) => text,
            Err(_) => {
                faults.push(Fault {
                    path,
                    code: "invalid-utf8",
                    rule: "is not UTF-8 text (a binary file?); sf stores UTF-8 text files only"
                        .into(),
                });
                continue;
            }
        };
        if let Err((reason, rule)) = source::check_text(&text) {
            faults.push(Fault {
                path,
                code: reason.code(),
                rule: rule.into(),
            });
            continue;
        }
        files.push(SourceText { path, text });
    }
    if !faults.is_empty() {
        faults.sort_by(|a, b| a.path.cmp(&b.path));
        return Err(GitSourceError::Unsupported(faults));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
