//! A program by reference on this worker: the base the Action carried as its `program/` tree,
//! checked against the reference's base digest and written to a directory of this worker's
//! own, which the reference then names in place of the directory on the Executor's host.
//!
//! The sandbox binds that directory and lays the reference's layer and deletions over it, as
//! it does on the Executor's host, so the run's program identity is the reference's
//! `sf-tree/1` digest, which the Executor compares with what the worker attests. The
//! directory is made fresh for each lease (mode 0700 while it is written, files 0444 or 0555
//! and directories 0755 once it is whole) and removed when the lease ends.

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::tree_digest;
use sf_contracts::tree_path::EntryMode;
use sf_contracts::{ProgramTree, RunRequest};
use sf_io::dir_fd::DirFd;

/// Points `request`'s program reference, if it has one, at a directory holding `base` (the
/// files of the Action's `program/` tree), and returns that directory, which must outlive the
/// run. A base that is not the tree the reference names is refused.
pub fn place(
    request: &mut RunRequest,
    base: Vec<SnapshotFile>,
) -> Result<Option<tempfile::TempDir>, String> {
    let Some(tree) = request.program_tree.as_mut() else {
        request.program = base;
        return Ok(None);
    };
    let digested = tree_digest::build(
        base.iter()
            .map(|file| (file.path.as_str(), sf_reapi::base::node(file))),
    )
    .map_err(|error| format!("the program's base: {error}"))?;
    if digested.root.hash != tree.base {
        return Err(format!(
            "the input root's program is the tree {}, not the base {} the request names",
            digested.root.hash, tree.base
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("sf-worker-program-")
        .tempdir()
        .map_err(|error| format!("no directory for the program's base: {error}"))?;
    write(dir.path(), &base).map_err(|error| format!("the program's base: {error}"))?;
    point(tree, dir.path())?;
    // The directories the sandbox reads the program's identity from are the ones this worker
    // digested from the base it holds, not the ones the message claims.
    tree.directories = digested.directories;
    request.program = Vec::new();
    Ok(Some(dir))
}

/// Writes `files` below `root` (a fresh, empty directory of this worker) and opens it to
/// the sandbox's user.
fn write(root: &std::path::Path, files: &[SnapshotFile]) -> Result<(), sf_io::dir_fd::DirFdError> {
    let top = DirFd::open(root)?;
    for file in files {
        let (parent, name) = file.path.rsplit_once('/').unwrap_or(("", &file.path));
        let mut below: Option<DirFd> = None;
        for component in parent.split('/').filter(|c| !c.is_empty()) {
            let next = below
                .as_ref()
                .unwrap_or(&top)
                .ensure_dir(OsStr::new(component), 0o755)?;
            next.set_mode(0o755)?;
            below = Some(next);
        }
        let dir = below.as_ref().unwrap_or(&top);
        let name = OsStr::new(name);
        match file.mode {
            EntryMode::Symlink => {
                use std::os::unix::ffi::OsStrExt as _;
                dir.create_symlink(name, OsStr::from_bytes(&file.content))?;
            }
            mode => {
                let bits = if mode == EntryMode::Executable {
                    0o555
                } else {
                    0o444
                };
                let failed = |error: std::io::Error| sf_io::dir_fd::DirFdError::WriteFailed {
                    path: dir.shown(name),
                    detail: error.to_string(),
                };
                // A lease's tree need not outlive the worker: written, not synced.
                let mut writer = dir.create_file_writer(name, bits)?;
                writer.write_all(&file.content).map_err(failed)?;
                writer
                    .set_permissions(std::fs::Permissions::from_mode(bits))
                    .map_err(failed)?;
            }
        }
    }
    top.set_mode(0o755)
}

/// Names `dir` (its device and inode as this worker made it) as the reference's base.
fn point(tree: &mut ProgramTree, dir: &std::path::Path) -> Result<(), String> {
    let metadata = std::fs::symlink_metadata(dir)
        .map_err(|error| format!("the program's base {}: {error}", dir.display()))?;
    tree.dir = dir.to_path_buf();
    tree.dev = metadata.dev();
    tree.ino = metadata.ino();
    Ok(())
}
