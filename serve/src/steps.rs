//! The steps one proposal takes, each through the application layer's use cases as `sf repo
//! import`, `sf slice freeze`, `sf seal`, `sf collect` and `sf land --deliver --attempt`
//! take them: nothing here decides what a Candidate, a Verdict or an effect is.
//!
//! A proposal is sealed on the commit it will land on: the target (with delivery, the
//! upstream's tip is imported first; the target follows it only forward), or the commit of
//! the proposal ahead of it, which lands first. A private copy of the configured Slice is
//! frozen on that commit and the proposal sealed under it; its checks are collected at once,
//! and the attempt is landed (judged again, the target moved, the commit delivered) when its
//! turn comes. Every step is safe to repeat after a kill: an import or a freeze of what is
//! there already writes nothing, a seal of the same proposal on the same commit is the same
//! Candidate, and the landing's action is the proposal's own (`serve/<id>`, its generation
//! as the occurrence), so its at-most-once intents integrate and deliver it at most once
//! however often the worker lands it again.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sf_app::collect::{CollectRequest, collect};
use sf_app::freeze::{FreezeRequest, freeze};
use sf_app::judge::{JudgeRequest, judge};
use sf_app::land::{LandRequest, land};
use sf_app::propose::ProposalSource;
use sf_app::repo::{ImportFrom, ImportRequest, UpstreamRequest, import};
use sf_app::seal::{ProposalInput, SealRequest, seal};
use sf_app::{AppError, Backends, LandOutcome, Target};
use sf_host::assurance::{Outcome, ProcessFacts};
use sf_host::collector::RunState;
use sf_host::contracts::RunStatus;
use sf_host::fault::FaultPoint;
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
    /// The proposal or its base was refused: the use case's `{"code", "message"}`.
    Refused(serde_json::Value),
    /// This server could not do its part (its state directory): nothing is decided, and the
    /// step is taken again.
    Fault(String),
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

/// How long a collection waits for its Slice copy's fence (held only by an attempt a kill
/// left behind).
const FENCE_WAIT: Duration = Duration::from_secs(60);

/// Collects the checks of the sealed `entry` once, as `sf collect` does, and judges the
/// attempt, as `sf judge` does. When the evidence is undecided because the sandbox or the
/// cluster did not answer for a run (it did not start one, or gave no answer), a record could
/// not be stored, or the environment changed, it collects once more: a fault of the machine
/// is not the Candidate's. A run the executor answered is never collected again, whatever it
/// showed (a limit it hit is, as far as sf can tell, the Candidate's doing). Answers what the
/// queue records of it (its `trial`) and the attempt to land.
pub fn collect_sealed(backends: &Backends, target: &Target) -> (Option<u64>, serde_json::Value) {
    let first = collect_once(backends, target);
    if !first.machine_fault {
        return (first.attempt, first.shown);
    }
    let mut second = collect_once(backends, target);
    if let serde_json::Value::Object(fields) = &mut second.shown {
        fields.insert("retried".into(), serde_json::Value::Bool(true));
        fields.insert("first".into(), first.shown);
    }
    (second.attempt, second.shown)
}

/// One collection and its judgement.
struct Collected {
    /// The attempt to land, when a Verdict may be issued for it.
    attempt: Option<u64>,
    /// `{"outcome", "digest"}`, `{"undecided": WHY}` or `{"error": {"code", "message"}}`.
    shown: serde_json::Value,
    /// Whether it is undecided through a fault of the machine, not of the Candidate.
    machine_fault: bool,
}

