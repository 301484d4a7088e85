//! The owned store, with a cache of the objects read during one operation.
//!
//! An export reads the Candidate's tree and then its base's, and the two share nearly every
//! tree and blob; each read is a Git process. While an operation holds a [`CacheScope`], every
//! object read is kept (after it was re-hashed against its id here), so a later read of it
//! in the same operation starts no process. When the last scope ends the cache is emptied:
//! the next operation reads everything from the store again, so a tampered object is found
//! by the next export as it was before. Only objects the store answered are kept, never a
//! "missing", and the cache holds at most [`MAX_CACHED_BYTES`] of bodies (past it, reads go
//! to the store as they did without it). A cache scope is also a read scope of the store
//! ([`ObjectStore::begin_reads`]): what it does read comes through one reader.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use crate::contracts::{
    EncodedObject, ObjectStore, ObjectStoreError, READ_FRAMING_BYTES, RefName, RefUpdate, RefValue,
    StoreRoot, StoredObject,
};
use crate::git_object::{ObjectId, object_id};

/// The most body bytes kept at once.
pub(crate) const MAX_CACHED_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Default)]
struct State {
    /// Operations holding a scope; objects are kept only while it is above 0.
    scopes: usize,
    objects: HashMap<ObjectId, StoredObject>,
    bytes: u64,
}

/// An [`ObjectStore`] that answers reads from its cache while a [`CacheScope`] is held.
pub(crate) struct CachedStore {
    inner: Box<dyn ObjectStore>,
    state: Mutex<State>,
}

/// Keeps the objects read until it is dropped (with every other scope).
pub(crate) struct CacheScope<'a> {
    store: &'a CachedStore,
}

impl Drop for CacheScope<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.store.lock();
            state.scopes -= 1;
            if state.scopes == 0 {
                state.objects = HashMap::new();
                state.bytes = 0;
            }
        }
        self.store.inner.end_reads();
    }
}

impl CachedStore {
    pub(crate) fn new(inner: Box<dyn ObjectStore>) -> Self {
        Self {
            inner,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Objects read from now until the scope is dropped are kept for the reads after them.
    pub(crate) fn scope(&self) -> CacheScope<'_> {
        self.lock().scopes += 1;
        self.inner.begin_reads();
        CacheScope { store: self }
    }
}

impl ObjectStore for CachedStore {
    fn root(&self) -> &StoreRoot {
        self.inner.root()
    }

    fn mark(&self, marker: &[u8], deadline: Instant) -> Result<(), ObjectStoreError> {
        self.inner.mark(marker, deadline)
    }

    fn begin_reads(&self) {
        self.inner.begin_reads();
    }

    fn end_reads(&self) {
        self.inner.end_reads();
    }

    fn write_objects(
        &self,
        objects: &[EncodedObject],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        self.inner.write_objects(objects, deadline)
    }

    fn record_boundaries(
        &self,
        commits: &[ObjectId],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        self.inner.record_boundaries(commits, deadline)
    }

    fn read_objects(
        &self,
        ids: &[ObjectId],
        budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
        let (known, missing, known_bytes) = {
            let state = self.lock();
            if state.scopes == 0 {
                drop(state);
                return self.inner.read_objects(ids, budget, deadline);
            }
            let unique: BTreeSet<&ObjectId> = ids.iter().collect();
            let mut known = HashMap::new();
            let mut missing = Vec::new();
            let mut known_bytes = 0u64;
            for id in unique {
                match state.objects.get(id) {
                    Some(object) => {
                        known_bytes += object.body.len() as u64 + READ_FRAMING_BYTES;
                        known.insert(*id, object.clone());
                    }
                    None => missing.push(*id),
                }
            }
            (known, missing, known_bytes)
        };
        // The answer as a whole keeps the store's budget, whichever part came from where.
        if known_bytes > budget {
            return Err(ObjectStoreError::Limit {
                what: format!("the answer needs more than the budget of {budget} bytes"),
            });
        }
        let fetched = if missing.is_empty() {
            Vec::new()
        } else {
            self.inner
                .read_objects(&missing, budget - known_bytes, deadline)?
        };
        if fetched.len() != missing.len() {
            return Err(ObjectStoreError::Corrupt {
                what: format!(
                    "the store answered {} objects for {} requested",
                    fetched.len(),
                    missing.len()
                ),
            });
        }
        let mut answers = known;
        let mut state = self.lock();
        for (id, answer) in missing.into_iter().zip(fetched) {
            let Some(object) = answer else { continue };
            // Only what hashes to its id is kept; the caller re-hashes every answer anyway.
            let size = object.body.len() as u64;
            if state.scopes > 0
                && state.bytes + size <= MAX_CACHED_BYTES
                && object_id(object.kind, &object.body) == id
            {
                state.bytes += size;
                state.objects.insert(id, object.clone());
            }
            answers.insert(id, object);
        }
        drop(state);
        Ok(ids.iter().map(|id| answers.get(id).cloned()).collect())
    }

    fn read_ref(
        &self,
        name: &RefName,
        deadline: Instant,
    ) -> Result<Option<RefValue>, ObjectStoreError> {
        self.inner.read_ref(name, deadline)
    }

    fn list_refs(
        &self,
        prefix: &str,
        deadline: Instant,
    ) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError> {
        self.inner.list_refs(prefix, deadline)
    }

    fn create_ref(
        &self,
        name: &RefName,
        value: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        self.inner.create_ref(name, value, deadline)
    }

