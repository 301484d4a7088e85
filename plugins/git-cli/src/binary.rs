//! Pinning the Git binary: resolved once, checked to be root-owned and writable by no one
//! else (the file and every directory above it, so that it cannot be swapped by renaming),
//! and digested so that records can name the exact Git that ran.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sf_host::canonical::Digest;
use sf_host::contracts::ObjectStoreError;

use crate::errors::unavailable;

/// Where Git is looked for when the configuration names none, in order.
pub const DEFAULT_GIT_PATHS: &[&str] = &["/usr/bin/git", "/usr/local/bin/git"];

/// The largest Git binary digested (a real one is a few MiB).
const GIT_MAX_BYTES: u64 = 512 * 1024 * 1024;

/// A Git binary that passed the checks, and the SHA-256 of its bytes when it did.
#[derive(Debug, Clone)]
pub(crate) struct PinnedGit {
    pub(crate) path: PathBuf,
    pub(crate) digest: Digest,
}

/// Resolves `configured` (or the first default that exists), checks it and digests it.
pub(crate) fn pin(configured: Option<&Path>) -> Result<PinnedGit, ObjectStoreError> {
    let named = match configured {
        Some(path) => path.to_path_buf(),
        None => DEFAULT_GIT_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|path| path.symlink_metadata().is_ok())
            .ok_or_else(|| ObjectStoreError::Unavailable {
                reason: format!(
                    "no git binary at {}; name one in the configuration",
                    DEFAULT_GIT_PATHS.join(" or ")
                ),
            })?,
    };
    let path = std::fs::canonicalize(&named)
        .map_err(|_| unavailable(&named, "the git binary must exist and resolve"))?;
    // The file is checked and read through one descriptor, so the bytes digested are the
    // bytes of the file that passed.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&path)
        .map_err(|_| unavailable(&path, "the git binary must be readable"))?;
    let meta = file
        .metadata()
        .map_err(|_| unavailable(&path, "the git binary cannot be examined"))?;
    if !meta.file_type().is_file() {
        return Err(unavailable(&path, "the git binary must be a regular file"));
    }
    if meta.uid() != 0 {
        return Err(unavailable(
            &path,
            "the git binary must be owned by root (uid 0)",
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unavailable(
            &path,
            "the git binary must not be writable by group or others",
        ));
    }
    for dir in path.ancestors().skip(1) {
        check_ancestor(dir)?;
    }
    let mut bytes = Vec::new();
    file.take(GIT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| unavailable(&path, "the git binary must be readable"))?;
    if bytes.len() as u64 > GIT_MAX_BYTES {
        return Err(unavailable(&path, "the git binary is larger than 512 MiB"));
    }
    Ok(PinnedGit {
        digest: Digest::of(&bytes),
        path,
    })
}

/// A directory above the binary: root's, and writable by no one else.
fn check_ancestor(dir: &Path) -> Result<(), ObjectStoreError> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|_| unavailable(dir, "a directory above the git binary cannot be examined"))?;
    if !meta.file_type().is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(unavailable(
            dir,
            "every directory above the git binary must be root's and not writable by group or \
             others",
        ));
    }
    Ok(())
}
