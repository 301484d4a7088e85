//! Sealing a proposal on a commit: a private copy of its Slice frozen there, the proposal
//! sealed under it, as `sf slice freeze --base` and `sf seal` do.

use std::path::{Path, PathBuf};

use sf_app::freeze::{FreezeRequest, freeze};
use sf_app::propose::ProposalSource;
use sf_app::seal::{ProposalInput, SealRequest, seal};
use sf_app::{AppError, Backends};
use sf_host::plugin::serve_config::ServeRepository;

use super::{refusal, slice_dir};
use crate::queue::{Entry, Kind};

/// A sealed proposal: the Slice it was sealed under and the Candidate.
pub struct Sealed {
    /// The private frozen Slice directory.
    pub slice: PathBuf,
    /// The Candidate's digest.
    pub candidate: String,
    /// Its commit M.
    pub commit: String,
}

/// Why a proposal was not sealed.
pub enum NotSealed {
    /// The proposal or its base was refused: the use case's `{"code", "message"}`.
    Refused(serde_json::Value),
    /// This server could not do its part (its state directory): nothing is decided, and the
    /// step is taken again.
    Fault(String),
}

/// Seals `entry` on the commit `on` (the target, or the commit of a proposal ahead of it),
/// under a private copy of its Slice frozen on that commit in `state/proposals/ID/ON/`.
pub fn seal_on(
    backends: &Backends,
    repository: &ServeRepository,
    state: &Path,
    entry: &Entry,
    on: &str,
) -> Result<Sealed, NotSealed> {
    let refused = |error: AppError| NotSealed::Refused(refusal(&error));
    let Some(configured) = slice_dir(repository, &entry.slice) else {
        return Err(refused(AppError::invalid(
            format!("slice {:?}", entry.slice),
            "no configured Slice of this repository has that id any more",
        )));
    };
    // A commit id names the directory: checked, since it becomes a path.
    if on.len() != 40 || !on.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(NotSealed::Fault(format!("{on:?} is not a commit id")));
    }
    let work = state.join("proposals").join(&entry.id).join(on);
    let slice = work.join("slice");
    // A copy left by a kill before its sealing was recorded is made again: nothing was
    // collected under it.
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(|error| {
            NotSealed::Fault(format!("{}: cannot be removed ({error})", work.display()))
        })?;
    }
    copy_slice(configured, &slice).map_err(|error| {
        NotSealed::Fault(format!(
            "the Slice {} cannot be copied to {} ({error}); check the state directory",
            configured.display(),
            slice.display()
        ))
    })?;
    // The configured Slice was dry-run when it was frozen; this is the same Slice on a later
    // base, and its checks run in the collection anyway.
    freeze(
        backends,
        &FreezeRequest {
            dir: slice.clone(),
            identity: repository.identity.clone(),
            base: Some(on.to_owned()),
            dry_run: false,
        },
    )
    .map_err(refused)?;
    let (file, proposal) = match entry.kind {
        Kind::Proposal => {
            let file = work.join("proposal.json");
            (file.clone(), ProposalInput::File(file))
        }
        Kind::Diff => {
            let file = work.join("proposal.diff");
            (
                file.clone(),
                ProposalInput::Made {
                    source: ProposalSource::Diff(file),
                    only: Vec::new(),
                },
            )
        }
    };
    std::fs::write(&file, &entry.body).map_err(|error| {
        NotSealed::Fault(format!("{}: cannot be written ({error})", file.display()))
    })?;
    let sealed = seal(
        backends,
        &SealRequest {
            identity: repository.identity.clone(),
            slice: slice.clone(),
            proposal,
        },
    )
    .map_err(|mut error| {
        // The use case names the file as a command line would; the client sent a field.
        for flag in ["--proposal", "--diff"] {
            let named = format!("{flag} {}", file.display());
            let field = flag.trim_start_matches('-');
            error.message = error
                .message
                .replace(&named, &format!("the request's {field}"));
        }
        refused(error)
    })?;
    Ok(Sealed {
        slice,
        candidate: sealed.digest.to_string(),
        commit: sealed.manifest.commit.to_hex(),
    })
}

/// Copies the authored files of the Slice in `from` (not its frozen records or its state)
/// into the new directory `to`, through a temporary sibling renamed into place, so that a
/// kill never leaves half a copy at `to`.
fn copy_slice(from: &Path, to: &Path) -> std::io::Result<()> {
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let partial = parent.join(".slice.partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    std::fs::create_dir(&partial)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == sf_app::slice_dir::FROZEN || name == "state" {
            continue;
        }
        copy_tree(&entry.path(), &partial.join(&name))?;
    }
    std::fs::rename(&partial, to)
}

/// Copies the file, link or directory `from` to `to`, modes kept.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        std::fs::set_permissions(to, meta.permissions())
    } else if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else {
        std::fs::copy(from, to).map(|_| ())
    }
}
