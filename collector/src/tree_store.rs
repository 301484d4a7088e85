//! Materialised trees, kept in the environment store beside the environments and under the
//! same trust rule (the sandbox's user reads them; no one but root or sf's user can change
//! them): a content-addressed store of verified files, `files/<xx>/<sha256 hex>` (a file)
//! and `files/<xx>/<sha256 hex>.x` (an executable), `xx` the digest's first two hex digits,
//! and one materialised tree per base,
//! `trees/<sf-tree/1 digest hex>/tree/`, whose files are hard links to `files/` (directories
//! 0555, files 0444 or 0555, links as links). An Executor binds such a tree read-only as the
//! base of a program given by reference ([`crate::contracts::ProgramTree`]).
//!
//! What is detected, when:
//!
//! - **At materialisation**, every byte: the tree is streamed from the repository (every
//!   object re-hashed, every rule checked) and its digest computed from the bytes must be the
//!   one asked for; a file the store holds already is read and hashed again before it is
//!   linked into the new tree (or, by a writer that had stopped looking in the store first,
//!   before the tree keeps its own copy: [`FileStore::add`]). Each entry's stamp is taken as
//!   it is made and recorded (`trees/<hex>/stamps`, one line per entry in walk order): a
//!   file's device, inode, mode, size and modification time, a link's target, each
//!   directory.
//! - **At every use** ([`EnvironmentStore::verify_tree`], before every collection), every
//!   entry's stamp: a file replaced (another inode), written to (its size or modification
//!   time), given another mode, an entry added, removed or turned into another kind, or the
//!   tree itself replaced, is `corrupt`, reported, and never run or repaired. A stamp check
//!   is one `fstatat` per entry (spread over the cores), not a re-hash: a write that restores
//!   the file's size and modification time (which only its owner or root can make,
//!   deliberately) is found by the next materialisation's re-hash, not by the stamp check.
//! - **At every run**, the Executor checks that the directory it binds is the one the store
//!   verified (device and inode), so a tree replaced after the collection's check is never
//!   run.

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::PathBuf;

use crate::canonical::Digest;
use crate::contracts::tree_path::EntryMode;
use crate::dir_fd::{DirFd, DirFdError, Entry, EntryKind};
use crate::environment_store::{
    EnvironmentStore, EnvironmentStoreError, Published, Result, Staging, make_dir, store_failed,
    stored_error, unavailable,
};
use crate::git_object::ObjectId;
use crate::repository::RepositoryError;

/// What a stream of a tree's files hands each file and link to: its path, mode, SHA-256 and
/// bytes; `Break` stops the stream.
pub type EachFile<'a> = dyn FnMut(&str, EntryMode, &Digest, &[u8]) -> ControlFlow<()> + 'a;

/// Where a tree to materialise is read from: the repository, streaming every file of a
/// factory commit (each object re-hashed, every rule checked) in path order.
pub trait TreeSource {
    /// Hands every file and link of `commit` to `each` (its path, mode, SHA-256 and bytes)
    /// and answers the tree's `sf-tree/1` digest computed from the bytes read; `each` may
    /// stop the stream (`Break`), and the answer is then that `Break`, never a digest.
    fn stream_files(
        &self,
        commit: &ObjectId,
        each: &mut EachFile<'_>,
    ) -> std::result::Result<ControlFlow<(), Digest>, RepositoryError>;
}

/// The first line of a materialised tree's stamps.
const STAMPS_PROTOCOL: &str = "sf-tree-stamps/1";
/// The most entries one directory of a materialised tree may hold when it is listed.
const MAX_DIRECTORY_ENTRIES: usize = 1 << 20;

/// A materialised tree, verified: its digest and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTree {
    /// The tree's `sf-tree/1` digest.
    pub digest: Digest,
    /// The directory holding the tree (`trees/<hex>/tree`).
    pub dir: PathBuf,
    /// Its device and inode when it was verified.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
}

