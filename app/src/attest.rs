//! Attesting a landing: when `[attest] key` is configured, a Candidate that lands (integrated,
//! or delivered) gets a signed in-toto attestation of its commit M, kept in the owned
//! repository under `refs/sf/attestations/<M>` and pushed with M in the delivery's atomic
//! push. It is made only from the judge's proof ([`Verified`]), so only a Verified Candidate
//! is ever attested, and written once: a commit's attestation is never replaced.

use std::ops::ControlFlow;

use sf_attest::statement::{
    CheckOutcome, CheckSummary, ExecutorSummary, Landing, ReviewSummary, ReviewsSummary,
    RunSummary, SliceSummary, Times, VerdictSummary,
};
use sf_attest::{SigningKey, Statement};
use sf_host::assurance::{Check, Verdict};
use sf_host::canonical::{self, Digest};
use sf_host::contracts::EvidenceStore;
use sf_host::git_object::ObjectId;
use sf_host::judging::Verified;
use sf_host::repository::{StoredAttestation, TreeContents};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::evidence::observation;
use crate::landing::land_error;
use crate::loaded::Loaded;

/// A landing's attestation as kept.
#[derive(Clone, Debug)]
pub struct Attested {
    /// The attested commit M.
    pub commit: ObjectId,
    /// The ref it is kept (and delivered) under.
    pub name: String,
    /// The blob holding the envelope.
    pub id: ObjectId,
    /// Whether this landing wrote it (`false`: an earlier one did, and it stands).
    pub created: bool,
}

/// The configured signing key, read and checked; `None` when landings are not attested.
/// Read before anything starts, so that a key sf cannot use refuses the landing whole.
pub(crate) fn signing_key(backends: &Backends) -> Result<Option<SigningKey>, AppError> {
    let config = backends.config()?;
    config
        .attest_key()
        .map(|path| SigningKey::read(path).map_err(|error| attest_error(&error)))
        .transpose()
}

/// Attests the loaded Candidate whose Verified Verdict has digest `verdict` (what its
/// integration names), when a key is configured: the judge makes the proof again from the
/// stored evidence first.
pub(crate) fn attest_verdict(
    backends: &Backends,
    loaded: &Loaded,
    verdict: &Digest,
) -> Result<Option<Attested>, AppError> {
    if backends.config()?.attest_key().is_none() {
        return Ok(None);
    }
    let proof = loaded
        .judging(backends)?
        .verified_by(&loaded.sealed.digest, verdict)
        .map_err(|error| land_error("the attestation's Verdict", error))?;
    attest(backends, loaded, &proof)
}

/// Attests the loaded Candidate, admitted by `proof`, when a key is configured; keeps the
/// attestation in the owned repository (the one kept already, if an earlier landing made
/// one). `None` when landings are not attested.
pub(crate) fn attest(
    backends: &Backends,
    loaded: &Loaded,
    proof: &Verified,
) -> Result<Option<Attested>, AppError> {
    let Some(key) = signing_key(backends)? else {
        return Ok(None);
    };
    let manifest = &loaded.sealed.manifest;
    if let Some(kept) = loaded
        .repository
        .attestation(&manifest.commit)
        .map_err(|error| repository_error("the commit's attestation", &error))?
    {
        return Ok(Some(attested(manifest.commit, kept)));
    }
    let verdict = proof.verdict().ok_or_else(|| {
        AppError::new(
            "invalid-input",
            "the landing's proof carries no Verdict: nothing is attested",
        )
    })?;
    let store = loaded.judging(backends)?.store;
    let landing = landing(loaded, verdict, proof.digest(), store.as_ref())?;
    let sf_tree = tree_digest(loaded)?;
    let statement = Statement::new(manifest.commit, manifest.tree, &sf_tree, landing);
    let bytes = sf_attest::sign(&statement, &key).map_err(|error| attest_error(&error))?;
    let kept = loaded
        .repository
        .record_attestation(&manifest.commit, bytes)
        .map_err(|error| repository_error("keeping the commit's attestation", &error))?;
    Ok(Some(attested(manifest.commit, kept)))
}

fn attested(commit: ObjectId, kept: StoredAttestation) -> Attested {
    Attested {
        commit,
        name: sf_host::repository::attestation_ref(&commit)
            .as_str()
            .to_owned(),
        id: kept.id,
        created: kept.created,
    }
}

/// An attestation's error as a use case's.
pub(crate) fn attest_error(error: &sf_attest::AttestError) -> AppError {
    AppError::new(error.code(), error.to_string())
}

/// M's `sf-tree/1` digest: the one its manifest names (`sf-candidate/4`), else computed from
/// its tree as stored.
fn tree_digest(loaded: &Loaded) -> Result<Digest, AppError> {
    let manifest = &loaded.sealed.manifest;
    if let TreeContents::Trees { candidate, .. } = &manifest.contents {
        return Ok(candidate.clone());
    }
    let streamed = loaded
        .repository
        .stream_files::<()>(&manifest.commit, |_, _, _, _| ControlFlow::Continue(()))
        .map_err(|error| repository_error("the commit's tree", &error))?;
    match streamed {
        ControlFlow::Continue(digest) => Ok(digest),
        ControlFlow::Break(()) => Err(AppError::new(
            "corrupt",
            "the commit's tree could not be digested",
        )),
    }
}

