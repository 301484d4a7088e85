//! [`PostgresEvidenceStore`]: the EvidenceStore contract over one connection, checked when it
//! is made ([`crate::schema::check`]) and made again after it was lost.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use postgres::Client;
use sf_contracts::canonical::Digest;
use sf_contracts::{EvidenceRecord, EvidenceStore, EvidenceStoreError};

use crate::config::{Connector, PostgresConfig};
use crate::schema::{check, describe};

/// PostgreSQL's code for a statement cancelled by `statement_timeout`.
const QUERY_CANCELED: &str = "57014";

/// The evidence store on PostgreSQL.
pub struct PostgresEvidenceStore {
    connector: Connector,
    client: Mutex<Option<Client>>,
}

impl std::fmt::Debug for PostgresEvidenceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client configuration holds the password: never printed.
        f.debug_struct("PostgresEvidenceStore")
            .finish_non_exhaustive()
    }
}

impl PostgresEvidenceStore {
    /// Connects as `config` says and checks the schema (`corrupt` on any difference,
    /// `unavailable` when the server cannot be reached or refuses the role).
    pub fn connect(config: &PostgresConfig) -> Result<Self, EvidenceStoreError> {
        let connector = config
            .connector()
            .map_err(|error| EvidenceStoreError::InvalidInput {
                input: "[evidence_store]".into(),
                rule: error.to_string(),
            })?;
        let store = Self {
            connector,
            client: Mutex::new(None),
        };
        let client = store.open()?;
        *store.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(client);
        Ok(store)
    }

    /// A new connection, its session made durable and its schema checked.
    fn open(&self) -> Result<Client, EvidenceStoreError> {
        let mut client =
            self.connector
                .connect()
                .map_err(|error| EvidenceStoreError::Unavailable {
                    reason: format!("connecting to PostgreSQL: {}", describe(&error)),
                })?;
        client
            .batch_execute("SET synchronous_commit = on")
            .map_err(|error| EvidenceStoreError::Unavailable {
                reason: format!("setting synchronous_commit: {}", describe(&error)),
            })?;
        check(&mut client)?;
        Ok(client)
    }

    /// Runs `work` on the connection (made again when the last one was lost) with the
    /// statement timeout set to what is left of `deadline`. A lost connection is
    /// `unavailable` (and dropped, so the next call connects again); a cancelled statement is
    /// `timeout`.
    fn with_client<T>(
        &self,
        what: &str,
        deadline: Instant,
        work: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, EvidenceStoreError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(EvidenceStoreError::Timeout {
                what: format!("{what}: the deadline had passed"),
            });
        }
        let mut slot = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = Some(self.open()?);
        }
        let client = slot.as_mut().expect("a connection was just made");
        let millis = left.as_millis().clamp(1, i32::MAX as u128);
        let outcome = client
            .batch_execute(&format!("SET statement_timeout = {millis}"))
            .and_then(|()| work(client));
        let lost = client.is_closed();
        outcome.map_err(|error| {
            if error
                .code()
                .is_some_and(|code| code.code() == QUERY_CANCELED)
            {
                EvidenceStoreError::Timeout {
                    what: format!("{what}: {}", describe(&error)),
                }
            } else {
                if error.as_db_error().is_none() || lost {
                    *slot = None;
                }
                EvidenceStoreError::Unavailable {
                    reason: format!("{what}: {}", describe(&error)),
                }
            }
        })
    }
}

impl EvidenceStore for PostgresEvidenceStore {
    fn put(
        &self,
        record: &EvidenceRecord,
        deadline: Instant,
    ) -> Result<Digest, EvidenceStoreError> {
        let id = record.id();
        let id_text = id.to_string();
        let pins = record.pins().to_string();
        // One statement, committed on its own with synchronous_commit on: when it returns,
        // the row is durable. An existing id inserts nothing, and its bytes decide.
        let existing = self.with_client("storing a record", deadline, |client| {
            let inserted = client.query(
                "INSERT INTO sf_evidence (id, pins, record) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO NOTHING RETURNING seq",
                &[&id_text, &pins, &record.bytes()],
            )?;
            if !inserted.is_empty() {
                return Ok(None);
            }
            let row =
                client.query_one("SELECT record FROM sf_evidence WHERE id = $1", &[&id_text])?;
            Ok(Some(row.get::<_, Vec<u8>>(0)))
        })?;
        match existing {
            None => Ok(id),
            Some(bytes) if bytes == record.bytes() => Ok(id),
            Some(_) => Err(EvidenceStoreError::Conflict { id: id_text }),
        }
    }

    fn get(&self, id: &Digest, deadline: Instant) -> Result<EvidenceRecord, EvidenceStoreError> {
        let id_text = id.to_string();
        let row = self.with_client("reading a record", deadline, |client| {
            client.query_opt(
                "SELECT record, pins FROM sf_evidence WHERE id = $1",
                &[&id_text],
            )
        })?;
        let Some(row) = row else {
            return Err(EvidenceStoreError::Missing { id: id_text });
        };
        let (bytes, pins): (Vec<u8>, String) = (row.get(0), row.get(1));
        let record = EvidenceRecord::from_stored(id, bytes)?;
        if record.pins().to_string() != pins {
            return Err(EvidenceStoreError::Corrupt {
                id: id_text,
                what: format!(
                    "filed under pins {pins}, but the record names {}",
                    record.pins()
                ),
            });
        }
        Ok(record)
    }

    fn find(&self, pins: &Digest, deadline: Instant) -> Result<Vec<Digest>, EvidenceStoreError> {
        let pins_text = pins.to_string();
        let rows = self.with_client("finding records", deadline, |client| {
            client.query(
                "SELECT id FROM sf_evidence WHERE pins = $1 ORDER BY seq",
                &[&pins_text],
            )
        })?;
        rows.iter()
            .map(|row| {
                let text: String = row.get(0);
                Digest::parse(&text).ok_or(EvidenceStoreError::Corrupt {
                    id: text.clone(),
                    what: "a key is not a sha256: digest".into(),
                })
            })
            .collect()
    }
}
