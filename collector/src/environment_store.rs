//! Dependency environments: a content-addressed, read-only store of directory trees (a
//! Python venv with pytest, a `node_modules`, a toolchain) that a check runs in. The sandbox
//! binds a stored tree read-only at the absolute path it was built at, so that what was built
//! for that path (a venv's absolute shebangs, its `pyvenv.cfg`) works unchanged.
//!
//! An environment's identity is the `sha256:` of its listing document, canonical JSON
//! ([`ENVIRONMENT_PROTOCOL`]):
//!
//! ```text
//! {"at":"/opt/sf-envs/pytest","entries":[…],"protocol":"sf-environment/1"}
//! ```
//!
//! `at` is the absolute path the tree is bound at; `entries` holds every entry below it,
//! sorted by path bytes: `{"kind":"file"|"executable","path":…,"sha256":…,"size":N}` for a
//! file (executable when any execute bit is set in the source), `{"kind":"symlink","path":…,
//! "target":…}` for a symbolic link, kept as it is and never followed (a venv's absolute
//! `bin/python3 → /usr/bin/python3.11` resolves inside the sandbox, which is where it
//! matters), and `{"kind":"dir","path":…}` for a directory, so that empty ones are kept.
//! Paths are relative, `/`-separated. A name or a link target that is not UTF-8, a setuid,
//! setgid or sticky entry, and a device, socket or pipe are refused, naming the path; a hard
//! link is copied as a separate file.
//!
//! A root environment ([`EnvironmentStore::add_root`]) has `at` `/`: a run sees it as its
//! whole root. It is meant for a root made by debootstrap, so its top-level [`ROOT_PROVIDED`]
//! names are left out (device nodes and mount points the sandbox makes its own) and its
//! setuid, setgid and sticky entries are copied without the bits (the copy keeps executable or
//! not, as for every file, and the sandbox's mounts are `nosuid`), instead of refused.
//!
//! The store is read by the sandbox's unprivileged user, so it cannot be a private 0700
//! directory. Its rule is the one the sandbox applies to its runtime files: the root and
//! every directory above it are owned by root or this user and writable by no one else (a
//! directory above may be sticky, like `/tmp`), reached without a symbolic link; checked on
//! opening and before every add and verification, with the root's device and inode recorded
//! at opening, so a root that was replaced is `unavailable`. Its layout:
//!
//! - `objects/<hex>/tree/`: the copy (directories 0555, files 0444 or 0555, links as links,
//!   all owned by this user), and `objects/<hex>/listing.json`, the listing document (0444),
//!   whose own `sha256:` is the digest. `objects/<hex>` is made 0555 once it is published:
//!   the rename that publishes it needs it writable, so it is built 0755 (inside `tmp/`, where
//!   no one else can look) and an add interrupted between the two leaves it 0755, which is
//!   still usable and writable by no one else.
//! - `names/<name>`: a file (0444) holding `sha256:<hex>\n`, written once by an add; only
//!   [`EnvironmentStore::add_version`] points it elsewhere (a file renamed over it from
//!   `tmp/`) and [`EnvironmentStore::remove_name`] removes it. Objects are never removed: a
//!   Slice freezes the digest, so it keeps its environment whatever its name names later.
//!   A file there whose name starts with `.` is what an interrupted write left, never a name.
//! - `tmp/` (0700): where an add builds its copy, in a fresh directory of its own.
//!
//! An add walks the source through directory descriptors ([`crate::dir_fd`]), never following
//! a link, copying each entry into `tmp/<fresh>/tree/` and hashing the bytes it writes, with
//! the limits counted as it goes. When the walk is done, the source is listed again: any entry
//! added, removed or changed since it was read (a file appended to, a directory swapped) is
//! `changed-while-read`, never a mixed copy. The copy is made durable with one `syncfs` of the
//! store's file system (every file and directory at once: one `fsync` per file made adding a
//! 20,000-file tree take half a minute here), the listing is written and synced, and
//! `tmp/<fresh>` is renamed to `objects/<hex>` with `RENAME_NOREPLACE`, then `objects/` is
//! synced. An
//! existing object of the digest is verified and replayed, or refused as `corrupt`, never
//! repaired. On any error the `tmp/` directory of the add is removed: nothing that fails
//! survives. A name that exists with the same digest replays; with another it is `conflict`,
//! found before the object is published.
//!
//! [`EnvironmentStore::verify`] re-walks a stored tree through descriptors and re-hashes every
//! file and link: a tree that no longer gives its digest (a byte, a mode, an entry added or
//! removed, a directory replaced) is `corrupt`, and is never repaired or used. Before a run,
//! [`EnvironmentStore::verify_for_use`] skips the re-hash when every entry's stamp (inode,
//! mode, owner, size, modification and change times) is what it was when a full re-hash last
//! verified the tree, and re-hashes it whole on any difference ([`crate::environment_stamps`]).

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::canonical::{self, Digest};
use crate::dir_fd::{DirFd, DirFdError, Entry, EntryKind, WriteOnce};
use crate::environment_stamps;

/// The protocol string of an environment's listing document.
pub const ENVIRONMENT_PROTOCOL: &str = "sf-environment/1";

/// The largest listing document: room for the default limit of entries with paths of a few
/// hundred bytes each, beyond the 1 MiB bound of ordinary records.
pub const MAX_LISTING_BYTES: usize = 64 * 1024 * 1024;

/// The longest environment name.
const MAX_NAME_LENGTH: usize = 64;

/// The `at` of a root environment, and the top-level names an added root leaves out (a
/// Debian root's device nodes and empty kernel mount points would otherwise be refused or
/// mean nothing).
pub use crate::contracts::command::{ROOT_AT, ROOT_PROVIDED};

/// Where an added tree is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound<'a> {
    /// At the absolute path it was added from.
    AtSource,
    /// As the run's whole root.
    Root,
    /// At another path, the one it was built for (a build's output, left elsewhere).
    At(&'a Path),
}

/// Whether `name`, listed below `prefix`, is one of a root environment's [`ROOT_PROVIDED`].
fn provided_by_sandbox(prefix: &str, name: &OsStr) -> bool {
    prefix.is_empty() && ROOT_PROVIDED.iter().any(|provided| name == *provided)
}

/// The largest name file: `sha256:`, 64 hex characters and a newline.
const NAME_FILE_BYTES: u64 = 72;

/// How much one environment may hold; counted while the source is walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvironmentLimits {
    /// Entries: files, links and directories together.
    pub files: u64,
    /// Bytes of all files' contents together.
    pub bytes: u64,
}

impl Default for EnvironmentLimits {
    /// 200,000 entries and 8 GiB: a large `node_modules` or toolchain fits.
    fn default() -> Self {
        Self {
            files: 200_000,
            bytes: 8 * 1024 * 1024 * 1024,
        }
    }
}

/// A stored environment, verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvironmentEntry {
    /// The name it was reached by, if any.
    pub name: Option<String>,
    /// The `sha256:` of its listing document.
    pub digest: Digest,
    /// The absolute path the tree was built for, where the sandbox binds it.
    pub at: PathBuf,
    /// The store's directory holding the files (`objects/<hex>/tree`).
    pub tree: PathBuf,
    /// Entries: files, links and directories together.
    pub files: u64,
    /// Bytes of all files' contents together.
    pub bytes: u64,
}

