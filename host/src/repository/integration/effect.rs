//! Integration as an at-most-once effect: one compare-and-swap of the repository's own target
//! ref from B to M, confirmed only by the store's answer; the target read back is reported,
//! never used to resolve an unknown outcome.

use crate::contracts::{RefName, RefUpdate};
use crate::fault::FaultPoint;
use crate::git_object::ObjectId;

use super::super::Repository;
use super::super::at_most_once::{Acknowledges, Applied, Before, Effect, Faults, Postcondition};
use super::super::error::RepositoryError;
use super::observation::{IntegrationReceipt, Invocation, TargetReading, TargetView};
use super::records::{IntegrationPayload, PreparedIntegration};

/// The effect of moving the target ref for `prepared`.
pub(super) struct Integration<'a> {
    /// The intent the move is for.
    pub prepared: &'a PreparedIntegration,
}

impl Effect for Integration<'_> {
    type Payload = IntegrationPayload;
    type Reading = TargetReading;
    // The target ref to move, parsed.
    type Ready = RefName;

    const FAULTS: Faults = Faults {
        withheld: Some(FaultPoint::IntegrationWithheld),
        claimed: FaultPoint::IntegrationClaimed,
        submitted: FaultPoint::IntegrationSubmitted,
        acknowledged: FaultPoint::IntegrationAcknowledged,
        // Only a confirmed update has a receipt, and only it is acknowledged.
        acknowledges: Acknowledges::WithReceipt,
    };

    fn read(&self, repo: &Repository) -> TargetReading {
        match repo.target() {
            Ok(target) => TargetReading::Named(target),
            Err(error) => TargetReading::Unreadable(error.to_string()),
        }
    }

    /// The target must name B; a target that cannot be read is an error, since nothing
    /// was claimed yet.
    fn before(&self, repo: &Repository) -> Result<Before<Self>, RepositoryError> {
        let target = repo.target()?;
        let base = self.prepared.payload.base;
        if target != base {
            let stale = format!(
                "stale base: the target names {target}, not the intent's base {base}; no claim was made"
            );
            return Ok(Before::Refused(TargetReading::Named(target), stale));
        }
        let name = RefName::parse(&repo.identity.target_ref)?;
        Ok(Before::Ready(TargetReading::Named(target), name))
    }

    /// Confirmed only when the store applied the update; anything else after submission is
    /// unknown, never failed.
    fn apply(&self, repo: &Repository, target: RefName) -> Result<Applied<Self>, RepositoryError> {
        let payload = &self.prepared.payload;
        // Err here means the store started nothing (its ownership check failed, say): the
        // claim stays, and the occurrence reads as unknown from now on.
        let outcome = repo.store.compare_and_swap_ref(
            &target,
            &payload.base,
            &payload.commit,
            repo.deadline(),
        )?;
        let after = self.read(repo);
        let unread = match &after {
            TargetReading::Unreadable(why) => format!("; target unreadable: {why}"),
            TargetReading::Named(_) => String::new(),
        };
        let (invocation, outcome, problem) = match outcome {
            RefUpdate::Applied => (Invocation::Confirmed, Some(()), None),
            RefUpdate::Refused { current } => (
                Invocation::Unknown,
                None,
                Some(format!(
                    "the update was not confirmed (the store refused; the target read {current:?}); unknown is not failed{unread}"
                )),
            ),
            RefUpdate::Unknown { reason } => (
                Invocation::Unknown,
                None,
                Some(format!("the update was not confirmed: {reason}{unread}")),
            ),
        };
        Ok(Applied {
            reading: after,
            invocation,
            outcome,
            problem,
        })
    }

    /// Confirmed if a receipt exists, unknown if only a claim does, not-dispatched otherwise:
    /// the target never resolves an unknown, whatever it names later.
    fn settle(
        &self,
        receipt: Option<&()>,
        claimed: bool,
        _: &TargetReading,
    ) -> (Invocation, Option<String>) {
        let invocation = match (receipt, claimed) {
            (Some(()), _) => Invocation::Confirmed,
            (None, true) => Invocation::Unknown,
            (None, false) => Invocation::NotDispatched,
        };
        (invocation, None)
    }

    fn shown(&self, reading: TargetReading) -> (Postcondition, TargetView) {
        let payload = &self.prepared.payload;
        let target = match reading {
            TargetReading::Named(target) => Some(target),
            TargetReading::Unreadable(_) => None,
        };
        let view = TargetView {
            // Checked to be this repository's before anything is read.
            target_ref: payload.repository.target_ref.clone(),
            target,
        };
        (Postcondition::of(target.map(Some), payload.commit), view)
    }

    fn receipt(&self, id: ObjectId, (): ()) -> IntegrationReceipt {
        IntegrationReceipt {
            id,
            target: self.prepared.payload.commit,
        }
    }

    fn prepared(&self) -> &PreparedIntegration {
        self.prepared
    }
}
