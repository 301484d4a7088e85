//! The environment record (`sf-confined-environment/1`): the runtime and confinement profile
//! a Slice's checks run under, the platform and the sf version. A Candidate is sealed for its
//! digest; the collector compares the executor's environment with it before every run.

use crate::canonical::{self, Digest, Value, object};
use crate::contracts::{Executor, ExecutorError};
use crate::repository::record::{FieldError, Fields};

use super::{AssuranceError, record_digest, record_from_json};

/// The protocol string of the environment record.
pub const ENVIRONMENT_PROTOCOL: &str = "sf-confined-environment/1";

/// The environment of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvironmentRecord {
    /// The executor's runtime digest (executable bytes and readable paths).
    pub runtime: Digest,
    /// The executor's confinement profile digest.
    pub profile: Digest,
    /// `<os>/<arch>`, as Rust names them (`linux/x86_64`).
    pub platform: String,
    /// The sf version.
    pub sf: String,
}

/// The platform string of this build.
pub fn platform() -> String {
    format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// The environment `executor` provides now, on this platform, with this sf.
pub fn current_environment(executor: &dyn Executor) -> Result<EnvironmentRecord, ExecutorError> {
    Ok(EnvironmentRecord {
        runtime: executor.describe_runtime()?.digest,
        profile: executor.profile()?.digest,
        platform: platform(),
        sf: crate::SF_VERSION.to_owned(),
    })
}

impl EnvironmentRecord {
    /// Checks the platform and version texts (1 to 64 printable ASCII characters).
    pub fn validate(&self) -> Result<(), AssuranceError> {
        for (field, text) in [
            ("environment.platform", &self.platform),
            ("environment.sf", &self.sf),
        ] {
            if text.is_empty()
                || text.len() > 64
                || !text.bytes().all(|b| (0x21..0x7f).contains(&b))
            {
                return Err(AssuranceError::invalid(
                    field,
                    "is 1 to 64 printable ASCII characters without spaces",
                ));
            }
        }
        Ok(())
    }

    /// The record as a JSON value.
    pub fn to_value(&self) -> Value {
        object([
            ("protocol", ENVIRONMENT_PROTOCOL.into()),
            ("runtime", self.runtime.to_string().into()),
            ("profile", self.profile.to_string().into()),
            ("platform", self.platform.as_str().into()),
            ("sf", self.sf.as_str().into()),
        ])
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        canonical::encode(&self.to_value())
            .map_err(|error| AssuranceError::invalid("environment", error.to_string()))
    }

    /// The `sha256:` of the canonical bytes.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_digest(&self.to_value(), "environment")
    }

    /// Parses an environment record strictly and validates it.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let environment = record_from_json(bytes, "environment", Self::from_value)?;
        environment.validate()?;
        Ok(environment)
    }

    pub(crate) fn from_value(value: &Value) -> Result<Self, FieldError> {
        let fields = Fields::exact(
            value,
            "environment",
            &["protocol", "runtime", "profile", "platform", "sf"],
        )?;
        fields.literal("protocol", ENVIRONMENT_PROTOCOL)?;
        Ok(Self {
            runtime: fields.digest("runtime")?,
            profile: fields.digest("profile")?,
            platform: fields.string("platform")?.to_owned(),
            sf: fields.string("sf")?.to_owned(),
        })
    }
}
