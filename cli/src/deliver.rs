//! `sf deliver {prepare,invoke,inspect}`: the guarded, at-most-once delivery of a Verified
//! Candidate's commit M to the team's own Git remote (docs/delivery.md). Prepare judges the
//! Candidate's evidence under its Slice and refuses anything but Verified; the Verdict's
//! digest is in the intent; invoke judges the stored evidence again immediately before the
//! push and requires the same Verified Verdict, then asks the gate.
//!
//! Every call that reaches the repository prints an observation with `ok: true`, whatever it
//! says; `invocation` is the answer (`confirmed`, `refused`, `unknown`, `withheld`,
//! `not-dispatched`) and invoke's exit status says it too. `ok: false` means the call refused
//! before anything was claimed or pushed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::assure::{CandidateInSlice, Loaded, land_error};
use super::common::{
    CliError, Context, Output, json_value, new_record_file, read_input, repository_error,
    write_new_record,
};
use super::integrate::{InspectArgs, InvokeArgs, OccurrenceArgs, verified};
use crate::{EXIT_NOT_DISPATCHED, EXIT_REFUSED, EXIT_UNKNOWN, EXIT_WITHHELD, Outcome};
use sf_host::git_remote::{DEFAULT_PUSH_TIMEOUT, DEFAULT_READ_TIMEOUT, GitRemote};
use sf_host::repository::{
    DeliveryInvocation, DeliveryMode, DeliveryObservation, DeliveryRequest, PreparedDelivery,
    RemoteReading, RepositoryError,
};

#[derive(Debug, Subcommand)]
pub enum DeliverCommand {
    /// Retain one immutable delivery intent for (action, occurrence); pushes nothing
    Prepare(PrepareArgs),
    /// Push M to the team's remote at most once for a prepared intent
    Invoke(InvokeArgs),
    /// Report an intent's history and what the remote shows, read-only (never pushes)
    Inspect(InspectArgs),
}

#[derive(Debug, Args)]
pub struct PrepareArgs {
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
    /// The attempt whose Verdict admits the delivery; default: the newest attempt of this
    /// Candidate under this Slice. Only a Verified Verdict is accepted
    #[arg(long, value_name = "EPOCH")]
    pub(super) attempt: Option<u64>,
    #[command(flatten)]
    pub(super) occurrence: OccurrenceArgs,
    /// Push to a new branch refs/heads/sf/<candidate> (created, never moved) for the hosting
    /// platform to review and merge, instead of moving the upstream branch itself
    #[arg(long)]
    pub(super) side_branch: bool,
    /// Also write the prepared record to this new file (never overwritten)
    #[arg(long, value_name = "FILE")]
    pub(super) prepared_out: Option<PathBuf>,
}

pub fn run(context: &Context, command: DeliverCommand) -> Outcome {
    match command {
        DeliverCommand::Prepare(args) => prepare(context, args).into(),
        DeliverCommand::Invoke(args) => match invoke(context, args) {
            Ok(observed) => Outcome {
                exit: invocation_status(observed.invocation),
                result: Ok(describe(&observed)),
            },
            Err(error) => Err(error).into(),
        },
        DeliverCommand::Inspect(args) => inspect(context, args).into(),
    }
}

/// The exit status of an invoke: 0 only for confirmed.
pub(super) fn invocation_status(invocation: DeliveryInvocation) -> u8 {
    match invocation {
        DeliveryInvocation::Confirmed => 0,
        DeliveryInvocation::Withheld => EXIT_WITHHELD,
        DeliveryInvocation::Unknown => EXIT_UNKNOWN,
        DeliveryInvocation::NotDispatched => EXIT_NOT_DISPATCHED,
        DeliveryInvocation::Refused => EXIT_REFUSED,
    }
}

/// The remote as the configuration says to reach it.
pub(super) fn remote(context: &Context) -> Result<GitRemote, CliError> {
    let config = context.config()?;
    let settings = config.delivery();
    let push = settings
        .push_timeout_seconds
        .map_or(DEFAULT_PUSH_TIMEOUT, Duration::from_secs);
    let read = settings
        .read_timeout_seconds
        .map_or(DEFAULT_READ_TIMEOUT, Duration::from_secs);
    Ok(GitRemote::new(None)
        .map_err(|reason| CliError::new("git-unavailable", reason))?
        .with_timeouts(read, push)
        .with_credential_helper(settings.credential_helper.clone())
        .with_ssh_command(settings.ssh_command.clone()))
}

