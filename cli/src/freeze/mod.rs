//! `sf slice freeze` (and `sf slice suggest`, [`suggest`]): the use case [`sf_app::freeze`] checks everything a Slice directory
//! holds, then stores its inputs, harness and overlay and writes the frozen records, the Slice
//! record last; this prints what was frozen.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::freeze::{DryRun, FreezeRequest, Frozen, freeze};
use sf_host::assurance::SliceRecord;
use sf_host::repository::Because;

use super::common::{CliError, Context, Output};

mod suggest;

/// `sf slice …`.
#[derive(Debug, Subcommand)]
pub enum SliceCommand {
    /// Freeze a Slice: check everything it holds, run its checks once on the base (the dry
    /// run), then store its inputs, harness and overlay and write its frozen records
    /// (SLICE/frozen/), the Slice record last
    Freeze(FreezeArgs),
    /// Write a Slice directory from a fix: its tests as the overlay, FAIL_TO_PASS and
    /// PASS_TO_PASS read from runs on the base and with the fix in the sandbox, flaky tests
    /// named and left out
    Suggest(Box<suggest::SuggestArgs>),
}

#[derive(Debug, Args)]
pub struct FreezeArgs {
    /// The Slice directory (slice.json, acceptance.json, recipe.json, inputs/<name>/,
    /// harness/, overlay/)
    #[arg(long, value_name = "SLICE")]
    dir: PathBuf,
    /// The repository identity file; the Candidate's base is its target now
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// Freeze on this factory commit instead of the target (the first base or one `sf repo
    /// import` added)
    #[arg(long, value_name = "COMMIT")]
    base: Option<String>,
    /// Skip the dry run (the Slice's checks run once on the base, refusing a test id the
    /// base run does not report or a base-stage expectation the base does not meet): for a
    /// base that cannot run on this host
    #[arg(long)]
    no_dry_run: bool,
}

/// `sf slice freeze`.
pub fn run(context: &Context, command: SliceCommand) -> Result<Output, CliError> {
    let args = match command {
        SliceCommand::Freeze(args) => args,
        SliceCommand::Suggest(args) => return suggest::run(context, *args),
    };
    let request = FreezeRequest {
        dir: args.dir,
        identity: args.identity,
        base: args.base,
        dry_run: !args.no_dry_run,
    };
    freeze(&context.backends, &request).map(|frozen| describe(&frozen))
}

fn describe(frozen: &Frozen) -> Output {
    let record = &frozen.slice.record;
    let json = serde_json::json!({
        "slice": frozen.digest.to_string(),
        "id": record.id,
        "revision": record.revision,
        "acceptance": record.acceptance.to_string(),
        "recipe": record.recipe.to_string(),
        "environment": record.environment.to_string(),
        "harness": record.harness.to_string(),
        "overlay": record.overlay.to_string(),
        "base": record.base.to_hex(),
        "protected": record.protected,
        "closed": record.closed,
        "open": record.open,
        "inputs": frozen.inputs.iter().map(|(name, digest)| (name.clone(), serde_json::Value::String(digest.to_string()))).collect::<serde_json::Map<_, _>>(),
        "dryRun": frozen.dry_run.as_ref().map(dry_run_json),
    });
    let text = format!(
        "frozen Slice {} revision {}\n  slice       {}\n  acceptance  {}\n  recipe      {}\n  environment {}\n  harness     {} ({} files)\n  overlay     {} ({} files)\n  base        {}\n{}{}  seal with   --slice {}\n",
        record.id,
        record.revision,
        frozen.digest,
        record.acceptance,
        record.recipe,
        record.environment,
        record.harness,
        frozen.slice.harness.len(),
        record.overlay,
        frozen.slice.overlay.len(),
        record.base,
        closure_text(record),
        frozen
            .dry_run
            .as_ref()
            .map(dry_run_text)
            .unwrap_or_default(),
        frozen.dir.display()
    );
    Output { json, text }
}

/// What the Slice closes, by reason, and what it opens again, for the text output.
fn closure_text(record: &SliceRecord) -> String {
    let mut text = String::new();
    for because in [Because::StandsIn, Because::LoadedBefore, Because::Beside] {
        let patterns: Vec<&str> = record
            .closed
            .iter()
            .filter(|entry| entry.because == because)
            .map(|entry| entry.pattern.as_str())
            .collect();
        if !patterns.is_empty() {
            text.push_str(&format!(
                "  closed      {}: {}\n",
                because.as_str(),
                patterns.join(", ")
            ));
        }
    }
    if !record.open.is_empty() {
        text.push_str(&format!("  open        {}\n", record.open.join(", ")));
    }
    text
}

/// The dry run, as JSON: each check's run on the base, and the ids left unconfirmed.
fn dry_run_json(dry_run: &DryRun) -> serde_json::Value {
    let checks: Vec<serde_json::Value> = dry_run
        .checks
        .iter()
        .map(|check| {
            serde_json::json!({
                "check": check.check,
                "stage": check.stage.as_str(),
                "exitCode": check.exit_code,
                "tests": check.tests,
                "sharedWith": check.shared_with,
            })
        })
        .collect();
    serde_json::json!({ "checks": checks, "unconfirmed": dry_run.unconfirmed })
}

/// The dry run, a line per check, for the text output.
fn dry_run_text(dry_run: &DryRun) -> String {
    let mut text = String::new();
    for check in &dry_run.checks {
        let exit = check
            .exit_code
            .map_or_else(|| "no exit".to_owned(), |code| format!("exit {code}"));
        let tests = check
            .tests
            .map(|tests| format!(", {tests} tests reported"))
            .unwrap_or_default();
        let how = match &check.shared_with {
            Some(other) => format!("the run of {other}"),
            None => format!("{} ms", check.wall_ms),
        };
        text.push_str(&format!(
            "  dry run     {} ({}): {exit}{tests} on the base ({how})\n",
            check.check,
            check.stage.as_str()
        ));
    }
    for id in &dry_run.unconfirmed {
        text.push_str(&format!(
            "  unconfirmed {id}: the base run errored before reporting it\n"
        ));
    }
    text
}
