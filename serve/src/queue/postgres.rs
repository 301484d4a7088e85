//! The queue in PostgreSQL, with `[evidence_store] type = "postgres"`: the tables
//! `sf_serve_proposals` and `sf_serve_sealings` that `serve/schema.sql` makes (an
//! administrator runs it once; sf creates nothing), reached with the evidence store's own
//! connection settings (sf-postgres-config's [`Connector`], as the evidence store's).
//!
//! It keeps SQLite's promises: every write is committed with `synchronous_commit = on` before
//! it answers; a client's count and its insert are one transaction serialised per client by
//! an advisory lock; a sealing is numbered while its proposal's row is locked; standing on a
//! sealing copies it in SQL (`UPDATE … FROM`) under the same state guards. A lost connection
//! is an error (the caller retries) and the next call connects again.

use std::sync::Arc;

use postgres::{Client, GenericClient, Row};
use sf_postgres_config::Connector;
use sf_postgres_config::describe;

use super::{
    Columns, End, Entry, Kind, OPEN, QueueStore, Sealing, SealingRow, UNLANDED, now, read_entry,
    read_sealing,
};
use crate::state::State;

/// The columns of an [`Entry`], in the order [`entry`] reads them.
const COLUMNS: &str = "id, repository, slice, kind, body, client, state, frozen_slice, \
                       candidate, verdict, commit_id, reasons, error, queued_at, updated_at, \
                       generation, base, attempt, trial";

/// The columns of a [`SealingRow`], in the order [`sealing`] reads them.
const SEALING_COLUMNS: &str = "s.proposal, s.number, s.base, s.frozen_slice, s.candidate, \
                               s.commit_id, s.attempt, s.trial, s.refusal";

/// The first key of the advisory locks that serialise one client's inserts: apart from any
/// other use of the two-key advisory locks in the database (the evidence store's fence holds
/// one-key locks, a space of their own).
const CLIENT_LOCKS: i32 = 0x7366_7376;

/// Each table the queue uses, with its columns and their types (`format_type`'s names).
const TABLES: [(&str, &[(&str, &str)]); 2] = [
    (
        "sf_serve_proposals",
        &[
            ("seq", "bigint"),
            ("id", "text"),
            ("repository", "text"),
            ("slice", "text"),
            ("kind", "text"),
            ("body", "bytea"),
            ("client", "text"),
            ("state", "text"),
            ("frozen_slice", "text"),
            ("candidate", "text"),
            ("verdict", "text"),
            ("commit_id", "text"),
            ("reasons", "text"),
            ("error", "text"),
            ("queued_at", "bigint"),
            ("updated_at", "bigint"),
            ("generation", "bigint"),
            ("base", "text"),
            ("attempt", "bigint"),
            ("trial", "text"),
        ],
    ),
    (
        "sf_serve_sealings",
        &[
            ("proposal", "text"),
            ("number", "bigint"),
            ("base", "text"),
            ("frozen_slice", "text"),
            ("candidate", "text"),
            ("commit_id", "text"),
            ("attempt", "bigint"),
            ("trial", "text"),
            ("refusal", "text"),
        ],
    ),
];

/// The privileges the role sf connects as needs on each table (never DELETE: nothing the
/// queue stores is lost).
const PRIVILEGES: [&str; 3] = ["SELECT", "INSERT", "UPDATE"];

/// A handle on the queue's PostgreSQL tables: one session, made again after it was lost.
pub struct PostgresQueue {
    connector: Arc<Connector>,
    client: Option<Client>,
}

impl PostgresQueue {
    /// Connects and checks the tables.
    pub fn connect(connector: Arc<Connector>) -> Result<Self, String> {
        let client = open(&connector)?;
        Ok(Self {
            connector,
            client: Some(client),
        })
    }

