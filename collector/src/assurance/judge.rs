//! Repository Assurance: the judge. It reads only Evidence (the records filed under the pins
//! and written by one attempt) and says Verified, Failed or Inconclusive.
//!
//! - **Verified** only when every process check has exactly one attributable record and every
//!   outcome meets its expectation.
//! - **Failed** when every process check has exactly one attributable record and at least one
//!   outcome does not meet its expectation.
//! - **Inconclusive** otherwise, with the reasons: a check without a record or with more than
//!   one, a record that is not attributable (a collector error, an identity that differs from
//!   the pins, a stopped run, a run past the deadline), a record that parses but not as what
//!   it claims, a record for a check the acceptance does not have, or a store that cannot be
//!   searched.
//!
//! A record that cannot be read (`corrupt`: its bytes no longer give its id) is never
//! evidence, and which attempt wrote it cannot be trusted. It is a reason only for an attempt
//! that lacks a record for some check (it may be that record); an attempt with one readable
//! record for every check is judged on those alone, so a new collection (a new attempt) is
//! the way forward past a damaged record, which stays where it is, reported by
//! [`unreadable_records`], never repaired. Ignoring it then hides nothing: a damaged record
//! could only have changed such a Verdict as a second record of one check, and a store whose
//! rows can be rewritten can be given any record anyway.
//!
//! A record is attributable when the judge itself finds that its collector closure is the
//! recipe's, it names the pinned Candidate and the check's phase and stage, it was observed
//! without problems, its program, input, harness, runtime, profile and bounds identities equal
//! the pinned ones (the bounds with the effective timeout, at most the recipe's, and the recipe's
//! output limit), its environment is the pinned one, the executor states every enforcement
//! fact the recipe pins, the run exited or was signalled and was reaped, it hit none of the
//! executor's own limits (the record's `limitsHit` is empty), and it ended by the deadline.
//! An outcome meets its expectation when the run exited with the expected code and, if the
//! expectation names one, its stdout has the expected SHA-256. A signalled run is an outcome
//! (the program crashed, or was killed for a reason the executor did not see as one of its
//! limits) that meets no expectation.
//!
//! A command check with results is graded on its per-test results too, parsed from the JUnit
//! file the record holds (`test_results`): every failToPass test fails or errors on the base
//! and passes on the Candidate, every passToPass test passes on both, and the results agree
//! with the exit code (an exit 0 with a failure listed misses). The exit code stays the
//! authority: the Candidate's code can write the file, so results claiming every test passed
//! never make a failing exit pass. Results that cannot decide (no file, a file that was
//! refused or does not parse, zero tests collected) make the check of a run that exited
//! Inconclusive; a run that did not exit has missed already.
//!
//! A run that hit a limit of the sandbox's (processes, memory, file size, CPU time, open
//! files, scratch) failed, or passed, for the sandbox's reason: no check declares such a
//! limit as part of what it asks, so the record is not attributable and the check is
//! Inconclusive with the limit named (`the run hit the sandbox's process limit (1024): …`),
//! never Failed. The Candidate can make its own run Inconclusive this way (by starting
//! threads until one is refused, say), never Verified.
//!
//! Review checks (an acceptance of version 4) are counted after the process checks, from the
//! review records of the same attempt (`super::review`): the review subject is computed from
//! the pins and the Verdict of the process checks alone, so a review of other evidence counts
//! for nothing. Only when the process checks are Verified do reviews change the outcome: a
//! rejection makes it Failed, an approval still awaited Inconclusive. That Verdict is version
//! 2 (it adds `reviews`); an acceptance without counted review checks is judged exactly as
//! before, into a version 1 record.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::canonical::{self, Digest, Value, object};
use crate::contracts::EvidenceStoreExt;
use crate::contracts::{
    AttemptId, CapturedResults, EvidenceStore, LimitHit, RunIdentities, RunStatus,
};

use super::acceptance::{Acceptance, ProcessCheck, Stage};
use super::environment::EnvironmentRecord;
use super::observation::{
    OBSERVATION_FORMAT, Observation, ObservationFacts, ObservationStatus, ProcessFacts,
};
use super::pins::RepositoryPins;
use super::recipe::Recipe;
use super::review::{REVIEW_FORMAT, Review, ReviewSubject, ReviewVerdict, count};
use super::test_results::{TestGrade, TestResults, grade};
use super::{AssuranceError, sanitize_problems};

