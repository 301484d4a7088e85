//! `sf export`: a Candidate's files, re-verified, written byte for byte into a new directory.
//!
//! The files are written into a fresh hidden directory beside the destination and renamed into
//! place only when all of them are written, so a failed export leaves nothing behind and a
//! finished one appears whole. The destination must not exist, or be an empty directory.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use clap::Args;

use super::common::{CliError, Context, Output, absolute_new_path, repository_error};
use crate::canonical::Digest;
use crate::snapshot::SnapshotFile;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The Candidate digest (sha256:…, as `sf seal` printed it)
    #[arg(long, value_name = "DIGEST")]
    candidate: String,
    /// The directory to write the files into: new, or empty
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(context: &Context, args: ExportArgs) -> Result<Output, CliError> {
    let digest = Digest::parse(&args.candidate).ok_or_else(|| {
        CliError::new(
            "invalid-input",
            format!(
                "--candidate {:?}: a Candidate digest is sha256: followed by 64 lowercase hex \
                 characters, as `sf seal` printed it",
                args.candidate
            ),
        )
    })?;
    let out = absolute_new_path(&args.out, "--out")?;
    check_destination(&out)?;
    let repository = context.open_repository(&args.identity)?;
    let sealed = repository.export_candidate(&digest).map_err(|error| {
        repository_error(
            &format!(
                "exporting {digest} from repository {}",
                repository.identity().path
            ),
            &error,
        )
    })?;
    write_all(&out, &sealed.files)?;
    let files: Vec<serde_json::Value> = sealed
        .manifest
        .files
        .iter()
        .map(|file| {
            serde_json::json!({
                "path": file.path,
                "sha256": file.sha256.to_string(),
                "bytes": file.bytes,
            })
        })
        .collect();
    Ok(Output {
        json: serde_json::json!({
            "digest": sealed.digest.to_string(),
            "commit": sealed.manifest.commit.to_hex(),
            "tree": sealed.manifest.tree.to_hex(),
            "snapshotDigest": sealed.snapshot_digest.to_string(),
            "out": out.display().to_string(),
            "files": files,
        }),
        text: format!(
            "exported Candidate {} ({} files) to {}\n",
            sealed.digest,
            sealed.files.len(),
            out.display()
        ),
    })
}

fn check_destination(out: &Path) -> Result<(), CliError> {
    let refuse = |detail: &str| {
        CliError::new(
            "exists",
            format!(
                "--out {}: {detail}; sf never writes into existing files: choose a new or empty \
                 directory",
                out.display()
            ),
        )
    };
    match out.symlink_metadata() {
        Err(_) => Ok(()),
        Ok(meta) if !meta.is_dir() => Err(refuse("exists and is not a directory")),
        Ok(_) => {
            let mut entries = std::fs::read_dir(out).map_err(|error| {
                CliError::new(
                    "unreadable-input",
                    format!("--out {}: cannot be read ({error})", out.display()),
                )
            })?;
            if entries.next().is_some() {
                return Err(refuse("is not empty"));
            }
            Ok(())
        }
    }
}

/// Writes `files` under a fresh staging directory beside `out`, then renames it to `out`.
fn write_all(out: &Path, files: &[SnapshotFile]) -> Result<(), CliError> {
    let parent = out.parent().unwrap_or(Path::new("/"));
    let name = out
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let staging = parent.join(format!(".{name}.sf-export-{}-{nanos}", std::process::id()));
    let failed = |what: &Path, error: std::io::Error| {
        CliError::new(
            "write-failed",
            format!(
                "--out {}: writing {} failed ({error}); nothing was left behind",
                out.display(),
                what.display()
            ),
        )
    };
    std::fs::create_dir(&staging).map_err(|error| failed(&staging, error))?;
    let written = (|| {
        for file in files {
            // Paths were checked against the grammar when the Candidate was verified: relative,
            // no `.`, `..` or empty segment, so they stay inside the staging directory.
            let target = staging.join(&file.path);
            if let Some(directory) = target.parent() {
                std::fs::create_dir_all(directory).map_err(|error| failed(directory, error))?;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&target)
                .and_then(|mut handle| {
                    handle.write_all(&file.content)?;
                    handle.sync_all()
                })
                .map_err(|error| failed(Path::new(&file.path), error))?;
        }
        std::fs::rename(&staging, out).map_err(|error| failed(out, error))
    })();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    written
}
