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
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use sf_git::objects::{ForeignReadError, ForeignReader};

use crate::contracts::tree_path::TreePolicy;
use crate::git_object::{ObjectId, ObjectKind};
use crate::repository::source::{
    ObjectSource, SourceFault, WalkError, describe_faults, walk_streaming, walk_tree,
};
use crate::repository::{
    EachLeaf, ImportBase, ImportError, ImportSource, ImportedBase, ImportedCommit, ImportedHead,
    LeafBytes, MAX_IMPORTED_COMMIT_BYTES, REPOSITORY_LIMITS, Repository, RepositoryError,
    RepositoryLimits, SourceError, WalkedLeaf, commit_heads,
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
        let head = self.read_head(rev)?;
        let files = walk_tree(&mut self.reader, head.tree, limits, policy).map_err(walk_error)?;
        Ok(ImportedCommit {
            commit: head.commit,
            body: head.body,
            tree: head.tree,
            parents: head.parents,
            files,
        })
    }

    /// [`GitSource::read_commit`] that keeps no file's bytes: the commit, and its tree's
    /// leaves by their identities (sorted by path), with every check `read_commit` makes;
    /// each blob is read, re-hashed and let go. With [`GitSource::into_bytes`] it is the two
    /// reads of a base too large to hold.
    pub fn read_leaves(
        &mut self,
        rev: &str,
        limits: &RepositoryLimits,
        policy: TreePolicy,
    ) -> Result<(ImportedHead, Vec<WalkedLeaf>), GitSourceError> {
        let head = self.read_head(rev)?;
        let leaves = walk_leaves_only(&mut self.reader, head.tree, limits, policy)?;
        Ok((head, leaves))
    }

    /// The second read of the tree `tree` [`GitSource::read_leaves`] listed, with the
    /// same `limits` and `policy`: every blob read again (re-hashed by the reader).
    pub fn into_bytes(
        self,
        tree: ObjectId,
        limits: &RepositoryLimits,
        policy: TreePolicy,
    ) -> GitTreeBytes {
        GitTreeBytes {
            reader: self.reader,
            tree,
            limits: *limits,
            policy,
        }
    }

    /// The verifying reader, for the other reads of this module's siblings.
    pub(crate) fn reader(&mut self) -> &mut ForeignReader {
        &mut self.reader
    }

    /// The commit `rev` names, its bytes re-hashed and its headers read.
    pub(crate) fn read_head(&mut self, rev: &str) -> Result<ImportedHead, GitSourceError> {
        let commit = self.reader.resolve_commit(rev)?;
        let body = self.read_commit_body(commit)?;
        let heads = commit_heads(&body).map_err(|rule| GitSourceError::Commit {
            commit,
            rule: rule.to_owned(),
        })?;
        Ok(ImportedHead {
            commit,
            body,
            tree: heads.tree,
            parents: heads.parents,
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

fn walk_error(error: WalkError<ForeignReadError>) -> GitSourceError {
    match error {
        WalkError::Read(error) => GitSourceError::Read(error),
        WalkError::Faults(faults) => GitSourceError::Unsupported(faults),
    }
}

/// The leaves of the tree `tree` by their identities, every blob read and let go.
fn walk_leaves_only(
    reader: &mut ForeignReader,
    tree: ObjectId,
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Result<Vec<WalkedLeaf>, GitSourceError> {
    let walked = walk_streaming(reader, tree, limits, policy, |_, _| {
        ControlFlow::<Infallible>::Continue(())
    })
    .map_err(walk_error)?;
    let ControlFlow::Continue(walked) = walked;
    Ok(walked.leaves)
}

/// The second read of a tree of a foreign repository: [`GitSource::into_bytes`].
pub struct GitTreeBytes {
    reader: ForeignReader,
    tree: ObjectId,
    limits: RepositoryLimits,
    policy: TreePolicy,
}

impl LeafBytes for GitTreeBytes {
    fn read_again(&mut self, each: &mut EachLeaf<'_>) -> Result<(), RepositoryError> {
        read_tree_again(&mut self.reader, self.tree, &self.limits, self.policy, each)
    }
}

/// Every blob of the tree `tree` read again, each leaf handed to `each`.
fn read_tree_again(
    reader: &mut ForeignReader,
    tree: ObjectId,
    limits: &RepositoryLimits,
    policy: TreePolicy,
    each: &mut EachLeaf<'_>,
) -> Result<(), RepositoryError> {
    let walked = walk_streaming(reader, tree, limits, policy, |leaf, body| {
        match each(&leaf.path, leaf.mode, body) {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => ControlFlow::Break(error),
        }
    });
    match walked {
        Ok(ControlFlow::Continue(_)) => Ok(()),
        Ok(ControlFlow::Break(error)) => Err(error),
        Err(error) => Err(RepositoryError::Unavailable {
            reason: format!("reading tree {tree} a second time: {}", walk_error(error)),
        }),
    }
}

impl SourceError for GitSourceError {
    fn code(&self) -> &'static str {
        GitSourceError::code(self)
    }
}

impl ImportSource for GitSource {
    type Error = GitSourceError;

    fn read_leaves(
        &mut self,
        rev: &str,
        limits: &RepositoryLimits,
        policy: TreePolicy,
    ) -> Result<(ImportedHead, Vec<WalkedLeaf>), GitSourceError> {
        GitSource::read_leaves(self, rev, limits, policy)
    }

    fn read_again(
        &mut self,
        tree: ObjectId,
        limits: &RepositoryLimits,
        policy: TreePolicy,
        each: &mut EachLeaf<'_>,
    ) -> Result<(), RepositoryError> {
        read_tree_again(&mut self.reader, tree, limits, policy, each)
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

/// A commit of a foreign repository as an attestation is checked against (`sf verify`): its
/// id, its tree's id and `sf-tree/1` digest (every blob read and hashed), and what the
/// repository keeps under its attestation ref.
#[derive(Debug)]
pub struct AttestedCommit {
    /// The commit the revision names.
    pub commit: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// Its tree's `sf-tree/1` digest.
    pub sf_tree: crate::canonical::Digest,
    /// The blob `refs/sf/attestations/<commit>` names: `None` without the ref, `Err` (why)
    /// when it names something that is not a blob of at most
    /// [`crate::repository::MAX_ATTESTATION_BYTES`].
    pub attestation: Option<Result<Vec<u8>, String>>,
}

/// Reads the commit `rev` names in the repository at `repo`, its tree digested with the
/// default limits (case collisions allowed: the digest is computed, nothing checked out), and
/// the attestation it keeps for that commit.
pub fn read_attested(repo: &Path, rev: &str) -> Result<AttestedCommit, GitSourceError> {
    let mut source = GitSource::open(repo)?;
    let policy = TreePolicy {
        allow_case_collisions: true,
    };
    let (head, leaves) = source.read_leaves(rev, &REPOSITORY_LIMITS, policy)?;
    let files: Vec<_> = leaves.iter().map(WalkedLeaf::source_file).collect();
    let sf_tree =
        crate::repository::tree_digest_of(&files).map_err(|rule| GitSourceError::Commit {
            commit: head.commit,
            rule,
        })?;
    let name = crate::repository::attestation_ref(&head.commit);
    let attestation = match source.reader.resolve_ref(name.as_str())? {
        None => None,
        Some(id) => Some(
            source
                .reader
                .read(
                    &[id],
                    ObjectKind::Blob,
                    crate::repository::MAX_ATTESTATION_BYTES,
                )
                .map(|mut bodies| bodies.remove(0))
                .map_err(|error| {
                    format!("{name} names {id}, which cannot be read as an attestation: {error}")
                }),
        ),
    };
    Ok(AttestedCommit {
        commit: head.commit,
        tree: head.tree,
        sf_tree,
        attestation,
    })
}
