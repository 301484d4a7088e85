//! Programs sf runs beside itself: found on the plugin path (beside `sf`, then
//! `SF_PLUGIN_PATH`) and checked as the loader checks a plugin (owned by this user or root,
//! and neither it nor its directory writable by group or others: whoever can change it runs
//! code as sf). The command line `exec`s some in its place (`sf oats`, `sf worker`, `sf
//! serve`); the use cases ask `sf-oats` for what only it can reach (the oats registry).

use std::path::{Path, PathBuf};
use std::process::Command;

use sf_host::plugin::loader::{check_directories_above, check_owner};
use sf_host::plugin::{PluginError, PluginPath};

use crate::error::AppError;

/// The program `sf oats` runs, which `sf plugins` also asks for the registered capabilities.
pub const SF_OATS: &str = "sf-oats";
/// How to build [`SF_OATS`] when it is missing.
pub const SF_OATS_BUILD: &str = "cargo build -p sf-oats-cli";

/// `program` on the plugin path, checked; `build` says how to build it when it is missing.
pub fn find(program: &str, build: &str) -> Result<PathBuf, AppError> {
    let path =
        PluginPath::from_env().map_err(|error| AppError::new(error.code(), error.to_string()))?;
    let found = path
        .dirs()
        .iter()
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            AppError::new(
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
    checked(&found, program).map_err(|error| AppError::new(error.code(), error.to_string()))
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

/// `sf-oats --json ARGS`, run beside sf (checked as `sf oats` checks it): its result, or its
/// error as sf's.
pub fn sf_oats_json(args: &[&str]) -> Result<serde_json::Value, AppError> {
    let program = find(SF_OATS, SF_OATS_BUILD)?;
    let output = Command::new(&program)
        .arg("--json")
        .args(args)
        .output()
        .map_err(|error| {
            AppError::new(
                "unavailable",
                format!("{} could not be run: {error}", program.display()),
            )
        })?;
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|error| {
        AppError::new(
            "unavailable",
            format!("{} answered no envelope: {error}", program.display()),
        )
    })?;
    if envelope["ok"] == true {
        return Ok(envelope["result"].clone());
    }
    let error = &envelope["error"];
    Err(AppError::new(
        error["code"].as_str().unwrap_or("unavailable"),
        error["message"]
            .as_str()
            .unwrap_or("sf-oats failed")
            .to_owned(),
    ))
}
