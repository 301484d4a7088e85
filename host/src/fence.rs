//! The attempt fence: at most one holder at a time per Product, across processes, with a
//! monotonic epoch per hold.
//!
//! A fence lives in a private directory of this user. For each Product it keeps two files,
//! named by the SHA-256 of the Product id: `<hex>.lock`, which a holder locks with `flock`
//! (exclusive; after a grace of [`LOCK_GRACE`] a second holder gets `busy`, in this process
//! or any other), and
//! `<hex>.epoch`, the canonical `{"epoch":N,"product":"…","protocol":"sf-fence/1"}` of the
//! last epoch handed out. Acquiring locks, reads the epoch, writes epoch + 1 durably (a
//! temporary file, fsync, rename, fsync of the directory) and returns a [`Hold`] for that
//! epoch, whose [`AttemptId`] every record written under it carries.
//!
//! A hold is active until [`Hold::release`] (or drop). [`Hold::assert_active`] is asked
//! before every run and every put: it fails `released` once the hold has ended, and also when
//! the hold can no longer be confirmed (the lock file or the directory was replaced, or the
//! epoch file names another epoch), so that an ended hold stops every further run and put.
//! The kernel drops an `flock` when its holder dies, so a killed holder never blocks the
//! Product; the epoch it took is never handed out again.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest};
use crate::contracts::AttemptId;
use crate::private_dir::{self, PrivateDir};
use crate::repository::{ID_RULE, is_valid_id};

/// The protocol string of the epoch file.
pub const FENCE_PROTOCOL: &str = "sf-fence/1";
const MAX_EPOCH_FILE_BYTES: u64 = 4096;
/// How long `acquire` keeps trying a lock that looks taken before it answers `busy`.
pub const LOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// Why the fence refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// An argument breaks a rule.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// The argument at fault (the Product id, quoted).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// Another hold on this Product is active (in this process or another).
    #[error("the fence of {product} is held by another attempt")]
    Busy {
        /// The Product whose fence is held.
        product: String,
    },
    /// The hold has ended, or can no longer be confirmed; nothing more may run or be stored
    /// under it.
    #[error("the hold of attempt {attempt} has ended: {reason}")]
    Released {
        /// The attempt whose hold ended.
        attempt: AttemptId,
        /// Why: released, or what could no longer be confirmed.
        reason: String,
    },
    /// The fence directory or its files cannot be used.
    #[error("fence unavailable: {reason}")]
    Unavailable {
        /// What made the directory or a file unusable.
        reason: String,
    },
    /// The epoch file is not what sf writes; reported, never repaired.
    #[error("fence corrupt: {what}")]
    Corrupt {
        /// The file and what is wrong with it.
        what: String,
    },
}

impl FenceError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
            Self::Busy { .. } => "busy",
            Self::Released { .. } => "released",
            Self::Unavailable { .. } => "unavailable",
            Self::Corrupt { .. } => "corrupt",
        }
    }
}

fn unavailable(reason: impl Into<String>) -> FenceError {
    FenceError::Unavailable {
        reason: reason.into(),
    }
}

/// The fence of one Product in one fence directory.
#[derive(Debug)]
pub struct Fence {
    dir: PrivateDir,
    product: String,
    lock_path: PathBuf,
    epoch_path: PathBuf,
}

impl Fence {
    /// The fence of `product` in `root`, which is created (0700) if absent and must be a
    /// private directory of this user. Touches no lock.
    pub fn open(root: &Path, product: &str) -> Result<Self, FenceError> {
        if !is_valid_id(product) {
            return Err(FenceError::InvalidInput {
                input: format!("product {product:?}"),
                rule: ID_RULE.into(),
            });
        }
        let dir = PrivateDir::create_or_check(root).map_err(unavailable)?;
        let key = Digest::of(product.as_bytes()).hex();
        Ok(Self {
            lock_path: dir.path().join(format!("{key}.lock")),
            epoch_path: dir.path().join(format!("{key}.epoch")),
            dir,
            product: product.to_owned(),
        })
    }

    /// The Product this fence serialises.
    pub fn product(&self) -> &str {
        &self.product
    }

    /// The last epoch handed out (0 before the first hold).
    pub fn last_epoch(&self) -> Result<u64, FenceError> {
        self.dir.recheck().map_err(unavailable)?;
        read_epoch(&self.epoch_path, &self.product)
    }

