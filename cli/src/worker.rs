//! `sf worker …`: serve a remote-execution cluster's leases as one of its workers. The worker
//! links sandbox-exec and a gRPC stack, which the `sf` binary never links, so `sf worker`
//! runs the `sf-worker` program (package sf-reapi-worker) in place of sf
//! ([`super::external`]). `--config FILE` names the sf.toml whose `[executor]` section
//! (type `sandbox-exec`) configures the worker's sandbox; `--json` is refused, since the
//! worker serves until it is stopped rather than answering once. See
//! docs/remote-execution.md.

use std::ffi::OsString;

use clap::Args;

use super::common::{CliError, Context, Output};

/// The program `sf worker` runs.
pub const PROGRAM: &str = "sf-worker";

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The worker's arguments: --endpoint URL, --instance NAME, --id NAME, --log FILE,
    /// --describe (`sf worker --help` lists them)
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

pub fn run(context: &Context, args: WorkerArgs) -> Result<Output, CliError> {
    if context.json {
        return Err(CliError::new(
            "usage",
            "--json: sf worker serves a cluster until it is stopped and prints its description \
             as text; run without --json",
        ));
    }
    let sandbox = context
        .backends
        .config
        .as_ref()
        .map(|config| config.to_string_lossy().into_owned());
    let leading: Vec<&str> = match &sandbox {
        Some(config) => vec!["--sandbox", config],
        None => Vec::new(),
    };
    Err(super::external::exec(
        PROGRAM,
        "cargo build -p sf-reapi-worker",
        &leading,
        &args.args,
    ))
}
