//! Placement: refusing a protected path that a program could read under the profile (seed
//! 000, "Placement", adapted to Linux).
//!
//! What a program can read is [`RuntimeDescription::readable`]: subtrees and files of the
//! host, each known by its name as configured, by the name it resolves to now, and by its
//! device and inode. A protected path is taken as given (never normalised as text before the
//! file system has resolved it, so `..` after a symbolic link goes where the kernel takes it)
//! and refused when:
//!
//! - it cannot be placed: it is relative; its longest existing prefix cannot be examined or
//!   resolved; the next component is a symbolic link that does not resolve now; a `..`
//!   follows a missing component; or a readable path cannot be resolved;
//! - it is a second name: as written or as resolved it lies under `/proc` (where
//!   `/proc/<pid>/root`, `/proc/self/cwd` and the like name other files) or is `/dev/fd`,
//!   `/dev/stdin`, `/dev/stdout` or `/dev/stderr` or below them;
//! - by device and inode: its longest existing prefix, or any directory above it as the
//!   kernel resolves `..`, is a readable subtree (this catches bind mounts, which are second
//!   names with the same device and inode); or the whole path exists and is a readable file or
//!   subtree, or a directory above one;
//! - by name: as written (normalised) or as resolved, it equals, lies below or contains a
//!   readable subtree, or equals or contains a readable file; compared without regard to
//!   case, which costs nothing and stays right on case-insensitive file systems.
//!
//! Not established (as in the seed): a hard link to a protected file placed inside a readable
//! directory (only identities of the path and the directories above it are compared, the
//! readable trees are not searched), and a component created between a check and a launch.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use sf_host::contracts::{ReadableKind, RuntimeDescription};

/// Device and inode.
type Identity = (u64, u64);

/// One readable entry, every way it can be named.
struct Readable {
    names: Vec<PathBuf>,
    identity: Identity,
    kind: ReadableKind,
    /// The identities of the directories above it, as the kernel resolves `..`.
    above: Vec<Identity>,
}

/// The problem with placing `protected` paths beside a program run under `runtime`, or
/// `None` when every one of them is out of the program's reach.
pub fn placement_problem(protected: &[PathBuf], runtime: &RuntimeDescription) -> Option<String> {
    let readable = match readable_set(runtime) {
        Ok(readable) => readable,
        Err(problem) => return Some(problem),
    };
    protected
        .iter()
        .find_map(|path| check_one(path, &readable).err())
}

fn readable_set(runtime: &RuntimeDescription) -> Result<Vec<Readable>, String> {
    runtime
        .readable
        .iter()
        .map(|entry| {
            let resolved = entry.path.canonicalize().map_err(|error| {
                format!(
                    "the readable path {} cannot be placed: {error}",
                    entry.path.display()
                )
            })?;
            let metadata = fs::metadata(&resolved).map_err(|error| {
                format!(
                    "the readable path {} cannot be placed: {error}",
                    entry.path.display()
                )
            })?;
            let start = if metadata.is_dir() {
                resolved.clone()
            } else {
                resolved.parent().unwrap_or(Path::new("/")).to_path_buf()
            };
            let mut above = directory_chain(&start)?;
            if metadata.is_dir() {
                above.remove(0);
            }
            Ok(Readable {
                names: vec![lexical(&entry.path), resolved],
                identity: (metadata.dev(), metadata.ino()),
                kind: entry.kind,
                above,
            })
        })
        .collect()
}

/// The identities of `directory` and every directory above it, following `..` as the
/// kernel does (across mount points, to the real root).
fn directory_chain(directory: &Path) -> Result<Vec<Identity>, String> {
    let mut chain = Vec::new();
    let mut current = directory.to_path_buf();
    loop {
        let metadata = fs::metadata(&current)
            .map_err(|error| format!("{} cannot be examined: {error}", current.display()))?;
        let identity = (metadata.dev(), metadata.ino());
        if chain.last() == Some(&identity) || chain.len() > 4096 {
            return Ok(chain);
        }
        chain.push(identity);
        current.push("..");
    }
}

/// Removes `.` and resolves `..` as text: the "as written (normalised)" name.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

fn folded(path: &Path) -> PathBuf {
    PathBuf::from(path.to_string_lossy().to_lowercase())
}

fn is_second_name(path: &Path) -> bool {
    let path = folded(&lexical(path));
    path.starts_with("/proc")
        || ["/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"]
            .iter()
            .any(|name| path.starts_with(name))
}

