//! An environment build's binds, checked before anything starts: the output directory the
//! run leaves its environment in, and the caller's proxy socket its connections are relayed
//! to.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use sf_contracts::ExecutorError;
use sf_contracts::command::{RunNetwork, RunOutput};

use crate::plan::OutputBind;

fn invalid(input: String, rule: &'static str) -> ExecutorError {
    ExecutorError::InvalidInput { input, rule }
}

/// The bind of `output`: an existing, empty directory (never a link) that no one but root or
/// this user can change, nor anything above it, and that the sandbox's user can reach. The
/// supervisor gives it to that user when the run starts.
pub(crate) fn output_bind(output: &RunOutput) -> Result<OutputBind, ExecutorError> {
    let dir = &output.dir;
    let shown = || format!("output directory {}", dir.display());
    let metadata = std::fs::symlink_metadata(dir).map_err(|error| {
        invalid(
            format!("{}: {error}", shown()),
            "an output directory exists before the run",
        )
    })?;
    if !metadata.is_dir() {
        return Err(invalid(
            shown(),
            "an output directory is a directory, not a link or a file",
        ));
    }
    let empty = std::fs::read_dir(dir)
        .map(|mut entries| entries.next().is_none())
        .unwrap_or(false);
    if !empty {
        return Err(invalid(
            shown(),
            "an output directory is empty before the run",
        ));
    }
    if let Some(problem) = crate::runtime::untrusted(dir) {
        return Err(invalid(
            format!("{}: {problem}", shown()),
            "an output directory, and every directory above it, is owned by root or this \
             user and writable by neither group nor others",
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        searchable_above(dir)?;
    }
    Ok(OutputBind {
        at: PathBuf::from(&output.at),
        host: dir.clone(),
        dev: metadata.dev(),
        ino: metadata.ino(),
    })
}

/// Refuses an output directory the sandbox's unprivileged user cannot reach: as root, the
/// launcher attaches it as that user.
fn searchable_above(dir: &Path) -> Result<(), ExecutorError> {
    for above in dir.ancestors().skip(1) {
        let searchable =
            std::fs::metadata(above).is_ok_and(|metadata| metadata.mode() & 0o001 != 0);
        if !searchable {
            return Err(invalid(
                format!(
                    "output directory {} (at {})",
                    dir.display(),
                    above.display()
                ),
                "when sf runs as root the sandbox attaches the output directory as an \
                 unprivileged user, so every directory above it must be searchable by others",
            ));
        }
    }
    Ok(())
}

/// The proxy socket of `network`: an existing Unix socket.
pub(crate) fn proxy_socket(network: &RunNetwork) -> Result<PathBuf, ExecutorError> {
    let proxy = &network.proxy;
    let is_socket =
        std::fs::symlink_metadata(proxy).is_ok_and(|metadata| metadata.file_type().is_socket());
    if !is_socket {
        return Err(invalid(
            format!("network proxy {}", proxy.display()),
            "a run's proxy is a Unix socket its caller listens on",
        ));
    }
    Ok(proxy.clone())
}
