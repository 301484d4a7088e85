//! Runtimes: an executable plus the host paths a program may read, resolved once into the
//! mount layout the launcher rebuilds inside the sandbox, and digested.
//!
//! Each readable path is walked component by component on the host. A symbolic link met on
//! the way is recreated inside the sandbox with the same target text, and the walk goes on
//! from its target; the object a path finally names (a directory or a regular file) is
//! bind-mounted read-only at its own canonical path, and its device and inode numbers are
//! recorded so that the launcher refuses a path that was replaced since. The sandbox thus
//! sees every configured path under the same name and with the same meaning as the host,
//! and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sf_contracts::canonical::{self, Digest, Value};
use sf_contracts::{ExecutorError, ReadableKind, ReadablePath, RuntimeDescription};

/// The protocol string of the runtime digest's canonical document.
pub const RUNTIME_PROTOCOL: &str = "sf-sandbox-runtime/1";

/// The device files every sandbox gets, bound read-only from the host.
pub const DEVICES: &[&str] = &["/dev/null", "/dev/random", "/dev/urandom", "/dev/zero"];

/// Symbolic links followed while resolving one path (the kernel's own limit).
const MAX_LINK_HOPS: usize = 40;

/// The directories every default runtime reads: the shared libraries, the ELF interpreter
/// and, through the `/lib` and `/lib64` links of a merged-/usr system, their other names.
/// Fixed directories instead of an `ldd` walk: simple, and it covers the modules Python and
/// Node load at run time, which `ldd` cannot see.
pub const LIBRARY_DIRECTORIES: &[&str] = &["/usr/lib", "/lib", "/lib64", "/usr/lib64"];

/// A runtime as configured: the executable and the paths a program may read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeConfig {
    /// The absolute path of the executable (it may be a symbolic link).
    pub executable: PathBuf,
    /// Absolute paths of directories (read with everything below them) and files the
    /// program may read besides the executable. Paths that do not exist are refused.
    pub readable: Vec<PathBuf>,
}

impl RuntimeConfig {
    /// `/bin/sh` with `/usr/bin` (so that scripts can run the usual tools) and the library
    /// directories.
    pub fn shell() -> Self {
        Self::with_libraries("/bin/sh", &["/usr/bin", "/bin"])
    }

    /// `/usr/bin/python3` with the library directories (which hold its standard library).
    pub fn python3() -> Self {
        Self::with_libraries("/usr/bin/python3", &[])
    }

    /// `/usr/bin/node` with the library directories.
    pub fn node() -> Self {
        Self::with_libraries("/usr/bin/node", &[])
    }

    /// `executable` with `extra` readable paths and the library directories that exist here.
    pub fn with_libraries(executable: impl Into<PathBuf>, extra: &[&str]) -> Self {
        let mut readable: Vec<PathBuf> = extra.iter().map(PathBuf::from).collect();
        readable.extend(
            LIBRARY_DIRECTORIES
                .iter()
                .map(PathBuf::from)
                .filter(|path| path.symlink_metadata().is_ok()),
        );
        Self {
            executable: executable.into(),
            readable,
        }
    }
}

/// What the launcher binds: a directory or a regular file of the host, checked by identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindSource {
    pub directory: bool,
    pub dev: u64,
    pub ino: u64,
}

/// The resolved mount layout of a runtime inside the sandbox (paths are absolute and the
/// same inside and outside).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Directories to create on the sandbox's root file system.
    pub directories: BTreeSet<PathBuf>,
    /// Symbolic links to create, with their target text.
    pub symlinks: BTreeMap<PathBuf, PathBuf>,
    /// Host objects to bind read-only at the same path.
    pub binds: BTreeMap<PathBuf, BindSource>,
}

impl Layout {
    fn covered(&self, path: &Path) -> bool {
        self.binds
            .iter()
            .any(|(bound, source)| source.directory && path != bound && path.starts_with(bound))
    }

