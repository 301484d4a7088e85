//! `sf collect`: runs each frozen process check of a Candidate once in the sandbox, one record
//! per run (docs/assurance.md, "Command line"); the use case checks the Slice, the
//! Candidate sealed for exactly it and the preflight before anything is written.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use sf_app::collect::{CollectRequest, collect};
use sf_host::collector::CollectResult;
use sf_host::text_escape;

use super::args::CandidateInSlice;
use super::common::{CliError, Context, Output, json_value};
use super::exit::collection_status;
use super::progress::Progress;
use super::render::{run_json_of, run_word};

#[derive(Debug, Args)]
pub struct CollectArgs {
    #[command(flatten)]
    target: CandidateInSlice,
    /// A gate file ({"proceed": true} or {"proceed": false, "reason": …}), read before
    /// anything starts and before every run, in place of the configured [gate] (default: open)
    #[arg(long, value_name = "FILE")]
    gate: Option<PathBuf>,
    /// When the collection must be over (RFC 3339 UTC, e.g. 2026-01-01T12:00:00Z); default: in
    /// one hour
    #[arg(long, value_name = "ISO")]
    deadline: Option<String>,
    /// How many checks run at a time (each still one sandboxed run and one record)
    #[arg(long, value_name = "N", default_value = "1")]
    jobs: NonZeroUsize,
    /// Wait for another attempt of the repository to end instead of refusing (`busy`): at
    /// most DURATION (`90s`, `5m`, `1h`, or seconds), or, bare, until the deadline
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "deadline")]
    wait: Option<String>,
}

/// `--wait`'s value: `deadline` (bare) is as long as the deadline allows.
fn wait_of(text: Option<&str>) -> Result<Option<Duration>, CliError> {
    let Some(text) = text else { return Ok(None) };
    if text == "deadline" {
        return Ok(Some(Duration::MAX));
    }
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |at| text.split_at(at));
    let scale = match unit {
        "" | "s" => Some(1),
        "m" => Some(60),
        "h" => Some(3600),
        _ => None,
    };
    match (number.parse::<u64>(), scale) {
        (Ok(number), Some(scale)) => Ok(Some(Duration::from_secs(number.saturating_mul(scale)))),
        _ => Err(sf_app::error::AppError::invalid(
            format!("--wait {text:?}"),
            "is a duration: a number of seconds, or one with s, m or h (90s, 5m, 1h)",
        )),
    }
}

/// `sf collect`: the result, and the exit status ([`collection_status`]).
pub fn run(context: &Context, args: CollectArgs) -> Result<(Output, u8), CliError> {
    let request = CollectRequest {
        target: args.target.target(),
        gate: args.gate,
        deadline: args.deadline,
        jobs: args.jobs,
        wait: wait_of(args.wait.as_deref())?,
    };
    let mut progress = Progress::default();
    let mut waited = Duration::ZERO;
    let result = collect(&context.backends, &request, &mut |event| {
        if let sf_app::Progress::Collecting {
            attempt,
            waited: for_the_fence,
            ..
        } = event
        {
            waited = for_the_fence;
            if !waited.is_zero() {
                eprintln!(
                    "sf collect: waited {} ms for another attempt to end",
                    waited.as_millis()
                );
            }
            eprintln!("sf collect: attempt {attempt}");
        }
        progress.report(event)
    })?;
    drop(progress);
    let mut output = describe(&result);
    output.json["waitedMs"] =
        serde_json::json!(u64::try_from(waited.as_millis()).unwrap_or(u64::MAX));
    Ok((output, collection_status(&result)))
}

fn describe(result: &CollectResult) -> Output {
    let json = serde_json::json!({
        "attempt": json_value(&result.attempt.to_value()),
        "pins": result.pins.to_string(),
        "mayJudge": result.may_judge(),
        "runs": result.runs.iter().map(run_json_of).collect::<Vec<_>>(),
        "evidence": result.evidence.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    let mut text = format!(
        "collected attempt {} ({} records)\n",
        result.attempt,
        result.evidence.len()
    );
    for run in &result.runs {
        text.push_str(&format!("  {:<24} {}\n", run.check, run_word(run)));
        for hit in &run.limits_hit {
            text.push_str(&format!(
                "  {:<24}   {}\n",
                "",
                text_escape::line(&hit.to_string())
            ));
        }
    }
    if !result.may_judge() {
        text.push_str("no Verdict may be issued for this attempt\n");
    }
    Output { json, text }
}
