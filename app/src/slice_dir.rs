//! A Slice directory on disk: what the operator authors, what `sf slice freeze` writes, and
//! how every other command reads it back, verified, without creating anything.
//!
//! ```text
//! SLICE/slice.json          {"id", "revision", "scope", "protected"?, "bounds"?} (authored)
//! SLICE/acceptance.json     an acceptance; a check's "input" may name SLICE/inputs/<name>
//! SLICE/recipe.json         {"timeoutMs", "outputLimit"}
//! SLICE/inputs/<name>/…     fixture inputs
//! SLICE/harness/…           trusted test material, at /sf/harness in every run (optional)
//! SLICE/overlay/…           test files laid over both stages' trees (optional)
//! SLICE/frozen/             slice.json (the Slice record, written last), acceptance.json,
//!                           recipe.json, environment.json
//! SLICE/state/              private: snapshots/, evidence/evidence.db, fence/
//! ```

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backends::Backends;
use crate::error::AppError;
use crate::input::MAX_INPUT_BYTES;
use sf_host::assurance::{Acceptance, EnvironmentRecord, FrozenSlice, Recipe, SliceRecord};
use sf_host::canonical::Digest;
use sf_host::contracts::{EvidenceStore, Executor};
use sf_host::dir_fd::DirFd;
use sf_host::fence::Fence;
use sf_host::plugin::builtin::SQLITE_FILE_NAME;
use sf_host::private_dir::PrivateDir;
use sf_host::snapshot::{SnapshotFile, snapshot_digest};
use sf_host::snapshot_store::SnapshotStore;

/// The directory the frozen records are written to.
pub const FROZEN: &str = "frozen";
/// The private directory of what sf keeps for the Slice.
pub const STATE: &str = "state";
/// The frozen Slice record's file name (in `frozen/`).
pub const SLICE_RECORD: &str = "slice.json";

/// A frozen Slice directory, read and verified whole.
#[derive(Debug)]
pub struct SliceDir {
    /// The directory, canonical.
    pub dir: PathBuf,
    /// What was frozen, verified whole.
    pub frozen: FrozenSlice,
    /// The Slice record's digest.
    pub digest: Digest,
}

fn invalid(what: impl std::fmt::Display, detail: impl std::fmt::Display) -> AppError {
    AppError::invalid(what, detail)
}

fn coded(code: &str, what: impl std::fmt::Display, detail: impl std::fmt::Display) -> AppError {
    AppError::coded(code, what, detail)
}

/// `dir` made canonical, naming `flag` in the error.
pub fn canonical_dir(dir: &Path, flag: &str) -> Result<PathBuf, AppError> {
    std::fs::canonicalize(dir).map_err(|error| {
        invalid(
            format!("{flag} {}", dir.display()),
            format!("{error}; name an existing Slice directory"),
        )
    })
}

/// The snapshot digest of no files: a Slice without a harness or an overlay names it.
pub fn empty_snapshot() -> Digest {
    snapshot_digest(&[]).expect("the empty snapshot is valid")
}

impl SliceDir {
    /// Reads the frozen Slice in `dir` and checks it whole ([`FrozenSlice::validate`]):
    /// creates nothing, and refuses a Slice that was never frozen, or was frozen by an sf
    /// before Slices had a record.
    pub fn open(dir: &Path) -> Result<Self, AppError> {
        let dir = canonical_dir(dir, "--slice")?;
        let frozen_dir = dir.join(FROZEN);
        let record_file = frozen_dir.join(SLICE_RECORD);
        if std::fs::symlink_metadata(&record_file).is_err() {
            let hint = if frozen_dir.join("frozen-inputs.json").exists() {
                "it was frozen by an earlier sf, whose Slices bound no digest: freeze a new \
                 revision in a new directory"
            } else {
                "it is not frozen: run `sf slice freeze --dir` on it first"
            };
            return Err(coded(
                "missing",
                format!("--slice {}", dir.display()),
                format!("has no {FROZEN}/{SLICE_RECORD}; {hint}"),
            ));
        }
        let frozen = DirFd::open(&frozen_dir)
            .map_err(|error| AppError::new(error.code(), error.to_string()))?;
        let read = |name: &str| -> Result<Vec<u8>, AppError> {
            frozen
                .read_file_named(OsStr::new(name), MAX_INPUT_BYTES)
                .map(|file| file.bytes)
                .map_err(|error| AppError::new(error.code(), error.to_string()))
        };
        let record = SliceRecord::from_json(&read(SLICE_RECORD)?)
            .map_err(|error| invalid("the frozen Slice record", error))?;
        let acceptance = Acceptance::from_json(&read("acceptance.json")?)
            .map_err(|error| invalid("the frozen acceptance", error))?;
        let recipe = Recipe::from_json(&read("recipe.json")?)
            .map_err(|error| invalid("the frozen recipe", error))?;
        let environment = EnvironmentRecord::from_json(&read("environment.json")?)
            .map_err(|error| invalid("the frozen environment", error))?;
        let store = SnapshotStore::open_existing(&dir.join(STATE).join("snapshots"))
            .map_err(|error| coded(error.code(), "the Slice's snapshot store", error))?;
        let load = |digest: &Digest, what: &str| -> Result<Vec<SnapshotFile>, AppError> {
            if *digest == empty_snapshot() {
                return Ok(Vec::new());
            }
            store
                .read(digest)
                .map_err(|error| coded(error.code(), format!("the Slice's {what} {digest}"), error))
        };
        let harness = load(&record.harness, "harness")?;
        let overlay = load(&record.overlay, "overlay")?;
        let mut inputs = BTreeMap::new();
        for check in acceptance.process_checks() {
            if !inputs.contains_key(&check.input) {
                let files = load(&check.input, &format!("input of check {}", check.id))?;
                inputs.insert(check.input.clone(), files);
            }
        }
        let frozen = FrozenSlice {
            record,
            acceptance,
            recipe,
            environment,
            harness,
            overlay,
            inputs,
        };
        let digest = frozen
            .validate()
            .map_err(|error| invalid(format!("the frozen Slice in {}", dir.display()), error))?;
        Ok(Self {
            dir,
            frozen,
            digest,
        })
    }

