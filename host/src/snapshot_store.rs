//! The write-once snapshot store: a Slice's frozen fixture inputs, harness and overlay, kept
//! by snapshot digest, each entry with its mode.
//!
//! A store is one private directory of this user. `put` refuses, before any write, files that
//! do not give the expected digest, more than [`SNAPSHOT_LIMITS`] allows, or anything the
//! executor's snapshot rules refuse. It writes `<root>/tmp-<hex>` (exclusive create, mode
//! 0400, fsynced; a leftover temporary from an interrupted put is removed and written anew,
//! never adopted), publishes it with a non-replacing `link` to `<root>/<hex>`, removes the
//! temporary name and fsyncs the directory. An equal entry replays; different bytes under the
//! name are `conflict`. `read` opens without following links, re-hashes every file and
//! recomputes the digest; anything else is `corrupt` and is never repaired. A root that is not
//! a canonical private directory of this user, or that was replaced since it was opened, is
//! `unavailable`. One writer at a time (the owner) is assumed: two concurrent puts of the same
//! digest share a temporary name.
//!
//! File format (`sf-delivery-snapshot/1`), for a snapshot of regular files:
//!
//! ```text
//! "sf-delivery-snapshot/1\n"
//! <manifest length, decimal>"\n"
//! <canonical JSON {"digest":"sha256:…","files":[{"bytes":N,"path":"…","sha256":"sha256:…"},…],"protocol":"sf-delivery-snapshot/1"}>
//! <each file's bytes, in the manifest's (path byte) order>
//! ```
//!
//! A snapshot holding an executable or a symbolic link is stored as `sf-delivery-snapshot/2`:
//! the same framing, the protocol string `sf-delivery-snapshot/2` in both places, and each
//! manifest entry with its `mode` as Git writes it (`"100644"`, `"100755"`, `"120000"`; a
//! link's bytes are its target):
//! `{"bytes":N,"mode":"100755","path":"…","sha256":"sha256:…"}`. Each snapshot has exactly one
//! encoding: regular files only are always version 1 (so every entry stored before modes
//! existed keeps its bytes, and a replay of it still matches), and a version 2 entry holding
//! only regular files is `corrupt`.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest};
use crate::contracts::tree_path::EntryMode;
use crate::private_dir::{self, PrivateDir};
use crate::snapshot::{SnapshotFile, snapshot_digest};

/// The protocol string of a stored snapshot file and its manifest, for regular files only.
pub const SNAPSHOT_FORMAT: &str = "sf-delivery-snapshot/1";
/// The protocol string of a stored snapshot holding an executable or a symbolic link: its
/// manifest names each entry's mode.
pub const SNAPSHOT_FORMAT_V2: &str = "sf-delivery-snapshot/2";

/// How much one stored snapshot may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotLimits {
    /// Files in one snapshot.
    pub max_files: usize,
    /// Bytes of all files' content together (the framing and manifest not counted).
    pub max_bytes: u64,
}

/// The limits of the snapshot store: 256 files and 15 MiB of content, so that an input plus
/// its framing stays inside the executor's 16 MiB snapshot bound.
pub const SNAPSHOT_LIMITS: SnapshotLimits = SnapshotLimits {
    max_files: 256,
    max_bytes: 15 * 1024 * 1024,
};

/// One entry as a manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// The file's path in the snapshot.
    pub path: String,
    /// What the entry is (always [`EntryMode::Regular`] in version 1).
    pub mode: EntryMode,
    /// Its length in bytes.
    pub bytes: u64,
    /// The `sha256:` of its bytes.
    pub sha256: Digest,
}

/// What a stored snapshot holds: its digest and its entries' identities, in path order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotManifest {
    /// The snapshot digest of the files; the entry's name is its hex.
    pub digest: Digest,
    /// Every file, sorted by path bytes.
    pub files: Vec<SnapshotEntry>,
}

impl SnapshotManifest {
    /// The manifest of checked `files` with digest `digest`.
    fn of(files: &[SnapshotFile], digest: Digest) -> Self {
        let mut files: Vec<SnapshotEntry> = files
            .iter()
            .map(|file| SnapshotEntry {
                path: file.path.clone(),
                mode: file.mode,
                bytes: file.content.len() as u64,
                sha256: Digest::of(&file.content),
            })
            .collect();
        files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        Self { digest, files }
    }

    /// Whether every entry is a regular file: such a manifest is written as version 1.
    fn is_regular_only(&self) -> bool {
        self.files
            .iter()
            .all(|entry| entry.mode == EntryMode::Regular)
    }

