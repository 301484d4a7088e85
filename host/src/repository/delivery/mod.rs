//! Guarded at-most-once delivery: a Candidate's commit M reaches the team's own Git remote,
//! as the very commit that was sealed (and verified), at most once per prepared intent. It is
//! integration's discipline applied to a remote: an immutable intent, a create-only local
//! claim, the gate immediately before, exactly one atomic compare-and-swap push of the branch
//! and a create-only marker ref, confirmation by reading the remote back; what cannot be known
//! is unknown, never failed. `docs/delivery.md` describes the calls and the records.
//!
//! Stored layout: `refs/sf/upstreams/<base>` → the base's upstream record (tree
//! `{upstream.json}`, parent the base); `refs/sf/deliveries/<key>/{intent,dispatch,receipt}`,
//! where `<key>` is the SHA-256 of the canonical `{protocol, repository nonce, action}`; on the
//! remote, `refs/sf/delivered/<key>` → the marker tag of M.

mod observation;
mod records;
mod remote;

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::canonical::{self, Digest};
use crate::contracts::{EncodedObject, Gate, RefName, RefUpdate};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind};

use super::error::RepositoryError;
use super::identity::{MAX_CANDIDATE_COMMIT_BYTES, MAX_COMMIT_BYTES};
use super::imported::{MAX_IMPORTED_COMMIT_BYTES, commit_heads};
use super::integration::{
    Action, Owner, commit_object, consult, empty_tree, record_objects, retained_exactly,
};
use super::{Repository, source};
use crate::fault::FaultPoint;

pub use observation::{DeliveryInvocation, DeliveryObservation, RemoteReading};
pub use records::{
    DELIVERY_PROTOCOL, DELIVERY_REF_PREFIX, DeliveryMode, DeliveryPayload, DeliveryRefs,
    MARKER_REF_PREFIX, MAX_DELIVERY_PAYLOAD_BYTES, PreparedDelivery, ReceiptOutcome, Transport,
    UPSTREAM_PROTOCOL, UPSTREAM_RECORD_NAME, UPSTREAM_REF_PREFIX, Upstream, UpstreamRecord,
    check_url, delivery_dispatch_message, delivery_intent_message, delivery_receipt_message,
    delivery_refs, marker_ref, marker_tag, marker_tag_id, record_reason, side_branch, upstream_ref,
};
pub use remote::{LeasedUpdate, Push, PushOutcome, Remote, RemoteError};

/// The name of the payload in a delivery intent commit's tree.
const PAYLOAD_NAME: &str = "payload.json";
/// The largest upstream record read back.
const MAX_UPSTREAM_RECORD_BYTES: u64 = 8 * 1024;

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

/// What one call read or did, before it is stamped.
struct Seen {
    reading: RemoteReading,
    dispatch: Option<ObjectId>,
    receipt: Option<ObjectId>,
    invocation: DeliveryInvocation,
    dispatched: bool,
    problem: Option<String>,
}

