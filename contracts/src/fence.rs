//! The AttemptFence contract: at most one holder at a time per Candidate of a Product, across
//! processes and machines, with an epoch per hold that is larger than every epoch handed out
//! before for that Product.
//!
//! A fence backend serves every Product of one evidence store (the epochs name the attempts
//! whose records that store holds, so the two must have the same reach). It:
//!
//! - `acquire`s the fence of one Candidate of a Product: `busy` while another hold on the same
//!   Candidate of the same Product is active anywhere; else a [`FenceHold`] whose epoch is one
//!   more than the last handed out for the Product (for any of its Candidates), durable before
//!   it returns (an epoch is never handed out twice, even after its holder was killed). Holds
//!   on different Candidates of one Product are active at once: each Candidate's records are
//!   filed under pins of their own, so the attempts of one never stand for another's;
//! - answers a Product's `last_epoch` (0 before the first hold);
//! - refuses a Product id outside the id grammar with `invalid-input`, before anything.
//!
//! A hold is active until [`FenceHold::release`] or drop, or until the backend can no longer
//! confirm it (a lock file replaced, a database session lost): [`FenceHold::assert_active`]
//! then fails `released`, and never becomes active again (a lost hold is never silently taken
//! back). Callers ask it before every run and every put, so an ended hold stops both.
//!
//! This is the minimal trait a backend implements; what callers need on top (the checked
//! [`AttemptId`], one Product per handle) is `sf_host::fence`.

use std::fmt::Debug;

use crate::canonical::Digest;
use crate::error_fields::contract_error;
use crate::evidence_store::AttemptId;

/// The rule a Product id breaks, for `invalid-input`.
pub const PRODUCT_ID_RULE: &str = crate::grammar::ID_RULE;

contract_error! {
    /// Why a fence refused.
    #[derive(Clone, Debug, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum FenceError {
        /// An argument breaks a rule; nothing was taken or written.
        #[error("invalid input: {input}: {rule}")]
        "invalid-input" InvalidInput {
            /// The argument at fault (the Product id, quoted).
            input: String,
            /// The rule it breaks, as a sentence.
            rule: String,
        },
        /// Another hold on this Candidate of this Product is active (in this process or
        /// another).
        #[error("the fence of {product} is held by another attempt")]
        "busy" Busy {
            /// The Product whose fence is held (with the Candidate, as the backend names it).
            product: String,
        },
        /// The hold has ended, or can no longer be confirmed; nothing more may run or be
        /// stored under it.
        #[error("the hold of attempt {attempt} has ended: {reason}")]
        "released" Released {
            /// The attempt whose hold ended, as `product@epoch`.
            attempt: String,
            /// Why: released, or what could no longer be confirmed.
            reason: String,
        },
        /// The fence cannot be used (its directory, its database).
        #[error("fence unavailable: {reason}")]
        "unavailable" Unavailable {
            /// What made it unusable.
            reason: String,
        },
        /// What the fence keeps is not what sf writes; reported, never repaired.
        #[error("fence corrupt: {what}")]
        "corrupt" Corrupt {
            /// What is wrong, and where.
            what: String,
        },
    }
}

/// A fence backend: the fences of every Product it serves.
pub trait AttemptFence: Debug + Send + Sync {
    /// Takes the fence of Candidate `candidate` of `product`: `busy` if another hold on the
    /// same Candidate of `product` is active. The hold's epoch is one more than any handed out
    /// before for `product`, and durable before this returns.
    fn acquire(&self, product: &str, candidate: &Digest) -> Result<Box<dyn FenceHold>, FenceError>;

    /// The last epoch handed out for `product` (0 before the first hold).
    fn last_epoch(&self, product: &str) -> Result<u64, FenceError>;
}

/// One attempt's hold on a Product's fence. Ends on [`FenceHold::release`] or drop.
pub trait FenceHold: Debug + Send + Sync {
    /// The attempt this hold is: its Product and epoch.
    fn attempt(&self) -> &AttemptId;

    /// `Ok` while the hold is active; `released` once it has ended or can no longer be
    /// confirmed, and from then on always.
    fn assert_active(&self) -> Result<(), FenceError>;

    /// Ends the hold: every later [`FenceHold::assert_active`] fails `released`, and the next
    /// attempt can take the fence. Idempotent.
    fn release(&self);
}

/// The name of the fence of Candidate `candidate` of `product`, `PRODUCT@sha256:HEX`: what a
/// backend keys a hold's own state by. No Product id holds an `@`, so it names no Product.
pub fn candidate_key(product: &str, candidate: &Digest) -> String {
    format!("{product}@{candidate}")
}

/// `invalid-input` for a Product id outside the id grammar; what every backend checks first.
pub fn check_product(product: &str) -> Result<(), FenceError> {
    if crate::grammar::is_valid_id(product) {
        Ok(())
    } else {
        Err(FenceError::InvalidInput {
            input: format!("product {product:?}"),
            rule: PRODUCT_ID_RULE.into(),
        })
    }
}
