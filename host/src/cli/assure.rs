//! `sf slice freeze`, `sf collect`, `sf judge` and `sf evidence {get,find}`: Repository
//! Assurance on the command line (docs/assurance.md, "Command line").
//!
//! A Slice directory holds what the operator authors and what sf freezes and keeps:
//!
//! ```text
//! SLICE/slice.json          {"id", "revision", "scope"}                       (authored)
//! SLICE/acceptance.json     an acceptance; a check's "input" may name SLICE/inputs/<name>
//! SLICE/recipe.json         {"timeoutMs", "outputLimit"}
//! SLICE/inputs/<name>/…     fixture inputs
//! SLICE/frozen/             acceptance.json, recipe.json, environment.json, frozen-inputs.json
//! SLICE/state/              private: snapshots/, evidence/evidence.db, fence/
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, Subcommand};

use super::common::{CliError, Context, Output, json_value, read_input, repository_error};
use crate::assurance::{
    Acceptance, EnvironmentRecord, JudgeRequest, OBSERVATION_FORMAT, Observation, Recipe,
    RepositoryPins, Verdict, current_environment, judge, time,
};
use crate::canonical::{self, Digest, Value, object};
use crate::collector::{
    CollectRequest, CollectedRun, RepositoryCollector, collector_closure, materialise_base,
};
use crate::contracts::{AttemptId, CancelToken, EvidenceStore};
use crate::evidence::get_verified;
use crate::fence::Fence;
use crate::private_dir::PrivateDir;
use crate::repository::{FrozenInputs, ID_RULE, Repository, Slice, is_valid_id};
use crate::snapshot::snapshot_digest;
use crate::snapshot_store::SnapshotStore;
use crate::source_dir::read_snapshot_dir;

/// `sf slice …`.
#[derive(Debug, Subcommand)]
pub enum SliceCommand {
    /// Freeze a Slice: store its inputs, write its acceptance, recipe and environment records
    /// and the frozen inputs to seal with (SLICE/frozen/)
    Freeze(FreezeArgs),
}

#[derive(Debug, Args)]
pub struct FreezeArgs {
    /// The Slice directory (slice.json, acceptance.json, recipe.json, inputs/<name>/)
    #[arg(long, value_name = "SLICE")]
    pub(super) dir: PathBuf,
    /// The repository identity file; the Candidate's base is its target now
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
}

/// Which Candidate, in which repository, under which frozen Slice.
#[derive(Debug, Args)]
pub struct CandidateInSlice {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The Candidate digest (from `sf seal`)
    #[arg(long, value_name = "DIGEST")]
    pub(super) candidate: String,
    /// The frozen Slice directory
    #[arg(long, value_name = "SLICE")]
    pub(super) slice: PathBuf,
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
    /// A gate file ({"proceed": true} or {"proceed": false, "reason": …}), read before every
    /// run, in place of the configured [gate] (default: open, every run may proceed)
    #[arg(long, value_name = "FILE")]
    pub(super) gate: Option<PathBuf>,
    /// When the collection must be over (RFC 3339 UTC, e.g. 2026-01-01T12:00:00Z); default: in
    /// one hour
    #[arg(long, value_name = "ISO")]
    pub(super) deadline: Option<String>,
}

#[derive(Debug, Args)]
pub struct JudgeArgs {
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
    /// The attempt (fence epoch) to judge; default: the latest
    #[arg(long, value_name = "EPOCH")]
    pub(super) attempt: Option<u64>,
}

/// `sf evidence …`.
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Print one Evidence record, re-hashed
    Get(GetArgs),
    /// List the records filed under a Candidate's pins
    Find(FindArgs),
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The record id (sha256:…)
    id: String,
    /// The Slice directory whose evidence store holds it
    #[arg(long, value_name = "SLICE")]
    slice: PathBuf,
}

