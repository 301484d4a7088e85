//! The contracts every backend implements, with their request, answer and error types; and
//! nothing else. Later issues add the Executor, EvidenceStore and Gate beside ObjectStore.

pub mod evidence_store;
pub mod executor;
pub mod gate;
pub mod object_store;

pub use evidence_store::{
    AttemptId, EVIDENCE_PROTOCOL, EvidenceRecord, EvidenceStore, EvidenceStoreError,
    MAX_RECORD_BYTES,
};
pub use executor::{
    BOUNDS_PROTOCOL, CancelToken, Enforcement, EntryPlace, Executor, ExecutorError, HARNESS_DIR,
    HostIdentity, INPUT_DIR, LandlockStatus, MemoryBound, NamespaceDisposition, PROGRAM_DIR,
    ProfileDescription, ReadableKind, ReadablePath, RequestDigests, RunAnswer, RunBounds, RunEntry,
    RunIdentities, RunRequest, RunStatus, RunTimes, RuntimeDescription,
};
pub use gate::{Gate, GateAnswer, GateError, is_valid_reason};
pub use object_store::{
    EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreFactory, READ_FRAMING_BYTES, RefName,
    RefUpdate, RefValue, StoreRoot, StoredObject,
};