/// A file's stamp line: `f <dev> <ino> <mode octal> <size> <mtime s> <mtime ns> <path>`.
fn file_stamp(
    path: &str,
    (dev, ino): (u64, u64),
    mode: u32,
    size: u64,
    (s, ns): (i64, u64),
) -> String {
    format!("f {dev} {ino} {mode:o} {size} {s} {ns} {path}")
}

/// The stamp line of the listed file `entry` at `path`.
fn entry_stamp(path: &str, entry: &Entry) -> String {
    file_stamp(
        path,
        entry.identity(),
        entry.mode,
        entry.size,
        entry.modified_raw(),
    )
}

fn corrupt(digest: &Digest, detail: impl Into<String>) -> EnvironmentStoreError {
    EnvironmentStoreError::Corrupt {
        what: format!("materialised tree {digest}"),
        detail: detail.into(),
    }
}

impl EnvironmentStore {
    /// The tree of the factory commit `commit` of `repository`, whose `sf-tree/1` digest is
    /// `digest`, materialised: verified ([`Self::verify_tree`]) when the store holds it,
    /// else built from the repository's bytes (module documentation) and published whole.
    pub fn materialise_tree(
        &self,
        repository: &dyn TreeSource,
        commit: &ObjectId,
        digest: &Digest,
    ) -> Result<StoredTree> {
        let store = self.check()?;
        let trees = make_dir(&store.root, OsStr::new("trees"), 0o755).map_err(store_failed)?;
        if trees
            .entry(OsStr::new(&digest.hex()))
            .map_err(store_failed)?
            .is_some()
        {
            return self.verify_tree(digest);
        }
        let files = make_dir(&store.root, OsStr::new("files"), 0o755).map_err(store_failed)?;
        let staging = Staging::create(&store.tmp)?;
        let tree = staging
            .dir
            .create_dir(OsStr::new("tree"), 0o755)
            .map_err(store_failed)?;
        tree.set_mode(0o755).map_err(store_failed)?;
        let (built, written) = build_streaming(repository, commit, &tree, &files)?;
        if built != *digest {
            return Err(corrupt(
                digest,
                format!("commit {commit}'s files give the tree digest {built}"),
            ));
        }
        // Read-only from the deepest directory up, then durable in one sync.
        let mut directories: Vec<String> = written.directories.into_iter().collect();
        directories.sort_by_key(|path| std::cmp::Reverse(path.matches('/').count()));
        for path in &directories {
            open_path(&tree, path)
                .and_then(|dir| dir.set_mode(0o555))
                .map_err(store_failed)?;
        }
        tree.set_mode(0o555).map_err(store_failed)?;
        let mut stamps = written.stamps;
        stamps.extend(directories.into_iter().map(|path| {
            let line = format!("d {path}");
            (path, line)
        }));
        staging
            .dir
            .create_file(
                OsStr::new("stamps"),
                stamps_document(stamps).as_bytes(),
                0o444,
            )
            .map_err(store_failed)?;
        rustix::fs::syncfs(&tree)
            .map_err(|errno| unavailable(format!("{}: syncfs: {errno}", tree.path().display())))?;
        match staging.publish(&trees, digest)? {
            // The stamps were taken of this very tree as it was made.
            Published::New => self.stored_tree(digest, &trees),
            // Another materialisation published it first: checked like any stored tree.
            Published::Existing => self.verify_tree(digest),
        }
    }

    /// The published tree `digest` (below `trees`) where it is now.
    fn stored_tree(&self, digest: &Digest, trees: &DirFd) -> Result<StoredTree> {
        let stat = trees
            .open_dir_named(OsStr::new(&digest.hex()))
            .and_then(|object| object.open_dir_named(OsStr::new("tree")))
            .and_then(|tree| tree.stat())
            .map_err(|error| stored_error(digest, error))?;
        Ok(StoredTree {
            digest: digest.clone(),
            dir: self.root().join("trees").join(digest.hex()).join("tree"),
            dev: stat.st_dev,
            ino: stat.st_ino,
        })
    }

