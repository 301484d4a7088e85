//! The prepared intent: what a caller persists and hands back to invoke and inspect, written
//! as `{protocol, digest, intent, payload}`, `protocol` being the payload's.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, FieldError, Value};
use crate::git_object::ObjectId;

use super::super::error::RepositoryError;
use super::payload::EffectPayload;

/// A retained intent: persist it and hand it to the effect's invoke and inspect calls.
/// Written as `{protocol, digest, intent, payload}`, `protocol` being the payload's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct Prepared<P> {
    /// The payload digest: `sha256:` of its canonical bytes.
    pub digest: Digest,
    /// The intent commit I.
    pub intent: ObjectId,
    /// The payload the intent retains, as `payload.json` in I's tree.
    pub payload: P,
}

impl<P: EffectPayload> Prepared<P>
where
    Self: Serialize + DeserializeOwned,
{
    /// The record as JSON: `{protocol, digest, intent, payload}`.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a prepared record holds only strings and integers")
    }

    /// Parses a persisted record strictly and checks that its digest is its payload's.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RepositoryError> {
        let prepared: Self = canonical::from_slice(bytes, "prepared")
            .map_err(|error: FieldError| RepositoryError::invalid(error.field, error.rule))?;
        prepared.validate()?;
        Ok(prepared)
    }
}

impl<P: EffectPayload> Prepared<P> {
    /// The payload's canonical bytes, when `digest` is their sha256: `invalid-input` naming
    /// `prepared.digest` otherwise.
    pub(in crate::repository) fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        let bytes = self.payload.validate()?;
        if Digest::of(&bytes) != self.digest {
            return Err(RepositoryError::invalid(
                "prepared.digest",
                "must be the sha256 of the payload's canonical bytes",
            ));
        }
        Ok(bytes)
    }
}