impl Repository {
    /// Records where `base` came from: the team's repository and the branch that follows it.
    /// `base` must be the initial commit or an imported one. Written once per base: the same
    /// upstream again is a replay, another one is `conflict`.
    pub fn record_upstream(
        &self,
        base: &ObjectId,
        upstream: &Upstream,
    ) -> Result<UpstreamRecord, RepositoryError> {
        upstream.validate()?;
        if *base != self.identity.initial && self.recorded_import(base)?.is_none() {
            return Err(RepositoryError::invalid(
                format!("base {base}"),
                "an upstream is recorded for the initial commit or an imported one",
            ));
        }
        let record = UpstreamRecord {
            product: self.identity.product_id.clone(),
            base: *base,
            upstream: upstream.clone(),
        };
        let name = upstream_ref(base);
        let objects = upstream_objects(&record);
        let commit = objects[2].id;
        if let Some(stored) = self.upstream_of(base)? {
            return self.same_upstream(stored, &record);
        }
        self.store.write_objects(&objects, self.deadline())?;
        match self.store.create_ref(&name, &commit, self.deadline())? {
            RefUpdate::Applied => {}
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                let stored = self
                    .upstream_of(base)?
                    .ok_or_else(|| RepositoryError::GitFailed {
                        detail: format!("creating {name} was not acknowledged and it is absent"),
                    })?;
                return self.same_upstream(stored, &record);
            }
        }
        self.upstream_of(base)?
            .ok_or_else(|| RepositoryError::corrupt(format!("{name} vanished")))
    }

    fn same_upstream(
        &self,
        stored: UpstreamRecord,
        asked: &UpstreamRecord,
    ) -> Result<UpstreamRecord, RepositoryError> {
        if stored == *asked {
            Ok(stored)
        } else {
            Err(RepositoryError::Conflict {
                what: format!(
                    "base {} already records upstream {} branch {}: an upstream is recorded \
                     once per base (nothing was written)",
                    stored.base, stored.upstream.url, stored.upstream.branch
                ),
            })
        }
    }

    /// The upstream recorded for `base`, verified whole, if any.
    pub fn upstream_of(&self, base: &ObjectId) -> Result<Option<UpstreamRecord>, RepositoryError> {
        let name = upstream_ref(base);
        let Some(commit) = self.read_direct(&name)? else {
            return Ok(None);
        };
        let what = format!("upstream record {name}");
        let bytes = self.read_record_file(
            commit,
            UPSTREAM_RECORD_NAME,
            MAX_UPSTREAM_RECORD_BYTES,
            &what,
        )?;
        let record: UpstreamRecord = canonical::from_canonical_slice(&bytes, UPSTREAM_RECORD_NAME)
            .map_err(|error| RepositoryError::corrupt(format!("{what}: {error}")))?;
        if record.product != self.identity.product_id
            || record.base != *base
            || upstream_objects(&record)[2].id != commit
        {
            return Err(RepositoryError::corrupt(format!(
                "{what}: {commit} is not the record sf writes for base {base} of this repository"
            )));
        }
        Ok(Some(record))
    }

    /// The upstream that follows `commit`: its own record when it is a base, or, for a
    /// Candidate's commit M (what the target names after an integration), its base's.
    pub fn upstream_at(
        &self,
        commit: &ObjectId,
    ) -> Result<Option<UpstreamRecord>, RepositoryError> {
        if let Some(record) = self.upstream_of(commit)? {
            return Ok(Some(record));
        }
        let what = format!("commit {commit}");
        let body = self.read_one(
            *commit,
            ObjectKind::Commit,
            MAX_IMPORTED_COMMIT_BYTES,
            &what,
        )?;
        let heads = commit_heads(&body)
            .map_err(|rule| RepositoryError::corrupt(format!("{what}: {rule}")))?;
        match heads.parents.as_slice() {
            [parent] => self.upstream_of(parent),
            _ => Ok(None),
        }
    }

    /// The one file `name` of the record commit `commit` sf wrote (its tree exactly
    /// `{name}`), within `budget` bytes; anything else is `corrupt`.
    fn read_record_file(
        &self,
        commit: ObjectId,
        name: &str,
        budget: u64,
        what: &str,
    ) -> Result<Vec<u8>, RepositoryError> {
        let body = self.read_one(commit, ObjectKind::Commit, MAX_COMMIT_BYTES, what)?;
        let decoded = git_object::decode_commit(&body)
            .ok_or_else(|| RepositoryError::corrupt(format!("{what}: not in sf's commit form")))?;
        let tree = self.read_one(decoded.tree, ObjectKind::Tree, MAX_COMMIT_BYTES, what)?;
        let blob = match git_object::decode_tree(&tree).as_deref() {
            Some([entry]) if entry.mode == EntryMode::File && entry.name == name => entry.id,
            _ => {
                return Err(RepositoryError::corrupt(format!(
                    "{what}: its tree is not exactly {{{name}}}"
                )));
            }
        };
        self.read_one(blob, ObjectKind::Blob, budget, what)
    }

    /// Retains one immutable delivery intent per (action id, occurrence). The Candidate is
    /// re-exported: M, its base U and its Slice come from it, the remote and branch from U's
    /// upstream record (none: `invalid-input`). An exact replay returns the retained intent;
    /// any other request for the same occurrence is `conflict`. Pushes nothing.
    pub fn prepare_delivery(
        &self,
        request: &DeliveryRequest,
    ) -> Result<PreparedDelivery, RepositoryError> {
        let sealed = self
            .export_candidate(&request.candidate)
            .map_err(|error| match error {
                RepositoryError::Missing { what } => {
                    RepositoryError::invalid("candidate", format!("no such Candidate: {what}"))
                }
                other => other,
            })?;
        let manifest = &sealed.manifest;
        if manifest.binding.is_none() {
            return Err(RepositoryError::invalid(
                "candidate",
                format!(
                    "Candidate {} is {}, sealed for no Slice digest: it is never delivered",
                    request.candidate,
                    manifest.protocol()
                ),
            ));
        }
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
        let bytes = payload.validate()?;
        let digest = Digest::of(&bytes);
        let refs = delivery_refs(&self.identity, &payload.action);
        if let Some(existing) = self.read_delivery_intent(&refs)? {
            return replay_delivery(existing, &digest);
        }
        let objects = delivery_intent_objects(bytes, &digest);
        let intent = objects[2].id;
        self.store.write_objects(&objects, self.deadline())?;
        match self
            .store
            .create_ref(&refs.intent, &intent, self.deadline())?
        {
            RefUpdate::Applied => {}
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                let existing = self.read_delivery_intent(&refs)?.ok_or_else(|| {
                    RepositoryError::GitFailed {
                        detail: format!(
                            "creating {} was not acknowledged and it is absent",
                            refs.intent
                        ),
                    }
                })?;
                return replay_delivery(existing, &digest);
            }
        }
        let retained = self
            .read_delivery_intent(&refs)?
            .ok_or_else(|| RepositoryError::corrupt(format!("{} vanished", refs.intent)))?;
        replay_delivery(retained, &digest)
    }

    /// The delivery intent retained for `action`, verified, if there is one.
    pub fn retained_delivery(
        &self,
        action: &Action,
    ) -> Result<Option<PreparedDelivery>, RepositoryError> {
        self.read_delivery_intent(&delivery_refs(&self.identity, action))
    }

    /// The delivery intent retained under the intent ref `name` (one `retained_deliveries`
    /// listed), verified, if there is one.
    pub(super) fn delivery_at(
        &self,
        name: &RefName,
    ) -> Result<Option<PreparedDelivery>, RepositoryError> {
        let sibling = |leaf: &str| {
            let parent = name.as_str().strip_suffix("intent").unwrap_or_default();
            RefName::parse(&format!("{parent}{leaf}"))
                .map_err(|_| RepositoryError::corrupt(format!("{name} is not an intent ref")))
        };
        self.read_delivery_intent(&DeliveryRefs {
            intent: name.clone(),
            dispatch: sibling("dispatch")?,
            receipt: sibling("receipt")?,
        })
    }

    fn read_delivery_intent(
        &self,
        refs: &DeliveryRefs,
    ) -> Result<Option<PreparedDelivery>, RepositoryError> {
        let Some(intent) = self.read_direct(&refs.intent)? else {
            return Ok(None);
        };
        let what = format!("delivery intent {intent} under {}", refs.intent);
        let corrupt = |why: &str| RepositoryError::corrupt(format!("{what}: {why}"));
        let bytes = self.read_record_file(
            intent,
            PAYLOAD_NAME,
            MAX_DELIVERY_PAYLOAD_BYTES as u64,
            &what,
        )?;
        let payload: DeliveryPayload = canonical::from_canonical_slice(&bytes, "payload")
            .map_err(|error| corrupt(&error.to_string()))?;
        let digest = Digest::of(&bytes);
        if payload
            .validate()
            .map_err(|error| corrupt(&error.to_string()))?
            != bytes
        {
            return Err(corrupt("the payload is not canonical"));
        }
        if delivery_intent_objects(bytes, &digest)[2].id != intent {
            return Err(corrupt(
                "the intent commit is not the one its payload gives",
            ));
        }
        if payload.repository != self.identity
            || delivery_refs(&self.identity, &payload.action).intent != refs.intent
        {
            return Err(corrupt(
                "the payload belongs to another action or repository",
            ));
        }
        Ok(Some(PreparedDelivery {
            digest,
            intent,
            payload,
        }))
    }

    fn check_delivery(&self, prepared: &PreparedDelivery) -> Result<DeliveryRefs, RepositoryError> {
        prepared.validate()?;
        if prepared.payload.repository != self.identity {
            return Err(RepositoryError::invalid(
                "prepared.payload.repository",
                "must be this repository",
            ));
        }
        let refs = delivery_refs(&self.identity, &prepared.payload.action);
        retained_exactly(
            self.read_delivery_intent(&refs)?,
            prepared,
            "delivery intent",
            &refs.intent,
            |p| (&p.digest, &p.intent),
        )?;
        Ok(refs)
    }

    fn read_delivery_dispatch(
        &self,
        refs: &DeliveryRefs,
        prepared: &PreparedDelivery,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        self.read_claim(
            &refs.dispatch,
            prepared.intent,
            &format!(
                "{DELIVERY_PROTOCOL} dispatch\n\nintent: {}\nnonce: ",
                prepared.digest
            ),
        )
    }

    /// The receipt under `refs.receipt`, verified against `dispatch`, and what it says.
    fn read_delivery_receipt(
        &self,
        refs: &DeliveryRefs,
        prepared: &PreparedDelivery,
        dispatch: Option<ObjectId>,
    ) -> Result<Option<(ObjectId, ReceiptOutcome)>, RepositoryError> {
        let Some(receipt) = self.read_direct(&refs.receipt)? else {
            return Ok(None);
        };
        let corrupt = || {
            RepositoryError::corrupt(format!(
                "receipt {receipt} under {} does not answer this delivery's claim",
                refs.receipt
            ))
        };
        let dispatch = dispatch.ok_or_else(corrupt)?;
        let body = self.read_one(
            receipt,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "delivery receipt commit",
        )?;
        let commit = git_object::decode_commit(&body).ok_or_else(corrupt)?;
        let refused = format!(
            "{DELIVERY_PROTOCOL} receipt\n\nintent: {}\noutcome: refused\nreason: ",
            prepared.digest
        );
        let outcome = match commit
            .message
            .strip_prefix(&refused)
            .and_then(|rest| rest.strip_suffix('\n'))
        {
            Some(reason) if record_reason(reason) == reason => {
                ReceiptOutcome::Refused(reason.to_owned())
            }
            _ => ReceiptOutcome::Delivered,
        };
        let expected = commit_object(
            empty_tree().id,
            vec![dispatch],
            delivery_receipt_message(&prepared.digest, &prepared.payload.commit, &outcome),
        );
        if expected.id != receipt || expected.body != body {
            return Err(corrupt());
        }
        Ok(Some((receipt, outcome)))
    }

    /// Reads the delivered ref and the marker on the remote.
    fn read_remote(&self, prepared: &PreparedDelivery, remote: &dyn Remote) -> RemoteReading {
        let payload = &prepared.payload;
        let (Ok(target), Ok(marker)) = (
            RefName::parse(&payload.remote_ref),
            RefName::parse(&payload.marker),
        ) else {
            return RemoteReading::Unreadable("the intent's refs are not ref names".into());
        };
        match remote.read_refs(&payload.remote, &[&target, &marker]) {
            Ok(values) => RemoteReading::Read {
                target: values.get(target.as_str()).copied(),
                marker: values.get(marker.as_str()).copied(),
            },
            Err(error) => RemoteReading::Unreadable(error.reason),
        }
    }

    /// Reports retained history and what the remote shows, read-only: `confirmed` if a
    /// receipt says delivered or the remote's marker names this intent's tag, `refused` if
    /// a receipt says so, `unknown` if only a claim exists, `not-dispatched` if none.
    pub fn inspect_delivery(
        &self,
        prepared: &PreparedDelivery,
        remote: &dyn Remote,
    ) -> Result<DeliveryObservation, RepositoryError> {
        let refs = self.check_delivery(prepared)?;
        let reading = self.read_remote(prepared, remote);
        let dispatch = self.read_delivery_dispatch(&refs, prepared)?;
        let receipt = self.read_delivery_receipt(&refs, prepared, dispatch)?;
        let tag = marker_tag_id(&marker_tag(&prepared.payload));
        let marked = matches!(&reading, RemoteReading::Read { marker: Some(m), .. } if *m == tag);
        let (invocation, problem) = match (&receipt, dispatch) {
            (Some((_, ReceiptOutcome::Delivered)), _) => (DeliveryInvocation::Confirmed, None),
            (Some((_, ReceiptOutcome::Refused(reason))), _) => (
                DeliveryInvocation::Refused,
                Some(format!("the remote refused the push: {reason}")),
            ),
            (None, Some(_)) if marked => (
                DeliveryInvocation::Confirmed,
                Some(
                    "no local receipt: the remote's marker names this intent's tag, so the \
                     push landed"
                        .to_owned(),
                ),
            ),
            (None, Some(_)) => (
                DeliveryInvocation::Unknown,
                Some(match &reading {
                    RemoteReading::Unreadable(why) => {
                        format!("a claim without a receipt, and the remote is unreadable: {why}")
                    }
                    RemoteReading::Read { .. } => "a claim without a receipt, and the remote's \
                                                   marker is absent: the push may still land \
                                                   or may never have started"
                        .to_owned(),
                }),
            ),
            (None, None) => (DeliveryInvocation::NotDispatched, None),
        };
        self.delivery_report(
            prepared,
            Seen {
                reading,
                dispatch,
                receipt: receipt.map(|(id, _)| id),
                invocation,
                dispatched: false,
                problem,
            },
        )
    }

    fn delivery_report(
        &self,
        prepared: &PreparedDelivery,
        seen: Seen,
    ) -> Result<DeliveryObservation, RepositoryError> {
        let payload = &prepared.payload;
        Ok(DeliveryObservation {
            intent: prepared.digest.clone(),
            observation: self.stamp()?,
            remote: payload.remote.clone(),
            remote_ref: payload.remote_ref.clone(),
            commit: payload.commit,
            tag: marker_tag_id(&marker_tag(payload)),
            reading: seen.reading,
            dispatch: seen.dispatch,
            receipt: seen.receipt,
            invocation: seen.invocation,
            dispatched: seen.dispatched,
            problem: seen.problem,
        })
    }

    /// Pushes M to the remote at most once for this intent. A replay, a remote that no
    /// longer names the expected value, an existing marker or a lost claim push nothing and
    /// report what they read; the claim holder consults `gate` once, then runs the one atomic
    /// push. Returns `Err` only when nothing was pushed; once the push may have started, the
    /// outcome is an observation, with anything not proven reported as unknown.
    pub fn invoke_delivery(
        &self,
        prepared: &PreparedDelivery,
        remote: &dyn Remote,
        gate: Option<Arc<dyn Gate>>,
    ) -> Result<DeliveryObservation, RepositoryError> {
        let refs = self.check_delivery(prepared)?;
        let payload = &prepared.payload;
        if self.read_delivery_dispatch(&refs, prepared)?.is_some() {
            return self.inspect_delivery(prepared, remote);
        }
        let reading = self.read_remote(prepared, remote);
        let refusal = match &reading {
            RemoteReading::Unreadable(why) => Some(format!(
                "the remote could not be read: {why}; no claim was made"
            )),
            RemoteReading::Read {
                marker: Some(marker),
                ..
            } => Some(format!(
                "the remote already holds {} (naming {marker}): this delivery's marker exists, so \
                 nothing is pushed again; no claim was made",
                payload.marker
            )),
            RemoteReading::Read { target, .. } if *target != payload.expected => Some(format!(
                "stale base: {} names {}, not the intent's expected {}; no claim was made",
                payload.remote_ref,
                describe(*target),
                describe(payload.expected)
            )),
            RemoteReading::Read { .. } => None,
        };
        if let Some(problem) = refusal {
            return self.delivery_report(
                prepared,
                Seen {
                    reading,
                    dispatch: None,
                    receipt: None,
                    invocation: DeliveryInvocation::NotDispatched,
                    dispatched: false,
                    problem: Some(problem),
                },
            );
        }
        // Everything the push sends is read (and re-hashed) before the claim, so a store that
        // cannot give it consumes nothing.
        let objects = self.delivered_objects(payload)?;
        let Some(claim) = self.claim_once(&refs.dispatch, prepared.intent, |nonce| {
            delivery_dispatch_message(&prepared.digest, nonce)
        })?
        else {
            return self.inspect_delivery(prepared, remote);
        };
        self.options.faults.reached(FaultPoint::DeliveryClaimed);
        if let Some(gate) = gate
            && let Err(reason) = consult(gate, self.options.git_timeout)
        {
            return self.delivery_report(
                prepared,
                Seen {
                    reading,
                    dispatch: Some(claim),
                    receipt: None,
                    invocation: DeliveryInvocation::Withheld,
                    dispatched: false,
                    problem: Some(format!("withheld before submission: {reason}")),
                },
            );
        }
        let tag = marker_tag(payload);
        let tag_id = marker_tag_id(&tag);
        let updates = [
            LeasedUpdate {
                name: RefName::parse(&payload.marker)?,
                expected: None,
                new: tag_id,
            },
            LeasedUpdate {
                name: RefName::parse(&payload.remote_ref)?,
                expected: payload.expected,
                new: payload.commit,
            },
        ];
        self.options.faults.reached(FaultPoint::DeliverySubmitted);
        let outcome = remote.push(
            &payload.remote,
            &Push {
                objects: &objects,
                boundary: &[payload.base],
                tag: (&tag, tag_id),
                updates: &updates,
            },
        );
        let after = self.read_remote(prepared, remote);
        let marked = matches!(&after, RemoteReading::Read { marker: Some(m), .. } if *m == tag_id);
        let (invocation, outcome, problem) = if marked {
            // The marker is created in the same atomic push as the ref: it names this
            // intent's tag only if that push landed, whatever the push said.
            let problem = match outcome {
                PushOutcome::Applied => None,
                other => Some(format!(
                    "the push's own answer was not a success ({other:?}), but reading the \
                     remote back shows this intent's marker: it landed"
                )),
            };
            (
                DeliveryInvocation::Confirmed,
                Some(ReceiptOutcome::Delivered),
                problem,
            )
        } else {
            match outcome {
                PushOutcome::Applied => (
                    DeliveryInvocation::Unknown,
                    None,
                    Some(format!(
                        "the remote reported the push done, but reading it back did not show \
                         the marker: {}",
                        describe_reading(&after)
                    )),
                ),
                PushOutcome::Refused { reason } => (
                    DeliveryInvocation::Refused,
                    Some(ReceiptOutcome::Refused(record_reason(&reason))),
                    Some(format!("the remote refused the push: {reason}")),
                ),
                PushOutcome::NotStarted { reason } => {
                    let reason = format!("the push could not be started: {reason}");
                    (
                        DeliveryInvocation::Refused,
                        Some(ReceiptOutcome::Refused(record_reason(&reason))),
                        Some(reason),
                    )
                }
                PushOutcome::Unknown { reason } => (
                    DeliveryInvocation::Unknown,
                    None,
                    Some(format!(
                        "the push's outcome is not known: {reason}; the remote read back: {}; \
                         unknown is not failed",
                        describe_reading(&after)
                    )),
                ),
            }
        };
        let (receipt, problem) = match outcome {
            Some(outcome) => match self.retain_delivery_receipt(&refs, prepared, claim, &outcome) {
                Ok(receipt) => (Some(receipt), problem),
                Err(why) => (
                    None,
                    Some(format!(
                        "{}the receipt was not retained: {why}",
                        problem.map(|p| format!("{p}; ")).unwrap_or_default()
                    )),
                ),
            },
            None => (None, problem),
        };
        self.options
            .faults
            .reached(FaultPoint::DeliveryAcknowledged);
        self.delivery_report(
            prepared,
            Seen {
                reading: after,
                dispatch: Some(claim),
                receipt,
                invocation,
                dispatched: true,
                problem,
            },
        )
    }

    fn retain_delivery_receipt(
        &self,
        refs: &DeliveryRefs,
        prepared: &PreparedDelivery,
        claim: ObjectId,
        outcome: &ReceiptOutcome,
    ) -> Result<ObjectId, String> {
        let receipt = commit_object(
            empty_tree().id,
            vec![claim],
            delivery_receipt_message(&prepared.digest, &prepared.payload.commit, outcome),
        );
        self.store
            .write_objects(std::slice::from_ref(&receipt), self.deadline())
            .map_err(|error| error.to_string())?;
        match self
            .store
            .create_ref(&refs.receipt, &receipt.id, self.deadline())
            .map_err(|error| error.to_string())?
        {
            RefUpdate::Applied => Ok(receipt.id),
            other => Err(format!("{other:?}")),
        }
    }

    /// Every object a push of M needs, read back from the store and re-hashed: M, its tree
    /// whole, and the base U with its tree (Git walks the base's tree to leave out what the
    /// remote has; U's own parents are a boundary).
    fn delivered_objects(
        &self,
        payload: &DeliveryPayload,
    ) -> Result<Vec<EncodedObject>, RepositoryError> {
        let mut objects = Vec::new();
        let mut seen = BTreeSet::new();
        for (commit, budget, what) in [
            (
                payload.commit,
                MAX_CANDIDATE_COMMIT_BYTES,
                "the delivered commit",
            ),
            (
                payload.base,
                MAX_IMPORTED_COMMIT_BYTES,
                "the delivered commit's base",
            ),
        ] {
            let body = self.read_one(commit, ObjectKind::Commit, budget, what)?;
            let heads = commit_heads(&body)
                .map_err(|rule| RepositoryError::corrupt(format!("{what} {commit}: {rule}")))?;
            let files = source::read_tree(
                self.store.as_ref(),
                heads.tree,
                &self.identity.settings(),
                what,
                self.deadline(),
            )?;
            let built = source::build_tree(&files);
            if built.tree != heads.tree {
                return Err(RepositoryError::corrupt(format!(
                    "{what} {commit}: its files build tree {}, not {}",
                    built.tree, heads.tree
                )));
            }
            for object in built
                .objects
                .into_iter()
                .chain([EncodedObject::new(ObjectKind::Commit, body)])
            {
                if seen.insert(object.id) {
                    objects.push(object);
                }
            }
        }
        Ok(objects)
    }
}