/// sf's predicate for the loaded Candidate judged `verdict` (digest `digest`), each counted
/// run's facts read from its Evidence record in `store`.
fn landing(
    loaded: &Loaded,
    verdict: &Verdict,
    digest: &Digest,
    store: &dyn EvidenceStore,
) -> Result<Landing, AppError> {
    let frozen = &loaded.slice.frozen;
    let manifest = &loaded.sealed.manifest;
    let checks = frozen
        .acceptance
        .checks
        .iter()
        .map(check_summary)
        .collect::<Result<_, _>>()?;
    let mut runs = Vec::new();
    let mut times = Times {
        runs_started: None,
        runs_ended: None,
    };
    for check in &verdict.checks {
        let Some(record) = &check.record else {
            continue;
        };
        let read = observation(store, record).map_err(|why| {
            AppError::new(
                "corrupt",
                format!(
                    "the Evidence record {record} of check {}: {why}",
                    check.check
                ),
            )
        })?;
        let facts = read.facts;
        let identities = facts.identities.ok_or_else(|| {
            AppError::new(
                "corrupt",
                format!(
                    "the Evidence record {record} of check {} names no identities, yet the \
                     Verdict counts it",
                    check.check
                ),
            )
        })?;
        times.runs_started = min_of(times.runs_started, facts.started_at);
        times.runs_ended = facts.ended_at.max(times.runs_ended);
        runs.push(RunSummary {
            check: check.check.clone(),
            record: record.clone(),
            stage: facts.stage.as_str().to_owned(),
            program: identities.program,
            input: identities.input,
            harness: identities.harness,
            runtime: identities.runtime,
            profile: identities.profile,
            bounds: identities.bounds,
            command: identities.command,
            environment: facts.environment,
            executor: match facts.remote {
                None => ExecutorSummary {
                    kind: "local".into(),
                    action: None,
                    worker: None,
                },
                Some(remote) => ExecutorSummary {
                    kind: "remote".into(),
                    action: Some(remote.action),
                    worker: remote.worker,
                },
            },
        });
    }
    Ok(Landing {
        candidate: loaded.sealed.digest.clone(),
        product: loaded.repository.identity().product_id.clone(),
        base: manifest.base_commit,
        slice: SliceSummary {
            digest: loaded.programs.slice.clone(),
            id: frozen.record.id.clone(),
            revision: frozen.record.revision,
        },
        checks,
        verdict: VerdictSummary {
            digest: digest.clone(),
            outcome: verdict.outcome.as_str().to_owned(),
            attempt: verdict.attempt.epoch,
            reasons: verdict.reasons.clone(),
            checks: verdict
                .checks
                .iter()
                .map(|check| CheckOutcome {
                    check: check.check.clone(),
                    record: check.record.clone(),
                    met: check.met,
                })
                .collect(),
        },
        runs,
        reviews: verdict.reviews.as_ref().map(|reviews| ReviewsSummary {
            subject: reviews.subject.clone(),
            checks: reviews
                .checks
                .iter()
                .filter(|check| check.met == Some(true))
                .map(|check| ReviewSummary {
                    check: check.check.clone(),
                    approvals: check.approvals,
                    approved_by: check.approved_by.clone(),
                    records: check.records.clone(),
                })
                .collect(),
        }),
        times,
    })
}

/// The earlier of two optional times.
fn min_of(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A check of the acceptance as the predicate lists it: its kind as the acceptance writes it,
/// its stage, and the digest of its expectation (whatever the kind, read from the check's own
/// record, so a kind added later is listed the same way).
fn check_summary(check: &Check) -> Result<CheckSummary, AppError> {
    let value = canonical::to_value(check).map_err(|error| {
        AppError::new(
            "invalid-input",
            format!("check {} cannot be written: {error}", check.id()),
        )
    })?;
    let canonical::Value::Object(fields) = &value else {
        return Err(AppError::new(
            "invalid-input",
            format!("check {} is not written as an object", check.id()),
        ));
    };
    let text = |key: &str| match fields.get(key) {
        Some(canonical::Value::String(text)) => Some(text.clone()),
        _ => None,
    };
    let expectation = match fields.get("expectation") {
        Some(expectation) => Some(canonical::digest(expectation).map_err(|error| {
            AppError::new(
                "invalid-input",
                format!("check {}'s expectation: {error}", check.id()),
            )
        })?),
        None => None,
    };
    Ok(CheckSummary {
        id: check.id().to_owned(),
        kind: text("kind").unwrap_or_else(|| "process".into()),
        stage: text("stage"),
        expectation,
    })
}
