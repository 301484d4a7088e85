//! `sf judge`: a Candidate's Verdict from its stored evidence, writing nothing; with
//! `--exit-code`, an exit status CI can branch on.

use clap::Args;

use sf_app::judge::{JudgeRequest, judge};

use super::args::CandidateInSlice;
use super::common::{CliError, Context, Output};
use super::exit::verdict_status;
use super::render::{output_tails, verdict_json, verdict_text};

#[derive(Debug, Args)]
pub struct JudgeArgs {
    #[command(flatten)]
    target: CandidateInSlice,
    /// The attempt (fence epoch) to judge; default: the newest attempt of this Candidate under
    /// this Slice
    #[arg(long, value_name = "EPOCH")]
    attempt: Option<u64>,
    /// Exit 0 only when Verified: 3 when Failed, 4 when Inconclusive (for CI scripts)
    #[arg(long)]
    exit_code: bool,
}

/// `sf judge`: the Verdict, and the exit status.
pub fn run(context: &Context, args: JudgeArgs) -> Result<(Output, u8), CliError> {
    let request = JudgeRequest {
        target: args.target.target(),
        attempt: args.attempt,
    };
    let judged = judge(&context.backends, &request)?;
    let exit = match args.exit_code {
        true => verdict_status(judged.verdict.outcome),
        false => 0,
    };
    let (verdict, digest) = (&judged.verdict, &judged.digest);
    let mut json = verdict_json(verdict, digest);
    json["unreadable"] = judged
        .unreadable
        .iter()
        .map(|(id, error)| serde_json::json!({"id": id.to_string(), "error": error}))
        .collect();
    Ok((
        Output {
            json,
            text: verdict_text(verdict, digest)
                + &output_tails(&judged.unmet)
                + &unreadable_text(&judged.unreadable),
        },
        exit,
    ))
}

/// One line per record that cannot be read: what a person must know is in the store, and
/// that it was not read as evidence.
fn unreadable_text(unreadable: &[(sf_host::canonical::Digest, String)]) -> String {
    unreadable
        .iter()
        .map(|(id, error)| {
            format!(
                "unreadable record {id} (never evidence, left as it is): {}\n",
                sf_host::text_escape::line(error)
            )
        })
        .collect()
}
