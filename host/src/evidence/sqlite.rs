//! The built-in EvidenceStore: one SQLite database file (rusqlite, SQLite bundled).
//!
//! - One table keyed by the record's digest, with triggers that refuse every `UPDATE` and
//!   `DELETE`: write-once holds even against a bug in sf.
//! - `PRAGMA synchronous=FULL` with `journal_mode=WAL`: a commit returns only after the WAL
//!   frame holding it is fsynced, so a put is durable before it returns. WAL rather than
//!   DELETE because readers (the judge, `sf evidence get`) never block a collecting writer,
//!   and a crash never leaves a hot rollback journal that only a writer can resolve; the
//!   cost is two companion files (`-wal`, `-shm`), created by SQLite with the database file's
//!   own permissions.
//! - The database lives in a private directory of this user (see [`crate::private_dir`]);
//!   the file is a regular file of this user with no group or other permissions, opened
//!   without following links, and checked again (same directory, same file) before every
//!   call.
//! - `get` re-hashes on every read; a row whose bytes do not hash to its key, or that is
//!   filed under other pins than its header names, is `corrupt` and stays as it is.

use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension as _, TransactionBehavior, params};

use crate::canonical::Digest;
use crate::contracts::{EvidenceRecord, EvidenceStore, EvidenceStoreError};
use crate::private_dir::PrivateDir;

/// The protocol string of the database schema, kept in its `meta` table.
pub const SQLITE_SCHEMA_PROTOCOL: &str = "sf-evidence-sqlite/1";

const SCHEMA: &str = "
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

const TRIGGERS: [&str; 4] = [
    "evidence_no_delete",
    "evidence_no_update",
    "meta_no_delete",
    "meta_no_update",
];

/// The SQLite EvidenceStore (see the module documentation).
pub struct SqliteEvidenceStore {
    dir: PrivateDir,
    path: PathBuf,
    file: (u64, u64),
    connection: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteEvidenceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteEvidenceStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn unavailable(reason: impl Into<String>) -> EvidenceStoreError {
    EvidenceStoreError::Unavailable {
        reason: reason.into(),
    }
}

fn sql_error(what: &str, error: rusqlite::Error) -> EvidenceStoreError {
    use rusqlite::ffi::ErrorCode;
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => EvidenceStoreError::Timeout {
            what: format!("{what}: the database stayed locked: {error}"),
        },
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => EvidenceStoreError::Corrupt {
            id: "database".into(),
            what: format!("{what}: {error}"),
        },
        _ => unavailable(format!("{what}: {error}")),
    }
}

