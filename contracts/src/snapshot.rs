//! File snapshots: the bytes a program runs from or reads, and their digest.
//!
//! A snapshot is a list of files with distinct paths in the repository's path grammar and at
//! most [`MAX_SNAPSHOT_BYTES`] of content. Its digest is the `sha256:` of a size-framed
//! encoding in path order, so the digest never depends on the order files were listed in:
//!
//! ```text
//! "sf-snapshot/1\n"  then per file, sorted by path bytes:
//!   u64 big-endian path length, path bytes, u64 big-endian content length, content bytes
//! ```

use std::fmt;

use crate::canonical::Digest;
use crate::source_path::{self, PathRule};

/// The most content one snapshot may hold (16 MiB).
pub const MAX_SNAPSHOT_BYTES: u64 = 16 * 1024 * 1024;
/// The most files one snapshot may hold.
pub const MAX_SNAPSHOT_FILES: usize = 4096;
/// The domain string that starts the digested encoding.
pub const SNAPSHOT_DIGEST_PROTOCOL: &str = "sf-snapshot/1";

/// One file of a snapshot.
#[derive(Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// The file's path, in the repository's path grammar.
    pub path: String,
    /// The file's bytes.
    pub content: Vec<u8>,
}

impl fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("path", &self.path)
            .field("bytes", &self.content.len())
            .finish()
    }
}

/// Why a list of files is not a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// A path breaks the path grammar, or clashes with another path of the snapshot.
    #[error("snapshot path {path:?}: {}", rule.describe())]
    Path {
        /// The path at fault, as given.
        path: String,
        /// The rule it breaks.
        rule: PathRule,
    },
    /// More than [`MAX_SNAPSHOT_FILES`] files.
    #[error("snapshot holds more than {MAX_SNAPSHOT_FILES} files")]
    TooManyFiles,
    /// More than [`MAX_SNAPSHOT_BYTES`] of content in all.
    #[error("snapshot holds more than {MAX_SNAPSHOT_BYTES} bytes")]
    TooLarge,
}

/// The digest of `files`, after checking them against the snapshot rules.
pub fn snapshot_digest(files: &[SnapshotFile]) -> Result<Digest, SnapshotError> {
    if files.len() > MAX_SNAPSHOT_FILES {
        return Err(SnapshotError::TooManyFiles);
    }
    let total: u64 = files.iter().map(|file| file.content.len() as u64).sum();
    if total > MAX_SNAPSHOT_BYTES {
        return Err(SnapshotError::TooLarge);
    }
    source_path::check_path_set(files.iter().map(|file| file.path.as_str()))
        .map_err(|(path, rule)| SnapshotError::Path { path, rule })?;
    Ok(digest_of_files(files))
}

/// The digest of `files` without the snapshot rules: for files already held to other rules
/// (a Candidate's tree, which may be larger than an executor takes). Distinct paths are the
/// caller's guarantee.
pub fn digest_of_files(files: &[SnapshotFile]) -> Digest {
    let total: u64 = files.iter().map(|file| file.content.len() as u64).sum();
    let mut sorted: Vec<&SnapshotFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut encoding = Vec::with_capacity(total as usize + 64 * files.len() + 16);
    encoding.extend_from_slice(SNAPSHOT_DIGEST_PROTOCOL.as_bytes());
    encoding.push(b'\n');
    for file in sorted {
        encoding.extend_from_slice(&(file.path.len() as u64).to_be_bytes());
        encoding.extend_from_slice(file.path.as_bytes());
        encoding.extend_from_slice(&(file.content.len() as u64).to_be_bytes());
        encoding.extend_from_slice(&file.content);
    }
    Digest::of(&encoding)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> SnapshotFile {
        SnapshotFile {
            path: path.into(),
            content: content.as_bytes().to_vec(),
        }
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

    #[test]
    fn refuses_bad_sets() {
        assert!(matches!(
            snapshot_digest(&[file("a", ""), file("A", "")]),
            Err(SnapshotError::Path {
                rule: PathRule::CaseCollision,
                ..
            })
        ));
        assert!(matches!(
            snapshot_digest(&[file("../x", "")]),
            Err(SnapshotError::Path {
                rule: PathRule::DotSegment,
                ..
            })
        ));
        let big = SnapshotFile {
            path: "big".into(),
            content: vec![0; MAX_SNAPSHOT_BYTES as usize + 1],
        };
        assert_eq!(snapshot_digest(&[big]), Err(SnapshotError::TooLarge));
    }
}
