//! Reading a directory as the source of a new repository: every regular file (executable
//! when its owner may execute it) and every symbolic link under it, by its relative path,
//! with its bytes. Anything sf could not store exactly (a device, a socket, a name that is
//! not UTF-8 or breaks Git's path rules, an empty directory, more than the limits) is refused
//! with the path at fault; nothing is skipped silently. The rules of the whole tree (links
//! resolving inside it, case collisions) are the repository's, checked when it is created.
//!
//! [`read_snapshot_dir`] reads a directory the same way as a file snapshot (a program or an
//! input to run), with the snapshot's limits.
//!
//! Whoever can write the directory may change it while sf reads it; the walk goes through
//! directory descriptors ([`crate::dir_fd`]), so a link swapped in anywhere is refused and
//! what is read is what was listed.

use std::path::{Path, PathBuf};

use crate::contracts::tree_path::{self, EntryMode as Mode};
use crate::dir_fd::{DirFd, DirFdError, EntryKind};
use crate::repository::{
    EachLeaf, LeafBytes, RepositoryError, RepositoryLimits, SourceFile, WalkedLeaf,
};
use crate::snapshot::{MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SnapshotFile};

/// Why a directory cannot be read as a source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceDirError {
    /// The directory itself is missing or not a directory.
    #[error("source directory {}: {detail}", path.display())]
    NotADirectory {
        /// The path given as the root.
        path: PathBuf,
        /// What the system reported.
        detail: String,
    },
    /// Something could not be read.
    #[error("{}: cannot be read: {detail}", path.display())]
    Unreadable {
        /// The entry at fault, as the root joined with its relative path.
        path: PathBuf,
        /// What the system reported.
        detail: String,
    },
    /// A symbolic link where the walk opened a directory or file: an entry replaced by a
    /// link after it was listed.
    #[error("{}: is a symbolic link where a directory or file was listed; retry once the directory is quiet", path.display())]
    Symlink {
        /// The link, as the root joined with its relative path.
        path: PathBuf,
    },
    /// A device, socket or pipe.
    #[error("{}: is not a regular file or directory; remove it", path.display())]
    NotRegular {
        /// The entry at fault, as the root joined with its relative path.
        path: PathBuf,
    },
    /// A relative path that breaks a path rule (or is not UTF-8).
    #[error("{}: {rule}", path.display())]
    BadPath {
        /// The entry at fault, as the root joined with its relative path.
        path: PathBuf,
        /// The rule's stable code (`git-segment`, `control-character`, …).
        code: &'static str,
        /// The rule, in words.
        rule: &'static str,
    },
    /// A directory with no file in it, which a Git tree cannot hold.
    #[error("{}: is an empty directory, which a repository cannot hold; remove it", path.display())]
    EmptyDirectory {
        /// The entry at fault, as the root joined with its relative path.
        path: PathBuf,
    },
    /// More files or bytes than a repository's source may hold.
    #[error("{}: {limit} ({rule})", path.display())]
    TooLarge {
        /// The file over the per-file limit, or the root for a limit of the whole.
        path: PathBuf,
        /// The limit passed, as a sentence.
        limit: String,
        /// Which limit: `too-many-files`, `file-too-large` or `source-too-large` (the codes
        /// a repository's tree rules give the same limits).
        rule: &'static str,
    },
    /// An entry was replaced while the directory was read (a link or another directory put in
    /// place of a listed one): nothing read from it is used.
    #[error("{}: changed while sf read it ({detail}); retry once the directory is quiet", path.display())]
    Changed {
        /// The entry at fault, as the root joined with its relative path.
        path: PathBuf,
        /// What changed.
        detail: String,
    },
}

impl SourceDirError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotADirectory { .. } => "not-a-directory",
            Self::Unreadable { .. } => "unreadable",
            Self::Symlink { .. } => "symlink",
            Self::NotRegular { .. } => "not-regular",
            Self::BadPath { code, .. } => code,
            Self::EmptyDirectory { .. } => "empty-directory",
            Self::TooLarge { .. } => "too-large",
            Self::Changed { .. } => "changed-while-read",
        }
    }
}

