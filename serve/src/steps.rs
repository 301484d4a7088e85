//! The steps one proposal takes, each through the application layer's use cases as `sf repo
//! import`, `sf slice freeze`, `sf seal` and `sf land --deliver` take them: nothing here
//! decides what a Candidate, a Verdict or an effect is.
//!
//! A proposal is sealed on the target as it is when its turn comes, so that proposals of one
//! repository land one after another, each on the one before: with delivery, the upstream's
//! tip is imported first (the target follows it only forward), then a private copy of the
//! configured Slice is frozen on the target and the proposal sealed under it. Every step is
//! safe to repeat after a kill: an import or a freeze of what is there already writes
//! nothing, a seal of the same proposal is the same Candidate, and the landing's action is
//! the proposal's own (`serve/<id>`, occurrence 1), so its at-most-once intents integrate
//! and deliver it at most once however often the worker lands it again.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use sf_app::freeze::{FreezeRequest, freeze};
use sf_app::land::{LandRequest, land};
use sf_app::propose::ProposalSource;
use sf_app::repo::{ImportFrom, ImportRequest, UpstreamRequest, import};
use sf_app::seal::{ProposalInput, SealRequest, seal};
use sf_app::{AppError, Backends, LandOutcome, Target};
use sf_host::plugin::serve_config::ServeRepository;
use sf_host::repository::DeliveryMode;

use crate::queue::{End, Entry, Kind};
use crate::state::State;

/// The owner the server's landings name.
pub const OWNER: &str = "sf-serve";

/// A sealed proposal: the Slice it was sealed under and the Candidate.
pub struct Sealed {
    /// The private frozen Slice directory.
    pub slice: PathBuf,
    /// The Candidate's digest.
    pub candidate: String,
    /// Its commit M.
    pub commit: String,
}

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

/// Why a proposal was not sealed.
pub enum NotSealed {
    /// The proposal or its base was refused: how it ends.
    Refused(End),
    /// This server could not do its part (its state directory): nothing is decided, and the
    /// step is taken again.
    Fault(String),
}

/// Seals `entry` on the target now.
pub fn seal_on_target(
    backends: &Backends,
    repository: &ServeRepository,
    state: &Path,
    entry: &Entry,
) -> Result<Sealed, NotSealed> {
    let refused = |error: AppError| {
        NotSealed::Refused(End {
            state: State::Refused,
            verdict: None,
            reasons: Vec::new(),
            error: Some(serde_json::json!({"code": error.code, "message": error.message})),
        })
    };
    let Some(configured) = slice_dir(repository, &entry.slice) else {
        return Err(refused(AppError::invalid(
            format!("slice {:?}", entry.slice),
            "no configured Slice of this repository has that id any more",
        )));
    };
    if repository.deliver {
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
        .map_err(refused)?;
    }
    let work = state.join("proposals").join(&entry.id);
    let slice = work.join("slice");
    // A copy left by a kill before the Candidate was recorded is made again: nothing was
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
            base: None,
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

/// Lands the sealed `entry` as `sf land [--deliver]` does, under the proposal's own action;
/// `collected` is called once every check has settled. Answers how it ended.
pub fn land_sealed(
    backends: &Backends,
    repository: &ServeRepository,
    entry: &Entry,
    collected: &mut dyn FnMut(),
) -> End {
    let (Some(slice), Some(candidate)) = (&entry.frozen_slice, &entry.candidate) else {
        return End {
            state: State::Refused,
            verdict: None,
            reasons: Vec::new(),
            error: Some(serde_json::json!({"code": "corrupt",
                "message": "the queue holds no Candidate for a proposal past sealing"})),
        };
    };
    let request = LandRequest {
        target: Target {
            identity: repository.identity.clone(),
            candidate: candidate.clone(),
            slice: PathBuf::from(slice),
        },
        gate: None,
        action: Some(format!("serve/{}", entry.id)),
        occurrence: 1,
        owner: OWNER.into(),
        generation: 1,
        deadline: None,
        jobs: NonZeroUsize::MIN,
        deliver: repository.deliver.then_some(DeliveryMode::Branch),
    };
    let (mut checks, mut settled) = (None, 0usize);
    let landed = land(backends, &request, &mut |event| match event {
        sf_app::Progress::Collecting { checks: n, .. } => checks = Some(n),
        sf_app::Progress::Run(sf_host::collector::CollectEvent::Settled { .. }) => {
            settled += 1;
            if checks == Some(settled) {
                collected();
            }
        }
        sf_app::Progress::Run(_) => {}
    });
    let landed = match landed {
        Ok(landed) => landed,
        Err(error) => {
            return End {
                state: State::Inconclusive,
                verdict: None,
                reasons: Vec::new(),
                error: Some(serde_json::json!({"code": error.code, "message": error.message})),
            };
        }
    };
    let landing = &landed.landing;
    let verdict = landing.verdict.as_ref().map(|verdict| {
        serde_json::json!({
            "outcome": verdict.outcome.as_str(),
            "digest": verdict.digest().map(|digest| digest.to_string()).ok(),
        })
    });
    let mut reasons: Vec<String> = landing
        .verdict
        .iter()
        .flat_map(|verdict| {
            verdict.reasons.iter().cloned().chain(
                verdict
                    .checks
                    .iter()
                    .filter(|check| check.met != Some(true))
                    .map(|check| match check.problems.first() {
                        Some(problem) => format!("check {}: {problem}", check.check),
                        None => format!("check {} did not meet its expectation", check.check),
                    }),
            )
        })
        .collect();
    reasons.extend(landing.no_verdict.iter().cloned());
    if let Some((_, reason)) = landing.withheld() {
        reasons.push(format!("withheld by the gate: {reason}"));
    }
    if let Some(problem) = landing
        .observation
        .as_ref()
        .and_then(|seen| seen.problem.clone())
    {
        reasons.push(problem);
    }
    let state = match landing.outcome {
        LandOutcome::Integrated => match &landed.delivery {
            None if !repository.deliver => State::Landed,
            None => {
                reasons.push("integrated, and no delivery was made".into());
                State::Failed
            }
            Some(delivered) => {
                let invocation = delivered.observation.invocation.as_str();
                if let Some(problem) = &delivered.observation.problem {
                    reasons.push(format!("delivery: {problem}"));
                }
                match invocation {
                    "confirmed" => State::Delivered,
                    "not-dispatched" => State::NotDispatched,
                    other => {
                        reasons.push(format!(
                            "delivery {other}: inspect it with `sf deliver inspect`"
                        ));
                        State::Failed
                    }
                }
            }
        },
        LandOutcome::Failed => State::Failed,
        LandOutcome::Inconclusive => State::Inconclusive,
        LandOutcome::Withheld => State::Refused,
        LandOutcome::Unknown => {
            reasons.push(
                "the move's outcome is unknown: inspect it with `sf integrate inspect`".into(),
            );
            State::Inconclusive
        }
        LandOutcome::NotDispatched => State::NotDispatched,
    };
    End {
        state,
        verdict,
        reasons,
        error: None,
    }
}
