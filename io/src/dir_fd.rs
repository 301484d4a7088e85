//! File access through directory descriptors that never follows a symbolic link: how sf reads
//! and writes directories it does not own (a `--program`, `--input` or `--from` directory, an
//! oats capability, an `--out` directory's parent, a Slice).
//!
//! Whoever can write such a directory can swap any of its subdirectories for a symbolic link
//! while sf works in it. A path resolved again for every file follows that link in the middle
//! of the path (`O_NOFOLLOW` guards only the last component), so sf running as root would read
//! or write wherever the link points. Here a path is resolved once, one component at a time
//! with `O_NOFOLLOW | O_DIRECTORY` (a link anywhere is refused, naming it), and everything
//! below is reached by a single name relative to an open directory descriptor:
//!
//! - a listing stats each entry with `AT_SYMLINK_NOFOLLOW`;
//! - a subdirectory or file is opened with `O_NOFOLLOW` relative to its directory, and the
//!   opened descriptor's device and inode must be the listed entry's (`changed-while-read`
//!   otherwise), so what is read is what was listed; a file whose size, modification or
//!   change time moved while it was read is `changed-while-read` too;
//! - files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`, directories with `mkdirat` and
//!   then opened `O_NOFOLLOW | O_DIRECTORY`, symbolic links with `symlinkat`; a name that
//!   exists as a link is refused, and a link is never made where anything (a directory
//!   included) exists.
//!
//! Names handed to this module are single components: never empty, `.`, `..`, or holding a
//! `/` or NUL. Paths kept here serve messages only; no access goes through them.

use std::ffi::{OsStr, OsString};
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;

/// Why a descriptor-based access failed; every variant names the path at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirFdError {
    /// A symbolic link where a directory or a file was needed.
    #[error("{}: is a symbolic link; sf never follows one here: name the real path, or replace the link by what it points to", path.display())]
    Symlink {
        /// The path at fault.
        path: PathBuf,
    },
    /// Not a directory (or missing) where a directory was needed.
    #[error("{}: {detail}", path.display())]
    NotADirectory {
        /// The path at fault.
        path: PathBuf,
        /// What the system or the check found.
        detail: String,
    },
    /// A device, socket or pipe where a regular file was needed.
    #[error("{}: is not a regular file", path.display())]
    NotRegular {
        /// The path at fault.
        path: PathBuf,
    },
    /// The entry was replaced between its listing and its opening, or while it was read.
    #[error("{}: changed while sf read it ({detail}); retry once the directory is quiet", path.display())]
    Changed {
        /// The path at fault.
        path: PathBuf,
        /// What the system or the check found.
        detail: String,
    },
    /// More entries or bytes than the caller's limit.
    #[error("{}: {limit}", path.display())]
    TooLarge {
        /// The path at fault.
        path: PathBuf,
        /// The limit it exceeds, in words.
        limit: String,
    },
    /// A name that is not one path component.
    #[error("{}: {name:?} is not a single file name", path.display())]
    BadName {
        /// The path at fault.
        path: PathBuf,
        /// The name given.
        name: OsString,
    },
    /// The file to be written exists with other bytes.
    #[error("{}: exists with other contents; sf never overwrites a file", path.display())]
    Differs {
        /// The path at fault.
        path: PathBuf,
    },
    /// The name to be created exists already.
    #[error("{}: exists already; sf never writes into an existing file or directory", path.display())]
    Exists {
        /// The path at fault.
        path: PathBuf,
    },
    /// The system refused a read.
    #[error("{}: cannot be read: {detail}", path.display())]
    Unreadable {
        /// The path at fault.
        path: PathBuf,
        /// What the system or the check found.
        detail: String,
    },
    /// The system refused a write.
    #[error("{}: cannot be written: {detail}", path.display())]
    WriteFailed {
        /// The path at fault.
        path: PathBuf,
        /// What the system or the check found.
        detail: String,
    },
}

impl DirFdError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Symlink { .. } => "symlink",
            Self::NotADirectory { .. } => "not-a-directory",
            Self::NotRegular { .. } => "not-regular",
            Self::Changed { .. } => "changed-while-read",
            Self::TooLarge { .. } => "too-large",
            Self::BadName { .. } => "bad-path",
            Self::Differs { .. } => "differs",
            Self::Exists { .. } => "exists",
            Self::Unreadable { .. } => "unreadable",
            Self::WriteFailed { .. } => "write-failed",
        }
    }

    /// The path the error names.
    pub fn path(&self) -> &Path {
        match self {
            Self::Symlink { path }
            | Self::NotADirectory { path, .. }
            | Self::NotRegular { path }
            | Self::Changed { path, .. }
            | Self::TooLarge { path, .. }
            | Self::BadName { path, .. }
            | Self::Differs { path }
            | Self::Exists { path }
            | Self::Unreadable { path, .. }
            | Self::WriteFailed { path, .. } => path,
        }
    }
}

type Result<T> = std::result::Result<T, DirFdError>;

/// What a listed entry is, as `fstatat(…, AT_SYMLINK_NOFOLLOW)` saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (never followed).
    Symlink,
    /// A device, socket or pipe.
    Other,
}

/// One entry of a directory listing.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's name (one component).
    pub name: OsString,
    /// What the entry is.
    pub kind: EntryKind,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// The owner's uid.
    pub uid: u32,
    /// The size in bytes.
    pub size: u64,
    dev: u64,
    ino: u64,
    version: Version,
}

impl Entry {
    /// Whether `later` (the same name, listed again) shows this entry unchanged: the same
    /// kind, device and inode, mode, owner, size, and modification and change times. How a
    /// walk confirms, after it read a tree, that nothing in it moved meanwhile.
    pub fn is_unchanged_in(&self, later: &Entry) -> bool {
        self.name == later.name
            && self.kind == later.kind
            && (self.dev, self.ino) == (later.dev, later.ino)
            && self.mode == later.mode
            && self.uid == later.uid
            && self.size == later.size
            && self.version == later.version
    }