/// Reads every file and symbolic link under `root` (which must be a directory), sorted by
/// path. The walk goes through directory descriptors ([`crate::dir_fd`]): `root` is opened
/// without following a link in any component, and every entry below it is opened relative to
/// its directory, without following a link, and must be the entry listed; so a directory
/// swapped for a link while the walk runs is refused, never followed. No file is read past
/// the per-file limit, so a huge or hostile tree fails fast.
///
/// `limits` are the repository's (its settings: `sf repo create --max-files`,
/// `--max-file-bytes`, `--max-tree-bytes`), and an error over one names the flag that raises
/// it.
pub fn read_source_dir(
    root: &Path,
    limits: &RepositoryLimits,
) -> Result<Vec<SourceFile>, SourceDirError> {
    let files = read_dir_files(root, &Limits::repository(limits))?;
    Ok(files
        .into_iter()
        .map(|(path, mode, content)| SourceFile::new(path, mode, content))
        .collect())
}

/// [`read_source_dir`] that keeps no file's bytes: every leaf's identities (its blob id,
/// SHA-256 and size; a link's target), sorted by path, each file read once and let go. With
/// [`SourceDirBytes`] it is the two reads of a base too large to hold.
pub fn list_source_dir(
    root: &Path,
    limits: &RepositoryLimits,
) -> Result<Vec<WalkedLeaf>, SourceDirError> {
    list_dir(root, limits, false)
}

/// [`list_source_dir`] of a checkout: the root's own `.git` directory (its repository) is
/// not part of the tree; a `.git` anywhere below it is refused as ever.
pub fn list_work_tree(
    root: &Path,
    limits: &RepositoryLimits,
) -> Result<Vec<WalkedLeaf>, SourceDirError> {
    list_dir(root, limits, true)
}

fn list_dir(
    root: &Path,
    limits: &RepositoryLimits,
    work_tree: bool,
) -> Result<Vec<WalkedLeaf>, SourceDirError> {
    let mut leaves = Vec::new();
    let limits = Limits::repository(limits);
    walk_dir(root, &limits, work_tree, &mut |(path, mode, content)| {
        leaves.push(WalkedLeaf::of(path, mode, &content));
        Ok(())
    })?;
    leaves.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(leaves)
}

/// The second read of a directory [`list_source_dir`] or [`list_work_tree`] listed: the
/// same walk, each file handed over as it is read. Whatever differs from the first read (a
/// file changed, added or gone, a directory swapped) is found by the caller against the
/// listing, or by the walk itself.
#[derive(Debug)]
pub struct SourceDirBytes {
    root: PathBuf,
    limits: RepositoryLimits,
    work_tree: bool,
}

impl SourceDirBytes {
    /// The directory `root`, read again under `limits` (those it was listed with).
    pub fn new(root: &Path, limits: &RepositoryLimits) -> Self {
        Self {
            root: root.to_owned(),
            limits: *limits,
            work_tree: false,
        }
    }

    /// The checkout `root` [`list_work_tree`] listed, read again under `limits`.
    pub fn work_tree(root: &Path, limits: &RepositoryLimits) -> Self {
        Self {
            work_tree: true,
            ..Self::new(root, limits)
        }
    }
}

impl LeafBytes for SourceDirBytes {
    fn read_again(&mut self, each: &mut EachLeaf<'_>) -> Result<(), RepositoryError> {
        let mut refused = None;
        let walked = walk_dir(
            &self.root,
            &Limits::repository(&self.limits),
            self.work_tree,
            &mut |(path, mode, content)| {
                each(&path, mode, &content).map_err(|error| {
                    refused = Some(error);
                    SourceDirError::Changed {
                        path: self.root.join(&path),
                        detail: "refused".to_owned(),
                    }
                })
            },
        );
        match (walked, refused) {
            (_, Some(error)) => Err(error),
            (Ok(()), None) => Ok(()),
            (Err(error), None) => Err(RepositoryError::Conflict {
                what: format!(
                    "{}: read a second time: {error} (it changed while sf read it)",
                    self.root.display()
                ),
            }),
        }
    }
}

