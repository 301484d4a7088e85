//! Guarded at-most-once integration: the one effect sf has on the world. The target ref moves
//! from base B to the Candidate's commit M at most once per prepared intent, even across
//! repeats, concurrent processes, restarts and kills; an outcome that cannot be known is
//! reported as unknown, never as failed (seed 001, invariants 8–12 and 15).
//!
//! Stored layout: `refs/sf/integrations/<key>/{intent,dispatch,receipt}`, where `<key>` is the
//! SHA-256 of the canonical `{protocol, action}`, so action ids never shape ref names. All
//! three refs are create-only.
//!
//! - intent I: commit over the tree `{payload.json}`, no parent: the canonical payload.
//! - dispatch D: commit over the empty tree, parent I, with a fresh random nonce: the claim.
//! - receipt R: commit over the empty tree, parent D, naming M: a confirmed update.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use crate::canonical::{self, Digest, Value, object};
use crate::contracts::{
    EncodedObject, Gate, GateAnswer, RefName, RefUpdate, RefValue, is_valid_reason,
};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::error::RepositoryError;
use super::identity::{IDENT, MAX_COMMIT_BYTES, RepositoryIdentity, check_target_ref};
use super::manifest::Slice;
use super::record::{FieldError, Fields, ID_RULE, is_valid_id};
use super::{Repository, random_nonce, source};

/// The protocol string of integration payloads, keys and records.
pub const INTEGRATION_PROTOCOL: &str = "sf-integration/1";
/// The largest canonical payload, in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 4096;
/// The prefix of every integration ref.
pub const INTEGRATION_REF_PREFIX: &str = "refs/sf/integrations/";
/// The name of the payload in an intent commit's tree.
pub const PAYLOAD_NAME: &str = "payload.json";
/// The reason given when a gate's answer is neither an allowance nor a valid refusal.
pub const MALFORMED_GUARD_ANSWER: &str =
    "the guard answered neither {proceed: true} nor {proceed: false, reason} with a valid reason";

/// Which occurrence of which action an intent is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub id: String,
    pub occurrence: u64,
}

/// Who owns the integration, at which generation of its ownership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub id: String,
    pub generation: u64,
}

/// What an integration is asked to do: move `target_ref` of `repository` from `base` to
/// `commit`, the commit of Candidate `candidate`, for `action`, with `proof` (the digest of
/// whatever admitted it) and `owner`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntegrationPayload {
    pub action: Action,
    pub product: String,
    pub slice: Slice,
    pub repository: RepositoryIdentity,
    pub target_ref: String,
    pub base: ObjectId,
    pub commit: ObjectId,
    pub candidate: Digest,
    pub proof: Digest,
    pub owner: Owner,
}

impl IntegrationPayload {
    /// The payload as a JSON record with the seed's field names (`ref` for the target ref).
    pub fn to_value(&self) -> Value {
        object([
            (
                "action",
                object([
                    ("id", self.action.id.as_str().into()),
                    ("occurrence", int(self.action.occurrence)),
                ]),
            ),
            ("product", self.product.as_str().into()),
            (
                "slice",
                object([
                    ("id", self.slice.id.as_str().into()),
                    ("revision", int(self.slice.revision)),
                ]),
            ),
            ("repository", self.repository.to_value()),
            ("ref", self.target_ref.as_str().into()),
            ("base", self.base.to_hex().into()),
            ("commit", self.commit.to_hex().into()),
            ("candidate", self.candidate.to_string().into()),
            ("proof", self.proof.to_string().into()),
            (
                "owner",
                object([
                    ("id", self.owner.id.as_str().into()),
                    ("generation", int(self.owner.generation)),
                ]),
            ),
        ])
    }