#[derive(Debug, Args)]
pub struct FindArgs {
    /// The Candidate digest
    #[arg(long, value_name = "DIGEST")]
    pub(super) candidate: String,
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The frozen Slice directory
    #[arg(long, value_name = "SLICE")]
    pub(super) slice: PathBuf,
}

fn invalid(what: impl std::fmt::Display, detail: impl std::fmt::Display) -> CliError {
    CliError::new("invalid-input", format!("{what}: {detail}"))
}

fn coded(code: &str, what: impl std::fmt::Display, detail: impl std::fmt::Display) -> CliError {
    CliError::new(code, format!("{what}: {detail}"))
}

fn parse_digest(text: &str, flag: &str) -> Result<Digest, CliError> {
    Digest::parse(text).ok_or_else(|| {
        invalid(
            format!("{flag} {text:?}"),
            "is not sha256: followed by 64 lowercase hex characters",
        )
    })
}

/// The state directory of a Slice, created private if absent.
fn state(slice: &Path, sub: &str) -> Result<PathBuf, CliError> {
    let slice = std::fs::canonicalize(slice)
        .map_err(|error| invalid(format!("--slice {}", slice.display()), error))?;
    let state = slice.join("state");
    PrivateDir::create_or_check(&state).map_err(|why| {
        coded(
            "unavailable",
            "the Slice state directory",
            format!("{why}; fix its permissions"),
        )
    })?;
    let path = state.join(sub);
    if sub.is_empty() {
        return Ok(state);
    }
    PrivateDir::create_or_check(&path)
        .map_err(|why| coded("unavailable", "the Slice state directory", why))?;
    Ok(path)
}

fn write_once(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    match std::fs::read(path) {
        Ok(existing) if existing == bytes => Ok(()),
        Ok(_) => Err(coded(
            "conflict",
            path.display(),
            "already holds another frozen record; a changed Slice needs a new revision in a new \
             directory",
        )),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(path, bytes).map_err(|error| coded("unavailable", path.display(), error))
        }
        Err(error) => Err(coded("unavailable", path.display(), error)),
    }
}

