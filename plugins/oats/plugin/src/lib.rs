//! An oats capability's `binding.check` as sf's Gate, loaded by `sf` at run time:
//!
//! ```toml
//! [gate]
//! type = "oats-binding"
//! capability = "acme.policy"                  # registered and trusted with `sf oats`
//! binding_file = "/etc/sf/acme-binding.json"   # optional
//! action = "sf.integrate"                      # optional
//! state = "/var/lib/sf"                        # optional: sf's state directory
//! ```
//!
//! The section is [`sf_oats::OatsBindingGateConfig`], parsed strictly. The check runs
//! confined by sandbox-exec with the Node runtime; its launcher is the `sf-sandbox-launcher`
//! beside this library (a workspace build puts both beside `sf`), else beside `sf`.

#![forbid(unsafe_code)]

use sf_oats::{OatsBindingGate, OatsBindingGateConfig};
use sf_oats_cli::node_sandbox;
use sf_sandbox_exec::LAUNCHER_NAME;

fn binding_gate(config: &sf_sdk::export::PluginConfig) -> Result<OatsBindingGate, String> {
    let config: OatsBindingGateConfig = config.parse()?;
    let launcher = sf_sandbox_exec::plugin::plugin_library()
        .and_then(|library| library.parent().map(|dir| dir.join(LAUNCHER_NAME)))
        .filter(|launcher| launcher.is_file());
    let executor = node_sandbox(launcher).map_err(|error| error.to_string())?;
    OatsBindingGate::configured(config, executor).map_err(|error| error.to_string())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    gate: {
        "oats-binding" => binding_gate,
    },
}