    fn from_value(value: &Value, path: &str) -> Result<Self, FieldError> {
        let fields = Fields::exact(
            value,
            path,
            &[
                "action",
                "product",
                "slice",
                "repository",
                "ref",
                "base",
                "commit",
                "candidate",
                "proof",
                "owner",
            ],
        )?;
        let action = Fields::exact(
            fields.value("action"),
            &fields.path("action"),
            &["id", "occurrence"],
        )?;
        let slice = Fields::exact(
            fields.value("slice"),
            &fields.path("slice"),
            &["id", "revision"],
        )?;
        let owner = Fields::exact(
            fields.value("owner"),
            &fields.path("owner"),
            &["id", "generation"],
        )?;
        Ok(Self {
            action: Action {
                id: action.string("id")?.to_owned(),
                occurrence: action.positive("occurrence")?,
            },
            product: fields.string("product")?.to_owned(),
            slice: Slice {
                id: slice.string("id")?.to_owned(),
                revision: slice.positive("revision")?,
            },
            repository: RepositoryIdentity::from_value(
                fields.value("repository"),
                &fields.path("repository"),
            )?,
            target_ref: fields.string("ref")?.to_owned(),
            base: fields.object_id("base")?,
            commit: fields.object_id("commit")?,
            candidate: fields.digest("candidate")?,
            proof: fields.digest("proof")?,
            owner: Owner {
                id: owner.string("id")?.to_owned(),
                generation: owner.positive("generation")?,
            },
        })
    }

    /// Parses a payload from JSON strictly.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RepositoryError> {
        let value = canonical::parse(bytes)
            .map_err(|error| RepositoryError::invalid("payload", error.to_string()))?;
        let payload = Self::from_value(&value, "payload")
            .map_err(|error| RepositoryError::invalid(error.field, error.rule))?;
        payload.validate()?;
        Ok(payload)
    }

    /// Checks the rules the types do not carry and returns the canonical bytes.
    pub fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        for (field, id) in [
            ("payload.action.id", &self.action.id),
            ("payload.product", &self.product),
            ("payload.slice.id", &self.slice.id),
            ("payload.owner.id", &self.owner.id),
        ] {
            if !is_valid_id(id) {
                return Err(RepositoryError::invalid(field, ID_RULE));
            }
        }
        for (field, number) in [
            ("payload.action.occurrence", self.action.occurrence),
            ("payload.slice.revision", self.slice.revision),
            ("payload.owner.generation", self.owner.generation),
        ] {
            if number == 0 || number > canonical::MAX_SAFE_INTEGER as u64 {
                return Err(RepositoryError::invalid(
                    field,
                    "must be a positive safe integer",
                ));
            }
        }
        check_target_ref(&self.target_ref)
            .map_err(|rule| RepositoryError::invalid("payload.ref", rule))?;
        if self.base == self.commit {
            return Err(RepositoryError::invalid(
                "payload.commit",
                "must differ from payload.base",
            ));
        }
        let bytes = canonical::encode(&self.to_value())
            .map_err(|error| RepositoryError::invalid("payload", error.to_string()))?;
        if bytes.len() > MAX_PAYLOAD_BYTES {
            return Err(RepositoryError::invalid(
                "payload",
                format!(
                    "its canonical encoding is {} bytes; at most {MAX_PAYLOAD_BYTES}",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }
}

fn int(number: u64) -> Value {
    Value::Integer(number as i64)
}

/// A retained intent: persist it and hand it to `invoke_once` and `inspect_integration`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedIntegration {
    /// The payload digest: `sha256:` of its canonical bytes.
    pub digest: Digest,
    /// The intent commit I.
    pub intent: ObjectId,
    pub payload: IntegrationPayload,
}

impl PreparedIntegration {
    /// The record as JSON: `{protocol, digest, intent, payload}`.
    pub fn to_value(&self) -> Value {
        object([
            ("protocol", INTEGRATION_PROTOCOL.into()),
            ("digest", self.digest.to_string().into()),
            ("intent", self.intent.to_hex().into()),
            ("payload", self.payload.to_value()),
        ])
    }

    /// Parses a persisted record strictly and checks that its digest is its payload's.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RepositoryError> {
        let value = canonical::parse(bytes)
            .map_err(|error| RepositoryError::invalid("prepared", error.to_string()))?;
        let invalid = |error: FieldError| RepositoryError::invalid(error.field, error.rule);
        let fields = Fields::exact(
            &value,
            "prepared",
            &["protocol", "digest", "intent", "payload"],
        )
        .map_err(invalid)?;
        fields
            .literal("protocol", INTEGRATION_PROTOCOL)
            .map_err(invalid)?;
        let prepared = Self {
            digest: fields.digest("digest").map_err(invalid)?,
            intent: fields.object_id("intent").map_err(invalid)?,
            payload: IntegrationPayload::from_value(fields.value("payload"), "prepared.payload")
                .map_err(invalid)?,
        };
        prepared.validate()?;
        Ok(prepared)
    }

    fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        let bytes = self.payload.validate()?;
        if Digest::of(&bytes) != self.digest {
            return Err(RepositoryError::invalid(
                "prepared.digest",
                "must be the sha256 of the payload's canonical bytes",
            ));
        }
        Ok(bytes)
    }
}

