//! `sf slice freeze`: reads what the operator authored in a Slice directory, checks all of it,
//! and only then stores its inputs, harness and overlay in the snapshot store and writes the
//! frozen records, the Slice record last. A freeze that fails writes nothing; a freeze of an
//! unchanged Slice writes nothing and answers the same digests.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::{Deserialize, Deserializer};

use super::common::{CliError, Context, MAX_INPUT_BYTES, repository_error};
use super::slice_dir::{
    FROZEN, SLICE_RECORD, canonical_dir, coded, empty_snapshot, invalid, state_dir,
};
use sf_host::assurance::trusted::{Closing, PathSet};
use sf_host::assurance::{
    Acceptance, FrozenSlice, SliceRecord, current_environment, protection_of,
};
use sf_host::canonical::{self, Digest, Value};
use sf_host::collector::{current_recipe, lay_over, materialise_base};
use sf_host::dir_fd::{DirFd, DirFdError};
use sf_host::repository::{Because, ID_RULE, ProposalBounds, is_valid_id};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};
use sf_host::snapshot_store::SnapshotStore;
use sf_host::source_dir::read_snapshot_dir;

/// `sf slice …`.
#[derive(Debug, Subcommand)]
pub enum SliceCommand {
    /// Freeze a Slice: check everything it holds, then store its inputs, harness and overlay
    /// and write its frozen records (SLICE/frozen/), the Slice record last
    Freeze(FreezeArgs),
}

#[derive(Debug, Args)]
pub struct FreezeArgs {
    /// The Slice directory (slice.json, acceptance.json, recipe.json, inputs/<name>/,
    /// harness/, overlay/)
    #[arg(long, value_name = "SLICE")]
    pub(super) dir: PathBuf,
    /// The repository identity file; the Candidate's base is its target now
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
}

/// What `slice.json` says: the Slice's id and revision, the paths a Candidate may edit
/// (`scope`), the patterns no Candidate may touch (`protected`, none when absent), and the
/// proposal bounds when the Slice raises the default ones (`bounds`, `{"edits", "bytes"}`),
/// the constructs no proposal may add (`forbidden`, none when absent), and the closed
/// sub-paths a proposal may touch all the same (`open`, none when absent).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Authored {
    #[serde(deserialize_with = "slice_id")]
    id: String,
    #[serde(deserialize_with = "canonical::positive")]
    revision: u64,
    scope: Vec<String>,
    #[serde(default)]
    protected: Vec<String>,
    #[serde(default, deserialize_with = "canonical::optional")]
    bounds: Option<ProposalBounds>,
    #[serde(default)]
    forbidden: Vec<String>,
    #[serde(default)]
    open: Vec<String>,
}

fn slice_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(deserializer, |id: &String| is_valid_id(id), ID_RULE)
}

/// What `recipe.json` says: the per-run bounds every check of the Slice gets.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AuthoredRecipe {
    #[serde(deserialize_with = "canonical::positive")]
    timeout_ms: u64,
    #[serde(deserialize_with = "canonical::positive")]
    output_limit: u64,
}

/// Reads an authored record as a `T`; the error names the field and the rule it broke.
fn read_authored<T: for<'de> Deserialize<'de>>(value: &Value, name: &str) -> Result<T, CliError> {
    canonical::from_value(value, name).map_err(|error| invalid(error.field, error.rule))
}

/// A directory of the Slice read as a snapshot; an absent directory is an empty snapshot.
fn optional_dir(dir: &Path, what: &str) -> Result<Vec<SnapshotFile>, CliError> {
    match std::fs::symlink_metadata(dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        _ => read_snapshot_dir(dir)
            .map_err(|error| coded(error.code(), format!("the Slice's {what}"), error)),
    }
}

/// Everything a freeze would write, checked.
struct Frozen {
    slice: FrozenSlice,
    digest: Digest,
    /// The snapshots to store: inputs, harness, overlay.
    snapshots: Vec<(Digest, Vec<SnapshotFile>, String)>,
    /// Input names and the digests they froze to.
    inputs: BTreeMap<String, Digest>,
}

