//! The configured backend: the pinned Git binary and the private HOME every Git process gets,
//! and the [`ObjectStoreFactory`] that creates and opens owned roots with them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use sf_contracts::canonical::Digest;
use sf_contracts::{ObjectStore, ObjectStoreError, ObjectStoreFactory, StoreRoot};

use crate::binary::{PinnedGit, pin};
use crate::errors::before;
use crate::layout::{MARKER_MAX_BYTES, check_path_shape, create_root};
use crate::runner::GitRunner;
use crate::store::GitCliStore;

/// How the git-cli backend is configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitCliConfig {
    /// The Git binary to pin; `None` takes the first of
    /// [`DEFAULT_GIT_PATHS`](crate::DEFAULT_GIT_PATHS) that exists.
    pub git: Option<PathBuf>,
}

/// Creates and opens roots served by one pinned Git binary.
#[derive(Debug)]
pub struct GitCliFactory {
    git: PinnedGit,
    /// An empty directory of this user, mode 0700, used as every Git process's HOME so that
    /// no per-user configuration or credential store is ever found. Removed when the factory
    /// and every store made by it are dropped.
    home: Arc<tempfile::TempDir>,
}

impl GitCliFactory {
    /// Pins the configured Git binary (root-owned, writable by no one else, digested) and
    /// makes the private HOME.
    pub fn new(config: GitCliConfig) -> Result<Self, ObjectStoreError> {
        let git = pin(config.git.as_deref())?;
        let home = tempfile::Builder::new()
            .prefix("sf-git-home-")
            .tempdir()
            .map_err(|error| ObjectStoreError::Unavailable {
                reason: format!("the private HOME for git could not be created: {error}"),
            })?;
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).map_err(
            |_| crate::errors::unavailable(home.path(), "the private HOME must be mode 0700"),
        )?;
        Ok(Self {
            git,
            home: Arc::new(home),
        })
    }

    /// The SHA-256 of the pinned Git binary's bytes, as read when the factory was made.
    pub fn git_digest(&self) -> Digest {
        self.git.digest.clone()
    }

    /// The canonical path of the pinned Git binary.
    pub fn git_path(&self) -> &Path {
        &self.git.path
    }

    fn runner(&self) -> GitRunner {
        GitRunner::new(self.git.path.clone(), Arc::clone(&self.home))
    }

    /// [`ObjectStoreFactory::create`] with the concrete store type.
    pub fn create_store(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<GitCliStore, ObjectStoreError> {
        before(deadline, "create")?;
        let root = create_root(path)?;
        let store = GitCliStore::new(root, self.runner(), None);
        store.check_ownership()?;
        Ok(store)
    }

    /// [`ObjectStoreFactory::open`] with the concrete store type.
    pub fn open_store(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<GitCliStore, ObjectStoreError> {
        if marker.len() > MARKER_MAX_BYTES {
            return Err(ObjectStoreError::InvalidInput {
                input: format!("a marker of {} bytes", marker.len()),
                rule: "a marker is at most 64 KiB",
            });
        }
        check_path_shape(&root.path)?;
        before(deadline, "open")?;
        let store = GitCliStore::new(root.clone(), self.runner(), Some(Arc::from(marker)));
        store.check_ownership()?;
        Ok(store)
    }
}

impl ObjectStoreFactory for GitCliFactory {
    fn create(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        Ok(Box::new(self.create_store(path, deadline)?))
    }

    fn open(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        Ok(Box::new(self.open_store(root, marker, deadline)?))
    }

    /// Git's `shallow` list holds them ([`crate::boundary`]).
    fn supports_boundaries(&self) -> Result<(), ObjectStoreError> {
        Ok(())
    }
}