    /// The manifest's canonical bytes and the protocol they are framed with.
    fn encode(&self) -> Result<(&'static str, Vec<u8>), canonical::JsonError> {
        let moded = !self.is_regular_only();
        let files = self
            .files
            .iter()
            .map(|entry| StoredEntry {
                path: entry.path.clone(),
                mode: moded.then_some(Mode(entry.mode)),
                bytes: entry.bytes,
                sha256: entry.sha256.clone(),
            })
            .collect();
        let digest = self.digest.clone();
        if moded {
            let manifest = ManifestV2 { digest, files };
            Ok((
                SNAPSHOT_FORMAT_V2,
                canonical::to_canonical_bytes(&manifest)?,
            ))
        } else {
            let manifest = ManifestV1 { digest, files };
            Ok((SNAPSHOT_FORMAT, canonical::to_canonical_bytes(&manifest)?))
        }
    }

    /// Reads the manifest `head` of a stored snapshot framed with `protocol`: version 1
    /// entries have no mode, version 2 entries each have one and not all are regular.
    fn decode(protocol: &str, head: &[u8]) -> Result<Self, String> {
        let read = |error: canonical::FieldError| error.to_string();
        let moded = protocol == SNAPSHOT_FORMAT_V2;
        let (digest, stored) = if moded {
            let manifest: ManifestV2 =
                canonical::from_canonical_slice(head, "manifest").map_err(read)?;
            (manifest.digest, manifest.files)
        } else {
            let manifest: ManifestV1 =
                canonical::from_canonical_slice(head, "manifest").map_err(read)?;
            (manifest.digest, manifest.files)
        };
        let mut files = Vec::with_capacity(stored.len());
        for (at, entry) in stored.into_iter().enumerate() {
            let mode = match (moded, entry.mode) {
                (true, Some(Mode(mode))) => mode,
                (false, None) => EntryMode::Regular,
                (true, None) => return Err(format!("manifest.files[{at}].mode is missing")),
                (false, Some(_)) => {
                    return Err(format!(
                        "manifest.files[{at}].mode is not a field of {SNAPSHOT_FORMAT}"
                    ));
                }
            };
            files.push(SnapshotEntry {
                path: entry.path,
                mode,
                bytes: entry.bytes,
                sha256: entry.sha256,
            });
        }
        let manifest = Self { digest, files };
        if moded && manifest.is_regular_only() {
            return Err(format!(
                "a snapshot of regular files is stored as {SNAPSHOT_FORMAT}, not \
                 {SNAPSHOT_FORMAT_V2}"
            ));
        }
        Ok(manifest)
    }
}

/// A manifest entry as stored: its mode in version 2 only.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredEntry {
    path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<Mode>,
    bytes: u64,
    sha256: Digest,
}

/// A version 1 manifest.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct ManifestV1 {
    digest: Digest,
    files: Vec<StoredEntry>,
}

canonical::literal_fields!(ManifestV1 { "protocol": SNAPSHOT_FORMAT });

/// A version 2 manifest: the entries with their modes.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct ManifestV2 {
    digest: Digest,
    files: Vec<StoredEntry>,
}

canonical::literal_fields!(ManifestV2 { "protocol": SNAPSHOT_FORMAT_V2 });

/// An entry's mode, written as Git writes it.
struct Mode(EntryMode);

impl Serialize for Mode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.octal())
    }
}

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        EntryMode::from_octal(text.as_bytes())
            .map(Mode)
            .ok_or_else(|| serde::de::Error::custom("must be 100644, 100755 or 120000"))
    }
}

/// Why the snapshot store refused or failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotStoreError {
    /// The files or the expected digest break a rule; nothing was written.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// What is at fault (the file count, the total bytes, the expected digest, ...).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// No snapshot is stored under the digest.
    #[error("no snapshot {digest}")]
    Missing {
        /// The snapshot digest asked for.
        digest: String,
    },
    /// A stored snapshot failed verification; reported, never repaired.
    #[error("snapshot {digest} is corrupt: {what}")]
    Corrupt {
        /// The snapshot digest of the entry.
        digest: String,
        /// What failed verification.
        what: String,
    },
    /// Different bytes are already published under the digest.
    #[error("snapshot {digest} already holds different bytes")]
    Conflict {
        /// The snapshot digest whose entry differs.
        digest: String,
    },
    /// The root cannot be used.
    #[error("snapshot store unavailable: {reason}")]
    Unavailable {
        /// What made the root or an entry unusable.
        reason: String,
    },
}

