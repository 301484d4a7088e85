//! `sf collect`: runs each frozen process check of a Candidate once in the sandbox, one record
//! per run (docs/assurance.md, "Command line"); the use case checks the Slice, the
//! Candidate sealed for exactly it and the preflight before anything is written.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::Args;

use sf_app::collect::{CollectRequest, collect};
use sf_host::collector::CollectResult;
use sf_host::text_escape;

use super::args::CandidateInSlice;
use super::common::{CliError, Context, Output, json_value};
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
}

/// `sf collect`.
pub fn run(context: &Context, args: CollectArgs) -> Result<Output, CliError> {
    let request = CollectRequest {
        target: args.target.target(),
        gate: args.gate,
        deadline: args.deadline,
        jobs: args.jobs,
    };
    let mut progress = Progress::default();
    let result = collect(&context.backends, &request, &mut |event| {
        if let sf_app::Progress::Collecting { attempt, .. } = event {
            eprintln!("sf collect: attempt {attempt}");
        }
        progress.report(event)
    })?;
    drop(progress);
    Ok(describe(&result))
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
