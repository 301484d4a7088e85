//! The facts sf decided about a Candidate, read-only: the Candidate and its edits, its newest
//! Verdict under a Slice (judged from the Slice's evidence store, writing nothing), the review
//! records of the judged attempt, and its landing (every integration and delivery intent
//! retained for it, as inspect reads them). `show`, `list` and `report` present them.

use std::path::{Path, PathBuf};
use std::time::Instant;

use sf_host::assurance::review::assess;
use sf_host::assurance::{Observation, REVIEW_FORMAT, Review, Verdict};
use sf_host::canonical::Digest;
use sf_host::collector::derive;
use sf_host::contracts::EvidenceStoreExt as _;
use sf_host::git_object::ObjectId;
use sf_host::judging::Judging;
use sf_host::repository::{
    DeliveryObservation, EditedEntry, IntegrationObservation, PreparedDelivery,
    PreparedIntegration, Repository, SealedCandidate,
};
use sf_host::tree_store::collect_trees;

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::evidence::{PER_RECORD, observation};
use crate::files::new_record_file;
use crate::input::parse_digest;
use crate::slice_dir::SliceDir;

/// Everything known of one Candidate.
pub struct Facts {
    /// The Candidate, read by reference.
    pub sealed: SealedCandidate,
    /// Its edited entries, before and after.
    pub edits: Vec<EditedEntry>,
    /// The newest Verdict and the judge's view it came from (judged once, read-only), or why
    /// there is none.
    pub judged: Result<(Verdict, Judging), String>,
    /// The newest Verdict's digest, or why there is none.
    pub verdict: Result<Digest, String>,
    /// The review records of the judged attempt.
    pub reviews: Vec<ReviewRecord>,
    /// Every integration intent retained for it, as inspected now.
    pub integrations: Vec<(PreparedIntegration, IntegrationObservation)>,
    /// Every delivery intent retained for it, as inspected now.
    pub deliveries: Vec<(PreparedDelivery, DeliveryObservation)>,
    /// The signed attestation kept for its commit (`refs/sf/attestations/<commit>`): the
    /// ref's name and the blob it names; `None` when its commit was never attested.
    pub attestation: Option<(String, ObjectId)>,
}

/// A review record of the judged attempt, and whether the judge counts it.
#[derive(Clone, Debug)]
pub struct ReviewRecord {
    /// The record's id.
    pub id: Digest,
    /// The review.
    pub review: Review,
    /// Why the judge does not count it; `None` when it counts.
    pub why: Option<String>,
}

impl Facts {
    /// The landing state in a word: `delivered`, `integrated`, `unknown` (a claim with no
    /// confirmation), `prepared`, or `-` when nothing was prepared.
    pub fn landing(&self) -> &'static str {
        let integrated = |word: &str| {
            self.integrations
                .iter()
                .any(|(_, observed)| observed.invocation.as_str() == word)
        };
        let delivered = |word: &str| {
            self.deliveries
                .iter()
                .any(|(_, observed)| observed.invocation.as_str() == word)
        };
        if delivered("confirmed") {
            "delivered"
        } else if integrated("confirmed") {
            "integrated"
        } else if integrated("unknown") || delivered("unknown") {
            "unknown"
        } else if !self.integrations.is_empty() || !self.deliveries.is_empty() {
            "prepared"
        } else {
            "-"
        }
    }

    /// The newest Verdict, when there is one.
    pub fn verdict(&self) -> Option<&Verdict> {
        self.judged.as_ref().ok().map(|(verdict, _)| verdict)
    }

    /// The observation the judged evidence's record `id` holds, or `None` when it cannot be
    /// read (the Verdict's problems already say so).
    pub fn observation(&self, id: &Digest) -> Option<Observation> {
        let (_, judging) = self.judged.as_ref().ok()?;
        observation(judging.store.as_ref(), id).ok()
    }
}

/// A Candidate to show: by digest or by the id of its commit M, judged under a Slice when
/// one is given.
#[derive(Clone, Debug)]
pub struct ShowRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The Candidate's digest (`sha256:…`) or its commit's id, as given.
    pub what: String,
    /// The frozen Slice whose evidence the newest Verdict is judged from.
    pub slice: Option<PathBuf>,
}

