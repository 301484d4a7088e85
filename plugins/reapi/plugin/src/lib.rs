//! The reapi Executor as an sf plugin: `sf_plugin_entry_v1` for the `executor` contract under
//! the tag `reapi`, over the `sf-reapi` crate (kept apart, as sandbox-exec's is, so that a
//! program may link sf-reapi statically beside other backends without a second entry symbol).

#![forbid(unsafe_code)]

use sf_reapi::{ReapiBackend, ReapiExecutor};

/// The `[executor]` section (without `type`), parsed strictly, as a configured Executor.
fn instantiate(config: &sf_sdk::export::PluginConfig) -> Result<ReapiExecutor, String> {
    let backend: ReapiBackend = config.parse()?;
    ReapiExecutor::new(&backend).map_err(|error| error.to_string())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    executor: {
        "reapi" => instantiate,
    },
}
