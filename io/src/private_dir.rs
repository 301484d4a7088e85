//! Private directories: the roots of the snapshot store, the fence and the SQLite evidence
//! store must be directories that only this user can enter or change, named canonically, so
//! that no other user (and no sandboxed program, which runs as another user) can read, add,
//! replace or rename what sf keeps there.
//!
//! The rule: `std::fs::canonicalize` equals the given
//! path; it is a directory (not a symbolic link) owned by the effective uid with mode 0700
//! (no group or other bits); its parent is not group- or world-writable.

use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// A directory checked to be private, with the identity it had when checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrivateDir {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl PrivateDir {
    /// Checks `path` against the rule. The error says which part of the rule it breaks.
    pub fn check(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        if !path.is_absolute() {
            return Err(format!("{shown} is not an absolute path"));
        }
        let canonical = std::fs::canonicalize(path)
            .map_err(|error| format!("{shown} cannot be resolved: {error}"))?;
        if canonical != path {
            return Err(format!(
                "{shown} is not canonical (it resolves to {}); give the resolved path",
                canonical.display()
            ));
        }
        let meta = std::fs::symlink_metadata(path)
            .map_err(|error| format!("{shown} cannot be examined: {error}"))?;
        if !meta.is_dir() {
            return Err(format!("{shown} is not a directory"));
        }
        let euid = nix::unistd::geteuid().as_raw();
        if meta.uid() != euid {
            return Err(format!(
                "{shown} is owned by uid {}, not by this user (uid {euid})",
                meta.uid()
            ));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(format!(
                "{shown} has mode {:o}; it must be 0700 (no access for group or others)",
                meta.mode() & 0o7777
            ));
        }
        if let Some(parent) = path.parent() {
            let parent_meta = std::fs::metadata(parent)
                .map_err(|error| format!("{} cannot be examined: {error}", parent.display()))?;
            if parent_meta.mode() & 0o022 != 0 {
                return Err(format!(
                    "the parent {} is writable by group or others; put {shown} in a private directory",
                    parent.display()
                ));
            }
        }
        Ok(Self {
            path: canonical,
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// Creates `path` with mode 0700 if it does not exist, then checks it. An existing
    /// directory is checked as it is, never re-permissioned.
    pub fn create_or_check(path: &Path) -> Result<Self, String> {
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(format!("{} cannot be created: {error}", path.display())),
        }
        Self::check(path)
    }

    /// Checks again that the directory is private and is still the same directory (same
    /// device and inode) as when first checked: a replaced root is refused.
    pub fn recheck(&self) -> Result<(), String> {
        let now = Self::check(&self.path)?;
        if (now.dev, now.ino) != (self.dev, self.ino) {
            return Err(format!(
                "{} was replaced since it was opened",
                self.path.display()
            ));
        }
        Ok(())
    }

    /// The directory's canonical path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens a directory for `fsync` (to make a new or removed name in it durable).
pub fn sync_dir(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn private_parent() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().canonicalize().unwrap();
        (dir, path)
    }

    #[test]
    fn accepts_only_private_canonical_directories() {
        let (_dir, parent) = private_parent();
        let root = parent.join("root");
        let checked = PrivateDir::create_or_check(&root).unwrap();
        assert_eq!(checked.path(), root);
        assert!(checked.recheck().is_ok());

        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert!(PrivateDir::check(&root).unwrap_err().contains("mode"));
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();

        let link = parent.join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        assert!(PrivateDir::check(&link).unwrap_err().contains("canonical"));
        assert!(PrivateDir::check(Path::new("relative")).is_err());

        // Keep the old directory so that the new one cannot reuse its inode.
        std::fs::rename(&root, parent.join("old")).unwrap();
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(checked.recheck().unwrap_err().contains("replaced"));

        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(PrivateDir::check(&root).unwrap_err().contains("parent"));
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}
