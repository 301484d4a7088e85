//! The `evidence-store` contract in the host: [`EvidenceStore`] over a loaded plugin (every
//! trait method is one call with the message of [`super::evidence_store_protocol`]), and
//! `[evidence_store]` with its compiled-in backends.
//!
//! The plugin's answers are checked as any store's are: `put` must answer the record's own id
//! (a store never invents one), `get`'s bytes are re-hashed and re-parsed under the id asked
//! for ([`EvidenceRecord::from_stored`]: `corrupt` otherwise), and `find`'s ids must be
//! digests. Every failure is an `Err`, which for `put` means "not known to be durable" (the
//! contract makes putting again safe): a contract error is the same [`EvidenceStoreError`];
//! anything else (a code this sf does not know, a panic, a malformed reply, an unsupported
//! method) is `unavailable`, naming the plugin.

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::backend::PluginBackend;
use super::config::Configured;
use super::contract::HostContract;
use super::evidence_store_protocol::{self as wire, EvidenceStoreContract, method};
use crate::canonical::Digest;
use crate::contracts::{EvidenceRecord, EvidenceStore, EvidenceStoreError};

impl HostContract for EvidenceStoreContract {
    type State = ();
    const REQUIRES_MINOR: u32 = 0;

    fn unavailable(reason: String) -> EvidenceStoreError {
        EvidenceStoreError::Unavailable { reason }
    }
}

/// An EvidenceStore living in a plugin.
pub type PluginEvidenceStore = PluginBackend<EvidenceStoreContract>;

impl EvidenceStore for PluginEvidenceStore {
    fn put(
        &self,
        record: &EvidenceRecord,
        deadline: Instant,
    ) -> Result<Digest, EvidenceStoreError> {
        let id = self.call(
            method::PUT,
            &wire::encode_put(record, deadline),
            wire::decode_id,
        )?;
        let expected = record.id();
        if id != expected {
            return Err(EvidenceStoreError::Unavailable {
                reason: format!(
                    "plugin {} answered put with id {id} for a record whose id is {expected}; a \
                     store never invents an id, so the record is not known to be stored",
                    self.plugin().name()
                ),
            });
        }
        Ok(id)
    }

    fn get(&self, id: &Digest, deadline: Instant) -> Result<EvidenceRecord, EvidenceStoreError> {
        let bytes = self.call(
            method::GET,
            &wire::encode_get(id, deadline),
            wire::decode_record,
        )?;
        EvidenceRecord::from_stored(id, bytes)
    }

    fn find(&self, pins: &Digest, deadline: Instant) -> Result<Vec<Digest>, EvidenceStoreError> {
        self.call(
            method::FIND,
            &wire::encode_find(pins, deadline),
            wire::decode_ids,
        )
    }
}

/// An EvidenceStore backend compiled into the running program, configured from its section.
///
/// ```text
/// #[typetag::serde(name = "sqlite")]
/// impl EvidenceStoreBackend for SqliteBackend {
///     fn evidence_store(&self, state_dir: &Path) -> Result<Arc<dyn EvidenceStore>, EvidenceStoreError> { … }
/// }
/// ```
#[typetag::serde(tag = "type")]
pub trait EvidenceStoreBackend: Debug + Send + Sync {
    /// Builds the configured store. `state_dir` is the directory sf keeps the current
    /// Slice's evidence in; a backend whose section names no location of its own uses it.
    fn evidence_store(
        &self,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, EvidenceStoreError>;

    /// Opens the configured store for reading only what is there: a backend that would create
    /// its storage refuses instead. The default builds the store as
    /// [`EvidenceStoreBackend::evidence_store`] does.
    fn existing_evidence_store(
        &self,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, EvidenceStoreError> {
        self.evidence_store(state_dir)
    }
}

/// What a compiled-in evidence store is given besides its section. A plugin store is
/// configured by its section alone.
#[derive(Clone, Copy, Debug)]
pub struct StoreContext<'a> {
    /// The directory sf keeps the current Slice's evidence in.
    pub state_dir: &'a Path,
    /// Open only what exists (a command that only reads): create nothing.
    pub existing: bool,
}

impl Configured for EvidenceStoreContract {
    const SECTION: &'static str = "evidence_store";
    const DEFAULT_TAG: &'static str = "sqlite";
    type Object = dyn EvidenceStore;
    type Compiled = Box<dyn EvidenceStoreBackend>;
    type Context<'a> = StoreContext<'a>;

    fn compiled(
        backend: Self::Compiled,
        context: StoreContext<'_>,
    ) -> Result<Arc<dyn EvidenceStore>, EvidenceStoreError> {
        if context.existing {
            backend.existing_evidence_store(context.state_dir)
        } else {
            backend.evidence_store(context.state_dir)
        }
    }

    fn adapt(backend: PluginEvidenceStore) -> Arc<dyn EvidenceStore> {
        Arc::new(backend)
    }
}