impl Limits {
    /// A repository's limits, each error naming the flag that raises it.
    fn repository(limits: &RepositoryLimits) -> Self {
        Self {
            max_files: limits.max_files,
            max_file_bytes: limits.max_file_bytes,
            max_total_bytes: limits.max_source_bytes,
            holder: "this repository's tree",
            raise: [
                " (raise it with --max-files)",
                " (raise it with --max-file-bytes)",
                " (raise it with --max-tree-bytes)",
            ],
        }
    }
}

/// Reads every file and link under `root` (which must be a directory) as a snapshot, sorted
/// by path: the rules of [`read_source_dir`] with at most [`MAX_SNAPSHOT_FILES`] entries and
/// [`MAX_SNAPSHOT_BYTES`] bytes. The tree rules (links inside) are the snapshot's, checked
/// when it is digested.
pub fn read_snapshot_dir(root: &Path) -> Result<Vec<SnapshotFile>, SourceDirError> {
    let limits = Limits {
        max_files: MAX_SNAPSHOT_FILES,
        max_file_bytes: MAX_SNAPSHOT_BYTES as usize,
        max_total_bytes: MAX_SNAPSHOT_BYTES as usize,
        holder: "a snapshot",
        raise: [""; 3],
    };
    let files = read_dir_files(root, &limits)?;
    Ok(files
        .into_iter()
        .map(|(path, mode, content)| SnapshotFile::new(path, mode, content))
        .collect())
}