impl SqliteEvidenceStore {
    /// Opens the database at `path`, creating it (mode 0600) with its schema if it does not
    /// exist. The parent directory must be a private directory of this user; an existing
    /// file must be a regular file of this user without group or other permissions, holding
    /// this schema with its write-once triggers.
    pub fn open(path: &Path) -> Result<Self, EvidenceStoreError> {
        let parent = path
            .parent()
            .filter(|_| path.file_name().is_some())
            .ok_or_else(|| unavailable(format!("{} names no file", path.display())))?;
        let dir = PrivateDir::check(parent).map_err(unavailable)?;
        // Create the file first, exclusively and without following links, so that its mode
        // is ours and not SQLite's default.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                return Err(unavailable(format!(
                    "{} cannot be created: {error}",
                    path.display()
                )));
            }
        }
        let file = check_file(path)?;
        let connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(|error| sql_error(&format!("opening {}", path.display()), error))?;
        let configure = |what: &str, result: rusqlite::Result<()>| {
            result.map_err(|error| sql_error(&format!("configuring the database ({what})"), error))
        };
        configure(
            "busy_timeout",
            connection.busy_timeout(Duration::from_secs(10)),
        )?;
        let mode: String = connection
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(|error| sql_error("configuring the database (journal_mode)", error))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(unavailable(format!(
                "{}: journal mode is {mode}, not wal",
                path.display()
            )));
        }
        for (pragma, value) in [
            ("synchronous", "FULL"),
            ("trusted_schema", "OFF"),
            ("cell_size_check", "ON"),
        ] {
            configure(pragma, connection.pragma_update(None, pragma, value))?;
        }
        let store = Self {
            dir,
            path: path.to_path_buf(),
            file,
            connection: Mutex::new(connection),
        };
        store.create_schema()?;
        Ok(store)
    }

    /// Opens the database at `path` as [`SqliteEvidenceStore::open`] does, but only if it
    /// exists: for commands that read, which create nothing.
    pub fn open_existing(path: &Path) -> Result<Self, EvidenceStoreError> {
        match std::fs::symlink_metadata(path) {
            Ok(_) => Self::open(path),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Err(unavailable(format!(
                    "{} does not exist: nothing was collected here yet",
                    path.display()
                )))
            }
            Err(error) => Err(unavailable(format!(
                "{} cannot be examined: {error}",
                path.display()
            ))),
        }
    }

    /// Where the database file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many records the store holds (for tests and operators: counting what a
    /// collection stored).
    pub fn count(&self) -> Result<u64, EvidenceStoreError> {
        let connection = self.connection(Instant::now() + Duration::from_secs(30))?;
        connection
            .query_row("SELECT count(*) FROM evidence", [], |row| {
                row.get::<_, i64>(0)
            })
            .map(|n| n as u64)
            .map_err(|error| sql_error("counting records", error))
    }

    fn create_schema(&self) -> Result<(), EvidenceStoreError> {
        let mut connection = self.connection(Instant::now() + Duration::from_secs(30))?;
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|error| sql_error("creating the schema", error))?;
        let tables: i64 = transaction
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |row| row.get(0),
            )
            .map_err(|error| sql_error("reading the schema", error))?;
        // Only an empty database gets the schema: sf never recreates a trigger or a table
        // over records it cannot vouch for.
        if tables == 0 {
            transaction
                .execute_batch(SCHEMA)
                .map_err(|error| sql_error("creating the schema", error))?;
            transaction
                .execute(
                    "INSERT INTO meta (key, value) VALUES ('protocol', ?1)",
                    params![SQLITE_SCHEMA_PROTOCOL],
                )
                .map_err(|error| sql_error("writing the schema record", error))?;
        }
        let protocol: Option<String> = transaction
            .query_row("SELECT value FROM meta WHERE key = 'protocol'", [], |row| {
                row.get(0)
            })
            .optional()
            .map_err(|error| sql_error("reading the schema record", error))?;
        if protocol.as_deref() != Some(SQLITE_SCHEMA_PROTOCOL) {
            return Err(unavailable(format!(
                "{} holds schema {protocol:?}, not {SQLITE_SCHEMA_PROTOCOL}",
                self.path.display()
            )));
        }
        check_triggers(&transaction)?;
        transaction
            .commit()
            .map_err(|error| sql_error("creating the schema", error))
    }

    /// The connection, after checking that the directory and file are still the ones opened
    /// and giving SQLite the time left until `deadline` to wait for a lock.
    fn connection(
        &self,
        deadline: Instant,
    ) -> Result<std::sync::MutexGuard<'_, Connection>, EvidenceStoreError> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|left| !left.is_zero())
            .ok_or_else(|| EvidenceStoreError::Timeout {
                what: "the deadline passed before the store was used".into(),
            })?;
        self.dir.recheck().map_err(unavailable)?;
        if check_file(&self.path)? != self.file {
            return Err(unavailable(format!(
                "{} was replaced since it was opened",
                self.path.display()
            )));
        }
        let connection = self
            .connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        connection
            .busy_timeout(left)
            .map_err(|error| sql_error("setting the lock timeout", error))?;
        Ok(connection)
    }
}

