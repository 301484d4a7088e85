//! The recipe (`sf-repository-recipe/2`): how a Slice's checks are run. It pins the collector
//! closure (so records are never attributed to other code), the timeout and output limit of
//! every run, the runtime executable, and the enforcement facts every run must report (those
//! the executor's profile states when the Slice is frozen).
//!
//! Version 1 had no enforcement facts (it implied a fully enforced Landlock ruleset, which the
//! collector and the judge checked by name). A recipe of version 1 is refused with the
//! remedy: it pins a collector closure no later sf has anyway, so its Slice must be frozen
//! again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::contracts::Enforcement;
use crate::contracts::executor::{MAX_TIMEOUT, RunBounds};

use super::{AssuranceError, invalid_field, record_bytes, record_bytes_digest};

/// The protocol string of the recipe record.
pub const RECIPE_PROTOCOL: &str = "sf-repository-recipe/2";
/// The protocol string of recipes frozen by earlier sf versions; refused.
pub const RECIPE_PROTOCOL_V1: &str = "sf-repository-recipe/1";
/// The largest output limit a recipe may set, per stream (8 MiB): two full streams and the
/// facts stay inside one Evidence record.
pub const MAX_OUTPUT_LIMIT: u64 = 8 * 1024 * 1024;

/// How a Slice's checks are run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
pub struct Recipe {
    /// The collector closure the records must be attributed to (`collector.closure`).
    #[serde(rename = "collector", with = "collector")]
    pub collector_closure: Digest,
    /// The timeout of each run, in milliseconds: 1 to 3,600,000.
    #[serde(deserialize_with = "canonical::positive")]
    pub timeout_ms: u64,
    /// The limit of stdout and of stderr, each, in bytes: 1 to 8 MiB.
    #[serde(deserialize_with = "canonical::positive")]
    pub output_limit: u64,
    /// The absolute path of the runtime executable (`/bin/sh`, `/usr/bin/python3`, …) as the
    /// executor is configured with it.
    pub runtime: String,
    /// The enforcement facts every run must report exactly: a run that reports another
    /// status for one of them, or none, is not attributable.
    pub enforcement: Enforcement,
}

impl Recipe {
    /// Checks the bounds and the runtime path.
    pub fn validate(&self) -> Result<(), AssuranceError> {
        if self.timeout_ms == 0 || self.timeout_ms > MAX_TIMEOUT.as_millis() as u64 {
            return Err(AssuranceError::invalid(
                "recipe.timeoutMs",
                "is 1 to 3600000",
            ));
        }
        if self.output_limit == 0 || self.output_limit > MAX_OUTPUT_LIMIT {
            return Err(AssuranceError::invalid(
                "recipe.outputLimit",
                "is 1 to 8388608 bytes",
            ));
        }
        let path = Path::new(&self.runtime);
        if !path.is_absolute()
            || self.runtime.len() > 1024
            || self.runtime.contains('\0')
            || path.components().any(|c| {
                matches!(
                    c,
                    std::path::Component::ParentDir | std::path::Component::CurDir
                )
            })
        {
            return Err(AssuranceError::invalid(
                "recipe.runtime",
                "is an absolute path without . or .. segments, at most 1024 bytes",
            ));
        }
        Ok(())
    }

    /// The bounds of a run with timeout `timeout_ms` (the effective one, at most the
    /// recipe's) under this recipe's output limit.
    pub fn bounds(&self, timeout_ms: u64) -> RunBounds {
        RunBounds::new(
            std::time::Duration::from_millis(timeout_ms),
            self.output_limit,
        )
    }

    /// The record as a JSON value.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a recipe holds only strings and integers")
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        record_bytes(self, "recipe")
    }

    /// The `sha256:` of the canonical bytes.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_bytes_digest(self, "recipe")
    }

    /// Parses a recipe strictly and validates it. A recipe of version 1 is refused with its
    /// remedy.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let value = canonical::parse(bytes)
            .map_err(|error| AssuranceError::invalid("recipe", error.to_string()))?;
        if let Value::Object(map) = &value
            && map.get("protocol") == Some(&Value::from(RECIPE_PROTOCOL_V1))
        {
            return Err(AssuranceError::invalid(
                "recipe.protocol",
                "is sf-repository-recipe/1, written by an earlier sf (whose collector closure \
                 no sf since has); freeze the Slice again as a new revision",
            ));
        }
        let recipe: Self = canonical::from_value(&value, "recipe").map_err(invalid_field)?;
        recipe.validate()?;
        Ok(recipe)
    }
}

canonical::literal_fields!(Recipe { "protocol": RECIPE_PROTOCOL });

/// `collector`: `{"closure": <digest>}`.
mod collector {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::canonical::Digest;

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Collector {
        closure: Digest,
    }

    pub(super) fn serialize<S: Serializer>(
        closure: &Digest,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        Collector {
            closure: closure.clone(),
        }
        .serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Digest, D::Error> {
        Collector::deserialize(deserializer).map(|collector| collector.closure)
    }
}
