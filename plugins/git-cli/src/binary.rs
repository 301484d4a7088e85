//! Pinning the Git binary: resolved once, checked to be root-owned and writable by no one
//! else (the file and every directory above it, so that it cannot be swapped by renaming),
//! and digested so that records can name the exact Git that ran. The checks live in
//! [`sf_git::process::pin_git`], shared with the host's read-only source reader.

use std::path::Path;

use sf_contracts::ObjectStoreError;
pub(crate) use sf_git::process::PinnedGit;

/// Where Git is looked for when the configuration names none, in order.
pub use sf_git::process::DEFAULT_GIT_PATHS;

/// Resolves `configured` (or the first default that exists), checks it and digests it.
pub(crate) fn pin(configured: Option<&Path>) -> Result<PinnedGit, ObjectStoreError> {
    sf_git::process::pin_git(configured).map_err(|reason| ObjectStoreError::Unavailable { reason })
}
