//! In-memory backends for tests: fast, deterministic stand-ins for the real ones, with test
//! hooks that produce faults (removed or replaced roots, corrupt objects, symbolic refs) that
//! are hard to produce for real.
//!
//! Every backend here passes the same conformance suite as the real ones
//! ([`crate::conformance`]).

mod evidence_store;
mod executor;
mod object_store;

pub use evidence_store::InMemoryEvidenceStore;
pub use executor::{ScriptedExecutor, ScriptedRun};
pub use object_store::{InMemoryObjectStore, InMemoryObjectStoreFactory};