    /// Everything [`Entry::is_unchanged_in`] compares but the name and the kind, as one line
    /// of text (`<dev> <ino> <mode octal> <uid> <size> <mtime s>.<ns> <ctime s>.<ns>`): two
    /// listings of the same entry give the same stamp exactly when it is unchanged.
    pub fn stamp(&self) -> String {
        let Version {
            size,
            modified: (ms, mns),
            changed: (cs, cns),
        } = self.version;
        format!(
            "{} {} {:o} {} {size} {ms}.{mns:09} {cs}.{cns:09}",
            self.dev, self.ino, self.mode, self.uid
        )
    }

    /// The entry's device and inode, as listed.
    pub fn identity(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// The entry's modification time as listed: seconds and nanoseconds since the epoch.
    pub fn modified_raw(&self) -> (i64, u64) {
        self.version.modified
    }

    /// When the entry was last modified, as listed (`None` for a time before the epoch).
    pub fn modified(&self) -> Option<std::time::SystemTime> {
        let (seconds, nanos) = self.version.modified;
        let seconds = u64::try_from(seconds).ok()?;
        let nanos = u32::try_from(nanos)
            .ok()
            .filter(|nanos| *nanos < 1_000_000_000)?;
        std::time::SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(seconds, nanos))
    }
}

/// What changes when a file's contents or status change: its size, and its modification and
/// change times to the nanosecond.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    size: i64,
    modified: (i64, u64),
    changed: (i64, u64),
}

/// How a read tells that the file changed under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Versioned {
    /// Its size, modification time or change time moved.
    Strictly,
    /// Its size or modification time moved: the caller checks the bytes by their digest.
    ByContent,
}

fn version_of(stat: &Stat) -> Version {
    Version {
        size: stat.st_size,
        modified: (stat.st_mtime, stat.st_mtime_nsec),
        changed: (stat.st_ctime, stat.st_ctime_nsec),
    }
}

/// A file's bytes and permission bits, read through one descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileBytes {
    /// The whole contents.
    pub bytes: Vec<u8>,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// What [`DirFd::read_file_chunks`] read: the file's length and permission bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileRead {
    /// The number of bytes read, which is the file's whole length.
    pub size: u64,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// How much [`DirFd::read_file_chunks`] hands over at a time.
const CHUNK_BYTES: usize = 64 * 1024;

/// What [`DirFd::write_once`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOnce {
    /// The file did not exist; it now holds the bytes.
    Created,
    /// The file existed with exactly these bytes; nothing was written.
    AlreadyThere,
}

/// An open directory, reached without following any symbolic link.
#[derive(Debug)]
pub struct DirFd {
    fd: OwnedFd,
    path: PathBuf,
    dev: u64,
    ino: u64,
}

/// The path of `name` in the directory at `prefix` (`/`-separated; empty, the walk's start).
pub(crate) fn joined(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

fn kind_of(stat: &Stat) -> EntryKind {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Directory,
        FileType::Symlink => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

fn identity(stat: &Stat) -> (u64, u64) {
    (stat.st_dev, stat.st_ino)
}

fn too_large(path: PathBuf, limit: u64) -> DirFdError {
    DirFdError::TooLarge {
        path,
        limit: format!("is larger than {limit} bytes"),
    }
}

/// Checks that the file read through `file` (`read` bytes) did not change since it was
/// opened with status `before`: a file written to while it was read gives bytes that were
/// never its contents.
fn check_unchanged(
    file: &std::fs::File,
    before: &Stat,
    read: u64,
    path: PathBuf,
    versioned: Versioned,
) -> Result<()> {
    let after = rustix::fs::fstat(file).map_err(|errno| DirFdError::Unreadable {
        path: path.clone(),
        detail: errno.to_string(),
    })?;
    let (mut now, mut then) = (version_of(&after), version_of(before));
    if versioned == Versioned::ByContent {
        (now.changed, then.changed) = ((0, 0), (0, 0));
    }
    if now != then || read != after.st_size as u64 {
        return Err(DirFdError::Changed {
            path,
            detail: "it was written to while it was read".into(),
        });
    }
    Ok(())
}

/// Checks that `name` is one path component.
fn check_name<'a>(dir: &Path, name: &'a OsStr) -> Result<&'a OsStr> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(DirFdError::BadName {
            path: dir.to_owned(),
            name: name.to_owned(),
        });
    }
    Ok(name)
}

/// A process-wide counter for temporary names, so two writers in one process never collide.
static TEMPORARY: AtomicU64 = AtomicU64::new(0);

const DIRECTORY_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

impl DirFd {
    /// Opens the directory at `path` one component at a time, from `/` (or the working
    /// directory for a relative path), each with `O_NOFOLLOW | O_DIRECTORY`: a symbolic link
    /// anywhere in `path` is [`DirFdError::Symlink`], naming the path up to it.
    pub fn open(path: &Path) -> Result<Self> {
        let start = if path.is_absolute() { "/" } else { "." };
        let fd = rustix::fs::open(start, DIRECTORY_FLAGS, Mode::empty()).map_err(|errno| {
            DirFdError::Unreadable {
                path: PathBuf::from(start),
                detail: errno.to_string(),
            }
        })?;
        let mut dir = Self::from_fd(fd, path.to_owned())?;
        let mut walked = PathBuf::from(start);
        for component in path.components() {
            let name: &OsStr = match component {
                Component::RootDir | Component::CurDir => continue,
                Component::ParentDir => OsStr::new(".."),
                Component::Normal(name) => name,
                Component::Prefix(_) => {
                    return Err(DirFdError::NotADirectory {
                        path: path.to_owned(),
                        detail: "is not a Unix path".into(),
                    });
                }
            };
            walked.push(name);
            dir = dir.open_component(name, &walked)?;
        }
        dir.path = path.to_owned();
        Ok(dir)
    }

    fn from_fd(fd: OwnedFd, path: PathBuf) -> Result<Self> {
        let stat = rustix::fs::fstat(&fd).map_err(|errno| DirFdError::Unreadable {
            path: path.clone(),
            detail: errno.to_string(),
        })?;
        let (dev, ino) = identity(&stat);
        Ok(Self { fd, path, dev, ino })
    }

    /// Opens `name` (a component, `..` allowed) below this directory as a directory, never
    /// following a link; `shown` is the path the error names.
    fn open_component(&self, name: &OsStr, shown: &Path) -> Result<Self> {
        match rustix::fs::openat(&self.fd, name, DIRECTORY_FLAGS, Mode::empty()) {
            Ok(fd) => Self::from_fd(fd, shown.to_owned()),
            Err(errno) => Err(self.classify_open_error(name, shown, errno, true)),
        }
    }