/// The protocol string of the Verdict record of an acceptance without counted review checks.
pub const VERDICT_PROTOCOL: &str = "sf-repository-verdict/1";
/// The protocol string of the Verdict record of an acceptance with counted review checks: it
/// adds `reviews`.
pub const VERDICT_PROTOCOL_V2: &str = "sf-repository-verdict/2";

/// The judge's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every process check has exactly one attributable record, and every outcome met its
    /// expectation: the only outcome an integration may be prepared for.
    Verified,
    /// Every process check has exactly one attributable record, and at least one outcome
    /// missed its expectation.
    Failed,
    /// The evidence does not decide; the Verdict's reasons say why.
    Inconclusive,
}

impl Outcome {
    /// The outcome as written in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verified => "verified",
            Self::Failed => "failed",
            Self::Inconclusive => "inconclusive",
        }
    }
}

/// What the judge found for one process check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckVerdict {
    /// The check's id in the acceptance.
    pub check: String,
    /// The one record of the check, when there is exactly one.
    pub record: Option<Digest>,
    /// Whether the judge found that record attributable to the pinned run (see the module
    /// documentation).
    pub attributable: bool,
    /// Whether the outcome met the expectation; `None` unless attributable.
    pub met: Option<bool>,
    /// Why the check is not attributable, or how its outcome missed.
    pub problems: Vec<String>,
    /// The executor's limits the record says the run hit (each is also one of `problems`).
    /// Not part of the Verdict record, whose problems name them.
    pub limits_hit: Vec<LimitHit>,
}

/// The judge's answer: the outcome, per check, and the reasons for an Inconclusive one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The digest of the pins the evidence was filed under.
    pub pins: Digest,
    /// The attempt whose records were counted.
    pub attempt: AttemptId,
    /// What the evidence shows.
    pub outcome: Outcome,
    /// One per process check, in acceptance order.
    pub checks: Vec<CheckVerdict>,
    /// Why the outcome is Inconclusive: checks without one attributable record, records that
    /// cannot be read or belong to no check, a store that cannot be searched, review checks
    /// awaiting approvals. Empty otherwise.
    pub reasons: Vec<String>,
    /// The review checks, for an acceptance that counts some; `None` otherwise (and the
    /// record is then version 1, byte for byte what it was before reviews were counted).
    pub reviews: Option<Reviews>,
}

/// What the judge found for the review checks of one attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reviews {
    /// The review subject's digest: what a counted review names.
    pub subject: Digest,
    /// The subject itself.
    pub subject_record: ReviewSubject,
    /// The outcome of the process checks alone (what the subject's Verdict says).
    pub process: Outcome,
    /// One per counted review check, in acceptance order.
    pub checks: Vec<ReviewVerdict>,
}

impl Verdict {
    /// The Verdict as its canonical JSON value (`sf-repository-verdict/1`).
    pub fn to_value(&self) -> Value {
        let checks = self
            .checks
            .iter()
            .map(|check| {
                object([
                    ("check", check.check.as_str().into()),
                    (
                        "record",
                        check.record.as_ref().map(ToString::to_string).into(),
                    ),
                    ("attributable", Value::Bool(check.attributable)),
                    ("met", check.met.map_or(Value::Null, Value::Bool)),
                    (
                        "problems",
                        Value::Array(
                            sanitize_problems(&check.problems)
                                .into_iter()
                                .map(Value::from)
                                .collect(),
                        ),
                    ),
                ])
            })
            .collect();
        let mut fields = vec![
            ("protocol", VERDICT_PROTOCOL.into()),
            ("pins", self.pins.to_string().into()),
            ("attempt", self.attempt.to_value()),
            ("outcome", self.outcome.as_str().into()),
            ("checks", Value::Array(checks)),
            (
                "reasons",
                Value::Array(
                    sanitize_problems(&self.reasons)
                        .into_iter()
                        .map(Value::from)
                        .collect(),
                ),
            ),
        ];
        if let Some(reviews) = &self.reviews {
            fields[0].1 = VERDICT_PROTOCOL_V2.into();
            fields.push((
                "reviews",
                object([
                    ("process", reviews.process.as_str().into()),
                    ("subject", reviews.subject.to_string().into()),
                    (
                        "checks",
                        Value::Array(reviews.checks.iter().map(ReviewVerdict::to_value).collect()),
                    ),
                ]),
            ));
        }
        Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        )
    }

    /// The canonical bytes of the Verdict.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        canonical::encode(&self.to_value())
            .map_err(|error| AssuranceError::invalid("verdict", error.to_string()))
    }

    /// The Verdict digest: the `sha256:` of the canonical bytes. The judge is deterministic
    /// over the records, so judging the same attempt again gives the same digest; it is the
    /// proof an integration of a Verified Candidate names.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        Ok(Digest::of(&self.to_bytes()?))
    }
}

