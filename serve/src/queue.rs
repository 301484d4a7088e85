//! The durable queue: one SQLite database in `[serve] state`. A proposal is committed here
//! before its `202` is answered, and every change of state is committed before the step it
//! starts, so that a server killed at any moment finds each proposal where it was.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension as _, params};

use crate::state::State;

/// What a proposal is made of: sf's proposal format or a Git diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A proposal document (`{"edits": …}`).
    Proposal,
    /// A Git diff of the Slice's base.
    Diff,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Proposal => "proposal",
            Self::Diff => "diff",
        }
    }
}

/// One proposal as the queue holds it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its id in the API.
    pub id: String,
    /// The repository it lands into, by its `[[serve.repository]]` name.
    pub repository: String,
    /// The id of the Slice it is for.
    pub slice: String,
    /// What `body` is.
    pub kind: Kind,
    /// The proposal document or diff, as received.
    pub body: Vec<u8>,
    /// The client whose token queued it.
    pub client: String,
    /// Where it is.
    pub state: State,
    /// The frozen Slice directory it was sealed under.
    pub frozen_slice: Option<String>,
    /// The Candidate's digest, once sealed.
    pub candidate: Option<String>,
    /// The Verdict's outcome and digest, once judged.
    pub verdict: Option<serde_json::Value>,
    /// The Candidate's commit M, once sealed.
    pub commit: Option<String>,
    /// Why it ended as it did.
    pub reasons: Vec<String>,
    /// The error that ended it, when one did.
    pub error: Option<serde_json::Value>,
    /// When it was queued, in seconds since the epoch.
    pub queued_at: u64,
    /// When its state last changed, in seconds since the epoch.
    pub updated_at: u64,
}

/// A handle on the queue's database (one per thread: SQLite serialises the writers).
pub struct Queue {
    connection: Connection,
}

/// The file of the queue's database in the state directory.
pub const DATABASE: &str = "queue.sqlite";

const COLUMNS: &str = "id, repository, slice, kind, body, client, state, frozen_slice, \
                       candidate, verdict, commit_id, reasons, error, queued_at, updated_at";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// A database error, as the message the caller reports.
fn failed(what: &str, error: rusqlite::Error) -> String {
    format!("the queue's database: {what}: {error}")
}

