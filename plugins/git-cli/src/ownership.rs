//! The ownership check: is the root on disk still exactly the one this store created?
//!
//! It runs at the start of every trait method, before every Git process starts and again
//! after the process ends, before its result is accepted. It examines
//! with `lstat` and `O_NOFOLLOW` so that a symlink is never followed, and it never opens,
//! removes or waits for anything Git itself might be holding. Whatever cannot be examined
//! refuses as `unavailable`.

use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use sf_contracts::{ObjectStoreError, RefName, StoreRoot};

use crate::errors::unavailable;
use crate::layout::{
    CHECKED_DIRECTORIES, CONFIG, HEAD, HEAD_LOCK, MARKER_MAX_BYTES, MARKER_NAME, TOP_LEVEL,
    is_layout_entry,
};

/// The most top-level entries examined: a root has at most six, so a huge directory is
/// refused without being read whole.
const TOP_LEVEL_SCAN_LIMIT: usize = 64;

/// Where alternates would graft foreign object databases onto this one.
const ALTERNATES: &[&str] = &["objects/info/alternates", "objects/info/http-alternates"];

/// The effective user id: the only owner a root, its files and its parent may have.
pub(crate) fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// `lstat`, with "absent" apart from "cannot be examined".
pub(crate) fn lstat(path: &Path) -> Result<Option<Metadata>, ObjectStoreError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(_) => Err(unavailable(path, "cannot be examined")),
    }
}

/// A regular file of this user with a single link, read whole up to `cap` bytes. Opened with
/// `O_NOFOLLOW` (a symlink fails to open) and `O_NONBLOCK` (a FIFO cannot stall the open);
/// `None` when absent.
pub(crate) fn read_own_file(path: &Path, cap: usize) -> Result<Option<Vec<u8>>, ObjectStoreError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(_) => {
            return Err(unavailable(
                path,
                "must be a regular file that can be opened without following a symlink",
            ));
        }
    };
    let meta = file
        .metadata()
        .map_err(|_| unavailable(path, "cannot be examined"))?;
    if !meta.file_type().is_file() {
        return Err(unavailable(path, "must be a regular file"));
    }
    if meta.uid() != effective_uid() {
        return Err(unavailable(path, "must be owned by this user"));
    }
    if meta.nlink() != 1 {
        return Err(unavailable(path, "must have exactly one link"));
    }
    read_capped(file, cap)
        .map(Some)
        .ok_or_else(|| unavailable(path, format!("must be readable and at most {cap} bytes")))
}

/// Reads `file` whole if it holds at most `cap` bytes.
fn read_capped(file: File, cap: usize) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(cap).ok()?.saturating_add(1);
    file.take(limit).read_to_end(&mut bytes).ok()?;
    (bytes.len() <= cap).then_some(bytes)
}

/// Requires `path` to be a real directory (not a symlink) of this user.
fn require_own_dir(path: &Path) -> Result<(), ObjectStoreError> {
    match lstat(path)? {
        None => Err(unavailable(path, "must exist")),
        Some(meta) if !meta.file_type().is_dir() => Err(unavailable(
            path,
            "must be a directory, not a symlink or a file",
        )),
        Some(meta) if meta.uid() != effective_uid() => {
            Err(unavailable(path, "must be owned by this user"))
        }
        Some(_) => Ok(()),
    }
}

/// Requires the file `name` in the root to hold exactly `expected`.
fn require_exact_file(root: &Path, name: &str, expected: &[u8]) -> Result<(), ObjectStoreError> {
    let path = root.join(name);
    let cap = expected.len().max(MARKER_MAX_BYTES);
    match read_own_file(&path, cap)? {
        None => Err(unavailable(&path, "must exist")),
        Some(bytes) if bytes != expected => Err(unavailable(
            &path,
            "must hold exactly the bytes this store wrote",
        )),
        Some(_) => Ok(()),
    }
}

/// Git's own `HEAD.lock`, tolerated only as an empty regular file of this user with at most
/// one link, or already gone. It is never opened, removed or waited for.
fn check_head_lock(root: &Path) -> Result<(), ObjectStoreError> {
    let path = root.join(HEAD_LOCK);
    match lstat(&path)? {
        None => Ok(()),
        Some(meta)
            if meta.file_type().is_file()
                && meta.uid() == effective_uid()
                && meta.len() == 0
                && meta.nlink() <= 1 =>
        {
            Ok(())
        }
        Some(_) => Err(unavailable(
            &path,
            "HEAD.lock is tolerated only as Git's own empty, singly linked lock of this user",
        )),
    }
}

