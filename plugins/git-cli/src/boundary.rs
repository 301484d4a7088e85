//! History boundaries: the root's `shallow` file, Git's own list of commits whose parents a
//! repository does not hold. An imported base is such a commit; without the list, Git's
//! strict unpacking refuses it (its parents are missing) and `git log` stops at it with an
//! error.
//!
//! The file is optional. When present it is a regular file of this user with one link,
//! holding sorted, distinct lines of 40 lowercase hex digits and nothing else; any other
//! content makes the root unavailable, like any other file sf did not write. It only ever
//! grows: a new list is written beside the old one in `objects/info`, synced, and renamed over
//! it, under an exclusive lock, so a reader sees the old list or the new one, and two writers
//! never lose each other's boundaries.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};
use sf_contracts::ObjectStoreError;
use sf_contracts::git_object::ObjectId;

use crate::errors::unavailable;
use crate::layout::sync_dir;
use crate::ownership::effective_uid;

/// The file's name in the root, as Git reads it.
pub const SHALLOW_NAME: &str = "shallow";

/// The most boundaries a root holds.
pub const MAX_BOUNDARIES: usize = 100_000;

/// Where the next list is written before it is renamed into place, and the lock file.
const STAGING: &str = "objects/info/sf-shallow.new";
const LOCK: &str = "objects/info/sf-shallow.lock";

/// Reads the root's boundaries, checking the file's shape; an absent file is no boundary.
pub(crate) fn read_boundaries(root: &Path) -> Result<BTreeSet<ObjectId>, ObjectStoreError> {
    let path = root.join(SHALLOW_NAME);
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(_) => return Err(unavailable(&path, "must be a regular file, not a link")),
    };
    let meta = file
        .metadata()
        .map_err(|_| unavailable(&path, "cannot be examined"))?;
    if !meta.file_type().is_file() || meta.uid() != effective_uid() || meta.nlink() != 1 {
        return Err(unavailable(
            &path,
            "must be a regular file of this user with one link",
        ));
    }
    let cap = (MAX_BOUNDARIES * 41) as u64;
    let mut bytes = Vec::new();
    (&file)
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| unavailable(&path, "cannot be read"))?;
    parse(&bytes).ok_or_else(|| {
        unavailable(
            &path,
            "must hold sorted, distinct lines of 40 lowercase hex digits only",
        )
    })
}

fn parse(bytes: &[u8]) -> Option<BTreeSet<ObjectId>> {
    if bytes.len() > MAX_BOUNDARIES * 41 || (!bytes.is_empty() && !bytes.ends_with(b"\n")) {
        return None;
    }
    let mut ids = Vec::new();
    for line in bytes.split(|&b| b == b'\n').filter(|line| !line.is_empty()) {
        let text = std::str::from_utf8(line).ok()?;
        let id = ObjectId::parse_hex(text)?;
        if id.to_hex() != text {
            return None;
        }
        ids.push(id);
    }
    let set: BTreeSet<ObjectId> = ids.iter().copied().collect();
    let sorted = ids.windows(2).all(|pair| pair[0] < pair[1]);
    (sorted && set.len() == ids.len()).then_some(set)
}

fn encode(ids: &BTreeSet<ObjectId>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ids.len() * 41);
    for id in ids {
        bytes.extend_from_slice(id.to_hex().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// Adds `commits` to the root's boundaries; the caller has checked the root.
pub(crate) fn add_boundaries(root: &Path, commits: &[ObjectId]) -> Result<(), ObjectStoreError> {
    let lock_path = root.join(LOCK);
    let lock_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&lock_path)
        .map_err(|_| unavailable(&lock_path, "the boundary lock cannot be opened"))?;
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
        .map_err(|_| unavailable(&lock_path, "the boundary lock cannot be taken"))?;
    let mut boundaries = read_boundaries(root)?;
    let before = boundaries.len();
    boundaries.extend(commits.iter().copied());
    if boundaries.len() == before {
        return Ok(());
    }
    if boundaries.len() > MAX_BOUNDARIES {
        return Err(ObjectStoreError::InvalidInput {
            input: format!("{} history boundaries", boundaries.len()),
            rule: "a root holds at most 100000 history boundaries",
        });
    }
    let staging = root.join(STAGING);
    match std::fs::remove_file(&staging) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(_) => return Err(unavailable(&staging, "a stale list cannot be removed")),
    }
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&staging)
        .and_then(|mut file: File| {
            file.write_all(&encode(&boundaries))?;
            file.sync_all()
        });
    written.map_err(|_| unavailable(&staging, "the new boundary list cannot be written"))?;
    std::fs::rename(&staging, root.join(SHALLOW_NAME))
        .map_err(|_| unavailable(root, "the boundary list cannot be put in place"))?;
    sync_dir(root).map_err(|_| unavailable(root, "the root could not be synced"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_exact() {
        let a = ObjectId::from_bytes([0xab; 20]);
        let b = ObjectId::from_bytes([0xcd; 20]);
        let both: BTreeSet<ObjectId> = [a, b].into_iter().collect();
        assert_eq!(parse(&encode(&both)), Some(both.clone()));
        assert_eq!(parse(b""), Some(BTreeSet::new()));
        let text = String::from_utf8(encode(&both)).unwrap();
        for bad in [
            text.trim_end().to_owned(),
            text.to_uppercase(),
            format!("{}{}", &text[41..], &text[..41]),
            format!("{text}{}", &text[..41]),
            format!("{text}x\n"),
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
