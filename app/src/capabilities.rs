//! oats capabilities as a Slice's checks: the freeze stages each oats check once (through
//! whatever can reach the capability registry: the command line asks its `sf-oats` program)
//! and pins the capability's integrity and the staged run's digest; a collection or a trial
//! stages each again just before it runs, at the pinned integrity. A capability that cannot
//! be staged then (unknown, untrusted, drifted, upgraded) leaves its check not started, so
//! undecided: never Failed, never met.

use std::collections::BTreeMap;
use std::path::Path;

use sf_host::assurance::Acceptance;
use sf_host::canonical::Value;
use sf_host::collector::StagedCapabilities;
use sf_host::contracts::PROGRAM_DIR;
use sf_host::snapshot::{SnapshotFile, snapshot_digest};

use crate::backends::Backends;
use crate::error::AppError;

/// One oats check to stage.
#[derive(Clone, Debug)]
pub struct StageRequest<'a> {
    /// The capability id.
    pub capability: &'a str,
    /// The operation.
    pub operation: &'a str,
    /// Its declared arguments, by name.
    pub args: &'a BTreeMap<String, String>,
    /// The integrity the Slice pinned; `None` when freezing.
    pub integrity: Option<&'a str>,
    /// The directory inside the run the operation reads (its working directory).
    pub tree: &'a str,
    /// The Slice directory to record as pinning the capability (when freezing).
    pub pin: Option<&'a Path>,
    /// The state directory of the registry (`[oats] state`); `None` for the default.
    pub state: Option<&'a Path>,
}

/// A check staged: the capability's integrity and version, and the run's harness.
#[derive(Clone, Debug)]
pub struct Staged {
    /// The integrity of the bytes staged.
    pub integrity: String,
    /// The capability's version.
    pub version: String,
    /// The harness of the check's run.
    pub files: Vec<SnapshotFile>,
}

