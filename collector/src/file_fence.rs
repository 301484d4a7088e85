//! The file fence, the embedded default [`AttemptFence`]: one holder at a time per Candidate
//! of a Product among the processes of one machine, with a monotonic epoch per hold.
//!
//! A fence lives in a private directory of this user. Its files are named by the SHA-256 of
//! what they serve, and each name has two: `<hex>.lock`, which is locked with `flock`
//! (exclusive), and `<hex>.epoch`, the canonical
//! `{"epoch":N,"product":"…","protocol":"sf-fence/1"}` of the last epoch handed out under that
//! name.
//!
//! - A Product's counter, named by the Product id: its lock is held only while the next epoch
//!   is read and written (a temporary file, fsync, rename, fsync of the directory), so that
//!   the epochs of all the Product's Candidates are one sequence;
//! - a Candidate's hold, named by [`candidate_key`] (`PRODUCT@sha256:…`): its lock is held for
//!   as long as the hold (after a grace of [`LOCK_GRACE`] a second holder gets `busy`, in this
//!   process or any other), and its epoch file names the epoch of the newest hold.
//!
//! Acquiring locks the Candidate's hold, takes the next epoch from the Product's counter, and
//! writes it to the hold's epoch file before returning a [`FileHold`] for it.
//! [`FileHold::assert_active`] fails `released` once the hold has ended, and also when the
//! hold can no longer be confirmed (the lock file or the directory was replaced, or the hold's
//! epoch file names another epoch): the backend's way of losing a hold. The kernel drops an
//! `flock` when its holder dies, so a killed holder never blocks its Candidate; the epoch it
//! took is never handed out again.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest};
use crate::contracts::AttemptId;
use crate::contracts::fence::{AttemptFence, FenceError, FenceHold, candidate_key, check_product};
use crate::private_dir::{self, PrivateDir};

/// The protocol string of the epoch file.
pub const FENCE_PROTOCOL: &str = "sf-fence/1";
const MAX_EPOCH_FILE_BYTES: u64 = 4096;
/// How long `acquire` keeps trying a hold's lock that looks taken before it answers `busy`.
pub const LOCK_GRACE: Duration = Duration::from_millis(250);
/// How long `acquire` waits for a Product's counter: held for two writes by each acquirer,
/// so it is longer than the grace only where many Candidates of a Product start at once (or
/// where an sf that kept it for a whole attempt still runs).
const COUNTER_GRACE: Duration = Duration::from_secs(5);

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

/// The two files of one name in the fence: a Product's counter or a Candidate's hold.
struct Named {
    /// What the files serve: the Product id, or the Candidate's [`candidate_key`].
    name: String,
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

    /// The files of `name`, once the directory is checked.
    fn named(&self, name: &str) -> Result<Named, FenceError> {
        self.dir.recheck().map_err(unavailable)?;
        let key = Digest::of(name.as_bytes()).hex();
        Ok(Named {
            name: name.to_owned(),
            lock_path: self.dir.path().join(format!("{key}.lock")),
            epoch_path: self.dir.path().join(format!("{key}.epoch")),
        })
    }

    /// The lock file of the hold of Candidate `candidate` of `product` (for tests that lose a
    /// hold by replacing it).
    pub fn lock_path(&self, product: &str, candidate: &Digest) -> Result<PathBuf, FenceError> {
        check_product(product)?;
        Ok(self.named(&candidate_key(product, candidate))?.lock_path)
    }

    /// The next epoch of `product`, written to its counter under the counter's lock.
    fn next_epoch(&self, product: &str) -> Result<u64, FenceError> {
        let counter = self.named(product)?;
        let _locked = counter.lock(COUNTER_GRACE, product)?;
        let epoch = read_epoch(&counter.epoch_path, product)? + 1;
        if epoch > canonical::MAX_SAFE_INTEGER as u64 {
            return Err(FenceError::Corrupt {
                what: format!("{} is at the last epoch", counter.epoch_path.display()),
            });
        }
        write_epoch(self.dir.path(), &counter.epoch_path, product, epoch)?;
        Ok(epoch)
    }
}

impl AttemptFence for FileFence {
    fn last_epoch(&self, product: &str) -> Result<u64, FenceError> {
        check_product(product)?;
        read_epoch(&self.named(product)?.epoch_path, product)
    }

    fn acquire(&self, product: &str, candidate: &Digest) -> Result<Box<dyn FenceHold>, FenceError> {
        check_product(product)?;
        let hold = self.named(&candidate_key(product, candidate))?;
        let (lock, lock_identity) = hold.lock(LOCK_GRACE, &hold.name)?;
        let epoch = self.next_epoch(product)?;
        write_epoch(self.dir.path(), &hold.epoch_path, &hold.name, epoch)?;
        Ok(Box::new(FileHold {
            attempt: AttemptId {
                product: product.to_owned(),
                epoch,
            },
            dir: self.dir.clone(),
            name: hold.name,
            lock_path: hold.lock_path,
            epoch_path: hold.epoch_path,
            lock_identity,
            lock: Mutex::new(Some(lock)),
            released: AtomicBool::new(false),
        }))
    }
}