/// Why the environment store refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvironmentStoreError {
    /// A name, a source path or an entry of the source breaks a rule; nothing was kept.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// What is at fault (the name, the source path, the entry's path).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// The source holds a device, socket or pipe, which no environment can hold.
    #[error("{}: is a device, socket or pipe, which an environment cannot hold; remove it", path.display())]
    NotStorable {
        /// The entry at fault.
        path: PathBuf,
    },
    /// There is no store at the root: nothing was ever added to it.
    #[error("environment store {}: does not exist (nothing was ever added to it)", path.display())]
    NoStore {
        /// The store's root.
        path: PathBuf,
    },
    /// No environment has the name or digest.
    #[error("{what} is not in the environment store {}", store.display())]
    Missing {
        /// The name or digest asked for.
        what: String,
        /// The store's root.
        store: PathBuf,
    },
    /// A stored environment or name failed verification: reported, never repaired or used.
    #[error("{what} is corrupt: {detail}; it is left as it is, never repaired or used")]
    Corrupt {
        /// The environment's digest, or the name file, at fault.
        what: String,
        /// What failed verification.
        detail: String,
    },
    /// The name points to another environment already.
    #[error(
        "environment name {name:?} names {existing} already, not {given}: add the new \
         environment as a new version of the name (`--replace`; Slices frozen with the old one \
         keep it) or under a new name"
    )]
    Conflict {
        /// The name.
        name: String,
        /// The digest it names.
        existing: Digest,
        /// The digest of what was added.
        given: Digest,
    },
    /// The store cannot be used (an I/O failure, or a root replaced since it was opened).
    #[error("environment store unavailable: {reason}")]
    Unavailable {
        /// What made it unusable.
        reason: String,
    },
    /// The source holds more than the limits allow; nothing was kept.
    #[error("{}: {limit}", path.display())]
    TooLarge {
        /// The source directory.
        path: PathBuf,
        /// The limit passed, as a sentence.
        limit: String,
    },
    /// The store's root, or a directory above it or in it, breaks the store's trust rule.
    #[error("environment store {}: {rule}", path.display())]
    UnsafeStore {
        /// The directory at fault.
        path: PathBuf,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// The source could not be read as it was listed (a link in its path, an entry changed
    /// while it was read, ...): the descriptor walk's own error.
    #[error(transparent)]
    Source(DirFdError),
}

impl EnvironmentStoreError {
    /// The stable kebab-case code of the error: the store's own, or for
    /// [`EnvironmentStoreError::Source`] the descriptor walk's (`symlink`,
    /// `changed-while-read`, `not-a-directory`, `unreadable`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
            Self::NotStorable { .. } => "not-regular",
            Self::NoStore { .. } | Self::Missing { .. } => "missing",
            Self::Corrupt { .. } => "corrupt",
            Self::Conflict { .. } => "conflict",
            Self::Unavailable { .. } => "unavailable",
            Self::TooLarge { .. } => "too-large",
            Self::UnsafeStore { .. } => "unsafe-store",
            Self::Source(error) => error.code(),
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, EnvironmentStoreError>;

fn invalid(input: impl Into<String>, rule: impl Into<String>) -> EnvironmentStoreError {
    EnvironmentStoreError::InvalidInput {
        input: input.into(),
        rule: rule.into(),
    }
}

pub(crate) fn unavailable(reason: impl Into<String>) -> EnvironmentStoreError {
    EnvironmentStoreError::Unavailable {
        reason: reason.into(),
    }
}

/// A failure in the store's own directories (writing the copy, publishing it).
pub(crate) fn store_failed(error: DirFdError) -> EnvironmentStoreError {
    unavailable(error.to_string())
}

fn unsafe_store(path: &Path, rule: impl Into<String>) -> EnvironmentStoreError {
    EnvironmentStoreError::UnsafeStore {
        path: path.to_owned(),
        rule: rule.into(),
    }
}

pub(crate) fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Checks an environment name: 1 to 64 of `a-z 0-9 . _ -`, starting with a letter or digit.
/// [`EnvironmentStore::add`] checks it too; this is for refusing a name before anything is
/// opened or created.
pub fn check_name(name: &str) -> Result<()> {
    let allowed = |byte: u8| {
        byte.is_ascii_lowercase() || byte.is_ascii_digit() || matches!(byte, b'.' | b'_' | b'-')
    };
    let starts_well = name
        .bytes()
        .next()
        .is_some_and(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit());
    if name.len() > MAX_NAME_LENGTH || !starts_well || !name.bytes().all(allowed) {
        return Err(invalid(
            format!("environment name {name:?}"),
            format!(
                "a name is 1 to {MAX_NAME_LENGTH} of a-z, 0-9, '.', '_' and '-', starting with \
                 a letter or a digit"
            ),
        ));
    }
    Ok(())
}

/// The path components of the absolute, normalised `path`: `what` names it in errors.
/// `.` and `..` are refused rather than resolved, because the path is a promise (where a tree
/// is bound, where the store is), and a repeated or trailing `/` is dropped.
fn normal_components<'a>(path: &'a Path, what: &str) -> Result<Vec<&'a OsStr>> {
    let shown = format!("{what} {}", path.display());
    if !path.as_os_str().as_bytes().starts_with(b"/") {
        return Err(invalid(
            shown,
            "is not an absolute path; name it by its absolute path",
        ));
    }
    let components: Vec<&OsStr> = path
        .as_os_str()
        .as_bytes()
        .split(|byte| *byte == b'/')
        .filter(|segment| !segment.is_empty())
        .map(OsStr::from_bytes)
        .collect();
    if components
        .iter()
        .any(|segment| *segment == "." || *segment == "..")
    {
        return Err(invalid(
            shown,
            "holds a `.` or `..` segment; name it by its normalised absolute path",
        ));
    }
    if components.is_empty() {
        return Err(invalid(shown, "is the root directory"));
    }
    Ok(components)
}

/// The path a tree copied from `source` is bound at: `source` itself, which must be absolute,
/// without a `.` or `..` segment (a repeated or trailing `/` is dropped) and UTF-8 (the
/// listing document holds it as text). [`EnvironmentStore::add`] checks it too; this is for
/// refusing a source before anything is opened or created. Whether the path is reached
/// without a symbolic link is found when it is opened.
pub fn check_bind_path(source: &Path) -> Result<PathBuf> {
    bind_path(source).map(PathBuf::from)
}

fn bind_path(source: &Path) -> Result<String> {
    let components = normal_components(source, "source")?;
    let mut at = String::new();
    for component in components {
        let text = component.to_str().ok_or_else(|| {
            invalid(
                format!("source {}", source.display()),
                "is not UTF-8, which the listing document cannot hold",
            )
        })?;
        at.push('/');
        at.push_str(text);
    }
    Ok(at)
}

/// One entry of a listing document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListingEntry {
    path: String,
    kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<Digest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

/// What a listed entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    File,
    Executable,
    Symlink,
    Dir,
}

impl ListingEntry {
    fn file(path: String, executable: bool, sha256: Digest, size: u64) -> Self {
        Self {
            path,
            kind: if executable {
                Kind::Executable
            } else {
                Kind::File
            },
            sha256: Some(sha256),
            size: Some(size),
            target: None,
        }
    }

    fn symlink(path: String, target: String) -> Self {
        Self {
            path,
            kind: Kind::Symlink,
            sha256: None,
            size: None,
            target: Some(target),
        }
    }

    fn dir(path: String) -> Self {
        Self {
            path,
            kind: Kind::Dir,
            sha256: None,
            size: None,
            target: None,
        }
    }

    /// The entry in words, for a message naming a difference.
    fn describe(&self) -> String {
        let sha256 = self.sha256.as_ref().map(ToString::to_string);
        let size = self.size.unwrap_or_default();
        match self.kind {
            Kind::File => format!("a file of {size} bytes ({})", sha256.unwrap_or_default()),
            Kind::Executable => format!(
                "an executable of {size} bytes ({})",
                sha256.unwrap_or_default()
            ),
            Kind::Symlink => format!(
                "a symbolic link to {:?}",
                self.target.as_deref().unwrap_or_default()
            ),
            Kind::Dir => "a directory".into(),
        }
    }
}

/// The listing document.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct Listing {
    at: String,
    entries: Vec<ListingEntry>,
}

canonical::literal_fields!(Listing { "protocol": ENVIRONMENT_PROTOCOL });

impl Listing {
    /// The listing of `entries` at `at`, sorted by path bytes.
    fn new(at: String, mut entries: Vec<ListingEntry>) -> Self {
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        Self { at, entries }
    }

    fn encode(&self) -> std::result::Result<Vec<u8>, canonical::JsonError> {
        canonical::to_canonical_bytes_within(self, MAX_LISTING_BYTES)
    }

