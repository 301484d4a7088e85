//! The delivery records: the payload and the prepared intent, the refs of one intent (local
//! and on the remote), the marker tag pushed with the branch, and the messages of the intent,
//! dispatch and receipt commits.

use crate::judging::Admits;
use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest};
use crate::contracts::RefName;
use crate::git_object::ObjectId;

use super::super::at_most_once::{
    Action, EffectPayload, IntentRefs, Owner, Prepared, Wording, canonical_payload,
    check_effect_fields, dispatch_message, effect_key, intent_message, receipt_head,
};
use super::super::error::RepositoryError;
use super::super::identity::{IDENT, RepositoryIdentity, check_target_ref};
use super::super::manifest::Slice;
use super::observation::RemoteView;
use super::upstream::check_url;

/// The protocol string of delivery payloads, keys, records and marker tags.
pub const DELIVERY_PROTOCOL: &str = "sf-delivery/1";
/// The prefix of every local delivery ref.
pub const DELIVERY_REF_PREFIX: &str = "refs/sf/deliveries/";
/// The prefix of every marker ref on a remote.
pub const MARKER_REF_PREFIX: &str = "refs/sf/delivered/";
/// The largest canonical delivery payload, in bytes.
pub const MAX_DELIVERY_PAYLOAD_BYTES: usize = 8192;
/// The longest reason a refusal receipt keeps, in characters.
pub const MAX_REASON_CHARS: usize = 256;

/// Where a delivery puts the Candidate's commit M.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryMode {
    /// The upstream branch itself, moved from the base U to M (a fast-forward).
    Branch,
    /// A new branch `refs/heads/sf/<candidate hex>`, created (never moved), for a hosting
    /// platform to review and merge; what the platform merges is its own commit.
    SideBranch,
}

impl DeliveryMode {
    /// The kebab-case word (`branch`, `side-branch`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Branch => "branch",
            Self::SideBranch => "side-branch",
        }
    }
}

/// What a delivery is asked to do: push M, the commit of Candidate `candidate` (Verified with
/// Verdict `verdict`), to `ref` of `remote`, from `expected` (U for a branch, absent for a
/// side branch), together with the create-only marker ref `marker`, for `action`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryPayload {
    /// The action occurrence the intent is for; with the repository it keys the refs.
    pub action: Action,
    /// The Product id; must be the repository's.
    pub product: String,
    /// The Slice the Candidate was sealed for.
    pub slice: Slice,
    /// The owned repository the Candidate is sealed in.
    pub repository: RepositoryIdentity,
    /// The digest of the Candidate.
    pub candidate: Digest,
    /// The digest of the Verified Verdict that admits the delivery.
    pub verdict: Digest,
    /// The Candidate's commit M: what is pushed, byte for byte.
    pub commit: ObjectId,
    /// The Candidate's base U; M's parent.
    pub base: ObjectId,
    /// Where M goes.
    pub mode: DeliveryMode,
    /// The remote's URL (the base's recorded upstream).
    pub remote: String,
    /// The remote ref moved or created.
    #[serde(rename = "ref")]
    pub remote_ref: String,
    /// The value `ref` must name for the push to start: U for a branch; absent (the ref must
    /// not exist) for a side branch.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "canonical::optional"
    )]
    pub expected: Option<ObjectId>,
    /// The marker ref created in the same atomic push: `refs/sf/delivered/<key>`.
    pub marker: String,
    /// Who owns the delivery.
    pub owner: Owner,
}

