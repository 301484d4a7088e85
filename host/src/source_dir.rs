//! Reading a directory of text files as the source of a new repository: every regular file
//! under it, by its relative path in the path grammar, as UTF-8 text. Anything sf could not
//! store exactly (a symbolic link, a device, a socket, a non-UTF-8 file or name, a path
//! outside the grammar, an empty directory, more than the limits) is refused with the path
//! at fault; nothing is skipped silently.
//!
//! [`read_snapshot_dir`] reads a directory the same way as a file snapshot (a program or an
//! input to run): the same rules, except that contents are bytes (any bytes: a snapshot holds
//! bytes) and the limits are the snapshot's.
//!
//! Whoever can write the directory may change it while sf reads it; the walk goes through
//! directory descriptors ([`crate::dir_fd`]), so a link swapped in anywhere is refused and
//! what is read is what was listed.

use std::path::{Path, PathBuf};

use crate::dir_fd::{DirFd, DirFdError, EntryKind};
use crate::repository::{REPOSITORY_LIMITS, SourceText};
use crate::snapshot::{MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SnapshotFile};
use crate::source_path::{self, PathRule};

/// Why a directory cannot be read as a source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceDirError {
    /// The directory itself is missing or not a directory.
    #[error("source directory {}: {detail}", path.display())]
    NotADirectory { path: PathBuf, detail: String },
    /// Something could not be read.
    #[error("{}: cannot be read: {detail}", path.display())]
    Unreadable { path: PathBuf, detail: String },
    /// A symbolic link: sf stores regular files only, and a link's target is outside input.
    #[error("{}: is a symbolic link; sf stores regular files only: replace it by the file or remove it", path.display())]
    Symlink { path: PathBuf },
    /// A device, socket or pipe.
    #[error("{}: is not a regular file or directory; remove it", path.display())]
    NotRegular { path: PathBuf },
    /// A file whose bytes are not UTF-8.
    #[error("{}: is not UTF-8 text; sf stores UTF-8 text files only", path.display())]
    NotUtf8 { path: PathBuf },
    /// A relative path outside the path grammar (or not UTF-8).
    #[error("{}: {}", path.display(), rule.describe())]
    BadPath { path: PathBuf, rule: PathRule },
    /// A directory with no file in it, which a Git tree cannot hold.
    #[error("{}: is an empty directory, which a repository cannot hold; remove it", path.display())]
    EmptyDirectory { path: PathBuf },
    /// More files or bytes than a repository's source may hold.
    #[error("{}: {limit}", path.display())]
    TooLarge { path: PathBuf, limit: String },
    /// An entry was replaced while the directory was read (a link or another directory put in
    /// place of a listed one): nothing read from it is used.
    #[error("{}: changed while sf read it ({detail}); retry once the directory is quiet", path.display())]
    Changed { path: PathBuf, detail: String },
}

impl SourceDirError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotADirectory { .. } => "not-a-directory",
            Self::Unreadable { .. } => "unreadable",
            Self::Symlink { .. } => "symlink",
            Self::NotRegular { .. } => "not-regular",
            Self::NotUtf8 { .. } => "invalid-utf8",
            Self::BadPath { rule, .. } => rule.code(),
            Self::EmptyDirectory { .. } => "empty-directory",
            Self::TooLarge { .. } => "too-large",
            Self::Changed { .. } => "changed-while-read",
        }
    }
}

/// Reads every file under `root` (which must be a directory), sorted by path. The walk goes
/// through directory descriptors ([`crate::dir_fd`]): `root` is opened without following a
/// link in any component, and every entry below it is opened relative to its directory,
/// without following a link, and must be the entry listed; so a directory swapped for a link
/// while the walk runs is refused, never followed. No file is read past the per-file limit,
/// so a huge or hostile tree fails fast.
pub fn read_source_dir(root: &Path) -> Result<Vec<SourceText>, SourceDirError> {
    let limits = Limits {
        max_files: REPOSITORY_LIMITS.max_files,
        max_file_bytes: REPOSITORY_LIMITS.max_file_bytes,
        max_total_bytes: REPOSITORY_LIMITS.max_source_bytes,
        holder: "a repository's source",
    };
    let files = read_dir_files(root, &limits, |path, bytes| {
        String::from_utf8(bytes).map_err(|_| SourceDirError::NotUtf8 {
            path: path.to_owned(),
        })
    })?;
    Ok(files
        .into_iter()
        .map(|(path, text)| SourceText { path, text })
        .collect())
}

/// Reads every file under `root` (which must be a directory) as a file snapshot, sorted by
/// path: the rules of [`read_source_dir`] with any bytes as content, and at most
/// [`MAX_SNAPSHOT_FILES`] files and [`MAX_SNAPSHOT_BYTES`] bytes.
pub fn read_snapshot_dir(root: &Path) -> Result<Vec<SnapshotFile>, SourceDirError> {
    let limits = Limits {
        max_files: MAX_SNAPSHOT_FILES,
        max_file_bytes: MAX_SNAPSHOT_BYTES as usize,
        max_total_bytes: MAX_SNAPSHOT_BYTES as usize,
        holder: "a snapshot",
    };
    let files = read_dir_files(root, &limits, |_, bytes| Ok(bytes))?;
    Ok(files
        .into_iter()
        .map(|(path, content)| SnapshotFile::regular(path, content))
        .collect())
}

/// The limits of one kind of directory read, and what the limits are of (for messages).
struct Limits {
    max_files: usize,
    max_file_bytes: usize,
    max_total_bytes: usize,
    holder: &'static str,
}

