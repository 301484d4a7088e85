//! The queue in SQLite: `queue.sqlite` in `[serve] state` (WAL, `synchronous = FULL`), made
//! when it is missing. One connection per handle; SQLite serialises the writers.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension as _, params};

use super::{
    Columns, End, Entry, Kind, OPEN, QueueStore, Sealing, SealingRow, UNLANDED, now, read_entry,
    read_sealing,
};
use crate::state::State;

/// A handle on the queue's SQLite database (one per thread).
pub struct SqliteQueue {
    connection: Connection,
}

/// The file of the queue's database in the state directory.
pub const DATABASE: &str = "queue.sqlite";

const COLUMNS: &str = "id, repository, slice, kind, body, client, state, frozen_slice, \
                       candidate, verdict, commit_id, reasons, error, queued_at, updated_at, \
                       generation, base, attempt, trial";

/// The columns added after the first version of the table, with their definitions: added to
/// a database made before them, so that nothing queued is lost by an upgrade.
const ADDED: [(&str, &str); 4] = [
    ("generation", "INTEGER NOT NULL DEFAULT 1"),
    ("base", "TEXT"),
    ("attempt", "INTEGER"),
    ("trial", "TEXT"),
];

/// A database error, as the message the caller reports.
fn failed(what: &str, error: rusqlite::Error) -> String {
    format!("the queue's database: {what}: {error}")
}

impl SqliteQueue {
    /// Opens (creating) the queue in `state`.
    pub fn open(state: &Path) -> Result<Self, String> {
        let path = state.join(DATABASE);
        let connection = Connection::open(&path)
            .map_err(|error| failed(&format!("cannot open {}", path.display()), error))?;
        connection
            .busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|error| failed("busy timeout", error))?;
        // WAL: readers (the pages) never wait for the worker's writes; FULL: a committed
        // state survives a power cut, not only a killed process.
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 CREATE TABLE IF NOT EXISTS proposals (
                     seq INTEGER PRIMARY KEY AUTOINCREMENT,
                     id TEXT NOT NULL UNIQUE,
                     repository TEXT NOT NULL,
                     slice TEXT NOT NULL,
                     kind TEXT NOT NULL,
                     body BLOB NOT NULL,
                     client TEXT NOT NULL,
                     state TEXT NOT NULL,
                     frozen_slice TEXT,
                     candidate TEXT,
                     verdict TEXT,
                     commit_id TEXT,
                     reasons TEXT NOT NULL DEFAULT '[]',
                     error TEXT,
                     queued_at INTEGER NOT NULL,
                     updated_at INTEGER NOT NULL
                 );
                 CREATE INDEX IF NOT EXISTS proposals_open ON proposals (repository, state, seq);
                 CREATE INDEX IF NOT EXISTS proposals_client ON proposals (client, state);
                 CREATE TABLE IF NOT EXISTS sealings (
                     proposal TEXT NOT NULL,
                     number INTEGER NOT NULL,
                     base TEXT NOT NULL,
                     frozen_slice TEXT,
                     candidate TEXT,
                     commit_id TEXT,
                     attempt INTEGER,
                     trial TEXT,
                     refusal TEXT,
                     PRIMARY KEY (proposal, number),
                     UNIQUE (proposal, base)
                 );",
            )
            .map_err(|error| failed("cannot create its table", error))?;
        add_columns(&connection)?;
        Ok(Self { connection })
    }
}

impl QueueStore for SqliteQueue {
    /// The proposal `id`.
    fn get(&mut self, id: &str) -> Result<Option<Entry>, String> {
        self.connection
            .query_row(
                &format!("SELECT {COLUMNS} FROM proposals WHERE id = ?1"),
                params![id],
                row,
            )
            .optional()
            .map_err(|error| failed("cannot read a proposal", error))
    }