impl Named {
    /// Locks the lock file: `busy` (naming `busy_name`) if it is still taken after `grace`.
    /// Answers the locked file and its identity; closing the file unlocks it.
    fn lock(&self, grace: Duration, busy_name: &str) -> Result<(File, (u64, u64)), FenceError> {
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
        // descriptor (until its exec closes them), and with it any flock on them: a lock
        // released an instant ago can look taken. A short grace absorbs that; a real holder
        // is still `busy` after it.
        let until = std::time::Instant::now() + grace;
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
            if std::time::Instant::now() >= until {
                return Err(FenceError::Busy {
                    product: busy_name.to_owned(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
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
        Ok((lock, identity))
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

/// The last epoch handed out under `name` (0 before the first).
fn read_epoch(path: &Path, name: &str) -> Result<u64, FenceError> {
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
    if file.product != name {
        return Err(corrupt(&format!("names {:?}, not {name:?}", file.product)));
    }
    Ok(file.epoch)
}

/// The epoch file: `{"epoch": <last epoch handed out>, "product", "protocol"}`, where
/// `product` is the name the file serves (a Product id, or a Candidate's [`candidate_key`]).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct EpochFile {
    #[serde(deserialize_with = "canonical::positive")]
    epoch: u64,
    product: String,
}
canonical::literal_fields!(EpochFile { "protocol": FENCE_PROTOCOL });

fn write_epoch(dir: &Path, path: &Path, name: &str, epoch: u64) -> Result<(), FenceError> {
    let file = EpochFile {
        epoch,
        product: name.to_owned(),
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

/// One attempt's hold on the file fence of a Candidate of a Product. Ends on release or drop.
#[derive(Debug)]
pub struct FileHold {
    attempt: AttemptId,
    dir: PrivateDir,
    /// The Candidate's [`candidate_key`], which its epoch file names.
    name: String,
    lock_path: PathBuf,
    epoch_path: PathBuf,
    lock_identity: (u64, u64),
    lock: Mutex<Option<File>>,
    released: AtomicBool,
}

impl FileHold {
    /// Whether the hold is still confirmed: not released, the directory and the lock file
    /// the same, the hold's epoch file at this hold's epoch.
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
        match read_epoch(&self.epoch_path, &self.name) {
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

    fn candidate(name: &str) -> Digest {
        Digest::of(name.as_bytes())
    }

    #[test]
    fn one_holder_per_candidate_and_one_sequence_of_epochs_per_product() {
        let (_dir, root) = root();
        let fence = FileFence::open(&root).unwrap();
        let (a, b) = (candidate("a"), candidate("b"));
        assert_eq!(fence.last_epoch("product-1").unwrap(), 0);
        let first = fence.acquire("product-1", &a).unwrap();
        assert_eq!(first.attempt().epoch, 1);
        first.assert_active().unwrap();
        // A second open of the same fence (another open file description) is excluded too.
        let again = FileFence::open(&root).unwrap();
        assert_eq!(again.acquire("product-1", &a).unwrap_err().code(), "busy");
        // Another Candidate of the Product is held at once, with the Product's next epoch,
        // and neither hold disturbs the other.
        let beside = again.acquire("product-1", &b).unwrap();
        assert_eq!(beside.attempt().epoch, 2);
        first.assert_active().unwrap();
        beside.assert_active().unwrap();
        // Another Product is independent.
        let other = fence.acquire("product-2", &a).unwrap();
        assert_eq!(other.attempt().epoch, 1);

        first.release();
        assert_eq!(first.assert_active().unwrap_err().code(), "released");
        let second = again.acquire("product-1", &a).unwrap();
        assert_eq!(second.attempt().epoch, 3);
        drop(second);
        let third = fence.acquire("product-1", &a).unwrap();
        assert_eq!(third.attempt().epoch, 4);
        assert_eq!(fence.last_epoch("product-1").unwrap(), 4);
        beside.assert_active().unwrap();
    }

    #[test]
    fn a_superseded_hold_is_not_active_and_stays_so() {
        let (_dir, root) = root();
        let fence = FileFence::open(&root).unwrap();
        let a = candidate("a");
        let hold = fence.acquire("p", &a).unwrap();
        let files = fence.named(&candidate_key("p", &a)).unwrap();
        // Someone rewrites the hold's epoch file: the hold can no longer be confirmed.
        write_epoch(&root, &files.epoch_path, &files.name, 9).unwrap();
        assert_eq!(hold.assert_active().unwrap_err().code(), "released");
        // Put back, the hold is still over: a lost hold never comes back.
        write_epoch(&root, &files.epoch_path, &files.name, 1).unwrap();
        assert_eq!(hold.assert_active().unwrap_err().code(), "released");
        // And its lock was given up.
        let next = fence.acquire("p", &a).unwrap();
        assert_eq!(next.attempt().epoch, 2);
        // The lock file replaced: not active.
        let lock = fence.lock_path("p", &a).unwrap();
        std::fs::remove_file(&lock).unwrap();
        std::fs::write(&lock, b"").unwrap();
        assert_eq!(next.assert_active().unwrap_err().code(), "released");
    }

    #[test]
    fn a_counter_held_by_a_whole_attempt_is_busy() {
        // An sf from before holds were per Candidate keeps the Product's lock for a whole
        // attempt: a Candidate's acquire waits for it, then is `busy`, holding nothing.
        let (_dir, root) = root();
        let fence = FileFence::open(&root).unwrap();
        let counter = fence.named("p").unwrap();
        let (_old, _) = counter.lock(LOCK_GRACE, "p").unwrap();
        let a = candidate("a");
        assert_eq!(fence.acquire("p", &a).unwrap_err().code(), "busy");
        drop(_old);
        assert_eq!(fence.acquire("p", &a).unwrap().attempt().epoch, 1);
    }

    #[test]
    fn corrupt_epoch_file_is_reported() {
        let (_dir, root) = root();
        let fence = FileFence::open(&root).unwrap();
        let files = fence.named("p").unwrap();
        std::fs::write(
            &files.epoch_path,
            br#"{"epoch":1,"product":"q","protocol":"sf-fence/1"}"#,
        )
        .unwrap();
        let a = candidate("a");
        assert_eq!(fence.acquire("p", &a).unwrap_err().code(), "corrupt");
        assert_eq!(
            fence.acquire("bad id", &a).unwrap_err().code(),
            "invalid-input"
        );
    }
}
