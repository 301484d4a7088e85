//! `sf integrate {prepare,invoke,inspect}`: the guarded, at-most-once integration of a sealed
//! Candidate into the target ref (docs/integration.md), bound to a Verified Verdict: prepare
//! judges the Candidate's evidence under its Slice and refuses anything but Verified, the
//! Verdict's digest is the intent's proof, and invoke judges the stored evidence again,
//! immediately before the move, and requires the same Verified Verdict.
//!
//! Every call that reaches the repository prints an observation with `ok: true`, whatever it
//! says: `invocation` is the answer (`confirmed`, `unknown`, `withheld`, `not-dispatched`), and
//! `unknown` never licenses a retry. `ok: false` means the call refused before starting
//! anything (bad input, a missing or conflicting intent, a claim Git did not acknowledge).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::assure::{CandidateInSlice, Loaded, land_error};
use super::common::{
    CliError, Context, Output, json_value, new_record_file, read_input, repository_error,
    write_new_record,
};
use sf_host::assurance::{Outcome, Verdict};
use sf_host::judging::Verified;
use sf_host::repository::{
    Action, IntegrationObservation, Owner, PreparedIntegration, RepositoryError,
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
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
    /// The attempt whose Verdict admits the effect; default: the newest attempt of this
    /// Candidate under this Slice. Only a Verified Verdict is accepted; its digest is the proof
    #[arg(long, value_name = "EPOCH")]
    pub(super) attempt: Option<u64>,
    #[command(flatten)]
    pub(super) occurrence: OccurrenceArgs,
    /// Also write the prepared record to this new file (never overwritten)
    #[arg(long, value_name = "FILE")]
    pub(super) prepared_out: Option<PathBuf>,
}

/// Which occurrence of which action an effect's intent is for, and who owns it: what both
/// `sf integrate prepare` and `sf deliver prepare` take.
#[derive(Debug, Args)]
pub struct OccurrenceArgs {
    /// The action id
    #[arg(long, value_name = "ID")]
    pub(super) action: String,
    /// The action's occurrence (a positive integer; a new effect needs a new occurrence)
    #[arg(long, value_name = "N")]
    pub(super) occurrence: u64,
    /// The owner id
    #[arg(long, value_name = "ID")]
    pub(super) owner: String,
    /// The owner's generation (a positive integer)
    #[arg(long, value_name = "N")]
    pub(super) generation: u64,
}

impl OccurrenceArgs {
    /// The action and the owner.
    pub(super) fn parts(&self) -> (Action, Owner) {
        (
            Action {
                id: self.action.clone(),
                occurrence: self.occurrence,
            },
            Owner {
                id: self.owner.clone(),
                generation: self.generation,
            },
        )
    }
}

#[derive(Debug, Args)]
pub struct InvokeArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The prepared record (from `prepare --prepared-out`)
    #[arg(long, value_name = "FILE")]
    pub(super) prepared: PathBuf,
    /// The frozen Slice whose evidence the intent's Verdict is judged from, again,
    /// immediately before the effect starts
    #[arg(long, value_name = "SLICE")]
    pub(super) slice: PathBuf,
    /// A gate file read immediately before the effect starts, in place of the configured
    /// [gate]: exactly {"proceed": true} lets it start
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

/// The Verdict of `attempt` (default: the newest) of the loaded Candidate and the proof the
/// judge makes of it, when it is Verified; `not-verified` otherwise, saying nothing is
/// `effect` (integrated, delivered) and nothing was prepared.
pub(super) fn verified(
    context: &Context,
    loaded: &Loaded,
    attempt: Option<u64>,
    effect: &str,
) -> Result<(Verdict, Verified), CliError> {
    let judging = loaded.judging(context)?;
    let verdict = judging
        .verdict(attempt)
        .map_err(|error| land_error("judging the Candidate", error))?;
    let digest = verdict
        .digest()
        .map_err(|error| CliError::new("invalid-input", error.to_string()))?;
    if verdict.outcome != Outcome::Verified {
        return Err(CliError::new(
            "not-verified",
            format!(
                "Candidate {} is judged {} under Slice {} revision {} (attempt {}, Verdict \
                 {digest}); only a Verified Candidate is {effect}: nothing was prepared",
                loaded.sealed.digest,
                verdict.outcome.as_str(),
                loaded.slice.frozen.record.id,
                loaded.slice.frozen.record.revision,
                verdict.attempt
            ),
        ));
    }
    let proof = judging
        .verified(&verdict.attempt)
        .map_err(|error| land_error("judging the Candidate", error))?;
    Ok((verdict, proof))
}

fn prepare(context: &Context, args: PrepareArgs) -> Result<Output, CliError> {
    let prepared_out = new_record_file(args.prepared_out.as_deref(), "--prepared-out")?;
    let loaded = Loaded::read(context, &args.target)?;
    let (verdict, proof) = verified(context, &loaded, args.attempt, "integrated")?;
    let repository = &loaded.repository;
    let (action, owner) = args.occurrence.parts();
    let payload = repository.integration_payload(&proof, action, owner);
    let prepared = repository
        .prepare_integration(&payload)
        .map_err(|error| repository_error("preparing the integration", &error))?;
    let value = prepared.to_value();
    if let Some(file) = &prepared_out {
        write_new_record(file, &value, "--prepared-out")?;
    }
    let text = format!(
        "prepared intent {}\n  intent commit {}\n  action        {} #{}\n  move          {} {} -> {}\n  proof         {} (Verified, attempt {})\n",
        prepared.digest,
        prepared.intent,
        prepared.payload.action.id,
        prepared.payload.action.occurrence,
        prepared.payload.target_ref,
        prepared.payload.base,
        prepared.payload.commit,
        prepared.payload.proof,
        verdict.attempt
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
    let loaded = Loaded::read(
        context,
        &CandidateInSlice {
            identity: args.identity.clone(),
            candidate: prepared.payload.candidate.to_string(),
            slice: args.slice.clone(),
        },
    )?;
    let gate = context.gate(args.gate.as_deref())?;
    let payload = &prepared.payload;
    let proof = loaded
        .judging(context)?
        .verified_by(&payload.candidate, &payload.proof)
        .map_err(|error| land_error("the intent's proof", error))?;
    let observed = loaded
        .repository
        .invoke_once(&prepared, &proof, Some(gate))
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
