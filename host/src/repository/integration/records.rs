//! The integration records: the payload, what it gives the at-most-once protocol, the refs of
//! one intent, and the messages of the intent, dispatch and receipt commits.

use crate::judging::Admits;
use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::git_object::ObjectId;

use super::super::at_most_once::{
    Action, EffectPayload, IntentRefs, Owner, Prepared, Wording, canonical_payload,
    check_effect_fields, dispatch_message as dispatch_of, intent_message as intent_of,
    receipt_head,
};
use super::super::error::RepositoryError;
use super::super::identity::{RepositoryIdentity, check_target_ref};
use super::super::manifest::Slice;
use super::observation::TargetView;

/// The protocol string of integration payloads, keys and records.
pub const INTEGRATION_PROTOCOL: &str = "sf-integration/1";
/// The largest canonical payload, in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 4096;
/// The prefix of every integration ref.
pub const INTEGRATION_REF_PREFIX: &str = "refs/sf/integrations/";

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
        let payload: Self = canonical::from_slice(bytes, "payload")
            .map_err(|error| RepositoryError::invalid(error.field, error.rule))?;
        payload.validate()?;
        Ok(payload)
    }

    /// Checks the rules the types do not carry and returns the canonical bytes.
    pub fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        check_effect_fields(&self.action, &self.product, &self.slice, &self.owner)?;
        check_target_ref(&self.target_ref)
            .map_err(|rule| RepositoryError::invalid("payload.ref", rule))?;
        canonical_payload(self, &self.base, &self.commit)
    }
}

/// A retained intent: persist it and hand it to `invoke_once` and `inspect_integration`.
/// Written as `{protocol, digest, intent, payload}`.
pub type PreparedIntegration = Prepared<IntegrationPayload>;

canonical::literal_fields!(PreparedIntegration { "protocol": INTEGRATION_PROTOCOL });

impl EffectPayload for IntegrationPayload {
    type View = TargetView;
    // A receipt is written only for a confirmed update, so it says nothing more.
    type Outcome = ();

    const PROTOCOL: &'static str = INTEGRATION_PROTOCOL;
    const REF_PREFIX: &'static str = INTEGRATION_REF_PREFIX;
    const MAX_BYTES: usize = MAX_PAYLOAD_BYTES;
    const RECEIPT_FIRST: bool = true;
    const WORDING: Wording = Wording {
        intent_parts: Some(["intent commit", "intent tree", "intent payload"]),
        intent: "intent",
        receipt_commit: "receipt commit",
        receipt_without_claim: "has no dispatch",
        receipt_mismatch: "does not confirm this claim",
        receipt_lost: "the update is confirmed but ",
    };

    fn receipt_body(&self, _confirmed: &()) -> String {
        target_line(&self.commit)
    }

    fn receipt_outcome(_: &str) {}

    fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        IntegrationPayload::validate(self)
    }

    // The target is the repository's own ref: the action alone keys it.
    fn key_nonce(_: &RepositoryIdentity) -> Option<&str> {
        None
    }

    fn action(&self) -> &Action {
        &self.action
    }

    fn repository(&self) -> &RepositoryIdentity {
        &self.repository
    }

    fn admitted(&self) -> Admits {
        Admits::new(
            &self.candidate,
            self.base,
            self.commit,
            &self.slice,
            &self.proof,
        )
    }
}

/// The refs of the intent for `action`: `refs/sf/integrations/<key>/{intent,dispatch,receipt}`,
/// `<key>` being the SHA-256 hex of the canonical `{action, protocol}`.
pub fn integration_refs(action: &Action) -> IntentRefs {
    IntentRefs::keyed::<IntegrationPayload>(None, action)
}

/// The message of intent commit I.
pub fn intent_message(digest: &Digest) -> String {
    intent_of(INTEGRATION_PROTOCOL, digest)
}

/// The message of dispatch commit D.
pub fn dispatch_message(digest: &Digest, nonce: &str) -> String {
    dispatch_of(INTEGRATION_PROTOCOL, digest, nonce)
}

/// The message of receipt commit R.
pub fn receipt_message(digest: &Digest, target: &ObjectId) -> String {
    receipt_head(INTEGRATION_PROTOCOL, digest) + &target_line(target)
}

/// What a receipt says after its `intent:` line: the target it confirms.
fn target_line(target: &ObjectId) -> String {
    format!("target: {target}\n")
}
