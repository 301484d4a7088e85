//! `freeze`: reads what the operator authored in a Slice directory, checks all of it, and
//! only then stores its inputs, harness and overlay in the snapshot store and writes the
//! frozen records, the Slice record last. A freeze that fails writes nothing; a freeze of an
//! unchanged Slice writes nothing and answers the same digests.

mod authored;
mod checks;
mod dry_run;
mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sf_host::assurance::trusted::{Closing, Overlaid, TreeLookup, check_overlay};
use sf_host::assurance::{
    Acceptance, EnvironmentRecord, FrozenSlice, Recipe, SliceRecord, current_environment,
    protection_of,
};
use sf_host::canonical::{self, Digest};
use sf_host::collector::current_recipe;
use sf_host::git_object::ObjectId;
use sf_host::repository::{ProposalBounds, Repository, TreeAt};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::slice_dir::{canonical_dir, empty_snapshot};
use authored::{Authored, AuthoredDir, AuthoredRecipe, optional_dir};
use checks::Inputs;
pub(crate) use dry_run::trial_request;
pub use dry_run::{DryRun, DryRunCheck};

/// A Slice directory to freeze, for a repository: its base is the target, or `base`.
#[derive(Clone, Debug)]
pub struct FreezeRequest {
    /// The Slice directory (`slice.json`, `acceptance.json`, `recipe.json`, `inputs/<name>/`,
    /// `harness/`, `overlay/`).
    pub dir: PathBuf,
    /// The repository identity file; the Candidate's base is its target now.
    pub identity: PathBuf,
    /// Another base than the target: a factory commit of the repository (its first base
    /// or an imported one), by its id.
    pub base: Option<String>,
    /// Run the Slice's checks once on the base before anything is written, and refuse the
    /// Slice if a listed test id is not reported or a base-stage expectation does not hold.
    pub dry_run: bool,
}

/// A Slice frozen (or found frozen with the same records).
#[derive(Clone, Debug)]
pub struct Frozen {
    /// The Slice directory, canonical.
    pub dir: PathBuf,
    /// What was frozen.
    pub slice: FrozenSlice,
    /// The Slice record's digest.
    pub digest: Digest,
    /// Input names and the digests they froze to.
    pub inputs: BTreeMap<String, Digest>,
    /// What the dry run found, when one ran.
    pub dry_run: Option<DryRun>,
}

/// Freezes `request.dir`: checks everything it holds, then stores its inputs, harness and
/// overlay and writes its frozen records (`SLICE/frozen/`), the Slice record last.
pub fn freeze(backends: &Backends, request: &FreezeRequest) -> Result<Frozen, AppError> {
    let dir = canonical_dir(&request.dir, "--dir")?;
    let checked = prepare(backends, &dir, &request.identity, request.base.as_deref())?;
    let dry_run = match request.dry_run {
        true => Some(dry_run::dry_run(
            backends,
            &dir,
            &checked.slice,
            &checked.base,
        )?),
        false => None,
    };
    write::write(&dir, &checked)?;
    Ok(Frozen {
        dir,
        slice: checked.slice,
        digest: checked.digest,
        inputs: checked.inputs.names,
        dry_run,
    })
}

/// The Slice authored in `dir`, checked as a freeze checks it and not written, with the base
/// it would be frozen on: what a trial of a Slice still being written runs.
pub(crate) fn checked_unwritten(
    backends: &Backends,
    dir: &Path,
    identity: &Path,
    base_commit: Option<&str>,
) -> Result<(FrozenSlice, Base), AppError> {
    let checked = prepare(backends, dir, identity, base_commit)?;
    Ok((checked.slice, checked.base))
}

/// Everything a freeze would write, checked.
struct Checked {
    slice: FrozenSlice,
    digest: Digest,
    /// The inputs, and every snapshot to store: inputs, harness, overlay.
    inputs: Inputs,
    /// The base it is frozen on.
    base: Base,
}

