//! The `sf` command line: argument parsing (clap), one module per subcommand, and the output
//! conventions every command shares.
//!
//! - Human-readable text on stdout by default; with `--json`, stdout is exactly one envelope,
//!   `{"schemaVersion":1,"ok":true,"result":…}` or
//!   `{"schemaVersion":1,"ok":false,"error":{"code":…,"message":…}}`.
//! - Exit status 0 only on success; 1 when the command failed; 2 for a usage error.
//! - Logs and warnings go to stderr.
//! - Text output (and an error's message) is printed through [`crate::text_escape::lines`]:
//!   control characters other than newline and tab, from wherever they came, are shown
//!   escaped. `--json` is printed as it is (JSON escapes them).
//! - Every command takes `--config FILE` (an `sf.toml`; default: the embedded defaults).
//! - Errors name the input at fault and the fix.
//!
//! Adding a subcommand: a module with an `Args` struct and a `run(&Context, Args) ->
//! Result<Output, CliError>`, a variant in `Command`, and a line in `dispatch`.

mod assure;
mod common;
mod demo;
mod exec;
mod export;
mod integrate;
mod oats;
mod plugins;
mod repo;
mod seal;
mod snapshot;

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::text_escape;

pub use common::{CliError, Context, Output};

/// The `schemaVersion` of the `--json` envelope.
pub const SCHEMA_VERSION: u64 = 1;
/// Exit status of a command that failed.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of a usage error (unknown flag, missing argument).
pub const EXIT_USAGE: u8 = 2;

/// sf: seal machine-made code changes as immutable Candidates in owned Git repositories, run
/// their frozen checks confined, keep one write-once Evidence record per run, judge it, and move
/// the target ref at most once per approved intent, behind a gate. Backends are plugins loaded
/// at run time. Start with `sf demo`.
#[derive(Debug, Parser)]
#[command(name = "sf", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// The flags every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The sf.toml naming each backend (default: the embedded defaults: git-cli, sandbox-exec)
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print exactly one JSON envelope on stdout instead of text
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Owned repositories
    #[command(subcommand)]
    Repo(repo::RepoCommand),
    /// Seal a proposal as a Candidate
    Seal(seal::SealArgs),
    /// Export a Candidate's files into a new directory
    Export(export::ExportArgs),
    /// List the files of a factory commit (default: the target), with their sha256
    Snapshot(snapshot::SnapshotArgs),
    /// Run one program through the configured Executor and print its answer
    Exec(exec::ExecArgs),
    /// Integrate a sealed Candidate into the target ref, at most once per prepared intent
    #[command(subcommand)]
    Integrate(integrate::IntegrateCommand),
    /// Plugins on the plugin path
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
    /// oats capability packages as plugins (runs the sf-oats program; `sf oats --help`)
    #[command(disable_help_flag = true)]
    Oats(oats::OatsArgs),
    /// Slices: freeze the acceptance, recipe, environment and inputs a Candidate is sealed for
    #[command(subcommand)]
    Slice(assure::SliceCommand),
    /// Run each frozen process check of a Candidate once in the sandbox; one record per run
    Collect(assure::CollectArgs),
    /// Judge a Candidate's evidence: verified, failed or inconclusive
    Judge(assure::JudgeArgs),
    /// Read Evidence records
    #[command(subcommand)]
    Evidence(assure::EvidenceCommand),
    /// Run the whole pipeline on a bundled sample project: seal, collect, judge, integrate
    Demo(demo::DemoArgs),
}

fn dispatch(context: &Context, command: Command) -> Result<Output, CliError> {
    match command {
        Command::Repo(command) => repo::run(context, command),
        Command::Seal(args) => seal::run(context, args),
        Command::Export(args) => export::run(context, args),
        Command::Snapshot(args) => snapshot::run(context, args),
        Command::Exec(args) => exec::run(context, args),
        Command::Integrate(command) => integrate::run(context, command),
        Command::Plugins(command) => plugins::run(context, command),
        Command::Oats(args) => oats::run(context, args),
        Command::Slice(command) => assure::run_slice(context, command),
        Command::Collect(args) => assure::run_collect(context, args),
        Command::Judge(args) => assure::run_judge(context, args),
        Command::Evidence(command) => assure::run_evidence(context, command),
        Command::Demo(args) => demo::run(context, args),
    }
}

/// Runs `sf` with `args` (the first is the program name) and returns its exit status.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    let json = args.iter().skip(1).any(|arg| arg == "--json");
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) && !json
            {
                let _ = error.print();
                return if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(EXIT_USAGE)
                } else {
                    ExitCode::SUCCESS
                };
            }
            if json {
                let message = error.render().to_string();
                let message = message.trim_end().trim_start_matches("error: ").to_owned();
                print_envelope(&Err(CliError::new("usage", message)));
            } else {
                let _ = error.print();
            }
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let context = Context {
        config: cli.global.config,
        json: cli.global.json,
    };
    let outcome = dispatch(&context, cli.command);
    if context.json {
        print_envelope(&outcome);
    } else {
        match &outcome {
            Ok(output) => {
                // Every command's text passes through the terminal escape, so that a control
                // character from outside never reaches the terminal, whatever the command
                // did or did not escape itself.
                let text = text_escape::lines(&output.text);
                let mut stdout = std::io::stdout().lock();
                let _ = stdout.write_all(text.as_bytes());
                if !text.is_empty() && !text.ends_with('\n') {
                    let _ = stdout.write_all(b"\n");
                }
            }
            Err(error) => eprintln!(
                "sf: error ({}): {}",
                error.code,
                text_escape::lines(&error.message)
            ),
        }
    }
    match outcome {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(EXIT_FAILURE),
    }
}

/// The `--json` envelope of an outcome.
pub fn envelope(outcome: &Result<Output, CliError>) -> serde_json::Value {
    match outcome {
        Ok(output) => serde_json::json!({
            "schemaVersion": SCHEMA_VERSION,
            "ok": true,
            "result": output.json,
        }),
        Err(error) => serde_json::json!({
            "schemaVersion": SCHEMA_VERSION,
            "ok": false,
            "error": {"code": error.code, "message": error.message},
        }),
    }
}

fn print_envelope(outcome: &Result<Output, CliError>) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", envelope(outcome));
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn envelopes_have_the_documented_shape() {
        let ok = envelope(&Ok(Output {
            json: serde_json::json!({"a": 1}),
            text: String::new(),
        }));
        assert_eq!(
            ok,
            serde_json::json!({"schemaVersion": 1, "ok": true, "result": {"a": 1}})
        );
        let failed = envelope(&Err(CliError::new("usage", "bad")));
        assert_eq!(
            failed,
            serde_json::json!({"schemaVersion": 1, "ok": false,
                               "error": {"code": "usage", "message": "bad"}})
        );
    }
}
