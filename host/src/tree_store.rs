//! The tree store of a collection by reference, from the host's side: the store itself is
//! the collector's ([`sf_collector::tree_store`], re-exported here); the host gives it the
//! repository to materialise a base from, and reads the trees a collection of a sealed
//! Candidate runs.

use std::ops::ControlFlow;

pub use sf_collector::tree_store::*;

use crate::assurance::FrozenSlice;
use crate::canonical::Digest;
use crate::collector::{CollectTrees, StoredTrees, slice_paths, tree_paths};
use crate::environment_store::{EnvironmentStore, EnvironmentStoreError};
use crate::git_object::ObjectId;
use crate::repository::{EditedEntry, Repository, RepositoryError, SealedCandidate, TreeContents};

impl TreeSource for Repository {
    fn stream_files(
        &self,
        commit: &ObjectId,
        each: &mut EachFile<'_>,
    ) -> Result<ControlFlow<(), Digest>, RepositoryError> {
        Repository::stream_files(self, commit, each)
    }
}

/// Why the trees of a collection could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreesError {
    /// The repository refused or failed.
    #[error(transparent)]
    Repository(#[from] RepositoryError),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] EnvironmentStoreError),
}

impl TreesError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Repository(error) => error.code(),
            Self::Store(error) => error.code(),
        }
    }
}

/// The trees a collection of `sealed` (exported) under `slice` runs
/// ([`crate::collector::CollectTrees`]): an `sf-candidate/4` Candidate's by reference (its
/// base materialised in `store`, when given: without one the programs are named, for a
/// judgment, and never run), an older one's by value.
pub fn collect_trees(
    repository: &Repository,
    sealed: &SealedCandidate,
    slice: &FrozenSlice,
    store: Option<&EnvironmentStore>,
) -> Result<CollectTrees, TreesError> {
    let manifest = &sealed.manifest;
    let TreeContents::Trees { base: digest, .. } = &manifest.contents else {
        return Ok(CollectTrees::Files {
            base: repository.snapshot(&manifest.base_commit)?,
            candidate: repository.snapshot(&manifest.commit)?,
        });
    };
    let base = match store {
        Some(store) => Some(store.materialise_tree(repository, &manifest.base_commit, digest)?),
        None => None,
    };
    let paths = tree_paths(slice, sealed);
    Ok(CollectTrees::Stored(StoredTrees {
        base,
        directories: repository
            .tree_directories(&manifest.base_commit, paths.iter().map(String::as_str))?,
        edits: repository.edited_entries(sealed)?,
    }))
}

/// The trees a trial of `slice` on the factory commit `commit` runs
/// ([`crate::collector::TrialRequest::trees`]): the base materialised in `store` (its
/// `sf-tree/1` digest from its tree record), its directories on the Slice's paths and on
/// `edits`', and `edits` (the changed tree's entries; none for the base alone).
pub fn trial_trees(
    repository: &Repository,
    commit: &ObjectId,
    slice: &FrozenSlice,
    edits: Vec<EditedEntry>,
    store: &EnvironmentStore,
) -> Result<StoredTrees, TreesError> {
    let mut paths = slice_paths(slice);
    paths.extend(edits.iter().map(|edit| edit.path.clone()));
    let directories = repository.tree_directories(commit, paths.iter().map(String::as_str))?;
    let digest = directories
        .get("")
        .map(|root| root.digest().hash)
        .ok_or_else(|| {
            RepositoryError::corrupt(format!("commit {commit}: its tree record has no root"))
        })?;
    let base = store.materialise_tree(repository, commit, &digest)?;
    Ok(StoredTrees {
        base: Some(base),
        directories,
        edits,
    })
}
