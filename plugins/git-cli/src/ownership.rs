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
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sf_contracts::git_object::object_header;
use sf_contracts::{EncodedObject, ObjectStoreError, RefName, StoreRoot};

use crate::errors::unavailable;
use crate::layout::{
    CHECKED_DIRECTORIES, CONFIG, HEAD, HEAD_LOCK, MARKER_MAX_BYTES, MARKER_NAME, TOP_LEVEL,
    is_layout_entry,
};

/// The most top-level entries examined: a root has at most six, so a huge directory is
/// refused without being read whole.
const TOP_LEVEL_SCAN_LIMIT: usize = 64;

/// The most entries of a fan-out directory searched for Git's temporary object name (a
/// concurrent Git's unfinished write, which is tolerated).
pub const FINALISATION_SEARCH_LIMIT: usize = 65_536;

/// Where alternates would graft foreign object databases onto this one.
const ALTERNATES: &[&str] = &["objects/info/alternates", "objects/info/http-alternates"];

/// The effective user id: the only owner a root, its files and its parent may have.
pub(crate) fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// `lstat`, with "absent" apart from "cannot be examined".
fn lstat(path: &Path) -> Result<Option<Metadata>, ObjectStoreError> {
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

/// The loose-object path of `object` in `root`: `objects/xx/<38 hex>`.
fn loose_path(root: &Path, object: &EncodedObject) -> (PathBuf, PathBuf) {
    let hex = object.id.to_hex();
    let (fan, rest) = hex.split_at(2);
    let dir = root.join("objects").join(fan);
    let file = dir.join(rest);
    (dir, file)
}

/// Checks the loose-object path each of `objects` will be written to: absent, or a regular
/// singly linked file of this user, or Git's own finalisation (see [`check_finalisation`]).
pub(crate) fn check_loose_objects(
    root: &Path,
    objects: &[&EncodedObject],
) -> Result<(), ObjectStoreError> {
    for object in objects {
        check_loose_object(root, object)?;
    }
    Ok(())
}

fn check_loose_object(root: &Path, object: &EncodedObject) -> Result<(), ObjectStoreError> {
    let (dir, path) = loose_path(root, object);
    match lstat(&dir)? {
        None => return Ok(()),
        Some(meta) if meta.file_type().is_dir() && meta.uid() == effective_uid() => {}
        Some(_) => {
            return Err(unavailable(
                &dir,
                "an object fan-out directory must be a directory of this user",
            ));
        }
    }
    let Some(meta) = lstat(&path)? else {
        return Ok(());
    };
    if !meta.file_type().is_file() || meta.uid() != effective_uid() {
        return Err(unavailable(
            &path,
            "a loose object must be a regular file of this user",
        ));
    }
    match meta.nlink() {
        1 => Ok(()),
        2 => check_finalisation(&dir, &path, &meta, object),
        _ => Err(unavailable(
            &path,
            "a loose object must have exactly one link",
        )),
    }
}

/// The one tolerated second link: a concurrent writer's Git has linked its `tmp_obj_*` file
/// to the object's name and not yet removed the temporary name. It passes only if the file
/// inflates to exactly the object's bytes and, counted after that read, its links are its own
/// name alone or its own name and a `tmp_obj_*` name in the same fan-out directory (or, when
/// the temporary name is gone by the time the directory is listed, its own name alone,
/// counted once more), every observation the same inode and this user's. Nothing is waited for, and the temporary name
/// is never opened or removed.
fn check_finalisation(
    dir: &Path,
    path: &Path,
    first: &Metadata,
    object: &EncodedObject,
) -> Result<(), ObjectStoreError> {
    let refuse = || {
        unavailable(
            path,
            "a loose object with a second link is tolerated only while Git finalises exactly \
             this object",
        )
    };
    let same = |meta: &Metadata| {
        meta.dev() == first.dev()
            && meta.ino() == first.ino()
            && meta.uid() == effective_uid()
            && meta.file_type().is_file()
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|_| refuse())?;
    let opened = file.metadata().map_err(|_| refuse())?;
    if !same(&opened) {
        return Err(refuse());
    }
    let mut expected = object_header(object.kind, object.body.len());
    expected.extend_from_slice(&object.body);
    if !inflates_to(file, &expected) {
        return Err(refuse());
    }
    let Some(after) = lstat(path)? else {
        return Err(refuse());
    };
    if !same(&after) {
        return Err(refuse());
    }
    match after.nlink() {
        1 => Ok(()),
        2 if has_temporary_link(dir, first)? => Ok(()),
        // Git may have removed the temporary name between the count and the listing: counted
        // again, the object's own name alone passes.
        2 => match lstat(path)? {
            Some(again) if same(&again) && again.nlink() == 1 => Ok(()),
            _ => Err(refuse()),
        },
        _ => Err(refuse()),
    }
}

/// Whether `file` is exactly one zlib stream that inflates to `expected`.
fn inflates_to(file: File, expected: &[u8]) -> bool {
    // Deflate never expands beyond stored blocks (5 bytes per 64 KiB) plus the zlib frame, so
    // a larger file cannot be this object; the cap bounds the read.
    let cap = expected.len() + expected.len() / 8 + 1024;
    let Some(raw) = read_capped(file, cap) else {
        return false;
    };
    let mut decoder = flate2::bufread::ZlibDecoder::new(raw.as_slice());
    let mut inflated = Vec::new();
    let limit = u64::try_from(expected.len())
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    if (&mut decoder)
        .take(limit)
        .read_to_end(&mut inflated)
        .is_err()
    {
        return false;
    }
    let consumed = usize::try_from(decoder.total_in()).unwrap_or(usize::MAX);
    inflated == expected && consumed == raw.len()
}

/// Whether `dir` holds a `tmp_obj_*` name that is the same inode as `object`, searching at
/// most [`FINALISATION_SEARCH_LIMIT`] entries.
fn has_temporary_link(dir: &Path, object: &Metadata) -> Result<bool, ObjectStoreError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|_| unavailable(dir, "an object fan-out directory cannot be listed"))?;
    for (count, entry) in entries.enumerate() {
        if count >= FINALISATION_SEARCH_LIMIT {
            return Ok(false);
        }
        let entry =
            entry.map_err(|_| unavailable(dir, "an object fan-out directory cannot be listed"))?;
        let name = entry.file_name();
        if !name.as_bytes().starts_with(b"tmp_obj_") {
            continue;
        }
        let Some(meta) = lstat(&dir.join(&name))? else {
            continue;
        };
        if meta.file_type().is_file()
            && meta.dev() == object.dev()
            && meta.ino() == object.ino()
            && meta.uid() == effective_uid()
        {
            return Ok(true);
        }
    }
    Ok(false)
}
