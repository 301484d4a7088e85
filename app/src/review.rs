//! `review`: a named reviewer's decision about a Candidate, stored once as an `sf-review/1`
//! Evidence record under the Candidate's pins and the attempt reviewed.
//!
//! Everything is checked before the one write: the Candidate sealed for the Slice, a review
//! check of the Slice's acceptance that lists the reviewer, the subject the reviewer read
//! equal to the one the evidence judges now (an approval must name it), the process checks
//! Verified for an approval, and a signature, when the check lists the reviewer's key, made
//! with `ssh-keygen -Y sign` and verified against that key.

mod sign;

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use sf_host::assurance::review::{REVIEW_FORMAT, check_reason, verify_signature};
use sf_host::assurance::{
    Decision, Outcome, Review, ReviewRequirement, Reviewer, Reviews, Verdict, time,
};
use sf_host::canonical::Digest;
use sf_host::contracts::grammar::{ID_RULE, is_valid_id};
use sf_host::contracts::{AttemptId, EvidenceRecord};

use crate::backends::Backends;
use crate::error::AppError;
use crate::evidence::PER_RECORD;
use crate::input::parse_digest;
use crate::landing::land_error;
use crate::loaded::{Loaded, Target};
use crate::slice_dir::SliceDir;

/// One review, as given.
#[derive(Clone, Debug)]
pub struct ReviewRequest {
    /// The Candidate and its Slice.
    pub target: Target,
    /// Approve or reject.
    pub decision: Decision,
    /// The reviewer's name, as the review check lists it.
    pub reviewer: String,
    /// Why, in the reviewer's words.
    pub reason: String,
    /// The review subject the reviewer read, as given; needed to approve.
    pub subject: Option<String>,
    /// The review check answered; needed only when the acceptance has several.
    pub check: Option<String>,
    /// The SSH key to sign with (`ssh-keygen -Y sign -f`).
    pub key: Option<PathBuf>,
    /// The attempt (fence epoch) reviewed; `None` for the newest.
    pub attempt: Option<u64>,
}

/// A review stored, and the Verdict the evidence judges now.
#[derive(Clone, Debug)]
pub struct Reviewed {
    /// The review record's id.
    pub id: Digest,
    /// The review.
    pub review: Review,
    /// The attempt reviewed.
    pub attempt: AttemptId,
    /// The Candidate's digest.
    pub candidate: Digest,
    /// The Slice's id and revision.
    pub slice: (String, u64),
    /// The Verdict of the attempt with the review counted, and its digest.
    pub now: (Verdict, Digest),
}

/// Checks `request` whole, then stores the review once and judges the attempt again.
pub fn review(backends: &Backends, request: &ReviewRequest) -> Result<Reviewed, AppError> {
    let read = check_request(request)?;
    let loaded = Loaded::read(backends, &request.target)?;
    let (check, reviewer) = reviewer_of(&loaded.slice, request)?;
    let judging = loaded.judging(backends)?;
    let verdict = judging
        .verdict(request.attempt)
        .map_err(|error| land_error("judging", error))?;
    let reviews = verdict
        .reviews
        .as_ref()
        .expect("an acceptance with a review check is judged with its reviews");
    check_subject(request.decision, read.as_ref(), &verdict, reviews)?;
    let mut review = Review {
        at: time::format(SystemTime::now()).unwrap_or_default(),
        candidate: loaded.sealed.digest.clone(),
        check: check.clone(),
        decision: request.decision,
        reason: request.reason.clone(),
        reviewer: request.reviewer.clone(),
        signature: None,
        subject: reviews.subject.clone(),
    };
    if let (Some(key), Some(listed)) = (&request.key, &reviewer.key) {
        let message = review
            .signed_message()
            .map_err(|error| AppError::invalid("the review", error))?;
        let signature = sign::sign(key, &message)?;
        verify_signature(listed, &message, &signature).map_err(|why| {
            AppError::invalid(
                format!("--key {}", key.display()),
                format!(
                    "is not the key check {check} lists for {}: {why}",
                    reviewer.name
                ),
            )
        })?;
        review.signature = Some(signature);
    }
    let id = store(backends, &loaded, &review, &verdict.attempt)?;
    let now = judging
        .verdict(Some(verdict.attempt.epoch))
        .map_err(|error| land_error("judging", error))?;
    let digest = now
        .digest()
        .map_err(|error| AppError::invalid("the Verdict", error))?;
    let record = &loaded.slice.frozen.record;
    Ok(Reviewed {
        id,
        review,
        attempt: verdict.attempt,
        candidate: loaded.sealed.digest,
        slice: (record.id.clone(), record.revision),
        now: (now, digest),
    })
}

