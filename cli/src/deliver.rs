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

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::deliver;

use super::args::{
    CandidateInSlice, InspectArgs, InvokeArgs, OccurrenceArgs, delivery_mode, prepare_request,
};
use super::common::{CliError, Context, Output, json_value};
use super::exit::{Outcome, delivery_status};
use super::render;

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
    target: CandidateInSlice,
    /// The attempt whose Verdict admits the delivery; default: the newest attempt of this
    /// Candidate under this Slice. Only a Verified Verdict is accepted
    #[arg(long, value_name = "EPOCH")]
    attempt: Option<u64>,
    #[command(flatten)]
    occurrence: OccurrenceArgs,
    /// Push to a new branch refs/heads/sf/<candidate> (created, never moved) for the hosting
    /// platform to review and merge, instead of moving the upstream branch itself
    #[arg(long)]
    side_branch: bool,
    /// Also write the prepared record to this new file (never overwritten)
    #[arg(long, value_name = "FILE")]
    prepared_out: Option<PathBuf>,
}

pub fn run(context: &Context, command: DeliverCommand) -> Outcome {
    let backends = &context.backends;
    match command {
        DeliverCommand::Prepare(args) => prepare(context, args).into(),
        DeliverCommand::Invoke(args) => match deliver::invoke(backends, &args.request()) {
            Ok(observed) => Outcome {
                exit: delivery_status(observed.invocation),
                result: Ok(render::delivery(&observed)),
            },
            Err(error) => Err(error).into(),
        },
        DeliverCommand::Inspect(args) => deliver::inspect(backends, &args.request())
            .map(|observed| render::delivery(&observed))
            .into(),
    }
}

fn prepare(context: &Context, args: PrepareArgs) -> Result<Output, CliError> {
    let request = prepare_request(
        &args.target,
        args.attempt,
        &args.occurrence,
        args.prepared_out,
    );
    let mode = delivery_mode(args.side_branch);
    let made = deliver::prepare(&context.backends, &request, mode)?;
    let payload = &made.prepared.payload;
    let text = format!(
        "prepared delivery {}\n  intent commit {}\n  action        {} #{}\n  push          {} {} {} -> {} ({})\n  marker        {}\n  verdict       {} (Verified, attempt {})\n",
        made.prepared.digest,
        made.prepared.intent,
        payload.action.id,
        payload.action.occurrence,
        payload.remote,
        payload.remote_ref,
        payload.expected.map_or("(absent)".into(), |id| id.to_hex()),
        payload.commit,
        payload.mode.as_str(),
        payload.marker,
        payload.verdict,
        made.attempt
    );
    Ok(Output {
        json: json_value(&made.prepared.to_value()),
        text,
    })
}
