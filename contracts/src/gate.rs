//! The Gate contract: asked "may this proceed now?", a gate answers proceed, or refuse with a
//! reason. Callers treat anything but an exact, timely proceed (an error, a malformed or late
//! answer, a panic) as a refusal; a gate cannot widen what it allows by failing.

use std::time::Instant;

use crate::error_fields::contract_error;

/// A gate's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateAnswer {
    /// Proceed now.
    Proceed,
    /// Do not proceed. Callers accept a reason of 1 to 256 printable ASCII characters and
    /// replace any other with a fixed one.
    Refuse { reason: String },
}

contract_error! {
    /// Why a gate gave no answer. Every variant is a refusal to the caller.
    #[derive(Clone, Debug, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum GateError {
        /// The gate's source could not be read or consulted.
        #[error("gate unavailable: {reason}")]
        "unavailable" Unavailable { reason: String },
        /// The gate's source said something that is neither an allowance nor a valid refusal.
        #[error("gate answer malformed: {what}")]
        "malformed" Malformed { what: String },
        /// The deadline passed before the gate could answer.
        #[error("gate did not answer before its deadline")]
        "timeout" Timeout,
    }
}

/// A source of permission, consulted immediately before an effect.
pub trait Gate: Send + Sync {
    /// The gate's answer now. `deadline` is when the caller stops waiting; an answer after it
    /// is ignored.
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError>;
}

/// Whether `reason` is an acceptable refusal reason: 1 to 256 printable ASCII characters.
pub fn is_valid_reason(reason: &str) -> bool {
    (1..=256).contains(&reason.len()) && reason.bytes().all(|b| (0x20..0x7f).contains(&b))
}