fn collect_once(backends: &Backends, target: &Target) -> Collected {
    let error = |error: AppError| Collected {
        attempt: None,
        shown: serde_json::json!({"error": {"code": error.code, "message": error.message}}),
        machine_fault: false,
    };
    let request = CollectRequest {
        target: target.clone(),
        gate: None,
        deadline: None,
        jobs: NonZeroUsize::MIN,
        wait: Some(FENCE_WAIT),
    };
    let result = match collect(backends, &request, &mut |_| {}) {
        Ok(result) => result,
        Err(refusal) => return error(refusal),
    };
    // The landing's collection ended (its records stored), before the queue knows it.
    backends.faults.reached(FaultPoint::LandCollected);
    if !result.may_judge() {
        return Collected {
            attempt: None,
            shown: serde_json::json!({"undecided": "a record could not be stored, or the \
                environment changed during the collection; no Verdict may be issued for it"}),
            machine_fault: true,
        };
    }
    let attempt = result.attempt.epoch;
    match judge(
        backends,
        &JudgeRequest {
            target: target.clone(),
            attempt: Some(attempt),
        },
    ) {
        Ok(judged) => Collected {
            attempt: Some(attempt),
            machine_fault: judged.verdict.outcome == Outcome::Inconclusive
                && result
                    .runs
                    .iter()
                    .any(|run| machine_fault(run.state, run.process.as_ref())),
            shown: serde_json::json!({
                "outcome": judged.verdict.outcome.as_str(),
                "digest": judged.digest.to_string(),
                "attempt": attempt,
            }),
        },
        Err(refusal) => error(refusal),
    }
}

/// Whether a run went wrong through the machine's fault, not the Candidate's: the executor
/// did not answer for it (not started, unresolved, its record not stored), or lost control of
/// it (`aborted`: nothing here cancels a collection, so the sandbox or the cluster stopped
/// it), or could not confirm that its processes ended. A run that exited, was signalled,
/// timed out or hit its output limit is the Candidate's doing, as far as sf can tell.
fn machine_fault(state: RunState, process: Option<&ProcessFacts>) -> bool {
    match (state, process) {
        (RunState::Observed, Some(facts)) => facts.status == RunStatus::Aborted || !facts.reaped,
        (RunState::Observed, None) => false,
        _ => true,
    }
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

/// Whether a collection's `trial` passed: the proposals behind it are sealed on it.
pub fn passed(trial: &serde_json::Value) -> bool {
    trial.get("outcome").and_then(serde_json::Value::as_str) == Some("verified")
}

/// Lands the sealed `entry` as `sf land [--deliver]` does, under the proposal's own action
/// (its generation as the occurrence): the attempt its collection stored, judged again, or,
/// when that collection started nothing, a new collection. Answers how it ended.
pub fn land_sealed(backends: &Backends, repository: &ServeRepository, entry: &Entry) -> End {
    let Some(target) = sealed_target(
        repository,
        entry.candidate.as_ref(),
        entry.frozen_slice.as_ref(),
    ) else {
        return refused(refusal(&AppError::new(
            "corrupt",
            "the queue holds no Candidate for a proposal past sealing",
        )));
    };
    if let Some(why) = entry
        .trial
        .as_ref()
        .and_then(|trial| trial.get("undecided"))
    {
        return End {
            state: State::Inconclusive,
            verdict: None,
            reasons: vec![why.as_str().unwrap_or_default().to_owned()],
            error: None,
        };
    }
    let request = LandRequest {
        target,
        gate: None,
        action: Some(format!("serve/{}", entry.id)),
        occurrence: entry.generation,
        owner: OWNER.into(),
        generation: 1,
        deadline: None,
        jobs: NonZeroUsize::MIN,
        deliver: repository.deliver.then_some(DeliveryMode::Branch),
        attempt: entry.attempt,
    };
    let landed = land(backends, &request, &mut |_| {});
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_runs_the_machine_lost_or_never_answered_are_its_fault() {
        for state in [
            RunState::NotStarted,
            RunState::Unresolved,
            RunState::StorageFailed,
        ] {
            assert!(machine_fault(state, None));
        }
        let ran = |status, reaped| ProcessFacts {
            status,
            exit_code: None,
            signal: None,
            timeout_ms: 1000,
            output_limit: 1024,
            wall_ms: 10,
            user_ms: 0,
            system_ms: 0,
            max_rss_kib: 0,
            memory_peak_bytes: None,
            limits_hit: Some(Vec::new()),
            reaped,
        };
        assert!(machine_fault(
            RunState::Observed,
            Some(&ran(RunStatus::Aborted, true))
        ));
        assert!(machine_fault(
            RunState::Observed,
            Some(&ran(RunStatus::Exited, false))
        ));
        for own in [
            RunStatus::Exited,
            RunStatus::Signalled,
            RunStatus::TimedOut,
            RunStatus::OutputLimit,
        ] {
            assert!(!machine_fault(RunState::Observed, Some(&ran(own, true))));
        }
    }
}
