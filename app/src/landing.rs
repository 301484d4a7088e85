//! Landing: the one guarded path from a sealed Candidate to its target. It composes the
//! parts, each of which keeps its own promise, so that the whole keeps one more: **the target
//! moves only to a Candidate that is Verified under the Slice it was sealed for.**
//!
//! 1. **Preflight** ([`crate::preflight`]), before an attempt is claimed: the executor
//!    provides the Slice's environment, the deadline is ahead, and the gate answers proceed.
//!    Each failure is an error with nothing written.
//! 2. Read the Candidate by reference, collect under the fence (one record per check), read it
//!    again: a Candidate that changed, a collection that could not store a record, or an
//!    environment that changed during it gets no Verdict.
//! 3. Judge; only a Verified Verdict goes on. Its digest is the integration's proof.
//! 4. Prepare the intent the proof admits and invoke it once with the proof
//!    ([`sf_host::judging::Verified`], which only the judge makes): immediately before the move
//!    its guard judges the stored evidence again (the judge is deterministic over the
//!    records) and requires the same Verified Verdict, then asks the operator's gate.
//!
//! A landing of an action occurrence that already holds an intent starts nothing new: a
//! confirmed one is reported as it is, an unknown one stays unknown (never retried), and an
//! intent that was prepared but never claimed is invoked behind the same guard.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use sf_host::assurance::{AssuranceError, FrozenSlice, Outcome, Verdict};
use sf_host::canonical::Digest;
use sf_host::collector::{
    CollectError, CollectRequest, CollectResult, CollectTrees, RepositoryCollector, derive,
};
use sf_host::contracts::{CancelToken, EvidenceStore, EvidenceStoreError, Executor, Gate};
use sf_host::environment_store::EnvironmentStore;
use sf_host::fault::{FaultPoint, FaultPoints};
use sf_host::fence::{Fence, FenceError};
use sf_host::judging::{JudgeError, Judging};
use sf_host::repository::{
    Action, IntegrationObservation, Invocation, Owner, PreparedIntegration, Repository,
    RepositoryError, SealedCandidate,
};
use sf_host::tree_store::collect_trees;

use crate::error::{AppError, repository_error};
use crate::progress::Progress;

/// Why a landing (or one of its steps) started nothing, or stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LandError {
    /// An input breaks a rule; nothing was written or started.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// The input at fault (`the executor`, `the deadline`, `--attempt 3`, ...).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// The gate did not answer proceed before anything started; nothing was written.
    #[error("the gate withheld it: {reason}")]
    Withheld {
        /// The gate's refusal, or why it gave no answer.
        reason: String,
    },
    /// The evidence does not hold a Verified Verdict for this Candidate under this Slice.
    #[error("not verified: {reason}")]
    NotVerified {
        /// What the evidence judges instead, or why the proof matches no Verified attempt.
        reason: String,
    },
    /// The repository refused or failed: an export, a snapshot, preparing or invoking the
    /// intent.
    #[error(transparent)]
    Repository(#[from] RepositoryError),
    /// The collection started nothing, or stopped because its hold ended.
    #[error(transparent)]
    Collect(#[from] CollectError),
    /// The fence could not be taken (another attempt holds it, say).
    #[error("the fence: {0}")]
    Fence(#[from] FenceError),
    /// The evidence store failed while the evidence was read; nothing was judged.
    #[error("{what}: {error}")]
    Store {
        /// What was being done.
        what: String,
        /// The store's error, whose class is kept.
        error: EvidenceStoreError,
    },
}

impl LandError {
    /// The stable kebab-case code of the error.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
            Self::Withheld { .. } => "withheld",
            Self::NotVerified { .. } => "not-verified",
            Self::Repository(error) => error.code(),
            Self::Collect(error) => error.code(),
            Self::Fence(error) => error.code(),
            Self::Store { error, .. } => error.code(),
        }
    }

    pub(crate) fn invalid(input: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::InvalidInput {
            input: input.into(),
            rule: rule.into(),
        }
    }
}

impl From<JudgeError> for LandError {
    fn from(error: JudgeError) -> Self {
        match error {
            JudgeError::InvalidInput { input, rule } => Self::InvalidInput { input, rule },
            JudgeError::NotVerified { reason } => Self::NotVerified { reason },
            JudgeError::Store { what, error } => Self::Store { what, error },
            other => Self::invalid("the evidence", other.to_string()),
        }
    }
}

