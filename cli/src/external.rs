//! Programs `sf` runs in its place, as Git runs its external subcommands: `sf oats` runs
//! `sf-oats`, `sf worker` runs `sf-worker`. Their crates link backends (sandbox-exec, the oats
//! plugin, tonic for the remote-execution worker), which sf-host and the `sf` binary never
//! link; so the program is found on the plugin path (beside `sf`, then `SF_PLUGIN_PATH`),
//! checked as the loader checks a plugin (owned by this user or root, and neither it nor its
//! directory writable by group or others: whoever can change it runs code as sf), and
//! `exec`ed with the arguments given: same stdout, stderr and exit status.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use super::common::CliError;
use sf_host::plugin::loader::{check_directories_above, check_owner};
use sf_host::plugin::{PluginError, PluginPath};

/// The program `sf oats` runs, which `sf plugins` also asks for the registered capabilities.
pub const SF_OATS: &str = "sf-oats";
/// How to build [`SF_OATS`] when it is missing.
pub const SF_OATS_BUILD: &str = "cargo build -p sf-oats-cli";

/// `program` on the plugin path, checked; `build` says how to build it when it is missing.
pub(crate) fn find(program: &str, build: &str) -> Result<PathBuf, CliError> {
    let path =
        PluginPath::from_env().map_err(|error| CliError::new(error.code(), error.to_string()))?;
    let found = path
        .dirs()
        .iter()
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            CliError::new(
                "unavailable",
                format!(
                    "{program} was not found on the plugin path ({}); build it with `{build}` \
                     and keep it beside sf",
                    path.dirs()
                        .iter()
                        .map(|dir| dir.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
    checked(&found, program).map_err(|error| CliError::new(error.code(), error.to_string()))
}

/// The program's canonical path, once it and its directory pass the loader's owner and mode
/// checks.
fn checked(path: &Path, program: &str) -> Result<PathBuf, PluginError> {
    let unreadable = |error: std::io::Error| PluginError::Insecure {
        plugin: program.to_owned(),
        path: path.to_owned(),
        rule: format!("it cannot be checked: {error}"),
    };
    let canonical = std::fs::canonicalize(path).map_err(unreadable)?;
    let meta = std::fs::metadata(&canonical).map_err(unreadable)?;
    check_owner(&canonical, &meta, program)?;
    if let Some(directory) = canonical.parent() {
        check_owner(
            directory,
            &std::fs::metadata(directory).map_err(unreadable)?,
            program,
        )?;
        check_directories_above(directory, program)?;
    }
    Ok(canonical)
}

/// Replaces this process with `program` (found and checked on the plugin path) run with
/// `leading` and then `args`; returns only when it could not be started.
pub fn exec(program: &str, build: &str, leading: &[&str], args: &[OsString]) -> CliError {
    let found = match find(program, build) {
        Ok(found) => found,
        Err(error) => return error,
    };
    let error = std::process::Command::new(&found)
        .args(leading)
        .args(args)
        .exec();
    CliError::new(
        "unavailable",
        format!("{} could not be started: {error}", found.display()),
    )
}
