//! What integration calls report: the observation, its postcondition and invocation, and
//! the stamp that names when it was read.

use std::time::SystemTime;

use crate::canonical::{Digest, Value, object};
use crate::git_object::ObjectId;

/// What a call saw of the target after, or instead of, an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Postcondition {
    /// The target named M when read. Not attribution: it does not show who wrote M.
    DesiredStateObserved,
    /// The target named something else when read.
    NotObserved,
    /// The target could not be read.
    Unknown,
}

impl Postcondition {
    /// The kebab-case word the observation records (`desired-state-observed`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DesiredStateObserved => "desired-state-observed",
            Self::NotObserved => "not-observed",
            Self::Unknown => "unknown",
        }
    }
}

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

/// When and as which observation a result was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservationStamp {
    /// 32 lowercase hex characters, fresh for each observation.
    pub id: String,
    /// UTC, RFC 3339 with milliseconds.
    pub at: String,
}

/// The result of `invoke_once` and `inspect_integration`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrationObservation {
    /// The payload digest (not the intent commit).
    pub intent: Digest,
    /// Which observation this is and when it was read.
    pub observation: ObservationStamp,
    /// The target ref the intent moves (`ref` in the record).
    pub target_ref: String,
    /// The target as read (`None` when it could not be read).
    pub target: Option<ObjectId>,
    /// Whether the target, as read, names the Candidate's commit M.
    pub postcondition: Postcondition,
    /// The claim D, if one exists.
    pub dispatch: Option<ObjectId>,
    /// The receipt R, if one exists (or, for the call that moved the target, if it could be
    /// written).
    pub receipt: Option<IntegrationReceipt>,
    /// What is known of the intent's one invocation.
    pub invocation: Invocation,
    /// True only for the call that started the update.
    pub dispatched: bool,
    /// Why the outcome is not plain: a stale base, a withheld update, an unknown result or a
    /// receipt that could not be written; `None` otherwise.
    pub problem: Option<String>,
}

impl IntegrationObservation {
    /// The observation as JSON: `{intent, observation: {id, at}, ref, target, postcondition,
    /// dispatch, receipt: {id, target}, invocation, dispatched, problem}`, object ids as hex.
    pub fn to_value(&self) -> Value {
        let hex = |id: &Option<ObjectId>| Value::from(id.map(|id| id.to_hex()));
        object([
            ("intent", self.intent.to_string().into()),
            (
                "observation",
                object([
                    ("id", self.observation.id.as_str().into()),
                    ("at", self.observation.at.as_str().into()),
                ]),
            ),
            ("ref", self.target_ref.as_str().into()),
            ("target", hex(&self.target)),
            ("postcondition", self.postcondition.as_str().into()),
            ("dispatch", hex(&self.dispatch)),
            (
                "receipt",
                self.receipt.as_ref().map_or(Value::Null, |receipt| {
                    object([
                        ("id", receipt.id.to_hex().into()),
                        ("target", receipt.target.to_hex().into()),
                    ])
                }),
            ),
            ("invocation", self.invocation.as_str().into()),
            ("dispatched", Value::Bool(self.dispatched)),
            ("problem", self.problem.clone().into()),
        ])
    }
}

/// What one call read or did, before it is stamped as an observation.
pub(super) struct Seen {
    pub target: Option<ObjectId>,
    pub postcondition: Postcondition,
    pub dispatch: Option<ObjectId>,
    pub receipt: Option<IntegrationReceipt>,
    pub invocation: Invocation,
    pub dispatched: bool,
    pub problem: Option<String>,
}

/// RFC 3339 UTC with milliseconds, from the system clock.
pub(in crate::repository) fn now_rfc3339() -> String {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = since.as_secs();
    let (days, rest) = ((seconds / 86_400) as i64, seconds % 86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        let at = now_rfc3339();
        assert_eq!(at.len(), 24, "{at}");
        assert!(at.ends_with('Z') && at.as_bytes()[10] == b'T', "{at}");
        assert!(
            at.as_str() > "2025-01-01" && at.as_str() < "2200-01-01",
            "{at}"
        );
    }
}
