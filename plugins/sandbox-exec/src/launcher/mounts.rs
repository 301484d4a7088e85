//! The sandbox's file system, built by the init in its private mount namespace:
//!
//! 1. every mount becomes private (recursively), so nothing propagates back to the host;
//! 2. each runtime path and device is cloned (`open_tree`) before anything covers it, its
//!    device and inode are checked against the configuration, and the clone is made
//!    read-only, nosuid and nodev (devices: read-only, nosuid, noexec), recursively;
//! 3. a small tmpfs over the stage directory becomes the new root: it gets the runtime's
//!    directories and symbolic links, the clones attached at their own paths, the empty
//!    program and input directories, the size-capped scratch, and a fresh /proc (only this
//!    pid namespace, `subset=pid`); a root environment takes the runtime's place, its
//!    top-level directories and files cloned and attached at `/<name>` and its top-level
//!    links recreated ([`root_environment`]);
//! 4. the root is made read-only, the writable clone of the fresh /proc is attached over the
//!    old root's /proc, `pivot_root` enters the new root and the old root is detached (with
//!    that clone: reachable only through the init's descriptor from then on);
//! 5. once the run plan came ([`mount_run`]), the program, the input and the harness get
//!    tmpfs mounts of their own over their directories, sized to them, filled, then made
//!    read-only (nosuid, nodev, noexec throughout). They are filled through directory
//!    descriptors (`sf_io::dir_fd`): each directory is made with `mkdirat` and opened
//!    `O_NOFOLLOW | O_DIRECTORY` relative to its parent's descriptor, each file is created
//!    `O_CREAT | O_EXCL | O_NOFOLLOW` (mode 0444, an executable 0555), each symbolic link with
//!    `symlinkat`, which never takes the place of an existing name. So nothing is ever written
//!    through a link, a link never stands where a directory was, and an entry beneath a link
//!    fails instead of landing elsewhere (the supervisor refused such a snapshot already).

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::fs;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sf_io::dir_fd::{DirFd, DirFdError};

use super::sys::{self, Failure, Step, cpath, cstring};
use crate::plan::{
    EnvironmentBind, PROGRAM_TREE_MOUNT, Plan, PlanEntryKind, PlanFile, RootEntryKind, RunPlan,
};
use crate::runtime::BindSource;

/// One cloned tree waiting to be attached at `at`, cloned from `path`.
struct Tree {
    path: PathBuf,
    at: PathBuf,
    fd: RawFd,
    directory: bool,
}

/// Builds the root described by `plan` and pivots into it: everything but the run's own
/// files, which [`mount_run`] adds. Returns a writable clone of the sandbox's `/proc`,
/// detached with the old root (so no program can reach it), through which the program's
/// process raises its own OOM score.
pub fn build_root(plan: &Plan) -> Step<RawFd> {
    make_mounts_private()?;
    let (root, sources) = bind_sources(plan);
    let mut trees = sources
        .iter()
        .map(clone_bind_source)
        .collect::<Step<Vec<_>>>()?;
    let mut links = BTreeMap::new();
    if let Some(environment) = root {
        root_environment(environment, RUNTIME_FLAGS, &mut trees, &mut links)?;
    }
    let stage = PathBuf::from(&plan.stage);
    let stage_name = mount_root_tmpfs(plan, &stage)?;
    lay_out_root(plan, &stage, &links)?;
    attach_trees(&stage, &trees)?;
    mount_scratch(plan, &stage)?;
    let writable_proc = mount_fresh_proc(plan, &stage)?;
    sys::mount_setattr(libc::AT_FDCWD, &stage_name, 0, sys::MOUNT_ATTR_RDONLY)
        .map_err(|error| Failure::new("mount", format!("making the root read-only: {error}")))?;
    attach_beneath_old_root(writable_proc)?;
    pivot_into(&stage)?;
    Ok(writable_proc)
}

