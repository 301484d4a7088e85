//! Pinning the Git binary: resolved once, checked to be root-owned and writable by no one
//! else (the file and every directory above it, so that it cannot be swapped by renaming),
//! and digested so that records can name the exact Git that ran. The checks live in
//! [`sf_host::git_process::pin_git`], shared with the host's read-only source reader.

use std::path::Path;

use sf_host::contracts::ObjectStoreError;
pub(crate) use sf_host::git_process::PinnedGit;

/// Where Git is looked for when the configuration names none, in order.
pub use sf_host::git_process::DEFAULT_GIT_PATHS;

/// Resolves `configured` (or the first default that exists), checks it and digests it.
pub(crate) fn pin(configured: Option<&Path>) -> Result<PinnedGit, ObjectStoreError> {
    sf_host::git_process::pin_git(configured)
        .map_err(|reason| ObjectStoreError::Unavailable { reason })
}