/// Checks the whole root: identity, owner, mode, canonical path, exact top-level layout, and
/// byte-identical config, HEAD and (when `marker` is `Some`) marker. `None` means the root is
/// unmarked and the marker must be absent.
pub(crate) fn check_root(root: &StoreRoot, marker: Option<&[u8]>) -> Result<(), ObjectStoreError> {
    let path = root.path.as_path();
    let Some(meta) = lstat(path)? else {
        return Err(unavailable(
            path,
            "the root is missing; it is never recreated",
        ));
    };
    if !meta.file_type().is_dir() {
        return Err(unavailable(
            path,
            "the root must be a directory, not a symlink or a file",
        ));
    }
    if meta.dev() != root.dev || meta.ino() != root.ino {
        return Err(unavailable(
            path,
            "the root was replaced: its device and inode differ from the recorded ones",
        ));
    }
    if meta.uid() != effective_uid() {
        return Err(unavailable(path, "the root must be owned by this user"));
    }
    if meta.mode() & 0o7777 != 0o700 {
        return Err(unavailable(path, "the root's mode must be exactly 0700"));
    }
    match std::fs::canonicalize(path) {
        Ok(canonical) if canonical == path => {}
        Ok(_) => return Err(unavailable(path, "the root's path must be canonical")),
        Err(_) => return Err(unavailable(path, "the root's path cannot be resolved")),
    }
    check_top_level(path, marker.is_some())?;
    require_exact_file(path, "config", CONFIG)?;
    require_exact_file(path, "HEAD", HEAD)?;
    if let Some(marker) = marker {
        require_exact_file(path, MARKER_NAME, marker)?;
    }
    for dir in CHECKED_DIRECTORIES {
        require_own_dir(&path.join(dir))?;
    }
    for name in ALTERNATES {
        let alternates = path.join(name);
        if lstat(&alternates)?.is_some() {
            return Err(unavailable(
                &alternates,
                "a root borrows objects from no other repository",
            ));
        }
    }
    Ok(())
}

/// The top level holds exactly the layout (with the marker iff marked), plus at most Git's
/// own `HEAD.lock`.
fn check_top_level(path: &Path, marked: bool) -> Result<(), ObjectStoreError> {
    let entries =
        std::fs::read_dir(path).map_err(|_| unavailable(path, "the root cannot be listed"))?;
    let mut seen = 0usize;
    for (count, entry) in entries.enumerate() {
        if count >= TOP_LEVEL_SCAN_LIMIT {
            return Err(unavailable(path, "the root holds too many entries"));
        }
        let entry = entry.map_err(|_| unavailable(path, "the root cannot be listed"))?;
        let name = entry.file_name();
        if is_layout_entry(&name, marked) {
            seen += 1;
        } else if name == OsStr::new(HEAD_LOCK) {
            check_head_lock(path)?;
        } else if name == OsStr::new(crate::boundary::SHALLOW_NAME) {
            crate::boundary::read_boundaries(path)?;
        } else if !marked && name == OsStr::new(MARKER_NAME) {
            return Err(unavailable(
                &path.join(&name),
                "an unmarked root holds no marker",
            ));
        } else {
            return Err(unavailable(
                &path.join(&name),
                "the root holds only HEAD, config, objects, refs, the marker and its history \
                 boundaries (shallow)",
            ));
        }
    }
    let expected = TOP_LEVEL.len() + usize::from(marked);
    if seen != expected {
        return Err(unavailable(
            path,
            "the root is missing an entry of its layout (HEAD, config, objects, refs, marker)",
        ));
    }
    Ok(())
}

/// What occupies a ref's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefSlot {
    /// Nothing: the ref is absent.
    Absent,
    /// A regular, singly linked file of this user: the ref exists (its content is Git's to
    /// judge).
    File,
    /// A ref cannot live here: a component is a ref file, or the name is a directory of refs.
    Blocked(&'static str),
}

/// Examines every existing component of `refs/...` up to `name` and the ref file itself.
/// A symlink, a foreign owner, a hard link or any other kind refuses as unavailable.
pub(crate) fn check_ref_path(root: &Path, name: &RefName) -> Result<RefSlot, ObjectStoreError> {
    let segments: Vec<&str> = name.as_str().split('/').collect();
    let Some((last, parents)) = segments.split_last() else {
        return Ok(RefSlot::Absent);
    };
    let mut path = root.to_path_buf();
    for segment in parents {
        path.push(segment);
        match lstat(&path)? {
            None => return Ok(RefSlot::Absent),
            Some(meta) if meta.uid() != effective_uid() => {
                return Err(unavailable(
                    &path,
                    "a ref directory must be owned by this user",
                ));
            }
            Some(meta) if meta.file_type().is_dir() => {}
            Some(meta) if meta.file_type().is_file() => {
                return Ok(RefSlot::Blocked(
                    "a ref name may not extend an existing ref",
                ));
            }
            Some(_) => {
                return Err(unavailable(
                    &path,
                    "a ref directory must be a directory, not a symlink",
                ));
            }
        }
    }
    path.push(last);
    match lstat(&path)? {
        None => Ok(RefSlot::Absent),
        Some(meta) if meta.uid() != effective_uid() => {
            Err(unavailable(&path, "a ref file must be owned by this user"))
        }
        Some(meta) if meta.file_type().is_file() && meta.nlink() == 1 => Ok(RefSlot::File),
        Some(meta) if meta.file_type().is_dir() => Ok(RefSlot::Blocked(
            "a ref name may not name a directory of other refs",
        )),
        Some(_) => Err(unavailable(
            &path,
            "a ref file must be a regular file with exactly one link",
        )),
    }
}
