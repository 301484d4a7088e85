//! `propose`: a proposal made from what an agent produces (a Git commit, a directory, a
//! diff) instead of written by hand: the changed paths and their new entries, the priors read
//! from the Slice's base, every edit checked against the Slice's scope and bounds before
//! anything is written. `seal` takes the same sources.

mod changes;
mod commit;
mod diff;
mod tree;

use std::path::PathBuf;

use sf_host::repository::{
    FrozenInputs, Proposal, Rejection, Repository, RepositoryError, validate_proposal,
};

pub use changes::{After, Change};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::slice_dir::SliceDir;

/// Where a proposal's changes come from.
#[derive(Clone, Debug)]
pub enum ProposalSource {
    /// A commit of a Git repository: its changes against its first parent, its author, date
    /// and message (`--commit REV --repo DIR`).
    Commit {
        /// The Git repository (a work tree or a bare repository).
        repo: PathBuf,
        /// The commit.
        rev: String,
    },
    /// A directory compared with the Slice's base (`--tree DIR`): every path whose entry
    /// differs, a path missing from it removed.
    Tree(PathBuf),
    /// A Git diff applied to the Slice's base (`--diff FILE`, `-` for standard input).
    Diff(PathBuf),
}

impl ProposalSource {
    /// The source `--commit` (with `--repo`), `--tree` or `--diff` names, the first given (a
    /// command line lets exactly one through).
    pub fn of_flags(
        commit: Option<String>,
        tree: Option<PathBuf>,
        diff: Option<PathBuf>,
        repo: Option<PathBuf>,
    ) -> Self {
        match (commit, tree, diff) {
            (Some(rev), _, _) => Self::Commit {
                repo: repo.unwrap_or_default(),
                rev,
            },
            (None, Some(dir), _) => Self::Tree(dir),
            (None, None, diff) => Self::Diff(diff.unwrap_or_default()),
        }
    }
}

/// A proposal to make, for a frozen Slice of a repository.
#[derive(Clone, Debug)]
pub struct ProposeRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The frozen Slice directory the proposal is for.
    pub slice: PathBuf,
    /// Where the changes come from.
    pub source: ProposalSource,
    /// Keep only the changes at or under these paths (all when empty).
    pub only: Vec<String>,
}

/// A proposal made, and what of its source it left out.
#[derive(Clone, Debug)]
pub struct Proposed {
    /// The proposal, checked against the Slice's scope and bounds.
    pub proposal: Proposal,
    /// The changes the source held that `--only` left out, by path.
    pub left_out: Vec<String>,
    /// What else was left out of the source, and why (a commit message the proposal's rules
    /// do not admit, say).
    pub notes: Vec<String>,
}

/// Makes the proposal `request` names; nothing is written.
pub fn propose(backends: &Backends, request: &ProposeRequest) -> Result<Proposed, AppError> {
    let slice = SliceDir::open(&request.slice)?;
    let repository = backends.open_repository(&request.identity)?;
    let frozen = slice_inputs(&repository, &slice)?;
    propose_in(&repository, &frozen, &request.source, &request.only)
}

/// The proposal of `source` for the Slice `frozen` of `repository`, kept to `only`.
pub fn propose_in(
    repository: &Repository,
    frozen: &FrozenInputs,
    source: &ProposalSource,
    only: &[String],
) -> Result<Proposed, AppError> {
    let only = changes::check_only(only)?;
    let base = frozen.base;
    let mut notes = Vec::new();
    let mut skipped = Vec::new();
    let (changes, message, author) = match source {
        ProposalSource::Commit { repo, rev } => {
            let made = commit::changes(repository, repo, rev)?;
            let message = kept("message", made.message, &mut notes);
            let author = kept("author", made.author, &mut notes);
            (made.changes, message, author)
        }
        ProposalSource::Tree(dir) => (tree::changes(repository, &base, dir)?, None, None),
        ProposalSource::Diff(file) => {
            let (changes, left) = diff::changes(repository, &base, file, &only)?;
            skipped = left;
            (changes, None, None)
        }
    };
    let (kept, mut left_out) = changes::keep_only(changes, &only);
    left_out.extend(skipped);
    left_out.sort();
    let edits = changes::edits(repository, &base, kept)?;
    if edits.is_empty() {
        return Err(AppError::new(
            "no-edits",
            "the source changes nothing the Slice's base does not already hold (after --only): \
             there is nothing to propose",
        ));
    }
    let proposal = Proposal {
        edits,
        message,
        author,
    };
    validate_proposal(&proposal, &frozen.scope, &frozen.bounds).map_err(|error| {
        let mut app = repository_error("the proposal made", &error);
        if let RepositoryError::Rejected {
            reason: Rejection::OutsideScope | Rejection::ProtectedPath,
            ..
        } = error
        {
            app.message.push_str(
                "; keep only the changes the Slice's scope holds with --only PATH (the \
                 Slice's scope is in its slice.json)",
            );
        }
        app
    })?;
    Ok(Proposed {
        proposal,
        left_out,
        notes,
    })
}

/// The changes of commit `rev` of the Git repository at `repo` against its first parent.
pub(crate) fn commit_changes(
    repository: &Repository,
    repo: &std::path::Path,
    rev: &str,
) -> Result<Vec<Change>, AppError> {
    Ok(commit::changes(repository, repo, rev)?.changes)
}

/// The changes of the directory `dir` against the factory commit `base`.
pub(crate) fn tree_changes(
    repository: &Repository,
    base: &sf_host::git_object::ObjectId,
    dir: &std::path::Path,
) -> Result<Vec<Change>, AppError> {
    tree::changes(repository, base, dir)
}

/// A part of a commit the proposal keeps, or a note saying why it was left out.
fn kept<T>(part: &str, kept: commit::Kept<T>, notes: &mut Vec<String>) -> Option<T> {
    kept.map_err(|rule| notes.push(format!("the commit's {part} was left out: {rule}")))
        .ok()
}

/// The frozen inputs of `slice`, which must have been frozen for `repository`.
pub fn slice_inputs(repository: &Repository, slice: &SliceDir) -> Result<FrozenInputs, AppError> {
    if slice.frozen.record.repository != *repository.identity() {
        return Err(AppError::coded(
            "invalid-input",
            format!("--slice {}", slice.dir.display()),
            format!(
                "was frozen for repository {} ({}), not {}; freeze a Slice for this repository",
                slice.frozen.record.repository.path,
                slice.frozen.record.repository.product_id,
                repository.identity().path
            ),
        ));
    }
    Ok(slice.frozen.record.frozen_inputs(&slice.digest))
}