/// `sf slice freeze`.
pub fn run_slice(context: &Context, command: SliceCommand) -> Result<Output, CliError> {
    let SliceCommand::Freeze(args) = command;
    let dir = &args.dir;
    let authored = |name: &str| -> Result<Value, CliError> {
        let path = dir.join(name);
        canonical::parse(&read_input(&path, &format!("--dir {}", dir.display()))?)
            .map_err(|error| invalid(path.display(), error))
    };
    // slice.json
    let slice_value = authored("slice.json")?;
    let Value::Object(slice) = &slice_value else {
        return Err(invalid(
            "slice.json",
            "is an object {\"id\", \"revision\", \"scope\"}",
        ));
    };
    let id = match slice.get("id") {
        Some(Value::String(id)) if is_valid_id(id) => id.clone(),
        _ => return Err(invalid("slice.json id", ID_RULE)),
    };
    let revision = match slice.get("revision") {
        Some(Value::Integer(n)) if *n >= 1 => *n as u64,
        _ => return Err(invalid("slice.json revision", "is a positive integer")),
    };
    let scope = match slice.get("scope") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(path) => Ok(path.clone()),
                _ => Err(invalid("slice.json scope", "is a list of file paths")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(invalid("slice.json scope", "is a list of file paths")),
    };
    if slice.len() != 3 {
        return Err(invalid(
            "slice.json",
            "holds exactly id, revision and scope",
        ));
    }
    // Inputs, stored; acceptance with input names replaced by their digests.
    let snapshots = SnapshotStore::open(&state(dir, "snapshots")?)
        .map_err(|error| coded(error.code(), "the snapshot store", error))?;
    let mut acceptance_value = authored("acceptance.json")?;
    let mut inputs = BTreeMap::new();
    if let Value::Object(map) = &mut acceptance_value
        && let Some(Value::Array(checks)) = map.get_mut("checks")
    {
        for check in checks {
            let Value::Object(check) = check else {
                continue;
            };
            let Some(Value::String(input)) = check.get("input").cloned() else {
                continue;
            };
            if Digest::parse(&input).is_some() {
                continue;
            }
            if !is_valid_id(&input) || input.contains('/') || input.contains(':') {
                return Err(invalid(
                    format!("acceptance.json input {input:?}"),
                    "is a digest or the name of a directory under inputs/",
                ));
            }
            let input_dir = dir.join("inputs").join(&input);
            let files = read_snapshot_dir(&input_dir)
                .map_err(|error| coded(error.code(), input_dir.display(), error))?;
            let digest =
                snapshot_digest(&files).map_err(|error| invalid(input_dir.display(), error))?;
            snapshots
                .put(&files, &digest)
                .map_err(|error| coded(error.code(), input_dir.display(), error))?;
            check.insert("input".into(), Value::String(digest.to_string()));
            inputs.insert(input, digest);
        }
    }
    let acceptance = Acceptance::from_json(
        &canonical::encode(&acceptance_value).map_err(|error| invalid("acceptance.json", error))?,
    )
    .map_err(|error| invalid("acceptance.json", error))?;
    for check in acceptance.process_checks() {
        snapshots.read(&check.input).map_err(|error| {
            coded(
                error.code(),
                format!("check {} input {}", check.id, check.input),
                format!("{error}; name a directory under inputs/ instead of a digest"),
            )
        })?;
    }
    // Recipe: the authored bounds, this collector, the configured runtime.
    let recipe_value = authored("recipe.json")?;
    let (timeout_ms, output_limit) = match &recipe_value {
        Value::Object(map) if map.len() == 2 => {
            match (map.get("timeoutMs"), map.get("outputLimit")) {
                (Some(Value::Integer(t)), Some(Value::Integer(o))) if *t > 0 && *o > 0 => {
                    (*t as u64, *o as u64)
                }
                _ => {
                    return Err(invalid(
                        "recipe.json",
                        "is {\"timeoutMs\": N, \"outputLimit\": N}",
                    ));
                }
            }
        }
        _ => {
            return Err(invalid(
                "recipe.json",
                "is {\"timeoutMs\": N, \"outputLimit\": N}",
            ));
        }
    };
    let executor = context.executor()?;
    let runtime = executor
        .describe_runtime()
        .map_err(|error| coded(error.code(), "the configured executor's runtime", error))?;
    let recipe = Recipe {
        collector_closure: collector_closure(),
        timeout_ms,
        output_limit,
        runtime: runtime
            .executable
            .to_str()
            .ok_or_else(|| invalid("the runtime", "is not a UTF-8 path"))?
            .to_owned(),
    };
    recipe
        .validate()
        .map_err(|error| invalid("recipe.json", error))?;
    let environment = current_environment(executor.as_ref())
        .map_err(|error| coded(error.code(), "the configured executor", error))?;
    let repository = context.open_repository(&args.identity)?;
    let base = repository
        .target()
        .map_err(|error| repository_error("the repository's target", &error))?;
    let frozen = FrozenInputs {
        base,
        slice: Slice { id, revision },
        scope,
        acceptance: acceptance
            .digest()
            .map_err(|error| invalid("acceptance", error))?,
        recipe: recipe.digest().map_err(|error| invalid("recipe", error))?,
        environment: environment
            .digest()
            .map_err(|error| invalid("environment", error))?,
    };
    frozen
        .validate()
        .map_err(|error| repository_error("slice.json", &error))?;
    let out = dir.join("frozen");
    std::fs::create_dir_all(&out).map_err(|error| coded("unavailable", out.display(), error))?;
    let encode =
        |value: &Value| canonical::encode(value).map_err(|error| invalid("a record", error));
    write_once(
        &out.join("acceptance.json"),
        &encode(&acceptance.to_value())?,
    )?;
    write_once(&out.join("recipe.json"), &encode(&recipe.to_value())?)?;
    write_once(
        &out.join("environment.json"),
        &encode(&environment.to_value())?,
    )?;
    write_once(
        &out.join("frozen-inputs.json"),
        &encode(&frozen.to_value())?,
    )?;
    let json = serde_json::json!({
        "acceptance": frozen.acceptance.to_string(),
        "recipe": frozen.recipe.to_string(),
        "environment": frozen.environment.to_string(),
        "base": base.to_hex(),
        "inputs": inputs.iter().map(|(name, digest)| (name.clone(), serde_json::Value::String(digest.to_string()))).collect::<serde_json::Map<_, _>>(),
        "frozenInputs": out.join("frozen-inputs.json").display().to_string(),
    });
    let text = format!(
        "frozen Slice {} revision {}\n  acceptance  {}\n  recipe      {}\n  environment {}\n  base        {}\n  seal with   --frozen {}\n",
        frozen.slice.id,
        frozen.slice.revision,
        frozen.acceptance,
        frozen.recipe,
        frozen.environment,
        base,
        out.join("frozen-inputs.json").display()
    );
    Ok(Output { json, text })
}

