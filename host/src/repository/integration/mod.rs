//! Guarded at-most-once integration: the one effect sf has on the world. The target ref moves
//! from base B to the Candidate's commit M at most once per prepared intent, even across
//! repeats, concurrent processes, restarts and kills; an outcome that cannot be known is
//! reported as unknown, never as failed. `docs/integration.md` describes the calls, the
//! observation and the gate.
//!
//! Stored layout: `refs/sf/integrations/<key>/{intent,dispatch,receipt}`, where `<key>` is the
//! SHA-256 of the canonical `{protocol, action}`, so action ids never shape ref names. All
//! three refs are create-only.
//!
//! - intent I: commit over the tree `{payload.json}`, no parent: the canonical payload.
//! - dispatch D: commit over the empty tree, parent I, with a fresh random nonce: the claim.
//! - receipt R: commit over the empty tree, parent D, naming M: a confirmed update.

mod guard;
mod observation;
mod records;

use std::sync::Arc;

use crate::canonical::{self, Digest};
use crate::contracts::{Gate, RefName, RefUpdate, RefValue};
use crate::fault::FaultPoint;
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind};

use super::error::RepositoryError;
use super::identity::{IDENT, MAX_COMMIT_BYTES};
use super::{Repository, random_nonce, source};

pub use guard::{MALFORMED_GUARD_ANSWER, consult};
use observation::Seen;
pub(in crate::repository) use observation::now_rfc3339;
pub use observation::{
    IntegrationObservation, IntegrationReceipt, Invocation, ObservationStamp, Postcondition,
};
pub use records::{
    Action, INTEGRATION_PROTOCOL, INTEGRATION_REF_PREFIX, IntegrationPayload, IntegrationRefs,
    MAX_PAYLOAD_BYTES, Owner, PAYLOAD_NAME, PreparedIntegration, dispatch_message,
    integration_refs, intent_message, receipt_message,
};
pub(in crate::repository) use records::{
    check_effect_fields, commit_object, digest_of_payload, empty_tree, record_objects,
    retained_exactly,
};
use records::{intent_objects, sibling_refs};

impl Repository {
    pub(in crate::repository) fn stamp(&self) -> Result<ObservationStamp, RepositoryError> {
        Ok(ObservationStamp {
            id: random_nonce()?,
            at: now_rfc3339(),
        })
    }