    /// The materialised tree `digest`, every entry checked against the stamps recorded when
    /// it was made (module documentation): `missing` when the store holds none, `corrupt`
    /// when anything changed.
    pub fn verify_tree(&self, digest: &Digest) -> Result<StoredTree> {
        let store = self.check()?;
        let missing = || EnvironmentStoreError::Missing {
            what: format!("materialised tree {digest}"),
            store: self.root().to_owned(),
        };
        let trees = match store.root.open_dir_named(OsStr::new("trees")) {
            Ok(trees) => trees,
            Err(DirFdError::NotADirectory { .. }) => return Err(missing()),
            Err(error) => return Err(stored_error(digest, error)),
        };
        let object = match trees.open_dir_named(OsStr::new(&digest.hex())) {
            Ok(object) => object,
            Err(DirFdError::NotADirectory { .. }) => return Err(missing()),
            Err(error) => return Err(stored_error(digest, error)),
        };
        let stamps = object
            .read_file_named(OsStr::new("stamps"), 1 << 30)
            .map_err(|error| stored_error(digest, error))?;
        let text = std::str::from_utf8(&stamps.bytes)
            .ok()
            .and_then(|text| text.strip_prefix(STAMPS_PROTOCOL))
            .and_then(|text| text.strip_prefix('\n'))
            .ok_or_else(|| corrupt(digest, "its stamps do not read"))?;
        let tree = object
            .open_dir_named(OsStr::new("tree"))
            .map_err(|error| stored_error(digest, error))?;
        let found = stamp_lines(&tree).map_err(|error| stored_error(digest, error))?;
        let mut expected = text.split_terminator('\n');
        let mut found = found.iter().map(String::as_str);
        loop {
            match (expected.next(), found.next()) {
                (None, None) => return self.stored_tree(digest, &trees),
                (expected, found) => {
                    if let Some(difference) = first_difference(expected, found) {
                        return Err(corrupt(digest, difference));
                    }
                }
            }
        }
    }
}

/// One leaf read from the repository, on its way to the writer.
struct Leaf {
    path: String,
    mode: EntryMode,
    sha256: Digest,
    bytes: Vec<u8>,
}

/// How many bytes of leaves a batch for a writer gathers (a larger file makes a batch of its
/// own): with a batch queued per writer, one being written by each and one being gathered,
/// what waits in memory stays a few batches per writer.
const WRITER_BATCH_BYTES: usize = 4 << 20;
/// How many leaves a batch for a writer gathers at most.
const WRITER_BATCH_LEAVES: usize = 1024;
/// The most writers a materialisation starts.
const MAX_WRITERS: usize = 4;
/// How many files in a row a writer looks for in the store without finding one before it
/// stops looking first ([`FileStore::add`]).
const COLD_AFTER_MISSES: u32 = 64;

/// What the writers made: every directory, and each leaf's path and stamp line.
#[derive(Default)]
struct Written {
    directories: std::collections::BTreeSet<String>,
    stamps: Vec<(String, String)>,
}

