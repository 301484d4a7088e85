//! Reading a commit of a foreign Git repository whole, as the base of an owned repository
//! (`sf repo create --from-git REPO --rev REV`, `sf repo import`), and walking its history to
//! show that one commit descends from another.
//!
//! Git runs in sf-git's reader ([`sf_git::objects`]): the repository is checked against sf's
//! ownership and shape rules first, two fixed commands run on the hardened runner (no hooks,
//! filters, fsmonitor, replace refs or lazy fetch), and every object is re-hashed against its
//! id. This module walks the commit's tree with the repository's own walker
//! ([`walk_tree`]), so an imported tree keeps exactly the rules a stored one does: whatever
//! the tree model cannot hold (a submodule, a mode Git does not write, a name that is not
//! UTF-8 or breaks Git's path rules, a link leaving the tree, a tree over the limits) is
//! refused with every path at fault listed. Nothing is skipped and nothing is written.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use sf_git::objects::{ForeignReadError, ForeignReader};

use crate::contracts::tree_path::TreePolicy;
use crate::git_object::{ObjectId, ObjectKind};
use crate::repository::source::{ObjectSource, SourceFault, WalkError, describe_faults, walk_tree};
use crate::repository::{
    ImportBase, ImportError, ImportSource, ImportedBase, ImportedCommit, MAX_IMPORTED_COMMIT_BYTES,
    REPOSITORY_LIMITS, Repository, RepositoryLimits, SourceError, commit_heads,
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

/// The most commits [`GitSource::descends_from`] reads before it gives up.
pub const MAX_DESCENT_COMMITS: usize = 100_000;

/// A checked foreign repository (a work tree with a `.git`, or a bare repository), read
/// through sf-git's verifying reader: every commit, tree and blob re-hashed against its id.
/// Everything it runs ends by one deadline, [`READ_TIMEOUT`] after it was opened.
pub struct GitSource {
    reader: ForeignReader,
}

impl std::fmt::Debug for GitSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitSource").finish_non_exhaustive()
    }
}

impl GitSource {
    /// Checks the repository at `repo` against sf's ownership and shape rules and pins Git.
    pub fn open(repo: &Path) -> Result<Self, GitSourceError> {
        Ok(Self {
            reader: ForeignReader::open(repo, Instant::now() + READ_TIMEOUT)?,
        })
    }

    /// Reads the commit `rev` names: its exact bytes and every file of its tree, checked
    /// against the tree model with `limits` and `policy`.
    pub fn read_commit(
        &mut self,
        rev: &str,
        limits: &RepositoryLimits,
        policy: TreePolicy,
    ) -> Result<ImportedCommit, GitSourceError> {
        let commit = self.reader.resolve_commit(rev)?;
        let body = self.read_commit_body(commit)?;
        let heads = commit_heads(&body).map_err(|rule| GitSourceError::Commit {
            commit,
            rule: rule.to_owned(),
        })?;
        let files =
            walk_tree(&mut self.reader, heads.tree, limits, policy).map_err(
                |error| match error {
                    WalkError::Read(error) => GitSourceError::Read(error),
                    WalkError::Faults(faults) => GitSourceError::Unsupported(faults),
                },
            )?;
        Ok(ImportedCommit {
            commit,
            body,
            tree: heads.tree,
            parents: heads.parents,
            files,
        })
    }

    fn read_commit_body(&mut self, commit: ObjectId) -> Result<Vec<u8>, GitSourceError> {
        Ok(self
            .reader
            .read(&[commit], ObjectKind::Commit, MAX_IMPORTED_COMMIT_BYTES)?
            .remove(0))
    }

    /// Whether `commit` descends from `ancestor` in this repository's history as read: a walk
    /// of the parents of `commit`, one generation per read, every commit re-hashed, each read
    /// once. `ancestor` itself must be a commit of the repository: one the repository does not
    /// hold (a Candidate sf made, say) is no ancestor, and nothing is walked. A commit equal
    /// to `ancestor` does not descend from it. A walk that reaches [`MAX_DESCENT_COMMITS`]
    /// commits without an answer, or the reader's deadline, is an error, never a "no".
    pub fn descends_from(
        &mut self,
        commit: ObjectId,
        ancestor: ObjectId,
    ) -> Result<bool, GitSourceError> {
        match self.read_commit_body(ancestor) {
            Ok(_) => {}
            Err(GitSourceError::Read(ForeignReadError::Missing(_))) => return Ok(false),
            Err(other) => return Err(other),
        }
        let mut seen: BTreeSet<ObjectId> = BTreeSet::from([commit]);
        let mut generation = vec![commit];
        while !generation.is_empty() {
            let budget = MAX_IMPORTED_COMMIT_BYTES.saturating_mul(generation.len() as u64);
            let bodies = self.reader.read(&generation, ObjectKind::Commit, budget)?;
            let mut next = Vec::new();
            for (id, body) in generation.iter().zip(bodies) {
                let heads = commit_heads(&body).map_err(|rule| GitSourceError::Commit {
                    commit: *id,
                    rule: rule.to_owned(),
                })?;
                for parent in heads.parents {
                    if parent == ancestor {
                        return Ok(true);
                    }
                    if seen.insert(parent) {
                        next.push(parent);
                    }
                }
            }
            if seen.len() > MAX_DESCENT_COMMITS {
                return Err(GitSourceError::Commit {
                    commit,
                    rule: format!(
                        "its history was walked for {MAX_DESCENT_COMMITS} commits without \
                         reaching {ancestor} or its end: sf cannot show that it descends from \
                         {ancestor}"
                    ),
                });
            }
            generation = next;
        }
        Ok(false)
    }
}

impl SourceError for GitSourceError {
    fn code(&self) -> &'static str {
        GitSourceError::code(self)
    }
}

impl ImportSource for GitSource {
    type Error = GitSourceError;

    fn read_commit(
        &mut self,
        rev: &str,
        limits: &RepositoryLimits,
        policy: TreePolicy,
    ) -> Result<ImportedCommit, GitSourceError> {
        GitSource::read_commit(self, rev, limits, policy)
    }

    fn descends_from(
        &mut self,
        commit: ObjectId,
        ancestor: ObjectId,
    ) -> Result<bool, GitSourceError> {
        GitSource::descends_from(self, commit, ancestor)
    }
}

/// Imports `request.rev` of the Git repository at `request.source` into `repository`
/// ([`Repository::import_base`] over a [`GitSource`] opened there).
pub fn import_git_base(
    repository: &Repository,
    request: &ImportBase,
) -> Result<ImportedBase, ImportError<GitSourceError>> {
    import_git_base_from(repository, request, Path::new(&request.source))
}

/// Imports `request.rev` of the Git repository at `path` into `repository`, recording
/// `request.source` as where it came from: how a base fetched from an upstream URL into a
/// scratch repository is imported with the URL as its source.
pub fn import_git_base_from(
    repository: &Repository,
    request: &ImportBase,
    path: &Path,
) -> Result<ImportedBase, ImportError<GitSourceError>> {
    request.check_source()?;
    let mut source = GitSource::open(path).map_err(ImportError::Source)?;
    repository.import_base(&mut source, request)
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
    GitSource::open(repo)?.read_commit(rev, limits, policy)
}

/// [`read_git_commit`] with the default limits and policy.
pub fn read_git_source(repo: &Path, rev: &str) -> Result<ImportedCommit, GitSourceError> {
    read_git_commit(repo, rev, &REPOSITORY_LIMITS, TreePolicy::default())
}
