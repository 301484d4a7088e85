//! The attempt fence as callers use it: one Product's fence over any [`AttemptFence`]
//! backend, taken for one Candidate at a time (the file fence, [`crate::file_fence`], by default; a plugin's, such as
//! PostgreSQL's, when the evidence store comes with one), and the [`Hold`] a collection or a
//! landing runs under.
//!
//! What this adds to the contract is what a caller must not have to trust a backend for: the
//! Product id is checked before the backend sees it, the hold a backend hands back must be
//! for the Product asked for with a valid epoch larger than the last one this handle saw, and
//! [`Hold::assert_active`] answers only `Ok` or `released` (a backend that cannot confirm a
//! hold in any other way has lost it), so that an ended hold stops every further run and put.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::canonical::Digest;
use crate::contracts::AttemptId;
pub use crate::contracts::fence::{
    AttemptFence, FenceError, FenceHold, candidate_key, check_product,
};
pub use crate::file_fence::{FileFence, LOCK_GRACE};

/// The fence of one Product, over a backend.
#[derive(Clone, Debug)]
pub struct Fence {
    backend: Arc<dyn AttemptFence>,
    product: String,
    /// The largest epoch this handle has seen handed out, so that a backend answering an
    /// older one is caught.
    seen: Arc<AtomicU64>,
}

impl Fence {
    /// The file fence of `product` in the directory `root` (created 0700 if absent; it must
    /// be a private directory of this user). Touches no lock.
    pub fn open(root: &Path, product: &str) -> Result<Self, FenceError> {
        check_product(product)?;
        Self::new(Arc::new(FileFence::open(root)?), product)
    }

    /// The fence of `product` in `backend`.
    pub fn new(backend: Arc<dyn AttemptFence>, product: &str) -> Result<Self, FenceError> {
        check_product(product)?;
        Ok(Self {
            backend,
            product: product.to_owned(),
            seen: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The Product this fence serialises.
    pub fn product(&self) -> &str {
        &self.product
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn AttemptFence> {
        &self.backend
    }

    /// The last epoch handed out (0 before the first hold).
    pub fn last_epoch(&self) -> Result<u64, FenceError> {
        self.backend.last_epoch(&self.product)
    }

    /// Takes the fence for Candidate `candidate`: `busy` if another hold on that Candidate is
    /// active (holds on other Candidates of the Product are not in the way). The new hold's
    /// epoch is one more than any handed out before for the Product, and is durable before
    /// this returns.
    pub fn acquire(&self, candidate: &Digest) -> Result<Hold, FenceError> {
        let inner = self.backend.acquire(&self.product, candidate)?;
        let attempt = inner.attempt().clone();
        let wrong = |what: String| {
            inner.release();
            Err(FenceError::Corrupt {
                what: format!("the fence of {} answered {what}", self.product),
            })
        };
        if attempt.product != self.product {
            return wrong(format!("a hold of product {:?}", attempt.product));
        }
        if let Err(rule) = attempt.check() {
            return wrong(format!("epoch {}: {rule}", attempt.epoch));
        }
        let seen = self.seen.fetch_max(attempt.epoch, Ordering::SeqCst);
        if attempt.epoch <= seen {
            return wrong(format!(
                "epoch {}, not above the {seen} it handed out before",
                attempt.epoch
            ));
        }
        Ok(Hold {
            inner,
            attempt,
            candidate: candidate.clone(),
        })
    }
}

/// One attempt's hold on the fence of one Candidate of a Product. Ends on [`Hold::release`] or
/// drop.
#[derive(Debug)]
pub struct Hold {
    inner: Box<dyn FenceHold>,
    attempt: AttemptId,
    candidate: Digest,
}

impl Hold {
    /// The attempt this hold is: its Product and epoch.
    pub fn attempt(&self) -> &AttemptId {
        &self.attempt
    }

    /// The Candidate this hold is for: the only one it may collect.
    pub fn candidate(&self) -> &Digest {
        &self.candidate
    }

    /// `Ok` while the hold is active; `released` once it has ended or can no longer be
    /// confirmed. Asked before every run and every put.
    pub fn assert_active(&self) -> Result<(), FenceError> {
        match self.inner.assert_active() {
            Ok(()) => Ok(()),
            Err(error @ FenceError::Released { .. }) => Err(error),
            Err(error) => {
                // A hold its backend cannot confirm is lost, and stays lost.
                self.inner.release();
                Err(FenceError::Released {
                    attempt: self.attempt.to_string(),
                    reason: error.to_string(),
                })
            }
        }
    }

    /// Ends the hold: every later [`Hold::assert_active`] fails `released`, and the next
    /// attempt can take the fence. Idempotent.
    pub fn release(&self) {
        self.inner.release();
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.inner.release();
    }
}