    fn files(&self) -> u64 {
        self.entries.len() as u64
    }

    fn bytes(&self) -> u64 {
        self.entries.iter().filter_map(|entry| entry.size).sum()
    }
}

/// The path of `name` below `prefix` in a listing; `None` when `name` is not UTF-8.
fn relative(prefix: &str, name: &OsStr) -> Option<String> {
    let name = name.to_str()?;
    Some(if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    })
}

/// The store's directories, opened and checked.
pub(crate) struct Opened {
    /// The store's root.
    pub(crate) root: DirFd,
    pub(crate) objects: DirFd,
    pub(crate) names: DirFd,
    pub(crate) tmp: DirFd,
    pub(crate) identity: (u64, u64),
}

/// The environment store (see the module documentation).
#[derive(Debug)]
pub struct EnvironmentStore {
    root: PathBuf,
    identity: (u64, u64),
}

impl EnvironmentStore {
    /// Opens the store at `root` (an absolute path), creating it (and `objects/`, `names/`,
    /// `tmp/`) if absent, with any missing directory above it (0755). The root and every
    /// directory above it must keep the store's trust rule (see the module documentation).
    pub fn open(root: &Path) -> Result<Self> {
        let root = normalised(root)?;
        let opened = open_store(&root, true)?;
        Ok(Self {
            root,
            identity: opened.identity,
        })
    }

    /// Opens the store at `root` only if it exists, creating nothing: for commands that only
    /// read. A root that does not exist is `missing`.
    pub fn open_existing(root: &Path) -> Result<Self> {
        let root = normalised(root)?;
        let opened = open_store(&root, false)?;
        Ok(Self {
            root,
            identity: opened.identity,
        })
    }

    /// The store's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The store's directories, checked again: the trust rule holds, and the root is still
    /// the directory opened.
    pub(crate) fn check(&self) -> Result<Opened> {
        let opened = open_store(&self.root, false).map_err(|error| match error {
            EnvironmentStoreError::NoStore { path } => unavailable(format!(
                "{} was removed since it was opened",
                path.display()
            )),
            other => other,
        })?;
        if opened.identity != self.identity {
            return Err(unavailable(format!(
                "{} was replaced since it was opened",
                self.root.display()
            )));
        }
        Ok(opened)
    }

    /// Copies the tree at `source` into the store under `name`, and returns its entry. The
    /// tree is bound, later, at `source`'s absolute path as given: it must be absolute,
    /// normalised (no `.` or `..` segment) and reached without any symbolic link in it.
    pub fn add(
        &self,
        name: &str,
        source: &Path,
        limits: EnvironmentLimits,
    ) -> Result<EnvironmentEntry> {
        self.add_bound(name, source, Bound::AtSource, Naming::Once, limits)
    }

    /// [`EnvironmentStore::add`] (or, with `root`, [`EnvironmentStore::add_root`]) that points
    /// `name` at the new tree whatever it named before: a new version under the same name.
    /// The environment it named stays stored (objects are never removed), so a Slice frozen
    /// with it, which pins its digest, keeps it; only a freeze from now on takes the new one.
    /// Answers the new entry and the digest the name held before, if any.
    pub fn add_version(
        &self,
        name: &str,
        source: &Path,
        root: bool,
        limits: EnvironmentLimits,
    ) -> Result<(EnvironmentEntry, Option<Digest>)> {
        check_name(name)?;
        let before = read_name(&self.check()?.names, name)?;
        let bound = if root { Bound::Root } else { Bound::AtSource };
        let entry = self.add_bound(name, source, bound, Naming::Replace, limits)?;
        Ok((entry, before))
    }

    /// Copies a tree that was built for the path `at` and left at `source` (an environment
    /// build's output, made inside a sandbox where it was at `at`) into the store under
    /// `name`, bound at `at`; with `replace`, as a new version of the name
    /// ([`EnvironmentStore::add_version`]). `at` is named as a source is for
    /// [`EnvironmentStore::add`]. Answers the new entry and the digest the name held before.
    pub fn add_built(
        &self,
        name: &str,
        source: &Path,
        at: &Path,
        replace: bool,
        limits: EnvironmentLimits,
    ) -> Result<(EnvironmentEntry, Option<Digest>)> {
        check_name(name)?;
        let before = read_name(&self.check()?.names, name)?;
        let naming = if replace {
            Naming::Replace
        } else {
            Naming::Once
        };
        let entry = self.add_bound(name, source, Bound::At(at), naming, limits)?;
        Ok((entry, before))
    }

    /// The first path (in path order) at which the stored environments `a` and `b` differ:
    /// an entry one has and the other lacks, or holds with another kind, mode, content or
    /// target; `""` when only where they are bound differs; `None` when they are the same.
    /// Each listing is read from the store and must hash to its digest.
    pub fn first_difference(&self, a: &Digest, b: &Digest) -> Result<Option<String>> {
        let store = self.check()?;
        let (a, b) = (self.listing(&store, a)?, self.listing(&store, b)?);
        let mut left = a.entries.iter().peekable();
        let mut right = b.entries.iter().peekable();
        loop {
            match (left.peek(), right.peek()) {
                (None, None) => return Ok((a.at != b.at).then(String::new)),
                (Some(entry), None) | (None, Some(entry)) => return Ok(Some(entry.path.clone())),
                (Some(l), Some(r)) if l.path != r.path => {
                    let first = l.path.as_bytes().min(r.path.as_bytes());
                    return Ok(Some(String::from_utf8_lossy(first).into_owned()));
                }
                (Some(l), Some(r)) if l != r => return Ok(Some(l.path.clone())),
                _ => {
                    left.next();
                    right.next();
                }
            }
        }
    }

    /// The listing document of the stored environment `digest`, checked against its digest.
    fn listing(&self, store: &Opened, digest: &Digest) -> Result<Listing> {
        let stored = |error: DirFdError| stored_error(digest, error);
        let hex = digest.hex();
        if store
            .objects
            .entry(OsStr::new(&hex))
            .map_err(stored)?
            .is_none()
        {
            return Err(EnvironmentStoreError::Missing {
                what: format!("environment {digest}"),
                store: self.root.clone(),
            });
        }
        let object = store
            .objects
            .open_dir_named(OsStr::new(&hex))
            .map_err(stored)?;
        let document = object
            .read_file_named(OsStr::new("listing.json"), MAX_LISTING_BYTES as u64)
            .map_err(stored)?
            .bytes;
        let corrupt = |detail: String| EnvironmentStoreError::Corrupt {
            what: format!("environment {digest}"),
            detail,
        };
        if Digest::of(&document) != *digest {
            return Err(corrupt("listing.json does not hash to the digest".into()));
        }
        canonical::from_slice_within(&document, "listing", MAX_LISTING_BYTES)
            .map_err(|error| corrupt(format!("listing.json: {error}")))
    }

    /// Removes the name `name` and answers the digest it named. The environment stays stored
    /// (a Slice frozen with it pins its digest and keeps it); a freeze naming `name` from now
    /// on is refused as `missing`.
    pub fn remove_name(&self, name: &str) -> Result<Digest> {
        check_name(name)?;
        let store = self.check()?;
        let digest = self.named(&store, name)?;
        store
            .names
            .remove_tree(OsStr::new(name))
            .map_err(|error| name_error(&store.names, OsStr::new(name), error))?;
        store.names.sync().map_err(store_failed)?;
        Ok(digest)
    }

    /// Copies the tree at `source` into the store under `name` as a root environment (`at`
    /// is `/`): a check's run sees it as its whole root, in place of the runtime's files. The
    /// source is named as for [`EnvironmentStore::add`], but may be anywhere. What a root
    /// made by debootstrap holds and a run cannot use is left out or reduced, as
    /// [`ROOT_PROVIDED`] says and the module documentation explains.
    pub fn add_root(
        &self,
        name: &str,
        source: &Path,
        limits: EnvironmentLimits,
    ) -> Result<EnvironmentEntry> {
        self.add_bound(name, source, Bound::Root, Naming::Once, limits)
    }

