//! mockall fakes of the contracts, for the failure-semantics tests: a store that fails on the
//! Nth call, a compare-and-swap whose outcome is unknown, a receipt write that fails, a gate
//! that refuses or answers late. Use them only for faults that cannot be made for real; a
//! fake can delegate every other call to a real backend with `returning`.

#![allow(missing_docs)]

use std::path::Path;
use std::time::Instant;

use sf_contracts::git_object::ObjectId;
use sf_contracts::{
    EncodedObject, Gate, GateAnswer, GateError, ObjectStore, ObjectStoreError, ObjectStoreFactory,
    RefName, RefUpdate, RefValue, StoreRoot, StoredObject,
};

mockall::mock! {
    /// A fake [`ObjectStore`].
    pub ObjectStore {}
    impl ObjectStore for ObjectStore {
        fn root(&self) -> &StoreRoot;
        fn mark(&self, marker: &[u8], deadline: Instant) -> Result<(), ObjectStoreError>;
        fn write_objects(&self, objects: &[EncodedObject], deadline: Instant) -> Result<(), ObjectStoreError>;
        fn read_objects(
            &self,
            ids: &[ObjectId],
            budget: u64,
            deadline: Instant,
        ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError>;
        fn read_ref(&self, name: &RefName, deadline: Instant) -> Result<Option<RefValue>, ObjectStoreError>;
        fn list_refs(&self, prefix: &str, deadline: Instant) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError>;
        fn create_ref(&self, name: &RefName, value: &ObjectId, deadline: Instant) -> Result<RefUpdate, ObjectStoreError>;
        fn compare_and_swap_ref(
            &self,
            name: &RefName,
            expected: &ObjectId,
            new: &ObjectId,
            deadline: Instant,
        ) -> Result<RefUpdate, ObjectStoreError>;
    }
}

mockall::mock! {
    /// A fake [`ObjectStoreFactory`].
    pub ObjectStoreFactory {}
    impl ObjectStoreFactory for ObjectStoreFactory {
        fn create(&self, path: &Path, deadline: Instant) -> Result<Box<dyn ObjectStore>, ObjectStoreError>;
        fn open(&self, root: &StoreRoot, marker: &[u8], deadline: Instant) -> Result<Box<dyn ObjectStore>, ObjectStoreError>;
    }
}

mockall::mock! {
    /// A fake [`Gate`].
    pub Gate {}
    impl Gate for Gate {
        fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError>;
    }
}

mockall::mock! {
    /// A fake [`EvidenceStore`](sf_contracts::EvidenceStore): a put that fails, a get
    /// that answers other bytes.
    pub EvidenceStore {}
    impl sf_contracts::EvidenceStore for EvidenceStore {
        fn put(
            &self,
            record: &sf_contracts::EvidenceRecord,
            deadline: Instant,
        ) -> Result<sf_contracts::canonical::Digest, sf_contracts::EvidenceStoreError>;
        fn get(
            &self,
            id: &sf_contracts::canonical::Digest,
            deadline: Instant,
        ) -> Result<sf_contracts::EvidenceRecord, sf_contracts::EvidenceStoreError>;
        fn find(
            &self,
            pins: &sf_contracts::canonical::Digest,
            deadline: Instant,
        ) -> Result<Vec<sf_contracts::canonical::Digest>, sf_contracts::EvidenceStoreError>;
    }
}