impl From<DirFdError> for SourceDirError {
    fn from(error: DirFdError) -> Self {
        let path = error.path().to_owned();
        match error {
            DirFdError::Symlink { .. } => Self::Symlink { path },
            DirFdError::NotRegular { .. } => Self::NotRegular { path },
            DirFdError::NotADirectory { detail, .. } => Self::NotADirectory { path, detail },
            DirFdError::Changed { detail, .. } => Self::Changed { path, detail },
            DirFdError::TooLarge { limit, .. } => Self::TooLarge { path, limit },
            DirFdError::BadName { .. } => Self::BadPath {
                path,
                rule: PathRule::Grammar,
            },
            other => Self::Unreadable {
                path,
                detail: other.to_string(),
            },
        }
    }
}

/// Reads every file under `root` as `(relative path, convert(bytes))`, sorted by path.
fn read_dir_files<T>(
    root: &Path,
    limits: &Limits,
    convert: impl Fn(&Path, Vec<u8>) -> Result<T, SourceDirError>,
) -> Result<Vec<(String, T)>, SourceDirError> {
    let dir = DirFd::open(root)?;
    let mut files = Vec::new();
    let mut total = 0usize;
    let walk = Walk {
        root,
        limits,
        convert: &convert,
    };
    walk.directory(&dir, "", &mut files, &mut total)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// One walk: the root (for messages), the limits, and how file bytes become contents.
struct Walk<'a, C> {
    root: &'a Path,
    limits: &'a Limits,
    convert: &'a C,
}

impl<C> Walk<'_, C> {
    /// Reads the directory `dir`, whose path relative to the root is `prefix` (empty for the
    /// root), and everything below it, each entry opened relative to its directory.
    fn directory<T>(
        &self,
        dir: &DirFd,
        prefix: &str,
        files: &mut Vec<(String, T)>,
        total: &mut usize,
    ) -> Result<(), SourceDirError>
    where
        C: Fn(&Path, Vec<u8>) -> Result<T, SourceDirError>,
    {
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
            let path = dir.shown(&entry.name);
            // Directories are checked as prefixes of their files; checking each entry here names
            // the first offending component (a `.git` directory, say) before anything below it
            // is read.
            let bad = |rule| SourceDirError::BadPath {
                path: path.clone(),
                rule,
            };
            let name = entry.name.to_str().ok_or_else(|| bad(PathRule::Grammar))?;
            let relative = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            };
            source_path::check_path(&relative).map_err(bad)?;
            match entry.kind {
                EntryKind::Symlink => return Err(SourceDirError::Symlink { path }),
                EntryKind::Other => return Err(SourceDirError::NotRegular { path }),
                EntryKind::Directory => {
                    let below = dir.open_dir(&entry)?;
                    self.directory(&below, &relative, files, total)?;
                }
                EntryKind::File => {
                    if files.len() >= limits.max_files {
                        return Err(SourceDirError::TooLarge {
                            path: self.root.to_owned(),
                            limit: format!(
                                "holds more than {} files, the most {} may hold",
                                limits.max_files, limits.holder
                            ),
                        });
                    }
                    let bytes = dir
                        .read_file(&entry, limits.max_file_bytes as u64)
                        .map_err(|error| match error {
                            DirFdError::TooLarge { path, .. } => SourceDirError::TooLarge {
                                path,
                                limit: format!(
                                    "is larger than {} bytes, the most one file may hold",
                                    limits.max_file_bytes
                                ),
                            },
                            other => other.into(),
                        })?
                        .bytes;
                    *total += bytes.len();
                    if *total > limits.max_total_bytes {
                        return Err(SourceDirError::TooLarge {
                            path: self.root.to_owned(),
                            limit: format!(
                                "holds more than {} bytes, the most {} may hold",
                                limits.max_total_bytes, limits.holder
                            ),
                        });
                    }
                    files.push((relative, (self.convert)(&path, bytes)?));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn reads_a_tree_sorted() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        fs::write(dir.path().join("src/deep/b.txt"), "b\n").unwrap();
        fs::write(dir.path().join("README.md"), "r\n").unwrap();
        fs::write(dir.path().join("src/a.txt"), "").unwrap();
        let files = read_source_dir(dir.path()).unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["README.md", "src/a.txt", "src/deep/b.txt"]);
        assert_eq!(files[2].text, "b\n");
    }

    #[test]
    fn refuses_what_cannot_be_stored() {
        type Make = Box<dyn Fn(&Path)>;
        let cases: Vec<(&str, Make)> = vec![
            (
                "symlink",
                Box::new(|d: &Path| {
                    std::os::unix::fs::symlink("/etc/passwd", d.join("l")).unwrap()
                }),
            ),
            (
                "invalid-utf8",
                Box::new(|d: &Path| fs::write(d.join("bin"), [0xff, 0xfe]).unwrap()),
            ),
            (
                "git-segment",
                Box::new(|d: &Path| {
                    fs::create_dir(d.join(".git")).unwrap();
                    fs::write(d.join(".git/config"), "x").unwrap();
                }),
            ),
            (
                "bad-path",
                Box::new(|d: &Path| fs::write(d.join("a b"), "x").unwrap()),
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
            let error = read_source_dir(dir.path()).unwrap_err();
            assert_eq!(error.code(), code, "{error}");
        }
        let missing = read_source_dir(Path::new("/nonexistent/sf-source")).unwrap_err();
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
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("l")).unwrap();
        assert_eq!(read_snapshot_dir(dir.path()).unwrap_err().code(), "symlink");
        assert_eq!(
            read_snapshot_dir(&dir.path().join("main.sh"))
                .unwrap_err()
                .code(),
            "not-a-directory"
        );
    }
}
