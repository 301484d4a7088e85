//! Files a use case writes for its caller, each new: never overwritten, never written through
//! a symbolic link, synced before the call returns.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use sf_host::canonical::Value;

use crate::error::AppError;

/// An absolute form of `path`: relative paths are taken from the working directory, and the
/// parent (which must exist) is resolved, so that the result is canonical up to its last
/// component, which may not exist yet.
pub fn absolute_new_path(path: &Path, what: &str) -> Result<PathBuf, AppError> {
    let invalid = |detail: String| AppError::invalid(format!("{what} {}", path.display()), detail);
    let name = path
        .file_name()
        .filter(|name| *name != "." && *name != "..")
        .ok_or_else(|| invalid("names no new file or directory".into()))?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = std::fs::canonicalize(&parent).map_err(|error| {
        invalid(format!(
            "its parent directory {} cannot be resolved ({error}); create it first",
            parent.display()
        ))
    })?;
    Ok(parent.join(name))
}

/// `file`, made absolute, when it does not exist yet: where a record is written that must
/// never overwrite anything (`flag` names the option in the error).
pub fn new_record_file(file: Option<&Path>, flag: &str) -> Result<Option<PathBuf>, AppError> {
    let Some(file) = file else {
        return Ok(None);
    };
    let file = absolute_new_path(file, flag)?;
    if file.symlink_metadata().is_ok() {
        return Err(AppError::new(
            "exists",
            format!(
                "{flag} {}: already exists; sf never overwrites it: choose a new file",
                file.display()
            ),
        ));
    }
    Ok(Some(file))
}

/// Creates the new file `file` (0644, no link followed) holding `bytes`, synced.
pub fn write_new_file(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(file)
        .and_then(|mut out| out.write_all(bytes).and_then(|()| out.sync_all()))
}

/// Writes `value` canonically to the new file `file`. The record is retained in the
/// repository already, so the error says how to get it again.
pub fn write_new_record(file: &Path, value: &Value, flag: &str) -> Result<(), AppError> {
    let bytes = sf_host::canonical::encode(value)
        .map_err(|error| AppError::new("invalid-input", error.to_string()))?;
    write_new_file(file, &bytes).map_err(|error| {
        AppError::new(
            "unwritable-output",
            format!(
                "{flag} {}: cannot be written ({error}); the intent is retained: run \
                 prepare again with the same input to get it",
                file.display()
            ),
        )
    })
}