impl DeliveryPayload {
    /// Checks the rules the types do not carry and returns the canonical bytes.
    pub fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        check_effect_fields(&self.action, &self.product, &self.slice, &self.owner)?;
        check_url(&self.remote).map_err(|rule| RepositoryError::invalid("payload.remote", rule))?;
        check_target_ref(&self.remote_ref)
            .map_err(|rule| RepositoryError::invalid("payload.ref", rule))?;
        let marker = marker_ref(&self.repository, &self.action);
        if self.marker != marker.as_str() {
            return Err(RepositoryError::invalid(
                "payload.marker",
                format!("must be {marker}, the marker of this repository and action"),
            ));
        }
        match (self.mode, self.expected) {
            (DeliveryMode::Branch, Some(expected)) if expected == self.base => {}
            (DeliveryMode::Branch, _) => {
                return Err(RepositoryError::invalid(
                    "payload.expected",
                    "a branch delivery expects the remote ref to name the base",
                ));
            }
            (DeliveryMode::SideBranch, None) => {
                if self.remote_ref != side_branch(&self.candidate) {
                    return Err(RepositoryError::invalid(
                        "payload.ref",
                        format!(
                            "a side-branch delivery creates {}",
                            side_branch(&self.candidate)
                        ),
                    ));
                }
            }
            (DeliveryMode::SideBranch, Some(_)) => {
                return Err(RepositoryError::invalid(
                    "payload.expected",
                    "a side-branch delivery expects the remote ref to be absent",
                ));
            }
        }
        canonical_payload(self, &self.base, &self.commit)
    }
}

/// The side branch a Candidate is delivered to: `refs/heads/sf/<candidate hex>`.
pub fn side_branch(candidate: &Digest) -> String {
    format!("refs/heads/sf/{}", candidate.hex())
}

/// A retained delivery intent: persist it and hand it to `invoke_delivery` and
/// `inspect_delivery`. Written as `{protocol, digest, intent, payload}`.
pub type PreparedDelivery = Prepared<DeliveryPayload>;

canonical::literal_fields!(PreparedDelivery { "protocol": DELIVERY_PROTOCOL });

impl EffectPayload for DeliveryPayload {
    fn admitted(&self) -> Admits {
        let Self {
            candidate,
            base,
            commit,
            slice,
            verdict,
            ..
        } = self;
        // A delivery's proof is the Verdict it names.
        Admits::new(candidate, *base, *commit, slice, verdict)
    }

    type View = RemoteView;
    type Outcome = ReceiptOutcome;

    const PROTOCOL: &'static str = DELIVERY_PROTOCOL;
    const REF_PREFIX: &'static str = DELIVERY_REF_PREFIX;
    const MAX_BYTES: usize = MAX_DELIVERY_PAYLOAD_BYTES;
    const RECEIPT_FIRST: bool = false;
    const WORDING: Wording = Wording {
        intent_parts: None,
        intent: "delivery intent",
        receipt_commit: "delivery receipt commit",
        receipt_without_claim: "does not answer this delivery's claim",
        receipt_mismatch: "does not answer this delivery's claim",
        receipt_lost: "",
    };

    fn receipt_body(&self, outcome: &ReceiptOutcome) -> String {
        outcome_lines(&self.commit, outcome)
    }

    fn receipt_outcome(body: &str) -> ReceiptOutcome {
        match body
            .strip_prefix(REFUSED)
            .and_then(|rest| rest.strip_suffix('\n'))
        {
            Some(reason) if record_reason(reason) == reason => {
                ReceiptOutcome::Refused(reason.to_owned())
            }
            _ => ReceiptOutcome::Delivered,
        }
    }

    fn validate(&self) -> Result<Vec<u8>, RepositoryError> {
        DeliveryPayload::validate(self)
    }

    // The key also names the marker on a remote other repositories may deliver to.
    fn key_nonce(repository: &RepositoryIdentity) -> Option<&str> {
        Some(&repository.nonce)
    }

    fn action(&self) -> &Action {
        &self.action
    }

    fn repository(&self) -> &RepositoryIdentity {
        &self.repository
    }
}

/// The marker ref a delivery creates on the remote in the same atomic push as the branch.
pub fn marker_ref(repository: &RepositoryIdentity, action: &Action) -> RefName {
    // The key of the delivery's local refs, so that the marker names this repository's
    // delivery for `action` and no other.
    let key = effect_key(
        DELIVERY_PROTOCOL,
        DeliveryPayload::key_nonce(repository),
        action,
    );
    RefName::parse(&format!("{MARKER_REF_PREFIX}{key}")).expect("valid marker ref")
}