impl From<AssuranceError> for LandError {
    fn from(error: AssuranceError) -> Self {
        match error {
            AssuranceError::InvalidInput { input, rule } => Self::InvalidInput { input, rule },
            AssuranceError::Store { what, error } => Self::Store { what, error },
            other => Self::invalid("assurance", other.to_string()),
        }
    }
}

/// A collection that stopped, as a landing error. A hold that ended because the fence cannot
/// be reached now (its server went down, and the hold's session with it) is the fence's
/// `unavailable`, retry later, with the collection's own words; any other stop is itself.
pub(crate) fn stopped(fence: &Fence, error: CollectError) -> LandError {
    if !matches!(error, CollectError::Released { .. }) {
        return error.into();
    }
    match fence.last_epoch() {
        Err(probe) if probe.code() == "unavailable" => FenceError::Unavailable {
            reason: format!(
                "{error}; the fence cannot be reached now ({probe}): collect again once it is back"
            ),
        }
        .into(),
        _ => error.into(),
    }
}

/// A landing error as a use case reports it, `what` naming the step.
pub(crate) fn land_error(what: &str, error: impl Into<LandError>) -> AppError {
    let error = error.into();
    match &error {
        LandError::Repository(inner) => repository_error(what, inner),
        _ => AppError::coded(error.code(), what, &error),
    }
}

/// One landing: what is landed, where, and with what.
pub(crate) struct Composition<'a> {
    /// The owned repository the Candidate is sealed in and whose target moves.
    pub repository: &'a Repository,
    /// The digest of the Candidate to land.
    pub candidate: Digest,
    /// The frozen Slice the Candidate was sealed for.
    pub slice: FrozenSlice,
    /// The executor the checks run on.
    pub executor: Arc<dyn Executor>,
    /// Where the collection's records are stored and the judge reads them.
    pub store: Arc<dyn EvidenceStore>,
    /// The operator's gate, asked before each run and immediately before the move.
    pub gate: Arc<dyn Gate>,
    /// The fence of the repository's Product; the collection runs under one hold on it.
    pub fence: &'a Fence,
    /// What no Candidate may read (the Slice, its state, the repository).
    pub protected: Vec<PathBuf>,
    /// The action occurrence the intent is prepared for; an occurrence that already holds
    /// an intent is resumed, never collected again.
    pub action: Action,
    /// The owner recorded in the intent's payload.
    pub owner: Owner,
    /// When the collection must be over.
    pub deadline: SystemTime,
    /// How many checks run at a time ([`RepositoryCollector::with_jobs`]).
    pub jobs: NonZeroUsize,
    /// An attempt collected earlier to judge instead of collecting one.
    pub attempt: Option<u64>,
    /// The verified trees of the dependency environments the checks name
    /// ([`CollectRequest::environments`]).
    pub environments: BTreeMap<Digest, PathBuf>,
    /// The staged harness of each oats check ([`CollectRequest::capabilities`]).
    pub capabilities: sf_host::collector::StagedCapabilities,
    /// Where an `sf-candidate/4` Candidate's base is materialised for its programs to run by
    /// reference (the environment store); without one such a Candidate's checks start
    /// nothing.
    pub tree_store: Option<&'a EnvironmentStore>,
    /// Where tests stop or fail the landing at named points.
    pub faults: Arc<dyn FaultPoints>,
}

/// How a landing ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LandOutcome {
    /// The target moved to the Candidate (now, or by an earlier landing of this occurrence).
    Integrated,
    /// Judged Failed: nothing prepared.
    Failed,
    /// Judged Inconclusive, or no Verdict could be issued for the attempt: nothing prepared.
    Inconclusive,
    /// The gate withheld the move after the claim: the occurrence is consumed.
    Withheld,
    /// The move's outcome is unknown: inspect, and never retry this occurrence.
    Unknown,
    /// Nothing was dispatched (the target is no longer the Candidate's base).
    NotDispatched,
}

impl LandOutcome {
    /// The outcome's stable kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Integrated => "integrated",
            Self::Failed => "failed",
            Self::Inconclusive => "inconclusive",
            Self::Withheld => "withheld",
            Self::Unknown => "unknown",
            Self::NotDispatched => "not-dispatched",
        }
    }
}