/// The facts of the Candidate `request.what` names.
pub fn show(backends: &Backends, request: &ShowRequest) -> Result<Facts, AppError> {
    let repository = backends.open_repository(&request.identity)?;
    let slice = open_slice(request.slice.as_deref())?;
    let digest = find(&repository, &request.what)?;
    facts(backends, &repository, &digest, slice.as_ref())
}

/// The facts of every Candidate of the repository, judged under `slice` when one is given.
pub fn list(
    backends: &Backends,
    identity: &Path,
    slice: Option<&Path>,
) -> Result<Vec<Facts>, AppError> {
    let repository = backends.open_repository(identity)?;
    let slice = open_slice(slice)?;
    candidates(&repository)?
        .into_iter()
        .map(|(digest, _)| facts(backends, &repository, &digest, slice.as_ref()))
        .collect()
}

/// A report to write: of which Candidate, under which Slice, into which new file.
#[derive(Clone, Debug)]
pub struct ReportRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The Candidate's digest or its commit's id, as given.
    pub candidate: String,
    /// The frozen Slice whose evidence the Verdict is judged from.
    pub slice: PathBuf,
    /// The new file; `None` for `sf-report-<digest>.html` in the working directory.
    pub out: Option<PathBuf>,
}

/// What a report shows, and the new file it goes to.
pub struct Report {
    /// The Candidate's facts.
    pub facts: Facts,
    /// The Slice it is judged under.
    pub slice: SliceDir,
    /// The new file, absolute.
    pub out: PathBuf,
}

/// The facts a report of `request.candidate` shows; the file is checked new, not written.
pub fn report(backends: &Backends, request: &ReportRequest) -> Result<Report, AppError> {
    let repository = backends.open_repository(&request.identity)?;
    let slice = SliceDir::open(&request.slice)?;
    let digest = find(&repository, &request.candidate)?;
    let out = request
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("sf-report-{}.html", &digest.hex()[..16])));
    let out = new_record_file(Some(&out), "--out")?.unwrap_or_default();
    let facts = facts(backends, &repository, &digest, Some(&slice))?;
    Ok(Report { facts, slice, out })
}

fn open_slice(slice: Option<&Path>) -> Result<Option<SliceDir>, AppError> {
    slice.map(SliceDir::open).transpose()
}

/// Reads every fact of Candidate `digest`, writing nothing.
fn facts(
    backends: &Backends,
    repository: &Repository,
    digest: &Digest,
    slice: Option<&SliceDir>,
) -> Result<Facts, AppError> {
    let sealed = repository
        .read_by_reference(digest)
        .map_err(|error| repository_error(&format!("Candidate {digest}"), &error))?;
    let edits = repository
        .edited_entries(&sealed)
        .map_err(|error| repository_error(&format!("Candidate {digest}"), &error))?;
    let judged = match slice {
        None => Err("no --slice given".to_owned()),
        Some(slice) => judged(backends, slice, repository, &sealed),
    };
    let verdict = judged
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|(verdict, _)| verdict.digest().map_err(|error| error.to_string()));
    let reviews = judged.as_ref().map_or_else(
        |_| Vec::new(),
        |(verdict, judging)| review_records(verdict, judging),
    );
    let integrations = integrations(repository, digest)?;
    let deliveries = deliveries(backends, repository, digest)?;
    let commit = sealed.manifest.commit;
    let attestation = repository
        .attestation(&commit)
        .map_err(|error| repository_error("reading the commit's attestation", &error))?
        .map(|kept| {
            let name = sf_host::repository::attestation_ref(&commit);
            (name.as_str().to_owned(), kept.id)
        });
    Ok(Facts {
        sealed,
        edits,
        judged,
        verdict,
        reviews,
        integrations,
        deliveries,
        attestation,
    })
}

/// Every integration intent retained for Candidate `digest`, inspected.
fn integrations(
    repository: &Repository,
    digest: &Digest,
) -> Result<Vec<(PreparedIntegration, IntegrationObservation)>, AppError> {
    repository
        .retained_intents()
        .map_err(|error| repository_error("reading the integration intents", &error))?
        .into_iter()
        .filter(|intent| intent.payload.candidate == *digest)
        .map(|intent| {
            let observed = repository
                .inspect_integration(&intent)
                .map_err(|error| repository_error("inspecting an integration", &error))?;
            Ok((intent, observed))
        })
        .collect()
}

