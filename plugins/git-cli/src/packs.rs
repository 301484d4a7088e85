//! The files one object write leaves: a pack, its index and its reverse index, under the name
//! Git gives them, which is the pack's own trailing checksum. The store builds the pack, so it
//! knows that name before Git runs, and checks exactly those files before and after: the
//! cost is three `lstat`s whatever the number of objects, and no other file of the object
//! database is examined.
//!
//! A pack file is well-shaped when it is a regular file of this user that no one else can
//! write, singly linked. One second link is tolerated, exactly and only while a concurrent
//! identical write finishes: Git links its `tmp_pack_*` (`tmp_idx_*`, `tmp_rev_*`) file to the
//! final name and then removes the temporary one, so the second name must be that temporary
//! name in `objects/pack`, the same inode. Nothing is waited for, and the temporary name is
//! never opened or removed.

use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sf_contracts::ObjectStoreError;

use crate::errors::unavailable;
use crate::ownership::{effective_uid, lstat};

/// The most entries of `objects/pack` searched for Git's temporary name of a pack file being
/// finalised by a concurrent write.
pub const FINALISATION_SEARCH_LIMIT: usize = 65_536;

/// The files Git writes for one pack, with the prefix of each one's temporary name.
const PACK_FILES: &[(&str, &str)] = &[
    ("pack", "tmp_pack_"),
    ("idx", "tmp_idx_"),
    ("rev", "tmp_rev_"),
];

/// The files a pack must have once written; the reverse index is Git's choice.
const REQUIRED: &[&str] = &["pack", "idx"];

/// One pack as the store encoded it: its name (the trailer, in hex) and its length.
#[derive(Debug, Clone)]
pub(crate) struct PackSlot {
    name: String,
    len: u64,
}

impl PackSlot {
    /// The slot of `pack`, a complete pack whose last 20 bytes are its checksum.
    pub(crate) fn of(pack: &[u8]) -> Self {
        let trailer = &pack[pack.len().saturating_sub(20)..];
        Self {
            name: hex::encode(trailer),
            len: pack.len() as u64,
        }
    }

    /// The name Git gives the pack (40 hex digits).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn path(&self, root: &Path, extension: &str) -> PathBuf {
        root.join("objects/pack")
            .join(format!("pack-{}.{extension}", self.name))
    }

    /// Before the write: each file Git may write for this pack is absent or well-shaped (an
    /// earlier identical write, say).
    pub(crate) fn check_before(&self, root: &Path) -> Result<(), ObjectStoreError> {
        for (extension, temporary) in PACK_FILES {
            let path = self.path(root, extension);
            if let Some(meta) = lstat(&path)? {
                self.check_file(root, &path, extension, temporary, &meta)?;
            }
        }
        Ok(())
    }

    /// After the write: the pack and its index are present and well-shaped, the pack exactly
    /// as long as the one written; the reverse index absent or well-shaped.
    pub(crate) fn check_after(&self, root: &Path) -> Result<(), ObjectStoreError> {
        for (extension, temporary) in PACK_FILES {
            let path = self.path(root, extension);
            match lstat(&path)? {
                Some(meta) => self.check_file(root, &path, extension, temporary, &meta)?,
                None if REQUIRED.contains(extension) => {
                    return Err(unavailable(&path, "Git did not keep the pack it was given"));
                }
                None => {}
            }
        }
        Ok(())
    }

    fn check_file(
        &self,
        root: &Path,
        path: &Path,
        extension: &str,
        temporary: &str,
        meta: &Metadata,
    ) -> Result<(), ObjectStoreError> {
        if !meta.file_type().is_file() || meta.uid() != effective_uid() {
            return Err(unavailable(
                path,
                "a pack file must be a regular file of this user",
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(unavailable(
                path,
                "a pack file must not be writable by group or others",
            ));
        }
        // The name is the checksum of the pack's bytes: a file of another length under it
        // is not the pack this store wrote.
        if extension == "pack" && meta.len() != self.len {
            return Err(unavailable(
                path,
                "a pack under this name holds other bytes than the pack written",
            ));
        }
        match meta.nlink() {
            1 => Ok(()),
            2 if finalising(&root.join("objects/pack"), path, temporary, meta)? => Ok(()),
            _ => Err(unavailable(
                path,
                "a pack file must have exactly one link (a second one only while Git \
                 finalises this very file)",
            )),
        }
    }
}

/// Whether the second link of `path` is Git's temporary name (`temporary*` in `dir`, the same
/// inode), or is gone by the time it is looked for (counted again: one link).
fn finalising(
    dir: &Path,
    path: &Path,
    temporary: &str,
    first: &Metadata,
) -> Result<bool, ObjectStoreError> {
    let same = |meta: &Metadata| {
        meta.dev() == first.dev()
            && meta.ino() == first.ino()
            && meta.uid() == effective_uid()
            && meta.file_type().is_file()
    };
    let entries = std::fs::read_dir(dir)
        .map_err(|_| unavailable(dir, "the pack directory cannot be listed"))?;
    for (count, entry) in entries.enumerate() {
        if count >= FINALISATION_SEARCH_LIMIT {
            return Ok(false);
        }
        let entry = entry.map_err(|_| unavailable(dir, "the pack directory cannot be listed"))?;
        let name = entry.file_name();
        if !name.as_bytes().starts_with(temporary.as_bytes()) {
            continue;
        }
        if lstat(&dir.join(&name))?.is_some_and(|meta| same(&meta)) {
            return Ok(true);
        }
    }
    // Git may have removed the temporary name between the count and the listing.
    Ok(lstat(path)?.is_some_and(|again| same(&again) && again.nlink() == 1))
}
