//! The messages every contract shares: the plugin-level error (`STATUS_PLUGIN_ERROR`), the
//! panic report (`STATUS_PANIC`), the empty answer, deadlines as remaining milliseconds, and
//! the encoding of every contract's errors (from the contract's own table of codes and
//! fields).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contracts::error_fields::{ContractError, FieldSource, FieldValue};
use crate::message::{self, MessageBuilder, MessageError, Sections};

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
/// The backend could not be made from a valid configuration, for a reason the contract's
/// errors do not name (a reason they name is that error: [`INSTANTIATE_ERROR_SINCE_MINOR`]).
pub const INSTANTIATE_FAILED: &str = "instantiate-failed";
/// The ABI minor from which `instantiate` may answer `STATUS_CONTRACT_ERROR` with the
/// contract's own error, so that a backend whose server is down (`unavailable`) or whose data
/// failed verification (`corrupt`) keeps that class up to the command line. The host reads
/// such a reply as the contract's error only from a plugin of this minor or later; from an
/// older one it stays a malformed reply, as it always was.
pub const INSTANTIATE_ERROR_SINCE_MINOR: u32 = 14;
/// The plugin's manifest does not list exactly the contracts and tags it exports.
pub const EXPORTS_MISMATCH: &str = "exports-mismatch";

/// The reply of `STATUS_PLUGIN_ERROR`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginErrorReply {
    /// One of the plugin-level codes of this module ([`UNKNOWN_TAG`], [`INVALID_CONFIG`], …),
    /// or a code of a newer minor.
    pub code: String,
    /// What went wrong, in words for a person.
    pub message: String,
}

impl PluginErrorReply {
    /// The reply with `code` and `message`.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// The reply as a message: a header `{"code","message"}` and no sections.
    pub fn encode(&self) -> Vec<u8> {
        message::encode_header(self)
    }

    /// Reads the reply from a message, refusing other fields and any section.
    pub fn decode(bytes: &[u8]) -> Result<Self, MessageError> {
        message::decode_header(bytes)
    }
}

/// The reply of `STATUS_PANIC`: the panic's message, when it had one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanicReply {
    /// The panic's message, or a fixed text when the panic carried no text.
    pub message: String,
}

impl PanicReply {
    /// The reply as a message: a header `{"message"}` and no sections.
    pub fn encode(&self) -> Vec<u8> {
        message::encode_header(self)
    }

    /// Reads the reply from a message, refusing other fields and any section.
    pub fn decode(bytes: &[u8]) -> Result<Self, MessageError> {
        message::decode_header(bytes)
    }
}

/// The empty answer `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

impl Empty {
    /// The empty answer as a message: the header `{}` and no sections.
    pub fn encode() -> Vec<u8> {
        message::encode_header(&Empty {})
    }

    /// Checks that a message is the empty answer: the header `{}` and no sections.
    pub fn decode(bytes: &[u8]) -> Result<(), MessageError> {
        message::decode_header(bytes).map(|Empty {}| ())
    }
}

/// A contract as it crosses the boundary: its name in manifests and in `instantiate`, and
/// the error its replies carry. Each protocol module declares one with `wire_contract!`; the
/// host's adapters and the sdk's serving code are generic over it.
pub trait WireContract {
    /// The contract's name in manifests and in `instantiate`.
    const NAME: &'static str;
    /// The contract's error, as [`encode_error`] and [`decode_error`] carry it.
    type Error: ContractError;
}