    fn compare_and_swap_ref(
        &self,
        name: &RefName,
        expected: &ObjectId,
        new: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        self.inner
            .compare_and_swap_ref(name, expected, new, deadline)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::git_object::ObjectKind;

    /// A store answering from a map, counting its reads; `lie` answers other bytes for an id.
    struct Counting {
        root: StoreRoot,
        objects: Mutex<HashMap<ObjectId, StoredObject>>,
        reads: Arc<AtomicUsize>,
    }

    impl ObjectStore for Counting {
        fn root(&self) -> &StoreRoot {
            &self.root
        }
        fn mark(&self, _: &[u8], _: Instant) -> Result<(), ObjectStoreError> {
            unreachable!()
        }
        fn write_objects(&self, _: &[EncodedObject], _: Instant) -> Result<(), ObjectStoreError> {
            unreachable!()
        }
        fn read_objects(
            &self,
            ids: &[ObjectId],
            budget: u64,
            _: Instant,
        ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let objects = self.objects.lock().unwrap();
            let answers: Vec<Option<StoredObject>> =
                ids.iter().map(|id| objects.get(id).cloned()).collect();
            let bytes: u64 = answers
                .iter()
                .flatten()
                .map(|object| object.body.len() as u64 + READ_FRAMING_BYTES)
                .sum();
            if bytes > budget {
                return Err(ObjectStoreError::Limit {
                    what: "over budget".into(),
                });
            }
            Ok(answers)
        }
        fn read_ref(&self, _: &RefName, _: Instant) -> Result<Option<RefValue>, ObjectStoreError> {
            unreachable!()
        }
        fn list_refs(
            &self,
            _: &str,
            _: Instant,
        ) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError> {
            unreachable!()
        }
        fn create_ref(
            &self,
            _: &RefName,
            _: &ObjectId,
            _: Instant,
        ) -> Result<RefUpdate, ObjectStoreError> {
            unreachable!()
        }
        fn compare_and_swap_ref(
            &self,
            _: &RefName,
            _: &ObjectId,
            _: &ObjectId,
            _: Instant,
        ) -> Result<RefUpdate, ObjectStoreError> {
            unreachable!()
        }
    }

    fn blob(text: &str) -> (ObjectId, StoredObject) {
        (
            object_id(ObjectKind::Blob, text.as_bytes()),
            StoredObject {
                kind: ObjectKind::Blob,
                body: text.as_bytes().to_vec(),
            },
        )
    }

    fn store(objects: &[(ObjectId, StoredObject)]) -> (CachedStore, Arc<AtomicUsize>) {
        let reads = Arc::new(AtomicUsize::new(0));
        let inner = Counting {
            root: StoreRoot {
                path: "/nowhere".into(),
                dev: 0,
                ino: 0,
            },
            objects: Mutex::new(objects.iter().cloned().collect()),
            reads: Arc::clone(&reads),
        };
        (CachedStore::new(Box::new(inner)), reads)
    }

    fn later() -> Instant {
        Instant::now() + std::time::Duration::from_secs(10)
    }

    #[test]
    fn objects_read_in_a_scope_are_answered_from_it_and_forgotten_after() {
        let (a, b) = (blob("a"), blob("bb"));
        let missing = object_id(ObjectKind::Blob, b"absent");
        let (store, reads) = store(&[a.clone(), b.clone()]);
        {
            let _scope = store.scope();
            let first = store
                .read_objects(&[a.0, missing], 1 << 20, later())
                .unwrap();
            assert_eq!(first, vec![Some(a.1.clone()), None]);
            // `a` is kept, `b` and the missing one are asked for.
            let second = store
                .read_objects(&[a.0, b.0, missing, a.0], 1 << 20, later())
                .unwrap();
            assert_eq!(
                second,
                vec![
                    Some(a.1.clone()),
                    Some(b.1.clone()),
                    None,
                    Some(a.1.clone())
                ]
            );
            assert_eq!(reads.load(Ordering::SeqCst), 2);
            // Everything the store answered is kept; a missing object never is.
            store.read_objects(&[a.0, b.0], 1 << 20, later()).unwrap();
            assert_eq!(reads.load(Ordering::SeqCst), 2);
            store.read_objects(&[missing], 1 << 20, later()).unwrap();
            assert_eq!(reads.load(Ordering::SeqCst), 3);
            // The answer as a whole keeps the budget, however much of it is cached.
            let error = store.read_objects(&[a.0, b.0], 1, later()).unwrap_err();
            assert_eq!(error.code(), "limit");
        }
        // Once the last scope ended, every read goes to the store again.
        store.read_objects(&[a.0], 1 << 20, later()).unwrap();
        store.read_objects(&[a.0], 1 << 20, later()).unwrap();
        assert_eq!(reads.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn bytes_that_do_not_hash_to_their_id_are_answered_but_never_kept() {
        let (id, _) = blob("genuine");
        let lie = StoredObject {
            kind: ObjectKind::Blob,
            body: b"other".to_vec(),
        };
        let (store, reads) = store(&[(id, lie.clone())]);
        let _scope = store.scope();
        // The caller's own check refuses it (`ObjectStoreExt::read_verified`); the cache does
        // not keep it for a later read either.
        assert_eq!(
            store.read_objects(&[id], 1 << 20, later()).unwrap(),
            vec![Some(lie)]
        );
        store.read_objects(&[id], 1 << 20, later()).unwrap();
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }
}