/// Every delivery intent retained for Candidate `digest`, inspected (the remote is reached
/// only when there is one).
fn deliveries(
    backends: &Backends,
    repository: &Repository,
    digest: &Digest,
) -> Result<Vec<(PreparedDelivery, DeliveryObservation)>, AppError> {
    let deliveries: Vec<_> = repository
        .retained_deliveries()
        .map_err(|error| repository_error("reading the delivery intents", &error))?
        .into_iter()
        .filter(|delivery| delivery.payload.candidate == *digest)
        .collect();
    if deliveries.is_empty() {
        return Ok(Vec::new());
    }
    let remote = backends.remote()?;
    deliveries
        .into_iter()
        .map(|delivery| {
            let observed = repository
                .inspect_delivery(&delivery, &remote)
                .map_err(|error| repository_error("inspecting a delivery", &error))?;
            Ok((delivery, observed))
        })
        .collect()
}

/// The newest Verdict of the Candidate under `slice` and the judge's view it came from, or
/// why there is none; read-only.
fn judged(
    backends: &Backends,
    slice: &SliceDir,
    repository: &Repository,
    sealed: &SealedCandidate,
) -> Result<(Verdict, Judging), String> {
    // The programs are named (from the repository), never run: no tree is materialised.
    let trees = collect_trees(repository, sealed, &slice.frozen, None)
        .map_err(|error| error.to_string())?;
    let programs = derive(&slice.frozen, sealed, &trees)
        .map_err(|_| "not sealed for this Slice".to_owned())?;
    let store = slice
        .existing_evidence_store(backends)
        .map_err(|error| error.message)?;
    let judging = Judging {
        slice: slice.frozen.clone(),
        pins: programs.pins.clone(),
        store,
    };
    let verdict = judging.verdict(None).map_err(|error| error.to_string())?;
    Ok((verdict, judging))
}

/// Every review record of the judged attempt, in the store's order, each with whether the
/// judge counts it and, when not, why: what a reviewer checks after a review.
fn review_records(verdict: &Verdict, judging: &Judging) -> Vec<ReviewRecord> {
    let Some(reviews) = &verdict.reviews else {
        return Vec::new();
    };
    let deadline = Instant::now() + PER_RECORD;
    let Ok(ids) = judging.store.find(&verdict.pins, deadline) else {
        return Vec::new();
    };
    let acceptance = &judging.slice.acceptance;
    ids.into_iter()
        .filter_map(|id| {
            let record = judging.store.get_verified(&id, deadline).ok()?;
            if record.format() != REVIEW_FORMAT || record.attempt() != &verdict.attempt {
                return None;
            }
            let review = Review::from_payload(record.payload()).ok()?;
            let why = match acceptance
                .counted_reviews()
                .find(|(check, _)| *check == review.check)
            {
                None => Some(format!("check {:?} is not a review check", review.check)),
                Some((check, requirement)) => assess(
                    &review,
                    check,
                    requirement,
                    &reviews.subject,
                    &reviews.subject_record.candidate,
                ),
            };
            Some(ReviewRecord { id, review, why })
        })
        .collect()
}

/// The Candidate `what` names: a digest, or the id of a Candidate's commit M.
fn find(repository: &Repository, what: &str) -> Result<Digest, AppError> {
    if what.starts_with("sha256:") {
        return parse_digest(what, "CANDIDATE_OR_COMMIT");
    }
    let commit = ObjectId::parse_hex(what).ok_or_else(|| {
        AppError::new(
            "usage",
            format!(
                "{what:?}: names neither a Candidate digest (sha256: and 64 hex digits) nor a \
                 commit id (40 hex digits)"
            ),
        )
    })?;
    for (digest, _) in candidates(repository)? {
        let sealed = repository
            .read_by_reference(&digest)
            .map_err(|error| repository_error(&format!("Candidate {digest}"), &error))?;
        if sealed.manifest.commit == commit {
            return Ok(digest);
        }
    }
    Err(AppError::new(
        "missing",
        format!(
            "commit {what}: no Candidate of repository {} has it as its commit; `sf list` \
             lists them",
            repository.identity().path
        ),
    ))
}

fn candidates(repository: &Repository) -> Result<Vec<(Digest, ObjectId)>, AppError> {
    repository
        .candidates()
        .map_err(|error| repository_error("listing the Candidates", &error))
}
