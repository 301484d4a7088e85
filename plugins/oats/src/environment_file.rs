//! The operator's values for capabilities' declared environment variables (secrets such as
//! an API token): a file the operator writes and names (`sf oats --environment FILE`, the
//! Gate's `environment_file`), never sf's own environment, so that nothing an operator
//! exports for another program reaches a capability.
//!
//! The file is a JSON object of `NAME: "value"`, read strictly (a duplicate key, a value that
//! is not a string, or more than [`MAX_FILE_BYTES`] is refused). Since it holds secrets it
//! must be a regular file (not a link) owned by this user and readable by no one else (mode
//! `0600` or stricter). Which names a run may get is still the capability's: every run refuses
//! a name its manifest does not declare, and checks each value.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use serde_json::Value;

use crate::error::{ErrorCode, OatsError};
use crate::host::check_environment_value;
use crate::json;

/// The largest environment file read.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// The bounds of its JSON: one flat object.
const LIMITS: json::Limits = json::Limits {
    bytes: MAX_FILE_BYTES as usize,
    depth: 2,
    entries: 1024,
};

/// The values in `file`, checked (see the module documentation).
pub fn read(file: &Path) -> Result<BTreeMap<String, String>, OatsError> {
    let refused = |message: String| {
        OatsError::new(
            ErrorCode::InvalidEnvironment,
            file.display().to_string(),
            message,
        )
    };
    let handle = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)
        .map_err(|error| refused(format!("the environment file cannot be opened: {error}")))?;
    let meta = handle
        .metadata()
        .map_err(|error| refused(format!("the environment file cannot be read: {error}")))?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return Err(refused(format!(
            "holds secrets, so it must be a regular file owned by this user (uid {euid}) that no \
             one else can read or write (chmod 600); it is mode {:o}, owner {}",
            meta.mode() & 0o7777,
            meta.uid()
        )));
    }
    let mut bytes = Vec::new();
    handle
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| refused(format!("the environment file cannot be read: {error}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(refused(format!("is larger than {MAX_FILE_BYTES} bytes")));
    }
    let shape = "write a JSON object of NAME: \"value\", as {\"ACME_TOKEN\": \"…\"}";
    let document =
        json::parse(&bytes, LIMITS).map_err(|problem| refused(format!("{problem}; {shape}")))?;
    let Value::Object(members) = document else {
        return Err(refused(format!("is not a JSON object; {shape}")));
    };
    let mut values = BTreeMap::new();
    for (name, value) in members {
        let Value::String(value) = value else {
            return Err(refused(format!(
                "the value of {name} is not a string; {shape}"
            )));
        };
        check_environment_value(&name, &value)?;
        values.insert(name, value);
    }
    Ok(values)
}