/// The checks that need nothing read: the reviewer's name, the reason, and the subject (which
/// an approval must give); the subject read, as a digest.
fn check_request(request: &ReviewRequest) -> Result<Option<Digest>, AppError> {
    if !is_valid_id(&request.reviewer) {
        return Err(AppError::invalid(
            format!("--reviewer {:?}", request.reviewer),
            ID_RULE,
        ));
    }
    check_reason(&request.reason).map_err(|rule| AppError::invalid("--reason", rule))?;
    let read = request
        .subject
        .as_deref()
        .map(|text| parse_digest(text, "--subject"))
        .transpose()?;
    if request.decision == Decision::Approve && read.is_none() {
        return Err(AppError::new(
            "usage",
            "sf review approve needs --subject: the review subject you read (`sf report`, `sf \
             show` or `sf judge` print it), so that you approve exactly that",
        ));
    }
    Ok(read)
}

/// The review check answered and the reviewer it lists, with the key rule: a key is given
/// exactly when the check lists one for the reviewer.
fn reviewer_of(slice: &SliceDir, request: &ReviewRequest) -> Result<(String, Reviewer), AppError> {
    let (check, requirement) = review_check(slice, request.check.as_deref())?;
    let Some(reviewer) = requirement.reviewer(&request.reviewer) else {
        return Err(AppError::invalid(
            format!("--reviewer {}", request.reviewer),
            format!(
                "is not a reviewer of check {check} (it lists {})",
                names(requirement.reviewers.iter().map(|r| r.name.as_str()))
            ),
        ));
    };
    match (&reviewer.key, &request.key) {
        (Some(_), None) => Err(AppError::invalid(
            format!("--reviewer {}", request.reviewer),
            format!(
                "check {check} lists a key for {}: sign with --key FILE",
                request.reviewer
            ),
        )),
        (None, Some(key)) => Err(AppError::invalid(
            format!("--key {}", key.display()),
            format!(
                "check {check} lists no key for {}: an unsigned review counts, and a \
                 signature no key can verify would prove nothing",
                request.reviewer
            ),
        )),
        _ => Ok((check.to_owned(), reviewer.clone())),
    }
}

/// The counted review check `wanted` names, or the only one.
fn review_check<'a>(
    slice: &'a SliceDir,
    wanted: Option<&str>,
) -> Result<(&'a str, &'a ReviewRequirement), AppError> {
    let counted: Vec<_> = slice.frozen.acceptance.counted_reviews().collect();
    let listed = || names(counted.iter().map(|(id, _)| *id));
    match (wanted, counted.as_slice()) {
        (_, []) => Err(AppError::invalid(
            format!("--slice {}", slice.dir.display()),
            "its acceptance has no review check (one listing reviewers, in an \
             sf-repository-acceptance/4): there is nothing to review",
        )),
        (None, [only]) => Ok(*only),
        (None, _) => Err(AppError::new(
            "usage",
            format!(
                "the acceptance has several review checks ({}): name one with --check",
                listed()
            ),
        )),
        (Some(wanted), _) => counted
            .iter()
            .find(|(id, _)| *id == wanted)
            .copied()
            .ok_or_else(|| {
                AppError::invalid(
                    format!("--check {wanted:?}"),
                    format!(
                        "is not a review check of the Slice's acceptance (it has {})",
                        listed()
                    ),
                )
            }),
    }
}

/// The subject read must be the one the evidence judges now, and an approval needs the
/// process checks Verified.
fn check_subject(
    decision: Decision,
    read: Option<&Digest>,
    verdict: &Verdict,
    reviews: &Reviews,
) -> Result<(), AppError> {
    if let Some(read) = read
        && *read != reviews.subject
    {
        return Err(AppError::coded(
            "conflict",
            format!("--subject {read}"),
            format!(
                "is not the subject the evidence of attempt {} judges now ({}): read the \
                 report again (`sf report`), and review what it shows",
                verdict.attempt, reviews.subject
            ),
        ));
    }
    if decision == Decision::Approve && reviews.process != Outcome::Verified {
        return Err(AppError::invalid(
            format!("attempt {}", verdict.attempt),
            format!(
                "its process checks are {}, not verified: an approval would count for nothing",
                reviews.process.as_str()
            ),
        ));
    }
    Ok(())
}

/// Stores `review` once, under the Candidate's pins and `attempt`.
fn store(
    backends: &Backends,
    loaded: &Loaded,
    review: &Review,
    attempt: &AttemptId,
) -> Result<Digest, AppError> {
    let payload = review
        .to_bytes()
        .map_err(|error| AppError::invalid("the review", error))?;
    let pins = loaded
        .programs
        .pins
        .digest()
        .map_err(|error| AppError::invalid("the pins", error))?;
    let record = EvidenceRecord::new(pins, attempt.clone(), REVIEW_FORMAT, &payload)
        .map_err(|error| AppError::coded(error.code(), "the review record", error))?;
    let store = loaded.slice.evidence_store(backends)?;
    store
        .put(&record, Instant::now() + PER_RECORD)
        .map_err(|error| AppError::coded(error.code(), "the evidence store", error))
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}