impl SnapshotStoreError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
            Self::Missing { .. } => "missing",
            Self::Corrupt { .. } => "corrupt",
            Self::Conflict { .. } => "conflict",
            Self::Unavailable { .. } => "unavailable",
        }
    }
}

fn unavailable(reason: impl Into<String>) -> SnapshotStoreError {
    SnapshotStoreError::Unavailable {
        reason: reason.into(),
    }
}

/// Checks `files` against the store's rules and `expected`, returning their manifest.
pub fn check_snapshot(
    files: &[SnapshotFile],
    expected: &Digest,
) -> Result<SnapshotManifest, SnapshotStoreError> {
    let invalid = |input: String, rule: String| SnapshotStoreError::InvalidInput { input, rule };
    if files.len() > SNAPSHOT_LIMITS.max_files {
        return Err(invalid(
            format!("{} files", files.len()),
            format!(
                "a stored snapshot holds at most {} files",
                SNAPSHOT_LIMITS.max_files
            ),
        ));
    }
    let total: u64 = files.iter().map(|file| file.content.len() as u64).sum();
    if total > SNAPSHOT_LIMITS.max_bytes {
        return Err(invalid(
            format!("{total} bytes"),
            format!(
                "a stored snapshot holds at most {} bytes",
                SNAPSHOT_LIMITS.max_bytes
            ),
        ));
    }
    let digest =
        snapshot_digest(files).map_err(|error| invalid("files".into(), error.to_string()))?;
    if digest != *expected {
        return Err(invalid(
            format!("expected digest {expected}"),
            format!("the files give {digest}"),
        ));
    }
    Ok(SnapshotManifest::of(files, digest))
}

/// The snapshot store (see the module documentation).
#[derive(Debug)]
pub struct SnapshotStore {
    root: PrivateDir,
}

impl SnapshotStore {
    /// Opens the store at `root`, creating the directory (0700) if it does not exist. It must
    /// be a canonical private directory of this user whose parent no one else can write.
    pub fn open(root: &Path) -> Result<Self, SnapshotStoreError> {
        Ok(Self {
            root: PrivateDir::create_or_check(root).map_err(unavailable)?,
        })
    }