/// The refs of one intent.
struct IntegrationRefs {
    intent: RefName,
    dispatch: RefName,
    receipt: RefName,
}

fn integration_refs(action: &Action) -> IntegrationRefs {
    let key = object([
        ("protocol", INTEGRATION_PROTOCOL.into()),
        (
            "action",
            object([
                ("id", action.id.as_str().into()),
                ("occurrence", int(action.occurrence)),
            ]),
        ),
    ]);
    // Bounded (ids are at most 128 bytes), so encoding cannot fail; the hex is always a valid
    // ref segment.
    let key = Digest::of(&canonical::encode(&key).unwrap_or_default()).hex();
    let name = |leaf: &str| {
        RefName::parse(&format!("{INTEGRATION_REF_PREFIX}{key}/{leaf}"))
            .expect("valid integration ref")
    };
    IntegrationRefs {
        intent: name("intent"),
        dispatch: name("dispatch"),
        receipt: name("receipt"),
    }
}

fn empty_tree() -> EncodedObject {
    EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&[]))
}

fn commit_object(tree: ObjectId, parents: Vec<ObjectId>, message: String) -> EncodedObject {
    EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit {
            tree,
            parents,
            ident: IDENT.to_owned(),
            message,
        }),
    )
}

fn intent_message(digest: &Digest) -> String {
    format!("{INTEGRATION_PROTOCOL} intent\n\nintent: {digest}\n")
}

fn dispatch_message(digest: &Digest, nonce: &str) -> String {
    format!("{INTEGRATION_PROTOCOL} dispatch\n\nintent: {digest}\nnonce: {nonce}\n")
}

fn receipt_message(digest: &Digest, target: &ObjectId) -> String {
    format!("{INTEGRATION_PROTOCOL} receipt\n\nintent: {digest}\ntarget: {target}\n")
}

/// The intent objects for a payload: blob, tree and commit (last).
fn intent_objects(payload_bytes: Vec<u8>, digest: &Digest) -> Vec<EncodedObject> {
    let blob = EncodedObject::new(ObjectKind::Blob, payload_bytes);
    let tree = EncodedObject::new(
        ObjectKind::Tree,
        git_object::encode_tree(&[TreeEntry {
            mode: EntryMode::File,
            name: PAYLOAD_NAME.into(),
            id: blob.id,
        }]),
    );
    let commit = commit_object(tree.id, Vec::new(), intent_message(digest));
    vec![blob, tree, commit]
}

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
    pub id: ObjectId,
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
    pub observation: ObservationStamp,
    pub target_ref: String,
    /// The target as read (`None` when it could not be read).
    pub target: Option<ObjectId>,
    pub postcondition: Postcondition,
    /// The claim D, if one exists.
    pub dispatch: Option<ObjectId>,
    pub receipt: Option<IntegrationReceipt>,
    pub invocation: Invocation,
    /// True only for the call that started the update.
    pub dispatched: bool,
    pub problem: Option<String>,
}

