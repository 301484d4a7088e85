//! Reading a commit of a foreign Git repository whole, as the base of an owned repository
//! (`sf repo create --from-git REPO --rev REV`).
//!
//! Git runs in sf-git's reader ([`sf_git::objects`]): the repository is checked against sf's
//! ownership and shape rules first, two fixed commands run on the hardened runner (no hooks,
//! filters, fsmonitor, replace refs or lazy fetch), and every object is re-hashed against its
//! id. This module walks the commit's tree with the repository's own walker
//! ([`walk_tree`]), so an imported tree keeps exactly the rules a stored one does: whatever
//! the tree model cannot hold (a submodule, a mode Git does not write, a name that is not
//! UTF-8 or breaks Git's path rules, a link leaving the tree, a tree over the limits) is
//! refused with every path at fault listed. Nothing is skipped and nothing is written.

use std::path::Path;
use std::time::{Duration, Instant};

use sf_git::objects::{ForeignReadError, ForeignReader};

use crate::contracts::tree_path::TreePolicy;
use crate::git_object::{ObjectId, ObjectKind};
use crate::repository::source::{ObjectSource, SourceFault, WalkError, describe_faults, walk_tree};
use crate::repository::{
    ImportedCommit, MAX_IMPORTED_COMMIT_BYTES, REPOSITORY_LIMITS, RepositoryLimits, commit_heads,
};

/// How long the whole read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Why a commit cannot be imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitSourceError {
    /// The objects could not be read (Git unavailable, not a repository, a bad revision, a
    /// missing object, a refused repository, a Git failure).
    #[error(transparent)]
    Read(ForeignReadError),
    /// The commit is not one sf can hold as it is.
    #[error("--rev: commit {commit}: {rule}")]
    Commit {
        /// The commit.
        commit: ObjectId,
        /// The rule its bytes break.
        rule: String,
    },
    /// The tree holds paths the tree model cannot hold; every one is listed.
    #[error("{}", describe_faults(.0))]
    Unsupported(Vec<SourceFault>),
}

impl GitSourceError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Read(error) => error.code(),
            Self::Commit { .. } => "unsupported-commit",
            Self::Unsupported(_) => "unsupported-source",
        }
    }
}

impl From<ForeignReadError> for GitSourceError {
    fn from(error: ForeignReadError) -> Self {
        Self::Read(error)
    }
}

impl ObjectSource for ForeignReader {
    type Error = ForeignReadError;

    fn read(
        &mut self,
        ids: &[ObjectId],
        kind: ObjectKind,
        budget: u64,
    ) -> Result<Vec<Vec<u8>>, ForeignReadError> {
        ForeignReader::read(self, ids, kind, budget)
    }
}

/// Reads the commit `rev` names in the repository at `repo` (a work tree with a `.git`, or a
/// bare repository): its exact bytes and every file of its tree, checked against the tree
/// model with `limits` and `policy`.
pub fn read_git_commit(
    repo: &Path,
    rev: &str,
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Result<ImportedCommit, GitSourceError> {
    let mut reader = ForeignReader::open(repo, Instant::now() + READ_TIMEOUT)?;
    let commit = reader.resolve_commit(rev)?;
    let body = reader
        .read(&[commit], ObjectKind::Commit, MAX_IMPORTED_COMMIT_BYTES)?
        .remove(0);
    let heads = commit_heads(&body).map_err(|rule| GitSourceError::Commit {
        commit,
        rule: rule.to_owned(),
    })?;
    let files =
        walk_tree(&mut reader, heads.tree, limits, policy).map_err(|error| match error {
            WalkError::Read(error) => GitSourceError::Read(error),
            WalkError::Faults(faults) => GitSourceError::Unsupported(faults),
        })?;
    Ok(ImportedCommit {
        commit,
        body,
        tree: heads.tree,
        parents: heads.parents,
        files,
    })
}

/// [`read_git_commit`] with the default limits and policy.
pub fn read_git_source(repo: &Path, rev: &str) -> Result<ImportedCommit, GitSourceError> {
    read_git_commit(repo, rev, &REPOSITORY_LIMITS, TreePolicy::default())
}
