//! An in-memory EvidenceStore: records in a map, in the order first stored, with hooks that
//! tamper with stored bytes (which a real store can only suffer from outside).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use sf_contracts::canonical::Digest;
use sf_contracts::{EvidenceRecord, EvidenceStore, EvidenceStoreError};

#[derive(Default)]
struct Records {
    /// id → (pins, bytes), plus the order of first storage.
    by_id: BTreeMap<Digest, (Digest, Vec<u8>)>,
    order: Vec<Digest>,
}

/// The in-memory EvidenceStore. It keeps the contract exactly: `put` re-checks nothing it
/// need not (a record value is well-formed by construction) but refuses a passed deadline,
/// and `get` re-hashes and re-parses on every read, so tampering is reported `corrupt`.
#[derive(Default)]
pub struct InMemoryEvidenceStore {
    records: Mutex<Records>,
}

impl std::fmt::Debug for InMemoryEvidenceStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryEvidenceStore")
            .field("records", &self.len())
            .finish()
    }
}

impl InMemoryEvidenceStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many records the store holds.
    pub fn len(&self) -> usize {
        self.lock().order.len()
    }

    /// Whether the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every id, in the order first stored.
    pub fn ids(&self) -> Vec<Digest> {
        self.lock().order.clone()
    }

    /// Replaces the bytes stored under `id` (test hook: tampering from outside). Returns
    /// false when there is no such record.
    pub fn tamper(&self, id: &Digest, bytes: Vec<u8>) -> bool {
        match self.lock().by_id.get_mut(id) {
            Some(entry) => {
                entry.1 = bytes;
                true
            }
            None => false,
        }
    }

    /// Flips one bit of the last byte stored under `id` (test hook).
    pub fn flip_last_byte(&self, id: &Digest) -> bool {
        match self.lock().by_id.get_mut(id) {
            Some((_, bytes)) if !bytes.is_empty() => {
                let last = bytes.len() - 1;
                bytes[last] ^= 1;
                true
            }
            _ => false,
        }
    }
}

fn check_deadline(deadline: Instant, what: &str) -> Result<(), EvidenceStoreError> {
    if Instant::now() >= deadline {
        return Err(EvidenceStoreError::Timeout {
            what: format!("{what}: the deadline passed"),
        });
    }
    Ok(())
}

impl EvidenceStore for InMemoryEvidenceStore {
    fn put(
        &self,
        record: &EvidenceRecord,
        deadline: Instant,
    ) -> Result<Digest, EvidenceStoreError> {
        check_deadline(deadline, "put")?;
        let id = record.id();
        let mut records = self.lock();
        if let Some((_, existing)) = records.by_id.get(&id) {
            return if existing.as_slice() == record.bytes() {
                Ok(id)
            } else {
                Err(EvidenceStoreError::Conflict { id: id.to_string() })
            };
        }
        records
            .by_id
            .insert(id.clone(), (record.pins().clone(), record.bytes().to_vec()));
        records.order.push(id.clone());
        Ok(id)
    }

    fn get(&self, id: &Digest, deadline: Instant) -> Result<EvidenceRecord, EvidenceStoreError> {
        check_deadline(deadline, "get")?;
        let (pins, bytes) = self
            .lock()
            .by_id
            .get(id)
            .cloned()
            .ok_or_else(|| EvidenceStoreError::Missing { id: id.to_string() })?;
        let record = EvidenceRecord::from_stored(id, bytes)?;
        if *record.pins() != pins {
            return Err(EvidenceStoreError::Corrupt {
                id: id.to_string(),
                what: "filed under other pins than the record names".into(),
            });
        }
        Ok(record)
    }

    fn find(&self, pins: &Digest, deadline: Instant) -> Result<Vec<Digest>, EvidenceStoreError> {
        check_deadline(deadline, "find")?;
        let records = self.lock();
        Ok(records
            .order
            .iter()
            .filter(|id| {
                records
                    .by_id
                    .get(*id)
                    .is_some_and(|(filed, _)| filed == pins)
            })
            .cloned()
            .collect())
    }
}
