//! The pins (`sf-repository-pins/1`): everything a collection and a judgment are bound to.
//! A record is attributable only to the pins it is filed under, and only pins equal to what
//! the Candidate was sealed for ever run.

use crate::canonical::{self, Digest, Value, object};
use crate::git_object::ObjectId;
use crate::repository::record::{FieldError, Fields};
use crate::repository::{
    ID_RULE, RepositoryIdentity, SealedCandidate, Slice, is_valid_id, parse_repository_identity,
};

use super::acceptance::Stage;
use super::{AssuranceError, record_digest, record_from_json};

/// The protocol string of the pins record.
pub const PINS_PROTOCOL: &str = "sf-repository-pins/1";

/// The Candidate a collection runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidatePins {
    /// The Candidate digest (its manifest's `sha256:`).
    pub digest: Digest,
    /// Its commit M.
    pub commit: ObjectId,
    /// The snapshot digest of its files: the program of every stage-candidate run.
    pub snapshot: Digest,
}

/// The base B of the Candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BasePins {
    pub commit: ObjectId,
    pub tree: ObjectId,
    /// The snapshot digest of B's files: the program of every stage-base run.
    pub snapshot: Digest,
}

/// The repository-scope pins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryPins {
    /// The repository (the store) the Candidate is sealed in; its Product is the fence's.
    pub repository: RepositoryIdentity,
    pub slice: Slice,
    pub candidate: CandidatePins,
    pub base: BasePins,
    /// Digests of the frozen acceptance, recipe and environment records.
    pub acceptance: Digest,
    pub recipe: Digest,
    pub environment: Digest,
}

impl RepositoryPins {
    /// The pins of `sealed`, taken from its manifest, with `base_snapshot` the snapshot digest
    /// of its base's files (see `collector::materialise_base`).
    pub fn for_candidate(sealed: &SealedCandidate, base_snapshot: Digest) -> Self {
        let manifest = &sealed.manifest;
        Self {
            repository: manifest.repository.clone(),
            slice: manifest.slice.clone(),
            candidate: CandidatePins {
                digest: sealed.digest.clone(),
                commit: manifest.commit,
                snapshot: sealed.snapshot_digest.clone(),
            },
            base: BasePins {
                commit: manifest.base_commit,
                tree: manifest.base_tree,
                snapshot: base_snapshot,
            },
            acceptance: manifest.acceptance.clone(),
            recipe: manifest.recipe.clone(),
            environment: manifest.environment.clone(),
        }
    }

    /// The Product: the repository's.
    pub fn product(&self) -> &str {
        &self.repository.product_id
    }

    /// The program snapshot digest of a run of `stage`.
    pub fn program(&self, stage: Stage) -> &Digest {
        match stage {
            Stage::Base => &self.base.snapshot,
            Stage::Candidate => &self.candidate.snapshot,
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
                ]),
            ),
            (
                "candidate",
                object([
                    ("digest", self.candidate.digest.to_string().into()),
                    ("commit", self.candidate.commit.to_hex().into()),
                    ("snapshot", self.candidate.snapshot.to_string().into()),
                ]),
            ),
            (
                "base",
                object([
                    ("commit", self.base.commit.to_hex().into()),
                    ("tree", self.base.tree.to_hex().into()),
                    ("snapshot", self.base.snapshot.to_string().into()),
                ]),
            ),
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
            &["id", "revision"],
        )?;
        let candidate = Fields::exact(
            fields.value("candidate"),
            &fields.path("candidate"),
            &["digest", "commit", "snapshot"],
        )?;
        let base = Fields::exact(
            fields.value("base"),
            &fields.path("base"),
            &["commit", "tree", "snapshot"],
        )?;
        Ok(Self {
            repository,
            slice: Slice {
                id: slice.string("id")?.to_owned(),
                revision: slice.positive("revision")?,
            },
            candidate: CandidatePins {
                digest: candidate.digest("digest")?,
                commit: candidate.object_id("commit")?,
                snapshot: candidate.digest("snapshot")?,
            },
            base: BasePins {
                commit: base.object_id("commit")?,
                tree: base.object_id("tree")?,
                snapshot: base.digest("snapshot")?,
            },
            acceptance: fields.digest("acceptance")?,
            recipe: fields.digest("recipe")?,
            environment: fields.digest("environment")?,
        })
    }
}