/// The frozen records, the Candidate, its base and the pins.
struct Loaded {
    repository: Repository,
    request: CollectRequest,
}

fn load(
    context: &Context,
    identity: &Path,
    candidate: &str,
    slice: &Path,
    deadline: SystemTime,
) -> Result<Loaded, CliError> {
    let digest = parse_digest(candidate, "--candidate")?;
    let frozen = slice.join("frozen");
    let record = |name: &str| read_input(&frozen.join(name), "--slice");
    let acceptance = Acceptance::from_json(&record("acceptance.json")?)
        .map_err(|error| invalid("the frozen acceptance", error))?;
    let recipe = Recipe::from_json(&record("recipe.json")?)
        .map_err(|error| invalid("the frozen recipe", error))?;
    let environment = EnvironmentRecord::from_json(&record("environment.json")?)
        .map_err(|error| invalid("the frozen environment", error))?;
    let repository = context.open_repository(identity)?;
    let sealed = repository
        .export_candidate(&digest)
        .map_err(|error| repository_error(&format!("--candidate {digest}"), &error))?;
    let base = repository
        .snapshot(&sealed.manifest.base_commit)
        .map_err(|error| repository_error("the Candidate's base", &error))?;
    let base_files = materialise_base(
        &base,
        &sealed.manifest.base_commit,
        &sealed.manifest.base_tree,
    )
    .map_err(|why| coded("corrupt", "the Candidate's base", why))?;
    let snapshots = SnapshotStore::open(&state(slice, "snapshots")?)
        .map_err(|error| coded(error.code(), "the snapshot store", error))?;
    let mut inputs = BTreeMap::new();
    for check in acceptance.process_checks() {
        let files = snapshots
            .read(&check.input)
            .map_err(|error| coded(error.code(), format!("check {} input", check.id), error))?;
        inputs.insert(check.input.clone(), files);
    }
    let request = CollectRequest {
        pins: RepositoryPins::for_candidate(&sealed, base_files.digest),
        acceptance,
        recipe,
        environment,
        sealed,
        base,
        inputs,
        deadline,
    };
    Ok(Loaded {
        repository,
        request,
    })
}

/// The configured EvidenceStore; a local one keeps its files in `SLICE/state/evidence/`.
fn evidence_store(context: &Context, slice: &Path) -> Result<Arc<dyn EvidenceStore>, CliError> {
    context.evidence_store(&state(slice, "evidence")?)
}

fn fence(slice: &Path, product: &str) -> Result<Fence, CliError> {
    Fence::open(&state(slice, "fence")?, product)
        .map_err(|error| coded(error.code(), "the fence", error))
}

