//! Landing a proposal's collected attempt, as `sf land --deliver --attempt` does, and how the
//! proposal ends.

use std::num::NonZeroUsize;

use sf_app::land::{LandRequest, Landed, land};
use sf_app::{AppError, Backends, LandOutcome, Landing};
use sf_host::plugin::serve_config::ServeRepository;
use sf_host::repository::DeliveryMode;

use super::{OWNER, refusal, refused, sealed_target};
use crate::queue::{End, Entry};
use crate::state::State;

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
    match land(backends, &request, &mut |_| {}) {
        Ok(landed) => end_of(&landed, repository.deliver),
        Err(error) => End {
            state: State::Inconclusive,
            verdict: None,
            reasons: Vec::new(),
            error: Some(refusal(&error)),
        },
    }
}

/// How a proposal whose landing answered `landed` ends, and why.
fn end_of(landed: &Landed, deliver: bool) -> End {
    let landing = &landed.landing;
    let verdict = landing.verdict.as_ref().map(|verdict| {
        serde_json::json!({
            "outcome": verdict.outcome.as_str(),
            "digest": verdict.digest().map(|digest| digest.to_string()).ok(),
        })
    });
    let mut reasons = reasons_of(landing);
    let state = match landing.outcome {
        LandOutcome::Integrated => match &landed.delivery {
            None if !deliver => State::Landed,
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

/// Why a landing ended as it did: the Verdict's reasons and the checks it did not meet, why
/// no Verdict was issued, the gate's refusal, the move's problem.
fn reasons_of(landing: &Landing) -> Vec<String> {
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
    reasons
}
