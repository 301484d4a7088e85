//! The engine: invoke and inspect for any [`Effect`]. Invoke starts the effect at most once
//! (check, replay, precondition, claim, gate, effect, receipt); inspect reports retained
//! history and what the place shows, and never writes.

use crate::judging::Verified;

use super::proof::check_admitted;
use std::sync::Arc;

use crate::contracts::Gate;
use crate::git_object::ObjectId;

use super::super::Repository;
use super::super::error::RepositoryError;
use super::guard::consult;
use super::observation::{Observation, View};
use super::payload::EffectPayload;
use super::receipt::Receipt;
use super::refs::IntentRefs;
use super::{Acknowledges, Before, Effect, InvocationOf, OutcomeOf, ViewOf};

/// What one call read or did, before it is stamped as an observation.
struct Seen<E: Effect> {
    /// What the effect's place showed when this call read it.
    reading: E::Reading,
    /// The claim D, if one exists.
    dispatch: Option<ObjectId>,
    /// The receipt R and what it says, if one exists (or this call could write it).
    receipt: Option<Receipt<E::Payload>>,
    /// What is known of the intent's one invocation.
    invocation: InvocationOf<E>,
    /// True only for the call that started the effect.
    dispatched: bool,
    /// Why the outcome is not plain; `None` otherwise.
    problem: Option<String>,
}

impl<E: Effect> Seen<E> {
    /// What a call that started nothing saw: `reading`, no receipt, `invocation`, `problem`.
    fn unstarted(reading: E::Reading, invocation: InvocationOf<E>, problem: String) -> Self {
        Self {
            reading,
            dispatch: None,
            receipt: None,
            invocation,
            dispatched: false,
            problem: Some(problem),
        }
    }
}

impl Repository {
    /// Starts `effect` at most once for its intent. A replay, a precondition that does not
    /// hold or a lost claim starts nothing and reports what it reads; the claim holder
    /// consults `gate` once, then starts the effect. Returns `Err` only when nothing was
    /// started; once the effect may have started, the outcome is an observation, with
    /// anything not proven reported as unknown.
    pub(in crate::repository) fn invoke_effect<E: Effect>(
        &self,
        effect: &E,
        proof: &Verified,
        gate: Option<Arc<dyn Gate>>,
    ) -> Result<Observation<ViewOf<E>>, RepositoryError> {
        let prepared = effect.prepared();
        check_admitted(proof, &prepared.payload.admitted())?;
        // The gate consulted after the claim: the proof's guard, then the operator's.
        let gate = Some(proof.guard(gate));
        let refs = self.check_retained(prepared)?;
        // A claim exists: replay, start nothing.
        if self.read_dispatch(&refs, prepared)?.is_some() {
            return self.inspect_effect(effect);
        }
        let (reading, ready) = match effect.before(self)? {
            Before::Ready(reading, ready) => (reading, ready),
            Before::Refused(reading, problem) => {
                // No claim was made: what history says without one, not-dispatched.
                let (invocation, _) = effect.settle(None, false, &reading);
                let seen = Seen::<E>::unstarted(reading, invocation, problem);
                return self.report(effect, seen);
            }
        };
        let Some(claim) = self.claim(&refs, prepared)? else {
            // Another call holds the claim: report what it left, start nothing.
            return self.inspect_effect(effect);
        };
        let faults = &self.options.faults;
        faults.reached(E::FAULTS.claimed);
        if let Some(gate) = gate
            && let Err(reason) = consult(gate, self.options.git_timeout)
        {
            if let Some(point) = E::FAULTS.withheld {
                faults.reached(point);
            }
            let problem = format!("withheld before submission: {reason}");
            let mut seen = Seen::<E>::unstarted(reading, ViewOf::<E>::WITHHELD, problem);
            seen.dispatch = Some(claim);
            return self.report(effect, seen);
        }
        self.start(effect, &refs, claim, ready)
    }

    /// Starts the effect as the holder of `claim`, once the gate allowed it: the one
    /// effect, its receipt when the outcome is certain, and the observation of both.
    fn start<E: Effect>(
        &self,
        effect: &E,
        refs: &IntentRefs,
        claim: ObjectId,
        ready: E::Ready,
    ) -> Result<Observation<ViewOf<E>>, RepositoryError> {
        self.options.faults.reached(E::FAULTS.submitted);
        let applied = effect.apply(self, ready)?;
        let written = self.acknowledge(effect, refs, claim, applied.outcome);
        let (receipt, problem) = match written {
            Ok(receipt) => (receipt, applied.problem),
            Err(why) => (
                None,
                Some(lost_receipt::<E::Payload>(applied.problem, &why)),
            ),
        };
        self.report(
            effect,
            Seen::<E> {
                reading: applied.reading,
                dispatch: Some(claim),
                receipt,
                invocation: applied.invocation,
                dispatched: true,
                problem,
            },
        )
    }

    /// Reports retained history and what the effect's place shows, read-only.
    pub(in crate::repository) fn inspect_effect<E: Effect>(
        &self,
        effect: &E,
    ) -> Result<Observation<ViewOf<E>>, RepositoryError> {
        let prepared = effect.prepared();
        let refs = self.check_retained(prepared)?;
        let reading = effect.read(self);
        let (dispatch, receipt) = self.history(&refs, prepared)?;
        let outcome = receipt.as_ref().map(|(_, outcome)| outcome);
        let (invocation, problem) = effect.settle(outcome, dispatch.is_some(), &reading);
        self.report(
            effect,
            Seen::<E> {
                reading,
                dispatch,
                receipt,
                invocation,
                dispatched: false,
                problem,
            },
        )
    }

    /// Writes the receipt of a started effect when its outcome is certain, then fires the
    /// acknowledged point (once the write was attempted, so that a process killed there has
    /// retained what inspection needs). Gives the receipt, if one was written; `Err` says why one that
    /// should have been could not be retained.
    fn acknowledge<E: Effect>(
        &self,
        effect: &E,
        refs: &IntentRefs,
        claim: ObjectId,
        outcome: Option<OutcomeOf<E>>,
    ) -> Result<Option<Receipt<E::Payload>>, String> {
        let written = outcome.map(|outcome| {
            self.retain_receipt(refs, effect.prepared(), claim, &outcome)
                .map(|id| (id, outcome))
        });
        if written.is_some() || E::FAULTS.acknowledges == Acknowledges::Every {
            self.options.faults.reached(E::FAULTS.acknowledged);
        }
        written.transpose()
    }

    /// Stamps what a call saw as the effect's observation.
    fn report<E: Effect>(
        &self,
        effect: &E,
        seen: Seen<E>,
    ) -> Result<Observation<ViewOf<E>>, RepositoryError> {
        let observation = self.stamp()?;
        let (postcondition, view) = effect.shown(seen.reading);
        Ok(Observation {
            intent: effect.prepared().digest.clone(),
            observation,
            postcondition,
            dispatch: seen.dispatch,
            receipt: seen
                .receipt
                .map(|(id, outcome)| effect.receipt(id, outcome)),
            invocation: seen.invocation,
            dispatched: seen.dispatched,
            problem: seen.problem,
            view,
        })
    }
}

/// The problem of an effect whose receipt could not be retained (`why`): the effect's own
/// `earlier` problem, if any, then the effect's wording of the loss.
fn lost_receipt<P: EffectPayload>(earlier: Option<String>, why: &str) -> String {
    format!(
        "{}{}the receipt was not retained: {why}",
        earlier
            .map(|problem| format!("{problem}; "))
            .unwrap_or_default(),
        P::WORDING.receipt_lost
    )
}