    /// Stores a new proposal as `queued` unless `client` has `limit` proposals that are not
    /// final already (`Ok(false)`, nothing stored); the count and the insert are one
    /// transaction, so concurrent requests cannot pass the limit together.
    #[allow(clippy::too_many_arguments)]
    fn insert_within(
        &mut self,
        id: &str,
        repository: &str,
        slice: &str,
        kind: Kind,
        body: &[u8],
        client: &str,
        limit: usize,
    ) -> Result<bool, String> {
        let transaction = self
            .connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|error| failed("cannot store the proposal", error))?;
        let open: i64 = transaction
            .query_row(
                &format!("SELECT COUNT(*) FROM proposals WHERE client = ?1 AND state IN {OPEN}"),
                params![client],
                |row| row.get(0),
            )
            .map_err(|error| failed("cannot count the client's proposals", error))?;
        if open as u64 >= limit as u64 {
            return Ok(false);
        }
        let at = now() as i64;
        transaction
            .execute(
                "INSERT INTO proposals (id, repository, slice, kind, body, client, state, \
                 queued_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
                params![
                    id,
                    repository,
                    slice,
                    kind.as_str(),
                    body,
                    client,
                    State::Queued.as_str(),
                    at
                ],
            )
            .map_err(|error| failed("cannot store the proposal", error))?;
        transaction
            .commit()
            .map_err(|error| failed("cannot store the proposal", error))?;
        Ok(true)
    }

    /// The proposals of `repository` that are not final, oldest first: its queue, in the
    /// order they land.
    fn open_of(&mut self, repository: &str) -> Result<Vec<Entry>, String> {
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT {COLUMNS} FROM proposals WHERE repository = ?1 AND state IN {OPEN} \
                 ORDER BY seq"
            ))
            .map_err(|error| failed("cannot read the queue", error))?;
        statement
            .query_map(params![repository], row)
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot read the queue", error))
    }

    /// How long each final proposal took from its request to its end, in seconds.
    fn times_in_queue(&mut self) -> Result<Vec<u64>, String> {
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT updated_at - queued_at FROM proposals WHERE state NOT IN {OPEN}"
            ))
            .map_err(|error| failed("cannot read the queue", error))?;
        statement
            .query_map([], |row| Ok(row.get::<_, i64>(0)?.max(0) as u64))
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot read the queue", error))
    }

    /// How many proposals of each repository are not final.
    fn depths(&mut self) -> Result<Vec<(String, u64)>, String> {
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT repository, COUNT(*) FROM proposals WHERE state IN {OPEN} GROUP BY 1"
            ))
            .map_err(|error| failed("cannot count the queue", error))?;
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot count the queue", error))
    }

    /// Every proposal, newest first, at most `limit`.
    fn list(&mut self, limit: usize) -> Result<Vec<Entry>, String> {
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT {COLUMNS} FROM proposals ORDER BY seq DESC LIMIT ?1"
            ))
            .map_err(|error| failed("cannot read the queue", error))?;
        statement
            .query_map(params![limit as i64], row)
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot read the queue", error))
    }

    /// How many proposals are in each state.
    fn counts(&mut self) -> Result<Vec<(String, u64)>, String> {
        let mut statement = self
            .connection
            .prepare("SELECT state, COUNT(*) FROM proposals GROUP BY state")
            .map_err(|error| failed("cannot count the queue", error))?;
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get::<_, i64>(1)? as u64)))
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot count the queue", error))
    }

    /// How many Verdicts of each outcome the finished landings had.
    fn verdicts(&mut self) -> Result<Vec<(String, u64)>, String> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT json_extract(verdict, '$.outcome'), COUNT(*) FROM proposals \
                 WHERE verdict IS NOT NULL GROUP BY 1",
            )
            .map_err(|error| failed("cannot count the Verdicts", error))?;
        statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, Option<String>>(0)?.unwrap_or_default(),
                    row.get::<_, i64>(1)? as u64,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot count the Verdicts", error))
    }

    /// Moves `id` to `state`; committed when this returns.
    fn set_state(&mut self, id: &str, state: State) -> Result<(), String> {
        self.connection
            .execute(
                "UPDATE proposals SET state = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, state.as_str(), now() as i64],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record a state", error))
    }

    /// The sealings of the open proposals of `repository`.
    fn sealings_of(&mut self, repository: &str) -> Result<Vec<SealingRow>, String> {
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT s.proposal, s.number, s.base, s.frozen_slice, s.candidate, s.commit_id, \
                 s.attempt, s.trial, s.refusal FROM sealings s JOIN proposals p ON p.id = \
                 s.proposal WHERE p.repository = ?1 AND p.state IN {OPEN} ORDER BY s.number"
            ))
            .map_err(|error| failed("cannot read the sealings", error))?;
        statement
            .query_map(params![repository], sealing_row)
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot read the sealings", error))
    }

    /// The sealings of proposal `id`, by number.
    fn sealings_for(&mut self, id: &str) -> Result<Vec<SealingRow>, String> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT proposal, number, base, frozen_slice, candidate, commit_id, attempt, \
                 trial, refusal FROM sealings WHERE proposal = ?1 ORDER BY number",
            )
            .map_err(|error| failed("cannot read the sealings", error))?;
        statement
            .query_map(params![id], sealing_row)
            .and_then(|rows| rows.collect())
            .map_err(|error| failed("cannot read the sealings", error))
    }

    /// Records that `id` was sealed on `base` as `sealed` (or refused there: `Err`), under
    /// the next number of the proposal; answers the sealing. One transaction.
    fn add_sealing(
        &mut self,
        id: &str,
        base: &str,
        sealed: Result<&Sealing<'_>, &serde_json::Value>,
    ) -> Result<SealingRow, String> {
        let transaction = self
            .connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|error| failed("cannot record a sealing", error))?;
        // After the numbers used so far, and after the generation a proposal queued before
        // sealings were recorded stands on: a number is an action occurrence, never reused.
        let number: i64 = transaction
            .query_row(
                "SELECT MAX(COALESCE((SELECT MAX(number) FROM sealings WHERE proposal = ?1), 0), \
                 COALESCE((SELECT generation FROM proposals WHERE id = ?1 AND candidate IS NOT \
                 NULL), 0)) + 1",
                params![id],
                |row| row.get(0),
            )
            .map_err(|error| failed("cannot number a sealing", error))?;
        let (ok, refusal) = (sealed.ok(), sealed.err().map(ToString::to_string));
        transaction
            .execute(
                "INSERT INTO sealings (proposal, number, base, frozen_slice, candidate, \
                 commit_id, refusal) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    id,
                    number,
                    base,
                    ok.map(|sealing| sealing.frozen_slice),
                    ok.map(|sealing| sealing.candidate),
                    ok.map(|sealing| sealing.commit),
                    refusal
                ],
            )
            .map_err(|error| failed("cannot record a sealing", error))?;
        transaction
            .commit()
            .map_err(|error| failed("cannot record a sealing", error))?;
        Ok(SealingRow::new(id, number as u64, base, sealed))
    }

    /// Makes `id` stand on `sealing`: its row mirrors it, as the sealings table holds it now
    /// (a collection that ended since it was read is taken along), and it is `collecting`.
    /// Never for a proposal whose landing started (it is landed again as it is) or that ended.
    fn stand_on(&mut self, id: &str, sealing: &SealingRow) -> Result<(), String> {
        self.connection
            .execute(
                &format!(
                    "UPDATE proposals SET state = 'collecting', generation = s.number, \
                     base = s.base, frozen_slice = s.frozen_slice, candidate = s.candidate, \
                     commit_id = s.commit_id, attempt = s.attempt, trial = s.trial, \
                     updated_at = ?3 FROM sealings s WHERE s.proposal = proposals.id AND \
                     s.number = ?2 AND proposals.id = ?1 AND proposals.state IN {UNLANDED}"
                ),
                params![id, sealing.number as i64, now() as i64],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record where a proposal stands", error))
    }

    /// Makes `id` stand on nothing (`sealing`): the commit it stood on is no longer where its
    /// place in the queue is. Never for a proposal whose landing started, or that ended.
    fn leave(&mut self, id: &str) -> Result<(), String> {
        self.connection
            .execute(
                &format!(
                    "UPDATE proposals SET state = 'sealing', base = NULL, frozen_slice = NULL, \
                     candidate = NULL, commit_id = NULL, attempt = NULL, trial = NULL, \
                     updated_at = ?2 WHERE id = ?1 AND state IN {UNLANDED}"
                ),
                params![id, now() as i64],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record where a proposal stands", error))
    }

    /// Records what the collection of sealing `number` of `id` stored and showed, and, while
    /// the proposal stands on that sealing, in its row too. One transaction.
    fn collected(
        &mut self,
        id: &str,
        number: u64,
        attempt: Option<u64>,
        trial: &serde_json::Value,
    ) -> Result<(), String> {
        let transaction = self
            .connection
            .transaction()
            .map_err(|error| failed("cannot record a collection", error))?;
        let (attempt, trial) = (attempt.map(|attempt| attempt as i64), trial.to_string());
        transaction
            .execute(
                "UPDATE sealings SET attempt = ?3, trial = ?4 WHERE proposal = ?1 AND number = ?2",
                params![id, number as i64, attempt, trial],
            )
            .map_err(|error| failed("cannot record a collection", error))?;
        transaction
            .execute(
                "UPDATE proposals SET attempt = ?3, trial = ?4, updated_at = ?5 WHERE id = ?1 \
                 AND generation = ?2 AND state = 'collecting'",
                params![id, number as i64, attempt, trial, now() as i64],
            )
            .map_err(|error| failed("cannot record a collection", error))?;
        transaction
            .commit()
            .map_err(|error| failed("cannot record a collection", error))
    }

    /// Records how `id` ended, in one transaction.
    fn finish(&mut self, id: &str, end: &End) -> Result<(), String> {
        debug_assert!(end.state.is_final());
        self.connection
            .execute(
                "UPDATE proposals SET state = ?2, verdict = ?3, reasons = ?4, error = ?5, \
                 updated_at = ?6 WHERE id = ?1",
                params![
                    id,
                    end.state.as_str(),
                    end.verdict.as_ref().map(|verdict| verdict.to_string()),
                    serde_json::Value::from(end.reasons.clone()).to_string(),
                    end.error.as_ref().map(|error| error.to_string()),
                    now() as i64
                ],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record how a proposal ended", error))
    }
}

/// Adds the columns of [`ADDED`] a database made before them lacks.
fn add_columns(connection: &Connection) -> Result<(), String> {
    let mut statement = connection
        .prepare("SELECT name FROM pragma_table_info('proposals')")
        .map_err(|error| failed("cannot read its columns", error))?;
    let present: Vec<String> = statement
        .query_map([], |row| row.get(0))
        .and_then(|rows| rows.collect())
        .map_err(|error| failed("cannot read its columns", error))?;
    for (column, definition) in ADDED {
        if !present.iter().any(|name| name == column) {
            connection
                .execute_batch(&format!(
                    "ALTER TABLE proposals ADD COLUMN {column} {definition}"
                ))
                .map_err(|error| failed(&format!("cannot add the column {column}"), error))?;
        }
    }
    Ok(())
}

impl Columns for rusqlite::Row<'_> {
    type Error = rusqlite::Error;
    fn text(&self, at: usize) -> rusqlite::Result<Option<String>> {
        self.get(at)
    }
    fn int(&self, at: usize) -> rusqlite::Result<Option<i64>> {
        self.get(at)
    }
    fn bytes(&self, at: usize) -> rusqlite::Result<Vec<u8>> {
        self.get(at)
    }
}

/// An entry from a row of [`COLUMNS`].
fn row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    read_entry(row)
}

