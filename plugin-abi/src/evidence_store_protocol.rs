//! The `evidence-store` contract on the wire: one request and one answer shape per method of
//! [`EvidenceStore`](crate::contracts::EvidenceStore), and the error encoding that keeps every
//! [`EvidenceStoreError`] code and field.
//!
//! | method | request header | answer header |
//! |---|---|---|
//! | `put` | `{record, deadlineMs}` | `{id}` |
//! | `get` | `{id, deadlineMs}` | `{record}` |
//! | `find` | `{pins, deadlineMs}` | `{ids}` |
//!
//! `record` is a section index: the record's exact `sf-evidence/1` bytes travel raw. Ids and
//! pins are `sha256:` text. The plugin side parses a `put`'s record strictly before its store
//! sees it; the host side re-hashes and re-parses what `get` answers under the id it asked
//! for (a store's answer is never trusted) and checks that `put` answers the record's own id.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::contracts::canonical::Digest;
use crate::contracts::{EvidenceRecord, EvidenceStoreError};
use crate::message::{self, MessageBuilder, MessageError};
use crate::protocol::{self, deadline_in, remaining_ms};

protocol::wire_contract! {
    /// The `evidence-store` contract, as the host and the sdk name it.
    EvidenceStoreContract: "evidence-store", EvidenceStoreError
}

/// The method names, as sent in `call`.
pub mod method {
    /// [`EvidenceStore::put`](crate::contracts::EvidenceStore::put).
    pub const PUT: &str = "put";
    /// [`EvidenceStore::get`](crate::contracts::EvidenceStore::get).
    pub const GET: &str = "get";
    /// [`EvidenceStore::find`](crate::contracts::EvidenceStore::find).
    pub const FIND: &str = "find";
}