    /// Runs `work` on the session (connecting again when the last one was lost). A lost
    /// session is dropped, so that the next call connects again; an error of the database's
    /// own (a constraint) keeps it.
    fn with<T>(
        &mut self,
        what: &str,
        work: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, String> {
        let client = match &mut self.client {
            Some(client) if !client.is_closed() => client,
            slot => slot.insert(open(&self.connector)?),
        };
        let outcome = work(client);
        let lost = client.is_closed()
            || outcome
                .as_ref()
                .is_err_and(|error| error.as_db_error().is_none());
        if lost {
            self.client = None;
        }
        outcome.map_err(|error| format!("the queue's database: {what}: {}", describe(&error)))
    }
}

/// A new session: durable commits, a bound on any one statement, and the tables checked.
fn open(connector: &Connector) -> Result<Client, String> {
    let mut client = connector.connect().map_err(|error| {
        format!(
            "the queue's database: connecting to PostgreSQL ([evidence_store]): {}",
            describe(&error)
        )
    })?;
    // synchronous_commit on whatever the role's default: a committed state survives the
    // server's crash. The statement timeout bounds how long a handler or a worker waits on a
    // server that stopped answering (keepalives find one that is gone).
    client
        .batch_execute("SET synchronous_commit = on; SET statement_timeout = '60s'")
        .map_err(|error| {
            format!(
                "the queue's database: setting up the session: {}",
                describe(&error)
            )
        })?;
    check(&mut client)?;
    Ok(client)
}

/// Checks that both tables exist with their columns, and that the role may read, insert and
/// update them; the error names everything missing and the fix.
fn check(client: &mut Client) -> Result<(), String> {
    let unreadable = |error: postgres::Error| {
        format!(
            "the queue's database: reading its catalog: {}",
            describe(&error)
        )
    };
    let mut missing = Vec::new();
    for (table, columns) in TABLES {
        let found = client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
                 WHERE a.attrelid = to_regclass($1::text) AND a.attnum > 0 AND NOT a.attisdropped",
                &[&table],
            )
            .map_err(unreadable)?;
        if found.is_empty() {
            missing.push(format!("the table {table}"));
            continue;
        }
        let found: Vec<(String, String)> =
            found.iter().map(|row| (row.get(0), row.get(1))).collect();
        for (column, kind) in columns {
            if !found.iter().any(|(name, of)| name == column && of == kind) {
                missing.push(format!("the column {table}.{column} ({kind})"));
            }
        }
        for privilege in PRIVILEGES {
            let row = client
                .query_one(
                    "SELECT has_table_privilege($1::text, $2::text)",
                    &[&table, &privilege],
                )
                .map_err(unreadable)?;
            if !row.get::<_, bool>(0) {
                missing.push(format!(
                    "{privilege} on {table} for the role sf connects as"
                ));
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let row = client
        .query_one("SELECT current_database()::text, current_user::text", &[])
        .map_err(unreadable)?;
    let (database, user): (String, String) = (row.get(0), row.get(1));
    Err(format!(
        "the queue's database: PostgreSQL database {database:?} lacks {}; run serve/schema.sql \
         there once as the tables' owner (`psql -d {database} -v sf_role={user} -f \
         serve/schema.sql`, docs/serve.md)",
        missing.join(", ")
    ))
}

impl Columns for Row {
    type Error = postgres::Error;
    fn text(&self, at: usize) -> Result<Option<String>, postgres::Error> {
        self.try_get(at)
    }
    fn int(&self, at: usize) -> Result<Option<i64>, postgres::Error> {
        self.try_get(at)
    }
    fn bytes(&self, at: usize) -> Result<Vec<u8>, postgres::Error> {
        self.try_get(at)
    }
}

/// Reads an [`Entry`] from a row of [`COLUMNS`].
fn entry(row: &Row) -> Result<Entry, postgres::Error> {
    read_entry(row)
}

/// Reads a [`SealingRow`] from a row of [`SEALING_COLUMNS`].
fn sealing(row: &Row) -> Result<SealingRow, postgres::Error> {
    read_sealing(row)
}

/// The rows of `query`, each read by `read`.
fn all<T>(
    client: &mut impl GenericClient,
    query: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
    read: fn(&Row) -> Result<T, postgres::Error>,
) -> Result<Vec<T>, postgres::Error> {
    client.query(query, params)?.iter().map(read).collect()
}

/// `(word, count)` pairs from a row of text and bigint.
fn counted(row: &Row) -> Result<(String, u64), postgres::Error> {
    let word: Option<String> = row.try_get(0)?;
    Ok((
        word.unwrap_or_default(),
        row.try_get::<_, i64>(1)?.max(0) as u64,
    ))
}

impl QueueStore for PostgresQueue {
    fn get(&mut self, id: &str) -> Result<Option<Entry>, String> {
        self.with("cannot read a proposal", |client| {
            let query = format!("SELECT {COLUMNS} FROM sf_serve_proposals WHERE id = $1");
            client
                .query_opt(&query, &[&id])?
                .as_ref()
                .map(entry)
                .transpose()
        })
    }

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
        let at = now() as i64;
        self.with("cannot store the proposal", |session| {
            let mut transaction = session.transaction()?;
            // One client's inserts, one at a time: the count below sees every insert of the
            // client committed before it (a new snapshot per statement), so two requests
            // cannot both pass the limit. Released at the commit or the rollback.
            transaction.execute(
                "SELECT pg_advisory_xact_lock($1, hashtext($2::text))",
                &[&CLIENT_LOCKS, &client],
            )?;
            let open: i64 = transaction
                .query_one(
                    &format!(
                        "SELECT COUNT(*) FROM sf_serve_proposals WHERE client = $1 AND state IN \
                         {OPEN}"
                    ),
                    &[&client],
                )?
                .try_get(0)?;
            if open.max(0) as u64 >= limit as u64 {
                return Ok(false);
            }
            transaction.execute(
                "INSERT INTO sf_serve_proposals (id, repository, slice, kind, body, client, \
                 state, queued_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
                &[
                    &id,
                    &repository,
                    &slice,
                    &kind.as_str(),
                    &body,
                    &client,
                    &State::Queued.as_str(),
                    &at,
                ],
            )?;
            transaction.commit()?;
            Ok(true)
        })
    }

    fn open_of(&mut self, repository: &str) -> Result<Vec<Entry>, String> {
        self.with("cannot read the queue", |client| {
            let query = format!(
                "SELECT {COLUMNS} FROM sf_serve_proposals WHERE repository = $1 AND state IN \
                 {OPEN} ORDER BY seq"
            );
            all(client, &query, &[&repository], entry)
        })
    }

    fn times_in_queue(&mut self) -> Result<Vec<u64>, String> {
        self.with("cannot read the queue", |client| {
            let query = format!(
                "SELECT updated_at - queued_at FROM sf_serve_proposals WHERE state NOT IN {OPEN}"
            );
            all(client, &query, &[], |row| {
                Ok(row.try_get::<_, i64>(0)?.max(0) as u64)
            })
        })
    }

    fn depths(&mut self) -> Result<Vec<(String, u64)>, String> {
        self.with("cannot count the queue", |client| {
            let query = format!(
                "SELECT repository, COUNT(*) FROM sf_serve_proposals WHERE state IN {OPEN} \
                 GROUP BY 1 ORDER BY 1"
            );
            all(client, &query, &[], counted)
        })
    }

    fn list(&mut self, limit: usize) -> Result<Vec<Entry>, String> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with("cannot read the queue", |client| {
            let query =
                format!("SELECT {COLUMNS} FROM sf_serve_proposals ORDER BY seq DESC LIMIT $1");
            all(client, &query, &[&limit], entry)
        })
    }

    fn counts(&mut self) -> Result<Vec<(String, u64)>, String> {
        self.with("cannot count the queue", |client| {
            let query = "SELECT state, COUNT(*) FROM sf_serve_proposals GROUP BY 1 ORDER BY 1";
            all(client, query, &[], counted)
        })
    }

    fn verdicts(&mut self) -> Result<Vec<(String, u64)>, String> {
        self.with("cannot count the Verdicts", |client| {
            let query = "SELECT verdict::json ->> 'outcome', COUNT(*) FROM sf_serve_proposals \
                         WHERE verdict IS NOT NULL GROUP BY 1 ORDER BY 1";
            all(client, query, &[], counted)
        })
    }

    fn set_state(&mut self, id: &str, state: State) -> Result<(), String> {
        let at = now() as i64;
        self.with("cannot record a state", |client| {
            client.execute(
                "UPDATE sf_serve_proposals SET state = $2, updated_at = $3 WHERE id = $1",
                &[&id, &state.as_str(), &at],
            )?;
            Ok(())
        })
    }

    fn sealings_of(&mut self, repository: &str) -> Result<Vec<SealingRow>, String> {
        self.with("cannot read the sealings", |client| {
            let query = format!(
                "SELECT {SEALING_COLUMNS} FROM sf_serve_sealings s JOIN sf_serve_proposals p ON \
                 p.id = s.proposal WHERE p.repository = $1 AND p.state IN {OPEN} \
                 ORDER BY s.number, s.proposal"
            );
            all(client, &query, &[&repository], sealing)
        })
    }

    fn sealings_for(&mut self, id: &str) -> Result<Vec<SealingRow>, String> {
        self.with("cannot read the sealings", |client| {
            let query = format!(
                "SELECT {SEALING_COLUMNS} FROM sf_serve_sealings s WHERE s.proposal = $1 \
                 ORDER BY s.number"
            );
            all(client, &query, &[&id], sealing)
        })
    }

    fn add_sealing(
        &mut self,
        id: &str,
        base: &str,
        sealed: Result<&Sealing<'_>, &serde_json::Value>,
    ) -> Result<SealingRow, String> {
        let number = self.with("cannot record a sealing", |client| {
            let mut transaction = client.transaction()?;
            let number = next_number(&mut transaction, id)?;
            let (ok, refusal) = (sealed.ok(), sealed.err().map(ToString::to_string));
            transaction.execute(
                "INSERT INTO sf_serve_sealings (proposal, number, base, frozen_slice, \
                 candidate, commit_id, refusal) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &id,
                    &number,
                    &base,
                    &ok.map(|sealing| sealing.frozen_slice),
                    &ok.map(|sealing| sealing.candidate),
                    &ok.map(|sealing| sealing.commit),
                    &refusal,
                ],
            )?;
            transaction.commit()?;
            Ok(number)
        })?;
        Ok(SealingRow::new(id, number.max(1) as u64, base, sealed))
    }