    /// Drops everything a bound directory already shows.
    fn prune(&mut self) {
        let covered: Vec<PathBuf> = self
            .binds
            .keys()
            .chain(self.symlinks.keys())
            .chain(self.directories.iter())
            .filter(|path| self.covered(path))
            .cloned()
            .collect();
        for path in covered {
            self.binds.remove(&path);
            self.symlinks.remove(&path);
            self.directories.remove(&path);
        }
        let bound: Vec<PathBuf> = self.binds.keys().cloned().collect();
        for path in bound {
            self.directories.remove(&path);
        }
    }
}

/// A configured runtime: its resolved layout and what is needed to digest it.
#[derive(Debug)]
pub struct Runtime {
    config: RuntimeConfig,
    layout: Layout,
    readable: Vec<ReadablePath>,
    /// The executable's digest and the metadata it was computed for.
    cached: Mutex<Option<(FileStamp, Digest)>>,
    /// The description's digest and the executable digest it was computed with (the rest of
    /// the description is fixed by the configuration).
    described: Mutex<Option<(Digest, Digest)>>,
}

/// What must stay equal for a cached file digest to stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(metadata: &fs::Metadata) -> Self {
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }
}

fn invalid(input: String, rule: &'static str) -> ExecutorError {
    ExecutorError::InvalidInput { input, rule }
}

fn unavailable(reason: String) -> ExecutorError {
    ExecutorError::Unavailable {
        mechanism: "runtime".to_owned(),
        reason,
    }
}

impl Runtime {
    /// Resolves `config`. `for_other_user`: the sandbox will read as another, unprivileged
    /// user (the caller is root), so every bound object must be readable, and every directory
    /// above it searchable, by others.
    pub fn new(config: RuntimeConfig, for_other_user: bool) -> Result<Self, ExecutorError> {
        let mut layout = Layout::default();
        let mut readable = Vec::new();
        let mut paths = vec![config.executable.clone()];
        paths.extend(config.readable.iter().cloned());
        for path in &paths {
            check_configured(path)?;
            let kind = configured_kind(path, path == &config.executable)?;
            resolve(path, &mut layout)?;
            readable.push(ReadablePath {
                path: path.clone(),
                kind,
            });
        }
        layout.prune();
        readable.extend(bound_paths(&layout, for_other_user)?);
        check_trusted(&layout)?;
        readable.extend(DEVICES.iter().map(|device| ReadablePath {
            path: PathBuf::from(device),
            kind: ReadableKind::File,
        }));
        readable.sort();
        readable.dedup();
        Ok(Self {
            config,
            layout,
            readable,
            cached: Mutex::new(None),
            described: Mutex::new(None),
        })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether every bound path is still the file or directory it was when the runtime was
    /// configured (same device and inode, not following a final symbolic link, as the
    /// launcher clones them). A sandbox prepared earlier holds the clones it made then.
    pub fn binds_as_configured(&self) -> bool {
        self.layout.binds.iter().all(|(path, source)| {
            fs::symlink_metadata(path)
                .is_ok_and(|metadata| metadata.dev() == source.dev && metadata.ino() == source.ino)
        })
    }

    /// Describes the runtime as it is now: the executable is digested again whenever its
    /// device, inode, size, modification or change time differ from the last digest's.
    pub fn describe(&self) -> Result<RuntimeDescription, ExecutorError> {
        let executable = self.executable_digest()?;
        let mut described = self.described.lock().unwrap_or_else(|e| e.into_inner());
        let digest = match described.as_ref() {
            Some((seen, digest)) if *seen == executable => digest.clone(),
            _ => {
                let digest = self.description_digest(&executable)?;
                *described = Some((executable, digest.clone()));
                digest
            }
        };
        Ok(RuntimeDescription {
            executable: self.config.executable.clone(),
            readable: self.readable.clone(),
            digest,
        })
    }

    /// The digest of the description document, given the executable's digest.
    fn description_digest(&self, executable: &Digest) -> Result<Digest, ExecutorError> {
        let mut readable = Vec::with_capacity(self.readable.len());
        for entry in &self.readable {
            let kind = match entry.kind {
                ReadableKind::File => "file",
                ReadableKind::Subtree => "subtree",
            };
            readable.push(canonical::object([
                ("path", Value::from(path_text(&entry.path)?)),
                ("kind", Value::from(kind)),
            ]));
        }
        let readable = Value::Array(readable);
        let symlinks = Value::Array(
            self.layout
                .symlinks
                .iter()
                .map(|(path, target)| {
                    Ok(canonical::object([
                        ("path", Value::from(path_text(path)?)),
                        ("target", Value::from(path_text(target)?)),
                    ]))
                })
                .collect::<Result<_, ExecutorError>>()?,
        );
        let configured = Value::Array(
            self.config
                .readable
                .iter()
                .map(|path| path_text(path).map(Value::from))
                .collect::<Result<_, _>>()?,
        );
        let document = canonical::object([
            ("protocol", Value::from(RUNTIME_PROTOCOL)),
            ("configured", configured),
            (
                "executable",
                Value::from(path_text(&self.config.executable)?),
            ),
            ("executableSha256", Value::from(executable.to_string())),
            ("readable", readable),
            ("symlinks", symlinks),
        ]);
        canonical::digest(&document)
            .map_err(|error| unavailable(format!("the runtime description: {error}")))
    }

    fn executable_digest(&self) -> Result<Digest, ExecutorError> {
        let path = &self.config.executable;
        let read_error =
            |error: std::io::Error| unavailable(format!("{}: {error}", path.display()));
        let mut file = fs::File::open(path).map_err(read_error)?;
        let stamp = FileStamp::of(&file.metadata().map_err(read_error)?);
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, digest)) = cached.as_ref()
            && *seen == stamp
        {
            return Ok(digest.clone());
        }
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let read = file.read(&mut buffer).map_err(read_error)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
        }
        let digest = Digest::from_bytes(hasher.finalize().into());
        *cached = Some((stamp, digest.clone()));
        Ok(digest)
    }
}