/// What the configured executor runs a check with: its section, the recipe (the authored
/// bounds, this collector, its runtime and what its profile enforces) and its environment.
struct Executed {
    executor: canonical::Value,
    recipe: Recipe,
    environment: EnvironmentRecord,
}

/// The base a Slice is frozen on: the repository's target, or the commit `--base` names.
pub(crate) struct Base {
    pub(crate) repository: Repository,
    pub(crate) commit: ObjectId,
    /// What the base is, in messages.
    pub(crate) named: String,
}

/// Reads and checks everything; writes nothing.
fn prepare(
    backends: &Backends,
    dir: &Path,
    identity: &Path,
    base_commit: Option<&str>,
) -> Result<Checked, AppError> {
    let authored = AuthoredDir::open(dir)?;
    let slice: Authored = authored.record("slice.json")?;
    let base = base_of(backends, identity, base_commit)?;
    // Inputs, read (not yet stored); the acceptance names them by digest, and environments
    // named by recipe are built from the base's lockfile (or found).
    let mut inputs = Inputs::default();
    let acceptance = inputs.pin(backends, dir, &base, authored.value("acceptance.json")?)?;
    let harness = optional_dir(&dir.join("harness"), "harness")?;
    let overlay = optional_dir(&dir.join("overlay"), "overlay")?;
    let harness_digest =
        snapshot_digest(&harness).map_err(|error| AppError::invalid("harness/", error))?;
    let overlay_digest =
        snapshot_digest(&overlay).map_err(|error| AppError::invalid("overlay/", error))?;
    inputs.store(&harness_digest, &harness, "harness");
    inputs.store(&overlay_digest, &overlay, "overlay");
    let executed = executed(backends, authored.record("recipe.json")?)?;
    let tree = base.repository.tree_at(&base.commit).map_err(|error| {
        let mut app = repository_error(&base.named, &error);
        if base_commit.is_some() {
            app.message.push_str(
                "; --base names a commit of the repository's own history: its first base, one \
                 `sf repo import` added, or a sealed Candidate's commit",
            );
        }
        app
    })?;
    let protected = tree_read(
        &tree,
        &base.named,
        protected(dir, &slice, &acceptance, &overlay, &tree),
    )?;
    let record = SliceRecord {
        id: slice.id,
        revision: slice.revision,
        repository: base.repository.identity().clone(),
        base: base.commit,
        scope: slice.scope,
        protected: protected.0,
        acceptance: digest_of("acceptance", acceptance.digest())?,
        recipe: digest_of("recipe", executed.recipe.digest())?,
        environment: digest_of("environment", executed.environment.digest())?,
        harness: harness_digest,
        overlay: overlay_digest,
        executor: executed.executor,
        // The default is not written, so that such a Slice keeps the record it always had.
        bounds: slice
            .bounds
            .filter(|bounds| *bounds != ProposalBounds::DEFAULT),
        forbidden: slice.forbidden,
        closed: protected.1.closed(),
        open: slice.open,
    };
    let frozen = FrozenSlice {
        record,
        acceptance,
        recipe: executed.recipe,
        environment: executed.environment,
        harness,
        overlay,
        inputs: inputs.files.clone(),
    };
    let digest = tree_read(&tree, &base.named, check(dir, &frozen, &tree))?;
    drop(tree);
    Ok(Checked {
        slice: frozen,
        digest,
        inputs,
        base,
    })
}

fn digest_of<E: std::fmt::Display>(
    what: &str,
    digest: Result<Digest, E>,
) -> Result<Digest, AppError> {
    digest.map_err(|error| AppError::invalid(what, error))
}

