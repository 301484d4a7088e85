//! What delivery calls report: what the remote named, what is known of the intent's one push.

use crate::canonical::{Digest, Value, object};
use crate::git_object::ObjectId;

use super::super::integration::ObservationStamp;

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

/// The result of `invoke_delivery` and `inspect_delivery`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryObservation {
    /// The payload digest.
    pub intent: Digest,
    /// Which observation this is and when it was read.
    pub observation: ObservationStamp,
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
    /// The local claim D, if one exists.
    pub dispatch: Option<ObjectId>,
    /// The local receipt R, if one exists.
    pub receipt: Option<ObjectId>,
    /// What is known of the intent's one push.
    pub invocation: DeliveryInvocation,
    /// True only for the call that started the push.
    pub dispatched: bool,
    /// Why the outcome is not plain; `None` otherwise.
    pub problem: Option<String>,
}

impl DeliveryObservation {
    /// Whether the remote, as read, names M at the delivered ref.
    pub fn postcondition(&self) -> &'static str {
        match &self.reading {
            RemoteReading::Read {
                target: Some(target),
                ..
            } if *target == self.commit => "desired-state-observed",
            RemoteReading::Read { .. } => "not-observed",
            RemoteReading::Unreadable(_) => "unknown",
        }
    }

    /// The observation as JSON: `{intent, observation: {id, at}, remote, ref, commit, tag,
    /// read: {target, marker} | null, postcondition, dispatch, receipt, invocation,
    /// dispatched, problem}`, object ids as hex.
    pub fn to_value(&self) -> Value {
        let hex = |id: &Option<ObjectId>| Value::from(id.map(|id| id.to_hex()));
        let read = match &self.reading {
            RemoteReading::Read { target, marker } => {
                object([("target", hex(target)), ("marker", hex(marker))])
            }
            RemoteReading::Unreadable(_) => Value::Null,
        };
        object([
            ("intent", self.intent.to_string().into()),
            (
                "observation",
                object([
                    ("id", self.observation.id.as_str().into()),
                    ("at", self.observation.at.as_str().into()),
                ]),
            ),
            ("remote", self.remote.as_str().into()),
            ("ref", self.remote_ref.as_str().into()),
            ("commit", self.commit.to_hex().into()),
            ("tag", self.tag.to_hex().into()),
            ("read", read),
            ("postcondition", self.postcondition().into()),
            ("dispatch", hex(&self.dispatch)),
            ("receipt", hex(&self.receipt)),
            ("invocation", self.invocation.as_str().into()),
            ("dispatched", Value::Bool(self.dispatched)),
            ("problem", self.problem.clone().into()),
        ])
    }
}