/// The path as UTF-8 text; sf configures only such paths.
pub(crate) fn path_text(path: &Path) -> Result<String, ExecutorError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("path {}", path.display()), "a path is UTF-8"))
}

fn check_configured(path: &Path) -> Result<(), ExecutorError> {
    let text = path_text(path)?;
    let clean = text.starts_with('/')
        && text[1..]
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..");
    if !clean || path == Path::new("/") {
        return Err(invalid(
            format!("runtime path {text:?}"),
            "a runtime path is absolute, not /, without . or .. or empty segments",
        ));
    }
    if text.bytes().any(|b| b.is_ascii_control()) {
        return Err(invalid(
            format!("runtime path {text:?}"),
            "the runtime path holds a control character",
        ));
    }
    Ok(())
}

/// What a configured runtime path is (a directory or a regular file; the executable an
/// executable regular file), on the host as it is now.
fn configured_kind(path: &Path, executable: bool) -> Result<ReadableKind, ExecutorError> {
    let metadata = fs::metadata(path).map_err(|error| {
        invalid(
            format!("runtime path {}: {error}", path.display()),
            "every runtime path exists",
        )
    })?;
    let kind = if metadata.is_dir() {
        ReadableKind::Subtree
    } else if metadata.is_file() {
        ReadableKind::File
    } else {
        return Err(invalid(
            format!("runtime path {}", path.display()),
            "a runtime path is a directory or a regular file",
        ));
    };
    if executable && (kind != ReadableKind::File || metadata.permissions().mode() & 0o111 == 0) {
        return Err(invalid(
            format!("runtime executable {}", path.display()),
            "the executable is an executable regular file",
        ));
    }
    Ok(kind)
}

/// The readable paths of what the layout binds; when the sandbox reads as another user
/// (`for_other_user`), each must be readable by others.
fn bound_paths(layout: &Layout, for_other_user: bool) -> Result<Vec<ReadablePath>, ExecutorError> {
    let mut readable = Vec::new();
    for (path, source) in &layout.binds {
        readable.push(ReadablePath {
            path: path.clone(),
            kind: if source.directory {
                ReadableKind::Subtree
            } else {
                ReadableKind::File
            },
        });
        if for_other_user {
            check_readable_by_others(path, source.directory)?;
        }
    }
    Ok(readable)
}

