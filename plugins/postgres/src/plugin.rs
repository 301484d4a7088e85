//! sf-postgres as a plugin: `[evidence_store] type = "postgres"`, and the attempt fence that
//! comes with it (the `fence` contract under the same tag, configured by the same section),
//! exported through the sdk's `export_plugin!`.

use crate::{PostgresConfig, PostgresEvidenceStore, PostgresFence};

fn instantiate(config: &sf_sdk::export::PluginConfig) -> Result<PostgresEvidenceStore, String> {
    let config: PostgresConfig = config.parse()?;
    PostgresEvidenceStore::connect(&config).map_err(|error| error.to_string())
}

fn instantiate_fence(config: &sf_sdk::export::PluginConfig) -> Result<PostgresFence, String> {
    let config: PostgresConfig = config.parse()?;
    PostgresFence::connect(&config).map_err(|error| error.to_string())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    evidence_store: {
        "postgres" => instantiate,
    },
    fence: {
        "postgres" => instantiate_fence,
    },
}