fn replay_delivery(
    existing: PreparedDelivery,
    digest: &Digest,
) -> Result<PreparedDelivery, RepositoryError> {
    if existing.digest != *digest {
        return Err(RepositoryError::Conflict {
            what: format!(
                "action {} occurrence {} already has another delivery intent ({})",
                existing.payload.action.id, existing.payload.action.occurrence, existing.digest
            ),
        });
    }
    Ok(existing)
}

fn delivery_intent_objects(bytes: Vec<u8>, digest: &Digest) -> Vec<EncodedObject> {
    record_objects(
        PAYLOAD_NAME,
        bytes,
        Vec::new(),
        delivery_intent_message(digest),
    )
}

fn upstream_objects(record: &UpstreamRecord) -> Vec<EncodedObject> {
    // Bounded strings (a 2 KiB URL, a 117-byte branch): encoding cannot fail.
    let bytes = canonical::to_canonical_bytes(record).unwrap_or_default();
    record_objects(
        UPSTREAM_RECORD_NAME,
        bytes,
        vec![record.base],
        format!("{UPSTREAM_PROTOCOL}\n"),
    )
}

fn describe(value: Option<ObjectId>) -> String {
    value.map_or_else(|| "nothing (absent)".to_owned(), |id| id.to_string())
}

fn describe_reading(reading: &RemoteReading) -> String {
    match reading {
        RemoteReading::Read { target, marker } => format!(
            "the ref names {}, the marker {}",
            describe(*target),
            describe(*marker)
        ),
        RemoteReading::Unreadable(why) => format!("unreadable ({why})"),
    }
}
