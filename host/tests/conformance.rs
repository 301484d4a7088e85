//! The conformance suites against the host's built-in backends, one test per case, each
//! twice: linked, and exported by the test plugin sf-test-backends-plugin (tags `test-sqlite`
//! and `test-file-gate`) loaded through the real loader and adapters. The SQLite
//! EvidenceStore over real database files; the file Gate over a real file. (The `open` gate
//! has no source to close, so the gate suite cannot be run against it.)

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sf_host::contracts::{EvidenceStore, Gate};
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::gate::FileGate;
use sf_host::plugin::{PluginEvidenceStore, PluginGate, load};
use sf_sdk::conformance::gate::{self, Setting};
use support::{SqliteFileHarness, backends_plugin, path_section};

fn linked_sqlite() -> SqliteFileHarness {
    SqliteFileHarness::new(|path| {
        Arc::new(SqliteEvidenceStore::open(path).unwrap_or_else(|error| panic!("{error}")))
            as Arc<dyn EvidenceStore>
    })
}

fn loaded_sqlite() -> SqliteFileHarness {
    let plugin = load(backends_plugin()).unwrap_or_else(|error| panic!("{error}"));
    SqliteFileHarness::new(move |path| {
        Arc::new(
            PluginEvidenceStore::new(&plugin, "test-sqlite", &path_section(path))
                .unwrap_or_else(|error| panic!("{error}")),
        ) as Arc<dyn EvidenceStore>
    })
}

mod sqlite_linked {
    sf_sdk::evidence_store_conformance!(super::linked_sqlite);
}

mod sqlite_loaded {
    sf_sdk::evidence_store_conformance!(super::loaded_sqlite);
}

/// A file gate, however reached, over a file in a private directory that the harness writes.
struct FileGateHarness {
    gate: Box<dyn Gate>,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl FileGateHarness {
    /// A harness over the gate `make` builds for the gate file.
    fn new(make: impl FnOnce(&Path) -> Box<dyn Gate>) -> Self {
        let (dir, parent) = sf_test_support::private_dir();
        let file = parent.join("gate.json");
        Self {
            gate: make(&file),
            file,
            _dir: dir,
        }
    }
}

impl gate::Harness for FileGateHarness {
    fn gate(&self) -> &dyn Gate {
        self.gate.as_ref()
    }

    fn set(&self, setting: Setting) {
        let bytes: &[u8] = match setting {
            Setting::Open => br#"{"proceed": true}"#,
            Setting::Closed => br#"{"proceed": false, "reason": "closed by the test"}"#,
            Setting::Broken => b"{not json",
        };
        std::fs::write(&self.file, bytes).unwrap();
    }
}

fn linked_file_gate() -> FileGateHarness {
    FileGateHarness::new(|file| Box::new(FileGate::new(file)))
}

fn loaded_file_gate() -> FileGateHarness {
    let plugin = load(backends_plugin()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "test-backends");
    FileGateHarness::new(|file| {
        let gate = PluginGate::new(&plugin, "test-file-gate", &path_section(file))
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(gate.tag(), "test-file-gate");
        Box::new(gate)
    })
}

mod file_gate_linked {
    sf_sdk::gate_conformance!(super::linked_file_gate);
}

mod file_gate_loaded {
    sf_sdk::gate_conformance!(super::loaded_file_gate);
}
