//! The `fence` contract on the wire (since ABI minor [`SINCE_MINOR`]): a fence instance's two
//! methods, a hold instance's two, and the error encoding that keeps every [`FenceError`]
//! code and field.
//!
//! | instance | method | request header | answer header |
//! |---|---|---|---|
//! | fence | `acquire` | `{candidate, product}` | `{attempt:{epoch,product}}`, and a new instance: the hold |
//! | fence | `last-epoch` | `{product}` | `{epoch}` |
//! | hold | `assert-active` | `{}` | `{}` |
//! | hold | `release` | `{}` | `{}` |
//!
//! A hold is an instance of its own, made by `acquire` (as an object store factory's `open`
//! makes a store); dropping it releases the hold. `acquire`'s `candidate` (the Candidate
//! digest, since ABI minor [`CANDIDATE_SINCE_MINOR`]) is sent only to a plugin of that minor
//! or later; an older plugin is sent `{product}` and takes the whole Product's fence, which
//! excludes every other attempt on the Product (stricter, never looser). The host side checks what a plugin answers
//! as it checks any fence (`sf_host::fence`): the hold must be for the Product asked for,
//! with a valid epoch, and a hold that cannot be confirmed is lost.

use serde::{Deserialize, Serialize};

use crate::contracts::canonical::Digest;
use crate::contracts::{AttemptId, FenceError};
use crate::message::{self, MessageError};
use crate::protocol;

protocol::wire_contract! {
    /// The `fence` contract, as the host and the sdk name it.
    FenceContract: "fence", FenceError
}

/// The ABI minor that added the contract: the host refuses to instantiate it from a plugin
/// built with an older one.
pub const SINCE_MINOR: u32 = 9;

/// The ABI minor that keyed holds by Candidate: `acquire`'s `candidate`.
pub const CANDIDATE_SINCE_MINOR: u32 = 13;

/// The method names, as sent in `call`.
pub mod method {
    /// [`AttemptFence::acquire`](crate::contracts::AttemptFence::acquire), on a fence.
    pub const ACQUIRE: &str = "acquire";
    /// [`AttemptFence::last_epoch`](crate::contracts::AttemptFence::last_epoch), on a fence.
    pub const LAST_EPOCH: &str = "last-epoch";
    /// [`FenceHold::assert_active`](crate::contracts::FenceHold::assert_active), on a hold.
    pub const ASSERT_ACTIVE: &str = "assert-active";
    /// [`FenceHold::release`](crate::contracts::FenceHold::release), on a hold.
    pub const RELEASE: &str = "release";
}

/// A request to a fence instance, as the plugin side decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FenceRequest {
    /// `acquire`.
    Acquire {
        /// The Product whose fence to take.
        product: String,
        /// The Candidate the hold is for; `None` from a host older than
        /// [`CANDIDATE_SINCE_MINOR`].
        candidate: Option<Digest>,
    },
    /// `last-epoch`.
    LastEpoch {
        /// The Product asked about.
        product: String,
    },
}

impl FenceRequest {
    /// Decodes the request of `method`. `Ok(None)`: the method is not a fence's.
    pub fn decode(method: &str, bytes: &[u8]) -> Result<Option<Self>, MessageError> {
        let product = || -> Result<String, MessageError> {
            message::decode_header(bytes).map(|header: ProductHeader| header.product)
        };
        Ok(Some(match method {
            method::ACQUIRE => {
                let header: AcquireHeader = message::decode_header(bytes)?;
                Self::Acquire {
                    product: header.product,
                    candidate: header.candidate,
                }
            }
            method::LAST_EPOCH => Self::LastEpoch {
                product: product()?,
            },
            _ => return Ok(None),
        }))
    }
}

/// A request to a hold instance, as the plugin side decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldRequest {
    /// `assert-active`.
    AssertActive,
    /// `release`.
    Release,
}

impl HoldRequest {
    /// Decodes the request of `method`. `Ok(None)`: the method is not a hold's.
    pub fn decode(method: &str, bytes: &[u8]) -> Result<Option<Self>, MessageError> {
        let request = match method {
            method::ASSERT_ACTIVE => Self::AssertActive,
            method::RELEASE => Self::Release,
            _ => return Ok(None),
        };
        protocol::Empty::decode(bytes)?;
        Ok(Some(request))
    }
}

