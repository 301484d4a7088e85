//! The integration records: the payload, the prepared intent, the refs of one intent, and the
//! byte encodings of the intent, dispatch and receipt commits.

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, FieldError, Value};
use crate::contracts::{EncodedObject, RefName};
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::super::error::RepositoryError;
use super::super::identity::{IDENT, RepositoryIdentity, check_target_ref};
use super::super::manifest::Slice;
use crate::contracts::grammar::{ID_RULE, is_valid_id};

/// The protocol string of integration payloads, keys and records.
pub const INTEGRATION_PROTOCOL: &str = "sf-integration/1";
/// The largest canonical payload, in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 4096;
/// The prefix of every integration ref.
pub const INTEGRATION_REF_PREFIX: &str = "refs/sf/integrations/";
/// The name of the payload in an intent commit's tree.
pub const PAYLOAD_NAME: &str = "payload.json";
/// Which occurrence of which action an intent is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// The action's id; follows [`ID_RULE`].
    pub id: String,
    /// Which occurrence of the action (a positive safe integer): each occurrence has at most
    /// one intent, so a new effect needs a new occurrence.
    #[serde(deserialize_with = "canonical::positive")]
    pub occurrence: u64,
}

/// Who owns the integration, at which generation of its ownership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    /// The owner's id; follows [`ID_RULE`]. Recorded in the payload, not interpreted.
    pub id: String,
    /// The generation of the owner's ownership (a positive safe integer). Recorded in the
    /// payload, not interpreted.
    #[serde(deserialize_with = "canonical::positive")]
    pub generation: u64,
}

/// What an integration is asked to do: move `target_ref` of `repository` from `base` to
/// `commit`, the commit of Candidate `candidate`, for `action`, with `proof` (the digest of
/// whatever admitted it) and `owner`. Each field is written under its own name, except
/// `target_ref`, which is written as `ref`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntegrationPayload {
    /// The action occurrence the intent is for; it keys the intent's refs.
    pub action: Action,
    /// The Product id; must be the repository's.
    pub product: String,
    /// The Slice the Candidate was sealed for.
    pub slice: Slice,
    /// The repository whose target moves; must be the one the intent is prepared in.
    pub repository: RepositoryIdentity,
    /// The ref to move; must be the repository's target ref.
    #[serde(rename = "ref")]
    pub target_ref: String,
    /// The commit the target must name for the move to start: the Candidate's base B.
    pub base: ObjectId,
    /// The commit the target is moved to: the Candidate's commit M; never equal to `base`.
    pub commit: ObjectId,
    /// The digest of the Candidate (its manifest's `sha256:`).
    pub candidate: Digest,
    /// The digest of what admitted the move; the commands put the Verified Verdict's digest
    /// here, and the primitive does not check it.
    pub proof: Digest,
    /// Who owns the integration.
    pub owner: Owner,
}

impl IntegrationPayload {
    /// The payload as a JSON record.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a payload holds only strings and integers")
    }

    /// Parses a payload from JSON strictly.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RepositoryError> {
        let payload: Self = canonical::from_slice(bytes, "payload").map_err(invalid)?;
        payload.validate()?;
        Ok(payload)
    }

    /// Checks the rules the types do not carry and returns the canonical bytes.
    pub fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        check_effect_fields(&self.action, &self.product, &self.slice, &self.owner)?;
        check_target_ref(&self.target_ref)
            .map_err(|rule| RepositoryError::invalid("payload.ref", rule))?;
        if self.base == self.commit {
            return Err(RepositoryError::invalid(
                "payload.commit",
                "must differ from payload.base",
            ));
        }
        let bytes = canonical::to_canonical_bytes(self)
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

/// Checks what every effect's payload holds besides its own fields: the ids in the id
/// grammar and the numbers positive safe integers, each error naming its `payload.` field.
pub(in crate::repository) fn check_effect_fields(
    action: &Action,
    product: &str,
    slice: &Slice,
    owner: &Owner,
) -> Result<(), RepositoryError> {
    for (field, id) in [
        ("payload.action.id", action.id.as_str()),
        ("payload.product", product),
        ("payload.slice.id", slice.id.as_str()),
        ("payload.owner.id", owner.id.as_str()),
    ] {
        if !is_valid_id(id) {
            return Err(RepositoryError::invalid(field, ID_RULE));
        }
    }
    for (field, number) in [
        ("payload.action.occurrence", action.occurrence),
        ("payload.slice.revision", slice.revision),
        ("payload.owner.generation", owner.generation),
    ] {
        if number == 0 || number > canonical::MAX_SAFE_INTEGER as u64 {
            return Err(RepositoryError::invalid(
                field,
                "must be a positive safe integer",
            ));
        }
    }
    Ok(())
}

/// A record's field error as invalid input naming the field.
fn invalid(error: FieldError) -> RepositoryError {
    RepositoryError::invalid(error.field, error.rule)
}

/// A retained intent: persist it and hand it to `invoke_once` and `inspect_integration`.
/// Written as `{protocol, digest, intent, payload}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct PreparedIntegration {
    /// The payload digest: `sha256:` of its canonical bytes.
    pub digest: Digest,
    /// The intent commit I.
    pub intent: ObjectId,
    /// The payload the intent retains, as `payload.json` in I's tree.
    pub payload: IntegrationPayload,
}

