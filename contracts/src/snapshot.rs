//! File snapshots: the entries a program runs from or reads, and their digest.
//!
//! A snapshot is a list of entries, each a path, a mode ([`EntryMode`]: a regular file, an
//! executable file or a symbolic link) and its content (a link's content is its target). The
//! entries keep the tree rules of [`tree_path::check_tree`] under the default
//! [`TreePolicy`]: every path in Git's path grammar, none twice, none beneath a file or a
//! link, no two differing only in case, and every link resolving inside the snapshot. At most
//! [`MAX_SNAPSHOT_FILES`] entries and [`MAX_SNAPSHOT_BYTES`] of content (link targets
//! included).
//!
//! The digest is the `sha256:` of a size-framed encoding in path order, so it never depends on
//! the order the entries were listed in. A snapshot of regular files only is digested as it
//! always was, so every digest recorded before modes existed still names the same files:
//!
//! ```text
//! "sf-snapshot/1\n"  then per entry, sorted by path bytes:
//!   u64 big-endian path length, path bytes, u64 big-endian content length, content bytes
//! ```
//!
//! A snapshot holding any executable or link is digested with each entry's mode, so that a
//! changed mode changes the digest (and a v2 encoding never equals a v1 one, their first line
//! differing):
//!
//! ```text
//! "sf-snapshot/2\n"  then per entry, sorted by path bytes:
//!   u64 big-endian path length, path bytes, the mode as Git writes it (6 ASCII bytes:
//!   100644, 100755 or 120000), u64 big-endian content length, content bytes
//! ```

use std::fmt;

use crate::canonical::Digest;
use crate::tree_path::{self, EntryMode, Leaf, TreePolicy, TreeRule};

/// The most content one snapshot may hold (16 MiB), link targets included.
pub const MAX_SNAPSHOT_BYTES: u64 = 16 * 1024 * 1024;
/// The most entries one snapshot may hold.
pub const MAX_SNAPSHOT_FILES: usize = 4096;
/// The domain string that starts the digested encoding of a snapshot of regular files only.
pub const SNAPSHOT_DIGEST_PROTOCOL: &str = "sf-snapshot/1";
/// The domain string that starts the digested encoding of a snapshot holding an executable
/// or a symbolic link: its framing carries each entry's mode.
pub const SNAPSHOT_DIGEST_PROTOCOL_V2: &str = "sf-snapshot/2";

/// One entry of a snapshot: a file, an executable file or a symbolic link.
#[derive(Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The entry's path, in Git's path grammar ([`tree_path::check_path`]).
    pub path: String,
    /// What the entry is.
    pub mode: EntryMode,
    /// The file's bytes, or for a symbolic link its target.
    pub content: Vec<u8>,
}

impl SnapshotFile {
    /// An entry of mode `mode`.
    pub fn new(path: impl Into<String>, mode: EntryMode, content: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            mode,
            content: content.into(),
        }
    }

    /// A regular file (mode `100644`).
    pub fn regular(path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        Self::new(path, EntryMode::Regular, content)
    }

    /// An executable file (mode `100755`).
    pub fn executable(path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        Self::new(path, EntryMode::Executable, content)
    }

    /// A symbolic link (mode `120000`) to `target`.
    pub fn symlink(path: impl Into<String>, target: impl Into<Vec<u8>>) -> Self {
        Self::new(path, EntryMode::Symlink, target)
    }

    /// The entry as the tree rules see it.
    fn leaf(&self) -> Leaf<'_> {
        match self.mode {
            EntryMode::Regular | EntryMode::Executable => Leaf::File,
            EntryMode::Symlink => Leaf::Symlink(&self.content),
        }
    }
}

impl fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("path", &self.path)
            .field("mode", &self.mode.octal())
            .field("bytes", &self.content.len())
            .finish()
    }
}

