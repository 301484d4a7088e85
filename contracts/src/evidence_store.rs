//! The EvidenceStore contract: write-once, content-addressed Evidence records.
//!
//! A record is bytes in one exact encoding (`sf-evidence/1`, below): a canonical JSON header
//! naming the pins it is filed under, the attempt that wrote it and the format of its payload,
//! followed by the payload bytes. Its id is the `sha256:` of those bytes. A store:
//!
//! - `put`s a record durably before returning its id; an identical put returns the same id
//!   and writes nothing new; different bytes already held under the id are `conflict`;
//! - `get`s a record by id, re-hashing the stored bytes on every read: bytes that do not hash
//!   to the id, or do not parse, are `corrupt`, reported and never repaired;
//! - `find`s the ids of every record filed under a pins digest, in the order first stored.
//!
//! Records are never updated or deleted. Callers re-hash what `get` returns as well: a
//! store's answer is never trusted.
//!
//! ```text
//! "sf-evidence/1\n"
//! <header length, decimal, no leading zeros>"\n"
//! <header: canonical JSON {"attempt":{"epoch":N,"product":"…"},"format":"…","payloadBytes":N,"pins":"sha256:…"}>
//! <payload: exactly payloadBytes bytes>
//! ```

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Deserializer, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::grammar::is_valid_id;

use crate::error_fields::contract_error;

/// The protocol string that starts every record.
pub const EVIDENCE_PROTOCOL: &str = "sf-evidence/1";
/// The largest record, in bytes (32 MiB): room for two 8 MiB outputs and their facts.
pub const MAX_RECORD_BYTES: usize = 32 * 1024 * 1024;
/// The largest header, in bytes.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Which attempt wrote a record: a Product's fence epoch (see [`crate::fence`]). Records of
/// an attempt whose hold has ended stay stored and are inert. Written `{"epoch", "product"}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptId {
    /// The id of the Product whose fence the attempt held, in the id grammar.
    #[serde(deserialize_with = "attempt_product")]
    pub product: String,
    /// Positive, and larger for every later hold on the same Product's fence.
    #[serde(deserialize_with = "canonical::positive")]
    pub epoch: u64,
}

fn attempt_product<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(
        deserializer,
        |product: &String| is_valid_id(product),
        PRODUCT_RULE,
    )
}

const PRODUCT_RULE: &str = "an attempt's product matches ^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$";

impl AttemptId {
    /// The attempt as a JSON value `{"epoch":N,"product":"…"}`.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("an attempt holds a string and an integer")
    }

    /// Checks the product id grammar and a positive safe epoch.
    pub fn check(&self) -> Result<(), &'static str> {
        if !is_valid_id(&self.product) {
            return Err(PRODUCT_RULE);
        }
        if self.epoch == 0 || self.epoch > canonical::MAX_SAFE_INTEGER as u64 {
            return Err("an attempt's epoch is a positive safe integer");
        }
        Ok(())
    }

    /// Reads `{"epoch":N,"product":"…"}` strictly.
    pub fn from_value(value: &Value) -> Option<Self> {
        canonical::from_value(value, "attempt").ok()
    }
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.product, self.epoch)
    }
}

/// The header of a record, as it is written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Header {
    attempt: AttemptId,
    #[serde(deserialize_with = "format")]
    format: String,
    payload_bytes: u64,
    pins: Digest,
}

const FORMAT_RULE: &str =
    "a format is a protocol string name/N of lowercase letters, digits, . and -";

fn format<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(
        deserializer,
        |format: &String| is_valid_format(format),
        FORMAT_RULE,
    )
}

/// One Evidence record in its exact encoding. Values exist only through [`EvidenceRecord::new`]
/// and [`EvidenceRecord::from_stored`], so every value is well-formed.
#[derive(Clone, PartialEq, Eq)]
pub struct EvidenceRecord {
    bytes: Vec<u8>,
    pins: Digest,
    attempt: AttemptId,
    format: String,
    payload_at: usize,
}

impl fmt::Debug for EvidenceRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvidenceRecord")
            .field("id", &self.id())
            .field("pins", &self.pins)
            .field("attempt", &self.attempt)
            .field("format", &self.format)
            .field("payload_bytes", &self.payload().len())
            .finish()
    }
}

/// Whether `format` is a protocol string: `name/N`, lowercase ASCII letters, digits, `.` and
/// `-`, at most 128 bytes.
fn is_valid_format(format: &str) -> bool {
    let Some((name, version)) = format.split_once('/') else {
        return false;
    };
    format.len() <= 128
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && !version.is_empty()
        && !version.starts_with('0')
        && version.len() <= 9
        && version.bytes().all(|b| b.is_ascii_digit())
}

