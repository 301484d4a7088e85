//! Materialised trees, kept in the environment store beside the environments and under the
//! same trust rule (the sandbox's user reads them; no one but root or sf's user can change
//! them): a content-addressed store of verified files, `files/<sha256 hex>` (a file) and
//! `files/<sha256 hex>.x` (an executable), and one materialised tree per base,
//! `trees/<sf-tree/1 digest hex>/tree/`, whose files are hard links to `files/` (directories
//! 0555, files 0444 or 0555, links as links). An Executor binds such a tree read-only as the
//! base of a program given by reference ([`crate::contracts::ProgramTree`]).
//!
//! What is detected, when:
//!
//! - **At materialisation**, every byte: the tree is streamed from the repository (every
//!   object re-hashed, every rule checked) and its digest computed from the bytes must be the
//!   one asked for; a file the store holds already is read and hashed again before it is
//!   linked into the new tree. Then each entry's stamp is recorded (`trees/<hex>/stamps`):
//!   a file's device, inode, mode, size and modification time, a link's target, each
//!   directory.
//! - **At every use** ([`EnvironmentStore::verify_tree`], before every collection), every
//!   entry's stamp: a file replaced (another inode), written to (its size or modification
//!   time), given another mode, an entry added, removed or turned into another kind, or the
//!   tree itself replaced, is `corrupt`, reported, and never run or repaired. A stamp check
//!   is one `fstatat` per entry, not a re-hash: a write that restores the file's size and
//!   modification time (which only its owner or root can make, deliberately) is found by the
//!   next materialisation's re-hash, not by the stamp check.
//! - **At every run**, the Executor checks that the directory it binds is the one the store
//!   verified (device and inode), so a tree replaced after the collection's check is never
//!   run.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use crate::canonical::Digest;
use crate::contracts::tree_path::EntryMode;
use crate::dir_fd::{DirFd, DirFdError, EntryKind};
use crate::environment_store::{
    EnvironmentStore, EnvironmentStoreError, Published, Result, Staging, make_dir, store_failed,
    stored_error, unavailable,
};
use crate::git_object::ObjectId;
use crate::repository::Repository;

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

/// One entry's stamp, as recorded at materialisation.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stamp {
    Directory,
    File {
        dev: u64,
        ino: u64,
        mode: u32,
        size: u64,
        modified: (i64, u64),
    },
    Link(Vec<u8>),
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
        repository: &Repository,
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
        let mut builder = Builder {
            tree: &tree,
            files: &files,
            open: None,
            directories: Vec::new(),
            failed: None,
        };
        let built = repository
            .stream_files(commit, |path, mode, sha256, bytes| {
                if builder.failed.is_none()
                    && let Err(error) = builder.add(path, mode, sha256, bytes)
                {
                    builder.failed = Some(error);
                }
            })
            .map_err(|error| unavailable(format!("reading commit {commit}: {error}")))?;
        if let Some(error) = builder.failed.take() {
            return Err(error);
        }
        if built != *digest {
            return Err(corrupt(
                digest,
                format!("commit {commit}'s files give the tree digest {built}"),
            ));
        }
        // Read-only from the deepest directory up, then durable in one sync.
        let mut directories = std::mem::take(&mut builder.directories);
        directories.sort_by_key(|path| std::cmp::Reverse(path.matches('/').count()));
        for path in directories {
            open_path(&tree, &path)
                .and_then(|dir| dir.set_mode(0o555))
                .map_err(store_failed)?;
        }
        tree.set_mode(0o555).map_err(store_failed)?;
        let stamps = record_stamps(&tree)?;
        staging
            .dir
            .create_file(OsStr::new("stamps"), stamps.as_bytes(), 0o444)
            .map_err(store_failed)?;
        rustix::fs::syncfs(&tree)
            .map_err(|errno| unavailable(format!("{}: syncfs: {errno}", tree.path().display())))?;
        match staging.publish(&trees, digest)? {
            Published::New | Published::Existing => self.verify_tree(digest),
        }
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
        let expected =
            parse_stamps(&stamps.bytes).ok_or_else(|| corrupt(digest, "its stamps do not read"))?;
        let tree = object
            .open_dir_named(OsStr::new("tree"))
            .map_err(|error| stored_error(digest, error))?;
        let found = stamps_of(&tree).map_err(|error| stored_error(digest, error))?;
        if let Some(difference) = first_difference(&expected, &found) {
            return Err(corrupt(digest, difference));
        }
        let stat = tree.stat().map_err(store_failed)?;
        Ok(StoredTree {
            digest: digest.clone(),
            dir: self.root().join("trees").join(digest.hex()).join("tree"),
            dev: stat.st_dev,
            ino: stat.st_ino,
        })
    }
}

