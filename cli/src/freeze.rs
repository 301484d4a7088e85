//! `sf slice freeze`: the use case [`sf_app::freeze`] checks everything a Slice directory
//! holds, then stores its inputs, harness and overlay and writes the frozen records, the Slice
//! record last; this prints what was frozen.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::freeze::{FreezeRequest, Frozen, freeze};
use sf_host::assurance::SliceRecord;
use sf_host::repository::Because;

use super::common::{CliError, Context, Output};

/// `sf slice …`.
#[derive(Debug, Subcommand)]
pub enum SliceCommand {
    /// Freeze a Slice: check everything it holds, then store its inputs, harness and overlay
    /// and write its frozen records (SLICE/frozen/), the Slice record last
    Freeze(FreezeArgs),
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
}

/// `sf slice freeze`.
pub fn run(context: &Context, command: SliceCommand) -> Result<Output, CliError> {
    let SliceCommand::Freeze(args) = command;
    let request = FreezeRequest {
        dir: args.dir,
        identity: args.identity,
        base: args.base,
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
    });
    let text = format!(
        "frozen Slice {} revision {}\n  slice       {}\n  acceptance  {}\n  recipe      {}\n  environment {}\n  harness     {} ({} files)\n  overlay     {} ({} files)\n  base        {}\n{}  seal with   --slice {}\n",
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