/// The records filed under `pins` in `store` that cannot be read, in the order first stored,
/// each with why: never evidence, never repaired, and reported beside every Verdict of those
/// pins (a search that fails is reported by the judge itself).
pub fn unreadable_records(
    pins: &Digest,
    store: &dyn EvidenceStore,
    deadline: Instant,
) -> Vec<(Digest, String)> {
    let Ok(ids) = store.find(pins, deadline) else {
        return Vec::new();
    };
    ids.into_iter()
        .filter_map(|id| match store.get_verified(&id, deadline) {
            Ok(_) => None,
            Err(error) => Some((id, error.to_string())),
        })
        .collect()
}

/// The attempts that stored records under `pins` in `store`, oldest first (records that
/// cannot be read are left out: which attempt wrote them cannot be trusted).
pub fn attempts(
    pins: &Digest,
    store: &dyn EvidenceStore,
    deadline: Instant,
) -> Result<Vec<AttemptId>, AssuranceError> {
    let ids = store
        .find(pins, deadline)
        .map_err(|error| AssuranceError::Store {
            what: "searching the evidence store for the attempts".into(),
            error,
        })?;
    let mut attempts: Vec<AttemptId> = Vec::new();
    for id in ids {
        // A review names the attempt it reviewed; only runs make attempts.
        if let Ok(record) = store.get_verified(&id, deadline)
            && record.pins() == pins
            && record.format() != REVIEW_FORMAT
            && !attempts.contains(record.attempt())
        {
            attempts.push(record.attempt().clone());
        }
    }
    attempts.sort_by_key(|attempt| attempt.epoch);
    Ok(attempts)
}

/// What the judge judges: the pins, the frozen records they pin, and the attempt whose
/// records count (records of other attempts under the same pins are inert).
#[derive(Clone, Copy, Debug)]
pub struct JudgeRequest<'a> {
    /// The pins whose digest the records are filed under.
    pub pins: &'a RepositoryPins,
    /// The acceptance the pins name: its process checks are what is judged.
    pub acceptance: &'a Acceptance,
    /// The recipe the pins name: the collector closure, bounds and enforcement a record must
    /// show.
    pub recipe: &'a Recipe,
    /// The environment record the pins name: the runtime and profile a run must have had.
    pub environment: &'a EnvironmentRecord,
    /// The attempt whose records count.
    pub attempt: &'a AttemptId,
}

/// Checks that the records given are the ones the pins name, returning the pins digest.
pub(crate) fn check_records(
    pins: &RepositoryPins,
    acceptance: &Acceptance,
    recipe: &Recipe,
    environment: &EnvironmentRecord,
) -> Result<Digest, AssuranceError> {
    pins.validate()?;
    acceptance.validate()?;
    recipe.validate()?;
    environment.validate()?;
    for (what, digest, pinned) in [
        ("acceptance", acceptance.digest()?, &pins.acceptance),
        ("recipe", recipe.digest()?, &pins.recipe),
        ("environment", environment.digest()?, &pins.environment),
    ] {
        if digest != *pinned {
            return Err(AssuranceError::invalid(
                what,
                format!("the record hashes to {digest}, but the pins name {pinned}"),
            ));
        }
    }
    pins.digest()
}

