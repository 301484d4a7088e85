//! The `gate` contract on the wire: one method, `current`, and the error encoding that keeps
//! every [`GateError`] code and field.
//!
//! | method | request header | answer header |
//! |---|---|---|
//! | `current` | `{deadlineMs}` | `{"answer":"proceed"}` or `{"answer":"refuse","reason":…}` |
//!
//! `deadlineMs` is the time left until the caller stops waiting, rounded down. Errors are
//! `{code, message}` plus `reason` (`unavailable`) or `what` (`malformed`); `timeout` has no
//! other field. Whatever the plugin answers, the host side treats anything but an exact
//! `proceed` as a refusal (the host's gate adapter).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::contracts::{GateAnswer, GateError};
use crate::message::{self, MessageError};
use crate::protocol::{self, deadline_in, remaining_ms};

protocol::wire_contract! {
    /// The `gate` contract, as the host and the sdk name it.
    GateContract: "gate", GateError
}

/// The method names, as sent in `call`.
pub mod method {
    /// [`Gate::current`](crate::contracts::Gate::current).
    pub const CURRENT: &str = "current";
}

/// A request, as the plugin side decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `current`.
    Current {
        /// When the host stops waiting.
        deadline: Instant,
    },
}

impl Request {
    /// Decodes the request of `method`. `Ok(None)`: the method is not one of this contract's.
    pub fn decode(method: &str, bytes: &[u8]) -> Result<Option<Self>, MessageError> {
        match method {
            method::CURRENT => {
                let header = message::decode_header::<CurrentHeader>(bytes)?;
                Ok(Some(Self::Current {
                    deadline: deadline_in(header.deadline_ms),
                }))
            }
            _ => Ok(None),
        }
    }
}

/// `current`.
pub fn encode_current(deadline: Instant) -> Vec<u8> {
    message::encode_header(&CurrentHeader {
        deadline_ms: remaining_ms(deadline),
    })
}

/// The answer of `current`.
pub fn encode_answer(answer: &GateAnswer) -> Vec<u8> {
    message::encode_header(&match answer {
        GateAnswer::Proceed => AnswerHeader::Proceed {},
        GateAnswer::Refuse { reason } => AnswerHeader::Refuse {
            reason: reason.clone(),
        },
    })
}

/// Decodes the answer of `current`: exactly a proceed or a refusal with a reason.
pub fn decode_answer(bytes: &[u8]) -> Result<GateAnswer, MessageError> {
    let answer = message::decode_header::<AnswerHeader>(bytes)?;
    Ok(match answer {
        AnswerHeader::Proceed {} => GateAnswer::Proceed,
        AnswerHeader::Refuse { reason } => GateAnswer::Refuse { reason },
    })
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CurrentHeader {
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "kebab-case", deny_unknown_fields)]
enum AnswerHeader {
    Proceed {},
    Refuse { reason: String },
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn answers_round_trip_exactly() {
        for answer in [
            GateAnswer::Proceed,
            GateAnswer::Refuse {
                reason: "closed for the night".into(),
            },
        ] {
            assert_eq!(decode_answer(&encode_answer(&answer)).unwrap(), answer);
        }
        assert_eq!(
            encode_answer(&GateAnswer::Proceed),
            message::encode_header(&serde_json::json!({"answer": "proceed"}))
        );
    }

    #[test]
    fn anything_but_the_two_answers_is_malformed() {
        for header in [
            serde_json::json!({}),
            serde_json::json!({"answer": "yes"}),
            serde_json::json!({"answer": "proceed", "reason": "x"}),
            serde_json::json!({"answer": "refuse"}),
            serde_json::json!({"answer": "refuse", "reason": 1}),
            serde_json::json!({"proceed": true}),
        ] {
            assert!(
                decode_answer(&message::encode_header(&header)).is_err(),
                "{header}"
            );
        }
    }

    #[test]
    fn errors_round_trip_with_every_field() {
        for error in [
            GateError::Unavailable {
                reason: "the policy service is down".into(),
            },
            GateError::Malformed {
                what: "not JSON".into(),
            },
            GateError::Timeout,
        ] {
            assert_eq!(
                decode_error(&encode_error(&error)).unwrap(),
                DecodedError::Known(error)
            );
        }
        let unknown = message::encode_header(&serde_json::json!({
            "code": "from-the-future", "message": "m", "extra": 1
        }));
        assert_eq!(
            decode_error(&unknown).unwrap(),
            DecodedError::Unknown {
                code: "from-the-future".into(),
                message: "m".into()
            }
        );
        let missing = message::encode_header(&serde_json::json!({
            "code": "unavailable", "message": "m"
        }));
        assert!(decode_error(&missing).is_err());
    }

    #[test]
    fn the_deadline_travels_as_time_left() {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(5);
        let Some(Request::Current { deadline: decoded }) =
            Request::decode(method::CURRENT, &encode_current(deadline)).unwrap()
        else {
            panic!("current decodes");
        };
        // The time left is rounded down when encoded and counted from the decode, so the
        // decoded deadline is late by at most the time between the two (a loaded machine
        // can take milliseconds).
        assert!(decoded <= deadline + start.elapsed());
        assert!(decoded + Duration::from_secs(1) > deadline);
        assert_eq!(Request::decode("open", b"").unwrap(), None);
    }
}
