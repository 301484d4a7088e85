//! The artifact: one walk of a capability directory that yields its portable integrity
//! digest (`oats.tree-exec.v1`) and the exact bytes a run carries.
//!
//! The digest, as oats's portable digest defines it:
//! 1. hash `"oats.tree-exec.v1\0"`;
//! 2. collect every regular file and symbolic link (links are not followed), with paths
//!    joined by `/` and required to be UTF-8;
//! 3. sort the records by the UTF-8 bytes of their full relative path;
//! 4. hash each record: a file as `'F'`, u64be(path length), path, one byte (1 when the
//!    owner-exec bit is set), u64be(content length), content; a link as `'S'`,
//!    u64be(path length), path, u64be(target length), target.
//!
//! Special files are refused; empty directories do not count. Limits: 256 MiB of content,
//! depth 64, 100 000 entries. The walk goes through directory descriptors
//! ([`sf_io::dir_fd`]): no link is followed in the root's path or below it; each directory
//! and file is opened by name relative to its directory with `O_NOFOLLOW` and must be the
//! entry listed (device and inode), and a file must keep its size, modification and change
//! time while it is read, else `integrity-drift`.
//!
//! The value is written `oats.tree-exec.v1:sha256-<hex>` (the `format:value` form of oats's
//! approval ledger).
//!
//! The program a run gets is built from the same records, never from a second read: every
//! regular file, and every link resolved inside the record set (a file link becomes a copy of
//! its target's bytes; a directory link, the files below its target, with a stack of
//! directories being expanded stopping cycles). So the bytes that run are the bytes that
//! were hashed.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use sf_contracts::snapshot::{MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SnapshotFile};
use sf_contracts::tree_path;
use sf_io::dir_fd::{DirFd, DirFdError, EntryKind};
use sha2::{Digest as _, Sha256};

use crate::error::{ErrorCode, OatsError, Result};

/// The portable tree digest format.
pub const TREE_FORMAT: &str = "oats.tree-exec.v1";
/// The most content bytes one walk hashes.
pub const MAX_ARTIFACT_BYTES: u64 = 256 * 1024 * 1024;
/// The deepest directory nesting walked.
pub const MAX_ARTIFACT_DEPTH: usize = 64;
/// The most entries walked.
pub const MAX_ARTIFACT_ENTRIES: usize = 100_000;
/// The directory of a run's program that holds the artifact.
pub const PROGRAM_ARTIFACT_DIR: &str = "artifact";
/// Symbolic links followed while resolving one path inside the records.
const MAX_LINK_HOPS: usize = 40;

/// One entry of the artifact.
#[derive(Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file.
    File {
        /// Whether the owner-exec bit is set (the one mode bit the digest hashes).
        executable: bool,
        /// The file's bytes, as hashed.
        content: Vec<u8>,
    },
    /// A symbolic link, not followed by the walk.
    Link {
        /// The link's target text, as read.
        target: String,
    },
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File {
                executable,
                content,
            } => write!(f, "File(exec={executable}, {} bytes)", content.len()),
            Self::Link { target } => write!(f, "Link({target:?})"),
        }
    }
}

/// The walked artifact: its records by relative path, and its integrity.
#[derive(Clone, Debug)]
pub struct Artifact {
    /// The canonical root.
    pub root: std::path::PathBuf,
    /// Every file and link, by relative path.
    pub entries: BTreeMap<String, Entry>,
    /// `oats.tree-exec.v1:sha256-<hex>`.
    pub integrity: String,
}

