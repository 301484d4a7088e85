//! `export`: a Candidate's files, re-verified, written byte for byte into a new directory.
//! They are streamed from the repository (every object re-hashed again as it is written), so
//! an export holds one file at a time, whatever the size of the tree.
//!
//! The files are written into a fresh hidden directory beside the destination and renamed into
//! place only when all of them are written, so a failed export leaves nothing behind and a
//! finished one appears whole. The destination must not exist, or be an empty directory.
//!
//! Everything is written through directory descriptors ([`sf_host::dir_fd`]): the
//! destination's parent is opened without following a link in any component, the staging
//! directory is created there with `mkdirat` and opened without following links, and every
//! directory and file below it is created relative to its directory's descriptor (`O_CREAT |
//! O_EXCL | O_NOFOLLOW`). A link planted at the destination, in its path or at the staging
//! name is refused, naming the path; nothing is ever written through one.
//!
//! Each entry is written as its mode says: a regular file 0644, an executable 0755 (both less
//! the umask, as Git checks files out), a symbolic link with `symlinkat` relative to its
//! directory's descriptor, holding its target. The entries keep the snapshot rules (checked
//! again before anything is written), so every link resolves inside the export and nothing
//! lies beneath a link; and a link is never made where a name exists, so none can stand
//! where a directory was.

use std::ffi::{OsStr, OsString};
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use sf_host::canonical::Digest;
use sf_host::contracts::tree_path::EntryMode;
use sf_host::dir_fd::{DirFd, DirFdError, EntryKind};
use sf_host::repository::{ListedFile, SealedCandidate};
use sf_host::snapshot::{SnapshotFile, check_snapshot};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::files::absolute_new_path;

/// A Candidate to export, and where.
#[derive(Clone, Debug)]
pub struct ExportRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The Candidate digest, as given.
    pub candidate: String,
    /// The directory to write the files into: new, or empty.
    pub out: PathBuf,
}

/// A Candidate's files, written.
#[derive(Clone, Debug)]
pub struct ExportedFiles {
    /// The Candidate, re-exported.
    pub sealed: SealedCandidate,
    /// Its files, as written (without their bytes).
    pub files: Vec<ListedFile>,
    /// Where they were written, absolute.
    pub out: PathBuf,
}

/// Exports `request.candidate`'s files into `request.out`.
pub fn export(backends: &Backends, request: &ExportRequest) -> Result<ExportedFiles, AppError> {
    let digest = Digest::parse(&request.candidate).ok_or_else(|| {
        AppError::new(
            "invalid-input",
            format!(
                "--candidate {:?}: a Candidate digest is sha256: followed by 64 lowercase hex \
                 characters, as `sf seal` printed it",
                request.candidate
            ),
        )
    })?;
    let destination = Destination::check(&request.out)?;
    let repository = backends.open_repository(&request.identity)?;
    let sealed = repository.export_candidate(&digest).map_err(|error| {
        repository_error(
            &format!(
                "exporting {digest} from repository {}",
                repository.identity().path
            ),
            &error,
        )
    })?;
    // The export verified every object; the files are read again to be written, one at a
    // time, and the tree's rules were checked as it was read.
    let staging = destination.stage()?;
    let mut files = Vec::new();
    let streamed = repository.stream_files(&sealed.manifest.commit, |path, mode, sha256, bytes| {
        if let Err(error) = staging.write(path, mode, bytes) {
            return ControlFlow::Break(error);
        }
        files.push(ListedFile {
            path: path.to_owned(),
            mode,
            sha256: sha256.clone(),
            bytes: bytes.len() as u64,
        });
        ControlFlow::Continue(())
    });
    match streamed {
        Ok(ControlFlow::Continue(_)) => staging.finish()?,
        Ok(ControlFlow::Break(error)) => {
            staging.abort();
            return Err(error);
        }
        Err(error) => {
            staging.abort();
            let what = format!("reading the files of {digest}");
            return Err(repository_error(&what, &error));
        }
    }
    Ok(ExportedFiles {
        sealed,
        files,
        out: destination.out,
    })
}

/// Writes `files` into the new or empty directory `out` exactly as [`export`] writes a
/// Candidate's files (see the module documentation): each entry with its mode, links as
/// links, all through directory descriptors, appearing whole or not at all. Entries that
/// break the snapshot rules are `invalid-input`, naming the path and the rule, before
/// anything is written.
pub fn write_export(out: &Path, files: &[SnapshotFile]) -> Result<(), AppError> {
    Destination::check(out)?.write(files)
}

/// Where an export goes: the open parent of `--out`, the name in it, and whether an empty
/// directory there is replaced.
struct Destination {
    parent: DirFd,
    name: OsString,
    out: PathBuf,
    replace: bool,
}

impl Destination {
    /// `given` (`--out`) checked before anything is read or written: its parent opened
    /// without following a link, the name free or an empty directory.
    fn check(given: &Path) -> Result<Self, AppError> {
        let out = absolute_new_path(given, "--out")?;
        let (parent, name) = open_parent(given, &out)?;
        let replace = check_destination(&parent, &name, &out)?;
        Ok(Self {
            parent,
            name,
            out,
            replace,
        })
    }

