//! [`EvidenceStore`] over a loaded plugin: every trait method is one `call` with the message
//! of [`super::evidence_store_protocol`].
//!
//! The plugin's answers are checked as any store's are: `put` must answer the record's own id
//! (a store never invents one), `get`'s bytes are re-hashed and re-parsed under the id asked
//! for ([`EvidenceRecord::from_stored`]: `corrupt` otherwise), and `find`'s ids must be
//! digests. Every failure is an `Err`, which for `put` means "not known to be durable" (the
//! contract makes putting again safe): a contract error is the same [`EvidenceStoreError`];
//! anything else (a code this sf does not know, a panic, a malformed reply, an unsupported
//! method) is `unavailable`, naming the plugin.

use std::sync::Arc;
use std::time::Instant;

use super::error::PluginError;
use super::evidence_store_protocol::{self as wire, DecodedError, method};
use super::loader::{CallReply, Instance, LoadedPlugin};
use super::message::MessageError;
use crate::canonical::Digest;
use crate::contracts::{EvidenceRecord, EvidenceStore, EvidenceStoreError};

/// An EvidenceStore living in a plugin.
#[derive(Debug)]
pub struct PluginEvidenceStore {
    instance: Instance,
    tag: String,
}

impl PluginEvidenceStore {
    /// Instantiates the `evidence-store` contract of `plugin` under `tag` with `config`.
    pub fn new(
        plugin: &Arc<LoadedPlugin>,
        tag: &str,
        config: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, PluginError> {
        Ok(Self {
            instance: plugin.instantiate(wire::CONTRACT, tag, config)?,
            tag: tag.to_owned(),
        })
    }

    /// The plugin serving this store.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        self.instance.plugin()
    }

    /// The tag this store was made under.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// One call: the answer decoded by `decode`, or the failure as the contract's error.
    fn call<T>(
        &self,
        method: &str,
        request: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<T, MessageError>,
    ) -> Result<T, EvidenceStoreError> {
        let plugin = self.instance.plugin().name();
        let unavailable = |error: PluginError| EvidenceStoreError::Unavailable {
            reason: error.to_string(),
        };
        let malformed = |detail: String| {
            unavailable(PluginError::MalformedMessage {
                plugin: plugin.to_owned(),
                during: method.to_owned(),
                detail,
            })
        };
        self.instance
            .call(method, request, |reply| match reply {
                CallReply::Answer {
                    bytes,
                    new_instance: None,
                } => decode(bytes).map_err(|error| malformed(error.to_string())),
                CallReply::Answer { .. } => {
                    Err(malformed("the answer carries a new instance".to_owned()))
                }
                CallReply::ContractError { bytes } => match wire::decode_error(bytes) {
                    Ok(DecodedError::Known(error)) => Err(error),
                    Ok(DecodedError::Unknown { code, message }) => {
                        Err(EvidenceStoreError::Unavailable {
                            reason: format!(
                                "plugin {plugin} refused {method} with an error this sf does \
                                 not know ({code}): {message}"
                            ),
                        })
                    }
                    Err(error) => Err(malformed(error.to_string())),
                },
            })
            .map_err(unavailable)?
    }
}

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
                    self.instance.plugin().name()
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
