//! Evidence: the record format's helpers and the built-in SQLite EvidenceStore.
//!
//! The contract and the exact record encoding (`sf-evidence/1`) are in
//! [`crate::contracts::evidence_store`]; what a repository observation holds
//! (`sf-repository-observation/1`) is in [`crate::assurance::observation`]. This module adds
//! what the core uses to read a store without trusting it, and the embedded default store.

mod sqlite;

use std::time::Instant;

use crate::canonical::Digest;
use crate::contracts::{EvidenceRecord, EvidenceStore, EvidenceStoreError};

pub use sqlite::{SQLITE_SCHEMA_PROTOCOL, SqliteEvidenceStore};

/// Gets `id` from `store` and checks the answer again here: the record must hash to `id`. A
/// store that answers with other bytes is reported `corrupt`, whatever it claims.
pub fn get_verified(
    store: &dyn EvidenceStore,
    id: &Digest,
    deadline: Instant,
) -> Result<EvidenceRecord, EvidenceStoreError> {
    let record = store.get(id, deadline)?;
    if record.id() != *id {
        return Err(EvidenceStoreError::Corrupt {
            id: id.to_string(),
            what: format!("the store answered with record {}", record.id()),
        });
    }
    Ok(record)
}
