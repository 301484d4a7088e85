//! The in-toto Statement (v1) of a landed Candidate and sf's predicate (`sf-landing/1`):
//! what was verified (the commit, its Git tree and its `sf-tree/1` digest) and how (the Slice,
//! its checks, the Verdict, each run's Evidence record and the identities enforced for it,
//! the executor, the reviews counted, the collection's times). Written as canonical JSON
//! within canonical JSON's bound (1 MiB); read strictly, every field present and no other.

use serde::{Deserialize, Serialize};
use sf_contracts::canonical::{self, Digest};
use sf_contracts::git_object::ObjectId;

use crate::error::AttestError;

/// The Statement's `_type`.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of sf's landing predicate (a protocol string, like sf's records').
pub const PREDICATE_TYPE: &str = "sf-landing/1";

/// An in-toto Statement with sf's predicate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    /// [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// Exactly one subject: the landed commit.
    pub subject: Vec<Subject>,
    /// [`PREDICATE_TYPE`].
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// What sf observed.
    pub predicate: Landing,
}

/// The landed commit, named by its digests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// The commit id (hex).
    pub name: String,
    /// Its digests.
    pub digest: SubjectDigest,
}

/// The subject's digest set (in-toto's `DigestSet`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubjectDigest {
    /// The commit's Git id.
    pub git_commit: ObjectId,
    /// Its tree's Git id.
    pub git_tree: ObjectId,
    /// Its tree's `sf-tree/1` root digest, hex (no `sha256:`, as a digest set writes it).
    pub sf_tree: String,
}

/// sf's predicate: the landing of one Candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Landing {
    /// The Candidate's digest.
    pub candidate: Digest,
    /// The repository's Product.
    pub product: String,
    /// The base commit the Candidate was sealed on.
    pub base: ObjectId,
    /// The frozen Slice it was checked under.
    pub slice: SliceSummary,
    /// The Slice's checks, in acceptance order.
    pub checks: Vec<CheckSummary>,
    /// The Verdict the judge made from the evidence.
    pub verdict: VerdictSummary,
    /// Each run's Evidence record and what was enforced for it, in the Verdict's order.
    pub runs: Vec<RunSummary>,
    /// The review checks counted, for an acceptance that counts some.
    #[serde(deserialize_with = "canonical::nullable")]
    pub reviews: Option<ReviewsSummary>,
    /// When the counted runs took place.
    pub times: Times,
}

/// A Slice by its digest, id and revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceSummary {
    /// The Slice record's digest.
    pub digest: Digest,
    /// Its id.
    pub id: String,
    /// Its revision.
    pub revision: u64,
}

/// One check of the Slice's acceptance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSummary {
    /// Its id.
    pub id: String,
    /// Its kind, as the acceptance writes it (`process`, `review`, …).
    pub kind: String,
    /// The tree it runs on (`base`, `candidate`); null for a check that runs nothing.
    #[serde(deserialize_with = "canonical::nullable")]
    pub stage: Option<String>,
    /// The digest of what its run must show (the canonical JSON of its expectation); null
    /// for a check without one.
    #[serde(deserialize_with = "canonical::nullable")]
    pub expectation: Option<Digest>,
}

/// The Verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictSummary {
    /// The Verdict record's digest (what the integration and the delivery name).
    pub digest: Digest,
    /// `verified`, `failed` or `inconclusive`.
    pub outcome: String,
    /// The attempt (fence epoch) whose records were counted.
    pub attempt: u64,
    /// Why the outcome is what it is (empty for Verified).
    pub reasons: Vec<String>,
    /// Each process check's record and whether it met its expectation.
    pub checks: Vec<CheckOutcome>,
}

/// One process check as judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckOutcome {
    /// The check's id.
    pub check: String,
    /// Its one record.
    #[serde(deserialize_with = "canonical::nullable")]
    pub record: Option<Digest>,
    /// Whether its outcome met its expectation.
    #[serde(deserialize_with = "canonical::nullable")]
    pub met: Option<bool>,
}

