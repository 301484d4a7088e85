//! A program given by reference, as a cluster receives it: its base read from the directory
//! the host's tree store named, checked to be the tree the reference names, as the files a
//! worker fetches.
//!
//! A local sandbox binds the base directory and answers for it by its device and inode, as the
//! store that verified it asks. A worker cannot see that directory, so the Executor reads it
//! (through descriptors, never following a link; a file that changes while it is read is
//! refused) and digests what it read as `sf-tree/1`: a directory that is not the one the store
//! verified, or that no longer holds the tree the reference names, starts nothing
//! (`unavailable`, mechanism `program-tree`), whatever a worker would make of it. The base then
//! travels as the input root's `program/` tree (the same Merkle tree, since `sf-tree/1` is
//! REAPI's own `Directory` encoding), bounded as a snapshot is; the layer and the deletions
//! travel in the run message, and the worker lays them over the base as the local sandbox
//! does, so the run's identity is the same `sf-tree/1` digest either way.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;

use sf_contracts::snapshot::{MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SnapshotFile};
use sf_contracts::tree_digest::{self, Node};
use sf_contracts::tree_path::EntryMode;
use sf_contracts::{ExecutorError, ProgramTree};
use sf_io::dir_fd::{DirFd, EntryKind};

/// The mechanism an unusable base is reported under, as every Executor reports it.
pub const MECHANISM: &str = "program-tree";

fn unavailable(reason: String) -> ExecutorError {
    ExecutorError::Unavailable {
        mechanism: MECHANISM.to_owned(),
        reason,
    }
}

/// The base of `tree` as files, read from its directory and checked against its digest.
pub fn read(tree: &ProgramTree) -> Result<Vec<SnapshotFile>, ExecutorError> {
    let shown = tree.dir.display();
    let root = DirFd::open(&tree.dir).map_err(|error| unavailable(error.to_string()))?;
    let stat = root
        .stat()
        .map_err(|error| unavailable(error.to_string()))?;
    if (stat.st_dev, stat.st_ino) != (tree.dev, tree.ino) {
        return Err(unavailable(format!(
            "{shown} is not the directory the store verified (device {} inode {})",
            tree.dev, tree.ino
        )));
    }
    let mut files = Vec::new();
    let mut bytes = 0;
    walk(&root, "", &mut files, &mut bytes)?;
    let digested = tree_digest::build(files.iter().map(|file| (file.path.as_str(), node(file))))
        .map_err(|error| unavailable(format!("{shown}: {error}")))?;
    if digested.root.hash != tree.base {
        return Err(unavailable(format!(
            "{shown} holds the tree {}, not the base {} the reference names",
            digested.root.hash, tree.base
        )));
    }
    Ok(files)
}

/// The node of a base file.
pub fn node(file: &SnapshotFile) -> Node {
    match file.mode {
        EntryMode::Symlink => Node::Symlink {
            target: String::from_utf8_lossy(&file.content).into_owned(),
        },
        mode => Node::file(mode == EntryMode::Executable, &file.content),
    }
}

/// Adds the leaves below `dir` (at `prefix`) to `files`, within the snapshot bounds.
fn walk(
    dir: &DirFd,
    prefix: &str,
    files: &mut Vec<SnapshotFile>,
    bytes: &mut u64,
) -> Result<(), ExecutorError> {
    let too_large = || ExecutorError::Unavailable {
        mechanism: "reapi".to_owned(),
        reason: format!(
            "the program's base is larger than a cluster takes ({MAX_SNAPSHOT_FILES} files, \
                 {MAX_SNAPSHOT_BYTES} bytes)"
        ),
    };
    let failed = |error: sf_io::dir_fd::DirFdError| unavailable(error.to_string());
    for entry in dir.entries(MAX_SNAPSHOT_FILES).map_err(failed)? {
        let name = std::str::from_utf8(entry.name.as_bytes()).map_err(|_| {
            unavailable(format!(
                "{}: a name that is not UTF-8 is in no tree sf stores",
                dir.shown(&entry.name).display()
            ))
        })?;
        let path = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}/{name}")
        };
        let file = match entry.kind {
            EntryKind::Directory => {
                let below = dir.open_dir(&entry).map_err(failed)?;
                walk(&below, &path, files, bytes)?;
                continue;
            }
            EntryKind::File => {
                let budget = MAX_SNAPSHOT_BYTES.saturating_sub(*bytes);
                let read = dir.read_file(&entry, budget).map_err(|error| match error {
                    sf_io::dir_fd::DirFdError::TooLarge { .. } => too_large(),
                    error => failed(error),
                })?;
                let mode = if read.mode & 0o111 != 0 {
                    EntryMode::Executable
                } else {
                    EntryMode::Regular
                };
                SnapshotFile::new(path, mode, read.bytes)
            }
            EntryKind::Symlink => {
                let target = dir.read_link(&entry).map_err(failed)?;
                SnapshotFile::symlink(path, OsStr::as_bytes(&target).to_vec())
            }
            EntryKind::Other => {
                return Err(unavailable(format!(
                    "{}: a device, socket or pipe is in no tree sf stores",
                    dir.shown(&entry.name).display()
                )));
            }
        };
        *bytes += file.content.len() as u64;
        files.push(file);
        if files.len() > MAX_SNAPSHOT_FILES || *bytes > MAX_SNAPSHOT_BYTES {
            return Err(too_large());
        }
    }
    Ok(())
}
