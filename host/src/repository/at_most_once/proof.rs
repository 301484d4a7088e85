//! The proof an effect takes: only a Verified Candidate moves a target or is pushed, and only
//! the intent its proof admits.

use crate::judging::{Admits, Verified};

use super::super::error::RepositoryError;

/// Refuses, before anything is read or written, an intent (`intent`: what its payload names)
/// that `proof` does not admit.
pub(in crate::repository) fn check_admitted(
    proof: &Verified,
    intent: &Admits,
) -> Result<(), RepositoryError> {
    match proof.admits().refusal(intent) {
        None => Ok(()),
        Some(rule) => Err(RepositoryError::invalid("the prepared intent", rule)),
    }
}
