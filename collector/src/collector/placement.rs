//! Placement: refusing a protected path that a sandboxed program could read.
//!
//! Protected paths are what a Candidate must never read: the evidence database, the
//! repository, the fence, the snapshot store, the slice directory with its answer key. What a
//! program can read is the executor's [`RuntimeDescription::readable`] list (the runtime's
//! configured subtrees and files, the profile's fixed device files) plus the runtime
//! executable. The Executor contract has no placement call of its own, so the check is made
//! here, against that list, at construction and again before every launch.
//!
//! A protected path is taken as given (a `..` after a symbolic link is resolved by the file
//! system, never removed as text). Its longest existing prefix is found; it is refused when:
//!
//! - **it cannot be placed**: it is not absolute, a component cannot be examined, the next
//!   component is a symbolic link that does not resolve now, the prefix cannot be resolved,
//!   or a `..` follows a component that does not exist;
//! - **it is a second name**: as written or as resolved it lies under `/proc` (where
//!   `/proc/<pid>/root`, `/proc/self/cwd` and the like name other files) or is `/dev/fd`,
//!   `/dev/stdin`, `/dev/stdout` or `/dev/stderr` or below them;
//! - **by device and inode**: the prefix, or any directory above it as the kernel resolves
//!   `..`, is a readable subtree; or the whole path exists and is a readable subtree or file,
//!   or a directory above one;
//! - **by name**: as written (without `.` segments and repeated slashes) or as the prefix
//!   resolves with the rest appended, it equals, lies below or contains a readable subtree,
//!   or equals or contains a readable file (as written or as it resolves now). Names are
//!   compared as bytes: Linux file names are case-sensitive.
//!
//! Not covered: a hard link to a protected file placed where the profile
//! can read, and a component created between one check and the launch it guards (the next
//! check catches it).

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

use crate::contracts::{ReadableKind, RuntimeDescription};

/// The most protected paths a collector takes.
pub const MAX_PROTECTED_PATHS: usize = 256;

