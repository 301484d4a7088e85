//! sf-postgres as a plugin: `[evidence_store] type = "postgres"`, exported through the sdk's
//! `export_plugin!`.

use crate::{PostgresConfig, PostgresEvidenceStore};

fn instantiate(config: &sf_sdk::export::PluginConfig) -> Result<PostgresEvidenceStore, String> {
    let config: PostgresConfig = config.parse()?;
    PostgresEvidenceStore::connect(&config).map_err(|error| error.to_string())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    evidence_store: {
        "postgres" => instantiate,
    },
}