    fn add_bound(
        &self,
        name: &str,
        source: &Path,
        bound: Bound<'_>,
        naming: Naming,
        limits: EnvironmentLimits,
    ) -> Result<EnvironmentEntry> {
        check_name(name)?;
        let source_path = bind_path(source)?;
        let at = match bound {
            Bound::AtSource => source_path.clone(),
            Bound::Root => ROOT_AT.to_owned(),
            Bound::At(at) => bind_path(at)?,
        };
        let store = self.check()?;
        let source_dir =
            DirFd::open(Path::new(&source_path)).map_err(EnvironmentStoreError::Source)?;
        let source_state = source_dir.stat().map_err(EnvironmentStoreError::Source)?;
        let staging = Staging::create(&store.tmp)?;
        let tree = staging
            .dir
            .create_dir(OsStr::new("tree"), 0o700)
            .map_err(store_failed)?;
        tree.set_mode(0o700).map_err(store_failed)?;
        let mut copy = Copy {
            source: Path::new(&source_path),
            root: bound == Bound::Root,
            limits,
            entries: Vec::new(),
            seen: Vec::new(),
            bytes: 0,
        };
        copy.directory(&source_dir, &tree, "")?;
        make_read_only(&tree)?;
        confirm_unchanged(
            Path::new(&source_path),
            &source_state,
            &copy.seen,
            copy.root,
        )?;
        // Everything copied is durable before anything names it.
        rustix::fs::syncfs(&tree)
            .map_err(|errno| unavailable(format!("{}: syncfs: {errno}", tree.path().display())))?;
        let listing = Listing::new(at.clone(), copy.entries);
        let document = listing
            .encode()
            .map_err(|error| EnvironmentStoreError::TooLarge {
                path: PathBuf::from(&listing.at),
                limit: format!("its listing document cannot be written: {error}"),
            })?;
        let digest = Digest::of(&document);
        if let Some(existing) = read_name(&store.names, name)?
            && existing != digest
            && naming == Naming::Once
        {
            return Err(EnvironmentStoreError::Conflict {
                name: name.to_owned(),
                existing,
                given: digest,
            });
        }
        staging
            .dir
            .create_file(OsStr::new("listing.json"), &document, 0o444)
            .map_err(store_failed)?;
        staging.dir.sync().map_err(store_failed)?;
        let entry = match staging.publish(&store.objects, &digest)? {
            Published::New => self.entry_of(Some(name), &digest, &listing),
            Published::Existing => {
                let mut entry = self.verify_in(&store, &digest, Rehashing::Whole)?;
                entry.name = Some(name.to_owned());
                entry
            }
        };
        match naming {
            Naming::Once => self.write_name(&store.names, name, &digest)?,
            Naming::Replace => repoint_name(&store, name, &digest)?,
        }
        Ok(entry)
    }

    /// The digest `name` names in the opened store; `missing` when there is no such name.
    fn named(&self, store: &Opened, name: &str) -> Result<Digest> {
        read_name(&store.names, name)?.ok_or_else(|| EnvironmentStoreError::Missing {
            what: format!("environment name {name:?}"),
            store: self.root.clone(),
        })
    }

    /// The entry a name points to, verified (as [`EnvironmentStore::verify`]).
    pub fn resolve(&self, name: &str) -> Result<EnvironmentEntry> {
        check_name(name)?;
        let store = self.check()?;
        let digest = self.named(&store, name)?;
        let mut entry = self.verify_in(&store, &digest, Rehashing::Whole)?;
        entry.name = Some(name.to_owned());
        Ok(entry)
    }

    /// Re-walks the stored tree of `digest` through descriptors and re-hashes every file and
    /// link; a tree that no longer gives its digest (a byte, a mode, an added or removed
    /// entry, a replaced directory) is `corrupt` and is never repaired or used.
    pub fn verify(&self, digest: &Digest) -> Result<EnvironmentEntry> {
        let store = self.check()?;
        self.verify_in(&store, digest, Rehashing::Whole)
    }

    /// [`Self::verify`] before a run: a tree whose every entry is as it was when a full
    /// re-hash last verified it is not re-hashed ([`crate::environment_stamps`]); any
    /// difference re-hashes it whole.
    pub fn verify_for_use(&self, digest: &Digest) -> Result<EnvironmentEntry> {
        let store = self.check()?;
        self.verify_in(&store, digest, Rehashing::UnlessUnchanged)
    }

    /// Every name with its digest, sorted by name (reads only).
    pub fn names(&self) -> Result<Vec<(String, Digest)>> {
        let store = self.check()?;
        let mut names = Vec::new();
        for entry in store.names.entries(usize::MAX).map_err(store_failed)? {
            // A leftover of an interrupted write (`.sf-write-…`): never a name, since a name
            // starts with a letter or a digit.
            if entry.name.as_bytes().starts_with(b".") {
                continue;
            }
            let name = entry
                .name
                .to_str()
                .filter(|name| check_name(name).is_ok())
                .ok_or_else(|| EnvironmentStoreError::Corrupt {
                    what: format!("{}", store.names.shown(&entry.name).display()),
                    detail: "it is not an environment name".into(),
                })?
                .to_owned();
            let digest =
                read_name(&store.names, &name)?.ok_or_else(|| EnvironmentStoreError::Corrupt {
                    what: format!("{}", store.names.shown(&entry.name).display()),
                    detail: "it was removed while the names were read".into(),
                })?;
            names.push((name, digest));
        }
        Ok(names)
    }

    fn entry_of(&self, name: Option<&str>, digest: &Digest, listing: &Listing) -> EnvironmentEntry {
        EnvironmentEntry {
            name: name.map(str::to_owned),
            digest: digest.clone(),
            at: PathBuf::from(&listing.at),
            tree: self.root.join("objects").join(digest.hex()).join("tree"),
            files: listing.files(),
            bytes: listing.bytes(),
        }
    }

    /// Writes `names/<name>` once, holding `digest`; the same digest there replays.
    fn write_name(&self, names: &DirFd, name: &str, digest: &Digest) -> Result<()> {
        let bytes = format!("{digest}\n");
        match names.write_once(OsStr::new(name), bytes.as_bytes(), 0o444) {
            Ok(WriteOnce::Created) | Ok(WriteOnce::AlreadyThere) => Ok(()),
            Err(DirFdError::Differs { .. }) => {
                let existing = read_name(names, name)?.ok_or_else(|| {
                    unavailable(format!("{}: changed while it was written", name))
                })?;
                Err(EnvironmentStoreError::Conflict {
                    name: name.to_owned(),
                    existing,
                    given: digest.clone(),
                })
            }
            Err(error) => Err(name_error(names, OsStr::new(name), error)),
        }
    }

