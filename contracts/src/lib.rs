//! sf-contracts: the contracts every sf backend implements (object store, executor,
//! evidence store, attempt fence, gate), their request, answer and error types, and the
//! encodings those types are made of: digests and canonical JSON, Git objects, snapshots, the
//! path, glob and id grammars, and byte framing.
//!
//! This crate is the bottom layer: it depends on no other sf crate, and every other sf crate
//! (the plugin ABI, the host, the sdk, every backend) depends on it. Nothing here starts a
//! process, opens a file or names a backend.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod canonical;
pub mod command;
pub mod error_fields;
pub mod framing;
pub mod git_object;
pub mod grammar;
pub mod legacy_enforcement;
pub mod limit_hit;
pub mod path_glob;
pub mod remote_run;
pub mod snapshot;
pub mod tree_digest;
pub mod tree_path;
pub mod words;

pub mod evidence_store;
pub mod executor;
pub mod fence;
pub mod gate;
pub mod object_store;

pub use command::{
    CapturedResults, MAX_RESULTS_BYTES, PROXY_PORT, ResultsRequest, RunCommand, RunEnvironment,
    RunNetwork, RunOutput, RunResources, SCRATCH_DIR,
};
pub use evidence_store::{
    AttemptId, EVIDENCE_PROTOCOL, EvidenceRecord, EvidenceStore, EvidenceStoreError,
    EvidenceStoreExt, MAX_RECORD_BYTES,
};
pub use executor::{
    BOUNDS_PROTOCOL, CancelToken, ENFORCEMENT_WORD_RULE, Enforcement, EntryPlace, Executor,
    ExecutorError, HARNESS_DIR, INPUT_DIR, MAX_ENFORCEMENT_FACTS, NamespaceDisposition, Overlap,
    PROGRAM_DIR, ProfileDescription, ProgramTree, ReadableKind, ReadablePath, RequestDigests,
    RunAnswer, RunBounds, RunEntry, RunIdentities, RunRequest, RunStatus, RunTimes,
    RuntimeDescription,
};
pub use fence::{AttemptFence, FenceError, FenceHold};
pub use gate::{
    Gate, GateAnswer, GateError, GateExt, MAX_REASON_CHARS, Withheld, is_valid_reason, reason_of,
};
pub use limit_hit::{Limit, LimitHit, MAX_LIMIT_DETAIL_CHARS, check_limits_hit};
pub use object_store::{
    EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreExt, ObjectStoreFactory,
    READ_FRAMING_BYTES, ReadScope, RefName, RefUpdate, RefValue, StoreRoot, StoredObject,
};
pub use remote_run::RemoteRun;