/// Streams the tree of `commit` into `tree` (files stored in `files`): the repository is read
/// (every object re-hashed) on this thread while writers, one per core, write the batches of
/// files, so that reading and writing overlap and a file's creation, which is system calls
/// waiting on the kernel, does not hold back the reading; gives the tree's digest as read and
/// what was written.
fn build_streaming(
    repository: &dyn TreeSource,
    commit: &ObjectId,
    tree: &DirFd,
    files: &DirFd,
) -> Result<(Digest, Written)> {
    let writers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_WRITERS);
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<Leaf>>(writers);
    // The writers alone hold the receiver: when the last one has stopped (every one failed),
    // it is dropped and the reader's next send fails instead of waiting for ever.
    let receiver = std::sync::Arc::new(std::sync::Mutex::new(receiver));
    // Set by the first writer that fails: the others stop at their next batch, and the reader
    // sends no more, since the materialisation has failed whatever they do.
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|_| {
                let receiver = std::sync::Arc::clone(&receiver);
                let failed = &failed;
                scope.spawn(move || -> Result<Written> {
                    let mut builder = Builder {
                        tree,
                        files: FileStore::new(files),
                        open: None,
                        written: Written::default(),
                    };
                    loop {
                        // The lock is held only while a batch is taken, never while it is
                        // written.
                        let batch = receiver.lock().unwrap_or_else(|e| e.into_inner()).recv();
                        let Ok(batch) = batch else {
                            return Ok(builder.written);
                        };
                        if failed.load(std::sync::atomic::Ordering::Relaxed) {
                            return Ok(builder.written);
                        }
                        for leaf in batch {
                            builder
                                .add(&leaf.path, leaf.mode, &leaf.sha256, &leaf.bytes)
                                .inspect_err(|_| {
                                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                                })?;
                        }
                    }
                })
            })
            .collect();
        drop(receiver);
        let mut batch = Vec::new();
        let mut gathered = 0;
        // A writer that failed stops the reading (as does a send that fails: every writer has
        // stopped), since the materialisation has failed whatever is read next.
        let built = repository.stream_files(commit, &mut |path, mode, sha256, bytes| {
            if failed.load(std::sync::atomic::Ordering::Relaxed) {
                return ControlFlow::Break(());
            }
            gathered += bytes.len();
            batch.push(Leaf {
                path: path.to_owned(),
                mode,
                sha256: sha256.clone(),
                bytes: bytes.to_vec(),
            });
            if gathered >= WRITER_BATCH_BYTES || batch.len() >= WRITER_BATCH_LEAVES {
                if sender.send(std::mem::take(&mut batch)).is_err() {
                    return ControlFlow::Break(());
                }
                gathered = 0;
            }
            ControlFlow::Continue(())
        });
        if matches!(built, Ok(ControlFlow::Continue(_))) && !batch.is_empty() {
            let _ = sender.send(batch);
        }
        drop(sender);
        // Every writer is joined; the first failure is the materialisation's.
        let mut written = Ok(Written::default());
        for handle in handles {
            let done = handle
                .join()
                .unwrap_or_else(|_| Err(unavailable("a tree's writer panicked".to_owned())));
            written = match (written, done) {
                (Ok(mut all), Ok(one)) => {
                    all.directories.extend(one.directories);
                    all.stamps.extend(one.stamps);
                    Ok(all)
                }
                (Err(error), _) | (Ok(_), Err(error)) => Err(error),
            };
        }
        let built =
            built.map_err(|error| unavailable(format!("reading commit {commit}: {error}")))?;
        match built {
            ControlFlow::Continue(built) => Ok((built, written?)),
            // The reading stops only when a writer has failed, whose error `written` holds.
            ControlFlow::Break(()) => Err(written.err().unwrap_or_else(|| {
                unavailable(format!("reading commit {commit} stopped before its end"))
            })),
        }
    })
}

/// Building part of a tree: each leaf written (or linked from `files/`) as it streams by.
struct Builder<'a> {
    tree: &'a DirFd,
    files: FileStore<'a>,
    /// The directory the last leaf went into, kept open for the next.
    open: Option<(String, DirFd)>,
    /// Every directory made (to be made read-only once the tree is whole), each leaf's stamp.
    written: Written,
}

impl Builder<'_> {
    fn add(&mut self, path: &str, mode: EntryMode, sha256: &Digest, bytes: &[u8]) -> Result<()> {
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        let name = OsStr::new(name);
        if !parent.is_empty() && self.open.as_ref().is_none_or(|(open, _)| open != parent) {
            let mut at = String::new();
            for segment in parent.split('/') {
                at = if at.is_empty() {
                    segment.to_owned()
                } else {
                    format!("{at}/{segment}")
                };
                self.written.directories.insert(at.clone());
            }
            let dir = self.tree.ensure_dirs(parent, 0o755).map_err(store_failed)?;
            self.open = Some((parent.to_owned(), dir));
        }
        let dir = match &self.open {
            Some((_, dir)) if !parent.is_empty() => dir,
            _ => self.tree,
        };
        let stamp = match mode {
            EntryMode::Symlink => {
                dir.create_symlink(name, OsStr::from_bytes(bytes))
                    .map_err(store_failed)?;
                format!("l {path}\t{}", String::from_utf8_lossy(bytes))
            }
            EntryMode::Regular | EntryMode::Executable => {
                let executable = mode == EntryMode::Executable;
                self.files.add(dir, name, path, executable, sha256, bytes)?
            }
        };
        self.written.stamps.push((path.to_owned(), stamp));
        Ok(())
    }
}

