//! Reading what a request names: input files (bounded, regular files only), the repository
//! identity, and the digests and times given as text. Each error names the flag the value came
//! from, so that a caller can print it as it is.

use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use sf_host::assurance::time;
use sf_host::canonical::Digest;
use sf_host::repository::{RepositoryIdentity, parse_repository_identity};

use crate::error::AppError;

/// The largest input file read (identities, frozen inputs, proposals). Every record sf reads
/// is bounded by 1 MiB of canonical JSON; a little more lets the parser name the limit.
pub const MAX_INPUT_BYTES: u64 = 2 * 1024 * 1024;

/// Reads an input file, naming it by `what` (for example `--proposal`) in errors.
pub fn read_input(path: &Path, what: &str) -> Result<Vec<u8>, AppError> {
    read_input_within(path, what, MAX_INPUT_BYTES)
}

/// [`read_input`] for an input with its own bound of `limit` bytes (a proposal).
pub fn read_input_within(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>, AppError> {
    let unreadable = |detail: String| {
        AppError::new(
            "unreadable-input",
            format!(
                "{what} {}: cannot be read ({detail}); pass an existing file",
                path.display()
            ),
        )
    };
    let meta = std::fs::metadata(path).map_err(|error| unreadable(error.to_string()))?;
    if !meta.is_file() {
        return Err(unreadable("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|error| unreadable(error.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(unreadable(format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

/// Reads and parses an identity file.
pub fn read_identity(path: &Path) -> Result<RepositoryIdentity, AppError> {
    let bytes = read_input(path, "--identity")?;
    parse_repository_identity(&bytes).map_err(|error| {
        AppError::new(
            "invalid-identity",
            format!(
                "--identity {}: not a repository identity ({error}); pass the file `sf repo \
                 create --identity-out` wrote",
                path.display()
            ),
        )
    })
}

/// `text` as a digest, naming `flag` in the error.
pub fn parse_digest(text: &str, flag: &str) -> Result<Digest, AppError> {
    Digest::parse(text).ok_or_else(|| {
        AppError::invalid(
            format!("{flag} {text:?}"),
            "is not sha256: followed by 64 lowercase hex characters",
        )
    })
}

/// A deadline given as text (`--deadline`, RFC 3339 UTC) as a time; default: an hour from
/// now.
pub fn deadline(text: Option<&str>) -> Result<SystemTime, AppError> {
    match text {
        Some(text) => time::parse_loose(text)
            .map(time::from_millis)
            .ok_or_else(|| {
                AppError::invalid(
                    format!("--deadline {text:?}"),
                    "is an RFC 3339 UTC time such as 2026-01-01T12:00:00Z",
                )
            }),
        None => Ok(SystemTime::now() + Duration::from_secs(3600)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_deadlines_name_their_flag_when_refused() {
        let error = parse_digest("sha256:nope", "--candidate").unwrap_err();
        assert_eq!(error.code, "invalid-input");
        assert_eq!(
            error.message,
            "--candidate \"sha256:nope\": is not sha256: followed by 64 lowercase hex characters"
        );
        let error = deadline(Some("tomorrow")).unwrap_err();
        assert!(
            error.message.starts_with("--deadline \"tomorrow\": "),
            "{error}"
        );
        assert!(deadline(Some("2026-01-01T12:00:00Z")).is_ok());
        assert!(deadline(None).unwrap() > SystemTime::now());
    }

    #[test]
    fn an_input_must_be_a_regular_file_within_its_bound() {
        let dir = std::env::temp_dir();
        let error = read_input(&dir, "--proposal").unwrap_err();
        assert_eq!(error.code, "unreadable-input");
        assert!(error.message.contains("not a regular file"), "{error}");
    }
}
