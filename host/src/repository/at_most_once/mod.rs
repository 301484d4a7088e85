//! The at-most-once protocol, written once for every effect sf has on the world: an immutable
//! intent, a create-only claim, the gate immediately before, exactly one effect, a receipt
//! once its outcome is certain, and inspection that never writes. Whatever happens (repeats,
//! concurrent processes, restarts, kills) the effect starts at most once per prepared intent,
//! and an outcome that cannot be known is reported as unknown, never as failed.
//!
//! Stored layout, per effect: `<prefix><key>/{intent,dispatch,receipt}`, where `<key>` is the
//! SHA-256 of the canonical `{protocol, action}` (with the repository's nonce for an effect
//! keyed by repository), so action ids never shape ref names. All three refs are create-only.
//!
//! - intent I: commit over the tree `{payload.json}`, no parent: the canonical payload.
//! - dispatch D: commit over the empty tree, parent I, with a fresh random nonce: the claim.
//! - receipt R: commit over the empty tree, parent D, saying how the effect ended.
//!
//! An effect ([`Effect`]) gives what truly differs: its payload, the place it acts on and how
//! that place is read, the precondition, the effect itself and how its answer is classified,
//! and the observation its calls report. Integration (a compare-and-swap of the target ref)
//! and delivery (an atomic push to a remote) are its two instances.

mod claim;
mod engine;
mod guard;
mod intent;
mod messages;
mod observation;
mod payload;
mod prepared;
mod proof;
mod receipt;
mod refs;

use crate::fault::FaultPoint;
use crate::git_object::ObjectId;

use super::Repository;
use super::error::RepositoryError;

pub use guard::{MALFORMED_GUARD_ANSWER, consult};
pub(in crate::repository) use messages::{dispatch_message, intent_message, receipt_head};
pub(in crate::repository) use observation::hex;
pub use observation::{Observation, ObservationStamp, Postcondition, View};
pub use payload::{Action, EffectPayload, Owner, Wording};
pub(in crate::repository) use payload::{canonical_payload, check_effect_fields};
pub use prepared::Prepared;
pub use refs::IntentRefs;
pub(in crate::repository) use refs::effect_key;

/// How an effect's observations show its place.
pub(in crate::repository) type ViewOf<E> = <<E as Effect>::Payload as EffectPayload>::View;
/// What is known of an effect's invocation, in its view's words.
pub(in crate::repository) type InvocationOf<E> = <ViewOf<E> as View>::Invocation;
/// What a receipt of an effect says.
pub(in crate::repository) type OutcomeOf<E> = <<E as Effect>::Payload as EffectPayload>::Outcome;

/// The fault points an effect fires, each where the engine reaches its moment.
#[derive(Clone, Copy, Debug)]
pub(in crate::repository) struct Faults {
    /// The gate withheld the effect after the claim, if the effect has a point for that.
    pub withheld: Option<FaultPoint>,
    /// The claim was acknowledged.
    pub claimed: FaultPoint,
    /// The effect is about to start.
    pub submitted: FaultPoint,
    /// The effect ended, its place was read back, and a receipt write (if any) was
    /// attempted, so a process killed there has retained what inspection needs.
    pub acknowledged: FaultPoint,
    /// Which ended effects reach `acknowledged`.
    pub acknowledges: Acknowledges,
}

/// Which started effects reach their acknowledged point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::repository) enum Acknowledges {
    /// Only those whose outcome was certain enough for a receipt.
    WithReceipt,
    /// Every one.
    Every,
}

/// What a call may do once it read the effect's place before a claim.
pub(in crate::repository) enum Before<E: Effect> {
    /// Claim and start: the reading, and everything the effect needs, read and checked.
    Ready(E::Reading, E::Ready),
    /// Make no claim: the reading, and the precondition that does not hold.
    Refused(E::Reading, String),
}

/// What one started effect gave: its place read back, what is known of the invocation, what
/// a receipt must say when the outcome is certain, and why the outcome is not plain.
pub(in crate::repository) struct Applied<E: Effect> {
    /// The place as read back after the effect.
    pub reading: E::Reading,
    /// What is known of the invocation.
    pub invocation: InvocationOf<E>,
    /// What the receipt says; `None`: the outcome is not certain, and no receipt is written.
    pub outcome: Option<OutcomeOf<E>>,
    /// Why the outcome is not plain; `None` otherwise.
    pub problem: Option<String>,
}

/// One effect of one prepared intent, guarded by the protocol: what it acts on and how it
/// reads that place, what it needs before the claim, how it runs and how its answer is
/// classified, and how its calls show what they saw.
pub(in crate::repository) trait Effect: Sized {
    /// The payload its intents retain.
    type Payload: EffectPayload;
    /// What the effect's place showed when read (a failure to read is part of it).
    type Reading;
    /// Everything the effect needs to start, read and checked before the claim.
    type Ready;

    /// Its fault points.
    const FAULTS: Faults;

    /// The intent the effect is for.
    fn prepared(&self) -> &Prepared<Self::Payload>;

    /// Reads the place for an observation.
    fn read(&self, repo: &Repository) -> Self::Reading;

    /// Reads the place before a claim and checks the precondition; when it holds, reads and
    /// checks everything the effect needs, so that a failure consumes nothing. `Err`:
    /// nothing was claimed.
    fn before(&self, repo: &Repository) -> Result<Before<Self>, RepositoryError>;

    /// Runs the effect exactly once, reads its place back and classifies the outcome. `Err`
    /// only when the effect was refused before it started; the claim stays either way.
    fn apply(
        &self,
        repo: &Repository,
        ready: Self::Ready,
    ) -> Result<Applied<Self>, RepositoryError>;

    /// What retained history (the receipt's outcome, whether a claim exists) and the
    /// `reading` say of the invocation, and why that is not plain.
    fn settle(
        &self,
        receipt: Option<&OutcomeOf<Self>>,
        claimed: bool,
        reading: &Self::Reading,
    ) -> (InvocationOf<Self>, Option<String>);

    /// What `reading` shows: whether the place names M, and the effect's view of it.
    fn shown(&self, reading: Self::Reading) -> (Postcondition, ViewOf<Self>);

    /// The receipt `id` saying `outcome`, as the observation shows it.
    fn receipt(&self, id: ObjectId, outcome: OutcomeOf<Self>) -> <ViewOf<Self> as View>::Receipt;
}
