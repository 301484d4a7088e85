//! The built-in SQLite EvidenceStore on what only its file can show (its conformance suite is
//! in conformance.rs): the write-once triggers, corruption made with a separate connection
//! reported `corrupt` and never repaired, a schema changed in any way (same-named triggers
//! that do nothing, an extra trigger, table, view or index, a changed index) or failing
//! `PRAGMA quick_check` reported `corrupt`, durability across reopening, WAL with
//! synchronous=FULL, and the private directory rule.

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use sf_host::canonical::Digest;
use sf_host::contracts::{AttemptId, EvidenceRecord, EvidenceStore};
use sf_host::evidence::SqliteEvidenceStore;
use support::{corrupt_evidence_row, store_dir};

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn record(payload: &[u8]) -> EvidenceRecord {
    EvidenceRecord::new(
        Digest::of(b"pins"),
        AttemptId {
            product: "p".into(),
            epoch: 1,
        },
        "sf-test-payload/1",
        payload,
    )
    .unwrap()
}

#[test]
fn triggers_refuse_update_and_delete() {
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    let store = SqliteEvidenceStore::open(&path).unwrap();
    let id = store.put(&record(b"kept"), deadline()).unwrap();
    let connection = rusqlite::Connection::open(&path).unwrap();
    let update = connection.execute(
        "UPDATE evidence SET record = x'00' WHERE id = ?1",
        [id.to_string()],
    );
    assert!(update.unwrap_err().to_string().contains("write-once"));
    let delete = connection.execute("DELETE FROM evidence", []);
    assert!(delete.unwrap_err().to_string().contains("write-once"));
    let meta = connection.execute("UPDATE meta SET value = 'x'", []);
    assert!(meta.unwrap_err().to_string().contains("write-once"));
    assert_eq!(store.get(&id, deadline()).unwrap().payload(), b"kept");
}

#[test]
fn a_corrupt_row_is_reported_and_never_repaired() {
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    let store = SqliteEvidenceStore::open(&path).unwrap();
    let good = store.put(&record(b"good"), deadline()).unwrap();
    let bad = store.put(&record(b"to be damaged"), deadline()).unwrap();
    corrupt_evidence_row(&path, &bad);
    let tampered: Vec<u8> = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT record FROM evidence WHERE id = ?1",
            [bad.to_string()],
            |row| row.get(0),
        )
        .unwrap();
    for store in [store, SqliteEvidenceStore::open(&path).unwrap()] {
        assert_eq!(store.get(&bad, deadline()).unwrap_err().code(), "corrupt");
        assert_eq!(store.get(&good, deadline()).unwrap().payload(), b"good");
        assert_eq!(
            store.find(&Digest::of(b"pins"), deadline()).unwrap(),
            vec![good.clone(), bad.clone()]
        );
    }
    let after: Vec<u8> = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT record FROM evidence WHERE id = ?1",
            [bad.to_string()],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(after, tampered, "the corrupt row was left as it was");
}

#[test]
fn a_database_without_its_triggers_is_refused() {
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    let store = SqliteEvidenceStore::open(&path).unwrap();
    store.put(&record(b"one"), deadline()).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TRIGGER evidence_no_delete;")
        .unwrap();
    assert_eq!(
        store.put(&record(b"two"), deadline()).unwrap_err().code(),
        "corrupt"
    );
    assert_eq!(
        SqliteEvidenceStore::open(&path).unwrap_err().code(),
        "corrupt"
    );
    assert_eq!(store.count().unwrap(), 1);
}