/// Refuses a runtime any of whose bound paths or links someone other than root and this
/// user could change: the sandbox would read what they put there.
fn check_trusted(layout: &Layout) -> Result<(), ExecutorError> {
    for path in layout.binds.keys().chain(layout.symlinks.keys()) {
        if let Some(problem) = untrusted(path) {
            return Err(invalid(
                format!("runtime path {}: {problem}", path.display()),
                "every runtime path, and every directory above it, is owned by root or \
                 this user and writable by neither group nor others (a directory above \
                 may be sticky, like /tmp)",
            ));
        }
    }
    Ok(())
}

/// Walks `path` on the host, adding what it meets to `layout`.
fn resolve(path: &Path, layout: &mut Layout) -> Result<(), ExecutorError> {
    let mut pending: Vec<PathBuf> = path
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(PathBuf::from(name)),
            _ => None,
        })
        .rev()
        .collect();
    let mut current = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = pending.pop() {
        if name == Path::new("..") {
            current.pop();
            continue;
        }
        if name == Path::new(".") {
            continue;
        }
        let next = current.join(&name);
        let metadata = next.symlink_metadata().map_err(|error| {
            invalid(
                format!(
                    "runtime path {} (at {}): {error}",
                    path.display(),
                    next.display()
                ),
                "every runtime path resolves",
            )
        })?;
        if metadata.file_type().is_symlink() {
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return Err(invalid(
                    format!("runtime path {}", path.display()),
                    "a runtime path resolves within 40 symbolic links",
                ));
            }
            let target = record_link(&next, layout)?;
            if target.is_absolute() {
                current = PathBuf::from("/");
            }
            pending.extend(link_parts(&target).into_iter().rev());
            continue;
        }
        if pending.is_empty() {
            return bind_leaf(next, &metadata, layout);
        }
        if !metadata.is_dir() {
            return Err(invalid(
                format!("runtime path {} (at {})", path.display(), next.display()),
                "every component above a runtime path is a directory",
            ));
        }
        layout.directories.insert(next.clone());
        current = next;
    }
    Err(invalid(
        format!("runtime path {}", path.display()),
        "a runtime path names something below /",
    ))
}

/// Reads the runtime link `link` and records it in `layout` (the sandbox recreates it);
/// answers its target.
fn record_link(link: &Path, layout: &mut Layout) -> Result<PathBuf, ExecutorError> {
    let target = fs::read_link(link).map_err(|error| {
        invalid(
            format!("runtime link {}: {error}", link.display()),
            "every runtime link can be read",
        )
    })?;
    path_text(&target)?;
    layout.symlinks.insert(link.to_path_buf(), target.clone());
    Ok(target)
}

/// The names a link's target walks through, in order (`..` kept: it is walked too).
fn link_parts(target: &Path) -> Vec<PathBuf> {
    target
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect()
}

/// Records the end of a runtime path's walk as a bind, with the identity the launcher checks
/// its clone against: a directory or a regular file, nothing else.
fn bind_leaf(
    leaf: PathBuf,
    metadata: &fs::Metadata,
    layout: &mut Layout,
) -> Result<(), ExecutorError> {
    if !metadata.is_dir() && !metadata.is_file() {
        return Err(invalid(
            format!("runtime path {}", leaf.display()),
            "a runtime path names a directory or a regular file",
        ));
    }
    layout.binds.insert(
        leaf,
        BindSource {
            directory: metadata.is_dir(),
            dev: metadata.dev(),
            ino: metadata.ino(),
        },
    );
    Ok(())
}