/// Where the writable clone of the sandbox's /proc is attached in the old root: over the old
/// root's own /proc, which every host has (this launcher reads it).
const OLD_ROOT_PROC: &std::ffi::CStr = c"/proc";

/// Attaches the writable clone of the sandbox's /proc (`fd`) over the old root's /proc, so
/// that detaching the old root detaches it too. A clone attached nowhere is dissolved when
/// its last descriptor closes, and that waits for a grace period of its own (`namespace_unlock`:
/// about a millisecond, more on a busy machine) in the init, between the program's start and
/// the init's wait for it. Attached beneath the old root, it leaves the namespace with the old
/// root, in the one grace period the old root's detaching waits for anyway; it stays usable
/// through `fd` (a lazily detached mount lives while a descriptor holds it), and closing
/// `fd` then frees it without waiting. Nothing else runs in this mount namespace until the
/// old root is detached, and no mount propagates out of it, so it is reachable through `fd`
/// only, as before.
fn attach_beneath_old_root(fd: RawFd) -> Step {
    sys::move_mount(fd, OLD_ROOT_PROC).map_err(|error| {
        Failure::new(
            "proc",
            format!("attaching the writable /proc beneath the old root: {error}"),
        )
    })
}

/// The flags of a runtime path's clone: read-only, nosuid, nodev.
const RUNTIME_FLAGS: u64 = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
/// The flags of a device's clone: read-only, nosuid, noexec.
/// The mount attributes of an environment build's output directory: writable and executable
/// (a venv's tools run from it while it is built), never setuid or a device.
const OUTPUT_FLAGS: u64 = sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
const DEVICE_FLAGS: u64 = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC;

/// Makes every mount private, recursively, so that nothing done in this mount namespace
/// propagates back to the host.
fn make_mounts_private() -> Step {
    sys::mount(c"none", c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|error| Failure::new("mount", format!("making / private: {error}")))
}

/// One host path to clone into the root, and how.
struct BindSourceAt<'a> {
    path: &'a PathBuf,
    /// Where its clone is attached inside the root.
    at: PathBuf,
    /// The identity it must still have, and whether it is a directory.
    source: BindSource,
    /// The mount attributes of its clone.
    flags: u64,
}

/// What the root is made of besides its own directories: a root environment, when the plan
/// has one (it takes the runtime's place); and every host path to clone, in the order they
/// are cloned: the runtime's paths, the devices, a dependency environment, the program
/// tree's base.
fn bind_sources<'a>(plan: &'a Plan) -> (Option<&'a EnvironmentBind>, Vec<BindSourceAt<'a>>) {
    let (root, dependencies) = match &plan.dependencies {
        Some(environment) if environment.is_root() => (Some(environment), None),
        other => (None, other.as_ref()),
    };
    let dependencies = dependencies.map(|environment| BindSourceAt {
        path: &environment.host,
        at: environment.at.clone(),
        source: BindSource {
            directory: true,
            dev: environment.dev,
            ino: environment.ino,
        },
        flags: RUNTIME_FLAGS,
    });
    // A program tree's base: attached where the program's overlay takes it from, and never
    // executable (as every program mount is).
    let program_tree = plan.program_tree.as_ref().map(|tree| BindSourceAt {
        path: &tree.host,
        at: PathBuf::from(PROGRAM_TREE_MOUNT),
        source: BindSource {
            directory: true,
            dev: tree.dev,
            ino: tree.ino,
        },
        flags: RUNTIME_FLAGS | sys::MOUNT_ATTR_NOEXEC,
    });
    // An environment build's output: the one writable bind, never setuid or a device.
    let output = plan.output.as_ref().map(|output| BindSourceAt {
        path: &output.host,
        at: output.at.clone(),
        source: BindSource {
            directory: true,
            dev: output.dev,
            ino: output.ino,
        },
        flags: OUTPUT_FLAGS,
    });
    let same_place = |flags| {
        move |(path, source): (&'a PathBuf, &'a BindSource)| BindSourceAt {
            path,
            at: path.clone(),
            source: *source,
            flags,
        }
    };
    let sources = plan
        .layout
        .binds
        .iter()
        .map(same_place(RUNTIME_FLAGS))
        .chain(plan.devices.iter().map(same_place(DEVICE_FLAGS)))
        .chain(dependencies)
        .chain(program_tree)
        .chain(output)
        .collect();
    (root, sources)
}