    /// Verifies the object of `digest` in the opened store.
    fn verify_in(
        &self,
        store: &Opened,
        digest: &Digest,
        rehashing: Rehashing,
    ) -> Result<EnvironmentEntry> {
        let hex = digest.hex();
        let corrupt = |detail: String| EnvironmentStoreError::Corrupt {
            what: format!("environment {digest}"),
            detail,
        };
        let stored = |error: DirFdError| stored_error(digest, error);
        let Some(found) = store.objects.entry(OsStr::new(&hex)).map_err(stored)? else {
            return Err(EnvironmentStoreError::Missing {
                what: format!("environment {digest}"),
                store: self.root.clone(),
            });
        };
        if found.kind != EntryKind::Directory {
            return Err(corrupt(format!(
                "{} is not a directory",
                store.objects.shown(&found.name).display()
            )));
        }
        let object = store.objects.open_dir(&found).map_err(stored)?;
        if found.uid != euid() || found.mode & 0o022 != 0 {
            return Err(corrupt(format!(
                "{} is owned by uid {} with mode {:o}; the store's objects are this user's and \
                 writable by no one else",
                object.path().display(),
                found.uid,
                found.mode
            )));
        }
        let inside = object.entries(3).map_err(stored)?;
        let names: Vec<&OsStr> = inside.iter().map(|entry| entry.name.as_os_str()).collect();
        if names != ["listing.json", "tree"] {
            return Err(corrupt(format!(
                "{} holds {names:?}, not exactly listing.json and tree",
                object.path().display()
            )));
        }
        let (listing_entry, tree_entry) = (&inside[0], &inside[1]);
        if listing_entry.kind != EntryKind::File
            || listing_entry.mode != 0o444
            || listing_entry.uid != euid()
        {
            return Err(corrupt(format!(
                "{} is not a read-only (0444) file of this user",
                object.shown(&listing_entry.name).display()
            )));
        }
        let document = object
            .read_file(listing_entry, MAX_LISTING_BYTES as u64)
            .map_err(stored)?
            .bytes;
        if Digest::of(&document) != *digest {
            return Err(corrupt(format!(
                "{} does not hash to the digest",
                object.shown(&listing_entry.name).display()
            )));
        }
        let listing: Listing =
            canonical::from_slice_within(&document, "listing", MAX_LISTING_BYTES)
                .map_err(|error| corrupt(format!("listing.json: {error}")))?;
        if listing.at != ROOT_AT
            && bind_path(Path::new(&listing.at)).ok().as_deref() != Some(listing.at.as_str())
        {
            return Err(corrupt(format!(
                "listing.json: at {:?} is not a normalised absolute path",
                listing.at
            )));
        }
        if tree_entry.kind != EntryKind::Directory {
            return Err(corrupt(format!(
                "{} is not a directory",
                object.shown(&tree_entry.name).display()
            )));
        }
        let tree = object.open_dir(tree_entry).map_err(stored)?;
        check_stored_mode(tree_entry, tree.path(), digest)?;
        // A tree unchanged, entry for entry, since a full re-hash verified it is not read
        // again (crate::environment_stamps); any difference re-hashes it whole.
        // A tree that cannot be stamped (a directory beyond the walk's limit, a race) is
        // left to the re-hash, which says what is wrong with it.
        let before = environment_stamps::take(&tree).ok();
        if rehashing == Rehashing::UnlessUnchanged
            && before.is_some()
            && environment_stamps::recorded(&store.root, digest) == before
        {
            return Ok(self.entry_of(None, digest, &listing));
        }
        let walk = Rehash {
            digest,
            budget: listing.files(),
            file_limit: listing.bytes(),
            entries: Vec::new(),
            queue: None,
            queued: 0,
        };
        let found = Listing::new(listing.at.clone(), walk.walk(tree)?);
        if let Some(difference) = first_difference(&listing.entries, &found.entries) {
            return Err(corrupt(difference));
        }
        let recomputed = found
            .encode()
            .map_err(|error| corrupt(format!("its listing cannot be written again: {error}")))?;
        if recomputed != document {
            return Err(corrupt(
                "listing.json is not the canonical listing document of its tree".into(),
            ));
        }
        // Recorded only when nothing moved while the tree was re-hashed.
        let after = object
            .open_dir(tree_entry)
            .ok()
            .and_then(|tree| environment_stamps::take(&tree).ok());
        if let Some(before) = before.filter(|before| after.as_ref() == Some(before)) {
            environment_stamps::record(&store.root, digest, &before);
        }
        Ok(self.entry_of(None, digest, &listing))
    }
}

/// The store's root as a normalised absolute path.
fn normalised(root: &Path) -> Result<PathBuf> {
    let components = normal_components(root, "environment store")?;
    let mut path = PathBuf::from("/");
    path.extend(components);
    Ok(path)
}

/// Opens the store at `root` (normalised) from `/`, one directory at a time without
/// following a link, checking the trust rule on every directory on the way; with `create`,
/// makes whatever is missing.
fn open_store(root: &Path, create: bool) -> Result<Opened> {
    let components = normal_components(root, "environment store")?;
    let walk_failed = |error: DirFdError| match error {
        DirFdError::Symlink { path } => unsafe_store(
            &path,
            "is a symbolic link; name the store by a path without one",
        ),
        DirFdError::NotADirectory { .. } if !create => EnvironmentStoreError::NoStore {
            path: root.to_owned(),
        },
        other => unavailable(other.to_string()),
    };
    let mut dir = DirFd::open(Path::new("/")).map_err(walk_failed)?;
    for name in components {
        check_above(&dir)?;
        dir = if create {
            make_dir(&dir, name, 0o755).map_err(walk_failed)?
        } else {
            dir.open_dir_named(name).map_err(walk_failed)?
        };
    }
    let stat = dir.stat().map_err(store_failed)?;
    if !trusted_owner(stat.st_uid) || stat.st_mode & 0o022 != 0 {
        return Err(unsafe_store(
            dir.path(),
            format!(
                "is owned by uid {} with mode {:o}; the store's root is owned by root or this \
                 user and writable by no one else",
                stat.st_uid,
                stat.st_mode & 0o7777
            ),
        ));
    }
    let part = |name: &str, mode: u32, forbidden: u32, rule: &str| -> Result<DirFd> {
        let opened = if create {
            make_dir(&dir, OsStr::new(name), mode)
        } else {
            dir.open_dir_named(OsStr::new(name))
        }
        .map_err(|error| match error {
            DirFdError::Symlink { path } => unsafe_store(&path, "is a symbolic link"),
            other => unavailable(format!("{other}; it is not an environment store")),
        })?;
        let stat = opened.stat().map_err(store_failed)?;
        if stat.st_uid != euid() || stat.st_mode & forbidden != 0 {
            return Err(unsafe_store(
                opened.path(),
                format!(
                    "is owned by uid {} with mode {:o}; it must be this user's, {rule}",
                    stat.st_uid,
                    stat.st_mode & 0o7777
                ),
            ));
        }
        Ok(opened)
    };
    Ok(Opened {
        objects: part("objects", 0o755, 0o022, "writable by no one else")?,
        names: part("names", 0o755, 0o022, "writable by no one else")?,
        // No one else may even look at a copy being built.
        tmp: part("tmp", 0o700, 0o077, "with no access for anyone else (0700)")?,
        identity: (stat.st_dev, stat.st_ino),
        root: dir,
    })
}

fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == euid()
}

