//! Writing a checked freeze: the snapshots stored, then the frozen records, the Slice record
//! last. A frozen record that already holds other bytes is refused before anything is
//! written; every write is relative to a directory descriptor and follows no link.

use std::ffi::OsStr;
use std::path::Path;

use sf_host::assurance::AssuranceError;
use sf_host::dir_fd::{DirFd, DirFdError};
use sf_host::snapshot_store::SnapshotStore;

use super::Checked;
use super::authored::fd_error;
use crate::error::AppError;
use crate::slice_dir::{FROZEN, SLICE_RECORD, state_dir};

/// The frozen records, by file name, the Slice record last.
type Records = [(&'static str, Vec<u8>); 4];

/// Stores the snapshots and writes the frozen records of `checked` into `dir`.
pub(super) fn write(dir: &Path, checked: &Checked) -> Result<(), AppError> {
    let records = records(checked)?;
    let slice_dir = DirFd::open(dir).map_err(fd_error)?;
    refuse_other_records(&slice_dir, &records)?;
    let snapshots = SnapshotStore::open(&state_dir(dir, "snapshots", true)?)
        .map_err(|error| AppError::coded(error.code(), "the snapshot store", error))?;
    for (digest, files, what) in &checked.inputs.snapshots {
        snapshots
            .put(files, digest)
            .map_err(|error| AppError::coded(error.code(), format!("the Slice's {what}"), error))?;
    }
    let frozen_dir = slice_dir
        .ensure_dir(OsStr::new(FROZEN), 0o755)
        .map_err(fd_error)?;
    for (name, bytes) in &records {
        frozen_dir
            .write_once(OsStr::new(name), bytes, 0o644)
            .map_err(conflict)?;
    }
    Ok(())
}

fn records(checked: &Checked) -> Result<Records, AppError> {
    let encode = |what: &str, bytes: Result<Vec<u8>, AssuranceError>| {
        bytes.map_err(|error| AppError::invalid(what, error))
    };
    let slice = &checked.slice;
    Ok([
        (
            "acceptance.json",
            encode("acceptance", slice.acceptance.to_bytes())?,
        ),
        ("recipe.json", encode("recipe", slice.recipe.to_bytes())?),
        (
            "environment.json",
            encode("environment", slice.environment.to_bytes())?,
        ),
        (SLICE_RECORD, encode("slice", slice.record.to_bytes())?),
    ])
}

/// A frozen record that holds other bytes than the freeze would write is a conflict: a
/// changed Slice needs a new revision in a new directory.
fn conflict(error: DirFdError) -> AppError {
    match error {
        DirFdError::Differs { path } => AppError::coded(
            "conflict",
            path.display(),
            "already holds another frozen record; a changed Slice needs a new revision in a \
             new directory",
        ),
        other => fd_error(other),
    }
}

/// Refuses, before anything is written, a frozen record of `slice_dir` with other bytes.
fn refuse_other_records(slice_dir: &DirFd, records: &Records) -> Result<(), AppError> {
    if slice_dir
        .entry(OsStr::new(FROZEN))
        .map_err(fd_error)?
        .is_none()
    {
        return Ok(());
    }
    let existing = slice_dir
        .open_dir_named(OsStr::new(FROZEN))
        .map_err(fd_error)?;
    for (name, bytes) in records {
        if existing
            .entry(OsStr::new(name))
            .map_err(fd_error)?
            .is_none()
        {
            continue;
        }
        let held = existing
            .read_file_named(OsStr::new(name), bytes.len() as u64)
            .map_err(|error| match error {
                DirFdError::TooLarge { path, .. } => DirFdError::Differs { path },
                other => other,
            })
            .map_err(conflict)?;
        if held.bytes != *bytes {
            return Err(conflict(DirFdError::Differs {
                path: existing.shown(OsStr::new(name)),
            }));
        }
    }
    Ok(())
}