/// Judges the evidence in `store` for `request`. `Err` only when the request itself is
/// invalid (records that are not the pinned ones); everything about the evidence is in the
/// Verdict.
pub fn judge(
    request: &JudgeRequest<'_>,
    store: &dyn EvidenceStore,
    deadline: Instant,
) -> Result<Verdict, AssuranceError> {
    let pins_digest = check_records(
        request.pins,
        request.acceptance,
        request.recipe,
        request.environment,
    )?;
    let environment_digest = request.environment.digest()?;
    let mut reasons = Vec::new();
    let mut by_check: BTreeMap<String, Vec<(Digest, Observation)>> = BTreeMap::new();
    let mut reviews: Vec<(Digest, Review)> = Vec::new();
    let mut unreadable = Vec::new();
    match store.find(&pins_digest, deadline) {
        Err(error) => reasons.push(format!("the evidence store could not be searched: {error}")),
        Ok(ids) => {
            for id in ids {
                let record = match store.get_verified(&id, deadline) {
                    Ok(record) => record,
                    Err(error) => {
                        unreadable.push(format!(
                            "record {id} cannot be read, and may be this attempt's: {error}"
                        ));
                        continue;
                    }
                };
                if record.pins() != &pins_digest {
                    reasons.push(format!("record {id} is filed under other pins"));
                    continue;
                }
                if record.attempt() != request.attempt {
                    continue;
                }
                if record.format() == REVIEW_FORMAT {
                    match Review::from_payload(record.payload()) {
                        Ok(review) => reviews.push((id, review)),
                        Err(error) => reasons.push(format!("review {id} does not parse: {error}")),
                    }
                    continue;
                }
                if record.format() != OBSERVATION_FORMAT {
                    reasons.push(format!(
                        "record {id} holds {:?}, not a repository observation",
                        record.format()
                    ));
                    continue;
                }
                match Observation::decode(record.payload()) {
                    Ok(observation) => by_check
                        .entry(observation.facts.check.clone())
                        .or_default()
                        .push((id, observation)),
                    Err(error) => reasons.push(format!("record {id} does not parse: {error}")),
                }
            }
        }
    }
    let mut checks = Vec::new();
    let mut complete = true;
    let mut all_met = true;
    for check in request.acceptance.process_checks() {
        let records = by_check.remove(&check.id).unwrap_or_default();
        let verdict = match records.as_slice() {
            [] => CheckVerdict {
                check: check.id.clone(),
                record: None,
                attributable: false,
                met: None,
                problems: vec!["no record of this attempt".into()],
                limits_hit: Vec::new(),
            },
            [(id, observation)] => judge_one(request, &environment_digest, check, id, observation),
            many => CheckVerdict {
                check: check.id.clone(),
                record: None,
                attributable: false,
                met: None,
                problems: vec![format!(
                    "{} records of this attempt; a run has exactly one",
                    many.len()
                )],
                limits_hit: Vec::new(),
            },
        };
        if !verdict.attributable {
            complete = false;
            reasons.push(format!(
                "check {}: {}",
                check.id,
                verdict.problems.join("; ")
            ));
        } else if verdict.met != Some(true) {
            all_met = false;
        }
        checks.push(verdict);
    }
    for (check, records) in by_check {
        reasons.push(format!(
            "{} record(s) for check {check:?}, which the acceptance does not have",
            records.len()
        ));
    }
    // A record that cannot be read counts only where this attempt lacks one.
    if !complete {
        reasons.extend(unreadable);
    }
    let outcome = if !reasons.is_empty() || !complete {
        Outcome::Inconclusive
    } else if all_met {
        Outcome::Verified
    } else {
        Outcome::Failed
    };
    let verdict = Verdict {
        pins: pins_digest,
        attempt: request.attempt.clone(),
        outcome,
        checks,
        reasons,
        reviews: None,
    };
    if request.acceptance.counted_reviews().next().is_none() {
        return Ok(verdict);
    }
    with_reviews(request, verdict, &reviews)
}