    /// Why opening `name` failed, in sf's terms: a link, not a directory, missing, or the
    /// system's own words.
    fn classify_open_error(
        &self,
        name: &OsStr,
        shown: &Path,
        errno: Errno,
        directory: bool,
    ) -> DirFdError {
        let path = shown.to_owned();
        if errno == Errno::LOOP || errno == Errno::NOTDIR || errno == Errno::MLINK {
            let stat = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW);
            if stat
                .as_ref()
                .is_ok_and(|stat| kind_of(stat) == EntryKind::Symlink)
            {
                return DirFdError::Symlink { path };
            }
        }
        if directory && (errno == Errno::NOTDIR || errno == Errno::NOENT) {
            return DirFdError::NotADirectory {
                path,
                detail: if errno == Errno::NOENT {
                    "does not exist".into()
                } else {
                    "is not a directory".into()
                },
            };
        }
        DirFdError::Unreadable {
            path,
            detail: errno.to_string(),
        }
    }

    /// The path this directory was reached by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this directory (for messages).
    pub fn shown(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// The directory's own status, through its descriptor.
    pub fn stat(&self) -> Result<Stat> {
        rustix::fs::fstat(&self.fd).map_err(|errno| DirFdError::Unreadable {
            path: self.path.clone(),
            detail: errno.to_string(),
        })
    }

    /// The entry `name`, not following a link, or `None` when there is none.
    pub fn entry(&self, name: &OsStr) -> Result<Option<Entry>> {
        let name = check_name(&self.path, name)?;
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(entry_of(name.to_owned(), &stat))),
            Err(Errno::NOENT) => Ok(None),
            Err(errno) => Err(DirFdError::Unreadable {
                path: self.shown(name),
                detail: errno.to_string(),
            }),
        }
    }

    /// Gives `each` every entry below this directory in walk order (depth first, each
    /// directory's entries by name bytes, a directory before what it holds) with its
    /// `/`-separated path from here (a name that is not UTF-8 shown lossily) and the
    /// directory holding it; links are given, never followed. Stops, answering false, when
    /// `each` answers false; a directory of more than `limit` entries is
    /// [`DirFdError::TooLarge`].
    pub fn walk(
        &self,
        limit: usize,
        each: &mut dyn FnMut(&DirFd, &str, &Entry) -> Result<bool>,
    ) -> Result<bool> {
        self.walk_below("", limit, each)
    }

    /// [`Self::walk`], each path given with `prefix` (this directory's path from where the
    /// walk started; empty at its start) before it.
    pub(crate) fn walk_below(
        &self,
        prefix: &str,
        limit: usize,
        each: &mut dyn FnMut(&DirFd, &str, &Entry) -> Result<bool>,
    ) -> Result<bool> {
        for entry in self.entries(limit)? {
            let path = joined(prefix, &entry.name.to_string_lossy());
            let going = each(self, &path, &entry)?
                && (entry.kind != EntryKind::Directory
                    || self.open_dir(&entry)?.walk_below(&path, limit, each)?);
            if !going {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Every entry of the directory except `.` and `..`, sorted by name bytes; more than
    /// `limit` entries is [`DirFdError::TooLarge`], found before they are all read.
    pub fn entries(&self, limit: usize) -> Result<Vec<Entry>> {
        let unreadable = |errno: Errno| DirFdError::Unreadable {
            path: self.path.clone(),
            detail: errno.to_string(),
        };
        let mut listing = rustix::fs::Dir::read_from(&self.fd).map_err(unreadable)?;
        let mut entries = Vec::new();
        while let Some(item) = listing.read() {
            let item = item.map_err(unreadable)?;
            let name = item.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if entries.len() >= limit {
                return Err(DirFdError::TooLarge {
                    path: self.path.clone(),
                    limit: format!("holds more than {limit} entries"),
                });
            }
            let name = OsString::from_vec(name.to_vec());
            let stat = match rustix::fs::statat(&self.fd, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                Err(Errno::NOENT) => {
                    return Err(DirFdError::Changed {
                        path: self.shown(&name),
                        detail: "it was removed after it was listed".into(),
                    });
                }
                Err(errno) => {
                    return Err(DirFdError::Unreadable {
                        path: self.shown(&name),
                        detail: errno.to_string(),
                    });
                }
            };
            entries.push(entry_of(name, &stat));
        }
        entries.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        Ok(entries)
    }

    /// Opens the listed directory `entry`, which must still be the directory listed (same
    /// device and inode) and not a link.
    pub fn open_dir(&self, entry: &Entry) -> Result<Self> {
        let name = check_name(&self.path, &entry.name)?;
        if entry.kind == EntryKind::Symlink {
            return Err(DirFdError::Symlink {
                path: self.shown(name),
            });
        }
        let dir = self.open_component(name, &self.shown(name))?;
        if (dir.dev, dir.ino) != (entry.dev, entry.ino) {
            return Err(DirFdError::Changed {
                path: dir.path,
                detail: "another directory took its place after it was listed".into(),
            });
        }
        Ok(dir)
    }

    /// Opens the directory `name` below this one, not following a link.
    pub fn open_dir_named(&self, name: &OsStr) -> Result<Self> {
        let name = check_name(&self.path, name)?;
        self.open_component(name, &self.shown(name))
    }

    /// Reads the listed regular file `entry` through a descriptor opened relative to this
    /// directory without following a link; it must still be the file listed, and at most
    /// `limit` bytes.
    pub fn read_file(&self, entry: &Entry, limit: u64) -> Result<FileBytes> {
        self.read(&entry.name, limit, Some((entry.dev, entry.ino)))
    }

    /// Reads the regular file `name` of this directory (not following a link), at most
    /// `limit` bytes.
    pub fn read_file_named(&self, name: &OsStr, limit: u64) -> Result<FileBytes> {
        self.read(name, limit, None)
    }

    /// Reads the listed regular file `entry` as [`DirFd::read_file`] does, but hands its bytes
    /// to `sink` a chunk at a time instead of keeping them: for files too large to hold in
    /// memory (a toolchain's libraries), hashed or copied as they are read. More than `limit`
    /// bytes is [`DirFdError::TooLarge`], found before `sink` sees the byte past it; an error
    /// from `sink` stops the read and is returned as it is. The caller must not use what
    /// `sink` saw unless this returns `Ok`: a file written to while it was read is `Changed`
    /// only once its last byte is read.
    pub fn read_file_chunks(
        &self,
        entry: &Entry,
        limit: u64,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<FileRead> {
        self.read_chunks(entry, limit, sink, Versioned::Strictly)
    }

    /// Reads a content-addressed file as [`DirFd::read_file_chunks`] does, for a caller that
    /// checks the bytes against the digest the file is named by, while other writers may
    /// hard-link the same file: a link made or removed changes the file's change time, so a
    /// change time that moved alone is not a change here (a size or a modification time that
    /// moved still is, and any other write shows in the digest).
    pub fn read_linked_file_chunks(
        &self,
        entry: &Entry,
        limit: u64,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<FileRead> {
        self.read_chunks(entry, limit, sink, Versioned::ByContent)
    }

    fn read_chunks(
        &self,
        entry: &Entry,
        limit: u64,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
        versioned: Versioned,
    ) -> Result<FileRead> {
        let name = check_name(&self.path, &entry.name)?;
        let (mut file, before, path) = self.open_file(name, Some((entry.dev, entry.ino)))?;
        // No larger than the file (and a byte to see its end), so small files cost little.
        let expected = usize::try_from(before.st_size).unwrap_or(0);
        let mut buffer = vec![0; expected.saturating_add(1).min(CHUNK_BYTES)];
        let mut size: u64 = 0;
        loop {
            let read = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    return Err(DirFdError::Unreadable {
                        path,
                        detail: error.to_string(),
                    });
                }
            };
            size += read as u64;
            if size > limit {
                return Err(too_large(path, limit));
            }
            sink(&buffer[..read])?;
        }
        check_unchanged(&file, &before, size, path, versioned)?;
        Ok(FileRead {
            size,
            mode: before.st_mode & 0o7777,
        })
    }

    fn read(&self, name: &OsStr, limit: u64, listed: Option<(u64, u64)>) -> Result<FileBytes> {
        let name = check_name(&self.path, name)?;
        let (file, before, path) = self.open_file(name, listed)?;
        let mut bytes = Vec::new();
        (&file)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|error| DirFdError::Unreadable {
                path: path.clone(),
                detail: error.to_string(),
            })?;
        if bytes.len() as u64 > limit {
            return Err(too_large(path, limit));
        }
        check_unchanged(
            &file,
            &before,
            bytes.len() as u64,
            path,
            Versioned::Strictly,
        )?;
        Ok(FileBytes {
            bytes,
            mode: before.st_mode & 0o7777,
        })
    }

    /// Opens the regular file `name` for reading without following a link; when `listed` is
    /// given, it must still be the file of that device and inode. Returns the file, its
    /// status when opened and its path (for messages).
    fn open_file(
        &self,
        name: &OsStr,
        listed: Option<(u64, u64)>,
    ) -> Result<(std::fs::File, Stat, PathBuf)> {
        let path = self.shown(name);
        let fd = rustix::fs::openat(&self.fd, name, READ_FLAGS, Mode::empty())
            .map_err(|errno| self.classify_open_error(name, &path, errno, false))?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| DirFdError::Unreadable {
            path: path.clone(),
            detail: errno.to_string(),
        })?;
        if kind_of(&stat) != EntryKind::File {
            return Err(DirFdError::NotRegular { path });
        }
        if listed.is_some_and(|listed| listed != identity(&stat)) {
            return Err(DirFdError::Changed {
                path,
                detail: "another file took its place after it was listed".into(),
            });
        }
        Ok((std::fs::File::from(fd), stat, path))
    }

    /// The target of the listed symbolic link `entry`. A link replaced by something else (or
    /// by another link) after it was listed is `Changed`.
    pub fn read_link(&self, entry: &Entry) -> Result<OsString> {
        let name = check_name(&self.path, &entry.name)?;
        let changed = || DirFdError::Changed {
            path: self.shown(name),
            detail: "it is no longer the symbolic link that was listed".into(),
        };
        let target = rustix::fs::readlinkat(&self.fd, name, Vec::new())
            .map(|target| OsString::from_vec(target.into_bytes()))
            .map_err(|errno| match errno {
                rustix::io::Errno::INVAL => changed(),
                errno => DirFdError::Unreadable {
                    path: self.shown(name),
                    detail: errno.to_string(),
                },
            })?;
        // A link's target never changes in place, so the same inode after the read, of the
        // target's length, is the link that was listed.
        match self.entry(name)? {
            Some(now)
                if (now.dev, now.ino) == (entry.dev, entry.ino)
                    && now.size == target.len() as u64 =>
            {
                Ok(target)
            }
            _ => Err(changed()),
        }
    }

    /// Creates the directory `name` (mode `mode`, less the umask), which must not exist, and
    /// opens it without following a link.
    pub fn create_dir(&self, name: &OsStr, mode: u32) -> Result<Self> {
        let name = check_name(&self.path, name)?;
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(self.existing(name)),
            Err(errno) => {
                return Err(DirFdError::WriteFailed {
                    path: self.shown(name),
                    detail: errno.to_string(),
                });
            }
        }
        self.open_dir_named(name)
    }

    /// Opens the directory `name`, creating it (mode `mode`, less the umask) when there is
    /// none; a link at `name` is [`DirFdError::Symlink`].
    pub fn ensure_dir(&self, name: &OsStr, mode: u32) -> Result<Self> {
        let name = check_name(&self.path, name)?;
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(Errno::EXIST) => self.open_dir_named(name),
            Err(errno) => Err(DirFdError::WriteFailed {
                path: self.shown(name),
                detail: errno.to_string(),
            }),
        }
    }

    /// Opens the directory at `relative` (`/`-separated components) below this one, creating
    /// each missing component with [`DirFd::ensure_dir`].
    pub fn ensure_dirs(&self, relative: &str, mode: u32) -> Result<Self> {
        let mut components = relative.split('/');
        let first = components.next().unwrap_or_default();
        let mut dir = self.ensure_dir(OsStr::new(first), mode)?;
        for name in components {
            dir = dir.ensure_dir(OsStr::new(name), mode)?;
        }
        Ok(dir)
    }

    /// The error for a name that exists where sf was to create it: a link says so.
    fn existing(&self, name: &OsStr) -> DirFdError {
        let path = self.shown(name);
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if kind_of(&stat) == EntryKind::Symlink => DirFdError::Symlink { path },
            _ => DirFdError::Exists { path },
        }
    }

    /// Creates the file `name` (mode `mode`, less the umask) with `O_CREAT | O_EXCL |
    /// O_NOFOLLOW`, writes `bytes` and syncs it. Anything at `name` already, a link included,
    /// is refused and left as it is.
    pub fn create_file(&self, name: &OsStr, bytes: &[u8], mode: u32) -> Result<()> {
        let mut file = self.create_file_writer(name, mode)?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|error| DirFdError::WriteFailed {
                path: self.shown(name),
                detail: error.to_string(),
            })
    }

    /// Creates the file `name` (mode `mode`, less the umask) as [`DirFd::create_file`] does
    /// and returns it open for writing, for contents written a piece at a time; the caller
    /// writes and syncs it.
    pub fn create_file_writer(&self, name: &OsStr, mode: u32) -> Result<std::fs::File> {
        let name = check_name(&self.path, name)?;
        let flags = OFlags::WRONLY
            .union(OFlags::CREATE)
            .union(OFlags::EXCL)
            .union(OFlags::NOFOLLOW)
            .union(OFlags::NOCTTY)
            .union(OFlags::CLOEXEC);
        match rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(mode)) {
            Ok(fd) => Ok(std::fs::File::from(fd)),
            Err(Errno::EXIST) => Err(self.existing(name)),
            Err(errno) => Err(DirFdError::WriteFailed {
                path: self.shown(name),
                detail: errno.to_string(),
            }),
        }
    }

    /// Creates the symbolic link `name` to `target` with `symlinkat` relative to this
    /// directory. The target is stored as given and never followed here. Anything at `name`
    /// already (a file, a directory, a link) is refused and left as it is: a link never takes
    /// the place of a directory, so nothing written later below that name can be redirected.
    pub fn create_symlink(&self, name: &OsStr, target: &OsStr) -> Result<()> {
        let name = check_name(&self.path, name)?;
        match rustix::fs::symlinkat(target, &self.fd, name) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(self.existing(name)),
            Err(errno) => Err(DirFdError::WriteFailed {
                path: self.shown(name),
                detail: errno.to_string(),
            }),
        }
    }

    /// Creates an overlay whiteout `name` (a character device 0:0, which hides the entry of
    /// that name in the layers below, file or directory) relative to this directory; the
    /// kernel lets any user make one. Anything at `name` already is refused.
    pub fn create_whiteout(&self, name: &OsStr) -> Result<()> {
        let name = check_name(&self.path, name)?;
        match rustix::fs::mknodat(
            &self.fd,
            name,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            rustix::fs::makedev(0, 0),
        ) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(self.existing(name)),
            Err(errno) => Err(DirFdError::WriteFailed {
                path: self.shown(name),
                detail: errno.to_string(),
            }),
        }
    }

    /// Writes the file `name` once: when there is none, `bytes` are written under a fresh
    /// temporary name, synced, and renamed into place only if `name` is still free
    /// (`RENAME_NOREPLACE`), so the file appears whole or not at all; when it exists, it is
    /// read without following a link and must hold exactly `bytes`
    /// ([`WriteOnce::AlreadyThere`]), else [`DirFdError::Differs`]. A link at `name` is
    /// [`DirFdError::Symlink`]. Nothing existing is ever changed.
    pub fn write_once(&self, name: &OsStr, bytes: &[u8], mode: u32) -> Result<WriteOnce> {
        let name = check_name(&self.path, name)?;
        if self.entry(name)?.is_none() {
            let temporary = OsString::from(format!(
                ".sf-write-{}-{}",
                std::process::id(),
                TEMPORARY.fetch_add(1, Ordering::Relaxed)
            ));
            self.create_file(&temporary, bytes, mode)?;
            match rustix::fs::renameat_with(
                &self.fd,
                &temporary,
                &self.fd,
                name,
                RenameFlags::NOREPLACE,
            ) {
                Ok(()) => return self.sync().map(|()| WriteOnce::Created),
                Err(Errno::EXIST) => {
                    let _ = rustix::fs::unlinkat(&self.fd, &temporary, AtFlags::empty());
                }
                Err(errno) => {
                    let _ = rustix::fs::unlinkat(&self.fd, &temporary, AtFlags::empty());
                    return Err(DirFdError::WriteFailed {
                        path: self.shown(name),
                        detail: errno.to_string(),
                    });
                }
            }
        }
        let existing = self
            .read_file_named(name, bytes.len() as u64)
            .map_err(|error| {
                match error {
                    // Longer than the bytes to write: it differs.
                    DirFdError::TooLarge { path, .. } => DirFdError::Differs { path },
                    other => other,
                }
            })?;
        if existing.bytes == bytes {
            Ok(WriteOnce::AlreadyThere)
        } else {
            Err(DirFdError::Differs {
                path: self.shown(name),
            })
        }
    }

    /// Makes `to` in `target` a second name (a hard link) of the file `from` in this
    /// directory, neither followed if it is a link; anything at `to` already is refused
    /// ([`DirFdError::Exists`]). Nothing is synced: a caller that links many files syncs
    /// once after.
    pub fn hard_link(&self, from: &OsStr, target: &DirFd, to: &OsStr) -> Result<()> {
        let from = check_name(&self.path, from)?;
        let to = check_name(&target.path, to)?;
        match rustix::fs::linkat(&self.fd, from, &target.fd, to, AtFlags::empty()) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(target.existing(to)),
            Err(errno) => Err(DirFdError::WriteFailed {
                path: target.shown(to),
                detail: errno.to_string(),
            }),
        }
    }

    /// Renames `from` in this directory to `to` in `target`. With `replace_empty_directory`,
    /// an empty directory at `to` is replaced (what `rename(2)` does); without it, anything at
    /// `to` is refused. A link at `to` is never replaced: renaming a directory onto a
    /// non-directory fails.
    pub fn rename(
        &self,
        from: &OsStr,
        target: &DirFd,
        to: &OsStr,
        replace_empty_directory: bool,
    ) -> Result<()> {
        let from = check_name(&self.path, from)?;
        let to = check_name(&target.path, to)?;
        let flags = if replace_empty_directory {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        match rustix::fs::renameat_with(&self.fd, from, &target.fd, to, flags) {
            Ok(()) => target.sync(),
            Err(Errno::EXIST) => Err(target.existing(to)),
            Err(Errno::NOTDIR) => Err(match target.existing(to) {
                symlink @ DirFdError::Symlink { .. } => symlink,
                _ => DirFdError::NotADirectory {
                    path: target.shown(to),
                    detail: "is not a directory".into(),
                },
            }),
            Err(errno) => Err(DirFdError::WriteFailed {
                path: target.shown(to),
                detail: errno.to_string(),
            }),
        }
    }

    /// Removes `name` and, when it is a directory, everything below it, through descriptors
    /// (a link is removed, never followed). For cleaning up what sf itself created: a
    /// directory sf made read-only (0555) is made writable (0700) first, since nothing can be
    /// removed from it otherwise.
    pub fn remove_tree(&self, name: &OsStr) -> Result<()> {
        let name = check_name(&self.path, name)?;
        let failed = |errno: Errno| DirFdError::WriteFailed {
            path: self.shown(name),
            detail: errno.to_string(),
        };
        match self.entry(name)? {
            None => Ok(()),
            Some(entry) if entry.kind == EntryKind::Directory => {
                let dir = self.open_dir(&entry)?;
                if entry.mode & 0o300 != 0o300 {
                    dir.set_mode(0o700)?;
                }
                for inner in dir.entries(usize::MAX)? {
                    dir.remove_tree(&inner.name)?;
                }
                rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR).map_err(failed)
            }
            Some(_) => rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()).map_err(failed),
        }
    }

    /// Syncs the directory itself (its entries), so that a created name is durable.
    pub fn sync(&self) -> Result<()> {
        rustix::fs::fsync(&self.fd).map_err(|errno| DirFdError::WriteFailed {
            path: self.path.clone(),
            detail: errno.to_string(),
        })
    }

    /// Sets the permission bits of the directory itself.
    pub fn set_mode(&self, mode: u32) -> Result<()> {
        rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(mode)).map_err(|errno| {
            DirFdError::WriteFailed {
                path: self.path.clone(),
                detail: errno.to_string(),
            }
        })
    }
}

