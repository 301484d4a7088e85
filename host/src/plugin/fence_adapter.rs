//! The `fence` contract in the host: [`AttemptFence`] over a loaded plugin. `acquire` and
//! `last_epoch` are calls on the fence instance with the messages of
//! [`super::fence_protocol`]; each hold is an instance of its own, which `acquire` makes and
//! dropping releases. The fence has no section: it comes with the evidence store's plugin
//! (`Config::fence`).
//!
//! A plugin built with an ABI minor older than [`wire::SINCE_MINOR`] knows no
//! fence: it is refused before it is asked to make one; one older than
//! [`wire::CANDIDATE_SINCE_MINOR`] is asked for the whole Product's fence. Every failure of a call is an `Err`:
//! a contract error is the same [`FenceError`]; anything else (a code this sf does not know,
//! a panic, a malformed reply) is `unavailable` for the fence and, for a hold, `released`
//! (a hold that cannot be confirmed is lost). What the answers mean is checked on top by
//! [`crate::fence::Fence`].

use std::sync::atomic::{AtomicBool, Ordering};

use super::backend::PluginBackend;
use super::contract::{self, BadReply, HostContract};
use super::fence_protocol::{self as wire, FenceContract, method};
use super::loader::Instance;
use super::message::MessageError;
use super::protocol;
use crate::canonical::Digest;
use crate::contracts::{AttemptFence, AttemptId, FenceError, FenceHold};

impl HostContract for FenceContract {
    type State = ();
    const REQUIRES_MINOR: u32 = wire::SINCE_MINOR;

    fn unavailable(reason: String) -> FenceError {
        FenceError::Unavailable { reason }
    }
}

/// A fence living in a plugin.
pub type PluginFence = PluginBackend<FenceContract>;

impl AttemptFence for PluginFence {
    fn acquire(&self, product: &str, candidate: &Digest) -> Result<Box<dyn FenceHold>, FenceError> {
        crate::contracts::fence::check_product(product)?;
        // A plugin from before holds were per Candidate takes the whole Product's fence:
        // stricter (every attempt on the Product waits), never looser.
        let candidate =
            (self.plugin().abi_minor() >= wire::CANDIDATE_SINCE_MINOR).then_some(candidate);
        let (attempt, instance) = contract::call::<FenceContract, _>(
            self.instance(),
            method::ACQUIRE,
            &wire::encode_acquire(product, candidate),
            |bytes, new_instance| {
                // Decoded first, so that a malformed answer still drops (releases) the hold.
                let attempt = wire::decode_attempt(bytes);
                let instance = new_instance
                    .ok_or_else(|| MessageError::field("hold", "acquire made no hold"))?;
                Ok((attempt?, instance))
            },
        )?;
        Ok(Box::new(PluginHold {
            attempt,
            instance,
            released: AtomicBool::new(false),
        }))
    }

    fn last_epoch(&self, product: &str) -> Result<u64, FenceError> {
        crate::contracts::fence::check_product(product)?;
        contract::call::<FenceContract, _>(
            self.instance(),
            method::LAST_EPOCH,
            &wire::encode_product(product),
            |bytes, new_instance| {
                if new_instance.is_some() {
                    return Err(MessageError::field("hold", "last-epoch made an instance").into());
                }
                Ok(wire::decode_epoch(bytes)?)
            },
        )
    }
}

/// A hold living in a plugin.
#[derive(Debug)]
struct PluginHold {
    attempt: AttemptId,
    instance: Instance,
    /// Set on release or loss: from then on the plugin is not asked again.
    released: AtomicBool,
}

impl PluginHold {
    /// Calls a hold's method, whose answer is `{}`.
    fn call(&self, method: &str) -> Result<(), FenceError> {
        contract::call::<FenceContract, _>(
            &self.instance,
            method,
            &protocol::Empty::encode(),
            |bytes, new_instance| {
                if new_instance.is_some() {
                    return Err(BadReply::Message(MessageError::field(
                        "hold",
                        "a hold's call made an instance",
                    )));
                }
                Ok(protocol::Empty::decode(bytes)?)
            },
        )
    }
}

impl FenceHold for PluginHold {
    fn attempt(&self) -> &AttemptId {
        &self.attempt
    }

    fn assert_active(&self) -> Result<(), FenceError> {
        if self.released.load(Ordering::SeqCst) {
            return Err(FenceError::Released {
                attempt: self.attempt.to_string(),
                reason: "the hold was released".into(),
            });
        }
        self.call(method::ASSERT_ACTIVE).map_err(|error| {
            self.release();
            match error {
                FenceError::Released { .. } => error,
                other => FenceError::Released {
                    attempt: self.attempt.to_string(),
                    reason: other.to_string(),
                },
            }
        })
    }

    fn release(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        // A failed release still ends the hold when the instance is dropped.
        let _ = self.call(method::RELEASE);
    }
}