/// Adds the counted review checks to the Verdict of the process checks alone: the subject is
/// that Verdict's, and the outcome stays the process checks' unless they are Verified, when a
/// rejection makes it Failed and an approval still awaited Inconclusive.
fn with_reviews(
    request: &JudgeRequest<'_>,
    mut verdict: Verdict,
    reviews: &[(Digest, Review)],
) -> Result<Verdict, AssuranceError> {
    let subject_record = ReviewSubject::new(request.pins, request.attempt, verdict.digest()?);
    let subject = subject_record.digest()?;
    let process = verdict.outcome;
    let checks: Vec<ReviewVerdict> = request
        .acceptance
        .counted_reviews()
        .map(|(check, requirement)| {
            count(
                check,
                requirement,
                reviews,
                &subject,
                &request.pins.candidate.digest,
            )
        })
        .collect();
    if verdict.outcome == Outcome::Verified {
        if checks.iter().any(|check| check.met == Some(false)) {
            verdict.outcome = Outcome::Failed;
        } else if checks.iter().any(|check| check.met.is_none()) {
            verdict.outcome = Outcome::Inconclusive;
        }
    }
    let inconclusive = verdict.outcome == Outcome::Inconclusive;
    for check in checks
        .iter()
        .filter(|check| inconclusive && check.met.is_none())
    {
        verdict.reasons.push(format!(
            "review check {}: {}",
            check.check,
            check.problems.first().map_or("", String::as_str)
        ));
    }
    verdict.reviews = Some(Reviews {
        subject,
        subject_record,
        process,
        checks,
    });
    Ok(verdict)
}

/// Judges one check from its one record: whether the record is attributable to this
/// check's run as the pins and the recipe require (every problem found is named, and the
/// check is then undecided), and whether the run met the check's expectation.
fn judge_one(
    request: &JudgeRequest<'_>,
    environment_digest: &Digest,
    check: &ProcessCheck,
    id: &Digest,
    observation: &Observation,
) -> CheckVerdict {
    let facts = &observation.facts;
    let limits_hit = facts
        .process
        .as_ref()
        .and_then(|process| process.limits_hit.clone())
        .unwrap_or_default();
    // The sandbox's limits first: they are why the rest of the record says nothing of the
    // program.
    let (own, sandboxes) = split_limits(check, &limits_hit);
    let verdict = |problems: Vec<String>, met: Option<bool>| CheckVerdict {
        check: check.id.clone(),
        record: Some(id.clone()),
        attributable: met.is_some(),
        met,
        problems,
        limits_hit: limits_hit.clone(),
    };
    let mut problems: Vec<String> = sandboxes.iter().map(ToString::to_string).collect();
    record_problems(
        request,
        environment_digest,
        check,
        facts,
        &sandboxes,
        &mut problems,
    );
    match (&facts.identities, &facts.process) {
        (Some(ids), Some(process)) => {
            run_problems(request, check, ids, process, observation, &mut problems);
        }
        _ => problems.push("no process facts or identities".into()),
    }
    match (facts.started_at, facts.ended_at) {
        (Some(started), Some(ended)) if started <= ended && ended <= facts.deadline => {}
        (Some(_), Some(_)) => problems.push("the run ended after the deadline".into()),
        _ => problems.push("no start and end times".into()),
    }
    if !problems.is_empty() {
        return verdict(problems, None);
    }
    let process = facts.process.as_ref().expect("checked above");
    match misses(
        check,
        process,
        &observation.stdout,
        observation.results.as_ref(),
        &own,
    ) {
        Ok(missed) => {
            let met = missed.is_empty();
            verdict(missed, Some(met))
        }
        // Results that cannot decide leave the check undecided, whatever the exit code: a
        // Candidate that deletes every test is not Failed for it, nor Verified.
        Err(reason) => verdict(
            vec![format!("the test results cannot decide: {reason}")],
            None,
        ),
    }
}

/// `limits_hit` split into the bounds `check` itself declares (hitting one is a miss) and the
/// sandbox's own limits (never the program's failure).
fn split_limits<'l>(
    check: &ProcessCheck,
    limits_hit: &'l [LimitHit],
) -> (Vec<&'l LimitHit>, Vec<&'l LimitHit>) {
    let declared = check
        .command()
        .map(|command| command.resources)
        .unwrap_or_default();
    limits_hit
        .iter()
        .partition(|hit| declared.declares(hit.limit()))
}