/// The local refs of the delivery intent for `action` in `repository`:
/// `refs/sf/deliveries/<key>/{intent,dispatch,receipt}`, `<key>` being the SHA-256 hex of the
/// canonical `{action, protocol, repository}` (`repository`: the repository's nonce).
pub fn delivery_refs(repository: &RepositoryIdentity, action: &Action) -> IntentRefs {
    IntentRefs::of::<DeliveryPayload>(repository, action)
}

/// The message of intent commit I.
pub fn delivery_intent_message(digest: &Digest) -> String {
    intent_message(DELIVERY_PROTOCOL, digest)
}

/// The message of dispatch commit D.
pub fn delivery_dispatch_message(digest: &Digest, nonce: &str) -> String {
    dispatch_message(DELIVERY_PROTOCOL, digest, nonce)
}

/// What a receipt says: the push landed (M is on the remote), or the remote refused it for
/// certain (nothing was updated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// The push landed: the marker names this intent's tag.
    Delivered,
    /// The remote refused the push for certain; the reason as the remote gave it (printable
    /// ASCII, at most [`MAX_REASON_CHARS`]).
    Refused(String),
}

/// The message of receipt commit R.
pub fn delivery_receipt_message(
    digest: &Digest,
    commit: &ObjectId,
    outcome: &ReceiptOutcome,
) -> String {
    receipt_head(DELIVERY_PROTOCOL, digest) + &outcome_lines(commit, outcome)
}

/// How a refusal receipt's lines start, before the reason.
const REFUSED: &str = "outcome: refused\nreason: ";

/// What a receipt says after its `intent:` line: delivered (and the commit M), or refused
/// (and the remote's reason).
fn outcome_lines(commit: &ObjectId, outcome: &ReceiptOutcome) -> String {
    match outcome {
        ReceiptOutcome::Delivered => format!("outcome: delivered\ncommit: {commit}\n"),
        ReceiptOutcome::Refused(reason) => format!("{REFUSED}{reason}\n"),
    }
}

/// `text` as a reason a record keeps: printable ASCII, at most [`MAX_REASON_CHARS`]
/// characters. A remote's words are hostile input.
pub fn record_reason(text: &str) -> String {
    let mut reason: String = text
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .take(MAX_REASON_CHARS)
        .collect();
    if reason.is_empty() {
        reason.push('?');
    }
    reason
}

/// The marker tag's bytes: an annotated tag of M by sf at time 0 whose message names the
/// intent's Candidate, Verdict, Slice and Product, so that anyone who can read the remote can
/// look a delivered commit up. Fixed by the payload, so every retry pushes the same bytes.
pub fn marker_tag(payload: &DeliveryPayload) -> Vec<u8> {
    let name = payload
        .marker
        .strip_prefix("refs/")
        .unwrap_or(&payload.marker);
    format!(
        "object {}\ntype commit\ntag {name}\ntagger {IDENT}\n\n{DELIVERY_PROTOCOL} marker\n\n\
         Sf-Product: {}\nSf-Slice: {} {}\nSf-Candidate-Digest: {}\nSf-Verdict: {}\n",
        payload.commit,
        payload.product,
        payload.slice.id,
        payload.slice.revision,
        payload.candidate,
        payload.verdict
    )
    .into_bytes()
}

/// The id Git gives the marker tag: SHA-1 over `tag <size>\0` and its bytes.
pub fn marker_tag_id(tag: &[u8]) -> ObjectId {
    use sha1::{Digest as _, Sha1};
    let mut hasher = Sha1::new();
    hasher.update(format!("tag {}\0", tag.len()).as_bytes());
    hasher.update(tag);
    ObjectId::from_bytes(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_kept_are_printable_and_short() {
        assert_eq!(record_reason("no\x1b[31m way\n"), "no?[31m way?");
        assert_eq!(record_reason(""), "?");
        assert_eq!(record_reason(&"x".repeat(1000)).len(), MAX_REASON_CHARS);
    }
}