/// A sealing from a row of `proposal, number, base, frozen_slice, candidate, commit_id,
/// attempt, trial, refusal`.
fn sealing_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SealingRow> {
    read_sealing(row)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Opener;
    use crate::queue::conformance::conformance_tests;

    conformance_tests!({
        let dir = tempfile::tempdir().unwrap();
        let opener = Opener::Sqlite(dir.path().to_owned());
        (dir, opener)
    });

    fn sealing(candidate: &str) -> Sealing<'_> {
        Sealing {
            frozen_slice: "/s",
            candidate,
            commit: "m",
        }
    }

    #[test]
    fn a_database_made_before_the_generations_keeps_its_proposals() {
        let dir = tempfile::tempdir().unwrap();
        let old = Connection::open(dir.path().join(DATABASE)).unwrap();
        old.execute_batch(
            "CREATE TABLE proposals (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL \
             UNIQUE, repository TEXT NOT NULL, slice TEXT NOT NULL, kind TEXT NOT NULL, body \
             BLOB NOT NULL, client TEXT NOT NULL, state TEXT NOT NULL, frozen_slice TEXT, \
             candidate TEXT, verdict TEXT, commit_id TEXT, reasons TEXT NOT NULL DEFAULT '[]', \
             error TEXT, queued_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
             INSERT INTO proposals (id, repository, slice, kind, body, client, state, \
             candidate, queued_at, updated_at) VALUES ('a', 'te', 's', 'diff', x'00', 'c', \
             'collecting', 'sha256:c', 1, 1);",
        )
        .unwrap();
        drop(old);
        let mut queue = SqliteQueue::open(dir.path()).unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!((a.state, a.generation), (State::Collecting, 1));
        assert_eq!(a.candidate.as_deref(), Some("sha256:c"));
        assert_eq!((a.base, a.attempt), (None, None));
        // Its first sealing was occurrence 1: the next is 2.
        let next = queue
            .add_sealing("a", "t", Ok(&sealing("sha256:d")))
            .unwrap();
        assert_eq!(next.number, 2);
    }
}