/// The limits of one kind of directory read, and what the limits are of (for messages).
struct Limits {
    max_files: usize,
    max_file_bytes: usize,
    max_total_bytes: usize,
    holder: &'static str,
    /// How each limit (files, bytes of a file, bytes in all) is raised, said after it.
    raise: [&'static str; 3],
}

impl From<DirFdError> for SourceDirError {
    fn from(error: DirFdError) -> Self {
        let path = error.path().to_owned();
        match error {
            DirFdError::Symlink { .. } => Self::Symlink { path },
            DirFdError::NotRegular { .. } => Self::NotRegular { path },
            DirFdError::NotADirectory { detail, .. } => Self::NotADirectory { path, detail },
            DirFdError::Changed { detail, .. } => Self::Changed { path, detail },
            DirFdError::TooLarge { limit, .. } => Self::TooLarge {
                path,
                limit,
                rule: "too-many-files",
            },
            DirFdError::BadName { .. } => Self::BadPath {
                path,
                code: "bad-path",
                rule: "a name is UTF-8 without / or NUL",
            },
            other => Self::Unreadable {
                path,
                detail: other.to_string(),
            },
        }
    }
}

/// One entry read: its relative path, its mode and its bytes (a link's target).
type ReadEntry = (String, Mode, Vec<u8>);

/// Reads every entry under `root` as `(relative path, mode, bytes)`, sorted by path.
fn read_dir_files(root: &Path, limits: &Limits) -> Result<Vec<ReadEntry>, SourceDirError> {
    let mut files = Vec::new();
    walk_dir(root, limits, false, &mut |entry| {
        files.push(entry);
        Ok(())
    })?;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// Walks every entry under `root` (which must be a directory), handing each to `each` as it
/// is read, in the walk's order (not sorted), and stops at the first error. With
/// `work_tree`, the root's own `.git` (a checkout's repository) is not part of the tree.
fn walk_dir(
    root: &Path,
    limits: &Limits,
    work_tree: bool,
    each: &mut dyn FnMut(ReadEntry) -> Result<(), SourceDirError>,
) -> Result<(), SourceDirError> {
    let dir = DirFd::open(root)?;
    let mut walk = Walk {
        root,
        limits,
        work_tree,
        each,
        count: 0,
        total: 0,
    };
    walk.directory(&dir, "")
}

/// One walk: the root (for messages), the limits, where each entry goes, and the entries
/// and bytes read so far.
struct Walk<'a> {
    root: &'a Path,
    limits: &'a Limits,
    work_tree: bool,
    each: &'a mut dyn FnMut(ReadEntry) -> Result<(), SourceDirError>,
    count: usize,
    total: usize,
}

impl Walk<'_> {
    /// Reads the directory `dir`, whose path relative to the root is `prefix` (empty for the
    /// root), and everything below it, each entry opened relative to its directory.
    fn directory(&mut self, dir: &DirFd, prefix: &str) -> Result<(), SourceDirError> {
        let limits = self.limits;
        // No directory can list more entries than a source may hold files (an empty directory
        // is refused), so the listing stops there.
        let entries = dir.entries(limits.max_files + 1)?;
        if entries.is_empty() && !prefix.is_empty() {
            return Err(SourceDirError::EmptyDirectory {
                path: dir.path().to_owned(),
            });
        }
        for entry in entries {
            if self.work_tree && prefix.is_empty() && entry.name == ".git" {
                continue;
            }
            let path = dir.shown(&entry.name);
            // Directories are checked as prefixes of their files; checking each entry here names
            // the first offending component (a `.git` directory, say) before anything below it
            // is read.
            let bad = |code, rule| SourceDirError::BadPath {
                path: path.clone(),
                code,
                rule,
            };
            let name = entry
                .name
                .to_str()
                .ok_or_else(|| bad("bad-path", "a name is UTF-8"))?;
            let relative = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            };
            let leaf = (entry.kind == EntryKind::Symlink).then_some(Mode::Symlink);
            tree_path::check_path(&relative, leaf)
                .map_err(|rule| bad(rule.code(), rule.describe()))?;
            let root = self.root;
            let counted = |count: &mut usize| {
                if *count >= limits.max_files {
                    return Err(SourceDirError::TooLarge {
                        path: root.to_owned(),
                        limit: format!(
                            "holds more than {} files, the most {} may hold{}",
                            limits.max_files, limits.holder, limits.raise[0]
                        ),
                        rule: "too-many-files",
                    });
                }
                *count += 1;
                Ok(())
            };
            match entry.kind {
                EntryKind::Symlink => {
                    counted(&mut self.count)?;
                    let target = dir.read_link(&entry)?;
                    (self.each)((relative, Mode::Symlink, target.into_encoded_bytes()))?;
                }
                EntryKind::Other => return Err(SourceDirError::NotRegular { path }),
                EntryKind::Directory => {
                    let below = dir.open_dir(&entry)?;
                    self.directory(&below, &relative)?;
                }
                EntryKind::File => {
                    counted(&mut self.count)?;
                    let read = dir
                        .read_file(&entry, limits.max_file_bytes as u64)
                        .map_err(|error| match error {
                            DirFdError::TooLarge { path, .. } => SourceDirError::TooLarge {
                                path,
                                limit: format!(
                                    "is larger than {} bytes, the most one file may hold{}",
                                    limits.max_file_bytes, limits.raise[1]
                                ),
                                rule: "file-too-large",
                            },
                            other => other.into(),
                        })?;
                    self.total += read.bytes.len();
                    if self.total > limits.max_total_bytes {
                        return Err(SourceDirError::TooLarge {
                            path: self.root.to_owned(),
                            limit: format!(
                                "holds more than {} bytes, the most {} may hold{}",
                                limits.max_total_bytes, limits.holder, limits.raise[2]
                            ),
                            rule: "source-too-large",
                        });
                    }
                    // Git records the owner's execute bit and nothing else of the mode.
                    let mode = if read.mode & 0o100 != 0 {
                        Mode::Executable
                    } else {
                        Mode::Regular
                    };
                    (self.each)((relative, mode, read.bytes))?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repository::REPOSITORY_LIMITS;
    use std::fs;

    #[test]
    fn reads_a_tree_sorted() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        fs::write(dir.path().join("src/deep/b.txt"), "b\n").unwrap();
        fs::write(dir.path().join("README.md"), "r\n").unwrap();
        fs::write(dir.path().join("src/a.txt"), "").unwrap();
        let files = read_source_dir(dir.path(), &REPOSITORY_LIMITS).unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["README.md", "src/a.txt", "src/deep/b.txt"]);
        assert_eq!(files[2].content, b"b\n");
    }

    /// The whole tree model comes in as it is: an executable stays executable, a link is a
    /// link with its target, binary bytes and dot-files are content.
    #[test]
    fn keeps_modes_links_and_bytes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".github/workflows")).unwrap();
        fs::write(dir.path().join(".github/workflows/ci.yml"), "on: push\n").unwrap();
        fs::write(dir.path().join(".gitignore"), "*.pyc\n").unwrap();
        fs::write(dir.path().join("run.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(dir.path().join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(
            dir.path().join("logo.png"),
            [0x89, b'P', b'N', b'G', 0, 0xff],
        )
        .unwrap();
        std::os::unix::fs::symlink("run.sh", dir.path().join("link")).unwrap();
        let files = read_source_dir(dir.path(), &REPOSITORY_LIMITS).unwrap();
        let seen: Vec<(&str, Mode)> = files.iter().map(|f| (f.path.as_str(), f.mode)).collect();
        assert_eq!(
            seen,
            [
                (".github/workflows/ci.yml", Mode::Regular),
                (".gitignore", Mode::Regular),
                ("link", Mode::Symlink),
                ("logo.png", Mode::Regular),
                ("run.sh", Mode::Executable),
            ]
        );
        assert_eq!(files[2].content, b"run.sh");
        assert_eq!(files[3].content, [0x89, b'P', b'N', b'G', 0, 0xff]);
    }

    #[test]
    fn refuses_what_cannot_be_stored() {
        type Make = Box<dyn Fn(&Path)>;
        let cases: Vec<(&str, Make)> = vec![
            (
                "git-segment",
                Box::new(|d: &Path| {
                    fs::create_dir(d.join(".git")).unwrap();
                    fs::write(d.join(".git/config"), "x").unwrap();
                }),
            ),
            (
                "control-character",
                Box::new(|d: &Path| fs::write(d.join("a\rb"), "x").unwrap()),
            ),
            (
                "bad-path",
                Box::new(|d: &Path| {
                    use std::os::unix::ffi::OsStrExt;
                    fs::write(d.join(std::ffi::OsStr::from_bytes(b"\xff")), "x").unwrap()
                }),
            ),
            (
                "empty-directory",
                Box::new(|d: &Path| fs::create_dir(d.join("empty")).unwrap()),
            ),
            (
                "not-regular",
                Box::new(|d: &Path| {
                    nix::unistd::mkfifo(&d.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap()
                }),
            ),
        ];
        for (code, make) in cases {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("ok.txt"), "fine").unwrap();
            make(dir.path());
            let error = read_source_dir(dir.path(), &REPOSITORY_LIMITS).unwrap_err();
            assert_eq!(error.code(), code, "{error}");
        }
        let missing =
            read_source_dir(Path::new("/nonexistent/sf-source"), &REPOSITORY_LIMITS).unwrap_err();
        assert_eq!(missing.code(), "not-a-directory");
    }

    #[test]
    fn snapshots_keep_bytes_and_refuse_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("bin")).unwrap();
        fs::write(dir.path().join("bin/blob"), [0xff, 0x00, 0xfe]).unwrap();
        fs::write(dir.path().join("main.sh"), "echo hi\n").unwrap();
        let files = read_snapshot_dir(dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].path, "bin/blob");
        assert_eq!(files[0].content, [0xff, 0x00, 0xfe]);
        assert_eq!(files[1].content, b"echo hi\n");
        let empty = tempfile::tempdir().unwrap();
        assert!(read_snapshot_dir(empty.path()).unwrap().is_empty());
        // A link is read as a link, never followed: its target is checked when the snapshot
        // is digested, and one leaving the snapshot is refused there.
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("l")).unwrap();
        let files = read_snapshot_dir(dir.path()).unwrap();
        assert_eq!(files[1].mode, Mode::Symlink);
        assert_eq!(files[1].content, b"/etc/passwd");
        let refused = crate::snapshot::snapshot_digest(&files).unwrap_err();
        assert!(refused.to_string().contains("absolute"), "{refused}");
        assert_eq!(
            read_snapshot_dir(&dir.path().join("main.sh"))
                .unwrap_err()
                .code(),
            "not-a-directory"
        );
    }
}
