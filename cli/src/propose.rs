//! `sf propose`: a proposal made from what an agent produces (a Git commit, a directory or a
//! diff)
//! for a frozen Slice: the changed paths with their new entries and the priors from the
//! Slice's base, checked against its scope and bounds. Without `--out` the proposal JSON is
//! what is printed; nothing is written on error.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use sf_app::files::write_new_file;
use sf_app::propose::{ProposalSource, ProposeRequest, Proposed, propose};

use super::common::{CliError, Context, Output};

/// Where a proposal's changes come from: exactly one of the sources.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct SourceArgs {
    /// A commit of the Git repository --repo names: its changes against its first parent,
    /// with its message and author
    #[arg(long, value_name = "REV", requires = "repo")]
    commit: Option<String>,
    /// A directory compared with the Slice's base (a checkout: its root's .git is not part
    /// of it; a path it does not hold is removed)
    #[arg(long, value_name = "DIR")]
    tree: Option<PathBuf>,
    /// A Git diff of the Slice's base (`git diff --binary`, `git format-patch`; - for
    /// standard input), applied as `git apply` would
    #[arg(long, value_name = "FILE")]
    diff: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProposeArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The frozen Slice directory the proposal is for
    #[arg(long, value_name = "SLICE")]
    slice: PathBuf,
    #[command(flatten)]
    source: SourceArgs,
    /// The Git repository of --commit (a work tree or a bare repository)
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// Keep only the changes at or under PATH (repeatable)
    #[arg(long, value_name = "PATH")]
    only: Vec<String>,
    /// Write the proposal to this new file instead of printing it
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn run(context: &Context, args: ProposeArgs) -> Result<Output, CliError> {
    let request = ProposeRequest {
        identity: args.identity,
        slice: args.slice,
        source: ProposalSource::of_flags(
            args.source.commit,
            args.source.tree,
            args.source.diff,
            args.repo,
        ),
        only: args.only,
    };
    let proposed = propose(&context.backends, &request)?;
    let bytes = proposed
        .proposal
        .to_bytes()
        .map_err(|error| sf_app::error::repository_error("the proposal made", &error))?;
    let paths: Vec<&str> = proposed
        .proposal
        .edits
        .iter()
        .map(|edit| edit.path.as_str())
        .collect();
    let proposal: serde_json::Value =
        serde_json::from_slice(&bytes).expect("canonical JSON parses");
    let summary = json!({
        "edits": paths,
        "leftOut": proposed.left_out,
        "notes": proposed.notes,
    });
    match args.out {
        None => {
            if !context.json {
                for line in summary_lines(&proposed) {
                    eprintln!("{line}");
                }
            }
            let mut text = String::from_utf8(bytes).expect("canonical JSON is UTF-8");
            text.push('\n');
            Ok(Output {
                json: json!({"proposal": proposal, "summary": summary}),
                text,
            })
        }
        Some(file) => {
            write_new_file(&file, &bytes).map_err(|error| {
                sf_app::error::AppError::coded(
                    "not-written",
                    format!("--out {}", file.display()),
                    format!("{error} (a new file: nothing was written)"),
                )
            })?;
            let mut text = format!(
                "wrote {} ({} edits: {})\n",
                file.display(),
                paths.len(),
                paths.join(", ")
            );
            for line in summary_lines(&proposed) {
                text.push_str(&line);
                text.push('\n');
            }
            Ok(Output {
                json: json!({"file": file, "summary": summary}),
                text,
            })
        }
    }
}

/// What the proposal left out of its source, a line each.
fn summary_lines(proposed: &Proposed) -> Vec<String> {
    let mut lines = Vec::new();
    if !proposed.left_out.is_empty() {
        lines.push(format!(
            "left out by --only: {}",
            proposed.left_out.join(", ")
        ));
    }
    lines.extend(proposed.notes.iter().cloned());
    lines
}