canonical::literal_fields!(PreparedIntegration { "protocol": INTEGRATION_PROTOCOL });

impl PreparedIntegration {
    /// The record as JSON: `{protocol, digest, intent, payload}`.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a prepared integration holds only strings and integers")
    }

    /// Parses a persisted record strictly and checks that its digest is its payload's.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RepositoryError> {
        let prepared: Self = canonical::from_slice(bytes, "prepared").map_err(invalid)?;
        prepared.validate()?;
        Ok(prepared)
    }

    pub(super) fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        digest_of_payload(self.payload.validate()?, &self.digest)
    }
}

/// `bytes`, a payload's canonical bytes, when `digest` is their sha256 (a prepared record's
/// `digest`): `invalid-input` naming `prepared.digest` otherwise.
pub(in crate::repository) fn digest_of_payload(
    bytes: Vec<u8>,
    digest: &Digest,
) -> Result<Vec<u8>, RepositoryError> {
    if Digest::of(&bytes) != *digest {
        return Err(RepositoryError::invalid(
            "prepared.digest",
            "must be the sha256 of the payload's canonical bytes",
        ));
    }
    Ok(bytes)
}

/// What a call given a prepared record `prepared` may go on with: the record retained for
/// its occurrence must be exactly it (`missing` when none is, `conflict` when another is).
/// `what` names the kind of intent, `at` the ref it is retained under, `ids` gives a
/// record's digest and intent commit.
pub(in crate::repository) fn retained_exactly<P: PartialEq>(
    retained: Option<P>,
    prepared: &P,
    what: &str,
    at: &RefName,
    ids: impl Fn(&P) -> (&Digest, &ObjectId),
) -> Result<(), RepositoryError> {
    match retained {
        None => Err(RepositoryError::Missing {
            what: format!("{what} {} ({at})", ids(prepared).0),
        }),
        Some(retained) if retained == *prepared => Ok(()),
        Some(retained) => {
            let (digest, intent) = ids(&retained);
            Err(RepositoryError::Conflict {
                what: format!("the retained {what} is {digest} at {intent}, not this one"),
            })
        }
    }
}

/// The refs of one intent.
pub struct IntegrationRefs {
    /// `…/<key>/intent`: the intent commit I.
    pub intent: RefName,
    /// `…/<key>/dispatch`: the claim D.
    pub dispatch: RefName,
    /// `…/<key>/receipt`: the receipt R.
    pub receipt: RefName,
}

/// The refs of the intent whose intent ref is `intent` (`…/<key>/intent`): its siblings.
pub(super) fn sibling_refs(intent: &RefName) -> Result<IntegrationRefs, RepositoryError> {
    let parent = intent.as_str().strip_suffix("intent").unwrap_or_default();
    let name = |leaf: &str| {
        RefName::parse(&format!("{parent}{leaf}"))
            .map_err(|_| RepositoryError::corrupt(format!("{intent} is not an intent ref")))
    };
    Ok(IntegrationRefs {
        intent: intent.clone(),
        dispatch: name("dispatch")?,
        receipt: name("receipt")?,
    })
}

/// The refs of the intent for `action`: `refs/sf/integrations/<key>/{intent,dispatch,receipt}`.
pub fn integration_refs(action: &Action) -> IntegrationRefs {
    #[derive(Serialize)]
    struct Key<'a> {
        protocol: &'a str,
        action: &'a Action,
    }
    let key = Key {
        protocol: INTEGRATION_PROTOCOL,
        action,
    };
    // Bounded (ids are at most 128 bytes), so encoding cannot fail; the hex is always a valid
    // ref segment.
    let key = Digest::of(&canonical::to_canonical_bytes(&key).unwrap_or_default()).hex();
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

pub(in crate::repository) fn empty_tree() -> EncodedObject {
    EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&[]))
}

pub(in crate::repository) fn commit_object(
    tree: ObjectId,
    parents: Vec<ObjectId>,
    message: String,
) -> EncodedObject {
    EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit {
            tree,
            parents,
            author: IDENT.to_owned(),
            committer: IDENT.to_owned(),
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
    record_objects(
        PAYLOAD_NAME,
        payload_bytes,
        Vec::new(),
        intent_message(digest),
    )
}

/// The objects of a record commit by sf whose tree holds one file, `name` with `bytes`: blob,
/// tree and commit (last), the commit with `parents` and `message`.
pub(in crate::repository) fn record_objects(
    name: &str,
    bytes: Vec<u8>,
    parents: Vec<ObjectId>,
    message: String,
) -> Vec<EncodedObject> {
    let blob = EncodedObject::new(ObjectKind::Blob, bytes);
    let tree = EncodedObject::new(
        ObjectKind::Tree,
        git_object::encode_tree(&[TreeEntry {
            mode: EntryMode::File,
            name: name.into(),
            id: blob.id,
        }]),
    );
    let commit = commit_object(tree.id, parents, message);
    vec![blob, tree, commit]
}