/// What can stage oats checks: the command line's `sf-oats`, or nothing.
pub trait CapabilityStager: Send + Sync {
    /// Stages one check, or answers why not (`code`, then what is wrong and the fix).
    fn stage(&self, request: &StageRequest<'_>) -> Result<Staged, AppError>;
}

/// The stager of a caller that runs no oats capability: every oats check is refused.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCapabilities;

impl CapabilityStager for NoCapabilities {
    fn stage(&self, request: &StageRequest<'_>) -> Result<Staged, AppError> {
        Err(AppError::new(
            "unavailable",
            format!(
                "capability {}: this caller of sf runs no oats capability (the command line \
                 runs them with the sf-oats program beside sf)",
                request.capability
            ),
        ))
    }
}

/// Stages oats checks with `sf-oats stage` (its registry in `[oats] state`, else where `sf
/// oats` keeps it by default), reading the harness it writes into a private temporary
/// directory.
#[derive(Clone, Copy, Debug, Default)]
pub struct SfOats;

impl CapabilityStager for SfOats {
    fn stage(&self, request: &StageRequest<'_>) -> Result<Staged, AppError> {
        let scratch = tempfile::Builder::new()
            .prefix("sf-oats-stage.")
            .tempdir()
            .map_err(|error| AppError::new("io", format!("a staging directory: {error}")))?;
        let out = scratch.path().join("harness");
        let out_text = out.to_string_lossy().into_owned();
        let state = request
            .state
            .map(|state| state.to_string_lossy().into_owned());
        let mut args = vec![];
        if let Some(state) = &state {
            args.extend(["--state", state.as_str()]);
        }
        args.extend(["stage", request.capability, request.operation]);
        let pairs: Vec<String> = request
            .args
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        for pair in &pairs {
            args.extend(["--arg", pair]);
        }
        if let Some(integrity) = request.integrity {
            args.extend(["--integrity", integrity]);
        }
        let pin = request.pin.map(|pin| pin.to_string_lossy().into_owned());
        if let Some(pin) = &pin {
            args.extend(["--pin", pin]);
        }
        args.extend(["--tree", request.tree, "--out", &out_text]);
        // sf-oats's messages name the capability first.
        let answer = crate::external::sf_oats_json(&args)?;
        let files = sf_host::source_dir::read_snapshot_dir(&out)
            .map_err(|error| AppError::coded(error.code(), out.display(), error))?;
        let field = |name: &str| answer[name].as_str().unwrap_or_default().to_owned();
        Ok(Staged {
            integrity: field("integrity"),
            version: field("version"),
            files,
        })
    }
}

/// The fields an operator authors in an oats check; the freeze adds `integrity`, `harness`
/// and `input`.
const AUTHORED: [&str; 8] = [
    "kind",
    "id",
    "phase",
    "stage",
    "capability",
    "operation",
    "args",
    "expectation",
];

/// Pins an authored oats check (`check`, a JSON object) of the Slice in `slice_dir`: stages
/// it, and writes the capability's integrity and the staged run's digest into it.
pub(crate) fn pin_check(
    backends: &Backends,
    slice_dir: &Path,
    check: &mut BTreeMap<String, Value>,
) -> Result<(), AppError> {
    let id = match check.get("id") {
        Some(Value::String(id)) => id.clone(),
        _ => String::from("?"),
    };
    let field = format!("acceptance.json check {id}");
    if let Some(key) = check.keys().find(|key| !AUTHORED.contains(&key.as_str())) {
        return Err(AppError::invalid(
            format!("{field}: {key}"),
            format!(
                "an oats check is authored with {}; the freeze writes the capability's \
                 integrity and the staged run's digest itself",
                AUTHORED.join(", ")
            ),
        ));
    }
    let text = |key: &str| match check.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        _ => Err(AppError::invalid(
            format!("{field}: {key}"),
            "is a string (an oats check names its capability and operation)",
        )),
    };
    let (capability, operation) = (text("capability")?, text("operation")?);
    let args = authored_args(&field, check.get("args"))?;
    let config = backends.config()?;
    let staged = backends.capabilities.stage(&StageRequest {
        capability: &capability,
        operation: &operation,
        args: &args,
        integrity: None,
        tree: PROGRAM_DIR,
        pin: Some(slice_dir),
        state: config.oats_state(),
    })?;
    let digest = snapshot_digest(&staged.files).map_err(|error| {
        AppError::invalid(format!("{field}: the staged run of {capability}"), error)
    })?;
    check.insert("integrity".into(), Value::String(staged.integrity));
    check.insert("harness".into(), Value::String(digest.to_string()));
    check.insert(
        "args".into(),
        Value::Object(
            args.into_iter()
                .map(|(name, value)| (name, Value::String(value)))
                .collect(),
        ),
    );
    Ok(())
}

/// An oats check's authored `args`: an object of strings, or absent for none.
fn authored_args(field: &str, args: Option<&Value>) -> Result<BTreeMap<String, String>, AppError> {
    let Some(args) = args else {
        return Ok(BTreeMap::new());
    };
    let invalid = || {
        AppError::invalid(
            format!("{field}: args"),
            "is an object of the operation's declared arguments, each value a string",
        )
    };
    let Value::Object(args) = args else {
        return Err(invalid());
    };
    args.iter()
        .map(|(name, value)| match value {
            Value::String(value) => Ok((name.clone(), value.clone())),
            _ => Err(invalid()),
        })
        .collect()
}

/// Each oats check of `acceptance` staged again at its pinned integrity, for a collection or
/// a trial: its files, or why they could not be staged.
pub(crate) fn staged_for_run(backends: &Backends, acceptance: &Acceptance) -> StagedCapabilities {
    let config = backends.config();
    acceptance
        .process_checks()
        .filter_map(|check| Some((check.id.clone(), check.oats()?)))
        .map(|(id, oats)| {
            let staged = config.as_ref().map_err(Clone::clone).and_then(|config| {
                backends.capabilities.stage(&StageRequest {
                    capability: &oats.capability,
                    operation: &oats.operation,
                    args: &oats.args,
                    integrity: Some(&oats.integrity),
                    tree: PROGRAM_DIR,
                    pin: None,
                    state: config.oats_state(),
                })
            });
            let files = staged.map(|staged| staged.files);
            (id, files.map_err(|error| error.to_string()))
        })
        .collect()
}
