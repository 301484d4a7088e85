//! The durable queue. A proposal is committed here before its `202` is answered, and every
//! change of state is committed before the step it starts, so that a server killed at any
//! moment finds each proposal where it was.
//!
//! A proposal may be sealed on more than one base: on the one ahead of it, and, when that one
//! may yet fail, on what that one stands on. Each sealing is a row of its own (`sealings`,
//! numbered per proposal; the number is its landing's action occurrence), with its
//! collection's attempt and what it showed. The proposal *stands on* one of them at a time,
//! the one on the base its place in the queue gives it; its row mirrors that sealing, and a
//! collection that ends writes its sealing and, while the proposal stands on it, the mirror.
//!
//! Where it is stored is a [`QueueStore`] (as an object store is behind its trait): SQLite in
//! `[serve] state` ([`sqlite`]), or PostgreSQL with the postgres evidence store ([`postgres`]).
//! Handles come from one [`Opener`]: the handlers share one (behind a mutex), and each worker
//! and each job opens its own.

pub mod postgres;
pub mod sqlite;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sf_host::plugin::config::Config;

use crate::state::State;

pub use self::postgres::PostgresQueue;
pub use self::sqlite::{DATABASE, SqliteQueue};

/// What a proposal is made of: sf's proposal format or a Git diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A proposal document (`{"edits": …}`).
    Proposal,
    /// A Git diff of the Slice's base.
    Diff,
}