    /// Takes the fence: `busy` if another hold is active. The new hold's epoch is one more
    /// than any handed out before, and is durable before this returns.
    pub fn acquire(&self) -> Result<Hold, FenceError> {
        self.dir.recheck().map_err(unavailable)?;
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&self.lock_path)
            .map_err(|error| unavailable(format!("{}: {error}", self.lock_path.display())))?;
        // A fork in another thread of a process briefly holds a duplicate of every open
        // descriptor (until its exec closes them), and with it any flock on them: a hold
        // released an instant ago can look taken. A short grace absorbs that; a real holder
        // is still `busy` after it.
        let grace = std::time::Instant::now() + LOCK_GRACE;
        loop {
            // SAFETY: flock on a descriptor we own; no memory is involved.
            let locked = unsafe {
                nix::libc::flock(lock.as_raw_fd(), nix::libc::LOCK_EX | nix::libc::LOCK_NB)
            };
            if locked == 0 {
                break;
            }
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(nix::libc::EWOULDBLOCK) {
                return Err(unavailable(format!(
                    "locking {}: {error}",
                    self.lock_path.display()
                )));
            }
            if std::time::Instant::now() >= grace {
                return Err(FenceError::Busy {
                    product: self.product.clone(),
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let identity = file_identity(&lock)
            .map_err(|error| unavailable(format!("{}: {error}", self.lock_path.display())))?;
        // The name must still lead to the file we locked: a lock on an unlinked or replaced
        // file excludes no one.
        if path_identity(&self.lock_path) != Some(identity) {
            return Err(unavailable(format!(
                "{} was replaced while it was locked",
                self.lock_path.display()
            )));
        }
        let epoch = read_epoch(&self.epoch_path, &self.product)? + 1;
        if epoch > canonical::MAX_SAFE_INTEGER as u64 {
            return Err(FenceError::Corrupt {
                what: format!("{} is at the last epoch", self.epoch_path.display()),
            });
        }
        write_epoch(self.dir.path(), &self.epoch_path, &self.product, epoch)?;
        Ok(Hold {
            attempt: AttemptId {
                product: self.product.clone(),
                epoch,
            },
            dir: self.dir.clone(),
            lock_path: self.lock_path.clone(),
            epoch_path: self.epoch_path.clone(),
            lock_identity: identity,
            lock: Mutex::new(Some(lock)),
            released: AtomicBool::new(false),
        })
    }
}

fn file_identity(file: &File) -> std::io::Result<(u64, u64)> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

fn path_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|meta| (meta.dev(), meta.ino()))
}

fn read_epoch(path: &Path, product: &str) -> Result<u64, FenceError> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(unavailable(format!("{}: {error}", path.display()))),
    };
    let corrupt = |what: &str| FenceError::Corrupt {
        what: format!("{}: {what}", path.display()),
    };
    let mut bytes = Vec::new();
    file.take(MAX_EPOCH_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| unavailable(format!("{}: {error}", path.display())))?;
    let file: EpochFile = canonical::from_canonical_slice(&bytes, "epoch file")
        .map_err(|error| corrupt(&error.to_string()))?;
    if file.product != product {
        return Err(corrupt(&format!(
            "names product {:?}, not {product:?}",
            file.product
        )));
    }
    Ok(file.epoch)
}

/// The epoch file: `{"epoch": <last epoch handed out>, "product", "protocol"}`.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct EpochFile {
    #[serde(deserialize_with = "canonical::positive")]
    epoch: u64,
    product: String,
}
canonical::literal_fields!(EpochFile { "protocol": FENCE_PROTOCOL });

