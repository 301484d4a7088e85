//! A later commit of the team's repository imported as a further base, byte for byte, with
//! its import record; the target moved to it only when asked and only forward.

use std::path::{Path, PathBuf};

use sf_host::contracts::RefName;
use sf_host::git_remote::FetchedUpstream;
use sf_host::git_source::{import_git_base, import_git_base_from};
use sf_host::repository::{
    ImportBase, ImportError, ImportedBase, Repository, Upstream, UpstreamRecord,
};

use super::{UpstreamRequest, absolute_text, from_git_message, record_upstream, upstream_of};
use crate::backends::Backends;
use crate::error::{AppError, repository_error};

/// Where the imported commit comes from.
#[derive(Clone, Debug)]
pub enum ImportFrom {
    /// A commit of a Git repository (`--from-git` with `--rev`).
    Git {
        /// The Git repository.
        repo: PathBuf,
        /// The branch, tag or commit.
        rev: String,
    },
    /// The tip of the upstream recorded for the target's base, fetched.
    Upstream,
}

/// An import, as asked for.
#[derive(Clone, Debug)]
pub struct ImportRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// Where the commit comes from.
    pub from: ImportFrom,
    /// Also move the target to it, only forward.
    pub advance: bool,
    /// The imported base's upstream, when one is to be recorded.
    pub upstream: UpstreamRequest,
}

/// An import done.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The import, its record and what became of the target.
    pub imported: ImportedBase,
    /// The repository's target ref.
    pub target_ref: String,
    /// The imported base's upstream, when recorded.
    pub upstream: Option<UpstreamRecord>,
}

/// Imports the commit `request.from` names.
pub fn import(backends: &Backends, request: &ImportRequest) -> Result<Imported, AppError> {
    let repository = backends.open_repository(&request.identity)?;
    let (base, upstream, fetched) = match &request.from {
        ImportFrom::Git { repo, rev } => {
            let base = ImportBase {
                source: absolute_text(repo, "--from-git")?,
                rev: rev.clone(),
                advance: request.advance,
            };
            (base, upstream_of(&request.upstream, Some(repo))?, None)
        }
        ImportFrom::Upstream => {
            let (base, upstream, fetched) = from_upstream(backends, &repository, request.advance)?;
            (base, Some(upstream), Some(fetched))
        }
    };
    let imported = match &fetched {
        Some(fetched) => import_git_base_from(&repository, &base, fetched.path()),
        None => import_git_base(&repository, &base),
    }
    .map_err(|error| match error {
        ImportError::Source(error) => AppError::new(
            error.code(),
            format!(
                "{}\n(nothing was written)",
                from_git_message(Path::new(&base.source), &error)
            ),
        ),
        ImportError::Repository(error) => repository_error(
            &format!("importing into repository {}", repository.identity().path),
            &error,
        ),
        other => AppError::new(other.code(), other.to_string()),
    })?;
    let upstream = upstream
        .map(|upstream| record_upstream(&repository, &imported.record.commit, &upstream))
        .transpose()?;
    Ok(Imported {
        imported,
        target_ref: repository.identity().target_ref.clone(),
        upstream,
    })
}

/// The import of the tip of the upstream recorded for the target's base: fetched, with the
/// same upstream to record for it.
fn from_upstream(
    backends: &Backends,
    repository: &Repository,
    advance: bool,
) -> Result<(ImportBase, Upstream, FetchedUpstream), AppError> {
    let target = repository
        .target()
        .map_err(|error| repository_error("reading the target", &error))?;
    let record = repository
        .upstream_at(&target)
        .map_err(|error| repository_error("reading the target's upstream", &error))?
        .ok_or_else(|| {
            AppError::new(
                "invalid-input",
                format!(
                    "--from-upstream: the target {target} records no upstream (nor does its \
                     base); record one with `sf repo upstream` or import with --from-git"
                ),
            )
        })?;
    let branch = RefName::parse(&record.upstream.branch_ref())
        .map_err(|error| AppError::new("invalid-input", error.to_string()))?;
    let fetched = backends
        .remote()?
        .fetch(&record.upstream.url, &branch)
        .map_err(|error| AppError::new("remote-unavailable", error.to_string()))?;
    let base = ImportBase {
        source: record.upstream.url.clone(),
        rev: branch.as_str().to_owned(),
        advance,
    };
    Ok((base, record.upstream, fetched))
}
