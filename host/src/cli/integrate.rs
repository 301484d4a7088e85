//! `sf integrate {prepare,invoke,inspect}`: the guarded, at-most-once integration of a sealed
//! Candidate into the target ref (docs/integration.md).
//!
//! Every call that reaches the repository prints an observation with `ok: true`, whatever it
//! says: `invocation` is the answer (`confirmed`, `unknown`, `withheld`, `not-dispatched`), and
//! `unknown` never licenses a retry. `ok: false` means the call refused before starting
//! anything (bad input, a missing or conflicting intent, a claim Git did not acknowledge).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::common::{
    CliError, Context, Output, absolute_new_path, json_value, read_input, repository_error,
};
use crate::canonical::{self, Digest};
use crate::repository::{
    Action, IntegrationObservation, IntegrationPayload, Owner, PreparedIntegration, RepositoryError,
};

#[derive(Debug, Subcommand)]
pub enum IntegrateCommand {
    /// Retain one immutable intent for (action, occurrence); moves nothing
    Prepare(PrepareArgs),
    /// Move the target from B to M at most once for a prepared intent
    Invoke(InvokeArgs),
    /// Report an intent's retained history, read-only
    Inspect(InspectArgs),
}

#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The whole payload as JSON; otherwise give the flags below and the rest comes from the
    /// Candidate
    #[arg(long, value_name = "FILE", conflicts_with_all = ["candidate", "action", "occurrence", "proof", "owner", "generation"])]
    pub(super) payload: Option<PathBuf>,
    /// The Candidate digest (sha256:…)
    #[arg(long, value_name = "DIGEST", required_unless_present = "payload")]
    pub(super) candidate: Option<String>,
    /// The action id
    #[arg(long, value_name = "ID", required_unless_present = "payload")]
    pub(super) action: Option<String>,
    /// The action's occurrence (a positive integer; a new effect needs a new occurrence)
    #[arg(long, value_name = "N", required_unless_present = "payload")]
    pub(super) occurrence: Option<u64>,
    /// The digest of whatever admitted this integration (sha256:…)
    #[arg(long, value_name = "DIGEST", required_unless_present = "payload")]
    pub(super) proof: Option<String>,
    /// The owner id
    #[arg(long, value_name = "ID", required_unless_present = "payload")]
    pub(super) owner: Option<String>,
    /// The owner's generation (a positive integer)
    #[arg(long, value_name = "N", required_unless_present = "payload")]
    pub(super) generation: Option<u64>,
    /// Also write the prepared record to this new file (never overwritten)
    #[arg(long, value_name = "FILE")]
    pub(super) prepared_out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InvokeArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The prepared record (from `sf integrate prepare --prepared-out`)
    #[arg(long, value_name = "FILE")]
    pub(super) prepared: PathBuf,
    /// A gate file read immediately before the move, in place of the configured [gate]:
    /// exactly {"proceed": true} lets it start
    #[arg(long, value_name = "FILE")]
    pub(super) gate: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The prepared record
    #[arg(long, value_name = "FILE")]
    pub(super) prepared: PathBuf,
}

pub fn run(context: &Context, command: IntegrateCommand) -> Result<Output, CliError> {
    match command {
        IntegrateCommand::Prepare(args) => prepare(context, args),
        IntegrateCommand::Invoke(args) => invoke(context, args),
        IntegrateCommand::Inspect(args) => inspect(context, args),
    }
}

fn digest_flag(text: &str, flag: &str) -> Result<Digest, CliError> {
    Digest::parse(text).ok_or_else(|| {
        CliError::new(
            "invalid-input",
            format!("{flag} {text:?}: must be sha256: followed by 64 lowercase hex characters"),
        )
    })
}

