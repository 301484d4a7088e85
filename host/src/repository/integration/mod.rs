//! Guarded at-most-once integration: the one effect sf has on its own repository. The target
//! ref moves from base B to the Candidate's commit M at most once per prepared intent, even
//! across repeats, concurrent processes, restarts and kills; an outcome that cannot be known
//! is reported as unknown, never as failed. The protocol is `at_most_once`'s; this module
//! holds what is integration's own: the payload and its checks against the Candidate, the
//! compare-and-swap (`effect`) and the observation. `docs/integration.md` describes the
//! calls, the observation and the gate.
//!
//! Stored layout: `refs/sf/integrations/<key>/{intent,dispatch,receipt}`, where `<key>` is the
//! SHA-256 of the canonical `{protocol, action}`. The receipt R names M.

mod effect;
mod observation;
mod records;

use std::sync::Arc;

use crate::contracts::Gate;
use crate::judging::Verified;

use super::Repository;
use super::at_most_once::{Action, Owner};
use super::error::RepositoryError;

use effect::Integration;
pub use observation::{IntegrationObservation, IntegrationReceipt, Invocation, TargetView};
pub use records::{
    INTEGRATION_PROTOCOL, INTEGRATION_REF_PREFIX, IntegrationPayload, MAX_PAYLOAD_BYTES,
    PreparedIntegration, dispatch_message, integration_refs, intent_message, receipt_message,
};

impl Repository {
    /// Retains one immutable intent per (action id, occurrence). The Candidate is re-exported
    /// and the payload's Product, repository, ref, base, commit and Slice must match it. An
    /// exact replay returns the retained intent; any other payload for the same occurrence is
    /// `conflict`. Moves nothing and grants nothing.
    pub fn prepare_integration(
        &self,
        payload: &IntegrationPayload,
    ) -> Result<PreparedIntegration, RepositoryError> {
        // Checked before the Candidate is read, so bad input reads nothing.
        payload.validate()?;
        let sealed = self.bound_candidate(
            &payload.candidate,
            "payload.candidate",
            "it is never integrated; seal the proposal again for a frozen Slice",
        )?;
        let manifest = &sealed.manifest;
        let mismatches = [
            (
                "payload.product",
                payload.product == self.identity.product_id,
            ),
            ("payload.repository", payload.repository == self.identity),
            (
                "payload.ref",
                payload.target_ref == self.identity.target_ref,
            ),
            ("payload.base", payload.base == manifest.base_commit),
            ("payload.commit", payload.commit == manifest.commit),
            ("payload.slice", payload.slice == manifest.slice),
        ];
        if let Some((field, _)) = mismatches.iter().find(|(_, matches)| !matches) {
            return Err(RepositoryError::invalid(
                *field,
                format!(
                    "must match this repository and Candidate {}",
                    payload.candidate
                ),
            ));
        }
        self.retain_intent(payload)
    }

    /// The intent retained for `action`, verified, if there is one. Read-only: how a caller
    /// that did not keep the prepared record finds out what an occurrence already holds.
    pub fn retained_intent(
        &self,
        action: &Action,
    ) -> Result<Option<PreparedIntegration>, RepositoryError> {
        self.retained(action)
    }

    /// Reports retained history truthfully: confirmed if a valid receipt exists, unknown if only
    /// a claim exists, not-dispatched otherwise. Writes nothing; a confirmed history survives
    /// later target drift, and an unknown one is never resolved by M appearing or disappearing.
    pub fn inspect_integration(
        &self,
        prepared: &PreparedIntegration,
    ) -> Result<IntegrationObservation, RepositoryError> {
        self.inspect_effect(&Integration { prepared })
    }

    /// The intent payload `proof` admits, for action occurrence `action` owned by `owner`:
    /// the proof's Candidate (its base, commit and Slice) moved in this repository's target,
    /// with the Verified Verdict's digest as its proof.
    pub fn integration_payload(
        &self,
        proof: &Verified,
        action: Action,
        owner: Owner,
    ) -> IntegrationPayload {
        let admits = proof.admits();
        let identity = self.identity();
        IntegrationPayload {
            action,
            product: identity.product_id.clone(),
            slice: admits.slice.clone(),
            repository: identity.clone(),
            target_ref: identity.target_ref.clone(),
            base: admits.base,
            commit: admits.commit,
            candidate: admits.candidate.clone(),
            proof: admits.proof.clone(),
            owner,
        }
    }

    /// Moves the target from B to M at most once for this intent. Without a gate, or after the
    /// gate allowed exactly and in time, the claim holder runs the one compare-and-swap; a
    /// replay, a stale base or a lost claim starts nothing and reports what it reads. Returns
    /// `Err` only when no update was started; once it may have started, the outcome is an
    /// observation, with anything not proven reported as unknown.
    ///
    /// Only a Verified Candidate moves: `proof`, which only the judge makes from stored
    /// evidence, must admit this intent (its Candidate, base, commit, Slice and proof digest;
    /// anything else is refused before anything starts), and the gate consulted is the
    /// proof's guard, which judges the stored evidence again before it asks `gate`.
    pub fn invoke_once(
        &self,
        prepared: &PreparedIntegration,
        proof: &Verified,
        gate: Option<Arc<dyn Gate>>,
    ) -> Result<IntegrationObservation, RepositoryError> {
        self.invoke_effect(&Integration { prepared }, proof, gate)
    }
}
