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
use std::process::Command;

use sf_app::AppError;
use sf_app::capabilities::{CapabilityStager, StageRequest, Staged};

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

/// `sf-oats --json ARGS`, run beside sf (checked as `sf oats` checks it): its result, or its
/// error as sf's.
pub(crate) fn sf_oats_json(args: &[&str]) -> Result<serde_json::Value, CliError> {
    let program = find(SF_OATS, SF_OATS_BUILD)?;
    let output = Command::new(&program)
        .arg("--json")
        .args(args)
        .output()
        .map_err(|error| {
            CliError::new(
                "unavailable",
                format!("{} could not be run: {error}", program.display()),
            )
        })?;
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|error| {
        CliError::new(
            "unavailable",
            format!("{} answered no envelope: {error}", program.display()),
        )
    })?;
    if envelope["ok"] == true {
        return Ok(envelope["result"].clone());
    }
    let error = &envelope["error"];
    Err(CliError::new(
        error["code"].as_str().unwrap_or("unavailable"),
        error["message"]
            .as_str()
            .unwrap_or("sf-oats failed")
            .to_owned(),
    ))
}

/// Stages oats checks with `sf-oats stage` (its registry in `[oats] state`, else where `sf
/// oats` keeps it by default), reading the harness it writes into a private temporary
/// directory.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SfOatsStager;

impl CapabilityStager for SfOatsStager {
    fn stage(&self, request: &StageRequest<'_>) -> Result<Staged, AppError> {
        let scratch = tempfile::Builder::new()
            .prefix("sf-oats-stage.")
            .tempdir()
            .map_err(|error| AppError::new("io", format!("a staging directory: {error}")))?;
        let out = scratch.path().join("harness");
        let out_text = out.to_string_lossy().into_owned();
        let state = request
            .state
            .map(|state| state.to_string_lossy().into_owned());
        let mut args = vec![];
        if let Some(state) = &state {
            args.extend(["--state", state.as_str()]);
        }
        args.extend(["stage", request.capability, request.operation]);
        let pairs: Vec<String> = request
            .args
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        for pair in &pairs {
            args.extend(["--arg", pair]);
        }
        if let Some(integrity) = request.integrity {
            args.extend(["--integrity", integrity]);
        }
        let pin = request.pin.map(|pin| pin.to_string_lossy().into_owned());
        if let Some(pin) = &pin {
            args.extend(["--pin", pin]);
        }
        args.extend(["--tree", request.tree, "--out", &out_text]);
        // sf-oats's messages name the capability first.
        let answer = sf_oats_json(&args)?;
        let files = sf_host::source_dir::read_snapshot_dir(&out)
            .map_err(|error| AppError::coded(error.code(), out.display(), error))?;
        let field = |name: &str| answer[name].as_str().unwrap_or_default().to_owned();
        Ok(Staged {
            integrity: field("integrity"),
            version: field("version"),
            files,
        })
    }
}
