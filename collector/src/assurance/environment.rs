//! The environment record (`sf-confined-environment/1`): the runtime and confinement profile
//! a Slice's checks run under, the platform and the sf version. A Candidate is sealed for its
//! digest; the collector compares the executor's environment with it before every run.

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::contracts::{Executor, ExecutorError};

use super::{AssuranceError, read_record, record_bytes, record_bytes_digest};

/// The protocol string of the environment record.
pub const ENVIRONMENT_PROTOCOL: &str = "sf-confined-environment/1";

/// The environment of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
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
        canonical::to_value(self).expect("an environment record holds only strings")
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        record_bytes(self, "environment")
    }

    /// The `sha256:` of the canonical bytes.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_bytes_digest(self, "environment")
    }

    /// Parses an environment record strictly and validates it.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let environment: Self = read_record(bytes, "environment")?;
        environment.validate()?;
        Ok(environment)
    }
}

canonical::literal_fields!(EnvironmentRecord { "protocol": ENVIRONMENT_PROTOCOL });
