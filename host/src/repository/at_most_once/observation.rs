//! What an effect's invoke and inspect calls report: the observation every effect shares (the
//! intent, the stamp of the reading, the postcondition, the claim and receipt, what is known of
//! the one invocation, whether this call started it, and why the outcome is not plain), around
//! the effect's own view of its place.

use std::fmt::Debug;
use std::ops::Deref;
use std::time::SystemTime;

use crate::canonical::{Digest, Value, object};
use crate::git_object::ObjectId;

use super::super::Repository;
use super::super::error::RepositoryError;
use super::super::random_nonce;

/// When and as which observation a result was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservationStamp {
    /// 32 lowercase hex characters, fresh for each observation.
    pub id: String,
    /// UTC, RFC 3339 with milliseconds.
    pub at: String,
}

/// What a call saw of the effect's place (the target, the remote ref) after, or instead of,
/// the effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Postcondition {
    /// The place named M when read. Not attribution: it does not show who wrote M.
    DesiredStateObserved,
    /// The place named something else (or nothing) when read.
    NotObserved,
    /// The place could not be read.
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

    /// What a place read as `named` (`None`: it could not be read; `Some(None)`: absent)
    /// shows of the desired `commit`.
    pub(in crate::repository) fn of(named: Option<Option<ObjectId>>, commit: ObjectId) -> Self {
        match named {
            Some(Some(id)) if id == commit => Self::DesiredStateObserved,
            Some(_) => Self::NotObserved,
            None => Self::Unknown,
        }
    }
}

/// One effect's own view of its place in an observation, and its words for the rest.
pub trait View: Clone + Debug + PartialEq + Eq {
    /// What is known of the one invocation an intent may have, in this effect's words.
    type Invocation: Copy + Debug + PartialEq + Eq;
    /// A receipt as the observation shows it.
    type Receipt: Clone + Debug + PartialEq + Eq;

    /// This call held the claim and the gate withheld the effect: nothing was started.
    const WITHHELD: Self::Invocation;

    /// The view's own fields as JSON.
    fn fields(&self) -> Vec<(&'static str, Value)>;
    /// `receipt` as JSON.
    fn receipt_value(receipt: &Self::Receipt) -> Value;
    /// The kebab-case word the observation records for `invocation`.
    fn word(invocation: Self::Invocation) -> &'static str;
}

/// The result of an effect's invoke and inspect calls. The effect's own fields are its
/// view's, and read as the observation's own (`observation.target`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation<V: View> {
    /// The payload digest (not the intent commit).
    pub intent: Digest,
    /// Which observation this is and when it was read.
    pub observation: ObservationStamp,
    /// Whether the effect's place, as read, names the Candidate's commit M.
    pub postcondition: Postcondition,
    /// The claim D, if one exists.
    pub dispatch: Option<ObjectId>,
    /// The receipt R, if one exists (or, for the call that started the effect, if it could
    /// be written).
    pub receipt: Option<V::Receipt>,
    /// What is known of the intent's one invocation.
    pub invocation: V::Invocation,
    /// True only for the call that started the effect.
    pub dispatched: bool,
    /// Why the outcome is not plain (a precondition that did not hold, a withheld effect,
    /// an unknown result, a receipt that could not be written); `None` otherwise.
    pub problem: Option<String>,
    /// What the effect's place showed, in the effect's terms.
    pub view: V,
}

impl<V: View> Deref for Observation<V> {
    type Target = V;

    fn deref(&self) -> &V {
        &self.view
    }
}

impl<V: View> Observation<V> {
    /// The observation as JSON: `{intent, observation: {id, at}, postcondition, dispatch,
    /// receipt, invocation, dispatched, problem}` and the view's fields, object ids as hex.
    pub fn to_value(&self) -> Value {
        let mut value = object([
            ("intent", self.intent.to_string().into()),
            (
                "observation",
                object([
                    ("id", self.observation.id.as_str().into()),
                    ("at", self.observation.at.as_str().into()),
                ]),
            ),
            ("postcondition", self.postcondition.as_str().into()),
            ("dispatch", hex(self.dispatch)),
            (
                "receipt",
                self.receipt.as_ref().map_or(Value::Null, V::receipt_value),
            ),
            ("invocation", V::word(self.invocation).into()),
            ("dispatched", Value::Bool(self.dispatched)),
            ("problem", self.problem.clone().into()),
        ]);
        if let Value::Object(fields) = &mut value {
            fields.extend(
                self.view
                    .fields()
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value)),
            );
        }
        value
    }
}

/// An object id as JSON: its hex, or null.
pub(in crate::repository) fn hex(id: Option<ObjectId>) -> Value {
    Value::from(id.map(|id| id.to_hex()))
}

impl Repository {
    /// A fresh stamp for an observation read now.
    pub(in crate::repository) fn stamp(&self) -> Result<ObservationStamp, RepositoryError> {
        Ok(ObservationStamp {
            id: random_nonce()?,
            at: now_rfc3339(),
        })
    }
}

/// RFC 3339 UTC with milliseconds, from the system clock.
fn now_rfc3339() -> String {
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