fn write_epoch(dir: &Path, path: &Path, product: &str, epoch: u64) -> Result<(), FenceError> {
    let file = EpochFile {
        epoch,
        product: product.to_owned(),
    };
    let bytes =
        canonical::to_canonical_bytes(&file).map_err(|error| unavailable(error.to_string()))?;
    let temporary = path.with_extension("epoch.tmp");
    let failed =
        |error: std::io::Error| unavailable(format!("writing {}: {error}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&temporary)
        .map_err(failed)?;
    file.write_all(&bytes).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(failed)?;
    private_dir::sync_dir(dir).map_err(failed)
}

/// One attempt's hold on a Product's fence. Ends on [`Hold::release`] or drop.
#[derive(Debug)]
pub struct Hold {
    attempt: AttemptId,
    dir: PrivateDir,
    lock_path: PathBuf,
    epoch_path: PathBuf,
    lock_identity: (u64, u64),
    lock: Mutex<Option<File>>,
    released: AtomicBool,
}

impl Hold {
    /// The attempt this hold is: its Product and epoch.
    pub fn attempt(&self) -> &AttemptId {
        &self.attempt
    }

    /// `Ok` while the hold is active; `released` once it has ended or can no longer be
    /// confirmed (the directory, the lock file or the epoch file changed under it).
    pub fn assert_active(&self) -> Result<(), FenceError> {
        let ended = |reason: String| FenceError::Released {
            attempt: self.attempt.clone(),
            reason,
        };
        if self.released.load(Ordering::SeqCst) {
            return Err(ended("the hold was released".into()));
        }
        self.dir.recheck().map_err(&ended)?;
        if path_identity(&self.lock_path) != Some(self.lock_identity) {
            return Err(ended(format!(
                "{} is no longer the locked file",
                self.lock_path.display()
            )));
        }
        match read_epoch(&self.epoch_path, &self.attempt.product) {
            Ok(epoch) if epoch == self.attempt.epoch => {}
            Ok(epoch) => {
                return Err(ended(format!(
                    "the fence is at epoch {epoch}, not this hold's {}",
                    self.attempt.epoch
                )));
            }
            Err(error) => return Err(ended(error.to_string())),
        }
        // Checked again last, so a release racing with this check is never reported active.
        if self.released.load(Ordering::SeqCst) {
            return Err(ended("the hold was released".into()));
        }
        Ok(())
    }

    /// Ends the hold: every later [`Hold::assert_active`] fails `released`, and the lock is
    /// given up so that the next attempt can take the fence. Idempotent.
    pub fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
        // Closing the descriptor drops the flock.
        drop(
            self.lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
    }

    /// Whether [`Hold::release`] was called.
    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().canonicalize().unwrap().join("fence");
        (dir, path)
    }

    #[test]
    fn one_holder_and_monotonic_epochs() {
        let (_dir, root) = root();
        let fence = Fence::open(&root, "product-1").unwrap();
        assert_eq!(fence.last_epoch().unwrap(), 0);
        let first = fence.acquire().unwrap();
        assert_eq!(first.attempt().epoch, 1);
        first.assert_active().unwrap();
        // A second open of the same fence (another open file description) is excluded too.
        let again = Fence::open(&root, "product-1").unwrap();
        assert_eq!(again.acquire().unwrap_err().code(), "busy");
        // Another Product is independent.
        let other = Fence::open(&root, "product-2").unwrap().acquire().unwrap();
        assert_eq!(other.attempt().epoch, 1);

        first.release();
        assert_eq!(first.assert_active().unwrap_err().code(), "released");
        let second = again.acquire().unwrap();
        assert_eq!(second.attempt().epoch, 2);
        drop(second);
        let third = fence.acquire().unwrap();
        assert_eq!(third.attempt().epoch, 3);
        assert_eq!(fence.last_epoch().unwrap(), 3);
    }

    #[test]
    fn a_superseded_or_replaced_hold_is_not_active() {
        let (_dir, root) = root();
        let fence = Fence::open(&root, "p").unwrap();
        let hold = fence.acquire().unwrap();
        // Someone rewrites the epoch file: the hold can no longer be confirmed.
        write_epoch(&root, &fence.epoch_path, "p", 9).unwrap();
        let error = hold.assert_active().unwrap_err();
        assert_eq!(error.code(), "released");
        write_epoch(&root, &fence.epoch_path, "p", 1).unwrap();
        hold.assert_active().unwrap();
        // The lock file replaced: not active.
        std::fs::remove_file(&fence.lock_path).unwrap();
        std::fs::write(&fence.lock_path, b"").unwrap();
        assert_eq!(hold.assert_active().unwrap_err().code(), "released");
    }

    #[test]
    fn corrupt_epoch_file_is_reported() {
        let (_dir, root) = root();
        let fence = Fence::open(&root, "p").unwrap();
        std::fs::write(
            &fence.epoch_path,
            br#"{"epoch":1,"product":"q","protocol":"sf-fence/1"}"#,
        )
        .unwrap();
        assert_eq!(fence.acquire().unwrap_err().code(), "corrupt");
        assert_eq!(
            Fence::open(&root, "bad id").unwrap_err().code(),
            "invalid-input"
        );
    }
}