fn prepare(context: &Context, args: PrepareArgs) -> Result<Output, CliError> {
    let prepared_out = new_record_file(args.prepared_out.as_deref(), "--prepared-out")?;
    let loaded = Loaded::read(context, &args.target)?;
    let (verdict, proof) = verified(context, &loaded, args.attempt, "delivered")?;
    let (action, owner) = args.occurrence.parts();
    let prepared = prepare_for(
        &loaded,
        DeliveryRequest {
            action,
            owner,
            candidate: loaded.sealed.digest.clone(),
            verdict: proof.digest().clone(),
            mode: if args.side_branch {
                DeliveryMode::SideBranch
            } else {
                DeliveryMode::Branch
            },
        },
    )?;
    let value = prepared.to_value();
    if let Some(file) = &prepared_out {
        write_new_record(file, &value, "--prepared-out")?;
    }
    let payload = &prepared.payload;
    let text = format!(
        "prepared delivery {}\n  intent commit {}\n  action        {} #{}\n  push          {} {} {} -> {} ({})\n  marker        {}\n  verdict       {} (Verified, attempt {})\n",
        prepared.digest,
        prepared.intent,
        payload.action.id,
        payload.action.occurrence,
        payload.remote,
        payload.remote_ref,
        payload.expected.map_or("(absent)".into(), |id| id.to_hex()),
        payload.commit,
        payload.mode.as_str(),
        payload.marker,
        payload.verdict,
        verdict.attempt
    );
    Ok(Output {
        json: json_value(&value),
        text,
    })
}

/// Prepares the delivery `request` of the loaded Candidate.
pub(super) fn prepare_for(
    loaded: &Loaded,
    request: DeliveryRequest,
) -> Result<PreparedDelivery, CliError> {
    loaded
        .repository
        .prepare_delivery(&request)
        .map_err(|error| repository_error("preparing the delivery", &error))
}

fn read_prepared(path: &Path) -> Result<PreparedDelivery, CliError> {
    PreparedDelivery::from_json(&read_input(path, "--prepared")?)
        .map_err(|error| repository_error(&format!("--prepared {}", path.display()), &error))
}

fn invoke(context: &Context, args: InvokeArgs) -> Result<DeliveryObservation, CliError> {
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
    invoke_for(context, &loaded, &prepared, gate)
}

/// Invokes `prepared` behind the Verified guard over `gate`.
pub(super) fn invoke_for(
    context: &Context,
    loaded: &Loaded,
    prepared: &PreparedDelivery,
    gate: Arc<dyn sf_host::contracts::Gate>,
) -> Result<DeliveryObservation, CliError> {
    let remote = remote(context)?;
    let payload = &prepared.payload;
    let proof = loaded
        .judging(context)?
        .verified_by(&payload.candidate, &payload.verdict)
        .map_err(|error| land_error("the delivery's Verdict", error))?;
    loaded
        .repository
        .invoke_delivery(prepared, &proof, &remote, Some(gate))
        .map_err(|error| delivery_error("invoking the delivery", &error))
}

fn inspect(context: &Context, args: InspectArgs) -> Result<Output, CliError> {
    let prepared = read_prepared(&args.prepared)?;
    let repository = context.open_repository(&args.identity)?;
    let observed = repository
        .inspect_delivery(&prepared, &remote(context)?)
        .map_err(|error| delivery_error("inspecting the delivery", &error))?;
    Ok(describe(&observed))
}

fn delivery_error(what: &str, error: &RepositoryError) -> CliError {
    let mut cli = repository_error(what, error);
    if matches!(error, RepositoryError::GitFailed { .. }) {
        cli.message
            .push_str("; nothing was pushed: inspect before deciding anything else");
    }
    cli
}

/// An observation as text and JSON.
pub(super) fn describe(observed: &DeliveryObservation) -> Output {
    let hex = |id: Option<sf_host::git_object::ObjectId>| id.map_or("-".into(), |id| id.to_hex());
    let (target, marker) = match &observed.reading {
        RemoteReading::Read { target, marker } => (hex(*target), hex(*marker)),
        RemoteReading::Unreadable(_) => ("(unreadable)".into(), "(unreadable)".into()),
    };
    let text = format!(
        "invocation    {}\ndispatched    {}\npostcondition {}\nremote        {}\nref           {} (names {target})\nmarker        {marker} (tag {})\ncommit        {}\ndispatch      {}\nreceipt       {}\nproblem       {}\n",
        observed.invocation.as_str(),
        observed.dispatched,
        observed.postcondition(),
        observed.remote,
        observed.remote_ref,
        observed.tag,
        observed.commit,
        hex(observed.dispatch),
        hex(observed.receipt),
        observed.problem.as_deref().unwrap_or("-"),
    );
    Output {
        json: json_value(&observed.to_value()),
        text,
    }
}