/// Checks a directory above the store's root: owned by root or this user, and writable by
/// neither group nor others unless sticky (like `/tmp`, where no one else can rename or
/// remove what is ours).
fn check_above(dir: &DirFd) -> Result<()> {
    let stat = dir.stat().map_err(store_failed)?;
    let sticky = stat.st_mode & 0o1000 != 0;
    if !trusted_owner(stat.st_uid) || (stat.st_mode & 0o022 != 0 && !sticky) {
        return Err(unsafe_store(
            dir.path(),
            format!(
                "is owned by uid {} with mode {:o}; every directory above the store is owned \
                 by root or this user and writable by no one else (or sticky, like /tmp)",
                stat.st_uid,
                stat.st_mode & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Opens the directory `name` of `dir`, creating it with exactly `mode` (not less the umask:
/// the sandbox's user must be able to read the store) when there is none.
pub(crate) fn make_dir(
    dir: &DirFd,
    name: &OsStr,
    mode: u32,
) -> std::result::Result<DirFd, DirFdError> {
    match dir.create_dir(name, mode) {
        Ok(made) => {
            made.set_mode(mode)?;
            dir.sync()?;
            Ok(made)
        }
        Err(DirFdError::Exists { .. }) => dir.open_dir_named(name),
        Err(error) => Err(error),
    }
}

/// How an add names what it stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// A new name, or the same digest again (a name is otherwise never re-pointed).
    Once,
    /// The name points at the new digest, whatever it named before.
    Replace,
}

/// Points `names/<name>` at `digest` in one rename: the new file is written (0444) in a
/// fresh directory of `tmp/` and renamed over the name, so a reader sees the old digest or
/// the new one, never neither.
fn repoint_name(store: &Opened, name: &str, digest: &Digest) -> Result<()> {
    let staging = Staging::create(&store.tmp)?;
    let bytes = format!("{digest}\n");
    staging
        .dir
        .create_file(OsStr::new(name), bytes.as_bytes(), 0o444)
        .map_err(store_failed)?;
    // `rename(2)` without NOREPLACE: a file there is replaced (the flag's name says
    // directories; a name is always a file).
    staging
        .dir
        .rename(OsStr::new(name), &store.names, OsStr::new(name), true)
        .map_err(|error| name_error(&store.names, OsStr::new(name), error))
}

/// The digest `names/<name>` holds, or `None` when there is no such name.
fn read_name(names: &DirFd, name: &str) -> Result<Option<Digest>> {
    let file = OsStr::new(name);
    let corrupt = |detail: &str| EnvironmentStoreError::Corrupt {
        what: format!("{}", names.shown(file).display()),
        detail: detail.to_owned(),
    };
    let Some(entry) = names.entry(file).map_err(store_failed)? else {
        return Ok(None);
    };
    if entry.kind != EntryKind::File {
        return Err(corrupt("it is not a regular file"));
    }
    if entry.uid != euid() || entry.mode & 0o022 != 0 {
        return Err(corrupt(
            "it is writable by others than this user, who could re-point it",
        ));
    }
    let read = names
        .read_file(&entry, NAME_FILE_BYTES)
        .map_err(|error| name_error(names, file, error))?;
    std::str::from_utf8(&read.bytes)
        .ok()
        .and_then(|text| text.strip_suffix('\n'))
        .and_then(Digest::parse)
        .map(Some)
        .ok_or_else(|| corrupt("it does not hold one sha256: digest and a newline"))
}

/// A descriptor error on the name file `name`: its shape is corruption, a failure to use it
/// is unavailability.
fn name_error(names: &DirFd, name: &OsStr, error: DirFdError) -> EnvironmentStoreError {
    match error {
        DirFdError::Symlink { .. }
        | DirFdError::NotRegular { .. }
        | DirFdError::TooLarge { .. }
        | DirFdError::Changed { .. } => EnvironmentStoreError::Corrupt {
            what: format!("{}", names.shown(name).display()),
            detail: error.to_string(),
        },
        other => store_failed(other),
    }
}

/// A descriptor error inside the object of `digest`: a shape other than the stored one is
/// corruption; a failure to read is unavailability.
pub(crate) fn stored_error(digest: &Digest, error: DirFdError) -> EnvironmentStoreError {
    match error {
        DirFdError::Symlink { .. }
        | DirFdError::NotADirectory { .. }
        | DirFdError::NotRegular { .. }
        | DirFdError::Changed { .. }
        | DirFdError::TooLarge { .. }
        | DirFdError::BadName { .. } => EnvironmentStoreError::Corrupt {
            what: format!("environment {digest}"),
            detail: error.to_string(),
        },
        other => store_failed(other),
    }
}

/// Makes a copied directory read-only (0555).
fn make_read_only(dir: &DirFd) -> Result<()> {
    dir.set_mode(0o555).map_err(store_failed)
}

/// A fresh directory in `tmp/` that an add builds its object in, removed (whatever it holds)
/// when dropped unless it was published.
pub(crate) struct Staging<'a> {
    tmp: &'a DirFd,
    name: OsString,
    pub(crate) dir: DirFd,
    published: bool,
}

/// What publishing an object found.
pub(crate) enum Published {
    /// The object is new.
    New,
    /// An object of the digest was there already (and the staged copy was discarded).
    Existing,
}

/// A process-wide counter for staging names, so two adds in one process never collide.
static STAGING: AtomicU64 = AtomicU64::new(0);

impl<'a> Staging<'a> {
    pub(crate) fn create(tmp: &'a DirFd) -> Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        loop {
            let name = OsString::from(format!(
                "{}-{nanos}-{}",
                std::process::id(),
                STAGING.fetch_add(1, Ordering::Relaxed)
            ));
            match tmp.create_dir(&name, 0o755) {
                Ok(dir) => {
                    dir.set_mode(0o755).map_err(store_failed)?;
                    return Ok(Self {
                        tmp,
                        name,
                        dir,
                        published: false,
                    });
                }
                // Another process of the same id once (a leftover): take the next name.
                Err(DirFdError::Exists { .. }) => continue,
                Err(error) => return Err(store_failed(error)),
            }
        }
    }

    /// Renames the staged object to `objects/<hex>` unless something is there, and makes it
    /// read-only.
    pub(crate) fn publish(mut self, objects: &DirFd, digest: &Digest) -> Result<Published> {
        let hex = OsString::from(digest.hex());
        match self.tmp.rename(&self.name, objects, &hex, false) {
            Ok(()) => {
                self.published = true;
                // The staging descriptor follows the directory to its new name.
                make_read_only(&self.dir)?;
                self.dir.sync().map_err(store_failed)?;
                objects.sync().map_err(store_failed)?;
                Ok(Published::New)
            }
            Err(DirFdError::Exists { .. }) => Ok(Published::Existing),
            Err(DirFdError::Symlink { path }) => Err(EnvironmentStoreError::Corrupt {
                what: format!("environment {digest}"),
                detail: format!("{} is a symbolic link", path.display()),
            }),
            Err(error) => Err(store_failed(error)),
        }
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        if !self.published {
            // Nothing of a failed or replayed add survives; a failure to remove leaves a
            // directory in tmp/ that nothing ever adopts.
            let _ = self.tmp.remove_tree(&self.name);
        }
    }
}

/// The copy of a source tree: what is listed, and every entry as it was seen, in walk order.
struct Copy<'a> {
    source: &'a Path,
    /// Whether the copy is a root environment's ([`EnvironmentStore::add_root`]).
    root: bool,
    limits: EnvironmentLimits,
    entries: Vec<ListingEntry>,
    seen: Vec<(String, Entry)>,
    bytes: u64,
}

impl Copy<'_> {
    fn too_large(&self, limit: String) -> EnvironmentStoreError {
        EnvironmentStoreError::TooLarge {
            path: self.source.to_owned(),
            limit,
        }
    }

    fn too_many(&self) -> EnvironmentStoreError {
        self.too_large(format!(
            "holds more than {} entries (files, links and directories together), the limit \
             of this environment",
            self.limits.files
        ))
    }

    /// Copies the entries of the source directory `source` into `target`, listed below
    /// `prefix`.
    fn directory(&mut self, source: &DirFd, target: &DirFd, prefix: &str) -> Result<()> {
        let remaining = self.limits.files.saturating_sub(self.seen.len() as u64);
        let listing_limit = usize::try_from(remaining.saturating_add(1)).unwrap_or(usize::MAX);
        let entries = source.entries(listing_limit).map_err(|error| match error {
            DirFdError::TooLarge { .. } => self.too_many(),
            other => EnvironmentStoreError::Source(other),
        })?;
        for entry in entries {
            if self.root && provided_by_sandbox(prefix, &entry.name) {
                continue;
            }
            if self.seen.len() as u64 >= self.limits.files {
                return Err(self.too_many());
            }
            let shown = source.shown(&entry.name);
            let path = relative(prefix, &entry.name).ok_or_else(|| {
                invalid(
                    shown.display().to_string(),
                    "the name is not UTF-8, which the listing document cannot hold; rename it",
                )
            })?;
            self.check_special_bits(&shown, entry.mode)?;
            self.seen.push((path.clone(), entry.clone()));
            match entry.kind {
                EntryKind::Directory => {
                    let below = source
                        .open_dir(&entry)
                        .map_err(EnvironmentStoreError::Source)?;
                    let copy = target
                        .create_dir(&entry.name, 0o700)
                        .map_err(store_failed)?;
                    copy.set_mode(0o700).map_err(store_failed)?;
                    self.entries.push(ListingEntry::dir(path.clone()));
                    self.directory(&below, &copy, &path)?;
                    make_read_only(&copy)?;
                }
                EntryKind::File => {
                    let listed = self.file(source, target, &entry, &shown, path)?;
                    self.entries.push(listed);
                }
                EntryKind::Symlink => {
                    let link = source
                        .read_link(&entry)
                        .map_err(EnvironmentStoreError::Source)?;
                    let text = link.to_str().ok_or_else(|| {
                        invalid(
                            shown.display().to_string(),
                            "the link's target is not UTF-8, which the listing document cannot \
                             hold",
                        )
                    })?;
                    target
                        .create_symlink(&entry.name, &link)
                        .map_err(store_failed)?;
                    self.entries
                        .push(ListingEntry::symlink(path, text.to_owned()));
                }
                EntryKind::Other => return Err(EnvironmentStoreError::NotStorable { path: shown }),
            }
        }
        Ok(())
    }

    /// Copies the source file `entry` of `source` into `target` (read-only), hashing the
    /// bytes written. It is made durable with the rest of the copy (see the module
    /// documentation).
    fn file(
        &mut self,
        source: &DirFd,
        target: &DirFd,
        entry: &Entry,
        shown: &Path,
        path: String,
    ) -> Result<ListingEntry> {
        let room = self.limits.bytes.saturating_sub(self.bytes);
        let over = |copy: &Self| {
            copy.too_large(format!(
                "holds more than {} bytes of files, the limit of this environment",
                copy.limits.bytes
            ))
        };
        if entry.size > room {
            return Err(over(self));
        }
        let mut file = target
            .create_file_writer(&entry.name, 0o600)
            .map_err(store_failed)?;
        let copied = target.shown(&entry.name);
        let mut hasher = sha2::Sha256::new();
        let mut write_failed = None;
        let read = source.read_file_chunks(entry, room, &mut |chunk| {
            hasher.update(chunk);
            file.write_all(chunk).map_err(|error| {
                write_failed = Some(format!("{}: cannot be written: {error}", copied.display()));
                DirFdError::WriteFailed {
                    path: copied.clone(),
                    detail: error.to_string(),
                }
            })
        });
        if let Some(reason) = write_failed {
            return Err(unavailable(reason));
        }
        let read = read.map_err(|error| match error {
            DirFdError::TooLarge { .. } => over(self),
            other => EnvironmentStoreError::Source(other),
        })?;
        self.check_special_bits(shown, read.mode)?;
        // The copy keeps the source's modification time: it changes no byte (it is not part of
        // the digest), and caches built with the tree compare it (Python's bytecode: a pip
        // venv's `.pyc` files would all be stale in a copy of another time, and compiled again
        // on every run, since the store is read-only).
        if let Some(modified) = entry.modified() {
            file.set_modified(modified)
                .map_err(|error| unavailable(format!("{}: {error}", copied.display())))?;
        }
        let executable = read.mode & 0o111 != 0;
        let mode = if executable { 0o555 } else { 0o444 };
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|error| unavailable(format!("{}: {error}", copied.display())))?;
        self.bytes += read.size;
        Ok(ListingEntry::file(
            path,
            executable,
            Digest::from_bytes(hasher.finalize().into()),
            read.size,
        ))
    }
}