/// The store's `files/` as one writer uses it: each file by the SHA-256 of its bytes in
/// `files/<first two hex digits>/` (so that no directory of the store holds more than a 256th
/// of it, and writers linking files at once seldom wait on one directory's lock).
struct FileStore<'a> {
    files: &'a DirFd,
    /// The shards this writer opened, by the first byte of their files' digests.
    shards: Vec<Option<DirFd>>,
    /// How many files in a row this writer looked for in the store and did not find.
    missed: u32,
}

impl<'a> FileStore<'a> {
    /// A writer's view of `files`, no shard opened yet, looking first.
    fn new(files: &'a DirFd) -> Self {
        Self {
            files,
            shards: (0..=u8::MAX).map(|_| None).collect(),
            missed: 0,
        }
    }

    /// Makes the file `name` of `dir` (at `path` in the tree) of `sha256`: a hard link to the
    /// store's file when the store holds it (read and hashed again first), else written anew
    /// and linked into the store; gives its stamp line.
    fn add(
        &mut self,
        dir: &DirFd,
        name: &OsStr,
        path: &str,
        executable: bool,
        sha256: &Digest,
        bytes: &[u8],
    ) -> Result<String> {
        let hex = sha256.hex();
        let key = OsString::from(if executable { format!("{hex}.x") } else { hex });
        let bits = if executable { 0o555 } else { 0o444 };
        let shard = open_shard(self.files, &mut self.shards, sha256)?;
        // A writer that found none of the last files in the store stops looking first (a
        // lookup that finds nothing costs about a third of writing a small file): it writes,
        // and a link refused because the store holds the file sends it back to looking.
        let looking = self.missed < COLD_AFTER_MISSES;
        let held = if looking {
            shard.entry(&key).map_err(store_failed)?
        } else {
            None
        };
        if let Some(held) = held {
            self.missed = 0;
            verify_held(shard, &key, &held, sha256, bits)?;
            shard.hard_link(&key, dir, name).map_err(store_failed)?;
            // The inode verified: one changed after this stat, or another linked in its
            // place, differs from the stamp at the next use.
            return Ok(entry_stamp(path, &held));
        }
        self.missed = self.missed.saturating_add(u32::from(looking));
        let failed = |error: std::io::Error| unavailable(format!("writing {path}: {error}"));
        let mut file = dir.create_file_writer(name, bits).map_err(store_failed)?;
        file.write_all(bytes).map_err(failed)?;
        let mut made = file.metadata().map_err(failed)?;
        if made.mode() & 0o7777 != bits {
            // The umask took bits away.
            file.set_permissions(std::fs::Permissions::from_mode(bits))
                .and_then(|()| file.metadata())
                .map(|metadata| made = metadata)
                .map_err(failed)?;
        }
        match dir.hard_link(name, shard, &key) {
            Ok(()) => {}
            // The store holds these bytes (another materialisation stored them meanwhile, or
            // this writer did not look): ours stays this tree's, theirs the store's, verified
            // all the same, as every file of the store a tree would link is.
            Err(DirFdError::Exists { .. }) => {
                self.missed = 0;
                if let Some(held) = shard.entry(&key).map_err(store_failed)? {
                    verify_held(shard, &key, &held, sha256, bits)?;
                }
            }
            Err(error) => return Err(store_failed(error)),
        }
        Ok(file_stamp(
            path,
            (made.dev(), made.ino()),
            made.mode() & 0o7777,
            made.size(),
            (made.mtime(), made.mtime_nsec() as u64),
        ))
    }
}

