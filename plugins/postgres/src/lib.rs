//! sf-postgres: the EvidenceStore and the attempt fence on PostgreSQL, for teams whose
//! collectors run on several machines against one Product. Write-once is the database's own
//! rule, not sf's promise: the role sf connects as may only INSERT and SELECT evidence,
//! triggers refuse UPDATE, DELETE and TRUNCATE, and the whole schema is checked when sf connects ([`schema`]). Every record read
//! is re-hashed; a row that fails is `corrupt`, never repaired. A put returns only once its
//! transaction committed with `synchronous_commit = on`.
//!
//! - [`config`]: the connection (`[evidence_store] type = "postgres"`), the password from a
//!   file or a variable, never in a record, a log or an error;
//! - [`schema`]: `schema.sql`, the objects it makes, and the check of every one;
//! - [`store`]: the store itself, [`PostgresEvidenceStore`];
//! - [`fence`]: the attempt fence, [`PostgresFence`]: an advisory lock per hold on the
//!   holder's own session, epochs in a table that only grows;
//! - `plugin`: the export as a plugin.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod fence;
mod plugin;
pub mod schema;
pub mod store;

pub use config::PostgresConfig;
pub use fence::PostgresFence;
pub use store::PostgresEvidenceStore;
