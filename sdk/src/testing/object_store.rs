//! An ObjectStore that keeps every root in memory.
//!
//! Roots live in a table shared by a factory, its clones and every store they hand out, so
//! `open` finds what `create` made. Nothing touches the file system: a root's "path" is only a
//! key, and its "inode" is a counter, so a replaced root (same path, new inode) can be made on
//! demand with [`InMemoryObjectStoreFactory::replace_root`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use sf_contracts::git_object::ObjectId;
use sf_contracts::{
    EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreFactory, READ_FRAMING_BYTES, RefName,
    RefUpdate, RefValue, StoreRoot, StoredObject,
};

/// The device number of every in-memory root.
const DEVICE: u64 = 0;

/// One root: its identity, its marker (once marked), its objects and its refs.
#[derive(Clone)]
struct RootState {
    ino: u64,
    marker: Option<Vec<u8>>,
    objects: HashMap<ObjectId, StoredObject>,
    refs: BTreeMap<RefName, RefValue>,
    /// Commits whose parents this root does not hold.
    boundaries: std::collections::BTreeSet<ObjectId>,
}

/// The table every handle of one factory shares.
#[derive(Default)]
struct Roots {
    /// The last inode number handed out; each new root takes the next one.
    last_ino: u64,
    by_path: HashMap<PathBuf, RootState>,
}

impl Roots {
    fn next_ino(&mut self) -> u64 {
        self.last_ino += 1;
        self.last_ino
    }
}

type Shared = Arc<Mutex<Roots>>;

/// Locks the table. A panic while it was held (only possible in a test that already failed)
/// leaves it consistent, because every mutation is a single insert or remove.
fn lock(shared: &Shared) -> MutexGuard<'_, Roots> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

fn check_deadline(deadline: Instant, what: &str) -> Result<(), ObjectStoreError> {
    if Instant::now() >= deadline {
        return Err(ObjectStoreError::Timeout {
            what: what.to_owned(),
        });
    }
    Ok(())
}

fn unavailable(reason: String) -> ObjectStoreError {
    ObjectStoreError::Unavailable { reason }
}

/// Creates and opens in-memory roots. Clones share the same roots, so a test can keep one
/// clone for its test hooks while the code under test owns another.
///
/// Rules, matching what the contract asks of a real backend:
/// - `create` takes an absolute, lexically canonical path (no `.`, `..`, doubled or trailing
///   separators; not `/`) and fails `exists` for a path it already created, even an unmarked
///   one. The new root is unmarked; its [`StoreRoot`] has `dev` 0 and a fresh `ino`.
/// - `open` fails `unavailable` unless a root is at the path with the same `dev` and `ino`,
///   marked with exactly `marker`.
#[derive(Clone, Default)]
pub struct InMemoryObjectStoreFactory {
    shared: Shared,
}

impl fmt::Debug for InMemoryObjectStoreFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryObjectStoreFactory")
            .field("roots", &lock(&self.shared).by_path.len())
            .finish()
    }
}

