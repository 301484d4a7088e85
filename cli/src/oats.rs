//! `sf oats …`: oats capability packages as plugins. sf-host cannot link the sf-oats plugin
//! crate (plugins depend on the host, never the reverse), so `sf oats` runs the `sf-oats`
//! program that crate builds in place of sf ([`super::external`]), with `--json` passed on
//! (`--config` is refused: the oats commands read no sf.toml). See docs/oats.md.

use std::ffi::OsString;

use clap::Args;

use super::common::{CliError, Context, Output};

/// The program `sf oats` runs.
pub const PROGRAM: &str = super::external::SF_OATS;

#[derive(Debug, Args)]
pub struct OatsArgs {
    /// The oats command and its arguments: register, list, show, trust, run, operation, gate,
    /// hook (`sf oats --help` lists them)
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    args: Vec<OsString>,
}

pub fn run(context: &Context, args: OatsArgs) -> Result<Output, CliError> {
    if let Some(config) = &context.backends.config {
        // Refused rather than ignored: a user passing it expects it to matter.
        return Err(CliError::new(
            "usage",
            format!(
                "--config {}: the oats commands read no sf.toml (their state is `sf oats \
                 --state DIR`); run without --config",
                config.display()
            ),
        ));
    }
    let leading: &[&str] = if context.json { &["--json"] } else { &[] };
    Err(super::external::exec(
        PROGRAM,
        super::external::SF_OATS_BUILD,
        leading,
        &args.args,
    ))
}
