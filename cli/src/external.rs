//! Programs `sf` runs in its place, as Git runs its external subcommands: `sf oats` runs
//! `sf-oats`, `sf worker` runs `sf-worker`. Their crates link backends (sandbox-exec, the oats
//! plugin, tonic for the remote-execution worker), which sf-host and the `sf` binary never
//! link; so the program is found on the plugin path and checked as the loader checks a
//! plugin (`sf_app::external`, which the use cases share), and `exec`ed with the arguments
//! given: same stdout, stderr and exit status.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;

use super::common::CliError;

pub use sf_app::external::{SF_OATS, SF_OATS_BUILD, find, sf_oats_json};

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