impl Kind {
    /// Its word in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Proposal => "proposal",
            Self::Diff => "diff",
        }
    }

    /// The kind its word names (a word this build does not know is a proposal document: it
    /// is refused when parsed, never applied as a diff).
    pub fn parse(word: &str) -> Self {
        if word == "diff" {
            Self::Diff
        } else {
            Self::Proposal
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

impl SealingRow {
    /// The row [`QueueStore::add_sealing`] stores: numbered `number`, nothing collected yet.
    fn new(
        id: &str,
        number: u64,
        base: &str,
        sealed: Result<&Sealing<'_>, &serde_json::Value>,
    ) -> Self {
        let ok = sealed.ok();
        Self {
            proposal: id.to_owned(),
            number,
            base: base.to_owned(),
            frozen_slice: ok.map(|sealing| sealing.frozen_slice.to_owned()),
            candidate: ok.map(|sealing| sealing.candidate.to_owned()),
            commit: ok.map(|sealing| sealing.commit.to_owned()),
            attempt: None,
            trial: None,
            refusal: sealed.err().cloned(),
        }
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

/// Where the queue is stored. Every method commits before it returns (a write is durable when
/// it answers `Ok`); an error is the message the caller logs or answers (`500 unavailable`),
/// and leaves nothing half written. A handle is used by one thread at a time.
pub trait QueueStore: Send {
    /// The proposal `id`.
    fn get(&mut self, id: &str) -> Result<Option<Entry>, String>;

    /// Stores a new proposal as `queued` unless `client` has `limit` proposals that are not
    /// final already (`Ok(false)`, nothing stored); the count and the insert are one
    /// transaction that concurrent requests cannot pass together.
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
    ) -> Result<bool, String>;

    /// The proposals of `repository` that are not final, oldest first: its queue, in the
    /// order they land.
    fn open_of(&mut self, repository: &str) -> Result<Vec<Entry>, String>;

    /// The oldest proposal of `repository` that is not final.
    fn next_open(&mut self, repository: &str) -> Result<Option<Entry>, String> {
        Ok(self.open_of(repository)?.into_iter().next())
    }

    /// How long each final proposal took from its request to its end, in seconds.
    fn times_in_queue(&mut self) -> Result<Vec<u64>, String>;

    /// How many proposals of each repository are not final.
    fn depths(&mut self) -> Result<Vec<(String, u64)>, String>;

    /// Every proposal, newest first, at most `limit`.
    fn list(&mut self, limit: usize) -> Result<Vec<Entry>, String>;

    /// How many proposals are in each state.
    fn counts(&mut self) -> Result<Vec<(String, u64)>, String>;

    /// How many Verdicts of each outcome the finished landings had.
    fn verdicts(&mut self) -> Result<Vec<(String, u64)>, String>;

    /// Moves `id` to `state`.
    fn set_state(&mut self, id: &str, state: State) -> Result<(), String>;

    /// The sealings of the open proposals of `repository`, by number.
    fn sealings_of(&mut self, repository: &str) -> Result<Vec<SealingRow>, String>;

    /// The sealings of proposal `id`, by number.
    fn sealings_for(&mut self, id: &str) -> Result<Vec<SealingRow>, String>;

    /// Records that `id` was sealed on `base` as `sealed` (or refused there: `Err`), under
    /// the next number of the proposal (after its numbers so far, and after the generation
    /// it stands on when it has a Candidate: a number is an action occurrence, never reused);
    /// answers the sealing. One transaction; a second sealing on one base is an error.
    fn add_sealing(
        &mut self,
        id: &str,
        base: &str,
        sealed: Result<&Sealing<'_>, &serde_json::Value>,
    ) -> Result<SealingRow, String>;

    /// Makes `id` stand on `sealing`: its row mirrors it, as the sealings table holds it now
    /// (a collection that ended since it was read is taken along), and it is `collecting`.
    /// Never for a proposal whose landing started (it is landed again as it is) or that ended.
    fn stand_on(&mut self, id: &str, sealing: &SealingRow) -> Result<(), String>;

    /// Makes `id` stand on nothing (`sealing`): the commit it stood on is no longer where its
    /// place in the queue is. Never for a proposal whose landing started, or that ended.
    fn leave(&mut self, id: &str) -> Result<(), String>;

    /// Records what the collection of sealing `number` of `id` stored and showed, and, while
    /// the proposal stands on that sealing, in its row too. One transaction.
    fn collected(
        &mut self,
        id: &str,
        number: u64,
        attempt: Option<u64>,
        trial: &serde_json::Value,
    ) -> Result<(), String>;

    /// Records how `id` ended.
    fn finish(&mut self, id: &str, end: &End) -> Result<(), String>;
}

/// How every thread opens its handle on the queue: the store the configuration chooses.
#[derive(Clone)]
pub enum Opener {
    /// `queue.sqlite` in this state directory.
    Sqlite(PathBuf),
    /// The database of `[evidence_store] type = "postgres"`.
    Postgres(Arc<sf_postgres_config::Connector>),
}

impl Opener {
    /// The queue `config` chooses: PostgreSQL with `[evidence_store] type = "postgres"` (its
    /// connection settings), else SQLite in `state`. Only the settings are read here.
    pub fn new(config: &Config, state: &Path) -> Result<Self, String> {
        let section = config.evidence_store_section();
        if section.tag() != "postgres" {
            return Ok(Self::Sqlite(state.to_owned()));
        }
        let fields = serde_json::to_value(section.fields()).map_err(|error| {
            format!("[evidence_store] type = \"postgres\": cannot be read ({error})")
        })?;
        let settings: sf_postgres_config::PostgresConfig =
            serde_json::from_value(fields).map_err(|error| {
                format!(
                    "[evidence_store] type = \"postgres\": {error}; sf serve's queue connects \
                     with these settings (see docs/evidence-store.md)"
                )
            })?;
        let connector = settings.connector().map_err(|error| error.to_string())?;
        Ok(Self::Postgres(Arc::new(connector)))
    }

    /// A new handle: the SQLite file opened (created), or a PostgreSQL session connected and
    /// its tables checked.
    pub fn open(&self) -> Result<Box<dyn QueueStore>, String> {
        Ok(match self {
            Self::Sqlite(state) => Box::new(SqliteQueue::open(state)?),
            Self::Postgres(connector) => Box::new(PostgresQueue::connect(Arc::clone(connector))?),
        })
    }
}

/// The states of a proposal still on its way, as SQL.
const OPEN: &str = "('queued', 'sealing', 'collecting', 'landing')";

/// The states from which a proposal may stand on another sealing, as SQL.
const UNLANDED: &str = "('queued', 'sealing', 'collecting')";

/// Now, in seconds since the epoch.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Stored JSON text, read back (text that is not JSON reads as nothing: it was never written
/// by sf).
fn json(text: Option<String>) -> Option<serde_json::Value> {
    text.and_then(|text| serde_json::from_str(&text).ok())
}

/// One row as a database hands it over, column by column: what lets both backends read an
/// [`Entry`] and a [`SealingRow`] by the same rules.
trait Columns {
    /// The database's error.
    type Error;
    /// The text (or JSON kept as text) in column `at`.
    fn text(&self, at: usize) -> Result<Option<String>, Self::Error>;
    /// The integer in column `at`.
    fn int(&self, at: usize) -> Result<Option<i64>, Self::Error>;
    /// The bytes in column `at`.
    fn bytes(&self, at: usize) -> Result<Vec<u8>, Self::Error>;
}

/// An [`Entry`] from a row of its columns, in the order `id, repository, slice, kind, body,
/// client, state, frozen_slice, candidate, verdict, commit, reasons, error, queued_at,
/// updated_at, generation, base, attempt, trial`.
fn read_entry<C: Columns>(row: &C) -> Result<Entry, C::Error> {
    let text = |at| row.text(at).map(Option::unwrap_or_default);
    let count = |at, least: i64| row.int(at).map(|n| n.unwrap_or(least).max(least) as u64);
    Ok(Entry {
        id: text(0)?,
        repository: text(1)?,
        slice: text(2)?,
        kind: Kind::parse(&text(3)?),
        body: row.bytes(4)?,
        client: text(5)?,
        // A state this build does not know is read as the start, never as final: the
        // worker takes it up again and the at-most-once intents keep that safe.
        state: State::parse(&text(6)?).unwrap_or(State::Queued),
        frozen_slice: row.text(7)?,
        candidate: row.text(8)?,
        verdict: json(row.text(9)?),
        commit: row.text(10)?,
        reasons: serde_json::from_str(&text(11)?).unwrap_or_default(),
        error: json(row.text(12)?),
        queued_at: count(13, 0)?,
        updated_at: count(14, 0)?,
        generation: count(15, 1)?,
        base: row.text(16)?,
        attempt: row.int(17)?.map(|attempt| attempt.max(0) as u64),
        trial: json(row.text(18)?),
    })
}

/// A [`SealingRow`] from a row of `proposal, number, base, frozen_slice, candidate, commit,
/// attempt, trial, refusal`.
fn read_sealing<C: Columns>(row: &C) -> Result<SealingRow, C::Error> {
    Ok(SealingRow {
        proposal: row.text(0)?.unwrap_or_default(),
        number: row.int(1)?.unwrap_or(1).max(1) as u64,
        base: row.text(2)?.unwrap_or_default(),
        frozen_slice: row.text(3)?,
        candidate: row.text(4)?,
        commit: row.text(5)?,
        attempt: row.int(6)?.map(|attempt| attempt.max(0) as u64),
        trial: json(row.text(7)?),
        refusal: json(row.text(8)?),
    })
}

#[cfg(test)]
pub(crate) mod conformance;
