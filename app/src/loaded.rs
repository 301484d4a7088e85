//! Which Candidate, in which repository, under which frozen Slice ([`Target`]), and that
//! Candidate read and verified against the Slice before anything else happens: read by
//! reference with its trees ([`Exported`]), and found sealed for exactly this Slice, its programs derived
//! ([`Loaded`]). Every use case that acts on a Candidate starts here.

use std::path::PathBuf;

use sf_host::canonical::Digest;
use sf_host::collector::{CollectTrees, Programs, derive};
use sf_host::environment_store::EnvironmentStore;
use sf_host::judging::Judging;
use sf_host::repository::{CandidateProtocol, Repository, SealedCandidate};
use sf_host::tree_store::collect_trees;

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::input::parse_digest;
use crate::slice_dir::SliceDir;

/// Which Candidate, in which repository, under which frozen Slice.
#[derive(Clone, Debug)]
pub struct Target {
    /// The repository identity file (`--identity`).
    pub identity: PathBuf,
    /// The Candidate digest as given (`--candidate`).
    pub candidate: String,
    /// The frozen Slice directory (`--slice`).
    pub slice: PathBuf,
}

/// A Candidate and the frozen Slice it is checked against, read and verified: the Slice
/// whole, the Candidate read by reference (`Repository::read_by_reference`: its seal verified
/// as an export verifies it, its edited paths proved up to the base's digest) and its base read (what [`Loaded`] holds but the programs
/// derived from them).
pub struct Exported {
    /// The frozen Slice.
    pub slice: SliceDir,
    /// The repository the Candidate is sealed in.
    pub repository: Repository,
    /// The Candidate, read by reference.
    pub sealed: SealedCandidate,
    /// The trees its programs run.
    pub trees: CollectTrees,
    /// The Candidate's digest.
    pub digest: Digest,
}

impl Exported {
    /// Reads `target`: the digest checked, the Slice opened, the Candidate read by reference.
    pub fn read(backends: &Backends, target: &Target) -> Result<Self, AppError> {
        let digest = parse_digest(&target.candidate, "--candidate")?;
        let slice = SliceDir::open(&target.slice)?;
        Self::read_in(backends, target, digest, slice, false)
    }

    /// [`Exported::read`] of Candidate `digest` under the opened `slice`.
    /// With `materialise`, an `sf-candidate/4` Candidate's base is materialised in the
    /// tree store (once per base, verified at every use) for its programs to run by
    /// reference; without, they are only named.
    pub(crate) fn read_in(
        backends: &Backends,
        target: &Target,
        digest: Digest,
        slice: SliceDir,
        materialise: bool,
    ) -> Result<Self, AppError> {
        let repository = backends.open_repository(&target.identity)?;
        let sealed = repository
            .read_by_reference(&digest)
            .map_err(|error| repository_error(&format!("--candidate {digest}"), &error))?;
        let store = match materialise {
            true => trees_store_for(backends, &sealed)?,
            false => None,
        };
        let trees = collect_trees(&repository, &sealed, &slice.frozen, store.as_ref()).map_err(
            |error| AppError::coded(error.code(), format!("--candidate {digest}"), error),
        )?;
        Ok(Self {
            slice,
            repository,
            sealed,
            trees,
            digest,
        })
    }
}

/// The tree store where an `sf-candidate/4` Candidate's base is materialised for its
/// programs to run by reference; `None` for a Candidate of an earlier protocol.
pub(crate) fn trees_store_for(
    backends: &Backends,
    sealed: &SealedCandidate,
) -> Result<Option<EnvironmentStore>, AppError> {
    if sealed.manifest.protocol != CandidateProtocol::V4 {
        return Ok(None);
    }
    EnvironmentStore::open(&backends.tree_store_dir()?)
        .map(Some)
        .map_err(|error| AppError::coded(error.code(), "the tree store", error))
}

/// Why Candidate `digest` is not one Slice `slice` may run, in the words of `derive`'s refusal.
pub(crate) fn not_for_the_slice(
    digest: &Digest,
    slice: &SliceDir,
    why: impl std::fmt::Display,
) -> AppError {
    AppError::coded(
        "invalid-input",
        format!("--candidate {digest} under --slice {}", slice.dir.display()),
        format!("{why}; nothing was started"),
    )
}

/// What no Candidate may read: the Slice, its state and the repository.
pub(crate) fn protected_paths(
    slice: &SliceDir,
    repository: &Repository,
) -> Result<Vec<PathBuf>, AppError> {
    let mut protected = slice.protected()?;
    protected.push(PathBuf::from(&repository.identity().path));
    Ok(protected)
}

/// A Candidate and the frozen Slice it is checked against, everything verified: the Slice
/// whole, the Candidate read by reference, its base read, and the Candidate sealed for exactly this
/// Slice in this repository ([`derive`]).
pub struct Loaded {
    /// The frozen Slice.
    pub slice: SliceDir,
    /// The repository the Candidate is sealed in.
    pub repository: Repository,
    /// The Candidate, read by reference.
    pub sealed: SealedCandidate,
    /// What its checks run, and the pins its records are filed under.
    pub programs: Programs,
}

impl Loaded {
    /// Reads and verifies `target`.
    pub fn read(backends: &Backends, target: &Target) -> Result<Self, AppError> {
        let Exported {
            slice,
            repository,
            sealed,
            trees,
            digest,
        } = Exported::read(backends, target)?;
        let programs = derive(&slice.frozen, &sealed, &trees)
            .map_err(|why| not_for_the_slice(&digest, &slice, why))?;
        Ok(Self {
            slice,
            repository,
            sealed,
            programs,
        })
    }

    /// What no Candidate may read: the Slice, its state and the repository.
    pub fn protected(&self) -> Result<Vec<PathBuf>, AppError> {
        protected_paths(&self.slice, &self.repository)
    }

    /// The judge's view of this Candidate's evidence, read-only.
    pub fn judging(&self, backends: &Backends) -> Result<Judging, AppError> {
        Ok(Judging {
            slice: self.slice.frozen.clone(),
            pins: self.programs.pins.clone(),
            store: self.slice.existing_evidence_store(backends)?,
        })
    }
}