/// One run's Evidence record and the identities the executor enforced for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSummary {
    /// The check it ran.
    pub check: String,
    /// The Evidence record's digest.
    pub record: Digest,
    /// The tree it ran on.
    pub stage: String,
    /// The program's identity (the tree that ran).
    pub program: Digest,
    /// The input's snapshot digest.
    pub input: Digest,
    /// The harness's snapshot digest.
    pub harness: Digest,
    /// The runtime's digest.
    pub runtime: Digest,
    /// The confinement profile's digest.
    pub profile: Digest,
    /// The bounds' digest.
    pub bounds: Digest,
    /// The command's digest, for a check that is a command.
    #[serde(deserialize_with = "canonical::nullable")]
    pub command: Option<Digest>,
    /// The environment record in force.
    #[serde(deserialize_with = "canonical::nullable")]
    pub environment: Option<Digest>,
    /// Where it ran.
    pub executor: ExecutorSummary,
}

/// Where a run was executed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSummary {
    /// `local`, or `remote` (a Remote Execution API cluster).
    pub kind: String,
    /// A remote run's Action digest (`HASH/SIZE`).
    #[serde(deserialize_with = "canonical::nullable")]
    pub action: Option<String>,
    /// The worker whose attestation vouched for a remote run.
    #[serde(deserialize_with = "canonical::nullable")]
    pub worker: Option<String>,
}

/// The review checks counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewsSummary {
    /// The review subject's digest (what every counted review names).
    pub subject: Digest,
    /// Each counted review check.
    pub checks: Vec<ReviewSummary>,
}

/// One review check as counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReviewSummary {
    /// The check's id.
    pub check: String,
    /// How many approvals it needs.
    pub approvals: u64,
    /// The reviewers whose approvals counted.
    pub approved_by: Vec<String>,
    /// Their review records.
    pub records: Vec<Digest>,
}

/// When the counted runs took place, in milliseconds since the epoch by the collector's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Times {
    /// The earliest start of a counted run.
    #[serde(deserialize_with = "canonical::nullable")]
    pub runs_started: Option<u64>,
    /// The latest end of a counted run.
    #[serde(deserialize_with = "canonical::nullable")]
    pub runs_ended: Option<u64>,
}

impl Statement {
    /// The Statement of `landing`, about `commit` whose tree is `tree` with `sf-tree/1`
    /// digest `sf_tree`.
    pub fn new(commit: ObjectId, tree: ObjectId, sf_tree: &Digest, landing: Landing) -> Self {
        Self {
            statement_type: STATEMENT_TYPE.into(),
            subject: vec![Subject {
                name: commit.to_hex(),
                digest: SubjectDigest {
                    git_commit: commit,
                    git_tree: tree,
                    sf_tree: sf_tree.hex(),
                },
            }],
            predicate_type: PREDICATE_TYPE.into(),
            predicate: landing,
        }
    }

    /// The canonical bytes (the DSSE payload), within canonical JSON's bound.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AttestError> {
        canonical::to_canonical_bytes(self)
            .map_err(|error| AttestError::malformed(format!("the Statement: {error}")))
    }

    /// Reads a payload: JSON of exactly this shape, of the Statement and predicate types sf
    /// writes, with one subject whose name is its commit.
    pub fn parse(bytes: &[u8]) -> Result<Self, AttestError> {
        let statement: Self = canonical::from_slice(bytes, "statement")
            .map_err(|error| AttestError::malformed(error.to_string()))?;
        if statement.statement_type != STATEMENT_TYPE {
            return Err(AttestError::malformed(format!(
                "the Statement's _type is {:?}, not {STATEMENT_TYPE:?}",
                statement.statement_type
            )));
        }
        if statement.predicate_type != PREDICATE_TYPE {
            return Err(AttestError::malformed(format!(
                "the predicateType is {:?}, not {PREDICATE_TYPE:?}",
                statement.predicate_type
            )));
        }
        match statement.subject.as_slice() {
            [subject]
                if subject.name == subject.digest.git_commit.to_hex()
                    && Digest::parse(&format!("sha256:{}", subject.digest.sf_tree)).is_some() => {}
            _ => {
                return Err(AttestError::malformed(
                    "the Statement must have exactly one subject, named by its gitCommit, with \
                     an sfTree of 64 lowercase hex digits",
                ));
            }
        }
        Ok(statement)
    }

    /// The one subject (checked by [`Statement::parse`]).
    pub fn subject(&self) -> &SubjectDigest {
        &self.subject[0].digest
    }
}
