//! The `object-store` contract in the host: [`ObjectStoreFactory`] and [`ObjectStore`] over a
//! loaded plugin (every trait method is one call with the message of
//! [`super::object_store_protocol`], and every answer, error and failure comes back as the
//! trait's own value), and `[object_store]` with its compiled-in backends.
//!
//! What a plugin's failure becomes, method by method:
//! - a contract error: the same [`ObjectStoreError`], code and fields;
//! - for `create_ref` and `compare_and_swap_ref`, a panic or a malformed reply after the call
//!   was made: `Ok(RefUpdate::Unknown)`, because the write may have happened (never `Err`,
//!   which would claim nothing started);
//! - otherwise a panic: `unavailable`; a malformed reply: `corrupt`; a method the plugin does
//!   not support or a request it refused: `unavailable`; each naming the plugin and the fix.

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::backend::PluginBackend;
use super::config::Configured;
use super::contract::{self, BadReply, HostContract};
use super::error::PluginError;
use super::loader::{CallReply, Instance};
use super::message::MessageError;
use super::object_store_protocol::{self as wire, ObjectStoreContract, method};
use crate::contracts::{
    EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreFactory, RefName, RefUpdate, RefValue,
    StoreRoot, StoredObject,
};
use crate::git_object::ObjectId;

impl HostContract for ObjectStoreContract {
    type State = ();
    const REQUIRES_MINOR: u32 = 0;

    fn unavailable(reason: String) -> ObjectStoreError {
        ObjectStoreError::Unavailable { reason }
    }

    /// A malformed reply is `corrupt` (an answer that failed verification); every other
    /// failure `unavailable` (the store cannot be used).
    fn failed(error: PluginError) -> ObjectStoreError {
        match error {
            PluginError::MalformedMessage { .. } => ObjectStoreError::Corrupt {
                what: error.to_string(),
            },
            other => ObjectStoreError::Unavailable {
                reason: other.to_string(),
            },
        }
    }
}

/// An ObjectStore factory living in a plugin.
pub type PluginObjectStoreFactory = PluginBackend<ObjectStoreContract>;

/// A factory's `create` or `open`: the answer names the new store's root, and the call made
/// the store's instance.
fn make_store(
    factory: &PluginObjectStoreFactory,
    method: &str,
    request: &[u8],
) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
    contract::call::<ObjectStoreContract, _>(
        factory.instance(),
        method,
        request,
        |bytes, new_instance| {
            let root = wire::decode_root(bytes)?;
            let instance =
                new_instance.ok_or(BadReply::Instance("the answer carries no store instance"))?;
            Ok(Box::new(PluginObjectStore { instance, root }) as Box<dyn ObjectStore>)
        },
    )
}

impl ObjectStoreFactory for PluginObjectStoreFactory {
    fn create(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        make_store(self, method::CREATE, &wire::encode_create(path, deadline))
    }

    fn open(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        make_store(
            self,
            method::OPEN,
            &wire::encode_open(root, marker, deadline),
        )
    }

    /// `record_boundaries` came with ABI minor 3: a plugin of an older minor does not know
    /// the method, and says so only once a root exists, so it is refused here, before
    /// anything is created. A plugin of minor 3 or later serves the method; whether its store
    /// holds boundaries only its answer to `record_boundaries` says.
    fn supports_boundaries(&self) -> Result<(), ObjectStoreError> {
        let plugin = self.plugin();
        if plugin.abi_minor() >= BOUNDARIES_SINCE_MINOR {
            return Ok(());
        }
        Err(ObjectStoreError::Unavailable {
            reason: format!(
                "plugin {} speaks ABI {}.{}, whose object stores cannot hold a history \
                 boundary (an imported commit whose parents stay in the team's repository; \
                 record_boundaries came with ABI {}.{BOUNDARIES_SINCE_MINOR}): rebuild it \
                 with a newer sf-sdk, or configure another object store",
                plugin.name(),
                super::abi::ABI_MAJOR,
                plugin.abi_minor(),
                super::abi::ABI_MAJOR,
            ),
        })
    }
}

/// The ABI minor whose object stores first served `record_boundaries`.
const BOUNDARIES_SINCE_MINOR: u32 = 3;

/// The ABI minor whose object stores first served read scopes (`begin_reads`, `end_reads`).
const READ_SCOPES_SINCE_MINOR: u32 = 10;

/// One store living in a plugin; dropping it releases the plugin's store.
#[derive(Debug)]
pub struct PluginObjectStore {
    instance: Instance,
    root: StoreRoot,
}

impl PluginObjectStore {
    /// Calls a method whose answer `decode` reads; failures map as the module says.
    fn call<T>(
        &self,
        method: &str,
        request: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<T, MessageError>,
    ) -> Result<T, ObjectStoreError> {
        contract::call::<ObjectStoreContract, T>(
            &self.instance,
            method,
            request,
            contract::answer_only("a store method answered with a new instance", decode),
        )
    }

    /// Sends a read-scope hint. A plugin older than [`READ_SCOPES_SINCE_MINOR`] is not sent
    /// it (its store serves each read on its own, as it always did), and a failed call is
    /// ignored: the scope changes no answer and no check the host relies on.
    fn hint_read_scope(&self, method: &str) {
        if self.instance.plugin().abi_minor() < READ_SCOPES_SINCE_MINOR {
            return;
        }
        let _ = self.call(
            method,
            &wire::encode_read_scope(),
            super::protocol::Empty::decode,
        );
    }

