//! What a stored environment's tree looked like when it was last re-hashed whole: one stamp
//! per entry (device, inode, mode, owner, size, modification and change times to the
//! nanosecond), so that the next verification of an unchanged tree lists it instead of
//! re-hashing every byte.
//!
//! A stamp document is only ever written after a full re-hash found the tree to be its
//! digest, and only when the tree's stamps taken before that re-hash and after it are equal
//! (nothing changed while it was read). A verification whose walk gives exactly the recorded
//! document skips the re-hash; any difference at all (a file written, even one whose
//! modification time was put back: the kernel moves its change time, which no caller can
//! set; a mode, an owner, an entry added, removed or replaced, a document that is missing,
//! unreadable or not this user's) sends it to the full re-hash, which is the authority: it
//! finds the tree `corrupt` or records its stamps again. What a stamp cannot see is a change
//! made below the file system (a block device written directly, a disk that rots); the full
//! re-hash of `sf env show` (by name or digest) and of every add of the same tree still does.
//! Only the verification before a run ([`crate::environment_store::EnvironmentStore::verify_for_use`])
//! reads the stamps.
//!
//! The documents live in the store's `stamps/` (0700), `stamps/<hex>` (0444), outside the
//! objects, which stay exactly as published.

use std::ffi::OsStr;

use crate::canonical::Digest;
use crate::dir_fd::{DirFd, DirFdError, EntryKind};
use crate::environment_store::{euid, make_dir};

/// The first line of a stamp document.
const STAMPS_PROTOCOL: &str = "sf-environment-stamps/1";
/// The largest stamp document read (a line is about 100 bytes; a tree holds at most a few
/// million entries).
const MAX_STAMPS_BYTES: u64 = 1 << 30;
/// The most entries one directory is listed with (the listing's own limits are checked by
/// the re-hash; a tree with a larger directory is not stamped, and always re-hashed).
const MAX_DIRECTORY_ENTRIES: usize = 1 << 20;

/// The stamp document of the tree open at `tree`: the protocol line, the tree's own
/// directory, then every entry below it in walk order (depth first, by name bytes).
pub(crate) fn take(tree: &DirFd) -> Result<String, DirFdError> {
    let stat = tree.stat()?;
    let mut text = format!(
        "{STAMPS_PROTOCOL}\n. {} {} {:o} {} {}.{:09} {}.{:09}\n",
        stat.st_dev,
        stat.st_ino,
        stat.st_mode & 0o7777,
        stat.st_uid,
        stat.st_mtime,
        stat.st_mtime_nsec,
        stat.st_ctime,
        stat.st_ctime_nsec
    );
    walk(tree, &mut text)?;
    Ok(text)
}

fn walk(tree: &DirFd, text: &mut String) -> Result<(), DirFdError> {
    let lines = tree.walk_map(MAX_DIRECTORY_ENTRIES, &|_, path, entry| {
        let kind = match entry.kind {
            EntryKind::Directory => 'd',
            EntryKind::File => 'f',
            EntryKind::Symlink => 'l',
            EntryKind::Other => 'o',
        };
        // The path last: names hold no newline (the listing's rules), and a stamp line is
        // compared whole, never parsed.
        Ok(format!("{kind} {} {path}\n", entry.stamp()))
    })?;
    text.extend(lines);
    Ok(())
}

/// The document recorded for `digest` in the store at `root`, or `None` when there is none
/// that this user wrote and no one else can change (then the tree is re-hashed).
pub(crate) fn recorded(root: &DirFd, digest: &Digest) -> Option<String> {
    let stamps = root.open_dir_named(OsStr::new("stamps")).ok()?;
    let name = digest.hex();
    let entry = stamps.entry(OsStr::new(&name)).ok()??;
    if entry.kind != EntryKind::File || entry.uid != euid() || entry.mode & 0o022 != 0 {
        return None;
    }
    let read = stamps.read_file(&entry, MAX_STAMPS_BYTES).ok()?;
    String::from_utf8(read.bytes).ok()
}

/// Records `document` for `digest` after a full re-hash verified it, replacing whatever was
/// there. Best effort: a document that cannot be written costs the next verification a
/// re-hash, nothing else, so its errors are dropped.
pub(crate) fn record(root: &DirFd, digest: &Digest, document: &str) {
    if recorded(root, digest).as_deref() == Some(document) {
        return;
    }
    let Ok(stamps) = make_dir(root, OsStr::new("stamps"), 0o700) else {
        return;
    };
    let name = digest.hex();
    let name = OsStr::new(&name);
    // Whatever is there (an older state of the tree, a document not believed) is replaced. A
    // verification racing this one at worst finds no document, or another's, and re-hashes.
    if stamps.remove_tree(name).is_ok() {
        let _ = stamps.write_once(name, document.as_bytes(), 0o444);
    }
}