/// What makes `path` changeable by someone other than root and this user, if anything: the
/// object itself (a symbolic link's own mode means nothing, its directory does) owned by
/// another user or writable by group or others, or a directory above it owned by another
/// user, or writable by group or others without the sticky bit (with it, like `/tmp`, no one
/// else can rename or remove what is ours). Nothing is followed: each name is examined as it
/// is.
pub(crate) fn untrusted(path: &Path) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let owner = |metadata: &fs::Metadata| metadata.uid() == 0 || metadata.uid() == euid;
    let own = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) => return Some(format!("it cannot be examined: {error}")),
    };
    if !own.file_type().is_symlink() && (!owner(&own) || own.mode() & 0o022 != 0) {
        return Some(format!(
            "it is owned by uid {} with mode {:o}",
            own.uid(),
            own.mode() & 0o7777
        ));
    }
    for above in path.ancestors().skip(1) {
        let metadata = match fs::symlink_metadata(above) {
            Ok(metadata) => metadata,
            Err(error) => return Some(format!("{} cannot be examined: {error}", above.display())),
        };
        if !owner(&metadata) || (metadata.mode() & 0o022 != 0 && metadata.mode() & 0o1000 == 0) {
            return Some(format!(
                "the directory {} above it is owned by uid {} with mode {:o}",
                above.display(),
                metadata.uid(),
                metadata.mode() & 0o7777
            ));
        }
    }
    None
}

pub(crate) fn check_readable_by_others(path: &Path, directory: bool) -> Result<(), ExecutorError> {
    let refuse = |what: &Path| {
        invalid(
            format!("runtime path {} (at {})", path.display(), what.display()),
            "when sf runs as root the sandbox reads as an unprivileged user, so every runtime \
             path must be readable by others and every directory above it searchable by others",
        )
    };
    let mode = fs::metadata(path).map_err(|_| refuse(path))?.mode();
    let needed = if directory { 0o005 } else { 0o004 };
    if mode & needed != needed {
        return Err(refuse(path));
    }
    for ancestor in path.ancestors().skip(1) {
        let mode = fs::metadata(ancestor).map_err(|_| refuse(ancestor))?.mode();
        if mode & 0o001 == 0 {
            return Err(refuse(ancestor));
        }
    }
    Ok(())
}

/// The identity of each device file, recorded so that the launcher binds the same ones.
pub fn device_sources() -> Result<BTreeMap<PathBuf, BindSource>, ExecutorError> {
    DEVICES
        .iter()
        .map(|device| {
            let metadata = fs::metadata(device).map_err(|error| ExecutorError::Unavailable {
                mechanism: "devices".to_owned(),
                reason: format!("{device}: {error}"),
            })?;
            Ok((
                PathBuf::from(device),
                BindSource {
                    directory: false,
                    dev: metadata.dev(),
                    ino: metadata.ino(),
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_recreated_and_targets_bound() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("usr/lib")).unwrap();
        fs::write(root.join("usr/lib/libx.so"), b"x").unwrap();
        std::os::unix::fs::symlink("usr/lib", root.join("lib")).unwrap();
        std::os::unix::fs::symlink(root.join("lib/libx.so"), root.join("abs")).unwrap();
        let mut layout = Layout::default();
        resolve(&root.join("abs"), &mut layout).unwrap();
        resolve(&root.join("usr/lib"), &mut layout).unwrap();
        layout.prune();
        assert_eq!(
            layout.symlinks.get(&root.join("lib")),
            Some(&PathBuf::from("usr/lib"))
        );
        assert!(layout.symlinks.contains_key(&root.join("abs")));
        // The file is inside the bound directory, so only the directory is bound.
        assert_eq!(
            layout.binds.keys().cloned().collect::<Vec<_>>(),
            vec![root.join("usr/lib")]
        );
        assert!(!layout.directories.contains(&root.join("usr/lib")));
        assert!(layout.directories.contains(&root.join("usr")));
    }

    #[test]
    fn refuses_unclean_paths() {
        for path in ["relative", "/a/../b", "/a/./b", "/", "/a/"] {
            assert!(check_configured(Path::new(path)).is_err(), "{path}");
        }
    }

    #[test]
    fn default_shell_resolves_and_digests() {
        let runtime = Runtime::new(RuntimeConfig::shell(), false).unwrap();
        let first = runtime.describe().unwrap();
        assert_eq!(first, runtime.describe().unwrap());
        assert!(
            first
                .readable
                .iter()
                .any(|entry| entry.path == Path::new("/dev/null"))
        );
        let mut config = RuntimeConfig::shell();
        config.readable.pop();
        let other = Runtime::new(config, false).unwrap().describe().unwrap();
        assert_ne!(first.digest, other.digest);
    }
}