/// Checks the store's file `key` (listed as `held`, in `shard`) by reading and hashing it: it
/// must hold `sha256` with the permission bits `bits`, else the store is `corrupt`.
fn verify_held(shard: &DirFd, key: &OsStr, held: &Entry, sha256: &Digest, bits: u32) -> Result<()> {
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    shard
        .read_linked_file_chunks(held, u64::MAX, &mut |chunk| {
            sha2::Digest::update(&mut hasher, chunk);
            Ok(())
        })
        .map_err(store_failed)?;
    let found = Digest::from_bytes(sha2::Digest::finalize(hasher).into());
    if found != *sha256 || held.mode != bits {
        return Err(EnvironmentStoreError::Corrupt {
            what: format!("{}", shard.shown(key).display()),
            detail: format!(
                "it holds {found} with mode {:o}, not {sha256} with {bits:o}",
                held.mode
            ),
        });
    }
    Ok(())
}

/// The store's directory for files of `sha256`: `files/<its first two hex digits>`, made when
/// missing, each opened once into `shards`.
fn open_shard<'s>(
    files: &DirFd,
    shards: &'s mut [Option<DirFd>],
    sha256: &Digest,
) -> Result<&'s DirFd> {
    let index = usize::from(sha256.as_bytes()[0]);
    let slot = &mut shards[index];
    Ok(match slot {
        Some(shard) => shard,
        None => {
            let name = format!("{index:02x}");
            slot.insert(make_dir(files, OsStr::new(&name), 0o755).map_err(store_failed)?)
        }
    })
}

/// The directory at `path` below `tree`.
fn open_path(tree: &DirFd, path: &str) -> std::result::Result<DirFd, DirFdError> {
    let mut dir = tree.open_dir_named(OsStr::new(path.split('/').next().unwrap_or(path)))?;
    for segment in path.split('/').skip(1) {
        dir = dir.open_dir_named(OsStr::new(segment))?;
    }
    Ok(dir)
}

/// Every entry's stamp line below `tree`, in walk order ([`DirFd::walk`]); the `fstatat`
/// calls, one per entry, spread over the cores ([`DirFd::walk_map`]).
fn stamp_lines(tree: &DirFd) -> std::result::Result<Vec<String>, DirFdError> {
    tree.walk_map(MAX_DIRECTORY_ENTRIES, &|dir, path, entry| {
        Ok(match entry.kind {
            EntryKind::Directory => format!("d {path}"),
            EntryKind::File => entry_stamp(path, entry),
            EntryKind::Symlink => format!(
                "l {path}\t{}",
                String::from_utf8_lossy(dir.read_link(entry)?.as_bytes())
            ),
            EntryKind::Other => format!("o {path}"),
        })
    })
}

