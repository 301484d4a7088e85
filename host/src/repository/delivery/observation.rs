//! What delivery calls report: what the remote named, what is known of the intent's one push.

use crate::canonical::{Value, object};
use crate::git_object::ObjectId;

use super::super::at_most_once::{Observation, View, hex};

/// What is known of the one push a delivery intent may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryInvocation {
    /// No claim exists (or this call made none): nothing was or will be pushed for this
    /// intent by what was read.
    NotDispatched,
    /// The push landed: the remote's marker names this intent's tag (a local receipt says so,
    /// or the remote was read and showed it).
    Confirmed,
    /// The remote refused the push for certain; nothing was updated there. A new push needs
    /// a new occurrence.
    Refused,
    /// A claim exists and neither a receipt nor the remote shows the outcome: the push may or
    /// may not have landed. Never licenses a retry.
    Unknown,
    /// This call held the claim and its guard withheld the push: nothing was sent.
    Withheld,
}

impl DeliveryInvocation {
    /// The kebab-case word the observation records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotDispatched => "not-dispatched",
            Self::Confirmed => "confirmed",
            Self::Refused => "refused",
            Self::Unknown => "unknown",
            Self::Withheld => "withheld",
        }
    }
}

/// What the remote named when read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemoteReading {
    /// The remote answered: the ref's and the marker's values (`None`: absent).
    Read {
        /// The delivered ref.
        target: Option<ObjectId>,
        /// The marker ref.
        marker: Option<ObjectId>,
    },
    /// The remote could not be read; why.
    Unreadable(String),
}

/// What a delivery observation shows of the remote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteView {
    /// The remote's URL.
    pub remote: String,
    /// The remote ref delivered to.
    pub remote_ref: String,
    /// The commit M delivered.
    pub commit: ObjectId,
    /// The marker tag's id.
    pub tag: ObjectId,
    /// What the remote named when this call read it.
    pub reading: RemoteReading,
}

impl View for RemoteView {
    type Invocation = DeliveryInvocation;
    // The local receipt R.
    type Receipt = ObjectId;

    const WITHHELD: DeliveryInvocation = DeliveryInvocation::Withheld;

    fn fields(&self) -> Vec<(&'static str, Value)> {
        let read = match &self.reading {
            RemoteReading::Read { target, marker } => {
                object([("target", hex(*target)), ("marker", hex(*marker))])
            }
            RemoteReading::Unreadable(_) => Value::Null,
        };
        vec![
            ("remote", self.remote.as_str().into()),
            ("ref", self.remote_ref.as_str().into()),
            ("commit", self.commit.to_hex().into()),
            ("tag", self.tag.to_hex().into()),
            ("read", read),
        ]
    }

    fn receipt_value(receipt: &ObjectId) -> Value {
        receipt.to_hex().into()
    }

    fn word(invocation: DeliveryInvocation) -> &'static str {
        invocation.as_str()
    }
}

/// The result of `invoke_delivery` and `inspect_delivery`: `{intent, observation: {id, at},
/// remote, ref, commit, tag, read: {target, marker} | null, postcondition, dispatch, receipt,
/// invocation, dispatched, problem}` as JSON, `read` being what the remote named when the
/// call read it (`null`: unreadable).
pub type DeliveryObservation = Observation<RemoteView>;

impl Observation<RemoteView> {
    /// Whether the remote, as read, names M at the delivered ref: `desired-state-observed`,
    /// `not-observed`, or `unknown` when it could not be read.
    pub fn postcondition(&self) -> &'static str {
        self.postcondition.as_str()
    }
}