impl InMemoryObjectStoreFactory {
    /// A factory with no roots.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`ObjectStoreFactory::create`], answering with the concrete store so that tests can
    /// reach its test hooks.
    pub fn create_store(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<InMemoryObjectStore, ObjectStoreError> {
        check_lexically_canonical(path)?;
        check_deadline(deadline, &format!("creating {}", path.display()))?;
        let mut roots = lock(&self.shared);
        if roots.by_path.contains_key(path) {
            return Err(ObjectStoreError::Exists {
                path: path.to_owned(),
            });
        }
        let ino = roots.next_ino();
        roots.by_path.insert(
            path.to_owned(),
            RootState {
                ino,
                marker: None,
                objects: HashMap::new(),
                refs: BTreeMap::new(),
                boundaries: Default::default(),
            },
        );
        Ok(self.handle(
            StoreRoot {
                path: path.to_owned(),
                dev: DEVICE,
                ino,
            },
            None,
        ))
    }

    /// [`ObjectStoreFactory::open`], answering with the concrete store so that tests can reach
    /// its test hooks.
    pub fn open_store(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<InMemoryObjectStore, ObjectStoreError> {
        check_deadline(deadline, &format!("opening {}", root.path.display()))?;
        let roots = lock(&self.shared);
        let path = root.path.display();
        let Some(state) = roots.by_path.get(&root.path) else {
            return Err(unavailable(format!("no repository root at {path}")));
        };
        if root.dev != DEVICE || root.ino != state.ino {
            return Err(unavailable(format!(
                "the root at {path} is another directory (device {DEVICE}, inode {}) than the \
                 one asked for (device {}, inode {})",
                state.ino, root.dev, root.ino
            )));
        }
        match &state.marker {
            None => Err(unavailable(format!("the root at {path} is not marked"))),
            Some(found) if found.as_slice() != marker => Err(unavailable(format!(
                "the root at {path} carries another ownership marker"
            ))),
            Some(_) => Ok(self.handle(root.clone(), Some(marker.to_vec()))),
        }
    }

    fn handle(&self, root: StoreRoot, marker: Option<Vec<u8>>) -> InMemoryObjectStore {
        InMemoryObjectStore {
            shared: Arc::clone(&self.shared),
            root,
            expected_marker: Mutex::new(marker),
        }
    }

    /// Test hook: removes the root at `path` with everything in it, as `rm -rf` would. Every
    /// store on it answers `unavailable` from then on. Returns whether a root was there.
    pub fn remove_root(&self, path: &Path) -> bool {
        lock(&self.shared).by_path.remove(path).is_some()
    }

    /// Test hook: replaces the root at `path` with an exact copy (marker, objects and refs)
    /// under a fresh inode, the way a swapped directory would look. Only the identity differs,
    /// so stores on the old root must notice the inode alone: they answer `unavailable`, and
    /// opening the old [`StoreRoot`] fails. Returns the new root, or `None` if no root was
    /// there.
    pub fn replace_root(&self, path: &Path) -> Option<StoreRoot> {
        let mut roots = lock(&self.shared);
        let ino = roots.next_ino();
        let state = roots.by_path.get_mut(path)?;
        state.ino = ino;
        Some(StoreRoot {
            path: path.to_owned(),
            dev: DEVICE,
            ino,
        })
    }

    /// Test hook: a store on whatever root is at `path` now, expecting the marker it carries
    /// now (none if unmarked), without the checks of `open`. Lets a test reach the hooks of a
    /// root that the code under test created or opened through the trait. `None` if no root
    /// is there.
    pub fn store_at(&self, path: &Path) -> Option<InMemoryObjectStore> {
        let (ino, marker) = {
            let roots = lock(&self.shared);
            let state = roots.by_path.get(path)?;
            (state.ino, state.marker.clone())
        };
        Some(self.handle(
            StoreRoot {
                path: path.to_owned(),
                dev: DEVICE,
                ino,
            },
            marker,
        ))
    }
}

/// Refuses anything but an absolute path that is its own lexical normal form.
fn check_lexically_canonical(path: &Path) -> Result<(), ObjectStoreError> {
    let refuse = |rule: &'static str| ObjectStoreError::InvalidInput {
        input: format!("repository path {}", path.display()),
        rule,
    };
    if !path.is_absolute() {
        return Err(refuse("a repository path is absolute"));
    }
    let normal = path
        .components()
        .all(|component| matches!(component, Component::RootDir | Component::Normal(_)));
    if !normal || path.components().collect::<PathBuf>().as_os_str() != path.as_os_str() {
        return Err(refuse(
            "a repository path is canonical: no ., .., doubled or trailing separators",
        ));
    }
    if path.parent().is_none() {
        return Err(refuse("a repository path has a parent directory"));
    }
    Ok(())
}

impl ObjectStoreFactory for InMemoryObjectStoreFactory {
    fn create(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        Ok(Box::new(self.create_store(path, deadline)?))
    }