/// One readable entry with every name and identity it has now.
struct Readable {
    kind: ReadableKind,
    names: Vec<PathBuf>,
    identity: Option<(u64, u64)>,
    /// The identities of every directory above it, as the kernel resolves `..`.
    above: BTreeSet<(u64, u64)>,
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

/// The identities of the directories above `path` (which exists), walking `..` as the kernel
/// resolves it, up to the root.
fn identities_above(path: &Path) -> BTreeSet<(u64, u64)> {
    let mut found = BTreeSet::new();
    let mut current = path.to_path_buf();
    let mut last = identity(path);
    for _ in 0..4096 {
        current.push("..");
        let Some(next) = identity(&current) else {
            break;
        };
        if Some(next) == last {
            break;
        }
        found.insert(next);
        last = Some(next);
    }
    found
}

/// `path` without `.` segments or repeated slashes; `..` kept as written.
fn lexical(path: &Path) -> PathBuf {
    path.components()
        .filter(|component| !matches!(component, Component::CurDir))
        .collect()
}

fn readables(runtime: &RuntimeDescription) -> Vec<Readable> {
    let mut entries: Vec<(PathBuf, ReadableKind)> = runtime
        .readable
        .iter()
        .map(|entry| (entry.path.clone(), entry.kind))
        .collect();
    entries.push((runtime.executable.clone(), ReadableKind::File));
    entries
        .into_iter()
        .map(|(path, kind)| {
            let mut names = vec![lexical(&path)];
            if let Ok(resolved) = std::fs::canonicalize(&path) {
                names.push(resolved);
            }
            let identity = identity(&path);
            let above = if identity.is_some() {
                identities_above(&path)
            } else {
                BTreeSet::new()
            };
            Readable {
                kind,
                names,
                identity,
                above,
            }
        })
        .collect()
}

/// Why `protected` cannot be placed safely under `runtime`, or `None`.
pub fn placement_problem(protected: &[PathBuf], runtime: &RuntimeDescription) -> Option<String> {
    if protected.is_empty() || protected.len() > MAX_PROTECTED_PATHS {
        return Some(format!(
            "{} protected paths given; a collector takes 1 to {MAX_PROTECTED_PATHS}",
            protected.len()
        ));
    }
    let readable = readables(runtime);
    protected.iter().find_map(|path| {
        problem_of(path, &readable).map(|why| format!("{}: {why}", path.display()))
    })
}

/// Whether `path` lies where Linux gives other files second names.
fn is_second_name(path: &Path) -> bool {
    path.starts_with("/proc")
        || ["/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"]
            .iter()
            .any(|prefix| path.starts_with(prefix))
}

fn problem_of(path: &Path, readable: &[Readable]) -> Option<String> {
    if !path.is_absolute() || path.as_os_str().as_encoded_bytes().contains(&0) {
        return Some("cannot be placed: not an absolute path".into());
    }
    // The longest existing prefix, walked as written so that the kernel resolves every link
    // and `..` on the way.
    let components: Vec<Component<'_>> = path.components().collect();
    let mut prefix = PathBuf::from("/");
    let mut rest_at = components.len();
    for (at, component) in components.iter().enumerate().skip(1) {
        let candidate = prefix.join(component.as_os_str());
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) => {
                if meta.file_type().is_symlink() && std::fs::metadata(&candidate).is_err() {
                    return Some(format!(
                        "cannot be placed: {} is a link that does not resolve now",
                        candidate.display()
                    ));
                }
                prefix = candidate;
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                rest_at = at;
                break;
            }
            Err(error) => {
                return Some(format!(
                    "cannot be placed: {} cannot be examined: {error}",
                    candidate.display()
                ));
            }
        }
    }
    let rest = &components[rest_at..];
    if rest.iter().any(|c| matches!(c, Component::ParentDir)) {
        return Some("cannot be placed: .. follows a component that does not exist".into());
    }
    let resolved_prefix = match std::fs::canonicalize(&prefix) {
        Ok(resolved) => resolved,
        Err(error) => {
            return Some(format!(
                "cannot be placed: {} cannot be resolved: {error}",
                prefix.display()
            ));
        }
    };
    let mut resolved = resolved_prefix.clone();
    for component in rest {
        resolved.push(component.as_os_str());
    }

    // Second names: a path through /proc or /dev/fd names another file, whatever it says.
    if [lexical(path), resolved.clone()]
        .iter()
        .any(|name| is_second_name(name))
    {
        return Some("is a second name (under /proc or /dev/fd) for another file".into());
    }

    // By device and inode.
    let prefix_identity = identity(&resolved_prefix);
    let mut chain: BTreeSet<(u64, u64)> = identities_above(&resolved_prefix);
    chain.extend(prefix_identity);
    for entry in readable {
        let Some(entry_identity) = entry.identity else {
            continue;
        };
        if entry.kind == ReadableKind::Subtree && chain.contains(&entry_identity) {
            return Some(format!(
                "lies in {}, which the profile can read",
                entry.names[0].display()
            ));
        }
        if rest.is_empty() {
            if prefix_identity == Some(entry_identity) {
                return Some(format!(
                    "is {}, which the profile can read",
                    entry.names[0].display()
                ));
            }
            if prefix_identity.is_some_and(|id| entry.above.contains(&id)) {
                return Some(format!(
                    "contains {}, which the profile can read",
                    entry.names[0].display()
                ));
            }
        }
    }

    // By name.
    let written = lexical(path);
    for name in [&written, &resolved] {
        for entry in readable {
            for readable_name in &entry.names {
                let below = name.starts_with(readable_name);
                let contains = readable_name.starts_with(name);
                let hit = match entry.kind {
                    ReadableKind::Subtree => below || contains,
                    ReadableKind::File => contains,
                };
                if hit {
                    return Some(format!(
                        "overlaps {}, which the profile can read",
                        readable_name.display()
                    ));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Digest;
    use crate::contracts::ReadablePath;

    fn runtime(readable: &[(&Path, ReadableKind)]) -> RuntimeDescription {
        RuntimeDescription {
            executable: PathBuf::from("/bin/sh"),
            readable: readable
                .iter()
                .map(|(path, kind)| ReadablePath {
                    path: path.to_path_buf(),
                    kind: *kind,
                })
                .collect(),
            digest: Digest::of(b"runtime"),
        }
    }

    #[test]
    fn placement_rules() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let lib = root.join("lib");
        let private = root.join("private");
        std::fs::create_dir_all(lib.join("sub")).unwrap();
        std::fs::create_dir_all(&private).unwrap();
        std::fs::write(root.join("file"), b"").unwrap();
        let runtime = runtime(&[
            (&lib, ReadableKind::Subtree),
            (&root.join("file"), ReadableKind::File),
        ]);
        let ok = |path: PathBuf| placement_problem(&[path], &runtime);
        assert_eq!(ok(private.join("evidence.db")), None);
        assert_eq!(ok(private.clone()), None);
        // Inside, equal to, or containing a readable subtree or file.
        assert!(ok(lib.join("sub/x")).is_some());
        assert!(ok(lib.clone()).is_some());
        assert!(ok(root.clone()).is_some());
        assert!(ok(root.join("file")).is_some());
        // `..` after a link resolves by the file system: private/link/.. is lib's parent? No:
        // the link points into lib, so link/.. is lib itself.
        std::os::unix::fs::symlink(lib.join("sub"), private.join("link")).unwrap();
        assert!(ok(private.join("link/../new")).is_some());
        // A link that does not resolve.
        std::os::unix::fs::symlink(root.join("nowhere"), private.join("dangling")).unwrap();
        assert!(
            ok(private.join("dangling/x"))
                .unwrap()
                .contains("does not resolve")
        );
        // `..` after a missing component cannot be placed.
        assert!(ok(private.join("missing/../x")).is_some());
        // Another name for a readable directory (a bind mount would be the same), by inode.
        std::os::unix::fs::symlink(&lib, private.join("alias")).unwrap();
        assert!(ok(private.join("alias/y")).is_some());
        assert!(ok(PathBuf::from("relative")).is_some());
        assert!(placement_problem(&[], &runtime).is_some());
        for second in [
            "/proc/self/root/etc",
            "/proc/1/cwd",
            "/dev/fd/3",
            "/dev/stdin",
        ] {
            assert!(
                placement_problem(&[PathBuf::from(second)], &runtime).is_some(),
                "{second}"
            );
        }
    }
}
