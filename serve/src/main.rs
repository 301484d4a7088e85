//! The `sf-serve` program, which `sf serve` runs: `sf-serve --config FILE`.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// sf serve: one landing service for many agents (an HTTP API, a durable queue, the pages),
/// configured by the [serve] section of an sf.toml.
#[derive(Debug, Parser)]
#[command(name = "sf-serve", version)]
struct Args {
    /// The sf.toml holding [serve] and the backends
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    sf_serve::main(args.config)
}