    fn open(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        Ok(Box::new(self.open_store(root, marker, deadline)?))
    }

    fn supports_boundaries(&self) -> Result<(), ObjectStoreError> {
        Ok(())
    }
}

/// One in-memory root's objects and refs.
///
/// Before every operation the store checks that its deadline has not passed (`timeout`) and
/// that its root is still there, with the same inode and the marker it expects
/// (`unavailable` otherwise). A created store expects no marker until it marks the root; an
/// opened one expects the marker it was opened with.
///
/// Choices where the contract leaves room:
/// - [`mark`](ObjectStore::mark) on a marked root fails `invalid-input` (the root is fine; the
///   call is a misuse) and leaves the first marker in place.
/// - Refs may name objects the store does not hold.
/// - The read budget counts 64 framing bytes for every unique id, present or not, plus the
///   body of every present one.
/// - [`compare_and_swap_ref`](ObjectStore::compare_and_swap_ref) on an absent ref is
///   `Refused { current: None }`, whatever `expected` is (creating is `create_ref`'s job).
/// - A `list_refs` prefix is `refs/`, or a valid [`RefName`] followed by `/`.
pub struct InMemoryObjectStore {
    shared: Shared,
    root: StoreRoot,
    expected_marker: Mutex<Option<Vec<u8>>>,
}

impl fmt::Debug for InMemoryObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryObjectStore")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl InMemoryObjectStore {
    fn expected_marker(&self) -> MutexGuard<'_, Option<Vec<u8>>> {
        self.expected_marker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `operation` on this store's root after checking the deadline and the root's
    /// ownership (present, same inode, expected marker), all under one lock so that nothing
    /// can change in between.
    fn with_root<T>(
        &self,
        deadline: Instant,
        what: &str,
        operation: impl FnOnce(&mut RootState) -> Result<T, ObjectStoreError>,
    ) -> Result<T, ObjectStoreError> {
        check_deadline(deadline, what)?;
        let mut roots = lock(&self.shared);
        let path = self.root.path.display();
        let Some(state) = roots.by_path.get_mut(&self.root.path) else {
            return Err(unavailable(format!("the root at {path} is gone")));
        };
        if state.ino != self.root.ino {
            return Err(unavailable(format!(
                "the root at {path} was replaced (inode {}, expected {})",
                state.ino, self.root.ino
            )));
        }
        if state.marker != *self.expected_marker() {
            return Err(unavailable(format!(
                "the root at {path} does not carry the expected ownership marker"
            )));
        }
        operation(state)
    }

    /// Runs a test hook on this store's root if it is still the same root (same inode); no
    /// other check. Returns `None` if the root is gone or replaced.
    fn hook<T>(&self, hook: impl FnOnce(&mut RootState) -> T) -> Option<T> {
        let mut roots = lock(&self.shared);
        let state = roots.by_path.get_mut(&self.root.path)?;
        (state.ino == self.root.ino).then(|| hook(state))
    }

    /// Test hook: makes `name` a symbolic ref to `target` (which need not exist), replacing
    /// whatever `name` held. sf never writes one; this is how a test produces one. Returns
    /// whether this store's root was still there.
    pub fn set_symbolic_ref(&self, name: &RefName, target: &str) -> bool {
        self.hook(|state| {
            state
                .refs
                .insert(name.clone(), RefValue::Symbolic(target.to_owned()));
        })
        .is_some()
    }

    /// Test hook: replaces the stored body of `id` with `new_body` without changing its id or
    /// kind, so that the object no longer hashes to its id. Reads return the new bytes as
    /// they are: the store does not re-hash, the host must. Returns whether the object was
    /// there.
    pub fn corrupt_object(&self, id: &ObjectId, new_body: Vec<u8>) -> bool {
        self.hook(|state| match state.objects.get_mut(id) {
            Some(object) => {
                object.body = new_body;
                true
            }
            None => false,
        })
        .unwrap_or(false)
    }

