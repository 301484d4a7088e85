//! The durable queue: one SQLite database in `[serve] state`. A proposal is committed here
//! before its `202` is answered, and every change of state is committed before the step it
//! starts, so that a server killed at any moment finds each proposal where it was.
//!
//! A proposal may be sealed on more than one base: on the one ahead of it, and, when that one
//! may yet fail, on what that one stands on. Each sealing is a row of its own (`sealings`,
//! numbered per proposal; the number is its landing's action occurrence), with its
//! collection's attempt and what it showed. The proposal *stands on* one of them at a time,
//! the one on the base its place in the queue gives it; its row mirrors that sealing, and a
//! collection that ends writes its sealing and, while the proposal stands on it, the mirror.

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
    /// How many times it was sealed (1 at first; each reset adds one): its landing's action
    /// occurrence.
    pub generation: u64,
    /// The commit its Candidate was sealed on: the target's tip, or the commit of the
    /// proposal ahead of it in the queue.
    pub base: Option<String>,
    /// The attempt its collection of this generation stored, once that ended.
    pub attempt: Option<u64>,
    /// What that collection showed, once it ended: `{"outcome", "digest"}` of its Verdict, or
    /// `{"error": {"code", "message"}}` when it started nothing. Provisional: the landing
    /// judges the attempt again.
    pub trial: Option<serde_json::Value>,
}

/// A handle on the queue's database (one per thread: SQLite serialises the writers).
pub struct Queue {
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

/// The states of a proposal still on its way.
const OPEN: &str = "('queued', 'sealing', 'collecting', 'landing')";

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