impl EvidenceRecord {
    /// Encodes a record of `payload` in `format`, filed under `pins`, written by `attempt`.
    pub fn new(
        pins: Digest,
        attempt: AttemptId,
        format: &str,
        payload: &[u8],
    ) -> Result<Self, EvidenceStoreError> {
        let invalid = |input: &str, rule: &str| EvidenceStoreError::InvalidInput {
            input: input.to_owned(),
            rule: rule.to_owned(),
        };
        attempt
            .check()
            .map_err(|rule| invalid(&format!("attempt {attempt}"), rule))?;
        if !is_valid_format(format) {
            return Err(invalid(&format!("format {format:?}"), FORMAT_RULE));
        }
        let header = Header {
            attempt,
            format: format.to_owned(),
            payload_bytes: payload.len() as u64,
            pins,
        };
        let encoded = canonical::to_canonical_bytes(&header)
            .map_err(|error| invalid("record header", &error.to_string()))?;
        let mut bytes = Vec::with_capacity(32 + encoded.len() + payload.len());
        bytes.extend_from_slice(&crate::framing::prefix(EVIDENCE_PROTOCOL, encoded.len()));
        bytes.extend_from_slice(&encoded);
        let payload_at = bytes.len();
        bytes.extend_from_slice(payload);
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(invalid(
                &format!("a record of {} bytes", bytes.len()),
                "a record holds at most 32 MiB",
            ));
        }
        Ok(Self::with_header(bytes, header, payload_at))
    }

    fn with_header(bytes: Vec<u8>, header: Header, payload_at: usize) -> Self {
        Self {
            bytes,
            pins: header.pins,
            attempt: header.attempt,
            format: header.format,
            payload_at,
        }
    }

    /// Reads bytes a store held under `id`: they must hash to `id` and be a well-formed
    /// record; anything else is `corrupt`. Every store uses this on every `get`.
    pub fn from_stored(id: &Digest, bytes: Vec<u8>) -> Result<Self, EvidenceStoreError> {
        let corrupt = |what: String| EvidenceStoreError::Corrupt {
            id: id.to_string(),
            what,
        };
        if Digest::of(&bytes) != *id {
            return Err(corrupt("the stored bytes do not hash to the id".into()));
        }
        Self::parse(bytes).map_err(corrupt)
    }

    /// Parses bytes as a record, strictly: the exact encoding and nothing else.
    pub fn parse(bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err("larger than 32 MiB".into());
        }
        let (head, payload) = crate::framing::split(&bytes, EVIDENCE_PROTOCOL, "header", 7)?;
        if head.len() > MAX_HEADER_BYTES {
            return Err("the header is larger than 64 KiB".into());
        }
        let payload_at = bytes.len() - payload.len();
        let header_at = payload_at - head.len();
        let header: Header =
            canonical::from_canonical_slice(&bytes[header_at..payload_at], "header")
                .map_err(|error| error.to_string())?;
        if usize::try_from(header.payload_bytes).ok() != Some(bytes.len() - payload_at) {
            return Err("header.payloadBytes is not the payload's length".into());
        }
        Ok(Self::with_header(bytes, header, payload_at))
    }

    /// The record's id: the `sha256:` of its bytes.
    pub fn id(&self) -> Digest {
        Digest::of(&self.bytes)
    }

    /// The record's exact bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The pins digest the record is filed under.
    pub fn pins(&self) -> &Digest {
        &self.pins
    }

    /// The attempt that wrote the record.
    pub fn attempt(&self) -> &AttemptId {
        &self.attempt
    }

    /// The payload's format (a protocol string such as `sf-repository-observation/1`).
    pub fn format(&self) -> &str {
        &self.format
    }

    /// The payload bytes.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[self.payload_at..]
    }
}

/// Keeps Evidence records write-once and content-addressed. Every method takes a deadline
/// after which it gives up with `timeout`.
pub trait EvidenceStore: Send + Sync {
    /// Stores `record` durably and returns its id. An identical record already stored returns
    /// the same id and writes nothing; different bytes held under the id are `conflict`. An
    /// `Err` means the record is not known to be durable; putting the same record again later
    /// is always safe.
    fn put(&self, record: &EvidenceRecord, deadline: Instant)
    -> Result<Digest, EvidenceStoreError>;

