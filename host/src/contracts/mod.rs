//! The contracts every backend implements, with their request, answer and error types; and
//! nothing else. Later issues add the Executor, EvidenceStore and Gate beside ObjectStore.

pub mod gate;
pub mod object_store;

pub use gate::{Gate, GateAnswer, GateError, is_valid_reason};
pub use object_store::{
    EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreFactory, READ_FRAMING_BYTES, RefName,
    RefUpdate, RefValue, StoreRoot, StoredObject,
};