/// Why a list of entries is not a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// An entry breaks a tree rule: its path, its place among the others, or its link's
    /// target. The first fault in path order is named.
    #[error(
        "snapshot path {path:?}: {} ({}){}",
        rule.describe(),
        rule.code(),
        with.as_ref().map(|with| format!(", with {with:?}")).unwrap_or_default()
    )]
    Path {
        /// The path at fault, as given.
        path: String,
        /// The rule it breaks.
        rule: TreeRule,
        /// The other path a collision or a path beneath a non-directory concerns.
        with: Option<String>,
    },
    /// More than [`MAX_SNAPSHOT_FILES`] entries.
    #[error("snapshot holds more than {MAX_SNAPSHOT_FILES} files")]
    TooManyFiles,
    /// More than [`MAX_SNAPSHOT_BYTES`] of content in all.
    #[error("snapshot holds more than {MAX_SNAPSHOT_BYTES} bytes")]
    TooLarge,
}

/// Checks `files` against the snapshot rules (module documentation).
pub fn check_snapshot(files: &[SnapshotFile]) -> Result<(), SnapshotError> {
    if files.len() > MAX_SNAPSHOT_FILES {
        return Err(SnapshotError::TooManyFiles);
    }
    let total: u64 = files.iter().map(|file| file.content.len() as u64).sum();
    if total > MAX_SNAPSHOT_BYTES {
        return Err(SnapshotError::TooLarge);
    }
    let faults = tree_path::check_tree(
        files.iter().map(|file| (file.path.as_str(), file.leaf())),
        TreePolicy::default(),
    );
    match faults.into_iter().next() {
        Some(fault) => Err(SnapshotError::Path {
            path: fault.path,
            rule: fault.rule,
            with: fault.with,
        }),
        None => Ok(()),
    }
}