/// A store with one record, then `alter` run on its file with a separate connection: the
/// altered database is `corrupt` both to the open store's next put and to a fresh open, and
/// the record is still there, unchanged.
fn assert_altered_is_corrupt(what: &str, alter: &str) {
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    let store = SqliteEvidenceStore::open(&path).unwrap();
    let id = store.put(&record(b"kept"), deadline()).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(alter)
        .unwrap_or_else(|error| panic!("{what}: {error}"));
    let put = store.put(&record(b"two"), deadline()).unwrap_err();
    assert_eq!(put.code(), "corrupt", "{what}: {put}");
    let opened = SqliteEvidenceStore::open(&path).unwrap_err();
    assert_eq!(opened.code(), "corrupt", "{what}: {opened}");
    let kept: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM evidence WHERE id = ?1",
            [id.to_string()],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(kept, 1, "{what}: the record was left as it was");
}

#[test]
fn same_named_triggers_that_do_nothing_are_corrupt() {
    // What such a trigger lets through, on a database sf made: an UPDATE and a DELETE.
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    let store = SqliteEvidenceStore::open(&path).unwrap();
    let id = store.put(&record(b"kept"), deadline()).unwrap();
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection.execute_batch(NO_OP_TRIGGERS).unwrap();
    let changed = connection
        .execute(
            "UPDATE evidence SET record = x'00' WHERE id = ?1",
            [id.to_string()],
        )
        .unwrap();
    assert_eq!(changed, 1, "the no-op trigger lets an UPDATE through");
    assert_eq!(connection.execute("DELETE FROM evidence", []).unwrap(), 1);
    drop(connection);
    assert_eq!(
        SqliteEvidenceStore::open(&path).unwrap_err().code(),
        "corrupt"
    );
    assert_altered_is_corrupt("same-named no-op triggers", NO_OP_TRIGGERS);
}

/// The write-once triggers on `evidence` replaced by triggers of the same names that do
/// nothing.
const NO_OP_TRIGGERS: &str = "
DROP TRIGGER evidence_no_update; DROP TRIGGER evidence_no_delete;
CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence BEGIN SELECT 1; END;
CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence BEGIN SELECT 1; END;";

#[test]
fn any_other_schema_change_is_corrupt() {
    for (what, alter) in [
        (
            "an extra trigger",
            "CREATE TRIGGER evidence_log AFTER INSERT ON evidence BEGIN SELECT 1; END;",
        ),
        (
            "a changed index",
            "DROP INDEX evidence_by_pins; CREATE INDEX evidence_by_pins ON evidence (id);",
        ),
        ("a dropped index", "DROP INDEX evidence_by_pins;"),
        (
            "an extra index",
            "CREATE INDEX evidence_by_record ON evidence (record);",
        ),
        ("an extra table", "CREATE TABLE notes (text TEXT);"),
        (
            "an extra view",
            "CREATE VIEW everything AS SELECT * FROM evidence;",
        ),
        (
            "a write-once trigger on meta replaced",
            "DROP TRIGGER meta_no_delete; \
             CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta BEGIN SELECT 1; END;",
        ),
    ] {
        assert_altered_is_corrupt(what, alter);
    }
}

#[test]
fn a_database_failing_quick_check_is_corrupt() {
    // The index's root page pointed at another index's b-tree: the schema's text is intact,
    // but the index no longer matches its table, which only an integrity check sees.
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    let store = SqliteEvidenceStore::open(&path).unwrap();
    for n in 0..3u8 {
        store.put(&record(&[n]), deadline()).unwrap();
    }
    drop(store);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET rootpage = (SELECT rootpage FROM sqlite_master \
                 WHERE name = 'sqlite_autoindex_meta_1') WHERE name = 'evidence_by_pins';",
        )
        .unwrap();
    let error = SqliteEvidenceStore::open(&path).unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(error.to_string().contains("quick_check"), "{error}");
}

