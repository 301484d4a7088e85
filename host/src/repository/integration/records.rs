//! The integration records: the payload, the prepared intent, the refs of one intent, and the
//! byte encodings of the intent, dispatch and receipt commits.

use crate::canonical::{self, Digest, Value, object};
use crate::contracts::{EncodedObject, RefName};
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::super::error::RepositoryError;
use super::super::identity::{IDENT, RepositoryIdentity, check_target_ref};
use super::super::manifest::Slice;
use super::super::record::{FieldError, Fields, ID_RULE, is_valid_id};

/// The protocol string of integration payloads, keys and records.
pub const INTEGRATION_PROTOCOL: &str = "sf-integration/1";
/// The largest canonical payload, in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 4096;
/// The prefix of every integration ref.
pub const INTEGRATION_REF_PREFIX: &str = "refs/sf/integrations/";
/// The name of the payload in an intent commit's tree.
pub const PAYLOAD_NAME: &str = "payload.json";
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
            ("slice", self.slice.to_value()),
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

    pub(super) fn from_value(value: &Value, path: &str) -> Result<Self, FieldError> {
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

pub(super) fn int(number: u64) -> Value {
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

    pub(super) fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
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
pub(super) struct IntegrationRefs {
    pub(super) intent: RefName,
    pub(super) dispatch: RefName,
    pub(super) receipt: RefName,
}

pub(super) fn integration_refs(action: &Action) -> IntegrationRefs {
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

pub(super) fn empty_tree() -> EncodedObject {
    EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&[]))
}

pub(super) fn commit_object(
    tree: ObjectId,
    parents: Vec<ObjectId>,
    message: String,
) -> EncodedObject {
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

/// The message of intent commit I.
pub fn intent_message(digest: &Digest) -> String {
    format!("{INTEGRATION_PROTOCOL} intent\n\nintent: {digest}\n")
}

/// The message of dispatch commit D.
pub fn dispatch_message(digest: &Digest, nonce: &str) -> String {
    format!("{INTEGRATION_PROTOCOL} dispatch\n\nintent: {digest}\nnonce: {nonce}\n")
}

/// The message of receipt commit R.
pub fn receipt_message(digest: &Digest, target: &ObjectId) -> String {
    format!("{INTEGRATION_PROTOCOL} receipt\n\nintent: {digest}\ntarget: {target}\n")
}

/// The intent objects for a payload: blob, tree and commit (last).
pub(super) fn intent_objects(payload_bytes: Vec<u8>, digest: &Digest) -> Vec<EncodedObject> {
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
