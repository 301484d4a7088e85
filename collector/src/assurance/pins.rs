//! The pins (`sf-repository-pins/2`): everything a collection and a judgment are bound to.
//! A record is attributable only to the pins it is filed under, and only pins equal to what
//! the Candidate was sealed for ever run.
//!
//! Version 2 names the Slice's digest, the harness, and for each stage the program that runs
//! (the stage's tree with the Slice's overlay laid over it) besides the tree's own snapshot.
//! Pins of programs run by reference (an `sf-candidate/4` Candidate) name `sf-tree/1` tree
//! digests in those fields, and say so (`treeDigests`).

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::git_object::ObjectId;
use crate::repository::{ID_RULE, RepositoryIdentity, is_valid_id, parse_repository_identity};

use super::acceptance::Stage;
use super::{AssuranceError, read_record, record_bytes, record_bytes_digest};

/// The protocol string of the pins record.
pub const PINS_PROTOCOL: &str = "sf-repository-pins/2";

/// The Slice a collection runs under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlicePins {
    /// The Slice's id; follows [`ID_RULE`].
    pub id: String,
    /// The Slice's revision (a positive safe integer).
    #[serde(deserialize_with = "canonical::positive")]
    pub revision: u64,
    /// The `sha256:` of the Slice record's canonical bytes.
    pub digest: Digest,
}

/// The Candidate a collection runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidatePins {
    /// The Candidate digest (its manifest's `sha256:`).
    pub digest: Digest,
    /// Its commit M.
    pub commit: ObjectId,
    /// The snapshot digest of its files.
    pub snapshot: Digest,
    /// The snapshot digest of the program of every stage-candidate run: its files with the
    /// Slice's overlay laid over them.
    pub program: Digest,
}

/// The base B of the Candidate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasePins {
    /// The base commit B.
    pub commit: ObjectId,
    /// B's tree.
    pub tree: ObjectId,
    /// The snapshot digest of B's files.
    pub snapshot: Digest,
    /// The snapshot digest of the program of every stage-base run: B's files with the
    /// overlay laid over them.
    pub program: Digest,
}

/// The repository-scope pins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct RepositoryPins {
    /// The repository (the store) the Candidate is sealed in; its Product is the fence's.
    pub repository: RepositoryIdentity,
    /// The Slice the Candidate was sealed for.
    pub slice: SlicePins,
    /// The Candidate whose evidence is collected.
    pub candidate: CandidatePins,
    /// The base the Candidate was sealed on.
    pub base: BasePins,
    /// The snapshot digest of the harness every run gets.
    pub harness: Digest,
    /// The `sha256:` of the frozen acceptance record's canonical bytes.
    pub acceptance: Digest,
    /// The `sha256:` of the frozen recipe record's canonical bytes.
    pub recipe: Digest,
    /// The `sha256:` of the frozen environment record's canonical bytes.
    pub environment: Digest,
    /// Whether the snapshot and program digests are `sf-tree/1` tree digests (an
    /// `sf-candidate/4` Candidate's programs, run by reference) rather than snapshot digests.
    /// Written (`"treeDigests": true`) only when true, so that pins of programs run by value
    /// keep their bytes and digest.
    #[serde(
        rename = "treeDigests",
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "only_true"
    )]
    pub tree_identities: bool,
}

/// `treeDigests` is written only when true: `false` is not its canonical form.
fn only_true<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    match bool::deserialize(deserializer)? {
        true => Ok(true),
        false => Err(serde::de::Error::custom(
            "is written only when true (absent otherwise)",
        )),
    }
}

canonical::literal_fields!(RepositoryPins { "protocol": PINS_PROTOCOL });

impl RepositoryPins {
    /// The Product: the repository's.
    pub fn product(&self) -> &str {
        &self.repository.product_id
    }

    /// The program snapshot digest of a run of `stage`.
    pub fn program(&self, stage: Stage) -> &Digest {
        match stage {
            Stage::Base => &self.base.program,
            Stage::Candidate => &self.candidate.program,
        }
    }

    /// Checks the repository identity's own rules and the Slice's.
    pub fn validate(&self) -> Result<(), AssuranceError> {
        parse_repository_identity(&self.repository.to_canonical_bytes())
            .map_err(|error| AssuranceError::invalid("pins.repository", error.to_string()))?;
        if !is_valid_id(&self.slice.id) {
            return Err(AssuranceError::invalid("pins.slice.id", ID_RULE));
        }
        if self.slice.revision == 0 || self.slice.revision > canonical::MAX_SAFE_INTEGER as u64 {
            return Err(AssuranceError::invalid(
                "pins.slice.revision",
                "is a positive safe integer",
            ));
        }
        Ok(())
    }

    /// The record as a JSON value.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("pins hold only strings and integers")
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        record_bytes(self, "pins")
    }

    /// The `sha256:` of the canonical bytes: what Evidence records are filed under.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_bytes_digest(self, "pins")
    }

    /// Parses pins strictly and validates them.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let pins: Self = read_record(bytes, "pins")?;
        pins.validate()?;
        Ok(pins)
    }
}