    /// Stores a new proposal as `queued` unless `client` has `limit` proposals that are not
    /// final already (`Ok(false)`, nothing stored); the count and the insert are one
    /// transaction, so concurrent requests cannot pass the limit together.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_within(
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
    pub fn open_of(&self, repository: &str) -> Result<Vec<Entry>, String> {
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

    /// The oldest proposal of `repository` that is not final.
    pub fn next_open(&self, repository: &str) -> Result<Option<Entry>, String> {
        Ok(self.open_of(repository)?.into_iter().next())
    }

    /// How long each final proposal took from its request to its end, in seconds.
    pub fn times_in_queue(&self) -> Result<Vec<u64>, String> {
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
    pub fn depths(&self) -> Result<Vec<(String, u64)>, String> {
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

    /// The sealings of the open proposals of `repository`.
    pub fn sealings_of(&self, repository: &str) -> Result<Vec<SealingRow>, String> {
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
    pub fn sealings_for(&self, id: &str) -> Result<Vec<SealingRow>, String> {
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
    pub fn add_sealing(
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
        let (ok, refusal) = match sealed {
            Ok(sealing) => (Some(sealing), None),
            Err(refusal) => (None, Some(refusal.to_string())),
        };
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
        Ok(SealingRow {
            proposal: id.to_owned(),
            number: number as u64,
            base: base.to_owned(),
            frozen_slice: ok.map(|sealing| sealing.frozen_slice.to_owned()),
            candidate: ok.map(|sealing| sealing.candidate.to_owned()),
            commit: ok.map(|sealing| sealing.commit.to_owned()),
            attempt: None,
            trial: None,
            refusal: sealed.err().cloned(),
        })
    }

    /// Makes `id` stand on `sealing`: its row mirrors it, as the sealings table holds it now
    /// (a collection that ended since it was read is taken along), and it is `collecting`.
    /// Never for a proposal whose landing started (it is landed again as it is) or that ended.
    pub fn stand_on(&self, id: &str, sealing: &SealingRow) -> Result<(), String> {
        self.connection
            .execute(
                "UPDATE proposals SET state = 'collecting', generation = s.number, \
                 base = s.base, frozen_slice = s.frozen_slice, candidate = s.candidate, \
                 commit_id = s.commit_id, attempt = s.attempt, trial = s.trial, updated_at = ?3 \
                 FROM sealings s WHERE s.proposal = proposals.id AND s.number = ?2 \
                 AND proposals.id = ?1 AND proposals.state IN ('queued', 'sealing', 'collecting')",
                params![id, sealing.number as i64, now() as i64],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record where a proposal stands", error))
    }

    /// Makes `id` stand on nothing (`sealing`): the commit it stood on is no longer where its
    /// place in the queue is. Never for a proposal whose landing started, or that ended.
    pub fn leave(&self, id: &str) -> Result<(), String> {
        self.connection
            .execute(
                "UPDATE proposals SET state = 'sealing', base = NULL, frozen_slice = NULL, \
                 candidate = NULL, commit_id = NULL, attempt = NULL, trial = NULL, \
                 updated_at = ?2 WHERE id = ?1 AND state IN ('queued', 'sealing', 'collecting')",
                params![id, now() as i64],
            )
            .map(|_| ())
            .map_err(|error| failed("cannot record where a proposal stands", error))
    }

    /// Records what the collection of sealing `number` of `id` stored and showed, and, while
    /// the proposal stands on that sealing, in its row too. One transaction.
    pub fn collected(
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

/// What a proposal was sealed as.
pub struct Sealing<'a> {
    /// Its private frozen Slice directory.
    pub frozen_slice: &'a str,
    /// The Candidate's digest.
    pub candidate: &'a str,
    /// The Candidate's commit M.
    pub commit: &'a str,
}

/// One sealing of a proposal on one base, as the queue holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct SealingRow {
    /// The proposal's id.
    pub proposal: String,
    /// Its number among the proposal's sealings: its landing's action occurrence.
    pub number: u64,
    /// The commit it was sealed on.
    pub base: String,
    /// Its private frozen Slice directory (`None` when refused).
    pub frozen_slice: Option<String>,
    /// The Candidate's digest (`None` when refused).
    pub candidate: Option<String>,
    /// The Candidate's commit M (`None` when refused).
    pub commit: Option<String>,
    /// The attempt its collection stored, once that ended.
    pub attempt: Option<u64>,
    /// What that collection showed, once it ended.
    pub trial: Option<serde_json::Value>,
    /// Why the proposal could not be sealed on this base: the use case's `{"code",
    /// "message"}`.
    pub refusal: Option<serde_json::Value>,
}

/// A sealing from a row of `proposal, number, base, frozen_slice, candidate, commit_id,
/// attempt, trial, refusal`.
fn sealing_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SealingRow> {
    let json = |text: Option<String>| text.and_then(|text| serde_json::from_str(&text).ok());
    Ok(SealingRow {
        proposal: row.get(0)?,
        number: row.get::<_, i64>(1)?.max(1) as u64,
        base: row.get(2)?,
        frozen_slice: row.get(3)?,
        candidate: row.get(4)?,
        commit: row.get(5)?,
        attempt: row
            .get::<_, Option<i64>>(6)?
            .map(|attempt| attempt.max(0) as u64),
        trial: json(row.get(7)?),
        refusal: json(row.get(8)?),
    })
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
        generation: row.get::<_, i64>(15)?.max(1) as u64,
        base: row.get(16)?,
        attempt: row
            .get::<_, Option<i64>>(17)?
            .map(|attempt| attempt.max(0) as u64),
        trial: json(row.get(18)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealing(candidate: &str) -> Sealing<'_> {
        Sealing {
            frozen_slice: "/s",
            candidate,
            commit: "m",
        }
    }

    #[test]
    fn a_proposal_goes_through_its_states_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut queue = Queue::open(dir.path()).unwrap();
        for id in ["a", "b"] {
            assert!(
                queue
                    .insert_within(id, "te", "s", Kind::Diff, b"diff", "agent", 10)
                    .unwrap()
            );
        }
        assert_eq!(queue.next_open("te").unwrap().unwrap().id, "a");
        queue.set_state("a", State::Sealing).unwrap();
        let sealed = queue
            .add_sealing("a", "t", Ok(&sealing("sha256:c")))
            .unwrap();
        queue.stand_on("a", &sealed).unwrap();
        drop(queue);
        let queue = Queue::open(dir.path()).unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!(a.state, State::Collecting);
        assert_eq!(a.candidate.as_deref(), Some("sha256:c"));
        assert_eq!((a.generation, a.base.as_deref()), (1, Some("t")));
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
        assert_eq!(queue.depths().unwrap(), vec![("te".into(), 1)]);
        assert_eq!(queue.times_in_queue().unwrap().len(), 1);
        assert!(queue.next_open("other").unwrap().is_none());
        assert!(
            queue.sealings_of("te").unwrap().is_empty(),
            "only open ones"
        );
    }

    #[test]
    fn each_base_is_a_sealing_of_its_own_and_the_mirror_follows_the_one_stood_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut queue = Queue::open(dir.path()).unwrap();
        queue
            .insert_within("a", "te", "s", Kind::Diff, b"d", "agent", 10)
            .unwrap();
        let on_ahead = queue
            .add_sealing("a", "ahead", Ok(&sealing("sha256:c1")))
            .unwrap();
        let refusal = serde_json::json!({"code": "conflict", "message": "does not apply"});
        let refused = queue.add_sealing("a", "other", Err(&refusal)).unwrap();
        let on_target = queue
            .add_sealing("a", "t", Ok(&sealing("sha256:c2")))
            .unwrap();
        assert_eq!(
            (on_ahead.number, refused.number, on_target.number),
            (1, 2, 3)
        );
        assert_eq!(refused.refusal, Some(refusal));
        assert_eq!(queue.sealings_for("a").unwrap()[1], refused);
        assert!(
            queue.add_sealing("a", "t", Ok(&sealing("x"))).is_err(),
            "one per base"
        );
        queue.stand_on("a", &on_ahead).unwrap();
        // The sealing on the target is collected while the proposal stands on the other.
        let trial = serde_json::json!({"outcome": "verified"});
        queue.collected("a", 3, Some(7), &trial).unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!((a.generation, a.attempt, a.trial), (1, None, None));
        let rows = queue.sealings_of("te").unwrap();
        let row = rows.iter().find(|row| row.number == 3).unwrap().clone();
        assert_eq!(
            (row.attempt, row.trial.clone()),
            (Some(7), Some(trial.clone()))
        );
        // Standing on it takes its collection along.
        queue.stand_on("a", &row).unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!((a.generation, a.base.as_deref()), (3, Some("t")));
        assert_eq!((a.attempt, a.trial), (Some(7), Some(trial)));
        queue.leave("a").unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!(
            (a.state, a.candidate, a.trial),
            (State::Sealing, None, None)
        );
        // A collection that ended after the sealing was read is taken along all the same.
        let failed = serde_json::json!({"outcome": "failed"});
        queue.collected("a", 1, Some(5), &failed).unwrap();
        queue.stand_on("a", &on_ahead).unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!(
            (a.generation, a.attempt, a.trial),
            (1, Some(5), Some(failed))
        );
        queue.stand_on("a", &row).unwrap();
        // A landing that started never stands elsewhere.
        queue.set_state("a", State::Landing).unwrap();
        queue.stand_on("a", &on_ahead).unwrap();
        queue.leave("a").unwrap();
        let a = queue.get("a").unwrap().unwrap();
        assert_eq!((a.state, a.generation), (State::Landing, 3));
    }

    #[test]
    fn a_client_at_its_limit_queues_nothing_more_until_one_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut queue = Queue::open(dir.path()).unwrap();
        let put = |queue: &mut Queue, id: &str, client: &str| {
            queue
                .insert_within(id, "te", "s", Kind::Diff, b"d", client, 2)
                .unwrap()
        };
        assert!(put(&mut queue, "a", "one"));
        assert!(put(&mut queue, "b", "one"));
        assert!(!put(&mut queue, "c", "one"));
        assert!(queue.get("c").unwrap().is_none());
        assert!(put(&mut queue, "d", "two"));
        let end = End {
            state: State::Refused,
            verdict: None,
            reasons: Vec::new(),
            error: None,
        };
        queue.finish("a", &end).unwrap();
        assert!(put(&mut queue, "c", "one"));
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
        let mut queue = Queue::open(dir.path()).unwrap();
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