/// The stamps document of a tree made of `stamps` (each entry's path and stamp line): the
/// protocol line, then the lines in walk order ([`stamp_lines`]; names and targets hold no
/// control character: the tree rules).
fn stamps_document(mut stamps: Vec<(String, String)>) -> String {
    // Walk order is the order of the paths compared segment by segment: the order of the
    // paths' bytes with each `/` taken as the least byte.
    fn key(path: &str) -> impl Iterator<Item = u8> + '_ {
        path.bytes().map(|byte| if byte == b'/' { 0 } else { byte })
    }
    stamps.sort_by(|(a, _), (b, _)| key(a).cmp(key(b)));
    let mut text = format!("{STAMPS_PROTOCOL}\n");
    for (_, line) in stamps {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The path a stamp line is about.
fn stamp_path(line: &str) -> &str {
    match line.split_once(' ') {
        Some(("f", rest)) => rest.splitn(7, ' ').nth(6).unwrap_or(rest),
        Some(("l", rest)) => rest.split_once('\t').map_or(rest, |(path, _)| path),
        Some((_, rest)) => rest,
        None => line,
    }
}

/// How the recorded stamp line `expected` and the `found` one (the next of each in walk
/// order; `None` past the end) differ, in words; `None` when they are the same.
fn first_difference(expected: Option<&str>, found: Option<&str>) -> Option<String> {
    match (expected, found) {
        (Some(expected), Some(found)) if expected == found => None,
        (None, None) => None,
        (Some(expected), None) => Some(format!("{} was removed", stamp_path(expected))),
        (None, Some(found)) => Some(format!("{} was added", stamp_path(found))),
        (Some(expected), Some(found)) if stamp_path(expected) == stamp_path(found) => {
            Some(format!(
                "{} changed since it was verified (another kind, file, size, mode, time or target)",
                stamp_path(found)
            ))
        }
        (Some(expected), Some(found)) => Some(format!(
            "its entries changed: {} where {} was recorded",
            stamp_path(found),
            stamp_path(expected)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store's `files/` and a tree's directory, in a directory of their own.
    struct Dirs {
        root: tempfile::TempDir,
        files: DirFd,
        tree: DirFd,
    }

    fn dirs() -> Dirs {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("files")).unwrap();
        std::fs::create_dir(root.path().join("tree")).unwrap();
        Dirs {
            files: DirFd::open(&root.path().join("files")).unwrap(),
            tree: DirFd::open(&root.path().join("tree")).unwrap(),
            root,
        }
    }

    /// Puts `bytes` (or, when given, `stored` in their place) into the store as the file of
    /// `bytes`' digest; gives that file's path.
    fn store(dirs: &Dirs, bytes: &[u8], stored: Option<&[u8]>) -> PathBuf {
        let hex = Digest::of(bytes).hex();
        let shard = dirs.root.path().join("files").join(&hex[..2]);
        std::fs::create_dir_all(&shard).unwrap();
        let path = shard.join(&hex);
        std::fs::write(&path, stored.unwrap_or(bytes)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        path
    }

    fn add(writer: &mut FileStore<'_>, dirs: &Dirs, name: &str, bytes: &[u8]) -> Result<String> {
        let digest = Digest::of(bytes);
        writer.add(&dirs.tree, OsStr::new(name), name, false, &digest, bytes)
    }

    fn inode(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).unwrap().ino()
    }

    /// Makes `writer` stop looking: as many new files in a row as it takes.
    fn make_cold(writer: &mut FileStore<'_>, dirs: &Dirs) {
        for at in 0..COLD_AFTER_MISSES {
            add(
                writer,
                dirs,
                &format!("new-{at}"),
                format!("new {at}\n").as_bytes(),
            )
            .unwrap();
        }
        assert_eq!(writer.missed, COLD_AFTER_MISSES);
    }

    /// A writer that stopped looking writes a file the store holds itself (the store's copy
    /// checked all the same) and looks again from the next file on, which it links.
    #[test]
    fn a_writer_that_stopped_looking_writes_what_the_store_holds_then_looks_again() {
        let dirs = dirs();
        let held = store(&dirs, b"held\n", None);
        let next = store(&dirs, b"next\n", None);
        let mut writer = FileStore::new(&dirs.files);
        make_cold(&mut writer, &dirs);
        add(&mut writer, &dirs, "held", b"held\n").unwrap();
        let tree = dirs.root.path().join("tree");
        assert_ne!(
            inode(&tree.join("held")),
            inode(&held),
            "written, not linked"
        );
        assert_eq!(std::fs::read(tree.join("held")).unwrap(), b"held\n");
        assert_eq!(
            writer.missed, 0,
            "the store held it: the writer looks again"
        );
        add(&mut writer, &dirs, "next", b"next\n").unwrap();
        assert_eq!(
            inode(&tree.join("next")),
            inode(&next),
            "linked from the store"
        );
        // Every new file went into the store, in its shard.
        let hex = Digest::of(b"new 0\n").hex();
        let stored = dirs.root.path().join("files").join(&hex[..2]).join(&hex);
        assert_eq!(inode(&tree.join("new-0")), inode(&stored));
    }

    /// A file of the store written to is found by a writer that stopped looking too: the link
    /// it refused sends the writer to read and hash the store's file.
    #[test]
    fn a_corrupted_store_file_is_found_by_a_writer_that_stopped_looking() {
        for cold in [false, true] {
            let dirs = dirs();
            store(&dirs, b"held\n", Some(b"corrupted\n"));
            let mut writer = FileStore::new(&dirs.files);
            if cold {
                make_cold(&mut writer, &dirs);
            }
            let error = add(&mut writer, &dirs, "held", b"held\n").unwrap_err();
            assert_eq!(error.code(), "corrupt", "cold {cold}: {error}");
        }
    }
}
