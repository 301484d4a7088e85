//! Guarded at-most-once delivery: a Candidate's commit M reaches the team's own Git remote,
//! as the very commit that was sealed (and verified), at most once per prepared intent. The
//! protocol is `at_most_once`'s (an immutable intent, a create-only local claim, the gate
//! immediately before, one effect, a receipt); this module holds what is delivery's own: the
//! payload, built from the Candidate and its base's upstream, and the effect (`effect`):
//! exactly one atomic compare-and-swap push of the branch and a create-only marker ref,
//! confirmed by reading the remote back. What cannot be known is unknown, never failed.
//! `docs/delivery.md` describes the calls and the records.
//!
//! Stored layout: `refs/sf/upstreams/<base>` → the base's upstream record (`upstream`);
//! `refs/sf/deliveries/<key>/{intent,dispatch,receipt}`, where `<key>` is the SHA-256 of the
//! canonical `{protocol, repository nonce, action}`; on the remote, `refs/sf/delivered/<key>`
//! → the marker tag of M; and, when the owned repository keeps an attestation of M,
//! `refs/sf/attestations/<M>` → its blob, here and on the remote (`attestation`), created in
//! the same atomic push.

mod attestation;
mod effect;
mod observation;
mod push;
mod records;
mod remote;
mod upstream;

use std::sync::Arc;

use crate::canonical::Digest;
use crate::contracts::Gate;
use crate::judging::Verified;

use super::Repository;
use super::at_most_once::{Action, Owner};
use super::error::RepositoryError;

pub use attestation::{
    ATTESTATION_REF_PREFIX, MAX_ATTESTATION_BYTES, StoredAttestation, attestation_ref,
};
use effect::Delivery;
pub use observation::{DeliveryInvocation, DeliveryObservation, RemoteReading, RemoteView};
pub use records::{
    DELIVERY_PROTOCOL, DELIVERY_REF_PREFIX, DeliveryMode, DeliveryPayload, MARKER_REF_PREFIX,
    PreparedDelivery, ReceiptOutcome, delivery_dispatch_message, delivery_intent_message,
    delivery_receipt_message, delivery_refs, marker_ref, marker_tag, marker_tag_id, side_branch,
};
pub use remote::{LeasedUpdate, Push, PushOutcome, Remote, RemoteError};
pub use upstream::{
    Transport, UPSTREAM_PROTOCOL, UPSTREAM_REF_PREFIX, Upstream, UpstreamRecord, check_url,
    upstream_ref,
};

/// What to deliver: the Candidate, the digest of its Verified Verdict, where, and for which
/// action occurrence.
#[derive(Clone, Debug)]
pub struct DeliveryRequest {
    /// The action occurrence the intent is for.
    pub action: Action,
    /// Who owns the delivery.
    pub owner: Owner,
    /// The Candidate.
    pub candidate: Digest,
    /// The digest of the Verified Verdict that admits it (the commands judge it; the
    /// primitive records it).
    pub verdict: Digest,
    /// The upstream branch itself, or a side branch.
    pub mode: DeliveryMode,
}

impl Repository {
    /// Retains one immutable delivery intent per (action id, occurrence). The Candidate is
    /// re-exported: M, its base U and its Slice come from it, the remote and branch from U's
    /// upstream record (none: `invalid-input`). An exact replay returns the retained intent;
    /// any other request for the same occurrence is `conflict`. Pushes nothing.
    pub fn prepare_delivery(
        &self,
        request: &DeliveryRequest,
    ) -> Result<PreparedDelivery, RepositoryError> {
        let sealed =
            self.bound_candidate(&request.candidate, "candidate", "it is never delivered")?;
        let manifest = &sealed.manifest;
        let base = manifest.base_commit;
        let upstream = self.upstream_of(&base)?.ok_or_else(|| {
            RepositoryError::invalid(
                format!("Candidate {}", request.candidate),
                format!(
                    "its base {base} records no upstream: name one when the base is created or \
                     imported (`--upstream URL --upstream-branch BRANCH`)"
                ),
            )
        })?;
        let (remote_ref, expected) = match request.mode {
            DeliveryMode::Branch => (upstream.upstream.branch_ref(), Some(base)),
            DeliveryMode::SideBranch => (side_branch(&request.candidate), None),
        };
        let payload = DeliveryPayload {
            action: request.action.clone(),
            product: self.identity.product_id.clone(),
            slice: manifest.slice.clone(),
            repository: self.identity.clone(),
            candidate: request.candidate.clone(),
            verdict: request.verdict.clone(),
            commit: manifest.commit,
            base,
            mode: request.mode,
            remote: upstream.upstream.url.clone(),
            remote_ref,
            expected,
            marker: marker_ref(&self.identity, &request.action)
                .as_str()
                .to_owned(),
            owner: request.owner.clone(),
        };
        self.retain_intent(&payload)
    }

    /// The delivery intent retained for `action`, verified, if there is one.
    pub fn retained_delivery(
        &self,
        action: &Action,
    ) -> Result<Option<PreparedDelivery>, RepositoryError> {
        self.retained(action)
    }

    /// Reports retained history and what the remote shows, read-only: `confirmed` if a
    /// receipt says delivered or the remote's marker names this intent's tag, `refused` if
    /// a receipt says so, `unknown` if only a claim exists, `not-dispatched` if none.
    pub fn inspect_delivery(
        &self,
        prepared: &PreparedDelivery,
        remote: &dyn Remote,
    ) -> Result<DeliveryObservation, RepositoryError> {
        self.inspect_effect(&Delivery { prepared, remote })
    }

    /// Pushes M to the remote at most once for this intent. A replay, a remote that no
    /// longer names the expected value, an existing marker or a lost claim push nothing and
    /// report what they read; everything the push sends is read (and re-hashed) before the
    /// claim, so a store that cannot give it consumes nothing; the claim holder consults
    /// `gate` once, then runs the one atomic push. Returns `Err` only when nothing was
    /// pushed; once the push may have started, the outcome is an observation, with anything
    /// not proven reported as unknown.
    ///
    /// Only a Verified Candidate is pushed: `proof` must admit this intent (its Candidate,
    /// base, commit, Slice and Verdict) and the gate consulted is the proof's guard, as for
    /// [`Repository::invoke_once`].
    pub fn invoke_delivery(
        &self,
        prepared: &PreparedDelivery,
        proof: &Verified,
        remote: &dyn Remote,
        gate: Option<Arc<dyn Gate>>,
    ) -> Result<DeliveryObservation, RepositoryError> {
        self.invoke_effect(&Delivery { prepared, remote }, proof, gate)
    }
}