/// Clones a host path (`open_tree`) before anything covers it, checks that it is still the
/// file the runtime was configured with (its device and inode), and sets its clone's flags,
/// recursively.
fn clone_bind_source(bind: &BindSourceAt<'_>) -> Step<Tree> {
    let path = bind.path;
    let name = cpath(path, "mount")?;
    let fd = sys::open_tree_clone(&name)
        .map_err(|error| Failure::new("mount", format!("cloning {}: {error}", path.display())))?;
    // SAFETY: zeroed stat is a valid value to be overwritten.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and stat buffer.
    if unsafe { libc::fstat(fd, &mut stat) } != 0
        || stat.st_dev != bind.source.dev
        || stat.st_ino != bind.source.ino
    {
        return Err(Failure::new(
            "runtime",
            format!(
                "{} is not the file it was when the runtime was configured; configure the \
                 Executor again",
                path.display()
            ),
        ));
    }
    restrict(fd, bind.flags, path)?;
    Ok(Tree {
        path: path.clone(),
        at: bind.at.clone(),
        fd,
        directory: bind.source.directory,
    })
}

/// Where `path` of the new root is while the root is built over `stage`.
fn inside(stage: &Path, path: &Path) -> PathBuf {
    stage.join(path.strip_prefix("/").unwrap_or(path))
}

/// Mounts the small tmpfs that becomes the new root over the stage directory (which must be
/// a directory, never a link); answers the stage's name for the later read-only remount.
fn mount_root_tmpfs(plan: &Plan, stage: &Path) -> Step<CString> {
    let stage_metadata = fs::symlink_metadata(stage)
        .map_err(|error| Failure::new("mount", format!("stage {}: {error}", stage.display())))?;
    if !stage_metadata.is_dir() {
        return Err(Failure::new(
            "mount",
            format!("stage {} is not a directory", stage.display()),
        ));
    }
    let stage_name = cpath(stage, "mount")?;
    mount_tmpfs(
        &stage_name,
        &plan.root_tmpfs_options,
        libc::MS_NOSUID | libc::MS_NODEV,
    )?;
    Ok(stage_name)
}

/// Makes the runtime's directories in the new root, and its symbolic links and the root
/// environment's (`links`).
fn lay_out_root(plan: &Plan, stage: &Path, links: &BTreeMap<PathBuf, PathBuf>) -> Step {
    for directory in &plan.layout.directories {
        make_directories(&inside(stage, directory))?;
    }
    for (link, target) in plan.layout.symlinks.iter().chain(links) {
        let at = inside(stage, link);
        if let Some(parent) = at.parent() {
            make_directories(parent)?;
        }
        std::os::unix::fs::symlink(target, &at)
            .map_err(|error| Failure::new("mount", format!("link {}: {error}", link.display())))?;
    }
    Ok(())
}

/// Attaches each clone at its own path in the new root, over a mount point made for it (a
/// directory, or an empty read-only file), and closes the clone's descriptor.
fn attach_trees(stage: &Path, trees: &[Tree]) -> Step {
    for tree in trees {
        let at = inside(stage, &tree.at);
        if tree.directory {
            make_directories(&at)?;
        } else {
            if let Some(parent) = at.parent() {
                make_directories(parent)?;
            }
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&at)
                .map_err(|error| {
                    Failure::new(
                        "mount",
                        format!("mount point {}: {error}", tree.path.display()),
                    )
                })?;
        }
        sys::move_mount(tree.fd, &cpath(&at, "mount")?).map_err(|error| {
            Failure::new(
                "mount",
                format!("attaching {}: {error}", tree.path.display()),
            )
        })?;
        // SAFETY: the clone's descriptor is not used again.
        unsafe { libc::close(tree.fd) };
    }
    Ok(())
}