    /// Retains one immutable intent per (action id, occurrence). The Candidate is re-exported
    /// and the payload's Product, repository, ref, base, commit and Slice must match it. An
    /// exact replay returns the retained intent; any other payload for the same occurrence is
    /// `conflict`. Moves nothing and grants nothing.
    pub fn prepare_integration(
        &self,
        payload: &IntegrationPayload,
    ) -> Result<PreparedIntegration, RepositoryError> {
        let bytes = payload.validate()?;
        let digest = Digest::of(&bytes);
        let sealed = self
            .export_candidate(&payload.candidate)
            .map_err(|error| match error {
                RepositoryError::Missing { what } => RepositoryError::invalid(
                    "payload.candidate",
                    format!("no such Candidate: {what}"),
                ),
                other => other,
            })?;
        let manifest = &sealed.manifest;
        if manifest.binding.is_none() {
            // A first-version Candidate names no Slice digest: no Verdict can be bound to it.
            return Err(RepositoryError::invalid(
                "payload.candidate",
                format!(
                    "Candidate {} is {}, sealed for no Slice digest: it is never integrated; \
                     seal the proposal again for a frozen Slice",
                    payload.candidate,
                    manifest.protocol()
                ),
            ));
        }
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
        let refs = integration_refs(&payload.action);
        if let Some(existing) = self.read_intent(&refs)? {
            return self.replay_intent(existing, &digest);
        }
        let objects = intent_objects(bytes, &digest);
        let intent = objects[2].id;
        self.store.write_objects(&objects, self.deadline())?;
        match self
            .store
            .create_ref(&refs.intent, &intent, self.deadline())?
        {
            RefUpdate::Applied => {}
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                // A concurrent preparation may have won; what is retained decides.
                let existing =
                    self.read_intent(&refs)?
                        .ok_or_else(|| RepositoryError::GitFailed {
                            detail: format!(
                                "creating {} was not acknowledged and it is absent",
                                refs.intent
                            ),
                        })?;
                return self.replay_intent(existing, &digest);
            }
        }
        // Read back what was written, independently.
        let retained = self
            .read_intent(&refs)?
            .ok_or_else(|| RepositoryError::corrupt(format!("{} vanished", refs.intent)))?;
        self.replay_intent(retained, &digest)
    }

    fn replay_intent(
        &self,
        existing: PreparedIntegration,
        digest: &Digest,
    ) -> Result<PreparedIntegration, RepositoryError> {
        if existing.digest != *digest {
            return Err(RepositoryError::Conflict {
                what: format!(
                    "action {} occurrence {} already has another intent ({})",
                    existing.payload.action.id, existing.payload.action.occurrence, existing.digest
                ),
            });
        }
        Ok(existing)
    }

    /// The intent retained for `action`, verified, if there is one. Read-only: how a caller
    /// that did not keep the prepared record finds out what an occurrence already holds.
    pub fn retained_intent(
        &self,
        action: &Action,
    ) -> Result<Option<PreparedIntegration>, RepositoryError> {
        self.read_intent(&integration_refs(action))
    }

    /// The intent retained under the intent ref `name` (one `retained_intents` listed),
    /// verified, if there is one.
    pub(super) fn intent_at(
        &self,
        name: &RefName,
    ) -> Result<Option<PreparedIntegration>, RepositoryError> {
        self.read_intent(&sibling_refs(name)?)
    }

    /// Reads and verifies the retained intent under `refs.intent`, if any.
    fn read_intent(
        &self,
        refs: &IntegrationRefs,
    ) -> Result<Option<PreparedIntegration>, RepositoryError> {
        let Some(intent) = self.read_direct(&refs.intent)? else {
            return Ok(None);
        };
        let corrupt = |why: &str| {
            RepositoryError::corrupt(format!("intent {intent} under {}: {why}", refs.intent))
        };
        let body = self.read_one(
            intent,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "intent commit",
        )?;
        let commit =
            git_object::decode_commit(&body).ok_or_else(|| corrupt("not in sf's commit form"))?;
        let tree = self.read_one(
            commit.tree,
            ObjectKind::Tree,
            MAX_COMMIT_BYTES,
            "intent tree",
        )?;
        let blob = match git_object::decode_tree(&tree).as_deref() {
            Some([entry]) if entry.mode == EntryMode::File && entry.name == PAYLOAD_NAME => {
                entry.id
            }
            _ => return Err(corrupt("its tree is not exactly {payload.json}")),
        };
        let bytes = self.read_one(
            blob,
            ObjectKind::Blob,
            MAX_PAYLOAD_BYTES as u64,
            "intent payload",
        )?;
        let payload: IntegrationPayload = canonical::from_canonical_slice(&bytes, "payload")
            .map_err(|error| corrupt(&error.to_string()))?;
        let digest = Digest::of(&bytes);
        if payload
            .validate()
            .map_err(|error| corrupt(&error.to_string()))?
            != bytes
        {
            return Err(corrupt("the payload is not canonical"));
        }
        if intent_objects(bytes, &digest)[2].id != intent || !commit.parents.is_empty() {
            return Err(corrupt(
                "the intent commit is not the one its payload gives",
            ));
        }
        if integration_refs(&payload.action).intent != refs.intent
            || payload.repository != self.identity
        {
            return Err(corrupt(
                "the payload belongs to another action or repository",
            ));
        }
        Ok(Some(PreparedIntegration {
            digest,
            intent,
            payload,
        }))
    }

    pub(in crate::repository) fn read_direct(
        &self,
        name: &RefName,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        match self.store.read_ref(name, self.deadline())? {
            None => Ok(None),
            Some(RefValue::Direct(id)) => Ok(Some(id)),
            Some(RefValue::Symbolic(to)) => Err(RepositoryError::corrupt(format!(
                "{name} is a symbolic ref to {to}"
            ))),
        }
    }

    pub(in crate::repository) fn read_one(
        &self,
        id: ObjectId,
        kind: ObjectKind,
        budget: u64,
        what: &str,
    ) -> Result<Vec<u8>, RepositoryError> {
        let mut bodies = source::read_verified(
            self.store.as_ref(),
            &[id],
            kind,
            budget,
            what,
            self.deadline(),
        )?;
        Ok(bodies.remove(0))
    }

    /// Checks that `prepared` is retained here exactly.
    fn check_prepared(
        &self,
        prepared: &PreparedIntegration,
    ) -> Result<IntegrationRefs, RepositoryError> {
        prepared.validate()?;
        if prepared.payload.repository != self.identity {
            return Err(RepositoryError::invalid(
                "prepared.payload.repository",
                "must be this repository",
            ));
        }
        let refs = integration_refs(&prepared.payload.action);
        retained_exactly(
            self.read_intent(&refs)?,
            prepared,
            "intent",
            &refs.intent,
            |p| (&p.digest, &p.intent),
        )?;
        Ok(refs)
    }

    /// Reads the dispatch claim D under `refs.dispatch`, verified, if any.
    fn read_dispatch(
        &self,
        refs: &IntegrationRefs,
        prepared: &PreparedIntegration,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        self.read_claim(
            &refs.dispatch,
            prepared.intent,
            &format!(
                "{INTEGRATION_PROTOCOL} dispatch\n\nintent: {}\nnonce: ",
                prepared.digest
            ),
        )
    }

    /// Reads the claim under `dispatch`, if any, verified: a commit by sf over the empty
    /// tree whose one parent is `intent` and whose message is `prefix`, 32 lowercase hex
    /// characters of nonce and a newline. Anything else is `corrupt`.
    pub(in crate::repository) fn read_claim(
        &self,
        dispatch: &RefName,
        intent: ObjectId,
        prefix: &str,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        let Some(claim) = self.read_direct(dispatch)? else {
            return Ok(None);
        };
        let body = self.read_one(
            claim,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "dispatch commit",
        )?;
        let valid = git_object::decode_commit(&body).is_some_and(|commit| {
            let nonce_ok = commit
                .message
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix('\n'))
                .is_some_and(|nonce| {
                    nonce.len() == 32
                        && nonce
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                });
            nonce_ok
                && commit.is_by(IDENT)
                && commit.parents == [intent]
                && commit.tree == empty_tree().id
        });
        if !valid {
            return Err(RepositoryError::corrupt(format!(
                "dispatch {claim} under {dispatch} is not a claim on this intent"
            )));
        }
        Ok(Some(claim))
    }

    /// Reads the receipt under `refs.receipt`, verified against `dispatch`, if any.
    fn read_receipt(
        &self,
        refs: &IntegrationRefs,
        prepared: &PreparedIntegration,
        dispatch: Option<ObjectId>,
    ) -> Result<Option<IntegrationReceipt>, RepositoryError> {
        let Some(receipt) = self.read_direct(&refs.receipt)? else {
            return Ok(None);
        };
        let Some(dispatch) = dispatch else {
            return Err(RepositoryError::corrupt(format!(
                "receipt {receipt} under {} has no dispatch",
                refs.receipt
            )));
        };
        let body = self.read_one(
            receipt,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "receipt commit",
        )?;
        let expected = commit_object(
            empty_tree().id,
            vec![dispatch],
            receipt_message(&prepared.digest, &prepared.payload.commit),
        );
        if expected.id != receipt || expected.body != body {
            return Err(RepositoryError::corrupt(format!(
                "receipt {receipt} under {} does not confirm this claim",
                refs.receipt
            )));
        }
        Ok(Some(IntegrationReceipt {
            id: receipt,
            target: prepared.payload.commit,
        }))
    }

    /// Reads the target for an observation; a failed read is an unknown postcondition.
    fn observe_target(
        &self,
        prepared: &PreparedIntegration,
    ) -> (Option<ObjectId>, Postcondition, Option<String>) {
        match self.target() {
            Ok(target) if target == prepared.payload.commit => {
                (Some(target), Postcondition::DesiredStateObserved, None)
            }
            Ok(target) => (Some(target), Postcondition::NotObserved, None),
            Err(error) => (
                None,
                Postcondition::Unknown,
                Some(format!("target unreadable: {error}")),
            ),
        }
    }

    /// Reports retained history truthfully: confirmed if a valid receipt exists, unknown if only
    /// a claim exists, not-dispatched otherwise. Writes nothing; a confirmed history survives
    /// later target drift, and an unknown one is never resolved by M appearing or disappearing.
    pub fn inspect_integration(
        &self,
        prepared: &PreparedIntegration,
    ) -> Result<IntegrationObservation, RepositoryError> {
        let refs = self.check_prepared(prepared)?;
        let (target, postcondition, _) = self.observe_target(prepared);
        let receipt_ref = self.read_direct(&refs.receipt)?;
        let dispatch = self.read_dispatch(&refs, prepared)?;
        let receipt = match receipt_ref {
            Some(_) => self.read_receipt(&refs, prepared, dispatch)?,
            None => None,
        };
        let invocation = match (&receipt, dispatch) {
            (Some(_), _) => Invocation::Confirmed,
            (None, Some(_)) => Invocation::Unknown,
            (None, None) => Invocation::NotDispatched,
        };
        self.report(
            prepared,
            Seen {
                target,
                postcondition,
                dispatch,
                receipt,
                invocation,
                dispatched: false,
                problem: None,
            },
        )
    }

    /// Stamps what a call saw as an observation of `prepared`.
    fn report(
        &self,
        prepared: &PreparedIntegration,
        seen: Seen,
    ) -> Result<IntegrationObservation, RepositoryError> {
        Ok(IntegrationObservation {
            intent: prepared.digest.clone(),
            observation: self.stamp()?,
            target_ref: self.identity.target_ref.clone(),
            target: seen.target,
            postcondition: seen.postcondition,
            dispatch: seen.dispatch,
            receipt: seen.receipt,
            invocation: seen.invocation,
            dispatched: seen.dispatched,
            problem: seen.problem,
        })
    }

    /// Moves the target from B to M at most once for this intent. Without a gate, or after the
    /// gate allowed exactly and in time, the claim holder runs the one compare-and-swap; a
    /// replay, a stale base or a lost claim starts nothing and reports what it reads. Returns
    /// `Err` only when no update was started; once it may have started, the outcome is an
    /// observation, with anything not proven reported as unknown.
    pub fn invoke_once(
        &self,
        prepared: &PreparedIntegration,
        gate: Option<Arc<dyn Gate>>,
    ) -> Result<IntegrationObservation, RepositoryError> {
        let refs = self.check_prepared(prepared)?;
        let payload = &prepared.payload;
        // A claim exists: replay, start nothing.
        if self.read_dispatch(&refs, prepared)?.is_some() {
            return self.inspect_integration(prepared);
        }
        let target = self.target()?;
        if target != payload.base {
            let postcondition = if target == payload.commit {
                Postcondition::DesiredStateObserved
            } else {
                Postcondition::NotObserved
            };
            return self.report(
                prepared,
                Seen {
                    target: Some(target),
                    postcondition,
                    dispatch: None,
                    receipt: None,
                    invocation: Invocation::NotDispatched,
                    dispatched: false,
                    problem: Some(format!(
                        "stale base: the target names {target}, not the intent's base {}; no claim was made",
                        payload.base
                    )),
                },
            );
        }
        let Some(claim) = self.claim(&refs, prepared)? else {
            // Another call holds the claim: report what it left, start nothing.
            return self.inspect_integration(prepared);
        };
        self.options.faults.reached(FaultPoint::IntegrationClaimed);
        if let Some(gate) = gate
            && let Err(reason) = consult(gate, self.options.git_timeout)
        {
            self.options.faults.reached(FaultPoint::IntegrationWithheld);
            return self.report(
                prepared,
                Seen {
                    target: Some(target),
                    postcondition: Postcondition::NotObserved,
                    dispatch: Some(claim),
                    receipt: None,
                    invocation: Invocation::Withheld,
                    dispatched: false,
                    problem: Some(format!("withheld before submission: {reason}")),
                },
            );
        }
        let name = RefName::parse(&self.identity.target_ref)?;
        self.options
            .faults
            .reached(FaultPoint::IntegrationSubmitted);
        // Err here means the store started nothing (its ownership check failed, say): the
        // claim stays, and the occurrence reads as unknown from now on.
        let outcome = self.store.compare_and_swap_ref(
            &name,
            &payload.base,
            &payload.commit,
            self.deadline(),
        )?;
        let (after, postcondition, read_problem) = self.observe_target(prepared);
        let (invocation, receipt, problem) = match outcome {
            RefUpdate::Applied => {
                let (receipt, problem) = self.retain_receipt(&refs, prepared, claim);
                (Invocation::Confirmed, receipt, problem)
            }
            RefUpdate::Refused { current } => (
                Invocation::Unknown,
                None,
                Some(format!(
                    "the update was not confirmed (the store refused; the target read {current:?}); unknown is not failed{}",
                    suffix(read_problem)
                )),
            ),
            RefUpdate::Unknown { reason } => (
                Invocation::Unknown,
                None,
                Some(format!(
                    "the update was not confirmed: {reason}{}",
                    suffix(read_problem)
                )),
            ),
        };
        self.report(
            prepared,
            Seen {
                target: after,
                postcondition,
                dispatch: Some(claim),
                receipt,
                invocation,
                dispatched: true,
                problem,
            },
        )
    }

    /// Claims the intent with a create-only dispatch ref naming a fresh commit D. `Some(D)`
    /// when this call holds the claim, `None` when another call's claim won; `Err`
    /// (`git-failed`) when the store did not acknowledge the claim and the ref is absent or
    /// names this call's own D: nothing was started.
    fn claim(
        &self,
        refs: &IntegrationRefs,
        prepared: &PreparedIntegration,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        self.claim_once(&refs.dispatch, prepared.intent, |nonce| {
            dispatch_message(&prepared.digest, nonce)
        })
    }

    /// Creates `dispatch` (create-only) naming a fresh commit over the empty tree with parent
    /// `intent` and the message `message` gives for a fresh random nonce: the claim of an
    /// at-most-once effect. See [`Self::claim`] for the answers.
    pub(in crate::repository) fn claim_once(
        &self,
        dispatch: &RefName,
        intent: ObjectId,
        message: impl FnOnce(&str) -> String,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        let tree = empty_tree();
        let claim = commit_object(tree.id, vec![intent], message(&random_nonce()?));
        self.store
            .write_objects(&[tree, claim.clone()], self.deadline())?;
        match self
            .store
            .create_ref(dispatch, &claim.id, self.deadline())?
        {
            RefUpdate::Applied => Ok(Some(claim.id)),
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                match self.read_direct(dispatch)? {
                    Some(other) if other != claim.id => Ok(None),
                    _ => Err(RepositoryError::GitFailed {
                        detail: format!(
                            "the claim {} on {dispatch} was not acknowledged; nothing was started",
                            claim.id
                        ),
                    }),
                }
            }
        }
    }

    /// Writes the receipt R (parent D) of a confirmed update. A receipt that cannot be
    /// retained keeps the update confirmed, with the reason as the problem.
    fn retain_receipt(
        &self,
        refs: &IntegrationRefs,
        prepared: &PreparedIntegration,
        claim: ObjectId,
    ) -> (Option<IntegrationReceipt>, Option<String>) {
        let target = prepared.payload.commit;
        let receipt = commit_object(
            empty_tree().id,
            vec![claim],
            receipt_message(&prepared.digest, &target),
        );
        let written = self
            .store
            .write_objects(std::slice::from_ref(&receipt), self.deadline())
            .map_err(|error| error.to_string())
            .and_then(|()| {
                self.store
                    .create_ref(&refs.receipt, &receipt.id, self.deadline())
                    .map_err(|error| error.to_string())
            });
        // Fired once the receipt write has been attempted, so a process killed here has
        // retained what inspection needs to say confirmed.
        self.options
            .faults
            .reached(FaultPoint::IntegrationAcknowledged);
        match written {
            Ok(RefUpdate::Applied) => (
                Some(IntegrationReceipt {
                    id: receipt.id,
                    target,
                }),
                None,
            ),
            Ok(other) => (
                None,
                Some(format!(
                    "the update is confirmed but the receipt was not retained: {other:?}"
                )),
            ),
            Err(error) => (
                None,
                Some(format!(
                    "the update is confirmed but the receipt was not retained: {error}"
                )),
            ),
        }
    }
}

fn suffix(problem: Option<String>) -> String {
    problem
        .map(|problem| format!("; {problem}"))
        .unwrap_or_default()
}
