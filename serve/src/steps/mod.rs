//! The steps one proposal takes, each through the application layer's use cases as `sf repo
//! import`, `sf slice freeze`, `sf seal`, `sf collect` and `sf land --deliver --attempt`
//! take them: nothing here decides what a Candidate, a Verdict or an effect is. Sealing
//! ([`seal`]), collecting ([`collect`]) and landing ([`land`]) each have a module; this one
//! holds what they share.
//!
//! A proposal is sealed on the commit it will land on: the target, or the commit of the
//! proposal ahead of it, which lands first. A private copy of the configured Slice is frozen
//! on that commit and the proposal sealed under it; its checks are collected at once, and the
//! attempt is landed (judged again, the target moved, the commit delivered) when its turn
//! comes. Every step is safe to repeat after a kill: an import or a freeze of what is there
//! already writes nothing, a seal of the same proposal on the same commit is the same
//! Candidate, and the landing's action is the proposal's own (`serve/<id>`, its sealing's
//! number as the occurrence), so its at-most-once intents integrate and deliver it at most
//! once however often the worker lands it again.

mod collect;
mod land;
mod seal;

use std::path::{Path, PathBuf};

use sf_app::repo::{ImportFrom, ImportRequest, UpstreamRequest, import};
use sf_app::{AppError, Backends, Target};
use sf_host::plugin::serve_config::ServeRepository;

use crate::queue::End;
use crate::state::State;

pub use collect::{collect_sealed, passed};
pub use land::land_sealed;
pub use seal::{NotSealed, Sealed, seal_on};

/// The owner the server's landings name.
pub const OWNER: &str = "sf-serve";

/// The configured Slice of `repository` whose id is `id`.
pub fn slice_dir<'a>(repository: &'a ServeRepository, id: &str) -> Option<&'a Path> {
    repository
        .slices
        .iter()
        .find(|dir| slice_id(dir).is_some_and(|found| found == id))
        .map(PathBuf::as_path)
}

/// The id of the frozen Slice in `dir`.
pub fn slice_id(dir: &Path) -> Option<String> {
    sf_app::slice_dir::SliceDir::open(dir)
        .ok()
        .map(|slice| slice.frozen.record.id.to_string())
}

/// A use case's refusal as the queue records it: `{"code", "message"}`.
pub fn refusal(error: &AppError) -> serde_json::Value {
    serde_json::json!({"code": error.code, "message": error.message})
}

/// How a proposal ends when it (or its base) was refused, `refusal` saying why, before
/// anything was collected.
pub fn refused(refusal: serde_json::Value) -> End {
    End {
        state: State::Refused,
        verdict: None,
        reasons: Vec::new(),
        error: Some(refusal),
    }
}

/// With delivery, imports the upstream's tip and moves the target forward to it, as `sf repo
/// import --from-upstream --advance` does: after a delivery the tip is the commit just
/// delivered, and a commit the team pushed on top of it is taken in.
pub fn import_upstream(backends: &Backends, repository: &ServeRepository) -> Result<(), AppError> {
    if !repository.deliver {
        return Ok(());
    }
    import(
        backends,
        &ImportRequest {
            identity: repository.identity.clone(),
            from: ImportFrom::Upstream,
            advance: true,
            upstream: UpstreamRequest {
                url: None,
                branch: None,
            },
        },
    )
    .map(|_| ())
}

/// The commit the repository's target names now.
pub fn target_of(backends: &Backends, repository: &ServeRepository) -> Result<String, AppError> {
    let owned = backends.open_repository(&repository.identity)?;
    owned
        .target()
        .map(|commit| commit.to_hex())
        .map_err(|error| sf_app::error::repository_error("the repository's target", &error))
}

/// The Candidate sealed in `frozen_slice`, as the use cases take it.
pub fn sealed_target(
    repository: &ServeRepository,
    candidate: Option<&String>,
    frozen_slice: Option<&String>,
) -> Option<Target> {
    Some(Target {
        identity: repository.identity.clone(),
        candidate: candidate?.clone(),
        slice: PathBuf::from(frozen_slice?),
    })
}
