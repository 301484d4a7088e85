//! The `sf` command line: argument parsing (clap), one module per subcommand, and the output
//! conventions every command shares.
//!
//! - Human-readable text on stdout by default; with `--json`, stdout is exactly one envelope,
//!   `{"ok":true,"result":…,"schemaVersion":1}` or
//!   `{"error":{"code":…,"message":…},"ok":false,"schemaVersion":1}` (keys sorted, as
//!   serde_json prints a map).
//! - Exit status 0 only on success; 1 when the command failed; 2 for a usage error.
//! - Logs and warnings go to stderr.
//! - Text output (and an error's message) is printed through [`sf_host::text_escape::lines`]:
//!   control characters other than newline and tab, from wherever they came, are shown
//!   escaped. `--json` is printed as it is (JSON escapes them).
//! - Every command takes `--config FILE` (an `sf.toml`; default: the embedded defaults).
//! - Errors name the input at fault and the fix.
//!
//! Each command parses its arguments into a request, calls one use case of sf-app (the
//! application layer: every rule of how sf is used lives there), renders what it answers and
//! picks the exit status. No command module uses another's types or functions; what several
//! share is in `common`, `args`, `render`, `progress`, `exit` and `external`.
//!
//! Adding a subcommand: a module with an `Args` struct and a `run(&Context, Args) ->
//! Result<Output, CliError>` over a use case, a variant in `Command`, and a line in
//! `dispatch`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// Shared by the commands: the context and output, the clap arguments several take, the
// rendering of shared records, the progress bar, the exit statuses, external programs.
mod args;
mod common;
mod config_search;
mod exit;
mod external;
mod progress;
mod render;

// One module per command: it parses, calls one use case of sf-app, and renders.
mod collect;
mod deliver;
mod demo;
mod env;
mod evidence;
mod exec;
mod export;
mod freeze;
mod integrate;
mod judge;
mod land;
mod manuals;
mod oats;
mod plugins;
mod propose;
mod repo;
mod report;
mod review;
mod seal;
mod serve;
mod show;
mod snapshot;
mod verify;
mod worker;

use std::ffi::OsString;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use sf_host::text_escape;

pub use common::{CliError, Context, Output};
pub use exit::{
    EXIT_CORRUPT, EXIT_FAILED, EXIT_FAILURE, EXIT_INCONCLUSIVE, EXIT_NOT_DISPATCHED, EXIT_REFUSED,
    EXIT_UNAVAILABLE, EXIT_UNKNOWN, EXIT_USAGE, EXIT_WITHHELD, Outcome,
};
pub use sf_app::export::write_export;

/// The `schemaVersion` of the `--json` envelope.
pub const SCHEMA_VERSION: u64 = 1;

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
    /// Make a proposal for a frozen Slice from a Git commit or a directory (priors from the
    /// Slice's base); prints it, or writes it with --out
    Propose(propose::ProposeArgs),
    /// Seal a proposal as a Candidate
    Seal(seal::SealArgs),
    /// Export a Candidate's files into a new directory
    Export(export::ExportArgs),
    /// List the files of a factory commit (default: the target), with their sha256
    Snapshot(snapshot::SnapshotArgs),
    /// Run one program through the configured Executor and print its answer
    Exec(exec::ExecArgs),
    /// Dependency environments: directory trees checks run in, stored read-only by digest
    #[command(subcommand)]
    Env(env::EnvCommand),
    /// Integrate a sealed Candidate into the target ref, at most once per prepared intent
    #[command(subcommand)]
    Integrate(integrate::IntegrateCommand),
    /// Deliver a Verified Candidate's commit to the team's Git remote, at most once per
    /// prepared intent
    #[command(subcommand)]
    Deliver(deliver::DeliverCommand),
    /// Plugins on the plugin path
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
    /// oats capability packages as plugins (runs the sf-oats program; `sf oats --help`)
    #[command(disable_help_flag = true)]
    Oats(oats::OatsArgs),
    /// Serve a remote-execution cluster's leases in sandbox-exec (runs the sf-worker program;
    /// `sf worker --help`); --config names the sandbox's sf.toml
    #[command(disable_help_flag = true)]
    Worker(worker::WorkerArgs),
    /// Serve many agents: an HTTP API taking proposals into a durable queue, landed one after
    /// another and delivered (runs the sf-serve program); --config names the sf.toml whose
    /// [serve] section configures it
    Serve(serve::ServeArgs),
    /// Slices: freeze the acceptance, recipe, environment, inputs, harness and overlay a
    /// Candidate is sealed for
    #[command(subcommand)]
    Slice(freeze::SliceCommand),
    /// Run each frozen process check of a Candidate once in the sandbox; one record per run
    Collect(collect::CollectArgs),
    /// Judge a Candidate's evidence: verified, failed or inconclusive
    Judge(judge::JudgeArgs),
    /// Read Evidence records
    #[command(subcommand)]
    Evidence(evidence::EvidenceCommand),
    /// Land a Candidate: collect, judge, and integrate it at most once, only if Verified
    Land(land::LandArgs),
    /// Run the whole pipeline on a bundled sample project: seal, collect, judge, integrate.
    /// It always runs on the embedded defaults: --config is refused
    Demo(demo::DemoArgs),
    /// Show a Candidate (by digest or commit id): its edits, newest Verdict and landing
    Show(show::ShowArgs),
    /// List a repository's Candidates with their newest Verdict and landing state
    List(show::ListArgs),
    /// Write one self-contained HTML report of a Candidate: its diff, checks, Verdict and
    /// landing, every value escaped; prints its path and digest
    Report(report::ReportArgs),
    /// Approve or reject a Candidate under a Slice's review check, as a named reviewer; the
    /// review is stored once in the evidence store, and the judge counts it
    #[command(subcommand)]
    Review(review::ReviewCommand),
    /// Check a commit's attestation with only the signer's public key: exit 0 only when it
    /// is a Verified attestation of exactly that commit signed by a trusted key
    Verify(verify::VerifyArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions(manuals::CompletionsArgs),
    /// Print sf's man page, or write one per command into a new directory (--out)
    Man(manuals::ManArgs),
}

