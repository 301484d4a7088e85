//! `sf oats …`: oats capability packages as plugins. sf-host cannot link the sf-oats plugin
//! crate (plugins depend on the host, never the reverse), so, like a Git external
//! subcommand, `sf oats` runs the `sf-oats` program that crate builds, found on the plugin
//! path (beside `sf`, then `SF_PLUGIN_PATH`), in place of sf: same arguments, same stdout,
//! stderr and exit status, with `--json` passed on (`--config` is refused: the oats commands
//! read no sf.toml). The program gets the
//! loader's file checks first (owned by this user or root, and neither it nor its directory
//! writable by group or others): whoever can change it runs code as sf. See docs/oats.md.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use clap::Args;

use super::common::{CliError, Context, Output};
use sf_host::plugin::loader::{check_directories_above, check_owner};
use sf_host::plugin::{PluginError, PluginPath};

/// The program `sf oats` runs.
pub const PROGRAM: &str = "sf-oats";

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

fn find() -> Result<PathBuf, CliError> {
    let path =
        PluginPath::from_env().map_err(|error| CliError::new(error.code(), error.to_string()))?;
    let found = path
        .dirs()
        .iter()
        .map(|dir| dir.join(PROGRAM))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            CliError::new(
                "unavailable",
                format!(
                    "{PROGRAM} was not found on the plugin path ({}); build it with `cargo build -p sf-oats` and keep it beside sf",
                    path.dirs()
                        .iter()
                        .map(|dir| dir.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
    checked(&found).map_err(|error| CliError::new(error.code(), error.to_string()))
}

/// The program's canonical path, once it and its directory pass the loader's owner and mode
/// checks.
fn checked(program: &Path) -> Result<PathBuf, PluginError> {
    let unreadable = |error: std::io::Error| PluginError::Insecure {
        plugin: PROGRAM.to_owned(),
        path: program.to_owned(),
        rule: format!("it cannot be checked: {error}"),
    };
    let canonical = std::fs::canonicalize(program).map_err(unreadable)?;
    let meta = std::fs::metadata(&canonical).map_err(unreadable)?;
    check_owner(&canonical, &meta, PROGRAM)?;
    if let Some(directory) = canonical.parent() {
        check_owner(
            directory,
            &std::fs::metadata(directory).map_err(unreadable)?,
            PROGRAM,
        )?;
        check_directories_above(directory, PROGRAM)?;
    }
    Ok(canonical)
}

pub fn run(context: &Context, args: OatsArgs) -> Result<Output, CliError> {
    if let Some(config) = &context.config {
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
    let program = find()?;
    let mut command = std::process::Command::new(&program);
    if context.json {
        command.arg("--json");
    }
    command.args(&args.args);
    // exec only returns when the program could not be started.
    let error = command.exec();
    Err(CliError::new(
        "unavailable",
        format!("{} could not be started: {error}", program.display()),
    ))
}