/// What a landing did and saw.
#[derive(Clone, Debug)]
pub struct Landing {
    /// How the landing ended.
    pub outcome: LandOutcome,
    /// Whether this call found the occurrence's intent already retained (and so collected
    /// and judged nothing).
    pub replayed: bool,
    /// The collection this call ran; `None` for a replay.
    pub collected: Option<CollectResult>,
    /// Why no Verdict was issued for the attempt, when none was.
    pub no_verdict: Option<String>,
    /// The Verdict of this call's collection; `None` for a replay or when none was issued.
    pub verdict: Option<Verdict>,
    /// The intent prepared or retained for the occurrence, if one exists.
    pub prepared: Option<PreparedIntegration>,
    /// What the invocation, or for a claimed intent the inspection, reported.
    pub observation: Option<IntegrationObservation>,
    /// The gate's reason when it withheld the landing before anything started (nothing was
    /// written and the occurrence is not consumed); a withholding after the claim is the
    /// observation's.
    pub withheld_before: Option<String>,
}

impl Landing {
    /// The landing the gate withheld at the preflight, for `reason`: nothing was collected,
    /// claimed or written.
    pub fn withheld_before(reason: String) -> Self {
        Self {
            outcome: LandOutcome::Withheld,
            replayed: false,
            collected: None,
            no_verdict: None,
            verdict: None,
            prepared: None,
            observation: None,
            withheld_before: Some(reason),
        }
    }

    /// When the gate withheld the landing: whether the occurrence was consumed (withheld
    /// after the claim) and the reason; `None` for any other outcome.
    pub fn withheld(&self) -> Option<(bool, &str)> {
        if self.outcome != LandOutcome::Withheld {
            return None;
        }
        Some(match (&self.withheld_before, &self.observation) {
            (Some(reason), _) => (false, reason.as_str()),
            (None, observation) => (
                true,
                observation
                    .as_ref()
                    .and_then(|observation| observation.problem.as_deref())
                    .unwrap_or("the gate did not answer proceed immediately before the move"),
            ),
        })
    }
}

fn outcome_of(observation: &IntegrationObservation) -> LandOutcome {
    match observation.invocation {
        Invocation::Confirmed => LandOutcome::Integrated,
        Invocation::Unknown => LandOutcome::Unknown,
        Invocation::Withheld => LandOutcome::Withheld,
        Invocation::NotDispatched => LandOutcome::NotDispatched,
    }
}