impl Copy<'_> {
    /// Refuses a setuid, setgid or sticky entry: the copy could not keep what the bit means,
    /// and a setuid file has no business in an environment. A root environment is the
    /// exception: every Debian root has setuid programs (`su`, `mount`) and a sticky `/tmp`,
    /// and their copies lose the bits as every copy loses its other mode bits (the listing
    /// keeps executable or not); inside the sandbox they would mean nothing anyway (its
    /// mounts are `nosuid`, its process has no capability and a read-only root).
    fn check_special_bits(&self, path: &Path, mode: u32) -> Result<()> {
        if self.root {
            return Ok(());
        }
        check_special_bits(path, mode)
    }
}

/// Refuses a setuid, setgid or sticky entry (see [`Copy::check_special_bits`]).
fn check_special_bits(path: &Path, mode: u32) -> Result<()> {
    if mode & 0o7000 != 0 {
        return Err(invalid(
            path.display().to_string(),
            format!(
                "has mode {mode:o}: a setuid, setgid or sticky entry cannot be kept in an \
                 environment; clear the bit"
            ),
        ));
    }
    Ok(())
}

/// Lists the source at `at` again, once it was copied, and checks that every entry is as it
/// was when it was read and that none was added or removed: so the copy is the source as it
/// stands now, never a mix of two of its states.
fn confirm_unchanged(
    at: &Path,
    root_state: &rustix::fs::Stat,
    seen: &[(String, Entry)],
    root: bool,
) -> Result<()> {
    let changed = |path: &Path, detail: &str| {
        EnvironmentStoreError::Source(DirFdError::Changed {
            path: path.to_owned(),
            detail: detail.to_owned(),
        })
    };
    let root_dir = DirFd::open(at).map_err(EnvironmentStoreError::Source)?;
    let now = root_dir.stat().map_err(EnvironmentStoreError::Source)?;
    let state = |stat: &rustix::fs::Stat| {
        (
            stat.st_dev,
            stat.st_ino,
            stat.st_mtime,
            stat.st_mtime_nsec,
            stat.st_ctime,
            stat.st_ctime_nsec,
        )
    };
    if state(&now) != state(root_state) {
        return Err(changed(at, "the directory changed while sf copied it"));
    }
    let mut next = 0;
    survey(&root_dir, "", seen, root, &mut next)?;
    if next != seen.len() {
        let (path, _) = &seen[next];
        return Err(changed(
            &at.join(path),
            "it was removed while sf copied the directory",
        ));
    }
    Ok(())
}

/// Compares the entries below `dir` (listed below `prefix`) with `seen`, from `next` on.
fn survey(
    dir: &DirFd,
    prefix: &str,
    seen: &[(String, Entry)],
    root: bool,
    next: &mut usize,
) -> Result<()> {
    let changed = |path: PathBuf, detail: &str| {
        EnvironmentStoreError::Source(DirFdError::Changed {
            path,
            detail: detail.to_owned(),
        })
    };
    let remaining = seen.len() - *next;
    let entries = dir
        .entries(remaining.saturating_add(1))
        .map_err(|error| match error {
            DirFdError::TooLarge { path, .. } => {
                changed(path, "entries were added while sf copied it")
            }
            other => EnvironmentStoreError::Source(other),
        })?;
    for entry in entries {
        if root && provided_by_sandbox(prefix, &entry.name) {
            continue;
        }
        let shown = dir.shown(&entry.name);
        let path = relative(prefix, &entry.name);
        match seen.get(*next) {
            Some((earlier_path, earlier))
                if path.as_deref() == Some(earlier_path.as_str())
                    && earlier.is_unchanged_in(&entry) => {}
            Some((earlier_path, _)) if path.as_deref() == Some(earlier_path.as_str()) => {
                return Err(changed(shown, "it changed while sf copied the directory"));
            }
            _ => {
                return Err(changed(
                    shown,
                    "the directory's entries changed while sf copied it",
                ));
            }
        }
        *next += 1;
        if entry.kind == EntryKind::Directory {
            let below = dir
                .open_dir(&entry)
                .map_err(EnvironmentStoreError::Source)?;
            survey(
                &below,
                path.as_deref().unwrap_or_default(),
                seen,
                root,
                next,
            )?;
        }
    }
    Ok(())
}

/// Checks a stored directory's or file's owner and mode: what the store wrote, and nothing
/// anyone could have made writable.
fn check_stored_mode(entry: &Entry, path: &Path, digest: &Digest) -> Result<()> {
    let expected: &[u32] = match entry.kind {
        EntryKind::Directory => &[0o555],
        EntryKind::File => &[0o444, 0o555],
        _ => return Ok(()),
    };
    if entry.uid != euid() || !expected.contains(&entry.mode) {
        return Err(EnvironmentStoreError::Corrupt {
            what: format!("environment {digest}"),
            detail: format!(
                "{} is owned by uid {} with mode {:o}; the store keeps its directories 0555 and \
                 its files 0444 or 0555, owned by this user",
                path.display(),
                entry.uid,
                entry.mode
            ),
        });
    }
    Ok(())
}

/// Whether a verification may skip the re-hash of a tree its stamps show unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rehashing {
    /// Every file is re-hashed (and the stamps recorded again).
    Whole,
    /// Only when the tree's stamps differ from those recorded.
    UnlessUnchanged,
}

/// Files queued for hashing at most (the walk waits beyond). Each holds its directory open,
/// so the bound also bounds the descriptors a verification holds.
const REHASH_QUEUE: usize = 256;