/// `sf slice freeze`.
pub fn run(context: &Context, command: SliceCommand) -> Result<super::Output, CliError> {
    let SliceCommand::Freeze(args) = command;
    let dir = canonical_dir(&args.dir, "--dir")?;
    let frozen = prepare(context, &dir, &args.identity)?;
    write(&dir, &frozen)?;
    let record = &frozen.slice.record;
    let json = serde_json::json!({
        "slice": frozen.digest.to_string(),
        "id": record.id,
        "revision": record.revision,
        "acceptance": record.acceptance.to_string(),
        "recipe": record.recipe.to_string(),
        "environment": record.environment.to_string(),
        "harness": record.harness.to_string(),
        "overlay": record.overlay.to_string(),
        "base": record.base.to_hex(),
        "protected": record.protected,
        "closed": record.closed,
        "open": record.open,
        "inputs": frozen.inputs.iter().map(|(name, digest)| (name.clone(), serde_json::Value::String(digest.to_string()))).collect::<serde_json::Map<_, _>>(),
    });
    let text = format!(
        "frozen Slice {} revision {}\n  slice       {}\n  acceptance  {}\n  recipe      {}\n  environment {}\n  harness     {} ({} files)\n  overlay     {} ({} files)\n  base        {}\n{}  seal with   --slice {}\n",
        record.id,
        record.revision,
        frozen.digest,
        record.acceptance,
        record.recipe,
        record.environment,
        record.harness,
        frozen.slice.harness.len(),
        record.overlay,
        frozen.slice.overlay.len(),
        record.base,
        closure_text(record),
        dir.display()
    );
    Ok(super::Output { json, text })
}

/// What the Slice closes, by reason, and what it opens again, for the text output.
fn closure_text(record: &SliceRecord) -> String {
    let mut text = String::new();
    for because in [Because::StandsIn, Because::LoadedBefore, Because::Beside] {
        let patterns: Vec<&str> = record
            .closed
            .iter()
            .filter(|entry| entry.because == because)
            .map(|entry| entry.pattern.as_str())
            .collect();
        if !patterns.is_empty() {
            text.push_str(&format!(
                "  closed      {}: {}\n",
                because.as_str(),
                patterns.join(", ")
            ));
        }
    }
    if !record.open.is_empty() {
        text.push_str(&format!("  open        {}\n", record.open.join(", ")));
    }
    text
}

/// A descriptor error as the command line reports it, naming the path.
fn fd_error(error: DirFdError) -> CliError {
    CliError::new(error.code(), error.to_string())
}