/// Whether `dir` (a path relative to the snapshot's root) is a directory of `files`: some
/// entry lies below it.
pub fn holds_directory(files: &[SnapshotFile], dir: &str) -> bool {
    files.iter().any(|file| {
        file.path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Whether every entry of `files` is a regular file: such a snapshot is digested as
/// `sf-snapshot/1`.
pub fn is_regular_only(files: &[SnapshotFile]) -> bool {
    files.iter().all(|file| file.mode == EntryMode::Regular)
}

/// The digest of `files`, after checking them against the snapshot rules.
pub fn snapshot_digest(files: &[SnapshotFile]) -> Result<Digest, SnapshotError> {
    check_snapshot(files)?;
    Ok(digest_of_files(files))
}

/// The digest of `files` without the snapshot rules: for files already held to other rules
/// (a Candidate's tree, which may be larger than an executor takes). Distinct paths are the
/// caller's guarantee.
pub fn digest_of_files(files: &[SnapshotFile]) -> Digest {
    let entries: Vec<(&str, EntryMode, &[u8])> = files
        .iter()
        .map(|file| (file.path.as_str(), file.mode, file.content.as_slice()))
        .collect();
    digest_of_entries(&entries)
}

/// [`digest_of_files`] of entries held elsewhere (path, mode, content), so that a caller with
/// its own file type digests them without copying their bytes into snapshot files first.
pub fn digest_of_entries(entries: &[(&str, EntryMode, &[u8])]) -> Digest {
    use sha2::Digest as _;
    let with_modes = entries
        .iter()
        .any(|(_, mode, _)| *mode != EntryMode::Regular);
    let mut sorted: Vec<&(&str, EntryMode, &[u8])> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let protocol = if with_modes {
        SNAPSHOT_DIGEST_PROTOCOL_V2
    } else {
        SNAPSHOT_DIGEST_PROTOCOL
    };
    // The encoding is hashed as it is produced rather than built whole first: a tree of a
    // few MiB was otherwise copied once more for every digest of it.
    let mut hasher = sha2::Sha256::new();
    hasher.update(protocol.as_bytes());
    hasher.update(b"\n");
    for (path, mode, content) in sorted {
        hasher.update((path.len() as u64).to_be_bytes());
        hasher.update(path.as_bytes());
        if with_modes {
            hasher.update(mode.octal().as_bytes());
        }
        hasher.update((content.len() as u64).to_be_bytes());
        hasher.update(content);
    }
    Digest::from_bytes(hasher.finalize().into())
}

/// [`digest_of_entries`] taken as the entries come, in path order, without holding them: the
/// encoding is hashed both ways (with and without modes) and the one the entries call for is
/// kept at the end, since which it is depends on every entry.
pub struct SnapshotHasher {
    regular: sha2::Sha256,
    moded: sha2::Sha256,
    with_modes: bool,
    last: Option<String>,
    ordered: bool,
}

impl Default for SnapshotHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotHasher {
    /// A hasher of no entries yet.
    pub fn new() -> Self {
        use sha2::Digest as _;
        let mut regular = sha2::Sha256::new();
        regular.update(SNAPSHOT_DIGEST_PROTOCOL.as_bytes());
        regular.update(b"\n");
        let mut moded = sha2::Sha256::new();
        moded.update(SNAPSHOT_DIGEST_PROTOCOL_V2.as_bytes());
        moded.update(b"\n");
        Self {
            regular,
            moded,
            with_modes: false,
            last: None,
            ordered: true,
        }
    }

    /// Adds the next entry; entries come in order of path bytes, each path once.
    pub fn add(&mut self, path: &str, mode: EntryMode, content: &[u8]) {
        use sha2::Digest as _;
        if self.last.as_deref().is_some_and(|last| last >= path) {
            self.ordered = false;
        }
        self.last = Some(path.to_owned());
        self.with_modes |= mode != EntryMode::Regular;
        for (hasher, moded) in [(&mut self.regular, false), (&mut self.moded, true)] {
            hasher.update((path.len() as u64).to_be_bytes());
            hasher.update(path.as_bytes());
            if moded {
                hasher.update(mode.octal().as_bytes());
            }
            hasher.update((content.len() as u64).to_be_bytes());
            hasher.update(content);
        }
    }

    /// The digest of the entries added; `None` when they did not come in order of path bytes.
    pub fn finish(self) -> Option<Digest> {
        use sha2::Digest as _;
        if !self.ordered {
            return None;
        }
        let hasher = if self.with_modes {
            self.moded
        } else {
            self.regular
        };
        Some(Digest::from_bytes(hasher.finalize().into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree_path::{LinkRule, PathRule};

    fn file(path: &str, content: &str) -> SnapshotFile {
        SnapshotFile::regular(path, content.as_bytes())
    }

    #[test]
    fn order_independent_and_framed() {
        let a = snapshot_digest(&[file("a", "1"), file("b", "2")]).unwrap();
        let b = snapshot_digest(&[file("b", "2"), file("a", "1")]).unwrap();
        assert_eq!(a, b);
        // Moving a byte between path and content changes the digest.
        let c = snapshot_digest(&[file("ab", "")]).unwrap();
        let d = snapshot_digest(&[file("a", "b")]).unwrap();
        assert_ne!(c, d);
    }

    /// A snapshot of regular files is digested exactly as before modes existed: the framing
    /// written out here by hand.
    #[test]
    fn regular_files_keep_the_first_encoding() {
        let mut encoding = b"sf-snapshot/1\n".to_vec();
        for (path, content) in [("a", "1"), ("b/c", "")] {
            encoding.extend_from_slice(&(path.len() as u64).to_be_bytes());
            encoding.extend_from_slice(path.as_bytes());
            encoding.extend_from_slice(&(content.len() as u64).to_be_bytes());
            encoding.extend_from_slice(content.as_bytes());
        }
        assert_eq!(
            snapshot_digest(&[file("b/c", ""), file("a", "1")]).unwrap(),
            Digest::of(&encoding)
        );
    }

    #[test]
    fn modes_are_digested_once_any_entry_is_not_regular() {
        let regular = [file("run", "#!/bin/sh\n"), file("x", "")];
        let executable = [
            SnapshotFile::executable("run", "#!/bin/sh\n"),
            file("x", ""),
        ];
        let linked = [
            file("run", "#!/bin/sh\n"),
            SnapshotFile::symlink("x", "run"),
        ];
        let mut encoding = b"sf-snapshot/2\n".to_vec();
        for (path, mode, content) in [("run", "100755", "#!/bin/sh\n"), ("x", "100644", "")] {
            encoding.extend_from_slice(&(path.len() as u64).to_be_bytes());
            encoding.extend_from_slice(path.as_bytes());
            encoding.extend_from_slice(mode.as_bytes());
            encoding.extend_from_slice(&(content.len() as u64).to_be_bytes());
            encoding.extend_from_slice(content.as_bytes());
        }
        assert_eq!(snapshot_digest(&executable).unwrap(), Digest::of(&encoding));
        let digests = [
            snapshot_digest(&regular).unwrap(),
            snapshot_digest(&executable).unwrap(),
            snapshot_digest(&linked).unwrap(),
        ];
        assert_ne!(digests[0], digests[1]);
        assert_ne!(digests[0], digests[2]);
        assert_ne!(digests[1], digests[2]);
        // A link and a file with the target as its bytes are different snapshots.
        let as_file = [file("run", "#!/bin/sh\n"), file("x", "run")];
        assert_ne!(snapshot_digest(&as_file).unwrap(), digests[2]);
    }

    #[test]
    fn the_hasher_gives_the_digest_of_the_whole() {
        for files in [
            vec![file("a", "1"), file("b/c", "")],
            vec![SnapshotFile::executable("run", "x"), file("z", "")],
            vec![],
        ] {
            let mut hasher = SnapshotHasher::new();
            for f in &files {
                hasher.add(&f.path, f.mode, &f.content);
            }
            assert_eq!(hasher.finish(), Some(digest_of_files(&files)));
        }
        let mut unordered = SnapshotHasher::new();
        unordered.add("b", EntryMode::Regular, b"");
        unordered.add("a", EntryMode::Regular, b"");
        assert_eq!(unordered.finish(), None);
    }

    #[test]
    fn refuses_bad_sets() {
        assert!(matches!(
            snapshot_digest(&[file("a", ""), file("A", "")]),
            Err(SnapshotError::Path {
                rule: TreeRule::CaseCollision,
                ..
            })
        ));
        assert!(matches!(
            snapshot_digest(&[file("../x", "")]),
            Err(SnapshotError::Path {
                rule: TreeRule::Path(PathRule::DotSegment),
                ..
            })
        ));
        let big = SnapshotFile::regular("big", vec![0; MAX_SNAPSHOT_BYTES as usize + 1]);
        assert_eq!(snapshot_digest(&[big]), Err(SnapshotError::TooLarge));
        let many: Vec<SnapshotFile> = (0..=MAX_SNAPSHOT_FILES)
            .map(|n| file(&format!("f{n}"), ""))
            .collect();
        assert_eq!(snapshot_digest(&many), Err(SnapshotError::TooManyFiles));
    }

    #[test]
    fn links_must_stay_inside_and_nothing_lies_beneath_one() {
        let escapes = snapshot_digest(&[SnapshotFile::symlink("lib/up", "../..")]).unwrap_err();
        assert_eq!(
            escapes,
            SnapshotError::Path {
                path: "lib/up".into(),
                rule: TreeRule::Link(LinkRule::Escapes),
                with: None,
            }
        );
        assert!(escapes.to_string().contains("link-escapes"), "{escapes}");
        let beneath = snapshot_digest(&[
            SnapshotFile::symlink("d", "real"),
            file("real/x", ""),
            file("d/x", ""),
        ])
        .unwrap_err();
        assert_eq!(
            beneath,
            SnapshotError::Path {
                path: "d/x".into(),
                rule: TreeRule::ThroughNonDirectory,
                with: Some("d".into()),
            }
        );
        assert!(
            beneath.to_string().contains(r#"with "d""#),
            "the error names both paths: {beneath}"
        );
        let absolute = snapshot_digest(&[SnapshotFile::symlink("l", "/etc/passwd")]);
        assert!(matches!(
            absolute,
            Err(SnapshotError::Path {
                rule: TreeRule::Link(LinkRule::Absolute),
                ..
            })
        ));
        // Links within the snapshot, to files or directories, dangling or not, are fine.
        snapshot_digest(&[
            file("real/x", ""),
            SnapshotFile::symlink("d", "real"),
            SnapshotFile::symlink("real/y", "x"),
            SnapshotFile::symlink("later", "made/by/the/run"),
        ])
        .unwrap();
    }
}
