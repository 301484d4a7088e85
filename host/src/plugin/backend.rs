//! [`PluginBackend`]: a backend of one contract living in a plugin, the value every adapter
//! is (`PluginGate` is `PluginBackend<GateContract>`), made and called the same way for every
//! contract.

use std::fmt;
use std::sync::Arc;

use super::abi::ABI_MAJOR;
use super::contract::{self, HostContract, UNEXPECTED_INSTANCE};
use super::error::PluginError;
use super::loader::{Instance, LoadedPlugin};
use super::message::MessageError;

/// A backend of contract `C` living in a plugin: one instance, made under a tag. The
/// contract's adapter module implements the contract's trait for it.
pub struct PluginBackend<C: HostContract> {
    instance: Instance,
    tag: String,
    state: C::State,
}

impl<C: HostContract> PluginBackend<C> {
    /// Instantiates contract `C` of `plugin` under `tag` with `config`; refused for a plugin
    /// whose ABI minor predates the contract (`unknown-contract`), before it is asked.
    pub fn new(
        plugin: &Arc<LoadedPlugin>,
        tag: &str,
        config: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, PluginError> {
        if plugin.abi_minor() < C::REQUIRES_MINOR {
            return Err(PluginError::UnknownContract {
                plugin: plugin.name().to_owned(),
                contract: C::NAME.to_owned(),
                provided: plugin.manifest().contracts.keys().cloned().collect(),
                detail: format!(
                    "the plugin was built with ABI {ABI_MAJOR}.{}, and the {} contract came \
                     with ABI {ABI_MAJOR}.{}: rebuild it against a newer sf-sdk",
                    plugin.abi_minor(),
                    C::NAME,
                    C::REQUIRES_MINOR
                ),
            });
        }
        Ok(Self {
            instance: plugin.instantiate(C::NAME, tag, config)?,
            tag: tag.to_owned(),
            state: C::State::default(),
        })
    }

    /// The plugin serving this backend.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        self.instance.plugin()
    }

    /// The tag this backend was made under.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The plugin's instance, for calls that read their reply their own way.
    pub(super) fn instance(&self) -> &Instance {
        &self.instance
    }

    /// What the adapter keeps besides the instance.
    pub(super) fn state(&self) -> &C::State {
        &self.state
    }

    /// Calls a method that makes no instance; `decode` reads its answer. Failures map as
    /// [`contract::call`] says.
    pub(super) fn call<T>(
        &self,
        method: &str,
        request: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<T, MessageError>,
    ) -> Result<T, C::Error> {
        contract::call::<C, T>(
            &self.instance,
            method,
            request,
            contract::answer_only(UNEXPECTED_INSTANCE, decode),
        )
    }
}

impl<C: HostContract> fmt::Debug for PluginBackend<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginBackend")
            .field("contract", &C::NAME)
            .field("instance", &self.instance)
            .field("tag", &self.tag)
            .field("state", &self.state)
            .finish()
    }
}
