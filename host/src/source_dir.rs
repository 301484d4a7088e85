//! Reading a directory of text files as the source of a new repository: every regular file
//! under it, by its relative path in the path grammar, as UTF-8 text. Anything sf could not
//! store exactly (a symbolic link, a device, a socket, a non-UTF-8 file or name, a path
//! outside the grammar, an empty directory, more than the limits) is refused with the path
//! at fault; nothing is skipped silently.
//!
//! [`read_snapshot_dir`] reads a directory the same way as a file snapshot (a program or an
//! input to run): the same rules, except that contents are bytes (any bytes: a snapshot holds
//! bytes) and the limits are the snapshot's.

use std::io::Read as _;
use std::path::{Path, PathBuf};

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
        }
    }
}

/// Reads every file under `root` (which must be a directory), sorted by path. Files are read
/// through descriptors opened without following links, and no file is read past the
/// per-file limit, so a huge or hostile tree fails fast.
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
        .map(|(path, content)| SnapshotFile { path, content })
        .collect())
}

/// The limits of one kind of directory read, and what the limits are of (for messages).
struct Limits {
    max_files: usize,
    max_file_bytes: usize,
    max_total_bytes: usize,
    holder: &'static str,
}

/// Reads every file under `root` as `(relative path, convert(bytes))`, sorted by path.
fn read_dir_files<T>(
    root: &Path,
    limits: &Limits,
    convert: impl Fn(&Path, Vec<u8>) -> Result<T, SourceDirError>,
) -> Result<Vec<(String, T)>, SourceDirError> {
    let meta = std::fs::metadata(root).map_err(|error| SourceDirError::NotADirectory {
        path: root.to_owned(),
        detail: error.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(SourceDirError::NotADirectory {
            path: root.to_owned(),
            detail: "is not a directory".into(),
        });
    }
    let mut files = Vec::new();
    let mut total = 0usize;
    walk(root, root, limits, &convert, &mut files, &mut total)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

fn walk<T>(
    root: &Path,
    dir: &Path,
    limits: &Limits,
    convert: &impl Fn(&Path, Vec<u8>) -> Result<T, SourceDirError>,
    files: &mut Vec<(String, T)>,
    total: &mut usize,
) -> Result<(), SourceDirError> {
    let unreadable = |path: &Path, error: std::io::Error| SourceDirError::Unreadable {
        path: path.to_owned(),
        detail: error.to_string(),
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|error| unreadable(dir, error))? {
        entries.push(entry.map_err(|error| unreadable(dir, error))?.path());
    }
    if entries.is_empty() && dir != root {
        return Err(SourceDirError::EmptyDirectory {
            path: dir.to_owned(),
        });
    }
    entries.sort();
    for path in entries {
        let relative = relative_path(root, &path)?;
        let meta = std::fs::symlink_metadata(&path).map_err(|error| unreadable(&path, error))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            return Err(SourceDirError::Symlink { path });
        }
        if kind.is_dir() {
            walk(root, &path, limits, convert, files, total)?;
            continue;
        }
        if !kind.is_file() {
            return Err(SourceDirError::NotRegular { path });
        }
        if files.len() >= limits.max_files {
            return Err(SourceDirError::TooLarge {
                path: root.to_owned(),
                limit: format!(
                    "holds more than {} files, the most {} may hold",
                    limits.max_files, limits.holder
                ),
            });
        }
        let bytes = read_bytes(&path, limits.max_file_bytes)?;
        *total += bytes.len();
        if *total > limits.max_total_bytes {
            return Err(SourceDirError::TooLarge {
                path: root.to_owned(),
                limit: format!(
                    "holds more than {} bytes, the most {} may hold",
                    limits.max_total_bytes, limits.holder
                ),
            });
        }
        files.push((relative, convert(&path, bytes)?));
    }
    Ok(())
}

fn relative_path(root: &Path, path: &Path) -> Result<String, SourceDirError> {
    let bad = |rule| SourceDirError::BadPath {
        path: path.to_owned(),
        rule,
    };
    let relative = path
        .strip_prefix(root)
        .ok()
        .and_then(Path::to_str)
        .ok_or_else(|| bad(PathRule::Grammar))?
        .to_owned();
    // Directories are checked as prefixes of their files; checking each entry here names the
    // first offending component (a `.git` directory, say) before anything below it is read.
    source_path::check_path(&relative).map_err(bad)?;
    Ok(relative)
}

fn read_bytes(path: &Path, limit: usize) -> Result<Vec<u8>, SourceDirError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let unreadable = |error: std::io::Error| SourceDirError::Unreadable {
        path: path.to_owned(),
        detail: error.to_string(),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(SourceDirError::NotRegular {
            path: path.to_owned(),
        });
    }
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() > limit {
        return Err(SourceDirError::TooLarge {
            path: path.to_owned(),
            limit: format!("is larger than {limit} bytes, the most one file may hold"),
        });
    }
    Ok(bytes)
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
