//! Repository Assurance: the frozen records a Candidate is sealed for (the Slice record and
//! the acceptance, recipe and environment it names), the pins that bind a collection to them, the observation each run is
//! recorded as, and the judge that reads only Evidence and says Verified, Failed or
//! Inconclusive.
//!
//! Every record is strict canonical JSON with a protocol string; the exact fields are in
//! `docs/formats.md`. `from_json` accepts any valid JSON holding exactly the declared fields;
//! digests are always taken over the canonical re-encoding.

pub mod acceptance;
pub mod environment;
pub mod judge;
pub mod oats_grade;
pub mod observation;
pub mod pins;
pub mod recipe;
pub mod review;
pub mod slice;
pub mod test_results;
pub mod time;
pub mod trusted;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::canonical::FieldError;
use crate::canonical::{self, Digest};

pub use acceptance::{
    ACCEPTANCE_PROTOCOL, ACCEPTANCE_PROTOCOL_V2, ACCEPTANCE_PROTOCOL_V4, Acceptance, Check,
    CheckCommand, CheckCwd, CheckEnvironment, CheckResults, CheckRun, CwdFrom, Expectation, Phase,
    ProcessCheck, ReviewCheck, Stage,
};
pub use environment::{ENVIRONMENT_PROTOCOL, EnvironmentRecord, current_environment, platform};
pub use judge::{
    CheckVerdict, JudgeRequest, Outcome, Reviews, VERDICT_PROTOCOL, VERDICT_PROTOCOL_V2, Verdict,
    grade_trial, judge,
};
pub use observation::{
    OBSERVATION_FORMAT, OBSERVATION_FORMAT_V1, OBSERVATION_FORMAT_V2, OBSERVATION_FORMAT_V3,
    OBSERVATION_FORMAT_V4, Observation, ObservationFacts, ObservationStatus, ProcessFacts,
    sanitize_problem, sanitize_problems,
};
pub use pins::{BasePins, CandidatePins, PINS_PROTOCOL, RepositoryPins, SlicePins};
pub use recipe::{RECIPE_PROTOCOL, Recipe};
pub use review::{
    Decision, REVIEW_FORMAT, REVIEW_SUBJECT_PROTOCOL, Review, ReviewRequirement, ReviewSubject,
    ReviewVerdict, Reviewer,
};
pub use slice::{
    FrozenSlice, SLICE_PROTOCOL, SliceRecord, authenticate, overlay_protection, protection_of,
};

/// Why an assurance record or request is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssuranceError {
    /// A record or request breaks a rule; the input names the field.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// The record or field at fault (`acceptance.checks[2].phase`, say).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// The evidence store failed (`unavailable`, `timeout`, …): its class is kept, so that a
    /// store that cannot be reached reads as `unavailable`, never as bad input.
    #[error("{what}: {error}")]
    Store {
        /// What was being done (`searching the evidence store`).
        what: String,
        /// The store's error.
        error: crate::contracts::EvidenceStoreError,
    },
}

impl AssuranceError {
    /// The stable kebab-case code of the error: a store's error keeps its own.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
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

/// The canonical bytes of the record `what`.
fn record_bytes<T: Serialize>(record: &T, what: &str) -> Result<Vec<u8>, AssuranceError> {
    canonical::to_canonical_bytes(record)
        .map_err(|error| AssuranceError::invalid(what, error.to_string()))
}

/// The `sha256:` of the canonical bytes of the record `what`.
fn record_bytes_digest<T: Serialize>(record: &T, what: &str) -> Result<Digest, AssuranceError> {
    record_bytes(record, what).map(|bytes| Digest::of(&bytes))
}

/// Reads the record `what` strictly from any valid JSON holding exactly its fields; errors
/// name the field (`acceptance.checks[2].phase`).
fn read_record<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, AssuranceError> {
    canonical::from_slice(bytes, what).map_err(invalid_field)
}

fn invalid_field(error: FieldError) -> AssuranceError {
    AssuranceError::invalid(error.field, error.rule)
}
