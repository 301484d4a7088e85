//! The start marker: the CAS blob whose presence says that a worker started a run's Action.
//!
//! An engine retries an Action whose worker or lease it lost (BuildGrid 0.4.4 up to five
//! times, whatever its configuration says), so "a check runs once" cannot be left to the
//! engine: an sf worker writes the marker of the Action it holds, and has the CAS confirm it,
//! before the program starts, and refuses an Action whose marker is already there. Every run's
//! Action has a fresh salt (its nonce, [`crate::action`]), so the marker of one run is never
//! another run's, while an engine's retry of the same run finds it.
//!
//! The marker's bytes are a line naming the protocol and the Action's digest: a blob no
//! other producer makes, and one any worker can compute from the Action it was given.

use crate::digest;
use crate::proto::execution::Digest;

/// The protocol string the marker's line starts with.
pub const PROTOCOL: &str = "sf-run-started/1";

/// The marker's bytes for the Action `action`.
pub fn bytes(action: &Digest) -> Vec<u8> {
    format!("{PROTOCOL} {}\n", digest::text(action)).into_bytes()
}

/// The marker's digest for the Action `action`: what a worker looks for in the CAS.
pub fn digest(action: &Digest) -> Digest {
    digest::of(&bytes(action))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_has_a_marker_of_its_own() {
        let first = digest::of(b"one action");
        let second = digest::of(b"another action");
        assert_ne!(digest(&first), digest(&second));
        assert_eq!(digest(&first), digest(&first), "a retry finds it");
        assert!(
            String::from_utf8(bytes(&first))
                .unwrap()
                .starts_with(PROTOCOL)
        );
    }
}
