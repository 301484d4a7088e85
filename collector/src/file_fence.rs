//! The file fence, the embedded default [`AttemptFence`]: one holder at a time per Product
//! among the processes of one machine, with a monotonic epoch per hold.
//!
//! A fence lives in a private directory of this user. For each Product it keeps two files,
//! named by the SHA-256 of the Product id: `<hex>.lock`, which a holder locks with `flock`
//! (exclusive; after a grace of [`LOCK_GRACE`] a second holder gets `busy`, in this process
//! or any other), and
//! `<hex>.epoch`, the canonical `{"epoch":N,"product":"…","protocol":"sf-fence/1"}` of the
//! last epoch handed out. Acquiring locks, reads the epoch, writes epoch + 1 durably (a
//! temporary file, fsync, rename, fsync of the directory) and returns a [`FileHold`] for that
//! epoch.
//!
//! [`FileHold::assert_active`] fails `released` once the hold has ended, and also when the
//! hold can no longer be confirmed (the lock file or the directory was replaced, or the epoch
//! file names another epoch): the backend's way of losing a hold. The kernel drops an `flock`
//! when its holder dies, so a killed holder never blocks the Product; the epoch it took is
//! never handed out again.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest};
use crate::contracts::AttemptId;
use crate::contracts::fence::{AttemptFence, FenceError, FenceHold, check_product};
use crate::private_dir::{self, PrivateDir};

/// The protocol string of the epoch file.
pub const FENCE_PROTOCOL: &str = "sf-fence/1";
const MAX_EPOCH_FILE_BYTES: u64 = 4096;
/// How long `acquire` keeps trying a lock that looks taken before it answers `busy`.
pub const LOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

fn unavailable(reason: impl Into<String>) -> FenceError {
    FenceError::Unavailable {
        reason: reason.into(),
    }
}

/// The file fence of every Product, in one fence directory.
#[derive(Debug)]
pub struct FileFence {
    dir: PrivateDir,
}

/// The two files of one Product's fence.
struct ProductFiles {
    product: String,
    lock_path: PathBuf,
    epoch_path: PathBuf,
}

impl FileFence {
    /// The fence directory `root`, which is created (0700) if absent and must be a private
    /// directory of this user. Touches no lock.
    pub fn open(root: &Path) -> Result<Self, FenceError> {
        let dir = PrivateDir::create_or_check(root).map_err(unavailable)?;
        Ok(Self { dir })
    }

    /// The directory the fence files live in.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The files of `product`'s fence, once its id is checked.
    fn files(&self, product: &str) -> Result<ProductFiles, FenceError> {
        check_product(product)?;
        self.dir.recheck().map_err(unavailable)?;
        let key = Digest::of(product.as_bytes()).hex();
        Ok(ProductFiles {
            product: product.to_owned(),
            lock_path: self.dir.path().join(format!("{key}.lock")),
            epoch_path: self.dir.path().join(format!("{key}.epoch")),
        })
    }

    /// The lock file of `product`'s fence (for tests that lose a hold by replacing it).
    pub fn lock_path(&self, product: &str) -> Result<PathBuf, FenceError> {
        Ok(self.files(product)?.lock_path)
    }
}

impl AttemptFence for FileFence {
    fn last_epoch(&self, product: &str) -> Result<u64, FenceError> {
        let files = self.files(product)?;
        read_epoch(&files.epoch_path, product)
    }

    fn acquire(&self, product: &str) -> Result<Box<dyn FenceHold>, FenceError> {
        let files = self.files(product)?;
        Ok(Box::new(files.acquire(&self.dir)?))
    }
}