    fn stand_on(&mut self, id: &str, sealing: &SealingRow) -> Result<(), String> {
        let (number, at) = (sealing.number as i64, now() as i64);
        self.with("cannot record where a proposal stands", |client| {
            client.execute(
                &format!(
                    "UPDATE sf_serve_proposals p SET state = 'collecting', generation = s.number, \
                     base = s.base, frozen_slice = s.frozen_slice, candidate = s.candidate, \
                     commit_id = s.commit_id, attempt = s.attempt, trial = s.trial, \
                     updated_at = $3 FROM sf_serve_sealings s WHERE s.proposal = p.id AND \
                     s.number = $2 AND p.id = $1 AND p.state IN {UNLANDED}"
                ),
                &[&id, &number, &at],
            )?;
            Ok(())
        })
    }

    fn leave(&mut self, id: &str) -> Result<(), String> {
        let at = now() as i64;
        self.with("cannot record where a proposal stands", |client| {
            client.execute(
                &format!(
                    "UPDATE sf_serve_proposals SET state = 'sealing', base = NULL, \
                     frozen_slice = NULL, candidate = NULL, commit_id = NULL, attempt = NULL, \
                     trial = NULL, updated_at = $2 WHERE id = $1 AND state IN {UNLANDED}"
                ),
                &[&id, &at],
            )?;
            Ok(())
        })
    }