/// Makes the (still empty) snapshot directories, and mounts the size-capped scratch.
fn mount_scratch(plan: &Plan, stage: &Path) -> Step {
    let snapshot_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    for dir in plan.snapshot_dirs() {
        make_directories(&inside(stage, Path::new(dir)))?;
    }
    let scratch = inside(stage, Path::new(&plan.scratch_dir));
    make_directories(&scratch)?;
    mount_tmpfs(
        &cpath(&scratch, "mount")?,
        &plan.scratch_options,
        snapshot_flags,
    )
}

/// Mounts a fresh /proc (only this pid namespace's processes), keeps a detached writable
/// clone of it for the program's process, and makes the mounted one read-only.
fn mount_fresh_proc(plan: &Plan, stage: &Path) -> Step<RawFd> {
    let proc_dir = inside(stage, Path::new("/proc"));
    make_directories(&proc_dir)?;
    let proc_name = cpath(&proc_dir, "proc")?;
    sys::mount(
        c"proc",
        &proc_name,
        Some(c"proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some(&cstring(&plan.proc_options, "proc")?),
    )
    .map_err(|error| Failure::new("proc", format!("mounting a fresh /proc: {error}")))?;
    let writable_proc = sys::open_tree_clone(&proc_name)
        .map_err(|error| Failure::new("proc", format!("cloning /proc: {error}")))?;
    sys::mount_setattr(libc::AT_FDCWD, &proc_name, 0, sys::MOUNT_ATTR_RDONLY)
        .map_err(|error| Failure::new("proc", format!("making /proc read-only: {error}")))?;
    Ok(writable_proc)
}

/// Enters the new root with `pivot_root` and detaches the old one, so that nothing of the
/// host's file system is reachable any more.
fn pivot_into(stage: &Path) -> Step {
    std::env::set_current_dir(stage)
        .map_err(|error| Failure::new("pivot-root", format!("chdir to the stage: {error}")))?;
    sys::pivot_root_here()
        .map_err(|error| Failure::new("pivot-root", format!("pivot_root: {error}")))?;
    // SAFETY: detaching the old root, now stacked on "."; nothing refers to it any more.
    if unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(Failure::last("pivot-root", "detaching the old root"));
    }
    std::env::set_current_dir("/")
        .map_err(|error| Failure::new("pivot-root", format!("chdir to /: {error}")))?;
    Ok(())
}

/// Sets `flags` (read-only, nosuid, …) on the cloned tree `fd` and everything below it;
/// `path` names it in the failure.
fn restrict(fd: RawFd, flags: u64, path: &Path) -> Step {
    sys::mount_setattr(
        fd,
        c"",
        libc::AT_EMPTY_PATH as u32 | sys::AT_RECURSIVE,
        flags,
    )
    .map_err(|error| {
        Failure::new(
            "mount",
            format!("setting the mount flags of {}: {error}", path.display()),
        )
    })
}