/// Lands `request.candidate` (see the module documentation). The caller has run the
/// preflight. `Err` means nothing was started by this call after the point the error names;
/// everything reached is in the answer.
pub(crate) fn land(
    request: Composition<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Landing, LandError> {
    let repository = request.repository;
    let sealed = repository.read_by_reference(&request.candidate)?;
    let trees = collect_trees(repository, &sealed, &request.slice, request.tree_store).map_err(
        |error| {
            LandError::invalid(
                format!("Candidate {}", request.candidate),
                error.to_string(),
            )
        },
    )?;
    let programs = derive(&request.slice, &sealed, &trees)
        .map_err(|why| LandError::invalid(format!("Candidate {}", request.candidate), why))?;
    let judging = Judging {
        slice: request.slice.clone(),
        pins: programs.pins.clone(),
        store: Arc::clone(&request.store),
    };
    if let Some(prepared) = repository.retained_intent(&request.action)? {
        return resume(&request, judging, prepared);
    }
    // A Slice with review checks lands the attempt its reviewers read: its newest attempt,
    // when its process checks are Verified, is judged again rather than collected anew (a new
    // attempt would be a new review subject, and every approval would count for nothing).
    let earlier = match request.attempt {
        Some(attempt) => Some(judging.verdict(Some(attempt))?),
        None => judging.reviewed_verdict()?,
    };
    let (collected, verdict) = match earlier {
        Some(verdict) => (None, verdict),
        None => {
            let collected = collect(&request, &sealed, trees, progress)?;
            let after = repository.read_by_reference(&request.candidate)?;
            if let Some(reason) = no_verdict(&collected, &sealed, &after) {
                return Ok(Landing {
                    outcome: LandOutcome::Inconclusive,
                    replayed: false,
                    collected: Some(collected),
                    no_verdict: Some(reason),
                    verdict: None,
                    prepared: None,
                    observation: None,
                    withheld_before: None,
                });
            }
            let verdict = judging.judge(&collected.attempt)?;
            (Some(collected), verdict)
        }
    };
    request.faults.reached(FaultPoint::LandJudged);
    let mut landed = Landing {
        outcome: match verdict.outcome {
            Outcome::Verified => LandOutcome::Integrated,
            Outcome::Failed => LandOutcome::Failed,
            Outcome::Inconclusive => LandOutcome::Inconclusive,
        },
        replayed: false,
        collected,
        no_verdict: None,
        verdict: Some(verdict.clone()),
        prepared: None,
        observation: None,
        withheld_before: None,
    };
    if verdict.outcome != Outcome::Verified {
        return Ok(landed);
    }
    let proof = judging.verified(&verdict.attempt)?;
    let payload =
        repository.integration_payload(&proof, request.action.clone(), request.owner.clone());
    let prepared = repository.prepare_integration(&payload)?;
    let observation = repository.invoke_once(&prepared, &proof, Some(Arc::clone(&request.gate)))?;
    landed.outcome = outcome_of(&observation);
    landed.prepared = Some(prepared);
    landed.observation = Some(observation);
    Ok(landed)
}

/// Collects the Candidate's process checks once, under one hold on the fence.
fn collect(
    request: &Composition<'_>,
    sealed: &SealedCandidate,
    trees: CollectTrees,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<CollectResult, LandError> {
    let collector = RepositoryCollector::new(
        Arc::clone(&request.store),
        Arc::clone(&request.executor),
        request.protected.clone(),
    )?
    .with_jobs(request.jobs);
    let hold = request.fence.acquire(&sealed.digest)?;
    progress(Progress::Collecting {
        attempt: hold.attempt(),
        checks: request.slice.acceptance.process_checks().count(),
        waited: std::time::Duration::ZERO,
    });
    let collected = collector.collect_with_progress(
        &CollectRequest {
            slice: request.slice.clone(),
            sealed: sealed.clone(),
            trees,
            deadline: request.deadline,
            environments: request.environments.clone(),
            capabilities: request.capabilities.clone(),
        },
        Arc::clone(&request.gate),
        &hold,
        &CancelToken::new(),
        &mut |event| progress(Progress::Run(event)),
    );
    hold.release();
    let collected = collected.map_err(|error| stopped(request.fence, error))?;
    request.faults.reached(FaultPoint::LandCollected);
    Ok(collected)
}

/// Why the collection may not be judged, or `None`: a record could not be stored, the
/// environment changed or could not be described, or the Candidate read after the
/// collection is not the one read before it.
fn no_verdict(
    collected: &CollectResult,
    before: &SealedCandidate,
    after: &SealedCandidate,
) -> Option<String> {
    if collected.storage_failed() {
        return Some("a record could not be stored; no Verdict is issued for this attempt".into());
    }
    if !collected.may_judge() {
        return Some(
            "the environment changed, or could not be described, during the collection; no \
             Verdict is issued for this attempt"
                .into(),
        );
    }
    if before != after {
        return Some(
            "the Candidate read after the collection is not the one read before it".into(),
        );
    }
    None
}

/// Lands an occurrence whose intent is already retained: starts nothing for a claimed one,
/// and invokes a prepared, unclaimed one behind its proof's guard.
fn resume(
    request: &Composition<'_>,
    judging: Judging,
    prepared: PreparedIntegration,
) -> Result<Landing, LandError> {
    let repository = request.repository;
    if prepared.payload.candidate != request.candidate {
        return Err(RepositoryError::Conflict {
            what: format!(
                "action {} occurrence {} already has an intent for Candidate {}; a new effect \
                 needs a new occurrence",
                request.action.id, request.action.occurrence, prepared.payload.candidate
            ),
        }
        .into());
    }
    let inspected = repository.inspect_integration(&prepared)?;
    let observation = if inspected.invocation == Invocation::NotDispatched {
        let payload = &prepared.payload;
        let proof = judging.verified_by(&payload.candidate, &payload.proof)?;
        repository.invoke_once(&prepared, &proof, Some(Arc::clone(&request.gate)))?
    } else {
        inspected
    };
    Ok(Landing {
        outcome: outcome_of(&observation),
        replayed: true,
        collected: None,
        no_verdict: None,
        verdict: None,
        prepared: Some(prepared),
        observation: Some(observation),
        withheld_before: None,
    })
}
