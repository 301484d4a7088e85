//! Collecting a sealed proposal, as `sf collect` and `sf judge` do, once more when the
//! machine, not the Candidate, left it undecided.

use std::num::NonZeroUsize;
use std::time::Duration;

use sf_app::collect::{CollectRequest, collect};
use sf_app::judge::{JudgeRequest, judge};
use sf_app::{AppError, Backends, Target};
use sf_host::assurance::{Outcome, ProcessFacts};
use sf_host::collector::RunState;
use sf_host::contracts::RunStatus;
use sf_host::fault::FaultPoint;

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

/// Whether a collection's `trial` passed: the proposals behind it are sealed on it.
pub fn passed(trial: &serde_json::Value) -> bool {
    trial.get("outcome").and_then(serde_json::Value::as_str) == Some("verified")
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
