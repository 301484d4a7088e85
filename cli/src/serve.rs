//! `sf serve --config FILE`: one landing service for many agents (an HTTP API, a durable
//! queue, the pages), configured by the file's `[serve]` section. The service links an HTTP
//! stack and an async runtime, which the `sf` binary never links, so `sf serve` runs the
//! `sf-serve` program (package sf-serve) in place of sf ([`super::external`]). `--json` is
//! refused, since the server runs until it is stopped rather than answering once. See
//! docs/serve.md.

use clap::Args;

use super::common::{CliError, Context, Output};

/// The program `sf serve` runs.
pub const PROGRAM: &str = "sf-serve";

#[derive(Debug, Args)]
pub struct ServeArgs {}

pub fn run(context: &Context, _args: ServeArgs) -> Result<Output, CliError> {
    if context.json {
        return Err(CliError::new(
            "usage",
            "--json: sf serve runs until it is stopped and answers over HTTP; run without --json",
        ));
    }
    let Some(config) = context.backends.config.as_ref() else {
        return Err(CliError::new(
            "usage",
            "sf serve needs --config FILE, an sf.toml with a [serve] section (see docs/serve.md)",
        ));
    };
    let config = config.to_string_lossy().into_owned();
    Err(super::external::exec(
        PROGRAM,
        "cargo build -p sf-serve",
        &["--config", &config],
        &[],
    ))
}
