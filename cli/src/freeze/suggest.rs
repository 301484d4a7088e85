//! `sf slice suggest`: the use case [`sf_app::suggest`] writes a Slice directory from a fix
//! (its tests as the overlay, the lists read from sandboxed runs on the base and with the
//! fix); this prints what it found and what it left out.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use sf_app::suggest::{Runner, SuggestRequest, Suggested, suggest};

use super::super::common::{CliError, Context, Output};

#[derive(Debug, Args)]
pub struct SuggestArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The Slice directory to write (new, or empty)
    #[arg(long, value_name = "SLICE")]
    dir: PathBuf,
    /// The Slice's id
    #[arg(long, value_name = "ID")]
    id: String,
    /// The dependency environment the runner runs in (`sf env add`)
    #[arg(long, value_name = "NAME")]
    environment: Option<String>,
    /// The test runner: pytest, unittest or node
    #[arg(long, value_name = "RUNNER")]
    runner: String,
    /// The fix: a commit of --repo (its changes against its first parent); without it, the
    /// test files of the directory --repo that differ from the base
    #[arg(long, value_name = "REV")]
    fix: Option<String>,
    /// The Git repository of --fix, or the directory of the tests
    #[arg(long, value_name = "DIR")]
    repo: PathBuf,
    /// Which changed paths are tests (a path glob, repeatable; default: the runner's usual
    /// layouts)
    #[arg(long, value_name = "GLOB")]
    tests: Vec<String>,
    /// An environment variable of the checks' runs (repeatable)
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = key_value)]
    env: Vec<(String, String)>,
    /// How many times the tests run on each tree
    #[arg(long, value_name = "K", default_value = "3")]
    runs: NonZeroUsize,
    /// The Slice's scope (repeatable; default: the fix's other changed files)
    #[arg(long, value_name = "PATH")]
    scope: Vec<String>,
    /// Suggest on this factory commit instead of the target
    #[arg(long, value_name = "COMMIT")]
    base: Option<String>,
    /// Arguments for the runner, before the test files
    #[arg(last = true, value_name = "EXTRA_ARGS")]
    extra_args: Vec<String>,
}

fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

/// `sf slice suggest`.
pub fn run(context: &Context, args: SuggestArgs) -> Result<Output, CliError> {
    let request = SuggestRequest {
        identity: args.identity,
        dir: args.dir,
        id: args.id,
        environment: args.environment,
        runner: Runner::parse(&args.runner)?,
        fix: args.fix,
        repo: args.repo,
        tests: args.tests,
        env: args.env,
        runs: args.runs,
        scope: args.scope,
        extra_args: args.extra_args,
        base: args.base,
    };
    let suggested = suggest(&context.backends, &request)?;
    Ok(describe(&suggested, &request.identity))
}

fn describe(suggested: &Suggested, identity: &std::path::Path) -> Output {
    let lists = &suggested.lists;
    let left_out: Vec<serde_json::Value> = lists
        .left_out
        .iter()
        .map(|(id, why)| json!({"id": id, "why": why}))
        .collect();
    let json = json!({
        "dir": suggested.dir.display().to_string(),
        "overlay": suggested.overlay,
        "files": suggested.files,
        "scope": suggested.scope,
        "runs": suggested.runs,
        "failToPass": lists.fail_to_pass,
        "passToPass": lists.pass_to_pass,
        "flaky": lists.flaky,
        "leftOut": left_out,
        "deselected": lists.deselected,
    });
    let trees = match suggested.fixed {
        true => "on the base and with the fix",
        false => "on the base",
    };
    let mut text = format!(
        "suggested Slice in {}\n  overlay     {}\n  scope       {}\n  ran         {} {} times {trees}\n  failToPass  {} tests\n",
        suggested.dir.display(),
        suggested.overlay.join(", "),
        suggested.scope.join(", "),
        suggested.files.join(", "),
        suggested.runs,
        lists.fail_to_pass.len(),
    );
    for id in &lists.fail_to_pass {
        text.push_str(&format!("    {id}\n"));
    }
    text.push_str(&format!(
        "  passToPass  {} tests\n",
        lists.pass_to_pass.len()
    ));
    for id in &lists.flaky {
        text.push_str(&format!(
            "  flaky       {id}: its runs disagree; left out (and deselected)\n"
        ));
    }
    for (id, why) in &lists.left_out {
        text.push_str(&format!("  left out    {id}: {why}\n"));
    }
    text.push_str(&format!(
        "  next        sf slice freeze --dir {} --identity {}\n",
        suggested.dir.display(),
        identity.display()
    ));
    Output { json, text }
}