impl ProductFiles {
    /// Takes the fence: `busy` if another hold is active. The new hold's epoch is one more
    /// than any handed out before, and is durable before this returns.
    fn acquire(&self, dir: &PrivateDir) -> Result<FileHold, FenceError> {
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
            // An exclusive flock, not waiting (the standard library's, on Linux).
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(error)) => {
                    return Err(unavailable(format!(
                        "locking {}: {error}",
                        self.lock_path.display()
                    )));
                }
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
        write_epoch(dir.path(), &self.epoch_path, &self.product, epoch)?;
        Ok(FileHold {
            attempt: AttemptId {
                product: self.product.clone(),
                epoch,
            },
            dir: dir.clone(),
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

/// One attempt's hold on a Product's file fence. Ends on release or drop.
#[derive(Debug)]
pub struct FileHold {
    attempt: AttemptId,
    dir: PrivateDir,
    lock_path: PathBuf,
    epoch_path: PathBuf,
    lock_identity: (u64, u64),
    lock: Mutex<Option<File>>,
    released: AtomicBool,
}

impl FileHold {
    /// Whether the hold is still confirmed: not released, the directory and the lock file
    /// the same, the epoch file at this hold's epoch.
    fn confirm(&self) -> Result<(), String> {
        if self.released.load(Ordering::SeqCst) {
            return Err("the hold was released".into());
        }
        self.dir.recheck()?;
        if path_identity(&self.lock_path) != Some(self.lock_identity) {
            return Err(format!(
                "{} is no longer the locked file",
                self.lock_path.display()
            ));
        }
        match read_epoch(&self.epoch_path, &self.attempt.product) {
            Ok(epoch) if epoch == self.attempt.epoch => {}
            Ok(epoch) => {
                return Err(format!(
                    "the fence is at epoch {epoch}, not this hold's {}",
                    self.attempt.epoch
                ));
            }
            Err(error) => return Err(error.to_string()),
        }
        // Checked again last, so a release racing with this check is never reported active.
        if self.released.load(Ordering::SeqCst) {
            return Err("the hold was released".into());
        }
        Ok(())
    }
}

impl FenceHold for FileHold {
    fn attempt(&self) -> &AttemptId {
        &self.attempt
    }

    /// `released` once the hold has ended or can no longer be confirmed; a hold that could
    /// not be confirmed once is released then (its lock given up), so it never comes back.
    fn assert_active(&self) -> Result<(), FenceError> {
        self.confirm().map_err(|reason| {
            self.release();
            FenceError::Released {
                attempt: self.attempt.to_string(),
                reason,
            }
        })
    }

    fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
        // Closing the descriptor drops the flock.
        drop(
            self.lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
    }
}

impl Drop for FileHold {
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
        let fence = FileFence::open(&root).unwrap();
        assert_eq!(fence.last_epoch("product-1").unwrap(), 0);
        let first = fence.acquire("product-1").unwrap();
        assert_eq!(first.attempt().epoch, 1);
        first.assert_active().unwrap();
        // A second open of the same fence (another open file description) is excluded too.
        let again = FileFence::open(&root).unwrap();
        assert_eq!(again.acquire("product-1").unwrap_err().code(), "busy");
        // Another Product is independent.
        let other = fence.acquire("product-2").unwrap();
        assert_eq!(other.attempt().epoch, 1);

        first.release();
        assert_eq!(first.assert_active().unwrap_err().code(), "released");
        let second = again.acquire("product-1").unwrap();
        assert_eq!(second.attempt().epoch, 2);
        drop(second);
        let third = fence.acquire("product-1").unwrap();
        assert_eq!(third.attempt().epoch, 3);
        assert_eq!(fence.last_epoch("product-1").unwrap(), 3);
    }

    #[test]
    fn a_superseded_hold_is_not_active_and_stays_so() {
        let (_dir, root) = root();
        let fence = FileFence::open(&root).unwrap();
        let hold = fence.acquire("p").unwrap();
        let files = fence.files("p").unwrap();
        // Someone rewrites the epoch file: the hold can no longer be confirmed.
        write_epoch(&root, &files.epoch_path, "p", 9).unwrap();
        assert_eq!(hold.assert_active().unwrap_err().code(), "released");
        // Put back, the hold is still over: a lost hold never comes back.
        write_epoch(&root, &files.epoch_path, "p", 1).unwrap();
        assert_eq!(hold.assert_active().unwrap_err().code(), "released");
        // And its lock was given up.
        let next = fence.acquire("p").unwrap();
        assert_eq!(next.attempt().epoch, 2);
        // The lock file replaced: not active.
        std::fs::remove_file(&files.lock_path).unwrap();
        std::fs::write(&files.lock_path, b"").unwrap();
        assert_eq!(next.assert_active().unwrap_err().code(), "released");
    }

    #[test]
    fn corrupt_epoch_file_is_reported() {
        let (_dir, root) = root();
        let fence = FileFence::open(&root).unwrap();
        let files = fence.files("p").unwrap();
        std::fs::write(
            &files.epoch_path,
            br#"{"epoch":1,"product":"q","protocol":"sf-fence/1"}"#,
        )
        .unwrap();
        assert_eq!(fence.acquire("p").unwrap_err().code(), "corrupt");
        assert_eq!(fence.acquire("bad id").unwrap_err().code(), "invalid-input");
    }
}
