//! [`Gate`] over a loaded plugin: `current` is one `call` with the message of
//! [`super::gate_protocol`].
//!
//! A gate can only narrow what is allowed, so every failure is an `Err` (a refusal to every
//! caller), naming the plugin: a contract error is the same [`GateError`]; a code this sf does
//! not know, a panic, an unsupported method or a refused request is `unavailable`; a
//! malformed reply is `malformed`. A deadline already passed is `timeout` without a call, and
//! a `proceed` that arrives after the deadline is `timeout` too: late is never a proceed.

use std::sync::Arc;
use std::time::Instant;

use super::error::PluginError;
use super::gate_protocol::{self as wire, DecodedError, method};
use super::loader::{CallReply, Instance, LoadedPlugin};
use crate::contracts::{Gate, GateAnswer, GateError};

/// A Gate living in a plugin.
#[derive(Debug)]
pub struct PluginGate {
    instance: Instance,
    tag: String,
}

impl PluginGate {
    /// Instantiates the `gate` contract of `plugin` under `tag` with `config`.
    pub fn new(
        plugin: &Arc<LoadedPlugin>,
        tag: &str,
        config: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, PluginError> {
        Ok(Self {
            instance: plugin.instantiate(wire::CONTRACT, tag, config)?,
            tag: tag.to_owned(),
        })
    }

    /// The plugin serving this gate.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        self.instance.plugin()
    }

    /// The tag this gate was made under.
    pub fn tag(&self) -> &str {
        &self.tag
    }
}

impl Gate for PluginGate {
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
        if Instant::now() >= deadline {
            return Err(GateError::Timeout);
        }
        let plugin = self.instance.plugin().name();
        let malformed = |detail: String| GateError::Malformed {
            what: PluginError::MalformedMessage {
                plugin: plugin.to_owned(),
                during: method::CURRENT.to_owned(),
                detail,
            }
            .to_string(),
        };
        let answer = self
            .instance
            .call(
                method::CURRENT,
                &wire::encode_current(deadline),
                |reply| match reply {
                    CallReply::Answer {
                        bytes,
                        new_instance: None,
                    } => wire::decode_answer(bytes).map_err(|error| malformed(error.to_string())),
                    CallReply::Answer { .. } => {
                        Err(malformed("the answer carries a new instance".to_owned()))
                    }
                    CallReply::ContractError { bytes } => match wire::decode_error(bytes) {
                        Ok(DecodedError::Known(error)) => Err(error),
                        Ok(DecodedError::Unknown { code, message }) => {
                            Err(GateError::Unavailable {
                                reason: format!(
                                    "plugin {plugin} answered with an error this sf does not \
                                     know ({code}): {message}"
                                ),
                            })
                        }
                        Err(error) => Err(malformed(error.to_string())),
                    },
                },
            )
            .map_err(|error| GateError::Unavailable {
                reason: error.to_string(),
            })??;
        if answer == GateAnswer::Proceed && Instant::now() > deadline {
            return Err(GateError::Timeout);
        }
        Ok(answer)
    }
}