    /// Calls a ref write: once the call was made, anything but a well-formed answer or
    /// contract error is `Unknown`.
    fn ref_write(&self, method: &str, request: &[u8]) -> Result<RefUpdate, ObjectStoreError> {
        let plugin = self.instance.plugin().name();
        let unknown = |reason: String| RefUpdate::Unknown { reason };
        let lost = |error: MessageError| {
            let malformed = contract::malformed_message(plugin, method, error.to_string());
            unknown(ObjectStoreContract::malformed(malformed).to_string())
        };
        let outcome = self.instance.call(method, request, |reply| match reply {
            CallReply::Answer {
                new_instance: Some(_),
                ..
            } => Ok(unknown(format!(
                "plugin {plugin} answered {method} with a new instance; the ref's state is \
                 unknown"
            ))),
            CallReply::Answer { bytes, .. } => {
                Ok(wire::decode_ref_update(bytes).unwrap_or_else(lost))
            }
            CallReply::ContractError { bytes } => match wire::decode_error(bytes) {
                Ok(decoded) => Err(contract::contract_error::<ObjectStoreContract>(
                    plugin, method, decoded,
                )),
                Err(error) => Ok(lost(error)),
            },
        });
        match outcome {
            Ok(result) => result,
            // Refused before the method ran: nothing started.
            Err(error @ (PluginError::UnsupportedMethod { .. } | PluginError::Refused { .. })) => {
                Err(ObjectStoreContract::failed(error))
            }
            Err(error) => Ok(unknown(format!(
                "{error}; the ref write may or may not have happened"
            ))),
        }
    }
}

impl ObjectStore for PluginObjectStore {
    fn root(&self) -> &StoreRoot {
        &self.root
    }

    fn begin_reads(&self) {
        self.hint_read_scope(method::BEGIN_READS);
    }

    fn end_reads(&self) {
        self.hint_read_scope(method::END_READS);
    }

    fn mark(&self, marker: &[u8], deadline: Instant) -> Result<(), ObjectStoreError> {
        self.call(
            method::MARK,
            &wire::encode_mark(marker, deadline),
            super::protocol::Empty::decode,
        )
    }

    fn record_boundaries(
        &self,
        commits: &[ObjectId],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        self.call(
            method::RECORD_BOUNDARIES,
            &wire::encode_record_boundaries(commits, deadline),
            super::protocol::Empty::decode,
        )
    }

    fn write_objects(
        &self,
        objects: &[EncodedObject],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        self.call(
            method::WRITE_OBJECTS,
            &wire::encode_write_objects(objects, deadline),
            super::protocol::Empty::decode,
        )
    }

    fn read_objects(
        &self,
        ids: &[ObjectId],
        budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
        self.call(
            method::READ_OBJECTS,
            &wire::encode_read_objects(ids, budget, deadline),
            wire::decode_objects,
        )
    }

    fn read_ref(
        &self,
        name: &RefName,
        deadline: Instant,
    ) -> Result<Option<RefValue>, ObjectStoreError> {
        self.call(
            method::READ_REF,
            &wire::encode_read_ref(name, deadline),
            wire::decode_ref_value,
        )
    }

    fn list_refs(
        &self,
        prefix: &str,
        deadline: Instant,
    ) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError> {
        self.call(
            method::LIST_REFS,
            &wire::encode_list_refs(prefix, deadline),
            wire::decode_ref_list,
        )
    }

    fn create_ref(
        &self,
        name: &RefName,
        value: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        self.ref_write(
            method::CREATE_REF,
            &wire::encode_create_ref(name, value, deadline),
        )
    }

    fn compare_and_swap_ref(
        &self,
        name: &RefName,
        expected: &ObjectId,
        new: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        self.ref_write(
            method::COMPARE_AND_SWAP_REF,
            &wire::encode_compare_and_swap_ref(name, expected, new, deadline),
        )
    }
}

/// An ObjectStore backend compiled into the running program, configured from its section.
///
/// Implement it on the backend's configuration type and register it under its tag:
///
/// ```text
/// #[typetag::serde(name = "git-cli")]
/// impl ObjectStoreBackend for GitCliBackend {
///     fn factory(&self) -> Result<Arc<dyn ObjectStoreFactory>, ObjectStoreError> { … }
/// }
/// ```
#[typetag::serde(tag = "type")]
pub trait ObjectStoreBackend: Debug + Send + Sync {
    /// Builds the configured factory.
    fn factory(&self) -> Result<Arc<dyn ObjectStoreFactory>, ObjectStoreError>;
}

impl Configured for ObjectStoreContract {
    const SECTION: &'static str = "object_store";
    const DEFAULT_TAG: &'static str = "git-cli";
    type Object = dyn ObjectStoreFactory;
    type Compiled = Box<dyn ObjectStoreBackend>;
    type Context<'a> = ();

    fn compiled(
        backend: Self::Compiled,
        (): (),
    ) -> Result<Arc<dyn ObjectStoreFactory>, ObjectStoreError> {
        backend.factory()
    }

    fn adapt(backend: PluginObjectStoreFactory) -> Arc<dyn ObjectStoreFactory> {
        Arc::new(backend)
    }
}