fn run_json(run: &CollectedRun) -> serde_json::Value {
    serde_json::json!({
        "check": run.check,
        "state": run.state.as_str(),
        "evidence": run.evidence.as_ref().map(ToString::to_string),
        "problems": run.problems,
    })
}

/// `sf collect`.
pub fn run_collect(context: &Context, args: CollectArgs) -> Result<Output, CliError> {
    let deadline = match &args.deadline {
        Some(text) => time::parse_loose(text)
            .map(time::from_millis)
            .ok_or_else(|| {
                invalid(
                    format!("--deadline {text:?}"),
                    "is an RFC 3339 UTC time such as 2026-01-01T12:00:00Z",
                )
            })?,
        None => SystemTime::now() + Duration::from_secs(3600),
    };
    let loaded = load(
        context,
        &args.target.identity,
        &args.target.candidate,
        &args.target.slice,
        deadline,
    )?;
    let executor = context.executor()?;
    let store = evidence_store(context, &args.target.slice)?;
    let product = loaded.repository.identity().product_id.clone();
    let fence = fence(&args.target.slice, &product)?;
    let slice_dir = std::fs::canonicalize(&args.target.slice)
        .map_err(|error| invalid(format!("--slice {}", args.target.slice.display()), error))?;
    let protected = vec![
        slice_dir.clone(),
        state(&args.target.slice, "")?,
        PathBuf::from(&loaded.repository.identity().path),
    ];
    let collector = RepositoryCollector::new(store, executor, protected)
        .map_err(|error| coded(error.code(), "the collector", error))?;
    let gate = context.gate(args.gate.as_deref())?;
    let hold = fence.acquire().map_err(|error| {
        coded(
            error.code(),
            "the fence",
            format!("{error}; wait for the other attempt to end"),
        )
    })?;
    eprintln!("sf collect: attempt {}", hold.attempt());
    let result = collector
        .collect_with_progress(
            &loaded.request,
            gate,
            &hold,
            &CancelToken::new(),
            &mut |run| {
                eprintln!(
                    "sf collect: {} {} {}",
                    run.check,
                    run.state.as_str(),
                    run.problems.first().map(String::as_str).unwrap_or("")
                );
            },
        )
        .map_err(|error| coded(error.code(), "the collection", error))?;
    let json = serde_json::json!({
        "attempt": json_value(&result.attempt.to_value()),
        "pins": result.pins.to_string(),
        "mayJudge": result.may_judge(),
        "runs": result.runs.iter().map(run_json).collect::<Vec<_>>(),
        "evidence": result.evidence.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    let mut text = format!(
        "collected attempt {} ({} records)\n",
        result.attempt,
        result.evidence.len()
    );
    for run in &result.runs {
        text.push_str(&format!("  {:<24} {}\n", run.check, run.state.as_str()));
    }
    if !result.may_judge() {
        text.push_str("no Verdict may be issued for this attempt\n");
    }
    Ok(Output { json, text })
}

fn verdict_output(verdict: &Verdict) -> Output {
    let mut text = format!(
        "{} (attempt {})\n",
        verdict.outcome.as_str(),
        verdict.attempt
    );
    for check in &verdict.checks {
        let met = match check.met {
            Some(true) => "met",
            Some(false) => "missed",
            None => "not attributable",
        };
        text.push_str(&format!("  {:<24} {met}\n", check.check));
    }
    for reason in &verdict.reasons {
        text.push_str(&format!("  reason: {reason}\n"));
    }
    Output {
        json: json_value(&verdict.to_value()),
        text,
    }
}

/// `sf judge`.
pub fn run_judge(context: &Context, args: JudgeArgs) -> Result<Output, CliError> {
    Ok(verdict_output(&judge_verdict(context, args)?))
}

/// The Verdict `sf judge` prints.
pub fn judge_verdict(context: &Context, args: JudgeArgs) -> Result<Verdict, CliError> {
    let loaded = load(
        context,
        &args.target.identity,
        &args.target.candidate,
        &args.target.slice,
        SystemTime::now(),
    )?;
    let store = evidence_store(context, &args.target.slice)?;
    let product = loaded.repository.identity().product_id.clone();
    let epoch = match args.attempt {
        Some(epoch) => epoch,
        None => fence(&args.target.slice, &product)?
            .last_epoch()
            .map_err(|error| coded(error.code(), "the fence", error))?,
    };
    if epoch == 0 {
        return Err(coded(
            "missing",
            "--slice",
            "no attempt was made yet; run `sf collect` first",
        ));
    }
    let attempt = AttemptId { product, epoch };
    let request = &loaded.request;
    judge(
        &JudgeRequest {
            pins: &request.pins,
            acceptance: &request.acceptance,
            recipe: &request.recipe,
            environment: &request.environment,
            attempt: &attempt,
        },
        store.as_ref(),
        Instant::now() + Duration::from_secs(60),
    )
    .map_err(|error| invalid("the frozen records", error))
}

/// `sf evidence …`.
pub fn run_evidence(context: &Context, command: EvidenceCommand) -> Result<Output, CliError> {
    match command {
        EvidenceCommand::Get(args) => {
            let id = parse_digest(&args.id, "ID")?;
            let store = evidence_store(context, &args.slice)?;
            let record = get_verified(
                store.as_ref(),
                &id,
                Instant::now() + Duration::from_secs(60),
            )
            .map_err(|error| coded(error.code(), format!("record {id}"), error))?;
            let observation = (record.format() == OBSERVATION_FORMAT)
                .then(|| Observation::decode(record.payload()))
                .transpose()
                .map_err(|why| coded("corrupt", format!("record {id}"), why))?;
            let mut json = serde_json::json!({
                "id": id.to_string(),
                "pins": record.pins().to_string(),
                "attempt": json_value(&record.attempt().to_value()),
                "format": record.format(),
                "bytes": record.bytes().len(),
            });
            let mut text = format!(
                "record {id}\n  pins    {}\n  attempt {}\n  format  {}\n",
                record.pins(),
                record.attempt(),
                record.format()
            );
            if let Some(observation) = observation {
                json["observation"] = json_value(&observation.facts_value());
                json["stdout"] = String::from_utf8_lossy(&observation.stdout).into();
                json["stderr"] = String::from_utf8_lossy(&observation.stderr).into();
                text.push_str(&format!(
                    "  check   {} ({})\n  status  {}\n",
                    observation.facts.check,
                    observation.facts.stage.as_str(),
                    observation.facts.status.as_str()
                ));
                for problem in &observation.facts.problems {
                    text.push_str(&format!("  problem {problem}\n"));
                }
                text.push_str(&format!(
                    "--- stdout\n{}",
                    String::from_utf8_lossy(&observation.stdout)
                ));
            }
            Ok(Output { json, text })
        }
        EvidenceCommand::Find(args) => {
            let loaded = load(
                context,
                &args.identity,
                &args.candidate,
                &args.slice,
                SystemTime::now(),
            )?;
            let pins = loaded
                .request
                .pins
                .digest()
                .map_err(|error| invalid("the pins", error))?;
            let store = evidence_store(context, &args.slice)?;
            let ids = store
                .find(&pins, Instant::now() + Duration::from_secs(60))
                .map_err(|error| coded(error.code(), "the evidence store", error))?;
            let json = json_value(&object([
                ("pins", pins.to_string().into()),
                (
                    "ids",
                    Value::Array(ids.iter().map(|id| id.to_string().into()).collect()),
                ),
            ]));
            let mut text = format!("pins {pins}: {} records\n", ids.len());
            for id in &ids {
                text.push_str(&format!("  {id}\n"));
            }
            Ok(Output { json, text })
        }
    }
}