    /// The Slice's state directory, or its subdirectory `sub`, created private if absent (for
    /// commands that write).
    pub fn state(&self, sub: &str) -> Result<PathBuf, AppError> {
        state_dir(&self.dir, sub, true)
    }

    /// The Slice's state subdirectory `sub` if it exists (for commands that only read).
    pub fn existing_state(&self, sub: &str) -> Result<PathBuf, AppError> {
        state_dir(&self.dir, sub, false)
    }

    /// What no Candidate may read: the Slice directory (its answer key among it) and its
    /// state (evidence, fence, snapshots).
    pub fn protected(&self) -> Result<Vec<PathBuf>, AppError> {
        Ok(vec![self.dir.clone(), self.existing_state("")?])
    }

    /// The executor the Slice was frozen with: `--config` cannot make a collection run under
    /// another one.
    pub fn executor(&self, backends: &Backends) -> Result<Arc<dyn Executor>, AppError> {
        let config = backends
            .config()?
            .with_executor_record(&self.frozen.record.executor)
            .map_err(|why| invalid("the frozen Slice's executor", why))?;
        backends.executor_of(&config)
    }

    /// The configured EvidenceStore, created in the state directory if it is local.
    pub fn evidence_store(&self, backends: &Backends) -> Result<Arc<dyn EvidenceStore>, AppError> {
        backends.evidence_store(&self.state("evidence")?)
    }

    /// The configured EvidenceStore, opened for reading only: nothing is created.
    pub fn existing_evidence_store(
        &self,
        backends: &Backends,
    ) -> Result<Arc<dyn EvidenceStore>, AppError> {
        let dir = self.dir.join(STATE).join("evidence");
        let config = backends.config()?;
        let section = config.evidence_store_section();
        let local = section.tag() == "sqlite" && section.fields().is_empty();
        if local && std::fs::symlink_metadata(dir.join(SQLITE_FILE_NAME)).is_err() {
            return Err(coded(
                "missing",
                format!("--slice {}", self.dir.display()),
                "holds no evidence yet: run `sf collect` or `sf land` first",
            ));
        }
        backends.existing_evidence_store(&dir)
    }
}

/// `slice/state/sub`, checked private; created (with `state/`) only when `create`.
pub fn state_dir(slice: &Path, sub: &str, create: bool) -> Result<PathBuf, AppError> {
    let state = slice.join(STATE);
    let check = |path: &Path| {
        if create {
            PrivateDir::create_or_check(path)
        } else {
            PrivateDir::check(path)
        }
        .map_err(|why| {
            coded(
                "unavailable",
                "the Slice state directory",
                format!("{why}; fix its permissions"),
            )
        })
    };
    check(&state)?;
    if sub.is_empty() {
        return Ok(state);
    }
    let path = state.join(sub);
    check(&path)?;
    Ok(path)
}

impl SliceDir {
    /// The fence of `product` for this Slice: the one that comes with the configured
    /// evidence store (PostgreSQL's, shared by every machine), or the file fence in the
    /// Slice's state.
    pub fn fence(&self, backends: &Backends, product: &str) -> Result<Fence, AppError> {
        let backend = backends.fence(&self.state("fence")?)?;
        Fence::new(backend, product).map_err(|error| coded(error.code(), "the fence", error))
    }
}