/// The most threads that hash a stored tree's files at once.
const REHASH_THREADS: usize = 8;

/// A file of the stored tree to hash: the directory it is in, its entry, its path in the
/// listing and its place among the entries.
struct FileJob {
    dir: std::sync::Arc<DirFd>,
    entry: Entry,
    path: String,
    slot: usize,
}

impl FileJob {
    fn hash(&self, digest: &Digest, file_limit: u64) -> Result<ListingEntry> {
        let mut hasher = sha2::Sha256::new();
        let read = self
            .dir
            .read_file_chunks(&self.entry, file_limit, &mut |chunk| {
                hasher.update(chunk);
                Ok(())
            })
            .map_err(|error| stored_error(digest, error))?;
        Ok(ListingEntry::file(
            self.path.clone(),
            read.mode == 0o555,
            Digest::from_bytes(hasher.finalize().into()),
            read.size,
        ))
    }
}

/// A stored tree walked again, every file re-hashed. The walk lists directories and reads
/// links itself and queues the files, which threads of their own hash while it goes on
/// ([`REHASH_THREADS`], as many as the machine has cores): a verification runs before every
/// collection, and re-hashing a venv or a toolchain one file after another was most of the
/// time a collection took before its first check.
struct Rehash<'a> {
    digest: &'a Digest,
    /// Entries the listing names: a tree holding more is corrupt, found before it is all read.
    budget: u64,
    /// No stored file can be larger than all listed files together.
    file_limit: u64,
    /// Every entry in walk order; a file's once it was hashed.
    entries: Vec<Option<ListingEntry>>,
    /// Where the walk queues files for the hashing threads.
    queue: Option<std::sync::mpsc::SyncSender<FileJob>>,
    /// Files queued.
    queued: usize,
}

impl Rehash<'_> {
    fn corrupt(&self, detail: String) -> EnvironmentStoreError {
        EnvironmentStoreError::Corrupt {
            what: format!("environment {}", self.digest),
            detail,
        }
    }

    /// Walks `dir`, every file hashed; the entries found, in walk order. Of the errors, the
    /// one of the earliest entry in walk order is reported, as a walk that hashed each file in
    /// turn would have.
    fn walk(mut self, dir: DirFd) -> Result<Vec<ListingEntry>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, REHASH_THREADS);
        let (queue, jobs) = std::sync::mpsc::sync_channel::<FileJob>(REHASH_QUEUE);
        let jobs = std::sync::Mutex::new(jobs);
        let (digest, file_limit) = (self.digest, self.file_limit);
        let hasher = || {
            let mut done = Vec::new();
            loop {
                let job = jobs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .recv();
                let Ok(job) = job else {
                    return done;
                };
                let hashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    job.hash(digest, file_limit)
                }))
                .unwrap_or_else(|_| {
                    Err(unavailable(format!(
                        "hashing {} of environment {digest} failed; it is not verified",
                        job.path
                    )))
                });
                done.push((job.slot, hashed));
            }
        };
        let (walked, hashed) = std::thread::scope(|scope| {
            let hashers: Vec<_> = (0..threads).map(|_| scope.spawn(hasher)).collect();
            self.queue = Some(queue);
            let walked = self.directory(std::sync::Arc::new(dir), "");
            // No more files: the hashers end once the queue is empty.
            self.queue = None;
            let mut hashed = Vec::new();
            for thread in hashers {
                // A hasher catches its own panics, so each answers for every file it took.
                hashed.extend(thread.join().unwrap_or_default());
            }
            (walked, hashed)
        });
        let walk_failed_at = walked.as_ref().err().map(|_| self.entries.len());
        let mut first_error: Option<(usize, EnvironmentStoreError)> = None;
        let mut files = 0;
        for (slot, result) in hashed {
            match result {
                Ok(entry) => {
                    self.entries[slot] = Some(entry);
                    files += 1;
                }
                Err(error) => {
                    if first_error.as_ref().is_none_or(|(first, _)| slot < *first) {
                        first_error = Some((slot, error));
                    }
                }
            }
        }
        match (first_error, walked) {
            (Some((slot, error)), _) if walk_failed_at.is_none_or(|at| slot < at) => {
                return Err(error);
            }
            (_, Err(error)) => return Err(error),
            (Some((_, error)), Ok(())) => return Err(error),
            (None, Ok(())) => {}
        }
        if files != self.queued {
            return Err(unavailable(format!(
                "{} of the {} files of environment {} were hashed; it is not verified",
                files, self.queued, self.digest
            )));
        }
        Ok(self.entries.into_iter().flatten().collect())
    }

    fn directory(&mut self, dir: std::sync::Arc<DirFd>, prefix: &str) -> Result<()> {
        let stored = |error| stored_error(self.digest, error);
        let remaining = self.budget.saturating_sub(self.entries.len() as u64);
        let limit = usize::try_from(remaining.saturating_add(1)).unwrap_or(usize::MAX);
        let entries = dir.entries(limit).map_err(stored)?;
        for entry in entries {
            let shown = dir.shown(&entry.name);
            if self.entries.len() as u64 >= self.budget {
                return Err(self.corrupt(format!(
                    "{} is one entry more than its listing names",
                    shown.display()
                )));
            }
            let path = relative(prefix, &entry.name).ok_or_else(|| {
                self.corrupt(format!("{}: a name that is not UTF-8", shown.display()))
            })?;
            check_stored_mode(&entry, &shown, self.digest)?;
            match entry.kind {
                EntryKind::Directory => {
                    let below = dir.open_dir(&entry).map_err(stored)?;
                    self.entries.push(Some(ListingEntry::dir(path.clone())));
                    self.directory(std::sync::Arc::new(below), &path)?;
                }
                EntryKind::File => {
                    let job = FileJob {
                        dir: std::sync::Arc::clone(&dir),
                        entry,
                        path,
                        slot: self.entries.len(),
                    };
                    self.entries.push(None);
                    let sent = self
                        .queue
                        .as_ref()
                        .is_some_and(|queue| queue.send(job).is_ok());
                    if !sent {
                        return Err(unavailable(format!(
                            "no thread hashes the files of environment {}; it is not verified",
                            self.digest
                        )));
                    }
                    self.queued += 1;
                }
                EntryKind::Symlink => {
                    let target = dir.read_link(&entry).map_err(stored)?;
                    let target = target.into_string().map_err(|_| {
                        self.corrupt(format!(
                            "{}: a link target that is not UTF-8",
                            shown.display()
                        ))
                    })?;
                    self.entries.push(Some(ListingEntry::symlink(path, target)));
                }
                EntryKind::Other => {
                    return Err(
                        self.corrupt(format!("{} is a device, socket or pipe", shown.display()))
                    );
                }
            }
        }
        Ok(())
    }
}

/// The first difference between the `stored` listing and the entries `found` in the tree,
/// both sorted by path bytes, in words.
fn first_difference(stored: &[ListingEntry], found: &[ListingEntry]) -> Option<String> {
    let (mut stored, mut found) = (stored.iter().peekable(), found.iter().peekable());
    loop {
        match (stored.peek(), found.peek()) {
            (None, None) => return None,
            (Some(listed), None) => {
                return Some(format!("{}: listed, but not in the tree", listed.path));
            }
            (None, Some(there)) => {
                return Some(format!("{}: in the tree, but not listed", there.path));
            }
            (Some(listed), Some(there)) => {
                match listed.path.as_bytes().cmp(there.path.as_bytes()) {
                    std::cmp::Ordering::Less => {
                        return Some(format!("{}: listed, but not in the tree", listed.path));
                    }
                    std::cmp::Ordering::Greater => {
                        return Some(format!("{}: in the tree, but not listed", there.path));
                    }
                    std::cmp::Ordering::Equal if listed != there => {
                        return Some(format!(
                            "{}: listed as {}, but the tree holds {}",
                            listed.path,
                            listed.describe(),
                            there.describe()
                        ));
                    }
                    std::cmp::Ordering::Equal => {
                        stored.next();
                        found.next();
                    }
                }
            }
        }
    }
}