/// A request, as the plugin side decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `put`.
    Put {
        /// The record to store.
        record: EvidenceRecord,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `get`.
    Get {
        /// The record's id.
        id: Digest,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `find`.
    Find {
        /// The pins digest the records are filed under.
        pins: Digest,
        /// When the host stops waiting.
        deadline: Instant,
    },
}

impl Request {
    /// Decodes the request of `method`. `Ok(None)`: the method is not one of this contract's.
    pub fn decode(method: &str, bytes: &[u8]) -> Result<Option<Self>, MessageError> {
        let request = match method {
            method::PUT => {
                let (header, mut sections) = message::decode::<PutHeader>(bytes)?;
                let record = sections.take(header.record)?.to_vec();
                sections.finish()?;
                let record = EvidenceRecord::parse(record).map_err(|rule| {
                    MessageError::field("record", format!("is not an sf-evidence/1 record: {rule}"))
                })?;
                Self::Put {
                    record,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::GET => {
                let header = message::decode_header::<GetHeader>(bytes)?;
                Self::Get {
                    id: parse_digest(&header.id, "id")?,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::FIND => {
                let header = message::decode_header::<FindHeader>(bytes)?;
                Self::Find {
                    pins: parse_digest(&header.pins, "pins")?,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(request))
    }
}

// ---------------------------------------------------------------------------------------------
// Requests (host side)

/// The request of `put`.
pub fn encode_put(record: &EvidenceRecord, deadline: Instant) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let record = builder.section(record.bytes());
    builder.encode(&PutHeader {
        record,
        deadline_ms: remaining_ms(deadline),
    })
}

/// The request of `get`.
pub fn encode_get(id: &Digest, deadline: Instant) -> Vec<u8> {
    message::encode_header(&GetHeader {
        id: id.to_string(),
        deadline_ms: remaining_ms(deadline),
    })
}

/// The request of `find`.
pub fn encode_find(pins: &Digest, deadline: Instant) -> Vec<u8> {
    message::encode_header(&FindHeader {
        pins: pins.to_string(),
        deadline_ms: remaining_ms(deadline),
    })
}

// ---------------------------------------------------------------------------------------------
// Answers

/// The answer of `put`.
pub fn encode_id(id: &Digest) -> Vec<u8> {
    message::encode_header(&IdAnswer { id: id.to_string() })
}

/// Decodes the answer of `put`.
pub fn decode_id(bytes: &[u8]) -> Result<Digest, MessageError> {
    let answer = message::decode_header::<IdAnswer>(bytes)?;
    parse_digest(&answer.id, "id")
}

/// The answer of `get`: the record's bytes as they are stored.
pub fn encode_record(record: &EvidenceRecord) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let record = builder.section(record.bytes());
    builder.encode(&RecordAnswer { record })
}

/// The stored bytes `get` answered, not yet verified.
pub fn decode_record(bytes: &[u8]) -> Result<Vec<u8>, MessageError> {
    let (answer, mut sections) = message::decode::<RecordAnswer>(bytes)?;
    let record = sections.take(answer.record)?.to_vec();
    sections.finish()?;
    Ok(record)
}

/// The answer of `find`.
pub fn encode_ids(ids: &[Digest]) -> Vec<u8> {
    message::encode_header(&IdsAnswer {
        ids: ids.iter().map(ToString::to_string).collect(),
    })
}

/// Decodes the answer of `find`: the ids, each a `sha256:` digest.
pub fn decode_ids(bytes: &[u8]) -> Result<Vec<Digest>, MessageError> {
    let answer = message::decode_header::<IdsAnswer>(bytes)?;
    answer
        .ids
        .iter()
        .enumerate()
        .map(|(at, id)| parse_digest(id, &format!("ids[{at}]")))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Header shapes

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PutHeader {
    record: usize,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GetHeader {
    id: String,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FindHeader {
    pins: String,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdAnswer {
    id: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordAnswer {
    record: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdsAnswer {
    ids: Vec<String>,
}

fn parse_digest(text: &str, field: &str) -> Result<Digest, MessageError> {
    Digest::parse(text).ok_or_else(|| {
        MessageError::field(field, "must be sha256: and 64 lowercase hex characters")
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::contracts::AttemptId;

    fn record() -> EvidenceRecord {
        EvidenceRecord::new(
            Digest::of(b"pins"),
            AttemptId {
                product: "p".into(),
                epoch: 1,
            },
            "sf-test/1",
            b"\0payload\xff",
        )
        .unwrap()
    }

    #[test]
    fn requests_round_trip() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let record = record();
        let Some(Request::Put {
            record: decoded, ..
        }) = Request::decode(method::PUT, &encode_put(&record, deadline)).unwrap()
        else {
            panic!("put decodes");
        };
        assert_eq!(decoded, record);
        let id = record.id();
        assert!(matches!(
            Request::decode(method::GET, &encode_get(&id, deadline)).unwrap(),
            Some(Request::Get { id: got, .. }) if got == id
        ));
        assert!(matches!(
            Request::decode(method::FIND, &encode_find(&id, deadline)).unwrap(),
            Some(Request::Find { pins, .. }) if pins == id
        ));
        assert_eq!(Request::decode("delete", b"").unwrap(), None);
    }

    #[test]
    fn a_put_of_bytes_that_are_no_record_is_malformed() {
        let mut builder = MessageBuilder::new();
        let record = builder.section(b"sf-evidence/1\n2\n{}");
        let bytes = builder.encode(&PutHeader {
            record,
            deadline_ms: 1000,
        });
        let error = Request::decode(method::PUT, &bytes).unwrap_err();
        assert!(error.to_string().contains("record"), "{error}");
    }

    #[test]
    fn answers_round_trip() {
        let record = record();
        assert_eq!(decode_id(&encode_id(&record.id())).unwrap(), record.id());
        assert_eq!(
            decode_record(&encode_record(&record)).unwrap(),
            record.bytes()
        );
        let ids = vec![record.id(), Digest::of(b"x")];
        assert_eq!(decode_ids(&encode_ids(&ids)).unwrap(), ids);
        let bad = message::encode_header(&serde_json::json!({"ids": ["sha256:00"]}));
        assert!(decode_ids(&bad).is_err());
    }

    #[test]
    fn errors_round_trip_with_every_field() {
        for error in [
            EvidenceStoreError::InvalidInput {
                input: "pins".into(),
                rule: "r".into(),
            },
            EvidenceStoreError::Missing { id: "i".into() },
            EvidenceStoreError::Corrupt {
                id: "i".into(),
                what: "w".into(),
            },
            EvidenceStoreError::Conflict { id: "i".into() },
            EvidenceStoreError::Unavailable { reason: "r".into() },
            EvidenceStoreError::Timeout { what: "w".into() },
        ] {
            assert_eq!(
                decode_error(&encode_error(&error)).unwrap(),
                DecodedError::Known(error)
            );
        }
        let extra = message::encode_header(&serde_json::json!({
            "code": "missing", "message": "m", "id": "i", "what": "w"
        }));
        assert!(decode_error(&extra).is_err());
    }
}
