//! The receipt: a create-only ref naming a commit R (parent the claim) that says how the one
//! effect ended, written only when that is certain; and the reading of a claim and its
//! receipt together.

use crate::contracts::RefUpdate;
use crate::git_object::{self, ObjectId, ObjectKind};

use super::super::Repository;
use super::super::error::RepositoryError;
use super::super::identity::MAX_COMMIT_BYTES;
use super::super::record_commit::{commit_object, empty_tree};
use super::messages::receipt_head;
use super::payload::EffectPayload;
use super::prepared::Prepared;
use super::refs::IntentRefs;

/// A retained receipt: its commit R and what it says.
pub(super) type Receipt<P> = (ObjectId, <P as EffectPayload>::Outcome);

/// The receipt commit of `prepared` under `claim` saying `outcome`.
fn receipt_object<P: EffectPayload>(
    prepared: &Prepared<P>,
    claim: ObjectId,
    outcome: &P::Outcome,
) -> crate::contracts::EncodedObject {
    let message =
        receipt_head(P::PROTOCOL, &prepared.digest) + &prepared.payload.receipt_body(outcome);
    commit_object(empty_tree().id, vec![claim], message)
}

impl Repository {
    /// Writes the receipt R (parent `claim`) saying `outcome`. `Err` says why it could not be
    /// retained; what the effect did stands either way.
    pub(super) fn retain_receipt<P: EffectPayload>(
        &self,
        refs: &IntentRefs,
        prepared: &Prepared<P>,
        claim: ObjectId,
        outcome: &P::Outcome,
    ) -> Result<ObjectId, String> {
        let receipt = receipt_object(prepared, claim, outcome);
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

    /// The claim and the receipt retained for `prepared`, each verified. When
    /// `P::RECEIPT_FIRST`, whether a receipt exists is read before the claim, so that a claim
    /// and receipt written between the two reads cannot look like a receipt without a claim.
    pub(super) fn history<P: EffectPayload>(
        &self,
        refs: &IntentRefs,
        prepared: &Prepared<P>,
    ) -> Result<(Option<ObjectId>, Option<Receipt<P>>), RepositoryError> {
        if P::RECEIPT_FIRST {
            let receipt_ref = self.read_direct(&refs.receipt)?;
            let dispatch = self.read_dispatch(refs, prepared)?;
            let receipt = match receipt_ref {
                Some(_) => self.read_receipt(refs, prepared, dispatch)?,
                None => None,
            };
            return Ok((dispatch, receipt));
        }
        let dispatch = self.read_dispatch(refs, prepared)?;
        Ok((dispatch, self.read_receipt(refs, prepared, dispatch)?))
    }

    /// The receipt under `refs.receipt`, if any, verified: exactly the commit the claim
    /// `dispatch` and the outcome it says give. Anything else is `corrupt`.
    fn read_receipt<P: EffectPayload>(
        &self,
        refs: &IntentRefs,
        prepared: &Prepared<P>,
        dispatch: Option<ObjectId>,
    ) -> Result<Option<Receipt<P>>, RepositoryError> {
        let Some(receipt) = self.read_direct(&refs.receipt)? else {
            return Ok(None);
        };
        let corrupt = |why: &str| {
            RepositoryError::corrupt(format!("receipt {receipt} under {} {why}", refs.receipt))
        };
        let Some(dispatch) = dispatch else {
            return Err(corrupt(P::WORDING.receipt_without_claim));
        };
        let body = self.read_one(
            receipt,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            P::WORDING.receipt_commit,
        )?;
        let mismatch = || corrupt(P::WORDING.receipt_mismatch);
        let commit = git_object::decode_commit(&body).ok_or_else(mismatch)?;
        let head = receipt_head(P::PROTOCOL, &prepared.digest);
        let outcome = P::receipt_outcome(commit.message.strip_prefix(&head).unwrap_or_default());
        let expected = receipt_object(prepared, dispatch, &outcome);
        if expected.id != receipt || expected.body != body {
            return Err(mismatch());
        }
        Ok(Some((receipt, outcome)))
    }
}