#[test]
fn a_database_made_by_the_earlier_schema_batch_still_opens() {
    // Databases made before the schema was compared in full were created from one batch of
    // statements; SQLite keeps each statement's text, which must be the text compared.
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
    }
    let connection = rusqlite::Connection::open(&path).unwrap();
    connection.execute_batch(EARLIER_SCHEMA).unwrap();
    connection
        .execute(
            "INSERT INTO meta (key, value) VALUES ('protocol', 'sf-evidence-sqlite/1')",
            [],
        )
        .unwrap();
    drop(connection);
    let store = SqliteEvidenceStore::open(&path).unwrap();
    let id = store.put(&record(b"one"), deadline()).unwrap();
    assert_eq!(store.get(&id, deadline()).unwrap().payload(), b"one");
}

/// The schema batch as sf ran it before the full comparison.
const EARLIER_SCHEMA: &str = "
CREATE TABLE meta (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
CREATE TABLE evidence (
    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) = 71 AND substr(id, 1, 7) = 'sha256:'),
    pins TEXT NOT NULL CHECK (length(pins) = 71 AND substr(pins, 1, 7) = 'sha256:'),
    record BLOB NOT NULL
);
CREATE INDEX evidence_by_pins ON evidence (pins);
CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence records are write-once'); END;
CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence records are write-once'); END;
CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'the schema record is write-once'); END;
CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'the schema record is write-once'); END;
";

#[test]
fn records_survive_reopening_and_the_file_is_private() {
    let (_dir, parent) = store_dir();
    let path = parent.join("evidence.db");
    let ids: Vec<Digest> = {
        let store = SqliteEvidenceStore::open(&path).unwrap();
        (0..3u8)
            .map(|n| store.put(&record(&[n]), deadline()).unwrap())
            .collect()
    };
    let store = SqliteEvidenceStore::open(&path).unwrap();
    assert_eq!(store.find(&Digest::of(b"pins"), deadline()).unwrap(), ids);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let connection = rusqlite::Connection::open(&path).unwrap();
    let journal: String = connection
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
    for companion in ["evidence.db-wal", "evidence.db-shm"] {
        let companion = parent.join(companion);
        if companion.exists() {
            assert_eq!(
                std::fs::metadata(&companion).unwrap().permissions().mode() & 0o077,
                0
            );
        }
    }
}

#[test]
fn roots_and_files_that_are_not_private_are_unavailable() {
    let (_dir, parent) = store_dir();
    // A world-readable directory.
    let open_dir = parent.join("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        SqliteEvidenceStore::open(&open_dir.join("e.db"))
            .unwrap_err()
            .code(),
        "unavailable"
    );
    // A non-canonical path (through a link).
    std::os::unix::fs::symlink(&parent, parent.join("link")).unwrap();
    assert_eq!(
        SqliteEvidenceStore::open(&parent.join("link").join("e.db"))
            .unwrap_err()
            .code(),
        "unavailable"
    );
    // A link in place of the file.
    std::os::unix::fs::symlink("/etc/passwd", parent.join("linked.db")).unwrap();
    assert_eq!(
        SqliteEvidenceStore::open(&parent.join("linked.db"))
            .unwrap_err()
            .code(),
        "unavailable"
    );
    // A file others can read.
    std::fs::write(parent.join("readable.db"), b"").unwrap();
    std::fs::set_permissions(
        parent.join("readable.db"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    assert_eq!(
        SqliteEvidenceStore::open(&parent.join("readable.db"))
            .unwrap_err()
            .code(),
        "unavailable"
    );
    // Not a database.
    std::fs::write(parent.join("garbage.db"), vec![7u8; 4096]).unwrap();
    std::fs::set_permissions(
        parent.join("garbage.db"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    assert!(SqliteEvidenceStore::open(&parent.join("garbage.db")).is_err());
    // A store whose file is replaced after opening refuses every call.
    let path = parent.join("evidence.db");
    let store = SqliteEvidenceStore::open(&path).unwrap();
    std::fs::rename(&path, parent.join("moved.db")).unwrap();
    SqliteEvidenceStore::open(&path).unwrap();
    assert_eq!(
        store.put(&record(b"x"), deadline()).unwrap_err().code(),
        "unavailable"
    );
}