    /// Writes `files` there (see [`Staging`]), after checking them against the snapshot
    /// rules.
    fn write(&self, files: &[SnapshotFile]) -> Result<(), AppError> {
        check_snapshot(files).map_err(|error| {
            AppError::new(
                "invalid-input",
                format!(
                    "the files to export to {}: {error}; nothing was written",
                    self.out.display()
                ),
            )
        })?;
        let staging = self.stage()?;
        for file in files {
            if let Err(error) = staging.write(&file.path, file.mode, &file.content) {
                staging.abort();
                return Err(error);
            }
        }
        staging.finish()
    }

    /// A fresh staging directory beside the destination, to write into.
    fn stage(&self) -> Result<Staging<'_>, AppError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let name = OsString::from(format!(
            ".{}.sf-export-{}-{nanos}",
            self.name.to_string_lossy(),
            std::process::id()
        ));
        let dir = self
            .parent
            .create_dir(&name, 0o755)
            .map_err(|error| out_error(&self.out, &error))?;
        Ok(Staging {
            destination: self,
            name,
            dir,
        })
    }
}

/// The directory `--out` names, opened without following a link in any component: a link
/// anywhere in the path is refused, naming it.
fn open_parent(given: &Path, out: &Path) -> Result<(DirFd, OsString), AppError> {
    let parent = match given.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = out.file_name().map(OsStr::to_owned).unwrap_or_default();
    let dir = DirFd::open(parent).map_err(|error| out_error(out, &error))?;
    Ok((dir, name))
}

fn out_error(out: &Path, error: &DirFdError) -> AppError {
    AppError::new(
        error.code(),
        format!(
            "--out {}: {error}; sf writes only into a new or empty directory reached without \
             symbolic links, and nothing was left behind",
            out.display()
        ),
    )
}

/// Whether `name` in `parent` is free (`false`) or an empty directory to be replaced
/// (`true`); anything else is refused.
fn check_destination(parent: &DirFd, name: &OsStr, out: &Path) -> Result<bool, AppError> {
    let refuse = |code: &str, detail: &str| {
        AppError::new(
            code,
            format!(
                "--out {}: {detail}; sf never writes into existing files: choose a new or empty \
                 directory",
                out.display()
            ),
        )
    };
    let entry = parent.entry(name).map_err(|error| out_error(out, &error))?;
    match entry {
        None => Ok(false),
        Some(entry) if entry.kind == EntryKind::Symlink => Err(refuse(
            "symlink",
            "is a symbolic link, which sf never writes through",
        )),
        Some(entry) if entry.kind != EntryKind::Directory => {
            Err(refuse("exists", "exists and is not a directory"))
        }
        Some(entry) => {
            let dir = parent
                .open_dir(&entry)
                .map_err(|error| out_error(out, &error))?;
            match dir.entries(1) {
                Ok(entries) if entries.is_empty() => Ok(true),
                Ok(_) | Err(DirFdError::TooLarge { .. }) => Err(refuse("exists", "is not empty")),
                Err(error) => Err(out_error(out, &error)),
            }
        }
    }
}

/// The files of an export being written: a fresh staging directory in the destination's
/// parent, renamed to the destination (replacing the empty directory there when asked) only
/// when every file is written. Every directory and file is created relative to a directory
/// descriptor without following links, so a link planted anywhere is refused, naming it, and
/// nothing is written outside. A staging that is not finished is aborted: removed.
struct Staging<'d> {
    destination: &'d Destination,
    name: OsString,
    dir: DirFd,
}

impl Staging<'_> {
    /// Writes one entry, as its mode says.
    fn write(&self, path: &str, mode: EntryMode, content: &[u8]) -> Result<(), AppError> {
        self.write_entry(path, mode, content)
            .map_err(|error| out_error(&self.destination.out, &error))
    }

    fn write_entry(&self, path: &str, mode: EntryMode, content: &[u8]) -> Result<(), DirFdError> {
        // Paths keep the tree rules (checked before): relative, no `.`, `..` or empty
        // segment, so each component is one name.
        let (directory, file_name) = match path.rsplit_once('/') {
            Some((directory, file_name)) => {
                (Some(self.dir.ensure_dirs(directory, 0o755)?), file_name)
            }
            None => (None, path),
        };
        let directory = directory.as_ref().unwrap_or(&self.dir);
        let file_name = OsStr::new(file_name);
        match mode {
            EntryMode::Regular => directory.create_file(file_name, content, 0o644),
            EntryMode::Executable => directory.create_file(file_name, content, 0o755),
            EntryMode::Symlink => directory.create_symlink(file_name, OsStr::from_bytes(content)),
        }
    }

    /// Syncs the staging directory and renames it into place.
    fn finish(self) -> Result<(), AppError> {
        let destination = self.destination;
        let renamed = self.dir.sync().and_then(|()| {
            destination.parent.rename(
                &self.name,
                &destination.parent,
                &destination.name,
                destination.replace,
            )
        });
        renamed.map_err(|error| {
            let _ = destination.parent.remove_tree(&self.name);
            out_error(&destination.out, &error)
        })
    }

    /// Removes the staging directory and everything written into it.
    fn abort(self) {
        let _ = self.destination.parent.remove_tree(&self.name);
    }
}
