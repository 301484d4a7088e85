//! A proposal's state in the queue: where it is on its way from the request to the remote,
//! as the API reports it. Final states never change again.

/// Where a proposal is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Stored, waiting for its repository's worker.
    Queued,
    /// Its Slice being frozen on the current target and the proposal sealed as a Candidate.
    Sealing,
    /// Its checks running in the sandbox.
    Collecting,
    /// Judged; the target (and the remote) being moved.
    Landing,
    /// Integrated and delivered to the base's upstream.
    Delivered,
    /// Integrated, no delivery configured.
    Landed,
    /// Judged Failed, or its delivery could not be confirmed.
    Failed,
    /// Judged Inconclusive, or no Verdict could be issued.
    Inconclusive,
    /// The proposal, or its base, was refused before anything was collected.
    Refused,
    /// Nothing was dispatched: the target or the remote no longer named the base.
    NotDispatched,
}

/// Every state, in the order pages and metrics list them.
pub const ALL: [State; 10] = [
    State::Queued,
    State::Sealing,
    State::Collecting,
    State::Landing,
    State::Delivered,
    State::Landed,
    State::Failed,
    State::Inconclusive,
    State::Refused,
    State::NotDispatched,
];

impl State {
    /// The state's word in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Sealing => "sealing",
            Self::Collecting => "collecting",
            Self::Landing => "landing",
            Self::Delivered => "delivered",
            Self::Landed => "landed",
            Self::Failed => "failed",
            Self::Inconclusive => "inconclusive",
            Self::Refused => "refused",
            Self::NotDispatched => "not-dispatched",
        }
    }

    /// The state `word` names.
    pub fn parse(word: &str) -> Option<Self> {
        ALL.into_iter().find(|state| state.as_str() == word)
    }

    /// Whether the proposal is done: nothing more happens to it.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            Self::Queued | Self::Sealing | Self::Collecting | Self::Landing
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_names_its_state_and_four_are_not_final() {
        for state in ALL {
            assert_eq!(State::parse(state.as_str()), Some(state));
        }
        assert_eq!(ALL.iter().filter(|state| !state.is_final()).count(), 4);
        assert_eq!(State::parse("withheld"), None);
    }
}
