//! The pins (`sf-repository-pins/2`): everything a collection and a judgment are bound to.
//! A record is attributable only to the pins it is filed under, and only pins equal to what
//! the Candidate was sealed for ever run.
//!
//! Version 2 names the Slice's digest, the harness, and for each stage the program that runs
//! (the stage's tree with the Slice's overlay laid over it) besides the tree's own snapshot.

use crate::canonical::{self, Digest, Value, object};
use crate::git_object::ObjectId;
use crate::repository::record::{FieldError, Fields};
use crate::repository::{ID_RULE, RepositoryIdentity, is_valid_id, parse_repository_identity};

use super::acceptance::Stage;
use super::{AssuranceError, record_digest, record_from_json};

/// The protocol string of the pins record.
pub const PINS_PROTOCOL: &str = "sf-repository-pins/2";

/// The Slice a collection runs under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlicePins {
    pub id: String,
    pub revision: u64,
    /// The Slice record's digest.
    pub digest: Digest,
}

/// The Candidate a collection runs.
#[derive(Clone, Debug, PartialEq, Eq)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasePins {
    pub commit: ObjectId,
    pub tree: ObjectId,
    /// The snapshot digest of B's files.
    pub snapshot: Digest,
    /// The snapshot digest of the program of every stage-base run: B's files with the
    /// overlay laid over them.
    pub program: Digest,
}

/// The repository-scope pins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryPins {
    /// The repository (the store) the Candidate is sealed in; its Product is the fence's.
    pub repository: RepositoryIdentity,
    pub slice: SlicePins,
    pub candidate: CandidatePins,
    pub base: BasePins,
    /// The snapshot digest of the harness every run gets.
    pub harness: Digest,
    /// Digests of the frozen acceptance, recipe and environment records.
    pub acceptance: Digest,
    pub recipe: Digest,
    pub environment: Digest,
}

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
        object([
            ("protocol", PINS_PROTOCOL.into()),
            ("repository", self.repository.to_value()),
            (
                "slice",
                object([
                    ("id", self.slice.id.as_str().into()),
                    ("revision", Value::Integer(self.slice.revision as i64)),
                    ("digest", self.slice.digest.to_string().into()),
                ]),
            ),
            (
                "candidate",
                object([
                    ("digest", self.candidate.digest.to_string().into()),
                    ("commit", self.candidate.commit.to_hex().into()),
                    ("snapshot", self.candidate.snapshot.to_string().into()),
                    ("program", self.candidate.program.to_string().into()),
                ]),
            ),
            (
                "base",
                object([
                    ("commit", self.base.commit.to_hex().into()),
                    ("tree", self.base.tree.to_hex().into()),
                    ("snapshot", self.base.snapshot.to_string().into()),
                    ("program", self.base.program.to_string().into()),
                ]),
            ),
            ("harness", self.harness.to_string().into()),
            ("acceptance", self.acceptance.to_string().into()),
            ("recipe", self.recipe.to_string().into()),
            ("environment", self.environment.to_string().into()),
        ])
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        canonical::encode(&self.to_value())
            .map_err(|error| AssuranceError::invalid("pins", error.to_string()))
    }

    /// The `sha256:` of the canonical bytes: what Evidence records are filed under.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_digest(&self.to_value(), "pins")
    }

    /// Parses pins strictly and validates them.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let pins = record_from_json(bytes, "pins", Self::from_value)?;
        pins.validate()?;
        Ok(pins)
    }

    pub(crate) fn from_value(value: &Value) -> Result<Self, FieldError> {
        let fields = Fields::exact(
            value,
            "pins",
            &[
                "protocol",
                "repository",
                "slice",
                "candidate",
                "base",
                "harness",
                "acceptance",
                "recipe",
                "environment",
            ],
        )?;
        fields.literal("protocol", PINS_PROTOCOL)?;
        let repository =
            RepositoryIdentity::from_value(fields.value("repository"), &fields.path("repository"))?;
        let slice = Fields::exact(
            fields.value("slice"),
            &fields.path("slice"),
            &["id", "revision", "digest"],
        )?;
        let candidate = Fields::exact(
            fields.value("candidate"),
            &fields.path("candidate"),
            &["digest", "commit", "snapshot", "program"],
        )?;
        let base = Fields::exact(
            fields.value("base"),
            &fields.path("base"),
            &["commit", "tree", "snapshot", "program"],
        )?;
        Ok(Self {
            repository,
            slice: SlicePins {
                id: slice.string("id")?.to_owned(),
                revision: slice.positive("revision")?,
                digest: slice.digest("digest")?,
            },
            candidate: CandidatePins {
                digest: candidate.digest("digest")?,
                commit: candidate.object_id("commit")?,
                snapshot: candidate.digest("snapshot")?,
                program: candidate.digest("program")?,
            },
            base: BasePins {
                commit: base.object_id("commit")?,
                tree: base.object_id("tree")?,
                snapshot: base.digest("snapshot")?,
                program: base.digest("program")?,
            },
            harness: fields.digest("harness")?,
            acceptance: fields.digest("acceptance")?,
            recipe: fields.digest("recipe")?,
            environment: fields.digest("environment")?,
        })
    }
}
