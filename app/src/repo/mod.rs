//! Owned repositories: created from a directory or from a commit of the team's Git
//! repository ([`create`]), a later commit imported as a further base ([`import`]), a base's
//! upstream recorded ([`upstream`]), and the files of one of its commits read back
//! ([`snapshot`]).

mod create;
mod import;

use std::path::{Path, PathBuf};

use sf_host::git_object::ObjectId;
use sf_host::repository::{FileListing, Repository, Upstream, UpstreamRecord};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};

pub use create::{CreateRequest, Created, Source, create};
pub use import::{ImportFrom, ImportRequest, Imported, import};

/// Where a base's upstream is, as asked for (`--upstream` and `--upstream-branch`).
#[derive(Clone, Debug, Default)]
pub struct UpstreamRequest {
    /// The team's remote; default: the `--from-git` repository.
    pub url: Option<String>,
    /// The branch of the upstream that follows the base; no upstream is recorded without one.
    pub branch: Option<String>,
}

/// A base's upstream to record.
#[derive(Clone, Debug)]
pub struct RecordUpstream {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The base commit as given; `None` for the repository's initial commit.
    pub base: Option<String>,
    /// The team's remote.
    pub url: String,
    /// The branch that follows the base.
    pub branch: String,
}

/// Records the upstream of a base (written once per base).
pub fn upstream(backends: &Backends, request: &RecordUpstream) -> Result<UpstreamRecord, AppError> {
    let repository = backends.open_repository(&request.identity)?;
    let base = match &request.base {
        None => repository.identity().initial,
        Some(text) => ObjectId::parse_hex(text).ok_or_else(|| {
            AppError::new(
                "invalid-input",
                format!("--base {text:?}: a commit id is 40 lowercase hex characters"),
            )
        })?,
    };
    let upstream = Upstream {
        url: request.url.clone(),
        branch: request.branch.clone(),
    };
    upstream
        .validate()
        .map_err(|error| repository_error("--url/--branch", &error))?;
    record_upstream(&repository, &base, &upstream)
}

/// The files of a commit of the repository (default: the one the target names), listed
/// without their bytes.
pub fn snapshot(
    backends: &Backends,
    identity: &Path,
    commit: Option<&str>,
) -> Result<FileListing, AppError> {
    let commit = commit
        .map(|text| {
            ObjectId::parse_hex(text).ok_or_else(|| {
                AppError::new(
                    "invalid-input",
                    format!("--commit {text:?}: a commit is 40 lowercase hex characters"),
                )
            })
        })
        .transpose()?;
    let repository = backends.open_repository(identity)?;
    let what = format!("repository {}", repository.identity().path);
    let commit = match commit {
        Some(commit) => commit,
        None => repository
            .target()
            .map_err(|error| repository_error(&what, &error))?,
    };
    repository
        .list_files(&commit)
        .map_err(|error| repository_error(&format!("{what}, --commit {commit}"), &error))
}

/// `path` made absolute, as text (`flag` names it in the error).
fn absolute_text(path: &Path, flag: &str) -> Result<String, AppError> {
    std::path::absolute(path)
        .ok()
        .and_then(|path| path.to_str().map(str::to_owned))
        .ok_or_else(|| {
            AppError::new(
                "invalid-input",
                format!("{flag} {}: not an absolute UTF-8 path", path.display()),
            )
        })
}

/// The message of an error reading the `--from-git` repository `repo`, naming the flag once:
/// most such errors name it (or `--rev`) themselves; the others get it as a prefix.
pub(crate) fn from_git_message(repo: &Path, error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    if text.starts_with("--from-git") || text.starts_with("--rev") {
        text
    } else {
        format!("--from-git {}: {text}", repo.display())
    }
}

/// The upstream `request` asks for, checked, with `source` (the `--from-git` repository) as
/// the default URL; `None` when none is asked for.
fn upstream_of(
    request: &UpstreamRequest,
    source: Option<&Path>,
) -> Result<Option<Upstream>, AppError> {
    let Some(branch) = &request.branch else {
        return Ok(None);
    };
    let url = match (&request.url, source) {
        (Some(url), _) => url.clone(),
        (None, Some(source)) => absolute_text(source, "--from-git")?,
        (None, None) => {
            return Err(AppError::new(
                "usage",
                "--upstream-branch needs --upstream URL or --from-git REPO",
            ));
        }
    };
    let upstream = Upstream {
        url,
        branch: branch.clone(),
    };
    upstream
        .validate()
        .map_err(|error| repository_error("--upstream/--upstream-branch", &error))?;
    Ok(Some(upstream))
}

fn record_upstream(
    repository: &Repository,
    base: &ObjectId,
    upstream: &Upstream,
) -> Result<UpstreamRecord, AppError> {
    repository
        .record_upstream(base, upstream)
        .map_err(|error| repository_error(&format!("recording the upstream of {base}"), &error))
}