/// How a run made outside any collection (a trial: a freeze's dry run of the base stage)
/// met `check`'s expectation, graded exactly as an attributable record of it is: the misses
/// (none: met), or `Err` with why the run cannot decide (it hit one of the sandbox's own
/// limits, or its results cannot decide).
pub fn grade_trial(
    check: &ProcessCheck,
    process: &ProcessFacts,
    stdout: &[u8],
    results: Option<&CapturedResults>,
) -> Result<Vec<String>, String> {
    let limits_hit = process.limits_hit.clone().unwrap_or_default();
    let (own, sandboxes) = split_limits(check, &limits_hit);
    if !sandboxes.is_empty() {
        let named: Vec<String> = sandboxes.iter().map(ToString::to_string).collect();
        return Err(format!(
            "the run hit the sandbox's own limits: {}",
            named.join("; ")
        ));
    }
    misses(check, process, stdout, results, &own)
        .map_err(|reason| format!("the test results cannot decide: {reason}"))
}

/// Adds to `problems` what keeps the record from being this check's under these pins: the
/// collector, Candidate, phase and stage it names, its status, what the collector found, and
/// the environment of the run (the sandbox's limits `sandboxes` are named already).
fn record_problems(
    request: &JudgeRequest<'_>,
    environment_digest: &Digest,
    check: &ProcessCheck,
    facts: &ObservationFacts,
    sandboxes: &[&LimitHit],
    problems: &mut Vec<String>,
) {
    let recipe = request.recipe;
    if facts.collector != recipe.collector_closure {
        problems.push(format!(
            "written by collector {}, not the recipe's {}",
            facts.collector, recipe.collector_closure
        ));
    }
    if facts.candidate != request.pins.candidate.digest {
        problems.push(format!("names Candidate {}", facts.candidate));
    }
    if facts.phase != check.phase || facts.stage != check.stage {
        problems.push("names another phase or stage than the check".into());
    }
    if facts.status != ObservationStatus::Observed {
        problems.push(format!("the run was {}", facts.status.as_str()));
    }
    if !facts.attributable || !facts.problems.is_empty() {
        // The collector names the sandbox's limits hit among its problems too; they are named
        // already.
        let others: Vec<&str> = facts
            .problems
            .iter()
            .map(String::as_str)
            .filter(|problem| !problems.iter().any(|named| named == problem))
            .collect();
        if !others.is_empty() || sandboxes.is_empty() {
            problems.push(format!(
                "the collector found it not attributable: {}",
                others.join("; ")
            ));
        }
    }
    if facts.environment.as_ref() != Some(environment_digest) {
        problems.push("the environment of the run is not the pinned one".into());
    }
}

/// Adds to `problems` what keeps the run from being the pinned one: the identities it was
/// run with (program, input, harness, runtime, profile, command), what it enforced, and its
/// bounds and ending as the recipe and the check require.
fn run_problems(
    request: &JudgeRequest<'_>,
    check: &ProcessCheck,
    ids: &RunIdentities,
    process: &ProcessFacts,
    observation: &Observation,
    problems: &mut Vec<String>,
) {
    identity_problems(request, check, ids, problems);
    let recipe = request.recipe;
    let asked = check
        .command()
        .is_some_and(|command| command.results.is_some());
    if asked && observation.results.is_none() && process.status == RunStatus::Exited {
        problems.push("the record does not say what results the run left".into());
    }
    for unmet in ids.enforcement.unmet(&recipe.enforcement) {
        problems.push(format!("enforcement: {unmet}, as the recipe pins"));
    }
    if process.timeout_ms == 0 || process.timeout_ms > recipe.timeout_ms {
        problems.push(format!(
            "timeout {} ms is not within the recipe's {} ms",
            process.timeout_ms, recipe.timeout_ms
        ));
    } else if ids.bounds != recipe.bounds(process.timeout_ms).digest()
        || process.output_limit != recipe.output_limit
    {
        problems.push("the bounds enforced are not the pinned ones".into());
    }
    let own_timeout = check
        .command()
        .is_some_and(|command| command.own_timeout(process.timeout_ms));
    if let Some(own) = check.command().and_then(|command| command.timeout_ms)
        && process.timeout_ms > own
    {
        problems.push(format!(
            "timeout {} ms is not within the check's {own} ms",
            process.timeout_ms
        ));
    }
    match process.status {
        RunStatus::Exited | RunStatus::Signalled => {}
        RunStatus::TimedOut if own_timeout => {}
        other => problems.push(format!("the run was stopped ({})", other.code())),
    }
    if !process.reaped {
        problems.push("the executor did not confirm that every process ended".into());
    }
    if process.limits_hit.is_none() {
        problems.push("the record does not say which of the executor's limits the run hit".into());
    }
}

