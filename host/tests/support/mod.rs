//! What the host's tests of its built-in backends share: private directories for database
//! files, tampering with a database from outside the store, the evidence-store conformance
//! harness over SQLite files, however the store is reached, and the test plugin that exports
//! the built-ins.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sf_host::canonical::Digest;
use sf_host::contracts::EvidenceStore;

pub use sf_test_support::private_store_dir as store_dir;

/// The test plugin exporting the built-ins, built and installed once per test process.
pub fn backends_plugin() -> &'static Path {
    use sf_test_support::build::{BACKENDS_PLUGIN, cargo_build};
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let profile = cargo_build(&[BACKENDS_PLUGIN.package, "sf-host"], &["--lib"]);
        // Built with another set of packages than sf-tests builds it with, so other bytes
        // through feature unification: installed apart from sf-tests' copy.
        BACKENDS_PLUGIN.install_in(&profile, "sf-test-plugins-host")
    })
}

/// A plugin section holding only `path`.
pub fn path_section(path: &Path) -> sf_sdk::serde_json::Map<String, sf_sdk::serde_json::Value> {
    let mut section = sf_sdk::serde_json::Map::new();
    section.insert("path".into(), path.to_str().expect("a UTF-8 path").into());
    section
}

/// The SQLite store's write-once triggers, as its schema creates them.
const EVIDENCE_TRIGGERS_SQL: &str = "
CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence records are write-once'); END;
CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence records are write-once'); END;";

/// Changes the record under `id` in the SQLite evidence database at `path` with a separate
/// connection: drops the write-once triggers, flips the last byte of the record, and puts the
/// triggers back (an intruder covering their tracks).
pub fn corrupt_evidence_row(path: &Path, id: &Digest) {
    let connection = rusqlite::Connection::open(path).unwrap();
    connection
        .execute_batch("DROP TRIGGER evidence_no_update; DROP TRIGGER evidence_no_delete;")
        .unwrap();
    let mut bytes: Vec<u8> = connection
        .query_row(
            "SELECT record FROM evidence WHERE id = ?1",
            [id.to_string()],
            |row| row.get(0),
        )
        .unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let changed = connection
        .execute(
            "UPDATE evidence SET record = ?1 WHERE id = ?2",
            rusqlite::params![bytes, id.to_string()],
        )
        .unwrap();
    assert_eq!(changed, 1);
    connection.execute_batch(EVIDENCE_TRIGGERS_SQL).unwrap();
}

/// How a harness makes a store over a database file.
type Open = Box<dyn Fn(&Path) -> Arc<dyn EvidenceStore>>;

/// The evidence-store conformance harness for SQLite-file stores, however they are reached
/// (linked, or through a plugin): `open` makes a store over a database file, and corruption
/// is made in that file from outside with [`corrupt_evidence_row`].
pub struct SqliteFileHarness {
    _dir: tempfile::TempDir,
    parent: PathBuf,
    next: std::sync::atomic::AtomicU64,
    stores: Mutex<Vec<(Arc<dyn EvidenceStore>, PathBuf)>>,
    open: Open,
}

impl SqliteFileHarness {
    /// A harness whose stores `open` makes, each over a new file in a private directory
    /// whose parent is private too.
    pub fn new(open: impl Fn(&Path) -> Arc<dyn EvidenceStore> + 'static) -> Self {
        let (dir, parent) = store_dir();
        Self {
            _dir: dir,
            parent,
            next: 0.into(),
            stores: Mutex::new(Vec::new()),
            open: Box::new(open),
        }
    }
}

impl sf_sdk::conformance::evidence_store::Harness for SqliteFileHarness {
    fn fresh_store(&self) -> Arc<dyn EvidenceStore> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = self.parent.join(format!("evidence-{n}.db"));
        let store = (self.open)(&path);
        self.stores.lock().unwrap().push((store.clone(), path));
        store
    }

    fn corrupt(&self, store: &Arc<dyn EvidenceStore>, id: &Digest) -> bool {
        let stores = self.stores.lock().unwrap();
        let Some((_, path)) = stores.iter().find(|(made, _)| Arc::ptr_eq(made, store)) else {
            return false;
        };
        corrupt_evidence_row(path, id);
        true
    }
}
