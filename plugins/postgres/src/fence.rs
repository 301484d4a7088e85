//! [`PostgresFence`]: the AttemptFence contract on PostgreSQL, for collectors of one Product
//! on several machines writing into one database.
//!
//! - One holder at a time per Candidate: a hold is a session-level advisory lock
//!   (`pg_try_advisory_lock`) taken on a connection of its own, which only that hold uses.
//!   The server drops the lock when the session ends (released, lost, or its holder killed),
//!   so a dead holder never blocks the Candidate. The lock's key is the first 8 bytes of the
//!   SHA-256 of `sf-postgres-fence/1` and the Candidate's [`candidate_key`]
//!   (`PRODUCT@sha256:…`): two Candidates whose keys collided would only wait for each other,
//!   never share a hold. Holds on different Candidates of one Product are active at once.
//! - Monotonic epochs: the row of `sf_fence` named by the Product id holds the last epoch
//!   handed out for it, for all its Candidates; the holder increments it and copies it to the
//!   row named by the Candidate's key in one committed transaction (`synchronous_commit =
//!   on`) before the hold is returned, and a trigger refuses any change that would lower
//!   either. An epoch is never handed out twice, whatever happens to the process that took it.
//! - The lease: the Candidate's row records who holds it (`holder`, `session`: the server
//!   process id), when it was taken (`acquired_at`) and when it ended (`released_at`, written
//!   on release; left empty by a holder that died or lost its session). The Product's row
//!   records the last acquirer.
//! - [`FenceHold::assert_active`] asks the hold's own session whether it still holds the lock
//!   and the Candidate's row still names its epoch. A lost connection (the server restarted,
//!   the session terminated, the network gone) is a lost hold: `released`, and the hold never
//!   connects again, so it is never silently taken back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use postgres::Client;
use sf_contracts::canonical::{self, Digest};
use sf_contracts::fence::{AttemptFence, FenceError, FenceHold, candidate_key, check_product};
use sf_contracts::{AttemptId, EvidenceStoreError};

use crate::config::{Connector, PostgresConfig};
use crate::schema::{check, describe};

/// Mixed into every advisory lock key, so that sf's keys are its own.
const KEY_DOMAIN: &str = "sf-postgres-fence/1";
/// How long one statement of the fence may take on the server, in milliseconds.
const STATEMENT_TIMEOUT_MS: u32 = 30_000;

/// The attempt fence on PostgreSQL.
pub struct PostgresFence {
    connector: Connector,
    /// The connection `last_epoch` reads on; made again when it was lost.
    reader: Mutex<Option<Client>>,
}

impl std::fmt::Debug for PostgresFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client configuration holds the password: never printed.
        f.debug_struct("PostgresFence").finish_non_exhaustive()
    }
}

fn unavailable(what: &str, error: &postgres::Error) -> FenceError {
    FenceError::Unavailable {
        reason: format!("{what}: {}", describe(error)),
    }
}

fn from_store_error(error: EvidenceStoreError) -> FenceError {
    match error {
        EvidenceStoreError::Corrupt { what, .. } => FenceError::Corrupt { what },
        other => FenceError::Unavailable {
            reason: other.to_string(),
        },
    }
}

/// The advisory lock key of `name` (a Candidate's [`candidate_key`]).
fn lock_key(name: &str) -> i64 {
    let digest = Digest::of(format!("{KEY_DOMAIN}\0{name}").as_bytes());
    let hex = digest.hex();
    u64::from_str_radix(&hex[..16], 16).expect("a sha256 is hex") as i64
}

/// An epoch as the row holds it, checked.
fn epoch_of(value: i64, product: &str) -> Result<u64, FenceError> {
    u64::try_from(value)
        .ok()
        .filter(|epoch| (1..=canonical::MAX_SAFE_INTEGER as u64).contains(epoch))
        .ok_or_else(|| FenceError::Corrupt {
            what: format!(
                "sf_fence holds epoch {value} for {product}, not a positive safe integer"
            ),
        })
}

/// Who is taking the fence, for the lease row: this machine's name and process.
fn holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{} pid {}", host.trim(), std::process::id())
}

impl PostgresFence {
    /// The fence in the database `config` names; connects once and checks the schema
    /// (`corrupt` on any difference, `unavailable` when the server cannot be reached).
    pub fn connect(config: &PostgresConfig) -> Result<Self, FenceError> {
        let connector = config
            .connector()
            .map_err(|error| FenceError::InvalidInput {
                input: "[evidence_store]".into(),
                rule: error.to_string(),
            })?;
        let fence = Self {
            connector,
            reader: Mutex::new(None),
        };
        let client = fence.open()?;
        *fence.reader.lock().unwrap_or_else(PoisonError::into_inner) = Some(client);
        Ok(fence)
    }

    /// A new session, durable and bounded, its schema checked.
    fn open(&self) -> Result<Client, FenceError> {
        let mut client = self
            .connector
            .connect()
            .map_err(|error| unavailable("connecting to PostgreSQL", &error))?;
        client
            .batch_execute(&format!(
                "SET synchronous_commit = on; SET statement_timeout = {STATEMENT_TIMEOUT_MS}"
            ))
            .map_err(|error| unavailable("setting up the session", &error))?;
        check(&mut client).map_err(from_store_error)?;
        Ok(client)
    }
}

