//! What integration calls report: the observation of the target and of the intent's one
//! invocation.

use crate::canonical::{Value, object};
use crate::git_object::ObjectId;

use super::super::at_most_once::{Observation, View, hex};

/// What is known of the one invocation an intent may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// No claim exists: nothing was or will be started for this intent by what was read.
    NotDispatched,
    /// The update was confirmed (git's success and a readback of exactly M).
    Confirmed,
    /// A claim exists without a receipt: the update may or may not have happened. Never
    /// licenses a retry.
    Unknown,
    /// This call held the claim and its guard withheld the update: nothing was started. Only
    /// the call that withheld reports it; elsewhere the claim reads as unknown.
    Withheld,
}

impl Invocation {
    /// The kebab-case word the observation records (`not-dispatched`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotDispatched => "not-dispatched",
            Self::Confirmed => "confirmed",
            Self::Unknown => "unknown",
            Self::Withheld => "withheld",
        }
    }
}

/// A retained receipt: the receipt commit R and the target it confirms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrationReceipt {
    /// The receipt commit R (its parent is the claim D).
    pub id: ObjectId,
    /// The commit the receipt says the target was moved to: the Candidate's commit M.
    pub target: ObjectId,
}

/// What a call read of the target.
pub(super) enum TargetReading {
    /// The target named this commit.
    Named(ObjectId),
    /// The target could not be read; why.
    Unreadable(String),
}

/// What an integration observation shows of the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetView {
    /// The target ref the intent moves (`ref` in the record).
    pub target_ref: String,
    /// The target as read (`None` when it could not be read).
    pub target: Option<ObjectId>,
}

impl View for TargetView {
    type Invocation = Invocation;
    type Receipt = IntegrationReceipt;

    const WITHHELD: Invocation = Invocation::Withheld;

    fn fields(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("ref", self.target_ref.as_str().into()),
            ("target", hex(self.target)),
        ]
    }

    fn receipt_value(receipt: &IntegrationReceipt) -> Value {
        object([
            ("id", receipt.id.to_hex().into()),
            ("target", receipt.target.to_hex().into()),
        ])
    }

    fn word(invocation: Invocation) -> &'static str {
        invocation.as_str()
    }
}

/// The result of `invoke_once` and `inspect_integration`: `{intent, observation: {id, at},
/// ref, target, postcondition, dispatch, receipt: {id, target}, invocation, dispatched,
/// problem}` as JSON. Its `problem` names a stale base, a withheld update, an unknown result
/// or a receipt that could not be written.
pub type IntegrationObservation = Observation<TargetView>;
