//! What a worker offers: its runtime and its confinement profile, as one blob it puts in the
//! CAS and whose digest an `[executor] type = "reapi"` section names (`worker = "HASH/SIZE"`).
//! The Executor reads it from there, checks it against that digest, and requires exactly this
//! runtime and profile of every run it sends (the Action's platform). A plugin-ABI message:
//!
//! ```text
//! header {"protocol":"sf-worker-description/1","runtime":0,"profile":1}
//! section 0: the runtime as the plugin ABI's describe_runtime answer
//! section 1: the profile as the plugin ABI's profile answer
//! ```

use serde::{Deserialize, Serialize};
use sf_contracts::canonical::Digest as SfDigest;
use sf_contracts::{ProfileDescription, RuntimeDescription};
use sf_plugin_abi::executor_protocol as wire;
use sf_plugin_abi::message::{self, MessageBuilder};

use crate::action::Target;

/// The protocol string of a worker description.
pub const PROTOCOL: &str = "sf-worker-description/1";

/// A worker's runtime and confinement profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerDescription {
    /// The runtime, as the worker's sandbox describes it.
    pub runtime: RuntimeDescription,
    /// The confinement profile, as the worker's sandbox describes it.
    pub profile: ProfileDescription,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    protocol: String,
    runtime: usize,
    profile: usize,
}

impl WorkerDescription {
    /// The blob.
    pub fn encode(&self) -> Vec<u8> {
        let runtime = wire::encode_runtime(&self.runtime);
        let profile = wire::encode_profile(&self.profile);
        let mut builder = MessageBuilder::new();
        let header = Header {
            protocol: PROTOCOL.to_owned(),
            runtime: builder.section(&runtime),
            profile: builder.section(&profile),
        };
        builder.encode(&header)
    }

    /// The description in `bytes`; `Err` names what is wrong, a profile whose digest is not
    /// its recipe's among it.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let (header, mut sections) = message::decode::<Header>(bytes).map_err(|e| e.to_string())?;
        if header.protocol != PROTOCOL {
            return Err(format!("protocol {:?} is not {PROTOCOL}", header.protocol));
        }
        let runtime = sections.take(header.runtime).map_err(|e| e.to_string())?;
        let profile = sections.take(header.profile).map_err(|e| e.to_string())?;
        sections.finish().map_err(|e| e.to_string())?;
        let runtime = wire::decode_runtime(runtime).map_err(|e| format!("runtime: {e}"))?;
        let profile = wire::decode_profile(profile).map_err(|e| format!("profile: {e}"))?;
        if profile.digest != SfDigest::of(&profile.recipe) {
            return Err("the profile's digest is not its recipe's".to_owned());
        }
        Ok(Self { runtime, profile })
    }

    /// What runs are sent to: this runtime and profile.
    pub fn target(&self) -> Target {
        Target {
            runtime: self.runtime.clone(),
            profile: self.profile.digest.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use sf_contracts::{ReadableKind, ReadablePath};

    use super::*;

    #[test]
    fn a_description_round_trips_and_its_profile_is_checked() {
        let recipe = br#"{"enforces":{"landlock":"fully-enforced"}}"#.to_vec();
        let description = WorkerDescription {
            runtime: RuntimeDescription {
                executable: PathBuf::from("/bin/sh"),
                readable: vec![ReadablePath {
                    path: PathBuf::from("/lib"),
                    kind: ReadableKind::Subtree,
                }],
                digest: SfDigest::of(b"runtime"),
            },
            profile: ProfileDescription {
                digest: SfDigest::of(&recipe),
                recipe,
            },
        };
        let bytes = description.encode();
        assert_eq!(WorkerDescription::decode(&bytes).unwrap(), description);
        let mut forged = description.clone();
        forged.profile.recipe.push(b' ');
        assert!(WorkerDescription::decode(&forged.encode()).is_err());
        assert!(WorkerDescription::decode(b"garbage").is_err());
    }
}
