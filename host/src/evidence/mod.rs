//! The built-in SQLite EvidenceStore (`[evidence_store] type = "sqlite"`, the default).
//!
//! The contract and the exact record encoding (`sf-evidence/1`) are in
//! [`crate::contracts::evidence_store`], with the checked read every caller uses
//! ([`crate::contracts::EvidenceStoreExt::get_verified`]); what a repository observation holds
//! is in [`crate::assurance::observation`].

mod sqlite;

pub use sqlite::{SQLITE_SCHEMA_PROTOCOL, SqliteEvidenceStore};
