//! The fixed on-disk layout of an owned root and its exclusive creation.
//!
//! The store writes the layout itself instead of running `git init`: `git init` copies
//! templates (hooks, `info/`, `description`) and picks defaults from the ambient
//! configuration, and sf wants a root whose every byte it can predict and check. Changing any
//! constant here changes what existing roots must look like, so it is a protocol change.

use std::ffi::OsStr;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use sf_contracts::{ObjectStoreError, StoreRoot};

use crate::errors::unavailable;
use crate::ownership::effective_uid;

/// The owned `config`: bare, files ref backend (no `extensions.*`), and every feature that
/// could run code or rewrite the repository behind sf's back switched off. The same settings
/// are repeated with `-c` on every command, so a tampered file alone changes nothing before
/// the ownership check refuses it.
pub const CONFIG: &[u8] = b"[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = true
\tlogAllRefUpdates = false
\thooksPath = /dev/null
\tfsmonitor = false
\tfsync = all
\tuseReplaceRefs = false
[gc]
\tauto = 0
[maintenance]
\tauto = false
";

/// The owned `HEAD`. Git needs a valid HEAD to recognise the directory as a repository; sf
/// never reads or moves it.
pub const HEAD: &[u8] = b"ref: refs/heads/main\n";

/// The ownership marker's file name in the root; it exists only once the root is marked.
pub const MARKER_NAME: &str = "sf-repository.json";

/// The top-level entries of every root besides the marker. Anything else (hooks, info,
/// packed-refs, logs, reftable, worktrees, shallow, …) makes the root unavailable, apart
/// from Git's own transient `HEAD.lock`.
pub const TOP_LEVEL: &[&str] = &["HEAD", "config", "objects", "refs"];

/// The one tolerated extra top-level entry: the lock a concurrent `update-ref` of the ref
/// HEAD names takes on HEAD.
pub const HEAD_LOCK: &str = "HEAD.lock";

/// The largest marker accepted; the marker is read whole before every operation.
pub const MARKER_MAX_BYTES: usize = 64 * 1024;

/// The longest root path accepted, in bytes.
pub const PATH_MAX_BYTES: usize = 1024;

/// The directories of a fresh root, parents first.
pub(crate) const DIRECTORIES: &[&str] = &[
    "objects",
    "objects/info",
    "objects/pack",
    "refs",
    "refs/heads",
    "refs/tags",
];

/// The directories the ownership check requires (the ref subdirectories may be absent in
/// principle; ref operations check the components they touch).
pub(crate) const CHECKED_DIRECTORIES: &[&str] =
    &["objects", "objects/info", "objects/pack", "refs"];

/// Refuses a root path that is not absolute, normalised and at most [`PATH_MAX_BYTES`]:
/// the check is textual so that it holds before anything on disk is examined.
pub(crate) fn check_path_shape(path: &Path) -> Result<(), ObjectStoreError> {
    let refuse = |rule: &'static str| ObjectStoreError::InvalidInput {
        input: format!("repository path {}", path.display()),
        rule,
    };
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() > PATH_MAX_BYTES {
        return Err(refuse("a repository path is at most 1024 bytes"));
    }
    if bytes.first() != Some(&b'/') {
        return Err(refuse("a repository path is absolute"));
    }
    if bytes.len() == 1 {
        return Err(refuse("a repository path names a directory below /"));
    }
    if bytes.ends_with(b"/") || bytes.windows(2).any(|pair| pair == b"//") {
        return Err(refuse(
            "a repository path is normalised: no trailing / and no //",
        ));
    }
    if bytes.contains(&0) {
        return Err(refuse("the repository path contains a NUL byte"));
    }
    // Byte segments, not `Path::components`: components silently drop inner `.` segments.
    let dotted = bytes[1..]
        .split(|&b| b == b'/')
        .any(|segment| segment == b"." || segment == b"..");
    if dotted {
        return Err(refuse(
            "a repository path is normalised: no . or .. segment",
        ));
    }
    Ok(())
}

