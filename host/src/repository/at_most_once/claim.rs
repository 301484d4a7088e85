//! The claim: a create-only dispatch ref naming a fresh commit D (parent the intent, a random
//! nonce in its message). Exactly one call can create it, and only that call may start the
//! effect; a claim without a receipt is the record that an effect may have started.

use crate::contracts::{RefName, RefUpdate};
use crate::git_object::{self, ObjectId, ObjectKind};

use super::super::error::RepositoryError;
use super::super::identity::{IDENT, MAX_COMMIT_BYTES};
use super::super::record_commit::{commit_object, empty_tree};
use super::super::{Repository, random_nonce};
use super::messages::{dispatch_head, dispatch_message};
use super::payload::EffectPayload;
use super::prepared::Prepared;
use super::refs::IntentRefs;

impl Repository {
    /// Claims `prepared`. `Some(D)` when this call holds the claim, `None` when another call's
    /// claim won; `Err` (`git-failed`) when the store did not acknowledge the claim and the
    /// ref is absent or names this call's own D: nothing was started.
    pub(super) fn claim<P: EffectPayload>(
        &self,
        refs: &IntentRefs,
        prepared: &Prepared<P>,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        let tree = empty_tree();
        let message = dispatch_message(P::PROTOCOL, &prepared.digest, &random_nonce()?);
        let claim = commit_object(tree.id, vec![prepared.intent], message);
        self.store
            .write_objects(&[tree, claim.clone()], self.deadline())?;
        match self
            .store
            .create_ref(&refs.dispatch, &claim.id, self.deadline())?
        {
            RefUpdate::Applied => Ok(Some(claim.id)),
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                match self.read_direct(&refs.dispatch)? {
                    Some(other) if other != claim.id => Ok(None),
                    _ => Err(RepositoryError::GitFailed {
                        detail: format!(
                            "the claim {} on {} was not acknowledged; nothing was started",
                            claim.id, refs.dispatch
                        ),
                    }),
                }
            }
        }
    }

    /// The claim on `prepared`, verified, if one exists.
    pub(super) fn read_dispatch<P: EffectPayload>(
        &self,
        refs: &IntentRefs,
        prepared: &Prepared<P>,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        let head = dispatch_head(P::PROTOCOL, &prepared.digest);
        self.read_claim(&refs.dispatch, prepared.intent, &head)
    }

    /// Reads the claim under `dispatch`, if any, verified: a commit by sf over the empty
    /// tree whose one parent is `intent` and whose message is `head`, 32 lowercase hex
    /// characters of nonce and a newline. Anything else is `corrupt`.
    fn read_claim(
        &self,
        dispatch: &RefName,
        intent: ObjectId,
        head: &str,
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
                .strip_prefix(head)
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
}