/// Checks the database file: a regular file (not a link) of this user, without group or
/// other permissions. Returns its device and inode.
fn check_file(path: &Path) -> Result<(u64, u64), EvidenceStoreError> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|error| unavailable(format!("{}: {error}", path.display())))?;
    if !meta.is_file() {
        return Err(unavailable(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
        return Err(unavailable(format!(
            "{} must be owned by this user with no group or other permissions",
            path.display()
        )));
    }
    Ok((meta.dev(), meta.ino()))
}

/// Refuses a database whose write-once triggers are gone: it no longer keeps its promise,
/// and sf never recreates them over records it cannot vouch for.
fn check_triggers(connection: &Connection) -> Result<(), EvidenceStoreError> {
    let mut statement = connection
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
        .map_err(|error| sql_error("reading the triggers", error))?;
    let names: Vec<String> = statement
        .query_map([], |row| row.get(0))
        .and_then(Iterator::collect)
        .map_err(|error| sql_error("reading the triggers", error))?;
    if names != TRIGGERS {
        return Err(EvidenceStoreError::Corrupt {
            id: "database".into(),
            what: format!(
                "the write-once triggers are not exactly {TRIGGERS:?} (found {names:?}); the \
                 database was altered outside sf"
            ),
        });
    }
    Ok(())
}

impl EvidenceStore for SqliteEvidenceStore {
    fn put(
        &self,
        record: &EvidenceRecord,
        deadline: Instant,
    ) -> Result<Digest, EvidenceStoreError> {
        let id = record.id();
        let id_text = id.to_string();
        let mut connection = self.connection(deadline)?;
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|error| sql_error("starting a put", error))?;
        check_triggers(&transaction)?;
        let existing: Option<Vec<u8>> = transaction
            .query_row(
                "SELECT record FROM evidence WHERE id = ?1",
                params![id_text],
                |row| row.get(0),
            )
            .optional()
            .map_err(|error| sql_error("reading before a put", error))?;
        if let Some(existing) = existing {
            return if existing == record.bytes() {
                Ok(id)
            } else {
                Err(EvidenceStoreError::Conflict { id: id_text })
            };
        }
        transaction
            .execute(
                "INSERT INTO evidence (id, pins, record) VALUES (?1, ?2, ?3)",
                params![id_text, record.pins().to_string(), record.bytes()],
            )
            .map_err(|error| sql_error("inserting a record", error))?;
        // With synchronous=FULL in WAL mode, the commit returns after the WAL is fsynced.
        transaction
            .commit()
            .map_err(|error| sql_error("committing a put", error))?;
        Ok(id)
    }

    fn get(&self, id: &Digest, deadline: Instant) -> Result<EvidenceRecord, EvidenceStoreError> {
        let connection = self.connection(deadline)?;
        let row: Option<(Vec<u8>, String)> = connection
            .query_row(
                "SELECT record, pins FROM evidence WHERE id = ?1",
                params![id.to_string()],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(|error| sql_error("reading a record", error))?;
        let Some((bytes, pins)) = row else {
            return Err(EvidenceStoreError::Missing { id: id.to_string() });
        };
        let record = EvidenceRecord::from_stored(id, bytes)?;
        if record.pins().to_string() != pins {
            return Err(EvidenceStoreError::Corrupt {
                id: id.to_string(),
                what: format!(
                    "filed under pins {pins}, but the record names {}",
                    record.pins()
                ),
            });
        }
        Ok(record)
    }

    fn find(&self, pins: &Digest, deadline: Instant) -> Result<Vec<Digest>, EvidenceStoreError> {
        let connection = self.connection(deadline)?;
        let mut statement = connection
            .prepare("SELECT id FROM evidence WHERE pins = ?1 ORDER BY rowid")
            .map_err(|error| sql_error("finding records", error))?;
        let ids: Vec<String> = statement
            .query_map(params![pins.to_string()], |row| row.get(0))
            .and_then(Iterator::collect)
            .map_err(|error| sql_error("finding records", error))?;
        ids.into_iter()
            .map(|text| {
                Digest::parse(&text).ok_or_else(|| EvidenceStoreError::Corrupt {
                    id: text.clone(),
                    what: "a key is not a sha256: digest".into(),
                })
            })
            .collect()
    }
}
