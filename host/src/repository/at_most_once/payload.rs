//! What the payload of an at-most-once effect is: the action occurrence and owner every
//! payload names, the rules every payload keeps, and what a payload gives the protocol
//! (how its intents are keyed, bounded, checked and worded, and what its receipts say).

use crate::judging::Admits;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::canonical;
use crate::contracts::grammar::{ID_RULE, is_valid_id};
use crate::git_object::ObjectId;

use super::super::error::RepositoryError;
use super::super::identity::RepositoryIdentity;
use super::super::manifest::Slice;
use super::observation::View;

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

/// Who owns the effect, at which generation of its ownership.
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

/// How one effect's records are named in errors. The wording is part of what each effect
/// has always reported, so it stays the effect's own.
#[derive(Clone, Copy, Debug)]
pub struct Wording {
    /// What the intent's commit, tree and payload are called while each is read; `None`
    /// names each by the intent itself.
    pub intent_parts: Option<[&'static str; 3]>,
    /// What an intent is called: "intent I under R: …", "the retained intent is …".
    pub intent: &'static str,
    /// What a receipt commit is called while it is read.
    pub receipt_commit: &'static str,
    /// Why a receipt is corrupt when no claim is retained beside it.
    pub receipt_without_claim: &'static str,
    /// Why a receipt is corrupt when it is not the one its claim and outcome give.
    pub receipt_mismatch: &'static str,
    /// Put before "the receipt was not retained: …" when a receipt cannot be written.
    pub receipt_lost: &'static str,
}

/// What the payload of an at-most-once effect gives the protocol: how its intents are keyed,
/// bounded, checked and worded, and what its receipts say.
pub trait EffectPayload: Clone + PartialEq + Serialize + DeserializeOwned {
    /// How observations of its effect show the effect's place.
    type View: View;
    /// What one of its receipts says about the effect.
    type Outcome;

    /// The protocol string of its payloads, keys and records.
    const PROTOCOL: &'static str;
    /// The prefix of the local refs of its intents.
    const REF_PREFIX: &'static str;
    /// The largest canonical payload, in bytes.
    const MAX_BYTES: usize;
    /// How its records are named in errors.
    const WORDING: Wording;
    /// Whether reading its history looks for a receipt before it reads the claim. Each
    /// effect keeps the order of reads it has always had.
    const RECEIPT_FIRST: bool;

    /// What a receipt saying `outcome` holds after its `intent:` line.
    fn receipt_body(&self, outcome: &Self::Outcome) -> String;
    /// The outcome a receipt's `body` says. Any text gives one: a body that is not the one
    /// its outcome gives fails the byte comparison every receipt read goes through.
    fn receipt_outcome(body: &str) -> Self::Outcome;
    /// Checks the rules the types do not carry and returns the canonical bytes.
    fn validate(&self) -> Result<Vec<u8>, RepositoryError>;
    /// What of `repository` keys its intents besides the action: its nonce, when the key
    /// also names something outside the repository that another repository must not share.
    fn key_nonce(repository: &RepositoryIdentity) -> Option<&str>;
    /// The action occurrence the intent is for.
    fn action(&self) -> &Action;
    /// The repository the intent is prepared in.
    fn repository(&self) -> &RepositoryIdentity;
    /// What a proof must admit for the effect to start: the Candidate, its base and commit,
    /// its Slice and the Verified Verdict's digest the payload names.
    fn admitted(&self) -> Admits;
}

/// The canonical bytes of `payload`, which moves from `base` to `commit`: the two must differ,
/// and the bytes be at most `P::MAX_BYTES`.
pub(in crate::repository) fn canonical_payload<P: EffectPayload>(
    payload: &P,
    base: &ObjectId,
    commit: &ObjectId,
) -> Result<Vec<u8>, RepositoryError> {
    if base == commit {
        return Err(RepositoryError::invalid(
            "payload.commit",
            "must differ from payload.base",
        ));
    }
    let bytes = canonical::to_canonical_bytes(payload)
        .map_err(|error| RepositoryError::invalid("payload", error.to_string()))?;
    if bytes.len() > P::MAX_BYTES {
        return Err(RepositoryError::invalid(
            "payload",
            format!(
                "its canonical encoding is {} bytes; at most {}",
                bytes.len(),
                P::MAX_BYTES
            ),
        ));
    }
    Ok(bytes)
}