impl Queue {
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
                 CREATE INDEX IF NOT EXISTS proposals_open ON proposals (repository, state, seq);",
            )
            .map_err(|error| failed("cannot create its table", error))?;
        Ok(Self { connection })
    }

    /// Stores a new proposal as `queued`; committed when this returns.
    pub fn insert(
        &self,
        id: &str,
        repository: &str,
        slice: &str,
        kind: Kind,
        body: &[u8],
        client: &str,
    ) -> Result<(), String> {
        let at = now();
        self.connection
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
                    at as i64
                ],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot store the proposal", error))
    }

    /// The proposal `id`.
    pub fn get(&self, id: &str) -> Result<Option<Entry>, String> {
        self.connection
            .query_row(
                &format!("SELECT {COLUMNS} FROM proposals WHERE id = ?1"),
                params![id],
                row,
            )
            .optional()
            .map_err(|error| failed("cannot read a proposal", error))
    }

    /// The oldest proposal of `repository` that is not final: the one its worker goes on
    /// with (one at a time, in the order they were queued).
    pub fn next_open(&self, repository: &str) -> Result<Option<Entry>, String> {
        self.connection
            .query_row(
                &format!(
                    "SELECT {COLUMNS} FROM proposals WHERE repository = ?1 AND state IN \
                     ('queued', 'sealing', 'collecting', 'landing') ORDER BY seq LIMIT 1"
                ),
                params![repository],
                row,
            )
            .optional()
            .map_err(|error| failed("cannot read the queue", error))
    }

    /// Every proposal, newest first, at most `limit`.
    pub fn list(&self, limit: usize) -> Result<Vec<Entry>, String> {
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
    pub fn counts(&self) -> Result<Vec<(String, u64)>, String> {
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
    pub fn verdicts(&self) -> Result<Vec<(String, u64)>, String> {
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
    pub fn set_state(&self, id: &str, state: State) -> Result<(), String> {
        self.connection
            .execute(
                "UPDATE proposals SET state = ?2, updated_at = ?3 WHERE id = ?1",
                params![id, state.as_str(), now() as i64],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record a state", error))
    }

    /// Records the sealed Candidate and moves `id` to `collecting`, in one transaction.
    pub fn sealed(
        &self,
        id: &str,
        frozen_slice: &str,
        candidate: &str,
        commit: &str,
    ) -> Result<(), String> {
        self.connection
            .execute(
                "UPDATE proposals SET state = ?2, frozen_slice = ?3, candidate = ?4, \
                 commit_id = ?5, updated_at = ?6 WHERE id = ?1",
                params![
                    id,
                    State::Collecting.as_str(),
                    frozen_slice,
                    candidate,
                    commit,
                    now() as i64
                ],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record the Candidate", error))
    }

    /// Records how `id` ended, in one transaction.
    pub fn finish(&self, id: &str, end: &End) -> Result<(), String> {
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

/// How a proposal ended.
#[derive(Clone, Debug)]
pub struct End {
    /// Its final state.
    pub state: State,
    /// The Verdict, when one was issued: `{"outcome", "digest"}`.
    pub verdict: Option<serde_json::Value>,
    /// Why it ended so.
    pub reasons: Vec<String>,
    /// The error that ended it: `{"code", "message"}`.
    pub error: Option<serde_json::Value>,
}

/// An entry from a row of [`COLUMNS`].
fn row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Entry> {
    let json = |text: Option<String>| text.and_then(|text| serde_json::from_str(&text).ok());
    let kind: String = row.get(3)?;
    let state: String = row.get(6)?;
    let reasons: String = row.get(11)?;
    Ok(Entry {
        id: row.get(0)?,
        repository: row.get(1)?,
        slice: row.get(2)?,
        kind: if kind == "diff" {
            Kind::Diff
        } else {
            Kind::Proposal
        },
        body: row.get(4)?,
        client: row.get(5)?,
        // A state this build does not know is read as the start, never as final: the
        // worker takes it up again and the at-most-once intents keep that safe.
        state: State::parse(&state).unwrap_or(State::Queued),
        frozen_slice: row.get(7)?,
        candidate: row.get(8)?,
        verdict: json(row.get(9)?),
        commit: row.get(10)?,
        reasons: serde_json::from_str(&reasons).unwrap_or_default(),
        error: json(row.get(12)?),
        queued_at: row.get::<_, i64>(13)? as u64,
        updated_at: row.get::<_, i64>(14)? as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposal_goes_through_its_states_and_survives_a_reopen() {
        let dir = tempfile_dir();
        let queue = Queue::open(&dir).unwrap();
        queue
            .insert("a", "te", "s", Kind::Diff, b"diff", "agent")
            .unwrap();
        queue
            .insert("b", "te", "s", Kind::Proposal, b"{}", "agent")
            .unwrap();
        assert_eq!(queue.next_open("te").unwrap().unwrap().id, "a");
        queue.set_state("a", State::Sealing).unwrap();
        queue.sealed("a", "/s", "sha256:c", "m").unwrap();
        drop(queue);
        let queue = Queue::open(&dir).unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!(a.state, State::Collecting);
        assert_eq!(a.candidate.as_deref(), Some("sha256:c"));
        queue
            .finish(
                "a",
                &End {
                    state: State::Failed,
                    verdict: Some(serde_json::json!({"outcome": "failed"})),
                    reasons: vec!["check x missed".into()],
                    error: None,
                },
            )
            .unwrap();
        assert_eq!(queue.next_open("te").unwrap().unwrap().id, "b");
        assert_eq!(queue.verdicts().unwrap(), vec![("failed".into(), 1)]);
        assert!(queue.next_open("other").unwrap().is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sf-serve-queue-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