impl IntegrationObservation {
    /// The observation as JSON with the seed's field names.
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

impl Repository {
    fn stamp(&self) -> Result<ObservationStamp, RepositoryError> {
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
        let value =
            canonical::parse_canonical(&bytes).map_err(|error| corrupt(&error.to_string()))?;
        let payload = IntegrationPayload::from_value(&value, "payload")
            .map_err(|error| corrupt(&format!("{}: {}", error.field, error.rule)))?;
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

    fn read_direct(&self, name: &RefName) -> Result<Option<ObjectId>, RepositoryError> {
        match self.store.read_ref(name, self.deadline())? {
            None => Ok(None),
            Some(RefValue::Direct(id)) => Ok(Some(id)),
            Some(RefValue::Symbolic(to)) => Err(RepositoryError::corrupt(format!(
                "{name} is a symbolic ref to {to}"
            ))),
        }
    }

    fn read_one(
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
        match self.read_intent(&refs)? {
            None => Err(RepositoryError::Missing {
                what: format!("intent {} ({})", prepared.digest, refs.intent),
            }),
            Some(retained) if retained == *prepared => Ok(refs),
            Some(retained) => Err(RepositoryError::Conflict {
                what: format!(
                    "the retained intent is {} at {}, not this one",
                    retained.digest, retained.intent
                ),
            }),
        }
    }

    /// Reads the dispatch claim D under `refs.dispatch`, verified, if any.
    fn read_dispatch(
        &self,
        refs: &IntegrationRefs,
        prepared: &PreparedIntegration,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        let Some(dispatch) = self.read_direct(&refs.dispatch)? else {
            return Ok(None);
        };
        let body = self.read_one(
            dispatch,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "dispatch commit",
        )?;
        let valid = git_object::decode_commit(&body).is_some_and(|commit| {
            let nonce_ok = commit
                .message
                .strip_prefix(&format!(
                    "{INTEGRATION_PROTOCOL} dispatch\n\nintent: {}\nnonce: ",
                    prepared.digest
                ))
                .and_then(|rest| rest.strip_suffix('\n'))
                .is_some_and(|nonce| {
                    nonce.len() == 32
                        && nonce
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                });
            nonce_ok
                && commit.ident == IDENT
                && commit.parents == [prepared.intent]
                && commit.tree == empty_tree().id
        });
        if !valid {
            return Err(RepositoryError::corrupt(format!(
                "dispatch {dispatch} under {} is not a claim on this intent",
                refs.dispatch
            )));
        }
        Ok(Some(dispatch))
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
        Ok(IntegrationObservation {
            intent: prepared.digest.clone(),
            observation: self.stamp()?,
            target_ref: self.identity.target_ref.clone(),
            target,
            postcondition,
            dispatch,
            receipt,
            invocation,
            dispatched: false,
            problem: None,
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
        let observation = |target,
                           postcondition,
                           dispatch,
                           receipt,
                           invocation,
                           dispatched,
                           problem|
         -> Result<IntegrationObservation, RepositoryError> {
            Ok(IntegrationObservation {
                intent: prepared.digest.clone(),
                observation: self.stamp()?,
                target_ref: self.identity.target_ref.clone(),
                target,
                postcondition,
                dispatch,
                receipt,
                invocation,
                dispatched,
                problem,
            })
        };
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
            return observation(
                Some(target),
                postcondition,
                None,
                None,
                Invocation::NotDispatched,
                false,
                Some(format!(
                    "stale base: the target names {target}, not the intent's base {}; no claim was made",
                    payload.base
                )),
            );
        }
        // Claim with a create-only dispatch ref naming a fresh commit.
        let tree = empty_tree();
        let claim = commit_object(
            tree.id,
            vec![prepared.intent],
            dispatch_message(&prepared.digest, &random_nonce()?),
        );
        self.store
            .write_objects(&[tree, claim.clone()], self.deadline())?;
        let held = match self
            .store
            .create_ref(&refs.dispatch, &claim.id, self.deadline())?
        {
            RefUpdate::Applied => true,
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                match self.read_direct(&refs.dispatch)? {
                    Some(other) if other != claim.id => false,
                    _ => {
                        return Err(RepositoryError::GitFailed {
                            detail: format!(
                                "the claim {} on {} was not acknowledged; nothing was started",
                                claim.id, refs.dispatch
                            ),
                        });
                    }
                }
            }
        };
        if !held {
            // Another call holds the claim: report what it left, start nothing.
            return self.inspect_integration(prepared);
        }
        self.options.faults.reached(FaultPoint::IntegrationClaimed);
        if let Some(gate) = gate
            && let Err(reason) = consult(gate, self.options.git_timeout)
        {
            self.options.faults.reached(FaultPoint::IntegrationWithheld);
            return observation(
                Some(target),
                Postcondition::NotObserved,
                Some(claim.id),
                None,
                Invocation::Withheld,
                false,
                Some(format!("withheld before submission: {reason}")),
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
        match outcome {
            RefUpdate::Applied => {
                let receipt = commit_object(
                    empty_tree().id,
                    vec![claim.id],
                    receipt_message(&prepared.digest, &payload.commit),
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
                // Fired once the confirmed update's receipt write has been attempted, so a
                // process killed here has retained what inspection needs to say confirmed.
                self.options
                    .faults
                    .reached(FaultPoint::IntegrationAcknowledged);
                let (receipt, problem) = match written {
                    Ok(RefUpdate::Applied) => (
                        Some(IntegrationReceipt {
                            id: receipt.id,
                            target: payload.commit,
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
                };
                observation(
                    after,
                    postcondition,
                    Some(claim.id),
                    receipt,
                    Invocation::Confirmed,
                    true,
                    problem,
                )
            }
            RefUpdate::Refused { current } => observation(
                after,
                postcondition,
                Some(claim.id),
                None,
                Invocation::Unknown,
                true,
                Some(format!(
                    "the update was not confirmed (the store refused; the target read {current:?}); unknown is not failed{}",
                    suffix(read_problem)
                )),
            ),
            RefUpdate::Unknown { reason } => observation(
                after,
                postcondition,
                Some(claim.id),
                None,
                Invocation::Unknown,
                true,
                Some(format!(
                    "the update was not confirmed: {reason}{}",
                    suffix(read_problem)
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

/// Consults `gate` once, on its own thread so that a gate that never answers cannot hold the
/// call: no answer within `timeout` withholds (the gate is abandoned, not stopped), and an
/// allowance that arrives when the monotonic clock shows `timeout` or more since the call is
/// late and withholds too. Only an exact, timely `Proceed` returns `Ok`.
fn consult(gate: Arc<dyn Gate>, timeout: Duration) -> Result<(), String> {
    let started = Instant::now();
    let deadline = started + timeout;
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("sf-integration-guard".into())
        .spawn(move || {
            let answer =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gate.current(deadline)));
            let _ = sender.send(answer);
        });
    if let Err(error) = spawned {
        return Err(format!(
            "the guard failed: it could not be started: {error}"
        ));
    }
    let answer = match receiver.recv_timeout(timeout) {
        Ok(answer) => answer,
        Err(_) => {
            return Err(format!(
                "the guard did not answer within {} ms",
                timeout.as_millis()
            ));
        }
    };
    let late = started.elapsed() >= timeout;
    match answer {
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a value that cannot be described".into());
            Err(format!("the guard failed: {}", truncate(&message, 256)))
        }
        Ok(Err(error)) => Err(format!(
            "the guard failed: {}",
            truncate(&error.to_string(), 256)
        )),
        Ok(Ok(GateAnswer::Refuse { reason })) if is_valid_reason(&reason) => Err(reason),
        Ok(Ok(GateAnswer::Refuse { .. })) => Err(MALFORMED_GUARD_ANSWER.into()),
        Ok(Ok(GateAnswer::Proceed)) if late => Err(format!(
            "the guard did not answer within {} ms",
            timeout.as_millis()
        )),
        Ok(Ok(GateAnswer::Proceed)) => Ok(()),
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
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

    struct Slow(Duration, GateAnswer);
    impl Gate for Slow {
        fn current(&self, _deadline: Instant) -> Result<GateAnswer, crate::contracts::GateError> {
            std::thread::sleep(self.0);
            Ok(self.1.clone())
        }
    }

    struct Panics;
    impl Gate for Panics {
        fn current(&self, _deadline: Instant) -> Result<GateAnswer, crate::contracts::GateError> {
            panic!("boom")
        }
    }

    #[test]
    fn only_an_exact_timely_allowance_proceeds() {
        let quick = Duration::from_millis(0);
        let bound = Duration::from_millis(300);
        assert_eq!(
            consult(Arc::new(Slow(quick, GateAnswer::Proceed)), bound),
            Ok(())
        );
        assert_eq!(
            consult(
                Arc::new(Slow(
                    quick,
                    GateAnswer::Refuse {
                        reason: "closed".into()
                    }
                )),
                bound
            ),
            Err("closed".into())
        );
        assert_eq!(
            consult(
                Arc::new(Slow(
                    quick,
                    GateAnswer::Refuse {
                        reason: String::new()
                    }
                )),
                bound
            ),
            Err(MALFORMED_GUARD_ANSWER.into())
        );
        assert_eq!(
            consult(Arc::new(Panics), bound),
            Err("the guard failed: boom".into())
        );
        let late = consult(
            Arc::new(Slow(Duration::from_millis(600), GateAnswer::Proceed)),
            bound,
        );
        assert_eq!(late, Err("the guard did not answer within 300 ms".into()));
    }
}