/// Whether `text` is an integrity value in the form this module writes.
pub fn is_integrity(text: &str) -> bool {
    text.strip_prefix(TREE_FORMAT)
        .and_then(|rest| rest.strip_prefix(":sha256-"))
        .is_some_and(|hex| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

fn drift(path: &Path, what: &str) -> OatsError {
    OatsError::new(
        ErrorCode::IntegrityDrift,
        path.display().to_string(),
        format!("{what} while it was being hashed; retry once the capability directory is quiet"),
    )
}

/// An oats error for a descriptor-based access that failed: a change while hashing is
/// `integrity-drift`, a special file `unsupported-file`, a limit `artifact-too-large`.
pub(crate) fn dir_fd_error(error: DirFdError) -> OatsError {
    let subject = error.path().display().to_string();
    match error {
        DirFdError::Changed { .. } => drift(error.path(), "the entry was replaced"),
        DirFdError::Symlink { .. } => drift(
            error.path(),
            "a symbolic link took the place of a directory or file",
        ),
        DirFdError::NotRegular { .. } => OatsError::new(
            ErrorCode::UnsupportedFile,
            subject,
            "is a FIFO, socket or device; an artifact holds only files, directories and links",
        ),
        DirFdError::TooLarge { limit, .. } => {
            OatsError::new(ErrorCode::ArtifactTooLarge, subject, limit)
        }
        other => OatsError::new(ErrorCode::Io, subject, other.to_string()),
    }
}

/// Walks `root` (a canonical directory) and digests it. The walk goes through directory
/// descriptors ([`sf_io::dir_fd`]): `root` is opened without following a link in any
/// component, every entry is opened by name relative to its directory without following
/// links and must be the entry listed, so a directory swapped for a link mid-walk is
/// `integrity-drift`, never followed.
pub fn walk(root: &Path) -> Result<Artifact> {
    let mut entries = BTreeMap::new();
    let mut total: u64 = 0;
    let mut count = 0usize;
    let top = DirFd::open(root).map_err(dir_fd_error)?;
    let mut stack = vec![(top, String::new(), 0usize)];
    while let Some((directory, prefix, depth)) = stack.pop() {
        if depth > MAX_ARTIFACT_DEPTH {
            return Err(OatsError::new(
                ErrorCode::ArtifactTooLarge,
                directory.path().display().to_string(),
                format!("the artifact nests deeper than {MAX_ARTIFACT_DEPTH} directories"),
            ));
        }
        let too_many = || {
            OatsError::new(
                ErrorCode::ArtifactTooLarge,
                root.display().to_string(),
                format!("the artifact holds more than {MAX_ARTIFACT_ENTRIES} entries"),
            )
        };
        let listing = directory
            .entries(MAX_ARTIFACT_ENTRIES - count + 1)
            .map_err(|error| match error {
                DirFdError::TooLarge { .. } => too_many(),
                other => dir_fd_error(other),
            })?;
        for item in listing {
            count += 1;
            if count > MAX_ARTIFACT_ENTRIES {
                return Err(too_many());
            }
            let path = directory.shown(&item.name);
            let Ok(name) = std::str::from_utf8(item.name.as_bytes()) else {
                return Err(OatsError::new(
                    ErrorCode::UnsupportedFile,
                    path.display().to_string(),
                    "the name is not UTF-8; the portable digest refuses it",
                ));
            };
            let relative = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            };
            match item.kind {
                EntryKind::Directory => {
                    let below = directory.open_dir(&item).map_err(dir_fd_error)?;
                    stack.push((below, relative, depth + 1));
                }
                EntryKind::Symlink => {
                    let target = directory.read_link(&item).map_err(dir_fd_error)?;
                    let Ok(target) = std::str::from_utf8(target.as_bytes()) else {
                        return Err(OatsError::new(
                            ErrorCode::UnsupportedFile,
                            relative,
                            "the link target is not UTF-8",
                        ));
                    };
                    entries.insert(
                        relative,
                        Entry::Link {
                            target: target.to_owned(),
                        },
                    );
                }
                EntryKind::File => {
                    let read = directory
                        .read_file(&item, MAX_ARTIFACT_BYTES - total)
                        .map_err(|error| match error {
                            DirFdError::TooLarge { .. } => OatsError::new(
                                ErrorCode::ArtifactTooLarge,
                                root.display().to_string(),
                                format!("the artifact holds more than {MAX_ARTIFACT_BYTES} bytes"),
                            ),
                            other => dir_fd_error(other),
                        })?;
                    total += read.bytes.len() as u64;
                    entries.insert(
                        relative,
                        Entry::File {
                            executable: read.mode & 0o100 != 0,
                            content: read.bytes,
                        },
                    );
                }
                EntryKind::Other => {
                    return Err(OatsError::new(
                        ErrorCode::UnsupportedFile,
                        relative,
                        "is a FIFO, socket or device; an artifact holds only files, directories and links",
                    ));
                }
            }
        }
    }
    let integrity = digest(&entries);
    Ok(Artifact {
        root: root.to_path_buf(),
        entries,
        integrity,
    })
}

/// The `oats.tree-exec.v1` digest of `entries`.
pub fn digest(entries: &BTreeMap<String, Entry>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(TREE_FORMAT.as_bytes());
    hasher.update([0u8]);
    // A BTreeMap<String, _> iterates in the byte order of its keys.
    for (path, entry) in entries {
        match entry {
            Entry::File {
                executable,
                content,
            } => {
                hasher.update(b"F");
                hasher.update((path.len() as u64).to_be_bytes());
                hasher.update(path.as_bytes());
                hasher.update([u8::from(*executable)]);
                hasher.update((content.len() as u64).to_be_bytes());
                hasher.update(content);
            }
            Entry::Link { target } => {
                hasher.update(b"S");
                hasher.update((path.len() as u64).to_be_bytes());
                hasher.update(path.as_bytes());
                hasher.update((target.len() as u64).to_be_bytes());
                hasher.update(target.as_bytes());
            }
        }
    }
    format!("{TREE_FORMAT}:sha256-{}", hex::encode(hasher.finalize()))
}

/// What a path names inside the records after resolving links.
enum Resolved<'a> {
    File(&'a [u8]),
    Directory(String),
}

impl Artifact {
    fn is_directory(&self, path: &str) -> bool {
        if path.is_empty() {
            return true;
        }
        let prefix = format!("{path}/");
        self.entries
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(key, _)| key.starts_with(&prefix))
    }

    /// Resolves `path` (relative, `/`-separated) inside the records, following links.
    fn resolve(&self, path: &str) -> Result<Resolved<'_>> {
        let escape = |why: &str| {
            OatsError::new(
                ErrorCode::NotSelfContained,
                path.to_owned(),
                format!("{why}; the path escapes its integrity boundary"),
            )
        };
        let mut pending: Vec<String> = path.split('/').rev().map(str::to_owned).collect();
        let mut current: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(segment) = pending.pop() {
            match segment.as_str() {
                "" | "." => continue,
                ".." => {
                    if current.pop().is_none() {
                        return Err(escape("a link leads above the capability root"));
                    }
                    continue;
                }
                _ => {}
            }
            current.push(segment);
            let joined = current.join("/");
            if let Some(Entry::Link { target }) = self.entries.get(&joined) {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Err(escape("too many levels of links"));
                }
                current.pop();
                let target = if let Some(absolute) = target.strip_prefix('/') {
                    // An absolute target counts only when it names a path under the root.
                    let root = self.root.to_string_lossy();
                    let root = root.trim_start_matches('/');
                    match absolute.strip_prefix(root) {
                        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                            current.clear();
                            rest.trim_start_matches('/').to_owned()
                        }
                        _ => return Err(escape(&format!("a link names {target:?}"))),
                    }
                } else {
                    target.clone()
                };
                pending.extend(target.split('/').rev().map(str::to_owned));
            }
        }
        let joined = current.join("/");
        match self.entries.get(&joined) {
            Some(Entry::File { content, .. }) => Ok(Resolved::File(content)),
            Some(Entry::Link { .. }) => Err(escape("a link did not resolve")),
            None if self.is_directory(&joined) => Ok(Resolved::Directory(joined)),
            None => Err(OatsError::new(
                ErrorCode::NotSelfContained,
                path.to_owned(),
                "a link is broken: its target is not in the artifact",
            )),
        }
    }

    /// The program files of a run: every file of the artifact under [`PROGRAM_ARTIFACT_DIR`],
    /// links resolved inside the artifact. Refuses paths a snapshot cannot hold and
    /// artifacts larger than a snapshot.
    pub fn program_files(&self) -> Result<Vec<SnapshotFile>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![String::new()];
        self.expand("", PROGRAM_ARTIFACT_DIR, &mut stack, &mut out)?;
        let total: u64 = out
            .values()
            .map(|content: &Vec<u8>| content.len() as u64)
            .sum();
        if out.len() + 4 > MAX_SNAPSHOT_FILES || total > MAX_SNAPSHOT_BYTES - 64 * 1024 {
            return Err(OatsError::new(
                ErrorCode::ArtifactTooLarge,
                self.root.display().to_string(),
                format!(
                    "a run carries at most {} files and {} bytes; this artifact has {} files and {total} bytes",
                    MAX_SNAPSHOT_FILES - 4,
                    MAX_SNAPSHOT_BYTES - 64 * 1024,
                    out.len()
                ),
            ));
        }
        // Links were resolved above, so every entry is a regular file; its path keeps Git's
        // rules (an npm scope's `@`, spaces and the like are ordinary names).
        for path in out.keys() {
            if let Err(rule) = tree_path::check_path(path, Some(tree_path::EntryMode::Regular)) {
                return Err(OatsError::new(
                    ErrorCode::UnsupportedPath,
                    path.trim_start_matches("artifact/").to_owned(),
                    format!("cannot be carried into a run: {}", rule.describe()),
                ));
            }
        }
        Ok(out
            .into_iter()
            .map(|(path, content)| SnapshotFile::regular(path, content))
            .collect())
    }

    fn expand(
        &self,
        directory: &str,
        out_prefix: &str,
        stack: &mut Vec<String>,
        out: &mut BTreeMap<String, Vec<u8>>,
    ) -> Result<()> {
        let prefix = if directory.is_empty() {
            String::new()
        } else {
            format!("{directory}/")
        };
        let below: Vec<(&String, &Entry)> = self
            .entries
            .range(prefix.clone()..)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .collect();
        for (path, entry) in below {
            let relative = &path[prefix.len()..];
            let destination = format!("{out_prefix}/{relative}");
            if out.len() > MAX_SNAPSHOT_FILES {
                return Err(OatsError::new(
                    ErrorCode::ArtifactTooLarge,
                    self.root.display().to_string(),
                    format!("a run carries at most {MAX_SNAPSHOT_FILES} files"),
                ));
            }
            match entry {
                Entry::File { content, .. } => {
                    out.insert(destination, content.clone());
                }
                Entry::Link { .. } => match self.resolve(path)? {
                    Resolved::File(content) => {
                        out.insert(destination, content.to_vec());
                    }
                    Resolved::Directory(target) => {
                        if stack.contains(&target) {
                            continue;
                        }
                        stack.push(target.clone());
                        self.expand(&target, &destination, stack, out)?;
                        stack.pop();
                    }
                },
            }
        }
        Ok(())
    }

    /// The bytes of the file at `path` (links followed inside the artifact), if it is one.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        match self.resolve(path) {
            Ok(Resolved::File(content)) => Some(content),
            _ => None,
        }
    }

    /// The relative paths of every record, for listings.
    pub fn paths(&self) -> BTreeSet<&str> {
        self.entries.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(content: &str, executable: bool) -> Entry {
        Entry::File {
            executable,
            content: content.as_bytes().to_vec(),
        }
    }

    fn link(target: &str) -> Entry {
        Entry::Link {
            target: target.into(),
        }
    }

    #[test]
    fn digest_frames_paths_content_links_and_exec_bit() {
        let mut a = BTreeMap::new();
        a.insert("a".to_owned(), file("x", false));
        let base = digest(&a);
        assert!(is_integrity(&base), "{base}");
        let mut exec = a.clone();
        exec.insert("a".to_owned(), file("x", true));
        assert_ne!(digest(&exec), base);
        let mut moved = BTreeMap::new();
        moved.insert("ax".to_owned(), file("", false));
        assert_ne!(digest(&moved), base);
        let mut linked = BTreeMap::new();
        linked.insert("a".to_owned(), link("x"));
        assert_ne!(digest(&linked), base);
        // Order is by path bytes: uppercase before lowercase, regardless of insertion.
        let mut one = BTreeMap::new();
        one.insert("b".to_owned(), file("1", false));
        one.insert("B".to_owned(), file("2", false));
        let mut two = BTreeMap::new();
        two.insert("B".to_owned(), file("2", false));
        two.insert("b".to_owned(), file("1", false));
        assert_eq!(digest(&one), digest(&two));
        // Known answer for the empty tree: sha256("oats.tree-exec.v1\0").
        assert_eq!(
            digest(&BTreeMap::new()),
            format!(
                "oats.tree-exec.v1:sha256-{}",
                hex::encode(Sha256::digest(b"oats.tree-exec.v1\0"))
            )
        );
    }

    #[test]
    fn program_resolves_links_inside_and_stops_cycles() {
        let mut entries = BTreeMap::new();
        entries.insert("bin/main.mjs".to_owned(), file("main", false));
        entries.insert("lib/util.mjs".to_owned(), file("util", false));
        entries.insert("bin/util.mjs".to_owned(), link("../lib/util.mjs"));
        entries.insert("shared".to_owned(), link("lib"));
        entries.insert("lib/loop".to_owned(), link(".."));
        let artifact = Artifact {
            root: "/x/cap".into(),
            integrity: digest(&entries),
            entries,
        };
        let files = artifact.program_files().unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert!(paths.contains(&"artifact/bin/util.mjs"), "{paths:?}");
        assert!(paths.contains(&"artifact/shared/util.mjs"), "{paths:?}");
        // lib/loop leads back to the root, which is being expanded: the cycle stops.
        assert!(!paths.iter().any(|p| p.contains("loop")), "{paths:?}");
        assert_eq!(paths.len(), 4, "{paths:?}");
        assert_eq!(artifact.file("shared/util.mjs"), Some(&b"util"[..]));

        let mut escaping = BTreeMap::new();
        escaping.insert("out".to_owned(), link("../../etc/passwd"));
        let artifact = Artifact {
            root: "/x/cap".into(),
            integrity: String::new(),
            entries: escaping,
        };
        assert_eq!(
            artifact.program_files().unwrap_err().code,
            ErrorCode::NotSelfContained
        );
        let mut absolute = BTreeMap::new();
        absolute.insert("a".to_owned(), file("a", false));
        absolute.insert("in".to_owned(), link("/x/cap/a"));
        absolute.insert("out".to_owned(), link("/x/capx/a"));
        let artifact = Artifact {
            root: "/x/cap".into(),
            integrity: String::new(),
            entries: absolute,
        };
        assert!(artifact.resolve("in").is_ok());
        assert!(artifact.resolve("out").is_err());
    }
}
