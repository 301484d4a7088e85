//! The `gate` contract in the host: [`Gate`] over a loaded plugin (`current` is one call with
//! the message of [`super::gate_protocol`]), and `[gate]` with its compiled-in backends.
//!
//! A gate can only narrow what is allowed, so every failure is an `Err` (a refusal to every
//! caller), naming the plugin: a contract error is the same [`GateError`]; a code this sf does
//! not know, a panic, an unsupported method or a refused request is `unavailable`; a
//! malformed reply is `malformed`. A deadline already passed is `timeout` without a call, and
//! a `proceed` that arrives after the deadline is `timeout` too: late is never a proceed.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

use super::backend::PluginBackend;
use super::config::Configured;
use super::contract::HostContract;
use super::error::PluginError;
use super::gate_protocol::{self as wire, GateContract, method};
use crate::contracts::{Gate, GateAnswer, GateError};

impl HostContract for GateContract {
    type State = ();
    const REQUIRES_MINOR: u32 = 0;

    fn unavailable(reason: String) -> GateError {
        GateError::Unavailable { reason }
    }

    fn malformed(error: PluginError) -> GateError {
        GateError::Malformed {
            what: error.to_string(),
        }
    }

    fn unknown_code(plugin: &str, _: &str, code: &str, message: &str) -> GateError {
        GateError::Unavailable {
            reason: format!(
                "plugin {plugin} answered with an error this sf does not know ({code}): \
                 {message}"
            ),
        }
    }
}

/// A Gate living in a plugin.
pub type PluginGate = PluginBackend<GateContract>;

impl Gate for PluginGate {
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
        if Instant::now() >= deadline {
            return Err(GateError::Timeout);
        }
        let answer = self.call(
            method::CURRENT,
            &wire::encode_current(deadline),
            wire::decode_answer,
        )?;
        if answer == GateAnswer::Proceed && Instant::now() > deadline {
            return Err(GateError::Timeout);
        }
        Ok(answer)
    }
}

/// A Gate backend compiled into the running program, configured from its section.
///
/// ```text
/// #[typetag::serde(name = "file")]
/// impl GateBackend for FileGateBackend {
///     fn gate(&self) -> Result<Arc<dyn Gate>, GateError> { … }
/// }
/// ```
#[typetag::serde(tag = "type")]
pub trait GateBackend: Debug + Send + Sync {
    /// Builds the configured gate.
    fn gate(&self) -> Result<Arc<dyn Gate>, GateError>;
}

impl Configured for GateContract {
    const SECTION: &'static str = "gate";
    const DEFAULT_TAG: &'static str = "open";
    type Object = dyn Gate;
    type Compiled = Box<dyn GateBackend>;
    type Context<'a> = ();

    fn compiled(backend: Self::Compiled, (): ()) -> Result<Arc<dyn Gate>, GateError> {
        backend.gate()
    }

    fn adapt(backend: PluginGate) -> Arc<dyn Gate> {
        Arc::new(backend)
    }
}