/// Adds to `problems` each identity of the run that is not the pinned one.
fn identity_problems(
    request: &JudgeRequest<'_>,
    check: &ProcessCheck,
    ids: &RunIdentities,
    problems: &mut Vec<String>,
) {
    let pins = request.pins;
    let expected_program = pins.program(check.stage);
    if ids.program != *expected_program {
        problems.push(format!(
            "program {} is not the pinned {expected_program}",
            ids.program
        ));
    }
    if ids.input != check.input {
        problems.push(format!(
            "input {} is not the pinned {}",
            ids.input, check.input
        ));
    }
    let harness = check.harness_pin(&pins.harness);
    if ids.harness != *harness {
        problems.push(format!(
            "harness {} is not the pinned {harness}",
            ids.harness
        ));
    }
    if ids.runtime != request.environment.runtime {
        problems.push(format!("runtime {} is not the pinned one", ids.runtime));
    }
    if ids.profile != request.environment.profile {
        problems.push(format!("profile {} is not the pinned one", ids.profile));
    }
    let command = check.command().map(|command| command.to_run(None).digest());
    if ids.command != command {
        problems.push(match &command {
            Some(command) => format!("the command run is not the pinned {command}"),
            None => "a command ran for a check of an entry".to_owned(),
        });
    }
}

/// How an attributable run missed the check's expectation (none: met): a bound the check
/// declares that it hit, its ending and exit code, its stdout, and its per-test results;
/// `Err` with the reason when its results cannot decide.
fn misses(
    check: &ProcessCheck,
    process: &ProcessFacts,
    stdout: &[u8],
    results: Option<&CapturedResults>,
    own: &[&LimitHit],
) -> Result<Vec<String>, String> {
    if let Some(oats) = check.oats() {
        return super::oats_grade::misses(&oats.expect, process, stdout);
    }
    let expectation = &check.expectation;
    let mut missed: Vec<String> = own
        .iter()
        .map(|hit| {
            format!(
                "the run exceeded the check's own {} ({}): {}",
                hit.limit().describe(),
                hit.limit().amount(hit.value()),
                hit.detail()
            )
        })
        .collect();
    if process.status == RunStatus::TimedOut {
        missed.push(format!(
            "the run did not end within the check's own timeout ({} ms)",
            process.timeout_ms
        ));
    } else if process.status != RunStatus::Exited {
        missed.push(format!(
            "the program was ended by signal {}",
            process.signal.unwrap_or(0)
        ));
    } else if process.exit_code != Some(expectation.exit_code) {
        missed.push(format!(
            "exit code {}, expected {}",
            process
                .exit_code
                .map_or_else(|| "none".to_owned(), |code| code.to_string()),
            expectation.exit_code
        ));
    }
    if let Some(expected) = &expectation.stdout_digest {
        let actual = Digest::of(stdout);
        if actual != *expected {
            missed.push(format!("stdout hashes to {actual}, expected {expected}"));
        }
    }
    // A run that did not exit has missed already; its results (if it left any) decide
    // nothing more.
    if process.status == RunStatus::Exited
        && check
            .command()
            .is_some_and(|command| command.results.is_some())
    {
        match grade_tests(check, process, results) {
            TestGrade::Met => {}
            TestGrade::Missed {
                misses,
                disagreement,
            } => {
                missed.extend(disagreement);
                missed.extend(misses.iter().map(ToString::to_string));
            }
            TestGrade::Undecided(reason) => return Err(reason),
        }
    }
    Ok(missed)
}

/// Grades a command check's per-test results: those the record holds, parsed here.
fn grade_tests(
    check: &ProcessCheck,
    process: &ProcessFacts,
    results: Option<&CapturedResults>,
) -> TestGrade {
    let parsed;
    let results = match results {
        Some(CapturedResults::Written(bytes)) => {
            parsed = TestResults::parse_junit(bytes);
            Some(&parsed)
        }
        Some(CapturedResults::Refused(reason)) => {
            return TestGrade::Undecided(format!("the results file was not read: {reason}"));
        }
        Some(CapturedResults::Absent) | None => None,
    };
    grade(
        check.stage == Stage::Base,
        process.exit_code,
        results,
        &check.expectation.tests(),
    )
}