/// The request of `acquire` for Candidate `candidate` of `product`; `None` for a plugin older
/// than [`CANDIDATE_SINCE_MINOR`] (the whole Product's fence).
pub fn encode_acquire(product: &str, candidate: Option<&Digest>) -> Vec<u8> {
    message::encode_header(&AcquireHeader {
        product: product.to_owned(),
        candidate: candidate.cloned(),
    })
}

/// The request of `last-epoch` (and of `acquire` before [`CANDIDATE_SINCE_MINOR`]).
pub fn encode_product(product: &str) -> Vec<u8> {
    message::encode_header(&ProductHeader {
        product: product.to_owned(),
    })
}

/// The answer of `acquire`: the hold's attempt (the hold itself is the new instance).
pub fn encode_attempt(attempt: &AttemptId) -> Vec<u8> {
    message::encode_header(&AttemptAnswer {
        attempt: attempt.clone(),
    })
}

/// Decodes the answer of `acquire`.
pub fn decode_attempt(bytes: &[u8]) -> Result<AttemptId, MessageError> {
    message::decode_header(bytes).map(|answer: AttemptAnswer| answer.attempt)
}

/// The answer of `last-epoch`.
pub fn encode_epoch(epoch: u64) -> Vec<u8> {
    message::encode_header(&EpochAnswer { epoch })
}

/// Decodes the answer of `last-epoch`.
pub fn decode_epoch(bytes: &[u8]) -> Result<u64, MessageError> {
    message::decode_header(bytes).map(|answer: EpochAnswer| answer.epoch)
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProductHeader {
    product: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireHeader {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    candidate: Option<Digest>,
    product: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AttemptAnswer {
    attempt: AttemptId,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EpochAnswer {
    epoch: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_round_trip() {
        let candidate = Digest::of(b"c");
        assert_eq!(
            FenceRequest::decode(method::ACQUIRE, &encode_acquire("p", Some(&candidate))).unwrap(),
            Some(FenceRequest::Acquire {
                product: "p".into(),
                candidate: Some(candidate),
            })
        );
        // What an older host sends.
        assert_eq!(
            FenceRequest::decode(method::ACQUIRE, &encode_product("p")).unwrap(),
            Some(FenceRequest::Acquire {
                product: "p".into(),
                candidate: None,
            })
        );
        assert_eq!(
            FenceRequest::decode(method::LAST_EPOCH, &encode_product("p")).unwrap(),
            Some(FenceRequest::LastEpoch {
                product: "p".into()
            })
        );
        assert_eq!(FenceRequest::decode("steal", b"").unwrap(), None);
        let empty = protocol::Empty::encode();
        assert_eq!(
            HoldRequest::decode(method::RELEASE, &empty).unwrap(),
            Some(HoldRequest::Release)
        );
        assert_eq!(HoldRequest::decode(method::ACQUIRE, &empty).unwrap(), None);
        let attempt = AttemptId {
            product: "p".into(),
            epoch: 7,
        };
        assert_eq!(decode_attempt(&encode_attempt(&attempt)).unwrap(), attempt);
        assert_eq!(decode_epoch(&encode_epoch(9)).unwrap(), 9);
        // An epoch of 0 is no attempt's.
        let zero = message::encode_header(&serde_json::json!({
            "attempt": {"epoch": 0, "product": "p"}
        }));
        assert!(decode_attempt(&zero).is_err());
    }

    #[test]
    fn errors_round_trip_with_every_field() {
        for error in [
            FenceError::InvalidInput {
                input: "product \"\"".into(),
                rule: "r".into(),
            },
            FenceError::Busy {
                product: "p".into(),
            },
            FenceError::Released {
                attempt: "p@1".into(),
                reason: "r".into(),
            },
            FenceError::Unavailable { reason: "r".into() },
            FenceError::Corrupt { what: "w".into() },
        ] {
            assert_eq!(
                decode_error(&encode_error(&error)).unwrap(),
                DecodedError::Known(error)
            );
        }
    }
}