/// Building a tree: each leaf written (or linked from `files/`) as it streams by.
struct Builder<'a> {
    tree: &'a DirFd,
    files: &'a DirFd,
    /// The directory the last leaf went into, kept open for the next.
    open: Option<(String, DirFd)>,
    /// Every directory made, to be made read-only once the tree is whole.
    directories: Vec<String>,
    failed: Option<EnvironmentStoreError>,
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
                if !self.directories.contains(&at) {
                    self.directories.push(at.clone());
                }
            }
            let dir = self.tree.ensure_dirs(parent, 0o755).map_err(store_failed)?;
            self.open = Some((parent.to_owned(), dir));
        }
        let dir = match &self.open {
            Some((_, dir)) if !parent.is_empty() => dir,
            _ => self.tree,
        };
        match mode {
            EntryMode::Symlink => dir
                .create_symlink(name, OsStr::from_bytes(bytes))
                .map_err(store_failed),
            EntryMode::Regular | EntryMode::Executable => {
                let executable = mode == EntryMode::Executable;
                let key = OsString::from(if executable {
                    format!("{}.x", sha256.hex())
                } else {
                    sha256.hex()
                });
                let bits = if executable { 0o555 } else { 0o444 };
                match self.files.entry(&key).map_err(store_failed)? {
                    Some(held) => {
                        // A file the store holds already is verified before it is used.
                        let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
                        self.files
                            .read_file_chunks(&held, u64::MAX, &mut |chunk| {
                                sha2::Digest::update(&mut hasher, chunk);
                                Ok(())
                            })
                            .map_err(store_failed)?;
                        let found = Digest::from_bytes(sha2::Digest::finalize(hasher).into());
                        if found != *sha256 || held.mode != bits {
                            return Err(EnvironmentStoreError::Corrupt {
                                what: format!("{}", self.files.shown(&key).display()),
                                detail: format!(
                                    "it holds {found} with mode {:o}, not {sha256} with {bits:o}",
                                    held.mode
                                ),
                            });
                        }
                        self.files.hard_link(&key, dir, name).map_err(store_failed)
                    }
                    None => {
                        let mut file = dir.create_file_writer(name, bits).map_err(store_failed)?;
                        file.write_all(bytes)
                            .and_then(|()| {
                                file.set_permissions(std::fs::Permissions::from_mode(bits))
                            })
                            .map_err(|error| unavailable(format!("writing {path}: {error}")))?;
                        match dir.hard_link(name, self.files, &key) {
                            // Another materialisation stored the same bytes meanwhile: ours
                            // stays this tree's, theirs the store's.
                            Ok(()) | Err(DirFdError::Exists { .. }) => Ok(()),
                            Err(error) => Err(store_failed(error)),
                        }
                    }
                }
            }
        }
    }
}

/// The directory at `path` below `tree`.
fn open_path(tree: &DirFd, path: &str) -> std::result::Result<DirFd, DirFdError> {
    let mut dir = tree.open_dir_named(OsStr::new(path.split('/').next().unwrap_or(path)))?;
    for segment in path.split('/').skip(1) {
        dir = dir.open_dir_named(OsStr::new(segment))?;
    }
    Ok(dir)
}

/// The stamps of every entry below `tree`, by path.
fn stamps_of(tree: &DirFd) -> std::result::Result<BTreeMap<String, Stamp>, DirFdError> {
    let mut stamps = BTreeMap::new();
    stamp_dir(tree, "", &mut stamps)?;
    Ok(stamps)
}

fn stamp_dir(
    dir: &DirFd,
    prefix: &str,
    stamps: &mut BTreeMap<String, Stamp>,
) -> std::result::Result<(), DirFdError> {
    for entry in dir.entries(MAX_DIRECTORY_ENTRIES)? {
        let name = entry.name.to_string_lossy();
        let path = if prefix.is_empty() {
            name.into_owned()
        } else {
            format!("{prefix}/{name}")
        };
        let stamp = match entry.kind {
            EntryKind::Directory => {
                stamp_dir(&dir.open_dir(&entry)?, &path, stamps)?;
                Stamp::Directory
            }
            EntryKind::File => {
                let (dev, ino) = entry.identity();
                Stamp::File {
                    dev,
                    ino,
                    mode: entry.mode,
                    size: entry.size,
                    modified: entry.modified_raw(),
                }
            }
            EntryKind::Symlink => Stamp::Link(dir.read_link(&entry)?.as_bytes().to_vec()),
            EntryKind::Other => {
                return Err(DirFdError::NotRegular {
                    path: dir.shown(&entry.name),
                });
            }
        };
        stamps.insert(path, stamp);
    }
    Ok(())
}