/// Declares a protocol module's contract: `pub const CONTRACT` (its name), a marker type
/// implementing [`WireContract`], and the module's error codec (`DecodedError`,
/// `encode_error`, `decode_error`), which every contract frames alike.
///
/// ```text
/// protocol::wire_contract! {
///     /// The `gate` contract.
///     GateContract: "gate", GateError
/// }
/// ```
macro_rules! wire_contract {
    ($(#[$doc:meta])* $marker:ident: $name:literal, $error:ty) => {
        /// The contract's name in manifests and in `instantiate`.
        pub const CONTRACT: &str = $name;

        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $marker;

        impl $crate::protocol::WireContract for $marker {
            const NAME: &'static str = CONTRACT;
            type Error = $error;
        }

        /// An error reply as the host decodes it.
        pub type DecodedError = $crate::protocol::DecodedError<$error>;

        /// Encodes `error` with its code, its display text and every field.
        pub fn encode_error(error: &$error) -> Vec<u8> {
            $crate::protocol::encode_error(error)
        }

        /// Decodes an error reply.
        pub fn decode_error(bytes: &[u8]) -> Result<DecodedError, $crate::message::MessageError> {
            $crate::protocol::decode_error(bytes)
        }
    };
}
pub(crate) use wire_contract;

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

pub use crate::contracts::error_fields::intern_rule;

/// Encodes a contract error: its code, its display text and every field of its variant, a
/// text field as a header string and a byte field as a section.
pub fn encode_error<E: ContractError>(error: &E) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let mut header = BTreeMap::new();
    header.insert("code".to_owned(), Value::String(error.code().to_owned()));
    header.insert("message".to_owned(), Value::String(error.to_string()));
    for (name, value) in error.fields() {
        let value = match value {
            FieldValue::Text(text) => Value::String(text.to_owned()),
            FieldValue::Bytes(bytes) => Value::from(builder.section(bytes)),
        };
        header.insert(name.to_owned(), value);
    }
    builder.encode(&header)
}

/// Decodes a contract error reply: a known code with exactly its variant's fields, or an
/// unknown code (a plugin of a newer minor), whose other fields this host cannot name and
/// whose framing alone is checked.
pub fn decode_error<E: ContractError>(bytes: &[u8]) -> Result<DecodedError<E>, MessageError> {
    let (header, sections) = message::decode::<BTreeMap<String, Value>>(bytes)?;
    let mut fields = ErrorReply {
        fields: ExactFields::new(header),
        sections,
    };
    let code = fields.fields.string("code")?;
    let message = fields.fields.string("message")?;
    let Some(error) = E::read(&code, &mut fields) else {
        return Ok(DecodedError::Unknown { code, message });
    };
    let error = error?;
    fields.fields.finish()?;
    fields.sections.finish()?;
    Ok(DecodedError::Known(error))
}

/// An error reply's header and sections, read field by field.
struct ErrorReply<'a> {
    fields: ExactFields,
    sections: Sections<'a>,
}

impl FieldSource for ErrorReply<'_> {
    type Error = MessageError;

    fn text(&mut self, name: &'static str) -> Result<String, MessageError> {
        self.fields.string(name)
    }

    fn bytes(&mut self, name: &'static str) -> Result<Vec<u8>, MessageError> {
        let index = self.fields.index(name)?;
        Ok(self.sections.take(index)?.to_vec())
    }
}

/// A JSON object read field by field, refusing absent, mistyped and undeclared fields: how
/// the contracts decode their error replies, whose fields depend on the code.
pub struct ExactFields(BTreeMap<String, Value>);

impl ExactFields {
    /// Reads the fields of `map`, a decoded header.
    pub fn new(map: BTreeMap<String, Value>) -> Self {
        Self(map)
    }

    /// The string field `key`.
    pub fn string(&mut self, key: &str) -> Result<String, MessageError> {
        match self.0.remove(key) {
            Some(Value::String(text)) => Ok(text),
            Some(_) => Err(MessageError::field(key, "must be a string")),
            None => Err(MessageError::field(key, "is missing")),
        }
    }

    /// The section index field `key`.
    pub fn index(&mut self, key: &str) -> Result<usize, MessageError> {
        match self.0.remove(key) {
            Some(Value::Number(number)) => number
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| MessageError::field(key, "must be a section index")),
            Some(_) => Err(MessageError::field(key, "must be a section index")),
            None => Err(MessageError::field(key, "is missing")),
        }
    }

    /// Refuses any field not taken.
    pub fn finish(self) -> Result<(), MessageError> {
        match self.0.keys().next() {
            Some(key) => Err(MessageError::field(
                key.clone(),
                "is not a field of this error",
            )),
            None => Ok(()),
        }
    }
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

/// An error reply as the host decodes it, for a contract whose error type is `E`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodedError<E> {
    /// A code this host knows, with every field.
    Known(E),
    /// A code this host does not know (a plugin of a newer minor): still an `Err`, so still
    /// "nothing started", with the plugin's own words.
    Unknown {
        /// The plugin's code, as sent.
        code: String,
        /// The plugin's display text of the error.
        message: String,
    },
}