/// The configured executor's records for `authored` bounds.
fn executed(backends: &Backends, authored: AuthoredRecipe) -> Result<Executed, AppError> {
    let config = backends.config()?;
    let executor = config
        .executor_record()
        .map_err(|why| AppError::invalid("the [executor] section", why))?;
    let running = backends.executor_of(&config)?;
    let recipe = current_recipe(running.as_ref(), authored.timeout_ms, authored.output_limit)
        .map_err(|error| AppError::coded(error.code(), "the configured executor", error))?;
    recipe
        .validate()
        .map_err(|error| AppError::invalid("recipe.json", error))?;
    let environment = current_environment(running.as_ref())
        .map_err(|error| AppError::coded(error.code(), "the configured executor", error))?;
    Ok(Executed {
        executor,
        recipe,
        environment,
    })
}

/// The repository's target now, or the commit `commit` names.
pub(crate) fn base_of(
    backends: &Backends,
    identity: &Path,
    commit: Option<&str>,
) -> Result<Base, AppError> {
    let repository = backends.open_repository(identity)?;
    let (commit, named) = match commit {
        None => (
            repository
                .target()
                .map_err(|error| repository_error("the repository's target", &error))?,
            "the repository's target".to_owned(),
        ),
        Some(text) => (
            ObjectId::parse_hex(text).ok_or_else(|| {
                AppError::coded(
                    "invalid-input",
                    format!("--base {text:?}"),
                    "is a commit id: 40 lowercase hex digits",
                )
            })?,
            format!("--base {text}"),
        ),
    };
    Ok(Base {
        repository,
        commit,
        named,
    })
}

/// `answer`, derived by looking paths up in `tree`, unless a read of the tree failed on the
/// way: then what was derived from "nothing there" is refused with the read's error.
fn tree_read<T>(
    tree: &TreeAt<'_>,
    named: &str,
    answer: Result<T, AppError>,
) -> Result<T, AppError> {
    tree.fault()
        .map_err(|error| repository_error(named, &error))?;
    answer
}

/// The patterns no proposal may touch (the authored ones, then the trusted material's) and
/// what the Slice closes around its trusted material.
fn protected(
    dir: &Path,
    slice: &Authored,
    acceptance: &Acceptance,
    overlay: &[SnapshotFile],
    base: &dyn TreeLookup,
) -> Result<(Vec<String>, Closing), AppError> {
    let tree = Overlaid::new(base, overlay);
    let closing = Closing::derive(acceptance, overlay, &slice.scope, &tree)
        .map_err(|error| AppError::invalid(format!("the Slice in {}", dir.display()), error))?;
    let mut protected: Vec<String> = slice.protected.clone();
    let trusted = overlay.iter().map(|file| file.path.as_str());
    for pattern in protection_of(trusted.chain(closing.named_files.iter().map(String::as_str))) {
        if !protected.contains(&pattern) {
            protected.push(pattern);
        }
    }
    Ok((protected, closing))
}

/// The frozen Slice checked whole, against the base it is frozen on (looked up by path:
/// only the overlay's paths and the checks' entries are read); its digest.
fn check(dir: &Path, frozen: &FrozenSlice, base: &dyn TreeLookup) -> Result<Digest, AppError> {
    let digest = frozen
        .validate()
        .map_err(|error| AppError::invalid(format!("the Slice in {}", dir.display()), error))?;
    check_overlay(base, &frozen.overlay, "base")
        .map_err(|why| AppError::invalid("overlay/", why))?;
    frozen
        .check_entries_in(&Overlaid::new(base, &frozen.overlay))
        .map_err(|error| AppError::invalid("acceptance.json", error))?;
    Ok(digest)
}

/// Whether `digest` names files to store (the empty snapshot is never stored).
fn holds_files(digest: &Digest) -> bool {
    *digest != empty_snapshot()
}

/// An acceptance value (with its inputs and environments pinned) parsed as the acceptance.
fn parse_acceptance(value: &canonical::Value) -> Result<Acceptance, AppError> {
    let invalid = |error: &dyn std::fmt::Display| AppError::invalid("acceptance.json", error);
    let bytes = canonical::encode(value).map_err(|error| invalid(&error))?;
    Acceptance::from_json(&bytes).map_err(|error| invalid(&error))
}