    /// Test hook: deletes the object `id`, leaving any ref that names it dangling. Returns
    /// whether the object was there.
    pub fn remove_object(&self, id: &ObjectId) -> bool {
        self.hook(|state| state.objects.remove(id).is_some())
            .unwrap_or(false)
    }
}

/// Checks a `list_refs` prefix: `refs/`, or a valid ref name followed by `/`.
fn check_prefix(prefix: &str) -> Result<(), ObjectStoreError> {
    let refuse = |rule: &'static str| ObjectStoreError::InvalidInput {
        input: format!("ref prefix {prefix:?}"),
        rule,
    };
    if !prefix.starts_with("refs/") {
        return Err(refuse("a ref prefix starts with refs/"));
    }
    let Some(name) = prefix.strip_suffix('/') else {
        return Err(refuse("a ref prefix ends with /"));
    };
    if name != "refs" && RefName::parse(name).is_err() {
        return Err(refuse(
            "a ref prefix is refs/ or a valid ref name followed by /",
        ));
    }
    Ok(())
}

impl ObjectStore for InMemoryObjectStore {
    fn root(&self) -> &StoreRoot {
        &self.root
    }

    fn mark(&self, marker: &[u8], deadline: Instant) -> Result<(), ObjectStoreError> {
        self.with_root(deadline, "marking the root", |state| {
            if state.marker.is_some() {
                return Err(ObjectStoreError::InvalidInput {
                    input: format!("marker for {}", self.root.path.display()),
                    rule: "a root is marked once; this one already carries a marker",
                });
            }
            state.marker = Some(marker.to_vec());
            *self.expected_marker() = Some(marker.to_vec());
            Ok(())
        })
    }

    fn record_boundaries(
        &self,
        commits: &[ObjectId],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        self.with_root(deadline, "recording history boundaries", |state| {
            state.boundaries.extend(commits.iter().copied());
            Ok(())
        })
    }

    fn write_objects(
        &self,
        objects: &[EncodedObject],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        // Every id is checked before anything is stored, so a refusal writes nothing.
        if let Some(forged) = objects.iter().find(|object| !object.verify()) {
            return Err(ObjectStoreError::InvalidInput {
                input: format!("{} object {}", forged.kind.as_str(), forged.id),
                rule: "an object's id is the SHA-1 of its kind, size and body",
            });
        }
        self.with_root(deadline, "writing objects", |state| {
            for object in objects {
                state
                    .objects
                    .entry(object.id)
                    .or_insert_with(|| StoredObject {
                        kind: object.kind,
                        body: object.body.clone(),
                    });
            }
            Ok(())
        })
    }

    fn read_objects(
        &self,
        ids: &[ObjectId],
        budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
        self.with_root(deadline, "reading objects", |state| {
            let unique: HashSet<&ObjectId> = ids.iter().collect();
            let needed = unique.iter().fold(0u64, |total, id| {
                let body = state.objects.get(*id).map_or(0, |object| object.body.len());
                total
                    .saturating_add(u64::try_from(body).unwrap_or(u64::MAX))
                    .saturating_add(READ_FRAMING_BYTES)
            });
            if needed > budget {
                return Err(ObjectStoreError::Limit {
                    what: format!(
                        "reading {} objects needs {needed} bytes; the budget is {budget}",
                        unique.len()
                    ),
                });
            }
            Ok(ids
                .iter()
                .map(|id| state.objects.get(id).cloned())
                .collect())
        })
    }

    fn read_ref(
        &self,
        name: &RefName,
        deadline: Instant,
    ) -> Result<Option<RefValue>, ObjectStoreError> {
        self.with_root(deadline, &format!("reading {name}"), |state| {
            Ok(state.refs.get(name).cloned())
        })
    }

    fn list_refs(
        &self,
        prefix: &str,
        deadline: Instant,
    ) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError> {
        check_prefix(prefix)?;
        self.with_root(deadline, &format!("listing {prefix}"), |state| {
            Ok(state
                .refs
                .iter()
                .filter(|(name, _)| name.as_str().starts_with(prefix))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect())
        })
    }

