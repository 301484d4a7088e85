//! sf-postgres as a plugin: `[evidence_store] type = "postgres"`, and the attempt fence that
//! comes with it (the `fence` contract under the same tag, configured by the same section),
//! exported through the sdk's `export_plugin!`. A store or fence that cannot be made answers
//! its contract's own error, so that a server that is down (`unavailable`) and a schema that
//! was tampered with (`corrupt`) reach the command line as themselves.

use sf_contracts::{EvidenceStoreError, FenceError};
use sf_sdk::export::{ConstructorError, PluginConfig};

use crate::{PostgresConfig, PostgresEvidenceStore, PostgresFence};

fn instantiate(
    config: &PluginConfig,
) -> Result<PostgresEvidenceStore, ConstructorError<EvidenceStoreError>> {
    let config: PostgresConfig = config.parse()?;
    Ok(PostgresEvidenceStore::connect(&config)?)
}

fn instantiate_fence(config: &PluginConfig) -> Result<PostgresFence, ConstructorError<FenceError>> {
    let config: PostgresConfig = config.parse()?;
    Ok(PostgresFence::connect(&config)?)
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
