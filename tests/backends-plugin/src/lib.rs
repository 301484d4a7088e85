//! sf's built-in SQLite EvidenceStore, file Gate and file fence, exported as a dynamic plugin
//! under test tags (`test-sqlite`, `test-file-gate`, `test-file-fence`), for tests only.
//!
//! sf links these backends itself; exporting them again through `export_plugin!` lets the
//! evidence-store, gate and fence conformance suites, and `sf.toml` resolution through the plugin
//! path, run against real backends on the far side of the real loader and ABI.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use sf_host::evidence::SqliteEvidenceStore;
use sf_host::fence::FileFence;
use sf_host::gate::FileGate;
use sf_host::plugin::builtin::FileGateBackend;
use sf_sdk::export::PluginConfig;

/// `[evidence_store] type = "test-sqlite", path = "/abs/evidence.db"` (and the fence's
/// `path`, its directory).
#[derive(sf_sdk::serde::Deserialize)]
#[serde(crate = "sf_sdk::serde", deny_unknown_fields)]
struct SqliteConfig {
    path: PathBuf,
}

fn sqlite(config: &PluginConfig) -> Result<SqliteEvidenceStore, String> {
    let SqliteConfig { path } = config.parse()?;
    SqliteEvidenceStore::open(&path).map_err(|error| error.to_string())
}

/// `[gate] type = "test-file-gate", path = "/abs/gate.json"`: the `file` gate's fields.
fn file_gate(config: &PluginConfig) -> Result<FileGate, String> {
    let backend: FileGateBackend = config.parse()?;
    backend.file_gate().map_err(|error| error.to_string())
}

/// `type = "test-file-fence", path = "/abs/fence-dir"`: the file fence in that directory.
fn file_fence(config: &PluginConfig) -> Result<FileFence, String> {
    let SqliteConfig { path } = config.parse()?;
    FileFence::open(&path).map_err(|error| error.to_string())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    evidence_store: {
        "test-sqlite" => sqlite,
    },
    gate: {
        "test-file-gate" => file_gate,
    },
    fence: {
        "test-file-fence" => file_fence,
    },
}
