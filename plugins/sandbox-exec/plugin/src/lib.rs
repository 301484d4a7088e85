//! The sandbox-exec Executor as an sf plugin: `sf_plugin_entry_v1` for the `executor`
//! contract under the tag `sandbox-exec`, over the `sf-sandbox-exec` crate.
//!
//! The export lives in its own cdylib crate rather than in sf-sandbox-exec itself: an rlib
//! that also exports the entry symbol cannot be linked into one program together with another
//! such rlib (git-cli), and the tests and examples link both statically.

#![forbid(unsafe_code)]

use sf_sandbox_exec::SandboxExecutor;
use sf_sandbox_exec::plugin::SandboxExecBackend;

/// The `[executor]` section (without `type`), parsed strictly, as a configured Executor.
fn instantiate(config: &sf_sdk::export::PluginConfig) -> Result<SandboxExecutor, String> {
    let backend: SandboxExecBackend = config.parse()?;
    backend.executor().map_err(|error| error.to_string())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    executor: {
        "sandbox-exec" => instantiate,
    },
}
