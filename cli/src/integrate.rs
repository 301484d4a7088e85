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

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::integrate;

use super::args::{CandidateInSlice, InspectArgs, InvokeArgs, OccurrenceArgs, prepare_request};
use super::common::{CliError, Context, Output, json_value};
use super::render;

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
    target: CandidateInSlice,
    /// The attempt whose Verdict admits the effect; default: the newest attempt of this
    /// Candidate under this Slice. Only a Verified Verdict is accepted; its digest is the proof
    #[arg(long, value_name = "EPOCH")]
    attempt: Option<u64>,
    #[command(flatten)]
    occurrence: OccurrenceArgs,
    /// Also write the prepared record to this new file (never overwritten)
    #[arg(long, value_name = "FILE")]
    prepared_out: Option<PathBuf>,
}

pub fn run(context: &Context, command: IntegrateCommand) -> Result<Output, CliError> {
    let backends = &context.backends;
    match command {
        IntegrateCommand::Prepare(args) => prepare(context, args),
        IntegrateCommand::Invoke(args) => integrate::invoke(backends, &args.request())
            .map(|observed| render::integration(&observed)),
        IntegrateCommand::Inspect(args) => integrate::inspect(backends, &args.request())
            .map(|observed| render::integration(&observed)),
    }
}

fn prepare(context: &Context, args: PrepareArgs) -> Result<Output, CliError> {
    let request = prepare_request(
        &args.target,
        args.attempt,
        &args.occurrence,
        args.prepared_out,
    );
    let made = integrate::prepare(&context.backends, &request)?;
    let prepared = &made.prepared;
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
        made.attempt
    );
    Ok(Output {
        json: json_value(&prepared.to_value()),
        text,
    })
}