impl AttemptFence for PostgresFence {
    fn last_epoch(&self, product: &str) -> Result<u64, FenceError> {
        check_product(product)?;
        let mut slot = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = Some(self.open()?);
        }
        let client = slot.as_mut().expect("a connection was just made");
        let row = client
            .query_opt("SELECT epoch FROM sf_fence WHERE product = $1", &[&product])
            .map_err(|error| {
                let failed = unavailable("reading the fence", &error);
                *slot = None;
                failed
            })?;
        match row {
            None => Ok(0),
            Some(row) => epoch_of(row.get(0), product),
        }
    }

    fn acquire(&self, product: &str, candidate: &Digest) -> Result<Box<dyn FenceHold>, FenceError> {
        check_product(product)?;
        let name = candidate_key(product, candidate);
        let key = lock_key(&name);
        // The hold's own session: the advisory lock lives exactly as long as it does.
        let mut client = self.open()?;
        let locked: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .map_err(|error| unavailable("taking the fence", &error))?
            .get(0);
        if !locked {
            // Dropping the session ends it; it holds nothing.
            return Err(FenceError::Busy { product: name });
        }
        let epoch = next_epoch(&mut client, product, &name)?;
        Ok(Box::new(PostgresHold {
            attempt: AttemptId {
                product: product.to_owned(),
                epoch,
            },
            name,
            key,
            session: Mutex::new(Some(client)),
            released: AtomicBool::new(false),
        }))
    }
}

/// Takes the next epoch of `product` and records it as the hold of `name`, in one transaction
/// committed with synchronous_commit on: durable when it returns. The Product's row is locked
/// by its update until the commit, so concurrent acquirers take epochs one after another.
fn next_epoch(client: &mut Client, product: &str, name: &str) -> Result<u64, FenceError> {
    const UPSERT: &str = "INSERT INTO sf_fence (product, epoch, holder, session, acquired_at) \
         VALUES ($1, $2, $3, pg_backend_pid(), now()) \
         ON CONFLICT (product) DO UPDATE SET epoch = GREATEST(sf_fence.epoch + 1, $2), \
           holder = EXCLUDED.holder, session = EXCLUDED.session, \
           acquired_at = EXCLUDED.acquired_at, released_at = NULL \
         RETURNING epoch";
    let failed = |error: postgres::Error| unavailable("recording the new epoch", &error);
    let holder = holder();
    let mut transaction = client.transaction().map_err(failed)?;
    let row = transaction
        .query_one(UPSERT, &[&product, &1_i64, &holder])
        .map_err(failed)?;
    let epoch = epoch_of(row.get(0), product)?;
    let held = transaction
        .query_one(UPSERT, &[&name, &(epoch as i64), &holder])
        .map_err(failed)?;
    // The Candidate's row only follows the Product's: an epoch above it was written by
    // someone else.
    if held.get::<_, i64>(0) != epoch as i64 {
        return Err(FenceError::Corrupt {
            what: format!(
                "sf_fence holds epoch {} for {name}, above {product}'s {epoch}",
                held.get::<_, i64>(0)
            ),
        });
    }
    transaction.commit().map_err(failed)?;
    Ok(epoch)
}

/// One attempt's hold: the session holding the advisory lock.
pub struct PostgresHold {
    attempt: AttemptId,
    /// The Candidate's [`candidate_key`]: its row in `sf_fence`, and its lock.
    name: String,
    key: i64,
    /// The holder's session; `None` once the hold ended (released or lost).
    session: Mutex<Option<Client>>,
    released: AtomicBool,
}

impl std::fmt::Debug for PostgresHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresHold")
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

impl PostgresHold {
    fn ended(&self, reason: impl Into<String>) -> FenceError {
        FenceError::Released {
            attempt: self.attempt.to_string(),
            reason: reason.into(),
        }
    }
}

impl FenceHold for PostgresHold {
    fn attempt(&self) -> &AttemptId {
        &self.attempt
    }

    fn assert_active(&self) -> Result<(), FenceError> {
        let mut slot = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if self.released.load(Ordering::SeqCst) {
            return Err(self.ended("the hold was released"));
        }
        let Some(client) = slot.as_mut() else {
            return Err(self.ended("the hold was released"));
        };
        // The key as pg_locks shows a bigint advisory lock: its high and low 32 bits.
        let (high, low) = (
            (self.key as u64 >> 32) as i64,
            (self.key as u64 & 0xffff_ffff) as i64,
        );
        let answer = client.query_one(
            "SELECT (SELECT epoch FROM sf_fence WHERE product = $1), \
                    EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' \
                            AND pid = pg_backend_pid() AND granted AND objsubid = 1 \
                            AND classid::bigint = $2 AND objid::bigint = $3)",
            &[&self.name, &high, &low],
        );
        let lost = match answer {
            Ok(row) => {
                let (epoch, locked): (Option<i64>, bool) = (row.get(0), row.get(1));
                if !locked {
                    "the session no longer holds the fence's lock".to_owned()
                } else if epoch != Some(self.attempt.epoch as i64) {
                    format!(
                        "the fence is at epoch {epoch:?}, not this hold's {}",
                        self.attempt.epoch
                    )
                } else {
                    return Ok(());
                }
            }
            Err(error) => format!(
                "the session holding the fence was lost: {}",
                describe(&error)
            ),
        };
        // Lost for good: the session is closed (freeing whatever it still held) and never
        // made again.
        self.released.store(true, Ordering::SeqCst);
        *slot = None;
        Err(self.ended(lost))
    }

    fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
        let Some(mut client) = self
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        // The lease's end, then the lock. If either fails the session is dropped below,
        // which ends the lock all the same; only the recorded end is then missing.
        let epoch = self.attempt.epoch as i64;
        let _ = client.execute(
            "UPDATE sf_fence SET released_at = now() WHERE product = $1 AND epoch = $2",
            &[&self.name, &epoch],
        );
        let _ = client.query_one("SELECT pg_advisory_unlock($1)", &[&self.key]);
    }
}

impl Drop for PostgresHold {
    fn drop(&mut self) {
        self.release();
    }
}