/// Refuses to create `path` unless its parent is an existing canonical directory of this
/// user that no one else can write: otherwise someone else could swap the root after it is
/// made.
fn check_parent(path: &Path) -> Result<(), ObjectStoreError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(ObjectStoreError::InvalidInput {
            input: format!("repository path {}", path.display()),
            rule: "a repository path has a parent and a name",
        });
    };
    let canonical = std::fs::canonicalize(parent).map_err(|_| {
        unavailable(
            parent,
            "the parent of a new root must exist and be examinable",
        )
    })?;
    if canonical.join(name) != path {
        return Err(ObjectStoreError::InvalidInput {
            input: format!("repository path {}", path.display()),
            rule: "a repository path is canonical (its parent resolves to itself)",
        });
    }
    let meta = std::fs::symlink_metadata(parent)
        .map_err(|_| unavailable(parent, "the parent of a new root must be examinable"))?;
    if !meta.file_type().is_dir() {
        return Err(unavailable(
            parent,
            "the parent of a new root is a directory",
        ));
    }
    if meta.uid() != effective_uid() {
        return Err(unavailable(
            parent,
            "the parent of a new root is owned by this user",
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unavailable(
            parent,
            "the parent of a new root is not group- or world-writable",
        ));
    }
    Ok(())
}

/// Creates a fresh root at `path` with an exclusive mkdir and writes the layout, syncing
/// every file and directory so that a crash cannot leave a root that looks complete but is
/// not. Returns the root's identity (path, device, inode).
pub(crate) fn create_root(path: &Path) -> Result<StoreRoot, ObjectStoreError> {
    check_path_shape(path)?;
    check_parent(path)?;
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
            return Err(ObjectStoreError::Exists {
                path: path.to_owned(),
            });
        }
        Err(_) => return Err(unavailable(path, "the root directory could not be created")),
    }
    let failed = |what: &str| unavailable(path, format!("creating the layout failed: {what}"));
    // The umask may have cleared bits of 0700 but never added any; set it exactly anyway so
    // that the ownership check's mode rule holds by construction.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .map_err(|_| failed("chmod 0700"))?;
    let meta = std::fs::symlink_metadata(path).map_err(|_| failed("lstat of the root"))?;
    let root = StoreRoot {
        path: path.to_owned(),
        dev: meta.dev(),
        ino: meta.ino(),
    };
    for dir in DIRECTORIES {
        DirBuilder::new()
            .mode(0o700)
            .create(path.join(dir))
            .map_err(|_| failed(dir))?;
    }
    write_new_file(&path.join("config"), CONFIG).map_err(|_| failed("config"))?;
    write_new_file(&path.join("HEAD"), HEAD).map_err(|_| failed("HEAD"))?;
    for dir in ["objects", "refs"] {
        sync_dir(&path.join(dir)).map_err(|_| failed(dir))?;
    }
    sync_dir(path).map_err(|_| failed("fsync of the root"))?;
    if let Some(parent) = path.parent() {
        sync_dir(parent).map_err(|_| failed("fsync of the parent"))?;
    }
    Ok(root)
}

/// Creates `path` exclusively (never following a symlink), writes `bytes` and syncs it.
pub(crate) fn write_new_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Syncs a directory so that entries created in it survive a crash.
pub(crate) fn sync_dir(path: &Path) -> std::io::Result<()> {
    File::open(path)?.sync_all()
}

/// Whether `name` is one of the entries a root with (or without) its marker must hold.
pub(crate) fn is_layout_entry(name: &OsStr, marked: bool) -> bool {
    TOP_LEVEL.iter().any(|entry| OsStr::new(entry) == name)
        || (marked && name == OsStr::new(MARKER_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_shape_rules() {
        for bad in [
            "relative/x",
            "/",
            "/a//b",
            "/a/b/",
            "/a/./b",
            "/a/../b",
            "/a/.",
        ] {
            let error = check_path_shape(Path::new(bad)).expect_err(bad);
            assert_eq!(error.code(), "invalid-input", "{bad}");
        }
        check_path_shape(Path::new("/a/b")).expect("a normalised absolute path");
        let long = format!("/{}", "a".repeat(PATH_MAX_BYTES));
        assert!(check_path_shape(Path::new(&long)).is_err());
        let exact = format!("/{}", "a".repeat(PATH_MAX_BYTES - 1));
        assert!(check_path_shape(Path::new(&exact)).is_ok());
    }

    #[test]
    fn config_has_no_extensions() {
        let text = std::str::from_utf8(CONFIG).expect("ASCII");
        assert!(!text.contains("extensions"));
        assert!(text.contains("bare = true"));
    }
}