    fn create_ref(
        &self,
        name: &RefName,
        value: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        self.with_root(deadline, &format!("creating {name}"), |state| {
            if let Some(current) = state.refs.get(name) {
                return Ok(RefUpdate::Refused {
                    current: Some(current.clone()),
                });
            }
            state.refs.insert(name.clone(), RefValue::Direct(*value));
            Ok(RefUpdate::Applied)
        })
    }

    fn compare_and_swap_ref(
        &self,
        name: &RefName,
        expected: &ObjectId,
        new: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        self.with_root(deadline, &format!("moving {name}"), |state| {
            match state.refs.get(name) {
                Some(RefValue::Symbolic(_)) => Err(ObjectStoreError::SymbolicRef {
                    name: name.to_string(),
                }),
                Some(RefValue::Direct(current)) if current == expected => {
                    state.refs.insert(name.clone(), RefValue::Direct(*new));
                    Ok(RefUpdate::Applied)
                }
                current => Ok(RefUpdate::Refused {
                    current: current.cloned(),
                }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sf_contracts::git_object::{ObjectKind, object_id};

    use super::*;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn name(text: &str) -> RefName {
        RefName::parse(text).unwrap()
    }

    fn blob(text: &str) -> EncodedObject {
        EncodedObject::new(ObjectKind::Blob, text.as_bytes().to_vec())
    }

    fn fresh() -> (InMemoryObjectStoreFactory, InMemoryObjectStore) {
        let factory = InMemoryObjectStoreFactory::new();
        let store = factory
            .create_store(Path::new("/memory/repo"), later())
            .unwrap();
        (factory, store)
    }

    /// Calls every trait method once and returns the error codes.
    fn every_operation(store: &InMemoryObjectStore) -> Vec<&'static str> {
        let id = blob("x").id;
        let refname = name("refs/heads/main");
        let deadline = later();
        vec![
            store.mark(b"m", deadline).map(drop),
            store.write_objects(&[blob("x")], deadline).map(drop),
            store.read_objects(&[id], 1 << 20, deadline).map(drop),
            store.read_ref(&refname, deadline).map(drop),
            store.list_refs("refs/", deadline).map(drop),
            store.create_ref(&refname, &id, deadline).map(drop),
            store
                .compare_and_swap_ref(&refname, &id, &id, deadline)
                .map(drop),
        ]
        .into_iter()
        .map(|result| result.unwrap_err().code())
        .collect()
    }

    #[test]
    fn corrupt_object_changes_the_body_but_not_the_id() {
        let (_, store) = fresh();
        let object = blob("original");
        store
            .write_objects(std::slice::from_ref(&object), later())
            .unwrap();
        assert!(store.corrupt_object(&object.id, b"forged".to_vec()));
        let read = store.read_objects(&[object.id], 1 << 20, later()).unwrap();
        let stored = read[0].clone().unwrap();
        assert_eq!(stored.body, b"forged");
        assert_eq!(stored.kind, ObjectKind::Blob);
        let as_claimed = EncodedObject {
            kind: stored.kind,
            id: object.id,
            body: stored.body,
        };
        assert!(!as_claimed.verify());
        assert!(!store.corrupt_object(&blob("absent").id, Vec::new()));
    }

    #[test]
    fn remove_object_leaves_refs_dangling() {
        let (_, store) = fresh();
        let object = blob("gone soon");
        store
            .write_objects(std::slice::from_ref(&object), later())
            .unwrap();
        let refname = name("refs/heads/main");
        store.create_ref(&refname, &object.id, later()).unwrap();
        assert!(store.remove_object(&object.id));
        assert!(!store.remove_object(&object.id));
        let read = store.read_objects(&[object.id], 1 << 20, later()).unwrap();
        assert_eq!(read, vec![None]);
        assert_eq!(
            store.read_ref(&refname, later()).unwrap(),
            Some(RefValue::Direct(object.id))
        );
    }

    #[test]
    fn symbolic_refs_are_reported_and_never_moved() {
        let (_, store) = fresh();
        let id = blob("x").id;
        let head = name("refs/heads/link");
        assert!(store.set_symbolic_ref(&head, "refs/heads/main"));
        let symbolic = Some(RefValue::Symbolic("refs/heads/main".into()));
        assert_eq!(store.read_ref(&head, later()).unwrap(), symbolic);
        let error = store
            .compare_and_swap_ref(&head, &id, &id, later())
            .unwrap_err();
        assert_eq!(error.code(), "symbolic-ref");
        assert_eq!(
            store.create_ref(&head, &id, later()).unwrap(),
            RefUpdate::Refused {
                current: symbolic.clone()
            }
        );
        assert_eq!(
            store.list_refs("refs/heads/", later()).unwrap(),
            vec![(head.clone(), symbolic.clone().unwrap())]
        );
        assert_eq!(store.read_ref(&head, later()).unwrap(), symbolic);
    }

    #[test]
    fn a_removed_root_makes_every_operation_unavailable() {
        let (factory, store) = fresh();
        let root = store.root().clone();
        store.mark(b"marker", later()).unwrap();
        assert!(factory.remove_root(&root.path));
        assert!(!factory.remove_root(&root.path));
        assert!(
            every_operation(&store)
                .iter()
                .all(|code| *code == "unavailable")
        );
        let error = factory.open_store(&root, b"marker", later()).unwrap_err();
        assert_eq!(error.code(), "unavailable");
        assert!(!store.set_symbolic_ref(&name("refs/x"), "refs/y"));
        // The path is free again; a new root there has a new identity.
        let again = factory.create_store(&root.path, later()).unwrap();
        assert_ne!(again.root().ino, root.ino);
    }

    #[test]
    fn a_replaced_root_is_noticed_by_its_inode_alone() {
        let (factory, store) = fresh();
        let object = blob("kept");
        store
            .write_objects(std::slice::from_ref(&object), later())
            .unwrap();
        store.mark(b"marker", later()).unwrap();
        let old = store.root().clone();
        let new = factory.replace_root(&old.path).unwrap();
        assert_eq!(new.path, old.path);
        assert_ne!(new.ino, old.ino);
        assert!(
            every_operation(&store)
                .iter()
                .all(|code| *code == "unavailable")
        );
        let error = factory.open_store(&old, b"marker", later()).unwrap_err();
        assert_eq!(error.code(), "unavailable");
        // The copy carries everything, so the new root opens and reads.
        let reopened = factory.open_store(&new, b"marker", later()).unwrap();
        let read = reopened
            .read_objects(&[object.id], 1 << 20, later())
            .unwrap();
        assert_eq!(read[0].as_ref().unwrap().body, object.body);
        assert!(factory.replace_root(Path::new("/memory/absent")).is_none());
    }

    #[test]
    fn store_at_reaches_a_root_made_through_the_trait() {
        let factory = InMemoryObjectStoreFactory::new();
        let path = Path::new("/memory/repo");
        let boxed = ObjectStoreFactory::create(&factory, path, later()).unwrap();
        boxed.mark(b"marker", later()).unwrap();
        let object = blob("through the trait");
        boxed
            .write_objects(std::slice::from_ref(&object), later())
            .unwrap();
        let hooks = factory.store_at(path).unwrap();
        assert_eq!(hooks.root(), boxed.root());
        assert!(hooks.corrupt_object(&object.id, b"other".to_vec()));
        let read = boxed.read_objects(&[object.id], 1 << 20, later()).unwrap();
        assert_eq!(read[0].as_ref().unwrap().body, b"other");
        assert!(factory.store_at(Path::new("/memory/absent")).is_none());
    }

    #[test]
    fn mark_twice_is_invalid_input_and_keeps_the_first_marker() {
        let (factory, store) = fresh();
        store.mark(b"first", later()).unwrap();
        let error = store.mark(b"second", later()).unwrap_err();
        assert_eq!(error.code(), "invalid-input");
        factory.open_store(store.root(), b"first", later()).unwrap();
        let error = factory
            .open_store(store.root(), b"second", later())
            .unwrap_err();
        assert_eq!(error.code(), "unavailable");
    }

    #[test]
    fn a_second_handle_marking_the_root_locks_out_the_first() {
        let (factory, store) = fresh();
        let other = factory.store_at(&store.root().path).unwrap();
        other.mark(b"foreign", later()).unwrap();
        assert_eq!(
            store.read_ref(&name("refs/x"), later()).unwrap_err().code(),
            "unavailable"
        );
    }

    #[test]
    fn create_refuses_paths_that_are_not_canonical() {
        let factory = InMemoryObjectStoreFactory::new();
        for path in ["relative", "/", "/a/../b", "/a/./b", "/a//b", "/a/b/"] {
            let error = factory.create_store(Path::new(path), later()).unwrap_err();
            assert_eq!(error.code(), "invalid-input", "{path}");
        }
        factory.create_store(Path::new("/a/b"), later()).unwrap();
        let error = factory
            .create_store(Path::new("/a/b"), later())
            .unwrap_err();
        assert_eq!(error.code(), "exists");
    }

    #[test]
    fn open_checks_device_inode_and_marker() {
        let (factory, store) = fresh();
        let root = store.root().clone();
        let error = factory.open_store(&root, b"", later()).unwrap_err();
        assert_eq!(error.code(), "unavailable", "unmarked roots never open");
        store.mark(b"marker", later()).unwrap();
        for wrong in [
            StoreRoot {
                dev: 1,
                ..root.clone()
            },
            StoreRoot {
                ino: root.ino + 1,
                ..root.clone()
            },
            StoreRoot {
                path: PathBuf::from("/memory/other"),
                ..root.clone()
            },
        ] {
            let error = factory.open_store(&wrong, b"marker", later()).unwrap_err();
            assert_eq!(error.code(), "unavailable", "{wrong:?}");
        }
        for marker in [&b"marke"[..], b"marker\n", b"MARKER"] {
            let error = factory.open_store(&root, marker, later()).unwrap_err();
            assert_eq!(error.code(), "unavailable");
        }
        factory.open_store(&root, b"marker", later()).unwrap();
    }

    #[test]
    fn a_passed_deadline_starts_nothing() {
        let (factory, store) = fresh();
        let past = Instant::now();
        let object = blob("late");
        let error = store
            .write_objects(std::slice::from_ref(&object), past)
            .unwrap_err();
        assert_eq!(error.code(), "timeout");
        let read = store.read_objects(&[object.id], 1 << 20, later()).unwrap();
        assert_eq!(read, vec![None]);
        let error = factory
            .create_store(Path::new("/memory/late"), past)
            .unwrap_err();
        assert_eq!(error.code(), "timeout");
        factory
            .create_store(Path::new("/memory/late"), later())
            .unwrap();
    }

    #[test]
    fn list_refs_prefixes_are_checked() {
        let (_, store) = fresh();
        for prefix in ["", "refs", "heads/", "refs//", "refs/a..b/", "refs/x.lock/"] {
            let error = store.list_refs(prefix, later()).unwrap_err();
            assert_eq!(error.code(), "invalid-input", "{prefix:?}");
        }
        store.list_refs("refs/", later()).unwrap();
        store.list_refs("refs/heads/", later()).unwrap();
    }

    #[test]
    fn the_budget_counts_missing_ids_as_framing_only() {
        let (_, store) = fresh();
        let missing = object_id(ObjectKind::Blob, b"missing");
        assert_eq!(
            store
                .read_objects(&[missing, missing], READ_FRAMING_BYTES, later())
                .unwrap(),
            vec![None, None]
        );
        let error = store
            .read_objects(&[missing], READ_FRAMING_BYTES - 1, later())
            .unwrap_err();
        assert_eq!(error.code(), "limit");
        assert_eq!(store.read_objects(&[], 0, later()).unwrap(), vec![]);
    }
}
