//! Keeping the number of packs bounded. Every `write_objects` keeps one pack, so without a
//! policy a root would hold one pack per seal, and every read would search every pack's
//! index. After a write leaves more than [`MAX_PACKS`] packs, the store rolls the small ones
//! up with `git repack --geometric=2 -d`: packs are merged until their sizes form a doubling
//! progression, so a roll-up reads the recent small packs and leaves the large base pack
//! alone, and the root holds a number of packs that grows with the logarithm of its size.
//!
//! Nothing stored is lost: a geometric roll-up packs every object of the packs it merges (and
//! every loose object of an older root), reachable or not, so the objects of a seal that has
//! not yet published its ref survive; Git writes and syncs the new pack before it removes the
//! merged ones. The roll-up takes `objects/info/sf-packs.lock` exclusively, and only if no
//! one holds it (it never waits: a busy lock means another write is under way, and that
//! write or a later one rolls up); every write holds the lock shared from the moment its pack
//! is handed to Git until its files were checked, so a roll-up never removes a pack whose
//! write is still checking it.

use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use sf_contracts::ObjectStoreError;

use crate::errors::{timeout, unavailable};
use crate::packs::FINALISATION_SEARCH_LIMIT;

/// The most packs a write leaves without rolling packs up.
pub const MAX_PACKS: usize = 32;

/// The lock writes share and a roll-up holds alone.
const LOCK: &str = "objects/info/sf-packs.lock";

/// How often a write that waits for a roll-up tries the lock again.
const LOCK_RETRY: Duration = Duration::from_millis(2);

/// The pack lock, held (shared or exclusively) until dropped.
pub(crate) struct PackLock {
    _lock: Flock<File>,
}

fn open_lock(root: &Path) -> Result<File, ObjectStoreError> {
    let path = root.join(LOCK);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|_| unavailable(&path, "the pack lock cannot be opened"))
}

/// Takes the pack lock shared, for a write: waits while a roll-up holds it, until `deadline`.
pub(crate) fn share(root: &Path, deadline: Instant) -> Result<PackLock, ObjectStoreError> {
    let mut file = open_lock(root)?;
    loop {
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(lock) => return Ok(PackLock { _lock: lock }),
            Err((back, Errno::EWOULDBLOCK)) => file = back,
            Err(_) => {
                return Err(unavailable(
                    &root.join(LOCK),
                    "the pack lock cannot be taken",
                ));
            }
        }
        if Instant::now() + LOCK_RETRY >= deadline {
            return Err(timeout("write_objects: waiting for a roll-up of packs"));
        }
        std::thread::sleep(LOCK_RETRY);
    }
}

/// Takes the pack lock exclusively if no one holds it; `None` when someone does.
pub(crate) fn try_alone(root: &Path) -> Result<Option<PackLock>, ObjectStoreError> {
    match Flock::lock(open_lock(root)?, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(PackLock { _lock: lock })),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err(_) => Err(unavailable(
            &root.join(LOCK),
            "the pack lock cannot be taken",
        )),
    }
}

/// Whether the root holds more than [`MAX_PACKS`] packs. A pack directory too large to list
/// within [`FINALISATION_SEARCH_LIMIT`] entries counts as over.
pub(crate) fn over_limit(root: &Path) -> Result<bool, ObjectStoreError> {
    let dir = root.join("objects/pack");
    let entries = std::fs::read_dir(&dir)
        .map_err(|_| unavailable(&dir, "the pack directory cannot be listed"))?;
    let mut packs = 0usize;
    for (count, entry) in entries.enumerate() {
        if count >= FINALISATION_SEARCH_LIMIT {
            return Ok(true);
        }
        let entry = entry.map_err(|_| unavailable(&dir, "the pack directory cannot be listed"))?;
        let name = entry.file_name();
        let name = name.as_bytes();
        if name.starts_with(b"pack-") && name.ends_with(b".pack") {
            packs += 1;
        }
    }
    Ok(packs > MAX_PACKS)
}
