//! The refs one intent is kept under, `<prefix><key>/{intent,dispatch,receipt}`, and its key:
//! a digest, so that action ids never shape ref names.

use serde::Serialize;

use crate::canonical::{self, Digest};
use crate::contracts::RefName;

use super::super::error::RepositoryError;
use super::super::identity::RepositoryIdentity;
use super::payload::{Action, EffectPayload};

/// The refs of one intent. All three are create-only and never moved or deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntentRefs {
    /// `…/<key>/intent`: the intent commit I.
    pub intent: RefName,
    /// `…/<key>/dispatch`: the claim D.
    pub dispatch: RefName,
    /// `…/<key>/receipt`: the receipt R.
    pub receipt: RefName,
}

impl IntentRefs {
    /// The refs of the intent of a `P` payload for `action` in `repository`.
    pub(in crate::repository) fn of<P: EffectPayload>(
        repository: &RepositoryIdentity,
        action: &Action,
    ) -> Self {
        Self::keyed::<P>(P::key_nonce(repository), action)
    }

    /// The refs of the intent of a `P` payload for `action`, keyed with the repository
    /// `nonce` when there is one.
    pub(in crate::repository) fn keyed<P: EffectPayload>(
        nonce: Option<&str>,
        action: &Action,
    ) -> Self {
        let key = effect_key(P::PROTOCOL, nonce, action);
        let name = |leaf: &str| {
            RefName::parse(&format!("{}{key}/{leaf}", P::REF_PREFIX)).expect("valid intent ref")
        };
        Self {
            intent: name("intent"),
            dispatch: name("dispatch"),
            receipt: name("receipt"),
        }
    }

    /// The refs of the intent whose intent ref is `intent` (`…/<key>/intent`, as a listing
    /// found it): its siblings.
    pub(in crate::repository) fn beside(intent: &RefName) -> Result<Self, RepositoryError> {
        let parent = intent.as_str().strip_suffix("intent").unwrap_or_default();
        let name = |leaf: &str| {
            RefName::parse(&format!("{parent}{leaf}"))
                .map_err(|_| RepositoryError::corrupt(format!("{intent} is not an intent ref")))
        };
        Ok(Self {
            intent: intent.clone(),
            dispatch: name("dispatch")?,
            receipt: name("receipt")?,
        })
    }
}

/// The key of an intent of `protocol` for `action`: the SHA-256 hex of the canonical
/// `{protocol, action}`, with `repository` when a repository `nonce` is given. A key without
/// one has no `repository` field at all (never a null): that is how such intents have always
/// been found.
pub(in crate::repository) fn effect_key(
    protocol: &str,
    nonce: Option<&str>,
    action: &Action,
) -> String {
    #[derive(Serialize)]
    struct Key<'a> {
        protocol: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        repository: Option<&'a str>,
        action: &'a Action,
    }
    let key = Key {
        protocol,
        repository: nonce,
        action,
    };
    // Bounded (ids are at most 128 bytes), so encoding cannot fail; the hex is always a valid
    // ref segment.
    Digest::of(&canonical::to_canonical_bytes(&key).unwrap_or_default()).hex()
}
