//! Judging a Candidate from its stored evidence, read-only: the Verdict of an attempt, what
//! each check that was not met wrote, and the policy every effect is prepared under (only a
//! Verified Verdict, as the judge's proof, admits one).

use sf_host::assurance::{Observation, Outcome, Verdict};
use sf_host::canonical::Digest;
use sf_host::contracts::EvidenceStore;
use sf_host::judging::Verified;

use crate::backends::Backends;
use crate::error::AppError;
use crate::evidence::observation;
use crate::landing::land_error;
use crate::loaded::{Loaded, Target};

/// Which attempt of which Candidate to judge.
#[derive(Clone, Debug)]
pub struct JudgeRequest {
    /// The Candidate and its Slice.
    pub target: Target,
    /// The attempt (fence epoch); `None` for the newest.
    pub attempt: Option<u64>,
}

/// A Verdict and what a person reads to see why.
#[derive(Clone, Debug)]
pub struct Judged {
    /// The Verdict.
    pub verdict: Verdict,
    /// Its digest.
    pub digest: Digest,
    /// What each check that was not met wrote.
    pub unmet: Vec<CheckOutput>,
    /// The records filed under the Candidate's pins that cannot be read (of any attempt),
    /// with why: never evidence, left as they are.
    pub unreadable: Vec<(Digest, String)>,
}

/// What the run of one check that was not met (missed, or not attributable) wrote, read from
/// its record.
#[derive(Clone, Debug)]
pub struct CheckOutput {
    /// The check's id.
    pub check: String,
    /// The record of its run.
    pub record: Digest,
    /// The record's observation, or why it cannot be shown (it never fails the judgement:
    /// the Verdict already stands).
    pub observation: Result<Observation, String>,
}

/// Judges `request.target`'s evidence, writing nothing.
pub fn judge(backends: &Backends, request: &JudgeRequest) -> Result<Judged, AppError> {
    let loaded = Loaded::read(backends, &request.target)?;
    let judging = loaded.judging(backends)?;
    let verdict = judging
        .verdict(request.attempt)
        .map_err(|error| land_error("judging", error))?;
    let digest = verdict
        .digest()
        .map_err(|error| AppError::invalid("the Verdict", error))?;
    let unmet = unmet_outputs(judging.store.as_ref(), &verdict);
    let unreadable = judging
        .unreadable()
        .map_err(|error| land_error("judging", error))?;
    Ok(Judged {
        verdict,
        digest,
        unmet,
        unreadable,
    })
}

/// What every check of `verdict` that was not met wrote, in the Verdict's order.
pub(crate) fn unmet_outputs(store: &dyn EvidenceStore, verdict: &Verdict) -> Vec<CheckOutput> {
    verdict
        .checks
        .iter()
        .filter(|check| check.met != Some(true))
        .filter_map(|check| {
            let record = check.record.clone()?;
            Some(CheckOutput {
                check: check.check.clone(),
                observation: observation(store, &record),
                record,
            })
        })
        .collect()
}

/// The Verdict of `attempt` (default: the newest) of the loaded Candidate and the proof the
/// judge makes of it, when it is Verified; `not-verified` otherwise, saying nothing is
/// `effect` (integrated, delivered) and nothing was prepared.
pub(crate) fn verified(
    backends: &Backends,
    loaded: &Loaded,
    attempt: Option<u64>,
    effect: &str,
) -> Result<(Verdict, Verified), AppError> {
    let judging = loaded.judging(backends)?;
    let verdict = judging
        .verdict(attempt)
        .map_err(|error| land_error("judging the Candidate", error))?;
    let digest = verdict
        .digest()
        .map_err(|error| AppError::new("invalid-input", error.to_string()))?;
    if verdict.outcome != Outcome::Verified {
        return Err(AppError::new(
            "not-verified",
            format!(
                "Candidate {} is judged {} under Slice {} revision {} (attempt {}, Verdict \
                 {digest}); only a Verified Candidate is {effect}: nothing was prepared",
                loaded.sealed.digest,
                verdict.outcome.as_str(),
                loaded.slice.frozen.record.id,
                loaded.slice.frozen.record.revision,
                verdict.attempt
            ),
        ));
    }
    let proof = judging
        .verified(&verdict.attempt)
        .map_err(|error| land_error("judging the Candidate", error))?;
    Ok((verdict, proof))
}