impl AsFd for DirFd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn entry_of(name: OsString, stat: &Stat) -> Entry {
    let (dev, ino) = identity(stat);
    Entry {
        name,
        kind: kind_of(stat),
        mode: stat.st_mode & 0o7777,
        uid: stat.st_uid,
        size: stat.st_size as u64,
        dev,
        ino,
        version: version_of(stat),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_link_anywhere_in_the_opened_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("real/inner")).unwrap();
        symlink(root.join("real"), root.join("link")).unwrap();
        assert!(DirFd::open(&root.join("real/inner")).is_ok());
        let error = DirFd::open(&root.join("link/inner")).unwrap_err();
        assert_eq!(error.code(), "symlink", "{error}");
        assert_eq!(error.path(), root.join("link"));
        let error = DirFd::open(&root.join("link")).unwrap_err();
        assert_eq!(error.code(), "symlink", "{error}");
        fs::write(root.join("file"), "x").unwrap();
        assert_eq!(
            DirFd::open(&root.join("file")).unwrap_err().code(),
            "not-a-directory"
        );
        assert_eq!(
            DirFd::open(&root.join("missing")).unwrap_err().code(),
            "not-a-directory"
        );
    }

    #[test]
    fn listing_and_reading_go_through_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir(root.join("sub")).unwrap();
        fs::write(root.join("sub/b"), "bee").unwrap();
        fs::write(root.join("a"), "ay").unwrap();
        symlink("/etc/passwd", root.join("l")).unwrap();
        let top = DirFd::open(&root).unwrap();
        let entries = top.entries(10).unwrap();
        let names: Vec<&OsStr> = entries.iter().map(|e| e.name.as_os_str()).collect();
        assert_eq!(names, ["a", "l", "sub"]);
        assert_eq!(entries[1].kind, EntryKind::Symlink);
        assert_eq!(top.read_file(&entries[0], 10).unwrap().bytes, b"ay");
        assert_eq!(top.read_link(&entries[1]).unwrap(), "/etc/passwd");
        assert_eq!(
            top.read_file(&entries[1], 10).unwrap_err().code(),
            "symlink"
        );
        let sub = top.open_dir(&entries[2]).unwrap();
        let inner = sub.entries(10).unwrap();
        assert_eq!(sub.read_file(&inner[0], 3).unwrap().bytes, b"bee");
        assert_eq!(sub.read_file(&inner[0], 2).unwrap_err().code(), "too-large");
        assert_eq!(top.entries(2).unwrap_err().code(), "too-large");
        // The directory replaced by a link after it was listed.
        fs::rename(root.join("sub"), root.join("moved")).unwrap();
        symlink(root.join("moved"), root.join("sub")).unwrap();
        assert_eq!(top.open_dir(&entries[2]).unwrap_err().code(), "symlink");
        // ... or by another directory.
        fs::remove_file(root.join("sub")).unwrap();
        fs::create_dir(root.join("sub")).unwrap();
        assert_eq!(
            top.open_dir(&entries[2]).unwrap_err().code(),
            "changed-while-read"
        );
        // A file replaced after it was listed (the new one made first, so that it cannot
        // reuse the old inode number).
        fs::write(root.join("a.new"), "ay").unwrap();
        fs::rename(root.join("a.new"), root.join("a")).unwrap();
        assert_eq!(
            top.read_file(&entries[0], 10).unwrap_err().code(),
            "changed-while-read"
        );
        for bad in ["", ".", "..", "a/b"] {
            assert_eq!(
                top.read_file_named(OsStr::new(bad), 1).unwrap_err().code(),
                "bad-path"
            );
        }
    }

    #[test]
    fn writes_never_follow_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let outside = root.join("outside");
        fs::create_dir(&outside).unwrap();
        let work = root.join("work");
        fs::create_dir(&work).unwrap();
        let top = DirFd::open(&work).unwrap();
        symlink(outside.join("planted"), work.join("file")).unwrap();
        symlink(&outside, work.join("dir")).unwrap();
        let error = top
            .create_file(OsStr::new("file"), b"x", 0o644)
            .unwrap_err();
        assert_eq!(error.code(), "symlink", "{error}");
        assert_eq!(error.path(), work.join("file"));
        let error = top.write_once(OsStr::new("file"), b"x", 0o644).unwrap_err();
        assert_eq!(error.code(), "symlink", "{error}");
        assert_eq!(
            top.ensure_dirs("dir/x", 0o755).unwrap_err().code(),
            "symlink"
        );
        assert_eq!(
            top.create_dir(OsStr::new("dir"), 0o755).unwrap_err().code(),
            "symlink"
        );
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            0,
            "nothing outside"
        );

        assert_eq!(
            top.write_once(OsStr::new("once"), b"one", 0o600).unwrap(),
            WriteOnce::Created
        );
        assert_eq!(
            top.write_once(OsStr::new("once"), b"one", 0o600).unwrap(),
            WriteOnce::AlreadyThere
        );
        for other in [&b"two"[..], b"on", b"one!"] {
            assert_eq!(
                top.write_once(OsStr::new("once"), other, 0o600)
                    .unwrap_err()
                    .code(),
                "differs"
            );
        }
        assert_eq!(fs::read(work.join("once")).unwrap(), b"one");
        let nested = top.ensure_dirs("a/b", 0o755).unwrap();
        nested.create_file(OsStr::new("c"), b"c", 0o644).unwrap();
        assert_eq!(fs::read(work.join("a/b/c")).unwrap(), b"c");
        top.remove_tree(OsStr::new("a")).unwrap();
        top.remove_tree(OsStr::new("dir")).unwrap();
        assert!(!work.join("a").exists());
        assert!(outside.exists(), "removing a link never follows it");
        let names: Vec<OsString> = top
            .entries(10)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["file", "once"], "no temporary file is left");
    }

    /// The process's file-mode creation mask, as the kernel reports it.
    fn umask() -> u32 {
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix("Umask:"))
            .expect("/proc/self/status states the umask");
        u32::from_str_radix(line.trim(), 8).unwrap()
    }

    #[test]
    fn files_are_created_with_the_mode_asked_less_the_umask() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let top = DirFd::open(dir.path()).unwrap();
        let mask = umask();
        for (name, mode) in [("run.sh", 0o755), ("data.txt", 0o644)] {
            top.create_file(OsStr::new(name), b"x", mode).unwrap();
            let found = fs::symlink_metadata(dir.path().join(name)).unwrap();
            assert!(found.is_file());
            assert_eq!(found.permissions().mode() & 0o7777, mode & !mask, "{name}");
        }
        let run = fs::metadata(dir.path().join("run.sh")).unwrap();
        assert_ne!(run.permissions().mode() & 0o100, 0, "the owner may execute");
        let data = fs::metadata(dir.path().join("data.txt")).unwrap();
        assert_eq!(data.permissions().mode() & 0o111, 0, "nobody may execute");
    }

    #[test]
    fn links_are_made_relative_to_the_directory_and_never_replace_anything() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let work = root.join("work");
        fs::create_dir(&work).unwrap();
        let top = DirFd::open(&work).unwrap();
        let sub = top.create_dir(OsStr::new("sub"), 0o755).unwrap();
        sub.create_file(OsStr::new("target.txt"), b"t", 0o644)
            .unwrap();
        sub.create_symlink(OsStr::new("link"), OsStr::new("target.txt"))
            .unwrap();
        assert_eq!(
            fs::read_link(work.join("sub/link")).unwrap(),
            Path::new("target.txt")
        );
        assert_eq!(fs::read(work.join("sub/link")).unwrap(), b"t");
        // A dangling target, or one outside, is stored as given: the caller checks targets.
        top.create_symlink(OsStr::new("dangling"), OsStr::new("no/such"))
            .unwrap();
        assert_eq!(
            fs::read_link(work.join("dangling")).unwrap(),
            Path::new("no/such")
        );

        // An existing directory is never replaced by a link, nor is a file or a link.
        fs::create_dir(work.join("dir")).unwrap();
        fs::write(work.join("dir/inside"), "kept").unwrap();
        for (name, code) in [
            ("dir", "exists"),
            ("sub", "exists"),
            ("sub/link", "bad-path"),
            ("dangling", "symlink"),
        ] {
            let error = top
                .create_symlink(OsStr::new(name), OsStr::new("elsewhere"))
                .unwrap_err();
            assert_eq!(error.code(), code, "{name}: {error}");
        }
        let error = sub
            .create_symlink(OsStr::new("target.txt"), OsStr::new("x"))
            .unwrap_err();
        assert_eq!(error.code(), "exists", "{error}");
        assert_eq!(error.path(), work.join("sub/target.txt"));
        assert!(fs::symlink_metadata(work.join("dir")).unwrap().is_dir());
        assert_eq!(fs::read(work.join("dir/inside")).unwrap(), b"kept");
        assert_eq!(fs::read(work.join("sub/target.txt")).unwrap(), b"t");
        assert_eq!(
            fs::read_link(work.join("dangling")).unwrap(),
            Path::new("no/such")
        );

        // The directory's own descriptor is used: a link put in place of its path later
        // does not redirect where the link is made.
        fs::rename(work.join("sub"), root.join("moved")).unwrap();
        symlink(&root, work.join("sub")).unwrap();
        sub.create_symlink(OsStr::new("second"), OsStr::new("target.txt"))
            .unwrap();
        assert!(fs::symlink_metadata(root.join("moved/second")).is_ok());
        assert!(fs::symlink_metadata(root.join("second")).is_err());
        // Nor is a file created beneath a link: a link where a directory was is refused.
        assert_eq!(
            top.ensure_dirs("sub/deeper", 0o755).unwrap_err().code(),
            "symlink"
        );
    }

    #[test]
    fn large_files_are_read_in_chunks_and_a_write_during_the_read_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let big: Vec<u8> = (0..3 * CHUNK_BYTES + 17).map(|n| (n % 251) as u8).collect();
        fs::write(root.join("big"), &big).unwrap();
        fs::write(root.join("small"), "s").unwrap();
        let top = DirFd::open(&root).unwrap();
        let entries = top.entries(10).unwrap();
        let mut seen = Vec::new();
        let mut chunks = 0;
        let read = top
            .read_file_chunks(&entries[0], big.len() as u64, &mut |chunk| {
                chunks += 1;
                seen.extend_from_slice(chunk);
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, big);
        assert!(chunks >= 4, "{chunks} chunks");
        assert_eq!(read.size, big.len() as u64);
        // One byte over the limit is refused before the sink sees it.
        let mut total = 0;
        let error = top
            .read_file_chunks(&entries[0], big.len() as u64 - 1, &mut |chunk| {
                total += chunk.len();
                Ok(())
            })
            .unwrap_err();
        assert_eq!(error.code(), "too-large", "{error}");
        assert!(total < big.len());
        // The sink's own error stops the read and comes back as it is.
        let error = top
            .read_file_chunks(&entries[1], 10, &mut |_| {
                Err(DirFdError::WriteFailed {
                    path: "sink".into(),
                    detail: "full".into(),
                })
            })
            .unwrap_err();
        assert_eq!(error.code(), "write-failed");
        // A file appended to (once) while it is read.
        let mut appended = false;
        let error = top
            .read_file_chunks(&entries[0], u64::MAX, &mut |_| {
                if !appended {
                    appended = true;
                    let mut file = fs::OpenOptions::new()
                        .append(true)
                        .open(root.join("big"))
                        .unwrap();
                    file.write_all(b"more").unwrap();
                }
                Ok(())
            })
            .unwrap_err();
        assert_eq!(error.code(), "changed-while-read", "{error}");
        // A file replaced after it was listed.
        fs::write(root.join("small.new"), "s").unwrap();
        fs::rename(root.join("small.new"), root.join("small")).unwrap();
        let error = top
            .read_file_chunks(&entries[1], 10, &mut |_| Ok(()))
            .unwrap_err();
        assert_eq!(error.code(), "changed-while-read", "{error}");
    }

    /// Another writer hard-linking a content-addressed file while it is read moves only its
    /// change time: a strict read takes that for a change, a read by content does not; a
    /// write is a change to both.
    #[test]
    fn a_link_made_while_a_stored_file_is_read_is_a_change_only_to_a_strict_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::write(root.join("stored"), "bytes of a stored file").unwrap();
        let top = DirFd::open(&root).unwrap();
        let entries = top.entries(10).unwrap();
        let mut links = 0;
        let mut link_while_read = |_: &[u8]| {
            links += 1;
            // The change time has a clock tick's resolution: wait for it to move.
            std::thread::sleep(std::time::Duration::from_millis(20));
            fs::hard_link(root.join("stored"), root.join(format!("link{links}"))).unwrap();
            Ok(())
        };
        let error = top
            .read_file_chunks(&entries[0], u64::MAX, &mut link_while_read)
            .unwrap_err();
        assert_eq!(error.code(), "changed-while-read", "{error}");
        let read = top
            .read_linked_file_chunks(&entries[0], u64::MAX, &mut link_while_read)
            .unwrap();
        assert_eq!(read.size, 22);
        let mut appended = false;
        let error = top
            .read_linked_file_chunks(&entries[0], u64::MAX, &mut |_| {
                if !appended {
                    appended = true;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    let mut file = fs::OpenOptions::new()
                        .append(true)
                        .open(root.join("stored"))
                        .unwrap();
                    file.write_all(b"!").unwrap();
                }
                Ok(())
            })
            .unwrap_err();
        assert_eq!(error.code(), "changed-while-read", "{error}");
    }

    #[test]
    fn a_later_listing_says_whether_an_entry_changed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::write(root.join("a"), "one").unwrap();
        symlink("a", root.join("l")).unwrap();
        let top = DirFd::open(&root).unwrap();
        let first = top.entries(10).unwrap();
        let again = top.entries(10).unwrap();
        assert!(first[0].is_unchanged_in(&again[0]));
        assert!(first[1].is_unchanged_in(&again[1]));
        assert!(!first[0].is_unchanged_in(&again[1]));
        // Appended to: the size moves (whatever the clock's resolution).
        fs::OpenOptions::new()
            .append(true)
            .open(root.join("a"))
            .unwrap()
            .write_all(b"two")
            .unwrap();
        let later = top.entries(10).unwrap();
        assert!(!first[0].is_unchanged_in(&later[0]));
        // A link replaced by another link (made first, so that it cannot reuse the old
        // inode number).
        symlink("b", root.join("l.new")).unwrap();
        fs::rename(root.join("l.new"), root.join("l")).unwrap();
        let later = top.entries(10).unwrap();
        assert!(!first[1].is_unchanged_in(&later[1]));
        assert_eq!(top.read_link(&later[1]).unwrap(), "b");
        assert_eq!(
            top.read_link(&first[1]).unwrap_err().code(),
            "changed-while-read"
        );
    }

    #[test]
    fn files_written_in_pieces_are_created_exclusively_and_read_only_trees_are_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let top = DirFd::open(&root).unwrap();
        let mut file = top.create_file_writer(OsStr::new("f"), 0o600).unwrap();
        file.write_all(b"one ").unwrap();
        file.write_all(b"two").unwrap();
        drop(file);
        assert_eq!(fs::read(root.join("f")).unwrap(), b"one two");
        assert_eq!(
            top.create_file_writer(OsStr::new("f"), 0o600)
                .unwrap_err()
                .code(),
            "exists"
        );
        symlink(root.join("f"), root.join("l")).unwrap();
        assert_eq!(
            top.create_file_writer(OsStr::new("l"), 0o600)
                .unwrap_err()
                .code(),
            "symlink"
        );
        // A tree sf made read-only is still removed whole.
        let sub = top.create_dir(OsStr::new("sub"), 0o755).unwrap();
        let inner = sub.create_dir(OsStr::new("inner"), 0o755).unwrap();
        inner.create_file(OsStr::new("x"), b"x", 0o444).unwrap();
        inner.set_mode(0o555).unwrap();
        sub.set_mode(0o555).unwrap();
        top.remove_tree(OsStr::new("sub")).unwrap();
        assert!(!root.join("sub").exists());
        let mode = fs::metadata(&root).unwrap().permissions().mode();
        assert_ne!(mode & 0o200, 0, "the parent is left as it was");
    }
}