fn dispatch(context: &Context, command: Command) -> Outcome {
    match command {
        Command::Repo(command) => repo::run(context, command),
        Command::Propose(args) => propose::run(context, args).into(),
        Command::Seal(args) => seal::run(context, args).into(),
        Command::Export(args) => export::run(context, args).into(),
        Command::Snapshot(args) => snapshot::run(context, args).into(),
        Command::Exec(args) => exec::run(context, args).into(),
        Command::Env(command) => env::run(context, command).into(),
        Command::Integrate(command) => integrate::run(context, command).into(),
        Command::Deliver(command) => deliver::run(context, command),
        Command::Plugins(command) => plugins::run(context, command).into(),
        Command::Oats(args) => oats::run(context, args).into(),
        Command::Worker(args) => worker::run(context, args).into(),
        Command::Serve(args) => serve::run(context, args).into(),
        Command::Slice(command) => freeze::run(context, command).into(),
        Command::Collect(args) => decided(collect::run(context, args)),
        Command::Judge(args) => decided(judge::run(context, args)),
        Command::Evidence(command) => evidence::run(context, command).into(),
        Command::Land(args) => land::run(context, args),
        Command::Demo(args) => demo::run(context, args).into(),
        Command::Show(args) => show::show(context, args).into(),
        Command::List(args) => show::list(context, args).into(),
        Command::Report(args) => report::run(context, args).into(),
        Command::Review(command) => review::run(context, command).into(),
        Command::Verify(args) => verify::run(context, args),
        Command::Completions(args) => manuals::completions(context, args).into(),
        Command::Man(args) => manuals::man(context, args).into(),
    }
}

/// The outcome of a command that gives its decision as its exit status too.
fn decided(result: Result<(Output, u8), CliError>) -> Outcome {
    match result {
        Ok((output, exit)) => Outcome {
            result: Ok(output),
            exit,
        },
        Err(error) => Err(error).into(),
    }
}

/// Runs `sf` with `args` (the first is the program name) and returns its exit status.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    main_with_faults(args, std::sync::Arc::new(sf_host::fault::NoFaults))
}

/// [`main`] with a fault hook: how tests stop or kill an `sf` process at a named point.
pub fn main_with_faults(
    args: impl IntoIterator<Item = OsString>,
    faults: std::sync::Arc<dyn sf_host::fault::FaultPoints>,
) -> ExitCode {
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
            if json
                && matches!(
                    error.kind(),
                    ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
                )
            {
                // Asked for and given: an ok envelope, the text in `result`.
                let result = if error.kind() == ErrorKind::DisplayVersion {
                    serde_json::json!({"version": env!("CARGO_PKG_VERSION")})
                } else {
                    serde_json::json!({"help": error.render().to_string()})
                };
                print_envelope(&Ok(Output {
                    json: result,
                    text: String::new(),
                }));
                return ExitCode::SUCCESS;
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
    let paint = !cli.global.json
        && matches!(cli.command, Command::Show(_) | Command::List(_))
        && show::colour_wanted();
    // The demo always runs on the embedded defaults, manuals need no configuration, and the
    // oats commands read none (an explicit --config is refused there, a found one ignored).
    let config = match cli.command {
        Command::Demo(_) | Command::Completions(_) | Command::Man(_) | Command::Oats(_) => {
            cli.global.config
        }
        _ => {
            let (config, found) = config_search::resolve(cli.global.config, &args);
            if let Some(line) = found {
                eprintln!("{}", text_escape::lines(&line));
            }
            config
        }
    };
    let mut context = Context::new(config, cli.global.json);
    context.backends.faults = faults;
    let Outcome {
        result: outcome,
        exit,
    } = dispatch(&context, cli.command);
    if context.json {
        print_envelope(&outcome);
    } else {
        match &outcome {
            Ok(output) => {
                // Every command's text passes through the terminal escape, so that a control
                // character from outside never reaches the terminal, whatever the command
                // did or did not escape itself.
                let mut text = text_escape::lines(&output.text);
                // Colour after the escape: only sf's own escape sequences reach the terminal.
                if paint {
                    text = show::paint(&text).into();
                }
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
    ExitCode::from(exit)
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