/// Reads and checks everything; writes nothing.
fn prepare(context: &Context, dir: &Path, identity: &Path) -> Result<Frozen, CliError> {
    let slice_dir = DirFd::open(dir).map_err(fd_error)?;
    let authored = |name: &str| -> Result<Value, CliError> {
        let file = slice_dir
            .read_file_named(OsStr::new(name), MAX_INPUT_BYTES)
            .map_err(fd_error)?;
        canonical::parse(&file.bytes).map_err(|error| invalid(dir.join(name).display(), error))
    };
    let slice: Authored = read_authored(&authored("slice.json")?, "slice.json")?;
    // Inputs, read (not yet stored); the acceptance names them by digest.
    let mut acceptance_value = authored("acceptance.json")?;
    let mut inputs = BTreeMap::new();
    let mut snapshots = Vec::new();
    let mut input_files = BTreeMap::new();
    if let Value::Object(map) = &mut acceptance_value
        && let Some(Value::Array(checks)) = map.get_mut("checks")
    {
        for check in checks {
            let Value::Object(check) = check else {
                continue;
            };
            // A command's dependency environment is named; the freeze pins what the name
            // points to now: its digest and where it is bound, verified.
            if let Some(Value::String(name)) = check.get("environment").cloned() {
                let entry = super::env::resolve(context, &name)?;
                check.insert(
                    "environment".into(),
                    canonical::object([
                        ("name", Value::String(name)),
                        ("digest", Value::String(entry.digest.to_string())),
                        ("at", Value::String(entry.at.display().to_string())),
                    ]),
                );
            }
            let Some(Value::String(input)) = check.get("input").cloned() else {
                continue;
            };
            if Digest::parse(&input).is_some() {
                return Err(invalid(
                    format!("acceptance.json input {input:?}"),
                    "name a directory under inputs/: freeze stores it and writes its digest",
                ));
            }
            if !is_valid_id(&input) || input.contains('/') || input.contains(':') {
                return Err(invalid(
                    format!("acceptance.json input {input:?}"),
                    "is the name of a directory under inputs/",
                ));
            }
            let input_dir = dir.join("inputs").join(&input);
            let digest = match inputs.get(&input) {
                Some(digest) => Digest::clone(digest),
                None => {
                    let files = read_snapshot_dir(&input_dir)
                        .map_err(|error| coded(error.code(), input_dir.display(), error))?;
                    let digest = snapshot_digest(&files)
                        .map_err(|error| invalid(input_dir.display(), error))?;
                    snapshots.push((digest.clone(), files.clone(), format!("input {input}")));
                    input_files.insert(digest.clone(), files);
                    inputs.insert(input.clone(), digest.clone());
                    digest
                }
            };
            check.insert("input".into(), Value::String(digest.to_string()));
        }
    }
    let acceptance = Acceptance::from_json(
        &canonical::encode(&acceptance_value).map_err(|error| invalid("acceptance.json", error))?,
    )
    .map_err(|error| invalid("acceptance.json", error))?;
    let harness = optional_dir(&dir.join("harness"), "harness")?;
    let overlay = optional_dir(&dir.join("overlay"), "overlay")?;
    let harness_digest = snapshot_digest(&harness).map_err(|error| invalid("harness/", error))?;
    let overlay_digest = snapshot_digest(&overlay).map_err(|error| invalid("overlay/", error))?;
    for (digest, files, what) in [
        (&harness_digest, &harness, "harness"),
        (&overlay_digest, &overlay, "overlay"),
    ] {
        if *digest != empty_snapshot() {
            snapshots.push((digest.clone(), files.clone(), what.to_owned()));
        }
    }
    // Recipe: the authored bounds, this collector, the configured runtime and what its
    // profile enforces.
    let AuthoredRecipe {
        timeout_ms,
        output_limit,
    } = read_authored(&authored("recipe.json")?, "recipe.json")?;
    let config = context.config()?;
    let executor_record = config
        .executor_record()
        .map_err(|why| invalid("the [executor] section", why))?;
    let executor = context.executor_of(&config)?;
    let recipe = current_recipe(executor.as_ref(), timeout_ms, output_limit)
        .map_err(|error| coded(error.code(), "the configured executor", error))?;
    recipe
        .validate()
        .map_err(|error| invalid("recipe.json", error))?;
    let environment = current_environment(executor.as_ref())
        .map_err(|error| coded(error.code(), "the configured executor", error))?;
    let repository = context.open_repository(identity)?;
    let base = repository
        .target()
        .map_err(|error| repository_error("the repository's target", &error))?;
    let base_snapshot = repository
        .snapshot(&base)
        .map_err(|error| repository_error("the repository's target", &error))?;
    let base_tree = materialise_base(&base_snapshot, &base_snapshot.commit, &base_snapshot.tree)
        .map_err(|why| invalid("the base", why))?;
    let tree = PathSet::new(
        base_tree
            .files
            .iter()
            .chain(&overlay)
            .map(|file| file.path.as_str()),
    );
    let closing = Closing::derive(&acceptance, &overlay, &slice.scope, &tree)
        .map_err(|error| invalid(format!("the Slice in {}", dir.display()), error))?;
    let mut protected: Vec<String> = slice.protected.clone();
    let trusted = overlay.iter().map(|file| file.path.as_str());
    for pattern in protection_of(trusted.chain(closing.named_files.iter().map(String::as_str))) {
        if !protected.contains(&pattern) {
            protected.push(pattern);
        }
    }
    let record = SliceRecord {
        id: slice.id,
        revision: slice.revision,
        repository: repository.identity().clone(),
        base,
        scope: slice.scope,
        protected,
        acceptance: acceptance
            .digest()
            .map_err(|error| invalid("acceptance", error))?,
        recipe: recipe.digest().map_err(|error| invalid("recipe", error))?,
        environment: environment
            .digest()
            .map_err(|error| invalid("environment", error))?,
        harness: harness_digest,
        overlay: overlay_digest,
        executor: executor_record,
        // The default is not written, so that such a Slice keeps the record it always had.
        bounds: slice
            .bounds
            .filter(|bounds| *bounds != ProposalBounds::DEFAULT),
        forbidden: slice.forbidden,
        closed: closing.closed(),
        open: slice.open,
    };
    let frozen = FrozenSlice {
        record,
        acceptance,
        recipe,
        environment,
        harness,
        overlay,
        inputs: input_files,
    };
    let digest = frozen
        .validate()
        .map_err(|error| invalid(format!("the Slice in {}", dir.display()), error))?;
    lay_over(&base_tree, &frozen.overlay, "base").map_err(|why| invalid("overlay/", why))?;
    frozen
        .check_entries_in(&base_tree.files)
        .map_err(|error| invalid("acceptance.json", error))?;
    Ok(Frozen {
        slice: frozen,
        digest,
        snapshots,
        inputs,
    })
}