    /// Opens the store at `root` only if it exists: for commands that read, which create
    /// nothing. The same rule applies to the directory.
    pub fn open_existing(root: &Path) -> Result<Self, SnapshotStoreError> {
        Ok(Self {
            root: PrivateDir::check(root).map_err(unavailable)?,
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    fn entry(&self, digest: &Digest) -> PathBuf {
        self.root.path().join(digest.hex())
    }

    /// Stores `files` under `expected` (see the module documentation) and returns the
    /// manifest. Replays an equal entry; refuses different bytes under the name.
    pub fn put(
        &self,
        files: &[SnapshotFile],
        expected: &Digest,
    ) -> Result<SnapshotManifest, SnapshotStoreError> {
        let manifest = check_snapshot(files, expected)?;
        let bytes = encode(&manifest, files)?;
        self.root.recheck().map_err(unavailable)?;
        let hex = expected.hex();
        let published = self.entry(expected);
        let temporary = self.root.path().join(format!("tmp-{hex}"));
        let failed = |what: &str, error: std::io::Error| {
            unavailable(format!("{what} {}: {error}", temporary.display()))
        };
        // A leftover temporary (an interrupted put) is removed, never adopted.
        match std::fs::remove_file(&temporary) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(failed("removing the leftover", error)),
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temporary)
            .map_err(|error| failed("creating", error))?;
        file.write_all(&bytes)
            .map_err(|error| failed("writing", error))?;
        file.sync_all().map_err(|error| failed("syncing", error))?;
        drop(file);
        let linked = std::fs::hard_link(&temporary, &published);
        let removed = std::fs::remove_file(&temporary);
        let outcome = match linked {
            Ok(()) => Ok(manifest),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                match read_entry(&published, expected) {
                    Ok(existing) if existing == bytes => Ok(manifest),
                    // An entry that cannot be read is reported as it is (a link, say).
                    Err(error @ SnapshotStoreError::Corrupt { .. }) => Err(error),
                    _ => Err(SnapshotStoreError::Conflict {
                        digest: expected.to_string(),
                    }),
                }
            }
            Err(error) => Err(unavailable(format!(
                "publishing {}: {error}",
                published.display()
            ))),
        };
        removed.map_err(|error| failed("removing", error))?;
        private_dir::sync_dir(self.root.path())
            .map_err(|error| unavailable(format!("syncing {}: {error}", self.root().display())))?;
        outcome
    }

    /// The files stored under `digest`, every one re-hashed and the digest recomputed.
    pub fn read(&self, digest: &Digest) -> Result<Vec<SnapshotFile>, SnapshotStoreError> {
        self.root.recheck().map_err(unavailable)?;
        let bytes = read_entry(&self.entry(digest), digest)?;
        decode(&bytes, digest).map_err(|what| SnapshotStoreError::Corrupt {
            digest: digest.to_string(),
            what,
        })
    }
}

fn encode(
    manifest: &SnapshotManifest,
    files: &[SnapshotFile],
) -> Result<Vec<u8>, SnapshotStoreError> {
    let (protocol, header) =
        manifest
            .encode()
            .map_err(|error| SnapshotStoreError::InvalidInput {
                input: "files".into(),
                rule: format!("the manifest must fit canonical JSON's bound: {error}"),
            })?;
    let mut sorted: Vec<&SnapshotFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut bytes = crate::framing::prefix(protocol, header.len());
    bytes.extend_from_slice(&header);
    for file in sorted {
        bytes.extend_from_slice(&file.content);
    }
    Ok(bytes)
}

/// The largest stored file: the framing, a manifest of at most canonical JSON's bound, and
/// the content limit.
const MAX_ENTRY_BYTES: u64 = 64 + canonical::MAX_BYTES as u64 + SNAPSHOT_LIMITS.max_bytes;

fn read_entry(path: &Path, digest: &Digest) -> Result<Vec<u8>, SnapshotStoreError> {
    let corrupt = |what: String| SnapshotStoreError::Corrupt {
        digest: digest.to_string(),
        what,
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(SnapshotStoreError::Missing {
                digest: digest.to_string(),
            });
        }
        Err(error) if error.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(corrupt(format!(
                "the entry {} is a symbolic link, which sf never follows",
                path.display()
            )));
        }
        Err(error) => return Err(unavailable(format!("{}: {error}", path.display()))),
    };
    let meta = file
        .metadata()
        .map_err(|error| unavailable(format!("{}: {error}", path.display())))?;
    if !meta.is_file() {
        return Err(corrupt("the entry is not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_ENTRY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| unavailable(format!("{}: {error}", path.display())))?;
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Err(corrupt("larger than any snapshot sf stores".into()));
    }
    Ok(bytes)
}

fn decode(bytes: &[u8], digest: &Digest) -> Result<Vec<SnapshotFile>, String> {
    let protocol = if bytes.starts_with(format!("{SNAPSHOT_FORMAT_V2}\n").as_bytes()) {
        SNAPSHOT_FORMAT_V2
    } else {
        SNAPSHOT_FORMAT
    };
    let (head, mut content) = crate::framing::split(bytes, protocol, "manifest", 8)?;
    let manifest = SnapshotManifest::decode(protocol, head)?;
    if manifest.digest != *digest {
        return Err(format!("the manifest names {}", manifest.digest));
    }
    let mut files = Vec::with_capacity(manifest.files.len());
    for entry in &manifest.files {
        let size = usize::try_from(entry.bytes).map_err(|_| "a file size is too large")?;
        if size > content.len() {
            return Err(format!("{} runs past the end", entry.path));
        }
        let (file, rest) = content.split_at(size);
        if Digest::of(file) != entry.sha256 {
            return Err(format!(
                "{} does not hash to its recorded sha256",
                entry.path
            ));
        }
        files.push(SnapshotFile::new(
            entry.path.clone(),
            entry.mode,
            file.to_vec(),
        ));
        content = rest;
    }
    if !content.is_empty() {
        return Err("bytes follow the last file".into());
    }
    let sorted = files
        .windows(2)
        .all(|pair| pair[0].path.as_bytes() < pair[1].path.as_bytes());
    if !sorted {
        return Err("the files are not in path order".into());
    }
    let recomputed = snapshot_digest(&files).map_err(|error| error.to_string())?;
    if recomputed != *digest {
        return Err(format!("the files give {recomputed}"));
    }
    if manifest.files.len() > SNAPSHOT_LIMITS.max_files {
        return Err("more files than the store allows".into());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn file(path: &str, content: &str) -> SnapshotFile {
        SnapshotFile::regular(path, content.as_bytes().to_vec())
    }

    fn store() -> (tempfile::TempDir, SnapshotStore) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let root = dir.path().canonicalize().unwrap().join("snapshots");
        let store = SnapshotStore::open(&root).unwrap();
        (dir, store)
    }

    #[test]
    fn put_read_replay_and_leftovers() {
        let (_dir, store) = store();
        let files = vec![file("b.txt", "2"), file("a/x.txt", "1")];
        let digest = snapshot_digest(&files).unwrap();
        // A leftover temporary is replaced, never adopted.
        let leftover = store.root().join(format!("tmp-{}", digest.hex()));
        std::fs::write(&leftover, b"garbage").unwrap();
        let manifest = store.put(&files, &digest).unwrap();
        assert_eq!(manifest.files[0].path, "a/x.txt");
        assert!(!leftover.exists());
        let read = store.read(&digest).unwrap();
        assert_eq!(snapshot_digest(&read).unwrap(), digest);
        let entry = store.root().join(digest.hex());
        let mode = std::fs::metadata(&entry).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o400);
        // Replay.
        assert_eq!(store.put(&files, &digest).unwrap(), manifest);
        assert_eq!(std::fs::read_dir(store.root()).unwrap().count(), 1);
    }

    #[test]
    fn refuses_before_writing() {
        let (_dir, store) = store();
        let files = vec![file("a", "1")];
        let wrong = Digest::of(b"x");
        assert_eq!(
            store.put(&files, &wrong).unwrap_err().code(),
            "invalid-input"
        );
        let bad = vec![file("../a", "1")];
        assert_eq!(store.put(&bad, &wrong).unwrap_err().code(), "invalid-input");
        let many: Vec<SnapshotFile> = (0..257).map(|n| file(&format!("f{n}"), "")).collect();
        let digest = snapshot_digest(&many).unwrap();
        assert_eq!(
            store.put(&many, &digest).unwrap_err().code(),
            "invalid-input"
        );
        let big = vec![SnapshotFile::regular(
            "big",
            vec![0; SNAPSHOT_LIMITS.max_bytes as usize + 1],
        )];
        let digest = snapshot_digest(&big).unwrap();
        assert_eq!(
            store.put(&big, &digest).unwrap_err().code(),
            "invalid-input"
        );
        assert_eq!(std::fs::read_dir(store.root()).unwrap().count(), 0);
        assert_eq!(store.read(&digest).unwrap_err().code(), "missing");
    }

    #[test]
    fn corruption_and_conflict_are_reported_never_repaired() {
        let (_dir, store) = store();
        let files = vec![file("a", "hello")];
        let digest = snapshot_digest(&files).unwrap();
        store.put(&files, &digest).unwrap();
        let entry = store.root().join(digest.hex());
        let mut bytes = std::fs::read(&entry).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&entry, &bytes).unwrap();
        assert_eq!(store.read(&digest).unwrap_err().code(), "corrupt");
        assert_eq!(store.put(&files, &digest).unwrap_err().code(), "conflict");
        // Still the corrupt bytes: nothing was repaired.
        assert_eq!(std::fs::read(&entry).unwrap(), bytes);
        // A link in place of the entry is corrupt too.
        std::fs::remove_file(&entry).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &entry).unwrap();
        assert_eq!(store.read(&digest).unwrap_err().code(), "corrupt");
    }

    /// Rewrites the stored entry of `digest` with `edit` applied to its bytes.
    fn tamper(store: &SnapshotStore, digest: &Digest, edit: impl Fn(&str) -> String) {
        let entry = store.root().join(digest.hex());
        let bytes = std::fs::read(&entry).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        std::fs::remove_file(&entry).unwrap();
        std::fs::write(&entry, edit(&text)).unwrap();
    }

    #[test]
    fn modes_are_kept_in_version_2_and_regular_files_stay_version_1() {
        let (_dir, store) = store();
        let regular = vec![file("run.sh", "#!/bin/sh\n"), file("data/a", "1")];
        let digest = snapshot_digest(&regular).unwrap();
        store.put(&regular, &digest).unwrap();
        let stored = std::fs::read(store.root().join(digest.hex())).unwrap();
        assert!(stored.starts_with(b"sf-delivery-snapshot/1\n"));
        assert!(!String::from_utf8_lossy(&stored).contains("mode"));

        let moded = vec![
            SnapshotFile::executable("run.sh", b"#!/bin/sh\n".to_vec()),
            file("data/a", "1"),
            SnapshotFile::symlink("data/b", b"a".to_vec()),
        ];
        let digest = snapshot_digest(&moded).unwrap();
        let manifest = store.put(&moded, &digest).unwrap();
        assert_eq!(manifest.files[1].mode, EntryMode::Symlink);
        let stored = std::fs::read(store.root().join(digest.hex())).unwrap();
        let text = String::from_utf8_lossy(&stored);
        assert!(text.starts_with("sf-delivery-snapshot/2\n"), "{text}");
        assert!(
            text.contains(r#"{"bytes":1,"mode":"120000","path":"data/b","#),
            "{text}"
        );
        assert!(text.contains(r#""protocol":"sf-delivery-snapshot/2""#));
        let mut read = store.read(&digest).unwrap();
        read.sort_by(|a, b| a.path.cmp(&b.path));
        let mut expected = moded.clone();
        expected.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(read, expected);
        assert_eq!(store.put(&moded, &digest).unwrap(), manifest, "a replay");
    }

    #[test]
    fn a_changed_mode_or_a_second_encoding_is_corrupt() {
        let (_dir, store) = store();
        let moded = vec![
            SnapshotFile::executable("run.sh", b"#!/bin/sh\n".to_vec()),
            file("data", "1"),
        ];
        let digest = snapshot_digest(&moded).unwrap();
        store.put(&moded, &digest).unwrap();
        // The executable's mode changed: the snapshot is another one.
        tamper(&store, &digest, |text| text.replace("100755", "120000"));
        let error = store.read(&digest).unwrap_err();
        assert_eq!(error.code(), "corrupt", "{error}");
        // A mode Git does not write.
        tamper(&store, &digest, |text| text.replace("120000", "100664"));
        let error = store.read(&digest).unwrap_err();
        assert!(error.to_string().contains("mode"), "{error}");
        // Regular files written as version 2: the one snapshot would have two encodings.
        let regular = vec![file("run.sh", "#!/bin/sh\n"), file("data", "1")];
        let digest = snapshot_digest(&regular).unwrap();
        store.put(&regular, &digest).unwrap();
        // The manifest edited by `edit` and framed again as `protocol`.
        let reframe = |protocol: &'static str, edit: fn(&str) -> String| {
            move |text: &str| {
                let (_, rest) = text.split_once('\n').unwrap();
                let (length, rest) = rest.split_once('\n').unwrap();
                let (head, content) = rest.split_at(length.parse().unwrap());
                let head = edit(head);
                format!("{protocol}\n{}\n{head}{content}", head.len())
            }
        };
        tamper(
            &store,
            &digest,
            reframe(SNAPSHOT_FORMAT_V2, |head| {
                head.replace(r#","path":"#, r#","mode":"100644","path":"#)
                    .replace(SNAPSHOT_FORMAT, SNAPSHOT_FORMAT_V2)
            }),
        );
        let error = store.read(&digest).unwrap_err();
        assert_eq!(error.code(), "corrupt", "{error}");
        assert!(error.to_string().contains("regular files"), "{error}");
        // A mode in version 1 (the file just rewritten, framed as version 1 again).
        tamper(
            &store,
            &digest,
            reframe(SNAPSHOT_FORMAT, |head| {
                head.replace(SNAPSHOT_FORMAT_V2, SNAPSHOT_FORMAT)
            }),
        );
        let error = store.read(&digest).unwrap_err();
        assert!(error.to_string().contains("not a field"), "{error}");
        // A version 2 entry without its mode.
        let other = vec![
            SnapshotFile::executable("other.sh", b"exit 0\n".to_vec()),
            file("y", "2"),
        ];
        let digest = snapshot_digest(&other).unwrap();
        store.put(&other, &digest).unwrap();
        tamper(
            &store,
            &digest,
            reframe(SNAPSHOT_FORMAT_V2, |head| {
                head.replacen(r#""mode":"100644","#, "", 1)
            }),
        );
        let error = store.read(&digest).unwrap_err();
        assert!(error.to_string().contains("is missing"), "{error}");
    }

    #[test]
    fn a_root_that_is_not_private_is_unavailable() {
        let (_dir, store) = store();
        let root = store.root().to_path_buf();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let files = vec![file("a", "1")];
        let digest = snapshot_digest(&files).unwrap();
        assert_eq!(
            store.put(&files, &digest).unwrap_err().code(),
            "unavailable"
        );
        assert_eq!(
            SnapshotStore::open(&root).unwrap_err().code(),
            "unavailable"
        );
    }
}
