//! The messages every contract shares: the plugin-level error (`STATUS_PLUGIN_ERROR`), the
//! panic report (`STATUS_PANIC`), the empty answer, and deadlines as remaining milliseconds.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::message::{self, MessageError};

/// The method is not one this side knows (for example a method added in a newer minor).
pub const UNSUPPORTED_METHOD: &str = "unsupported-method";
/// The request is not a well-formed message for its method.
pub const MALFORMED_REQUEST: &str = "malformed-request";
/// The plugin does not provide the contract asked for.
pub const UNKNOWN_CONTRACT: &str = "unknown-contract";
/// The plugin does not provide the tag (`type`) asked for under the contract.
pub const UNKNOWN_TAG: &str = "unknown-tag";
/// The configuration is not valid for the tag.
pub const INVALID_CONFIG: &str = "invalid-config";
/// The backend could not be made from a valid configuration.
pub const INSTANTIATE_FAILED: &str = "instantiate-failed";
/// The plugin's manifest does not list exactly the contracts and tags it exports.
pub const EXPORTS_MISMATCH: &str = "exports-mismatch";

/// The reply of `STATUS_PLUGIN_ERROR`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginErrorReply {
    pub code: String,
    pub message: String,
}

impl PluginErrorReply {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        message::encode_header(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, MessageError> {
        let (reply, sections) = message::decode::<Self>(bytes)?;
        sections.finish()?;
        Ok(reply)
    }
}

/// The reply of `STATUS_PANIC`: the panic's message, when it had one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanicReply {
    pub message: String,
}

impl PanicReply {
    pub fn encode(&self) -> Vec<u8> {
        message::encode_header(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, MessageError> {
        let (reply, sections) = message::decode::<Self>(bytes)?;
        sections.finish()?;
        Ok(reply)
    }
}

/// The empty answer `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

impl Empty {
    pub fn encode() -> Vec<u8> {
        message::encode_header(&Empty {})
    }

    pub fn decode(bytes: &[u8]) -> Result<(), MessageError> {
        let (Empty {}, sections) = message::decode::<Empty>(bytes)?;
        sections.finish()
    }
}

/// The time left until `deadline`, in whole milliseconds, rounded down: a plugin never gets
/// more time than the host gave.
pub fn remaining_ms(deadline: Instant) -> u64 {
    u64::try_from(
        deadline
            .saturating_duration_since(Instant::now())
            .as_millis(),
    )
    .unwrap_or(u64::MAX)
}

/// The deadline `ms` milliseconds from now (far in the future saturates at about a century).
pub fn deadline_in(ms: u64) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let now = Instant::now();
    now.checked_add(Duration::from_millis(ms).min(CENTURY))
        .unwrap_or(now + CENTURY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines() {
        assert_eq!(remaining_ms(Instant::now() - Duration::from_millis(5)), 0);
        let ms = remaining_ms(Instant::now() + Duration::from_secs(10));
        assert!((9_000..=10_000).contains(&ms));
        assert!(deadline_in(u64::MAX) > Instant::now());
        assert!(deadline_in(0) <= Instant::now());
    }

    #[test]
    fn plugin_errors_round_trip() {
        let reply = PluginErrorReply::new(UNKNOWN_TAG, "no tag x");
        assert_eq!(PluginErrorReply::decode(&reply.encode()).unwrap(), reply);
        Empty::decode(&Empty::encode()).unwrap();
        assert!(Empty::decode(&reply.encode()).is_err());
    }
}