fn prepare(context: &Context, args: PrepareArgs) -> Result<Output, CliError> {
    let prepared_out = match &args.prepared_out {
        Some(file) => {
            let file = absolute_new_path(file, "--prepared-out")?;
            if file.symlink_metadata().is_ok() {
                return Err(CliError::new(
                    "exists",
                    format!(
                        "--prepared-out {}: already exists; sf never overwrites it: choose a new file",
                        file.display()
                    ),
                ));
            }
            Some(file)
        }
        None => None,
    };
    let repository = context.open_repository(&args.identity)?;
    let payload = match &args.payload {
        Some(file) => IntegrationPayload::from_json(&read_input(file, "--payload")?)
            .map_err(|error| repository_error(&format!("--payload {}", file.display()), &error))?,
        None => {
            // clap requires every flag when --payload is absent.
            let missing = || CliError::new("usage", "give --payload or every payload flag");
            let candidate = digest_flag(
                args.candidate.as_deref().ok_or_else(missing)?,
                "--candidate",
            )?;
            let proof = digest_flag(args.proof.as_deref().ok_or_else(missing)?, "--proof")?;
            let sealed = repository
                .export_candidate(&candidate)
                .map_err(|error| repository_error(&format!("--candidate {candidate}"), &error))?;
            let identity = repository.identity();
            IntegrationPayload {
                action: Action {
                    id: args.action.clone().ok_or_else(missing)?,
                    occurrence: args.occurrence.ok_or_else(missing)?,
                },
                product: identity.product_id.clone(),
                slice: sealed.manifest.slice.clone(),
                repository: identity.clone(),
                target_ref: identity.target_ref.clone(),
                base: sealed.manifest.base_commit,
                commit: sealed.manifest.commit,
                candidate,
                proof,
                owner: Owner {
                    id: args.owner.clone().ok_or_else(missing)?,
                    generation: args.generation.ok_or_else(missing)?,
                },
            }
        }
    };
    let prepared = repository
        .prepare_integration(&payload)
        .map_err(|error| repository_error("preparing the integration", &error))?;
    let value = prepared.to_value();
    if let Some(file) = &prepared_out {
        let bytes = canonical::encode(&value)
            .map_err(|error| CliError::new("invalid-input", error.to_string()))?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(file)
            .and_then(|mut out| out.write_all(&bytes).and_then(|()| out.sync_all()))
            .map_err(|error| {
                CliError::new(
                    "unwritable-output",
                    format!(
                        "--prepared-out {}: cannot be written ({error}); the intent is retained: \
                         run prepare again with the same input to get it",
                        file.display()
                    ),
                )
            })?;
    }
    let text = format!(
        "prepared intent {}\n  intent commit {}\n  action        {} #{}\n  move          {} {} -> {}\n",
        prepared.digest,
        prepared.intent,
        prepared.payload.action.id,
        prepared.payload.action.occurrence,
        prepared.payload.target_ref,
        prepared.payload.base,
        prepared.payload.commit
    );
    Ok(Output {
        json: json_value(&value),
        text,
    })
}

fn read_prepared(path: &Path) -> Result<PreparedIntegration, CliError> {
    PreparedIntegration::from_json(&read_input(path, "--prepared")?)
        .map_err(|error| repository_error(&format!("--prepared {}", path.display()), &error))
}

fn invoke(context: &Context, args: InvokeArgs) -> Result<Output, CliError> {
    let prepared = read_prepared(&args.prepared)?;
    let repository = context.open_repository(&args.identity)?;
    let gate = context.gate(args.gate.as_deref())?;
    let observed = repository
        .invoke_once(&prepared, Some(gate))
        .map_err(|error| integration_error("invoking the integration", &error))?;
    Ok(describe(&observed))
}

fn inspect(context: &Context, args: InspectArgs) -> Result<Output, CliError> {
    let prepared = read_prepared(&args.prepared)?;
    let repository = context.open_repository(&args.identity)?;
    let observed = repository
        .inspect_integration(&prepared)
        .map_err(|error| integration_error("inspecting the integration", &error))?;
    Ok(describe(&observed))
}

fn integration_error(what: &str, error: &RepositoryError) -> CliError {
    let mut cli = repository_error(what, error);
    if matches!(error, RepositoryError::GitFailed { .. }) {
        cli.message
            .push_str("; nothing was started: inspect before deciding anything else");
    }
    cli
}

fn describe(observed: &IntegrationObservation) -> Output {
    let text = format!(
        "invocation    {}\ndispatched    {}\npostcondition {}\ntarget        {}\ndispatch      {}\nreceipt       {}\nproblem       {}\n",
        observed.invocation.as_str(),
        observed.dispatched,
        observed.postcondition.as_str(),
        observed.target.map_or("-".into(), |id| id.to_hex()),
        observed.dispatch.map_or("-".into(), |id| id.to_hex()),
        observed
            .receipt
            .as_ref()
            .map_or("-".into(), |r| r.id.to_hex()),
        observed.problem.as_deref().unwrap_or("-"),
    );
    Output {
        json: json_value(&observed.to_value()),
        text,
    }
}