/// The trees and links of a root environment, which takes the runtime's place: its tree is
/// opened through a descriptor whose device and inode must be the ones the supervisor saw;
/// each top-level directory and file the supervisor listed ([`EnvironmentBind::root_entries`])
/// is cloned from that descriptor (`open_tree` of a name in it, never a path resolved again),
/// made read-only, nosuid and nodev, and attached at `/<name>` (an entry that is no longer
/// what was listed fails the attach, and the run); each listed link (a merged-/usr root's
/// `bin → usr/bin`) is recreated with its target text. The names the sandbox provides itself
/// are never listed.
fn root_environment(
    environment: &EnvironmentBind,
    flags: u64,
    trees: &mut Vec<Tree>,
    links: &mut BTreeMap<PathBuf, PathBuf>,
) -> Step {
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let shown = environment.host.display();
    let failed =
        |error: DirFdError| Failure::new("mount", format!("root environment {shown}: {error}"));
    let tree = DirFd::open(&environment.host).map_err(failed)?;
    let stat = tree.stat().map_err(failed)?;
    if stat.st_dev != environment.dev || stat.st_ino != environment.ino {
        return Err(Failure::new(
            "runtime",
            format!("{shown} is not the directory it was when the run was planned"),
        ));
    }
    for entry in &environment.root_entries {
        let at = Path::new("/").join(&entry.name);
        match &entry.kind {
            RootEntryKind::Symlink(target) => {
                links.insert(at, PathBuf::from(target));
            }
            kind @ (RootEntryKind::Directory | RootEntryKind::File) => {
                let name = CString::new(entry.name.as_bytes()).map_err(|_| {
                    Failure::new(
                        "mount",
                        format!("root environment {shown}: a name holds NUL"),
                    )
                })?;
                let fd =
                    sys::open_tree_clone_at(tree.as_fd().as_raw_fd(), &name).map_err(|error| {
                        Failure::new("mount", format!("cloning {}: {error}", at.display()))
                    })?;
                restrict(fd, flags, &at)?;
                trees.push(Tree {
                    path: environment.host.join(&entry.name),
                    at,
                    fd,
                    directory: *kind == RootEntryKind::Directory,
                });
            }
        }
    }
    Ok(())
}

/// Mounts the run's program, input and harness, inside the root [`build_root`] entered: each
/// on a tmpfs of its own over its (empty) directory, filled, then made read-only. `files`
/// holds the program's, the input's and the harness's bytes (a link's target), in run plan
/// order.
pub fn mount_run(plan: &Plan, run: &RunPlan, files: &[Vec<u8>]) -> Step {
    if run.scratch_options.is_some() || run.scratch_executable {
        // A run that asks for a smaller scratch gets it before anything of it runs; the
        // scratch is still empty, so nothing it holds can exceed the new size. A run whose
        // command asked to execute what it builds there (a compiled test suite's test
        // programs) gets it without `noexec`; every other run's stays `noexec`.
        let options = run
            .scratch_options
            .as_ref()
            .unwrap_or(&plan.scratch_options);
        let exec = if run.scratch_executable {
            0
        } else {
            libc::MS_NOEXEC
        };
        sys::mount(
            c"none",
            &cstring(&plan.scratch_dir, "mount")?,
            None,
            libc::MS_REMOUNT | libc::MS_NOSUID | libc::MS_NODEV | exec,
            Some(&cstring(options, "mount")?),
        )
        .map_err(|error| Failure::new("mount", format!("remounting the scratch: {error}")))?;
    }
    // The modes written are the snapshot's, not whatever sf's umask would leave of them. The
    // init is single threaded, and the mask is restored before the program's process starts.
    // SAFETY: umask only swaps the process's mask.
    let mask = unsafe { libc::umask(0) };
    let mounted = mount_snapshots(plan, run, files);
    // SAFETY: as above.
    unsafe { libc::umask(mask) };
    mounted
}