    /// The record stored under `id`, re-hashed and re-parsed now
    /// ([`EvidenceRecord::from_stored`]): `missing` if there is none, `corrupt` if the stored
    /// bytes fail either check. Never repairs anything.
    fn get(&self, id: &Digest, deadline: Instant) -> Result<EvidenceRecord, EvidenceStoreError>;

    /// The ids of every record filed under `pins`, in the order they were first stored.
    fn find(&self, pins: &Digest, deadline: Instant) -> Result<Vec<Digest>, EvidenceStoreError>;
}

/// What a caller of an [`EvidenceStore`] uses on top of the contract: a read checked here,
/// whatever the store claims. Implemented for every store.
pub trait EvidenceStoreExt: EvidenceStore {
    /// Gets `id` and checks the answer again: the record must hash to `id`. A store that
    /// answers with other bytes is reported `corrupt`, whatever it claims.
    fn get_verified(
        &self,
        id: &Digest,
        deadline: Instant,
    ) -> Result<EvidenceRecord, EvidenceStoreError> {
        let record = self.get(id, deadline)?;
        if record.id() != *id {
            return Err(EvidenceStoreError::Corrupt {
                id: id.to_string(),
                what: format!("the store answered with record {}", record.id()),
            });
        }
        Ok(record)
    }
}

impl<T: EvidenceStore + ?Sized> EvidenceStoreExt for T {}

contract_error! {
    /// Why an EvidenceStore call failed.
    #[derive(Clone, Debug, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum EvidenceStoreError {
        /// An argument breaks a rule; nothing was read or written.
        #[error("invalid input: {input}: {rule}")]
        "invalid-input" InvalidInput {
            /// The argument at fault, named and shown (`format "X/1"`).
            input: String,
            /// The rule it breaks.
            rule: String,
        },
        /// No record is stored under the id.
        #[error("no evidence record {id}")]
        "missing" Missing {
            /// The record id asked for, as `sha256:…`.
            id: String,
        },
        /// Stored bytes failed verification; reported, never repaired.
        #[error("evidence record {id} is corrupt: {what}")]
        "corrupt" Corrupt {
            /// The id of the record whose bytes failed, as `sha256:…`.
            id: String,
            /// Which check failed.
            what: String,
        },
        /// Different bytes are already stored under the id.
        #[error("evidence record {id} already holds different bytes")]
        "conflict" Conflict {
            /// The record id, as `sha256:…`.
            id: String,
        },
        /// The store cannot be used (its root, file or database is missing, replaced or failing).
        #[error("evidence store unavailable: {reason}")]
        "unavailable" Unavailable {
            /// Why the store cannot be used.
            reason: String,
        },
        /// The deadline passed first.
        #[error("evidence store timed out: {what}")]
        "timeout" Timeout {
            /// What was being done when the deadline passed.
            what: String,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt() -> AttemptId {
        AttemptId {
            product: "p".into(),
            epoch: 3,
        }
    }

    #[test]
    fn round_trip_and_exact_framing() {
        let pins = Digest::of(b"pins");
        let record =
            EvidenceRecord::new(pins.clone(), attempt(), "x-format/1", b"payload").unwrap();
        let parsed = EvidenceRecord::from_stored(&record.id(), record.bytes().to_vec()).unwrap();
        assert_eq!(parsed, record);
        assert_eq!(parsed.payload(), b"payload");
        assert_eq!(parsed.pins(), &pins);
        assert_eq!(parsed.attempt(), &attempt());
        assert!(record.bytes().starts_with(b"sf-evidence/1\n"));

        // One byte more or less, or a changed byte, is corrupt.
        let mut longer = record.bytes().to_vec();
        longer.push(b'x');
        assert!(EvidenceRecord::parse(longer.clone()).is_err());
        assert_eq!(
            EvidenceRecord::from_stored(&record.id(), longer)
                .unwrap_err()
                .code(),
            "corrupt"
        );
        let shorter = record.bytes()[..record.bytes().len() - 1].to_vec();
        assert!(EvidenceRecord::parse(shorter).is_err());
    }

    #[test]
    fn refuses_bad_inputs() {
        let pins = Digest::of(b"pins");
        for format in ["", "X/1", "a/0", "a/01", "a", "a/1/2", "a b/1"] {
            assert_eq!(
                EvidenceRecord::new(pins.clone(), attempt(), format, b"")
                    .unwrap_err()
                    .code(),
                "invalid-input",
                "{format:?}"
            );
        }
        let bad = AttemptId {
            product: "p".into(),
            epoch: 0,
        };
        assert!(EvidenceRecord::new(pins, bad, "a/1", b"").is_err());
    }
}