fn check_one(path: &Path, readable: &[Readable]) -> Result<(), String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Err(format!("protected path {shown} is not absolute"));
    }
    if is_second_name(path) {
        return Err(format!(
            "protected path {shown} is a second name (under /proc or /dev/fd) for another file"
        ));
    }
    let parts: Vec<&OsStr> = path
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name),
            Component::ParentDir => Some(OsStr::new("..")),
            _ => None,
        })
        .collect();
    // The longest prefix that exists, as the kernel resolves it.
    let mut existing = parts.len();
    let prefix = loop {
        let mut prefix = PathBuf::from("/");
        prefix.extend(&parts[..existing]);
        match fs::metadata(&prefix) {
            Ok(_) => break prefix,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && existing > 0 => {
                existing -= 1;
            }
            Err(error) => {
                return Err(format!(
                    "protected path {shown} cannot be placed: {} cannot be examined: {error}",
                    prefix.display()
                ));
            }
        }
    };
    let rest = &parts[existing..];
    if let Some(next) = rest.first() {
        let candidate = prefix.join(next);
        if let Ok(metadata) = fs::symlink_metadata(&candidate)
            && metadata.file_type().is_symlink()
        {
            return Err(format!(
                "protected path {shown} cannot be placed: {} is a link that does not resolve",
                candidate.display()
            ));
        }
        if rest.iter().any(|part| *part == OsStr::new("..")) {
            return Err(format!(
                "protected path {shown} cannot be placed: .. follows a missing component"
            ));
        }
    }
    let resolved_prefix = prefix.canonicalize().map_err(|error| {
        format!(
            "protected path {shown} cannot be placed: {} does not resolve: {error}",
            prefix.display()
        )
    })?;
    let mut resolved = resolved_prefix.clone();
    resolved.extend(rest);
    if is_second_name(&resolved) {
        return Err(format!(
            "protected path {shown} resolves to {} , a second name for another file",
            resolved.display()
        ));
    }

    // By device and inode.
    let prefix_metadata = fs::metadata(&prefix)
        .map_err(|error| format!("protected path {shown} cannot be placed: {error}"))?;
    let start = if prefix_metadata.is_dir() {
        prefix.clone()
    } else {
        resolved_prefix
            .parent()
            .unwrap_or(Path::new("/"))
            .to_path_buf()
    };
    let chain = directory_chain(&start)
        .map_err(|error| format!("protected path {shown} cannot be placed: {error}"))?;
    if let Some(entry) = readable
        .iter()
        .find(|entry| entry.kind == ReadableKind::Subtree && chain.contains(&entry.identity))
    {
        return Err(format!(
            "protected path {shown} lies in the readable subtree {} (same device and inode)",
            entry.names[0].display()
        ));
    }
    if rest.is_empty() {
        let identity = (prefix_metadata.dev(), prefix_metadata.ino());
        if let Some(entry) = readable.iter().find(|entry| entry.identity == identity) {
            return Err(format!(
                "protected path {shown} is the readable path {} (same device and inode)",
                entry.names[0].display()
            ));
        }
        if prefix_metadata.is_dir()
            && let Some(entry) = readable
                .iter()
                .find(|entry| entry.above.contains(&identity))
        {
            return Err(format!(
                "protected path {shown} contains the readable path {} (same device and inode)",
                entry.names[0].display()
            ));
        }
    }

    // By name, without regard to case.
    for name in [lexical(path), resolved] {
        let name = folded(&name);
        for entry in readable {
            for readable_name in &entry.names {
                let readable_name = folded(readable_name);
                let below = entry.kind == ReadableKind::Subtree && name.starts_with(&readable_name);
                if name == readable_name || below || readable_name.starts_with(&name) {
                    return Err(format!(
                        "protected path {shown} (as {}) meets the readable path {} by name",
                        name.display(),
                        entry.names[0].display()
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sf_host::canonical::Digest;
    use sf_host::contracts::ReadablePath;

    fn runtime(readable: Vec<(PathBuf, ReadableKind)>) -> RuntimeDescription {
        RuntimeDescription {
            executable: PathBuf::from("/bin/sh"),
            readable: readable
                .into_iter()
                .map(|(path, kind)| ReadablePath { path, kind })
                .collect(),
            digest: Digest::of(b""),
        }
    }

    #[test]
    fn refuses_every_name_of_a_readable_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let lib = root.join("lib");
        let secret = root.join("secret");
        fs::create_dir_all(lib.join("sub")).unwrap();
        fs::create_dir_all(&secret).unwrap();
        std::os::unix::fs::symlink(&lib, root.join("alias")).unwrap();
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).unwrap();
        std::os::unix::fs::symlink(lib.join("sub"), root.join("deep")).unwrap();
        let description = runtime(vec![(lib.clone(), ReadableKind::Subtree)]);
        let problem = |path: PathBuf| placement_problem(&[path], &description);

        assert_eq!(problem(secret.join("key")), None);
        assert_eq!(problem(secret.clone()), None);
        assert!(problem(lib.join("key")).is_some());
        assert!(problem(PathBuf::from(lib.to_string_lossy().to_uppercase())).is_some());
        assert!(problem(root.join("alias/key")).is_some(), "through a link");
        // deep -> lib/sub, so deep/.. is lib as the kernel resolves it (and not root).
        assert!(
            problem(root.join("deep/../key")).is_some(),
            ".. after a link"
        );
        assert!(
            problem(root.join("dangling/key")).is_some(),
            "dangling link"
        );
        assert!(problem(root.clone()).is_some(), "contains a readable tree");
        assert!(
            problem(PathBuf::from("/proc/self/root").join(root.strip_prefix("/").unwrap()))
                .is_some()
        );
        assert!(problem(PathBuf::from("relative")).is_some());
    }

    #[test]
    fn refuses_a_bind_mount_second_name() {
        // A second name with the same device and inode: a bind mount needs privileges, so
        // compare the identity rule directly through a directory's own chain.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("tree/inner")).unwrap();
        let description = runtime(vec![(root.join("tree"), ReadableKind::Subtree)]);
        let readable = readable_set(&description).unwrap();
        let chain = directory_chain(&root.join("tree/inner")).unwrap();
        assert!(chain.contains(&readable[0].identity));
    }
}
