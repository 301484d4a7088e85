//! The AttemptFence contract: at most one holder at a time per Product, across processes and
//! machines, with an epoch per hold that is larger than every epoch handed out before.
//!
//! A fence backend serves every Product of one evidence store (the epochs name the attempts
//! whose records that store holds, so the two must have the same reach). It:
//!
//! - `acquire`s a Product's fence: `busy` while another hold on it is active anywhere; else a
//!   [`FenceHold`] whose epoch is one more than the last handed out, durable before it returns
//!   (an epoch is never handed out twice, even after its holder was killed);
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
        /// Another hold on this Product is active (in this process or another).
        #[error("the fence of {product} is held by another attempt")]
        "busy" Busy {
            /// The Product whose fence is held.
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
    /// Takes the fence of `product`: `busy` if another hold on it is active. The hold's epoch
    /// is one more than any handed out before for `product`, and durable before this returns.
    fn acquire(&self, product: &str) -> Result<Box<dyn FenceHold>, FenceError>;

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