    fn collected(
        &mut self,
        id: &str,
        number: u64,
        attempt: Option<u64>,
        trial: &serde_json::Value,
    ) -> Result<(), String> {
        let (number, at) = (number as i64, now() as i64);
        let (attempt, trial) = (attempt.map(|attempt| attempt as i64), trial.to_string());
        self.with("cannot record a collection", |client| {
            let mut transaction = client.transaction()?;
            transaction.execute(
                "UPDATE sf_serve_sealings SET attempt = $3, trial = $4 WHERE proposal = $1 AND \
                 number = $2",
                &[&id, &number, &attempt, &trial],
            )?;
            transaction.execute(
                "UPDATE sf_serve_proposals SET attempt = $3, trial = $4, updated_at = $5 WHERE \
                 id = $1 AND generation = $2 AND state = 'collecting'",
                &[&id, &number, &attempt, &trial, &at],
            )?;
            transaction.commit()
        })
    }

    fn finish(&mut self, id: &str, end: &End) -> Result<(), String> {
        let verdict = end.verdict.as_ref().map(ToString::to_string);
        let reasons = serde_json::Value::from(end.reasons.clone()).to_string();
        let error = end.error.as_ref().map(ToString::to_string);
        let at = now() as i64;
        self.with("cannot record how a proposal ended", |client| {
            client.execute(
                "UPDATE sf_serve_proposals SET state = $2, verdict = $3, reasons = $4, \
                 error = $5, updated_at = $6 WHERE id = $1",
                &[&id, &end.state.as_str(), &verdict, &reasons, &error, &at],
            )?;
            Ok(())
        })
    }
}

/// The next number of proposal `id`'s sealings, its row locked until the transaction ends
/// (so that two sealings of it are numbered one after the other): after the numbers used so
/// far, and after the generation it stands on when it has a Candidate (a number is an action
/// occurrence, never reused).
fn next_number(
    transaction: &mut postgres::Transaction<'_>,
    id: &str,
) -> Result<i64, postgres::Error> {
    let stands_on: i64 = match transaction.query_opt(
        "SELECT generation, candidate IS NOT NULL FROM sf_serve_proposals WHERE id = $1 \
         FOR UPDATE",
        &[&id],
    )? {
        Some(row) if row.try_get::<_, bool>(1)? => row.try_get(0)?,
        _ => 0,
    };
    let used: i64 = transaction
        .query_one(
            "SELECT COALESCE(MAX(number), 0) FROM sf_serve_sealings WHERE proposal = $1",
            &[&id],
        )?
        .try_get(0)?;
    Ok(used.max(stands_on) + 1)
}

#[cfg(test)]
mod tests;