/// The stamps document of the tree at `tree`: the protocol line, then one line per entry in
/// path order: `d <path>`, `f <dev> <ino> <mode octal> <size> <mtime s> <mtime ns> <path>`,
/// `l <path>\t<target>` (names and targets hold no control character: the tree rules).
fn record_stamps(tree: &DirFd) -> Result<String> {
    let stamps = stamps_of(tree).map_err(store_failed)?;
    let mut text = format!("{STAMPS_PROTOCOL}\n");
    for (path, stamp) in &stamps {
        match stamp {
            Stamp::Directory => text.push_str(&format!("d {path}\n")),
            Stamp::File {
                dev,
                ino,
                mode,
                size,
                modified: (seconds, nanos),
            } => text.push_str(&format!(
                "f {dev} {ino} {mode:o} {size} {seconds} {nanos} {path}\n"
            )),
            Stamp::Link(target) => {
                text.push_str(&format!("l {path}\t{}\n", String::from_utf8_lossy(target)))
            }
        }
    }
    Ok(text)
}

fn parse_stamps(bytes: &[u8]) -> Option<BTreeMap<String, Stamp>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.split_terminator('\n');
    if lines.next()? != STAMPS_PROTOCOL {
        return None;
    }
    let mut stamps = BTreeMap::new();
    for line in lines {
        let (kind, rest) = line.split_once(' ')?;
        let (path, stamp) = match kind {
            "d" => (rest.to_owned(), Stamp::Directory),
            "l" => {
                let (path, target) = rest.split_once('\t')?;
                (path.to_owned(), Stamp::Link(target.as_bytes().to_vec()))
            }
            "f" => {
                let mut fields = rest.splitn(7, ' ');
                let dev = fields.next()?.parse().ok()?;
                let ino = fields.next()?.parse().ok()?;
                let mode = u32::from_str_radix(fields.next()?, 8).ok()?;
                let size = fields.next()?.parse().ok()?;
                let seconds = fields.next()?.parse().ok()?;
                let nanos = fields.next()?.parse().ok()?;
                let path = fields.next()?.to_owned();
                (
                    path,
                    Stamp::File {
                        dev,
                        ino,
                        mode,
                        size,
                        modified: (seconds, nanos),
                    },
                )
            }
            _ => return None,
        };
        stamps.insert(path, stamp);
    }
    Some(stamps)
}

/// The first entry, in path order, where `found` differs from `expected`, in words.
fn first_difference(
    expected: &BTreeMap<String, Stamp>,
    found: &BTreeMap<String, Stamp>,
) -> Option<String> {
    let mut paths: Vec<&String> = expected.keys().chain(found.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .find_map(|path| match (expected.get(path), found.get(path)) {
            (Some(a), Some(b)) if a == b => None,
            (Some(_), None) => Some(format!("{path} was removed")),
            (None, Some(_)) => Some(format!("{path} was added")),
            (Some(_), Some(_)) => Some(format!(
                "{path} changed since it was verified (another file, size, mode, time or target)"
            )),
            (None, None) => None,
        })
}

/// Why the trees of a collection could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreesError {
    /// The repository refused or failed.
    #[error(transparent)]
    Repository(#[from] crate::repository::RepositoryError),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] EnvironmentStoreError),
}

impl TreesError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Repository(error) => error.code(),
            Self::Store(error) => error.code(),
        }
    }
}

/// The trees a collection of `sealed` (exported) under `slice` runs
/// ([`crate::collector::CollectTrees`]): an `sf-candidate/4` Candidate's by reference (its
/// base materialised in `store`, when given: without one the programs are named, for a
/// judgment, and never run), an older one's by value.
pub fn collect_trees(
    repository: &Repository,
    sealed: &crate::repository::SealedCandidate,
    slice: &crate::assurance::FrozenSlice,
    store: Option<&EnvironmentStore>,
) -> std::result::Result<crate::collector::CollectTrees, TreesError> {
    use crate::collector::{CollectTrees, StoredTrees, tree_paths};
    let manifest = &sealed.manifest;
    let crate::repository::TreeContents::Trees { base: digest, .. } = &manifest.contents else {
        return Ok(CollectTrees::Files {
            base: repository.snapshot(&manifest.base_commit)?,
            candidate: repository.snapshot(&manifest.commit)?,
        });
    };
    let base = match store {
        Some(store) => Some(store.materialise_tree(repository, &manifest.base_commit, digest)?),
        None => None,
    };
    let paths = tree_paths(slice, sealed);
    Ok(CollectTrees::Stored(StoredTrees {
        base,
        directories: repository
            .tree_directories(&manifest.base_commit, paths.iter().map(String::as_str))?,
        edits: repository.edited_entries(sealed)?,
    }))
}
