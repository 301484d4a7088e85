//! What the operator authors in a Slice directory, read strictly: `slice.json`,
//! `recipe.json`, and the optional harness and overlay directories.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};
use sf_host::canonical::{self, Value};
use sf_host::dir_fd::{DirFd, DirFdError};
use sf_host::repository::{ID_RULE, ProposalBounds, is_valid_id};
use sf_host::snapshot::SnapshotFile;
use sf_host::source_dir::read_snapshot_dir;

use crate::error::AppError;
use crate::input::MAX_INPUT_BYTES;

/// What `slice.json` says: the Slice's id and revision, the paths a Candidate may edit
/// (`scope`), the patterns no Candidate may touch (`protected`, none when absent), and the
/// proposal bounds when the Slice raises the default ones (`bounds`, `{"edits", "bytes"}`),
/// the constructs no proposal may add (`forbidden`, none when absent), and the closed
/// sub-paths a proposal may touch all the same (`open`, none when absent).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Authored {
    #[serde(deserialize_with = "slice_id")]
    pub(super) id: String,
    #[serde(deserialize_with = "canonical::positive")]
    pub(super) revision: u64,
    pub(super) scope: Vec<String>,
    #[serde(default)]
    pub(super) protected: Vec<String>,
    #[serde(default, deserialize_with = "canonical::optional")]
    pub(super) bounds: Option<ProposalBounds>,
    #[serde(default)]
    pub(super) forbidden: Vec<String>,
    #[serde(default)]
    pub(super) open: Vec<String>,
}

fn slice_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(deserializer, |id: &String| is_valid_id(id), ID_RULE)
}

/// What `recipe.json` says: the per-run bounds every check of the Slice gets.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct AuthoredRecipe {
    #[serde(deserialize_with = "canonical::positive")]
    pub(super) timeout_ms: u64,
    #[serde(deserialize_with = "canonical::positive")]
    pub(super) output_limit: u64,
}

/// A descriptor error as it is reported, naming the path.
pub(super) fn fd_error(error: DirFdError) -> AppError {
    AppError::new(error.code(), error.to_string())
}

/// The Slice directory, open: its authored records are read relative to it.
pub(super) struct AuthoredDir {
    fd: DirFd,
    dir: PathBuf,
}

impl AuthoredDir {
    /// Opens `dir` without following a link.
    pub(super) fn open(dir: &Path) -> Result<Self, AppError> {
        Ok(Self {
            fd: DirFd::open(dir).map_err(fd_error)?,
            dir: dir.to_path_buf(),
        })
    }

    /// The authored record `name`, parsed as canonical JSON.
    pub(super) fn value(&self, name: &str) -> Result<Value, AppError> {
        let file = self
            .fd
            .read_file_named(OsStr::new(name), MAX_INPUT_BYTES)
            .map_err(fd_error)?;
        canonical::parse(&file.bytes)
            .map_err(|error| AppError::invalid(self.dir.join(name).display(), error))
    }

    /// The authored record `name` as a `T`; the error names the field and the rule it broke.
    pub(super) fn record<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<T, AppError> {
        canonical::from_value(&self.value(name)?, name)
            .map_err(|error| AppError::invalid(error.field, error.rule))
    }
}

/// A directory of the Slice read as a snapshot; an absent directory is an empty snapshot.
pub(super) fn optional_dir(dir: &Path, what: &str) -> Result<Vec<SnapshotFile>, AppError> {
    match std::fs::symlink_metadata(dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        _ => read_snapshot_dir(dir)
            .map_err(|error| AppError::coded(error.code(), format!("the Slice's {what}"), error)),
    }
}
