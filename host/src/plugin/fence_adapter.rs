//! [`AttemptFence`] over a loaded plugin: `acquire` and `last_epoch` are calls on the fence
//! instance with the messages of [`super::fence_protocol`]; each hold is an instance of its
//! own, which `acquire` makes and dropping releases.
//!
//! A plugin built with an ABI minor older than [`fence_protocol::SINCE_MINOR`] knows no
//! fence: it is refused before it is asked to make one. Every failure of a call is an `Err`:
//! a contract error is the same [`FenceError`]; anything else (a code this sf does not know,
//! a panic, a malformed reply) is `unavailable` for the fence and, for a hold, `released`
//! (a hold that cannot be confirmed is lost). What the answers mean is checked on top by
//! [`crate::fence::Fence`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::PluginError;
use super::fence_protocol::{self as wire, DecodedError, method};
use super::loader::{CallReply, Instance, LoadedPlugin};
use super::message::MessageError;
use super::protocol;
use crate::contracts::{AttemptFence, AttemptId, FenceError, FenceHold};

/// A fence living in a plugin.
#[derive(Debug)]
pub struct PluginFence {
    instance: Instance,
}

impl PluginFence {
    /// Instantiates the `fence` contract of `plugin` under `tag` with `config`; refused for
    /// a plugin whose ABI minor predates the contract.
    pub fn new(
        plugin: &Arc<LoadedPlugin>,
        tag: &str,
        config: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, PluginError> {
        if plugin.abi_minor() < wire::SINCE_MINOR {
            return Err(PluginError::UnknownContract {
                plugin: plugin.name().to_owned(),
                contract: wire::CONTRACT.to_owned(),
                provided: plugin.manifest().contracts.keys().cloned().collect(),
                detail: format!(
                    "the plugin was built with ABI 1.{}, and the fence contract came with ABI \
                     1.{}: rebuild it against a newer sf-sdk",
                    plugin.abi_minor(),
                    wire::SINCE_MINOR
                ),
            });
        }
        Ok(Self {
            instance: plugin.instantiate(wire::CONTRACT, tag, config)?,
        })
    }
}

/// One call on a fence or hold instance: the answer decoded by `decode`, or the failure as
/// the contract's error (`unavailable` for anything but a contract error).
fn call<T>(
    instance: &Instance,
    method: &str,
    request: &[u8],
    decode: impl FnOnce(&[u8], Option<Instance>) -> Result<T, MessageError>,
) -> Result<T, FenceError> {
    let plugin = instance.plugin().name();
    let unavailable = |error: PluginError| FenceError::Unavailable {
        reason: error.to_string(),
    };
    let malformed = |detail: String| {
        unavailable(PluginError::MalformedMessage {
            plugin: plugin.to_owned(),
            during: method.to_owned(),
            detail,
        })
    };
    instance
        .call(method, request, |reply| match reply {
            CallReply::Answer {
                bytes,
                new_instance,
            } => decode(bytes, new_instance).map_err(|error| malformed(error.to_string())),
            CallReply::ContractError { bytes } => match wire::decode_error(bytes) {
                Ok(DecodedError::Known(error)) => Err(error),
                Ok(DecodedError::Unknown { code, message }) => Err(FenceError::Unavailable {
                    reason: format!(
                        "plugin {plugin} refused {method} with an error this sf does not know \
                         ({code}): {message}"
                    ),
                }),
                Err(error) => Err(malformed(error.to_string())),
            },
        })
        .map_err(unavailable)?
}

impl AttemptFence for PluginFence {
    fn acquire(&self, product: &str) -> Result<Box<dyn FenceHold>, FenceError> {
        crate::contracts::fence::check_product(product)?;
        let (attempt, instance) = call(
            &self.instance,
            method::ACQUIRE,
            &wire::encode_product(product),
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
        call(
            &self.instance,
            method::LAST_EPOCH,
            &wire::encode_product(product),
            |bytes, new_instance| {
                if new_instance.is_some() {
                    return Err(MessageError::field("hold", "last-epoch made an instance"));
                }
                wire::decode_epoch(bytes)
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
    fn empty_answer(bytes: &[u8], new_instance: Option<Instance>) -> Result<(), MessageError> {
        if new_instance.is_some() {
            return Err(MessageError::field(
                "hold",
                "a hold's call made an instance",
            ));
        }
        protocol::Empty::decode(bytes)
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
        call(
            &self.instance,
            method::ASSERT_ACTIVE,
            &protocol::Empty::encode(),
            Self::empty_answer,
        )
        .map_err(|error| {
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
        let _ = call(
            &self.instance,
            method::RELEASE,
            &protocol::Empty::encode(),
            Self::empty_answer,
        );
    }
}