/// Stores the snapshots and writes the frozen records, the Slice record last. Refuses, before
/// writing anything, a frozen record that already holds other bytes. Every write is relative
/// to a directory descriptor and follows no link.
fn write(dir: &Path, frozen: &Frozen) -> Result<(), CliError> {
    let encode = |what: &str, bytes: Result<Vec<u8>, sf_host::assurance::AssuranceError>| {
        bytes.map_err(|error| invalid(what, error))
    };
    let slice = &frozen.slice;
    let records = [
        (
            "acceptance.json",
            encode("acceptance", slice.acceptance.to_bytes())?,
        ),
        ("recipe.json", encode("recipe", slice.recipe.to_bytes())?),
        (
            "environment.json",
            encode("environment", slice.environment.to_bytes())?,
        ),
        (SLICE_RECORD, encode("slice", slice.record.to_bytes())?),
    ];
    let conflict = |error: DirFdError| match error {
        DirFdError::Differs { path } => coded(
            "conflict",
            path.display(),
            "already holds another frozen record; a changed Slice needs a new revision in a \
             new directory",
        ),
        other => fd_error(other),
    };
    let slice_dir = DirFd::open(dir).map_err(fd_error)?;
    if slice_dir
        .entry(OsStr::new(FROZEN))
        .map_err(fd_error)?
        .is_some()
    {
        let existing = slice_dir
            .open_dir_named(OsStr::new(FROZEN))
            .map_err(fd_error)?;
        for (name, bytes) in &records {
            if existing
                .entry(OsStr::new(name))
                .map_err(fd_error)?
                .is_none()
            {
                continue;
            }
            let held = existing
                .read_file_named(OsStr::new(name), bytes.len() as u64)
                .map_err(|error| match error {
                    DirFdError::TooLarge { path, .. } => DirFdError::Differs { path },
                    other => other,
                })
                .map_err(conflict)?;
            if held.bytes != *bytes {
                return Err(conflict(DirFdError::Differs {
                    path: existing.shown(OsStr::new(name)),
                }));
            }
        }
    }
    let snapshots = SnapshotStore::open(&state_dir(dir, "snapshots", true)?)
        .map_err(|error| coded(error.code(), "the snapshot store", error))?;
    for (digest, files, what) in &frozen.snapshots {
        snapshots
            .put(files, digest)
            .map_err(|error| coded(error.code(), format!("the Slice's {what}"), error))?;
    }
    let frozen_dir = slice_dir
        .ensure_dir(OsStr::new(FROZEN), 0o755)
        .map_err(fd_error)?;
    for (name, bytes) in &records {
        frozen_dir
            .write_once(OsStr::new(name), bytes, 0o644)
            .map_err(conflict)?;
    }
    Ok(())
}