fn mount_snapshots(plan: &Plan, run: &RunPlan, files: &[Vec<u8>]) -> Step {
    let snapshot_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let (program_files, rest) = files.split_at(run.program.len().min(files.len()));
    let (input_files, harness_files) = rest.split_at(run.input.len().min(rest.len()));
    for (dir, entries, contents, options) in [
        (
            &plan.program_dir,
            &run.program,
            program_files,
            &run.program_options,
        ),
        (&plan.input_dir, &run.input, input_files, &run.input_options),
        (
            &plan.harness_dir,
            &run.harness,
            harness_files,
            &run.harness_options,
        ),
    ] {
        let at = Path::new(dir);
        let name = cpath(at, "mount")?;
        mount_tmpfs(&name, options, snapshot_flags)?;
        fill(at, entries, contents)?;
        sys::mount_setattr(libc::AT_FDCWD, &name, 0, sys::MOUNT_ATTR_RDONLY)
            .map_err(|error| Failure::new("mount", format!("making {dir} read-only: {error}")))?;
    }
    if plan.program_tree.is_some() {
        overlay_program(plan)?;
    }
    Ok(())
}

/// Lays the program's mount (the layer: the run's changed entries and whiteouts) over the
/// program tree's base, as a read-only overlay mounted over the program's directory itself,
/// and detaches the base's own mount: from then on only the overlay holds it. Without an
/// upper layer the overlay is read-only whoever owns the base's files.
fn overlay_program(plan: &Plan) -> Step {
    let program = cpath(Path::new(&plan.program_dir), "mount")?;
    let options = format!("lowerdir={}:{PROGRAM_TREE_MOUNT}", plan.program_dir);
    sys::mount(
        c"overlay",
        &program,
        Some(c"overlay"),
        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some(&cstring(&options, "mount")?),
    )
    .map_err(|error| {
        Failure::new(
            "program-tree",
            format!("laying the program's layer over its base: {error}"),
        )
    })?;
    let tree = cpath(Path::new(PROGRAM_TREE_MOUNT), "mount")?;
    // SAFETY: detaching a mount this init attached; the overlay keeps its own reference.
    if unsafe { libc::umount2(tree.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(Failure::last(
            "program-tree",
            "detaching the program tree's base",
        ));
    }
    Ok(())
}

/// Writes `entries` (with `contents`, in the same order) below the directory `at`, every one
/// relative to a descriptor of a directory made here (see the module documentation).
fn fill(at: &Path, entries: &[PlanFile], contents: &[Vec<u8>]) -> Step {
    let failed = |what: &str, error: DirFdError| {
        Failure::new(
            "mount",
            format!("materialising {}/{what}: {error}", at.display()),
        )
    };
    let root = DirFd::open(at).map_err(|error| failed("", error))?;
    // Entries of one directory tend to come together: the last directory is kept open.
    let mut last: Option<(&str, DirFd)> = None;
    for (entry, content) in entries.iter().zip(contents) {
        let (parent, leaf) = match entry.path.rsplit_once('/') {
            Some((parent, leaf)) => (Some(parent), leaf),
            None => (None, entry.path.as_str()),
        };
        let dir = match parent {
            None => &root,
            Some(parent) => {
                if last.as_ref().is_none_or(|(open, _)| *open != parent) {
                    let opened = root
                        .ensure_dirs(parent, 0o755)
                        .map_err(|error| failed(&entry.path, error))?;
                    last = Some((parent, opened));
                }
                match &last {
                    Some((_, dir)) => dir,
                    None => &root,
                }
            }
        };
        let leaf = OsStr::new(leaf);
        let written = match entry.kind {
            PlanEntryKind::File => dir.create_file(leaf, content, 0o444),
            PlanEntryKind::Executable => dir.create_file(leaf, content, 0o555),
            PlanEntryKind::Symlink => dir.create_symlink(leaf, OsStr::from_bytes(content)),
            PlanEntryKind::Whiteout => dir.create_whiteout(leaf),
        };
        written.map_err(|error| failed(&entry.path, error))?;
    }
    Ok(())
}

fn mount_tmpfs(target: &CString, options: &str, flags: libc::c_ulong) -> Step {
    sys::mount(
        c"tmpfs",
        target,
        Some(c"tmpfs"),
        flags,
        Some(&cstring(options, "mount")?),
    )
    .map_err(|error| {
        Failure::new(
            "mount",
            format!("tmpfs at {}: {error}", target.to_string_lossy()),
        )
    })
}

fn make_directories(path: &Path) -> Step {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => return Ok(()),
        Ok(metadata) => {
            return Err(Failure::new(
                "mount",
                format!(
                    "{} exists and is not a directory (mode {:o})",
                    path.display(),
                    metadata.mode()
                ),
            ));
        }
        Err(_) => {}
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .map_err(|error| Failure::new("mount", format!("directory {}: {error}", path.display())))?;
    let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o755));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn entry(path: &str, kind: PlanEntryKind, content: &[u8]) -> (PlanFile, Vec<u8>) {
        let file = PlanFile {
            path: path.to_owned(),
            kind,
            size: content.len() as u64,
        };
        (file, content.to_vec())
    }

    fn fill_with(at: &Path, entries: &[(PlanFile, Vec<u8>)]) -> Step {
        let (files, contents): (Vec<PlanFile>, Vec<Vec<u8>>) = entries.iter().cloned().unzip();
        fill(at, &files, &contents)
    }

    #[test]
    fn entries_are_written_with_their_kinds_through_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().canonicalize().unwrap();
        fill_with(
            &at,
            &[
                entry("a/b/file.txt", PlanEntryKind::File, b"text"),
                entry("a/b/run", PlanEntryKind::Executable, b"#!"),
                entry("top", PlanEntryKind::File, b""),
                entry("a/link", PlanEntryKind::Symlink, b"b/file.txt"),
                entry("a/b/deeper/x", PlanEntryKind::File, b"x"),
            ],
        )
        .unwrap();
        let mode = |path: &str| {
            fs::symlink_metadata(at.join(path))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        // Less the umask here; `mount_run` clears it while it fills.
        assert_eq!(mode("a/b/file.txt") & 0o333, 0, "read-only, not executable");
        assert_ne!(mode("a/b/file.txt") & 0o400, 0, "readable");
        assert_ne!(mode("a/b/run") & 0o100, 0, "executable");
        assert_eq!(mode("top") & 0o111, 0, "not executable");
        assert_eq!(
            fs::read_link(at.join("a/link")).unwrap(),
            Path::new("b/file.txt")
        );
        assert_eq!(fs::read(at.join("a/b/deeper/x")).unwrap(), b"x");
    }

    #[test]
    fn nothing_is_written_beneath_a_link_or_over_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let at = root.join("snapshot");
        let outside = root.join("outside");
        fs::create_dir(&at).unwrap();
        fs::create_dir(&outside).unwrap();
        // A link, then an entry beneath it: refused, naming the entry, nothing outside.
        let outside_text = outside.display().to_string();
        let failure = fill_with(
            &at,
            &[
                entry("d", PlanEntryKind::Symlink, outside_text.as_bytes()),
                entry("d/planted", PlanEntryKind::File, b"x"),
            ],
        )
        .unwrap_err();
        assert_eq!(failure.mechanism, "mount");
        assert!(failure.detail.contains("d/planted"), "{}", failure.detail);
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
        // A directory, then a link at its name: refused, the directory kept.
        let failure = fill_with(
            &at,
            &[
                entry("e/inside", PlanEntryKind::File, b"kept"),
                entry("e", PlanEntryKind::Symlink, b"elsewhere"),
            ],
        )
        .unwrap_err();
        assert!(failure.detail.contains("exists"), "{}", failure.detail);
        assert!(fs::symlink_metadata(at.join("e")).unwrap().is_dir());
        assert_eq!(fs::read(at.join("e/inside")).unwrap(), b"kept");
        // A link planted where a directory of the snapshot would go is never followed.
        symlink(&outside, at.join("planted")).unwrap();
        let failure = fill_with(&at, &[entry("planted/x", PlanEntryKind::File, b"x")]).unwrap_err();
        assert!(
            failure.detail.contains("symbolic link"),
            "{}",
            failure.detail
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }
}
