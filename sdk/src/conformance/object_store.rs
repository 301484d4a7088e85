//! The ObjectStore conformance suite.
//!
//! Every case makes its own root through [`Harness::factory`] at a
//! [`Harness::fresh_path`], so cases never see each other's objects or refs. Fixtures are
//! closed the way a strict backend needs: every object a tree or commit names is in the same
//! write or already in the store, and every ref names a commit the store holds.
//!
//! ```no_run
//! # use std::path::PathBuf;
//! # use sf_sdk::conformance::object_store::Harness;
//! # use sf_sdk::contracts::ObjectStoreFactory;
//! # use sf_sdk::testing::InMemoryObjectStoreFactory;
//! struct Memory(InMemoryObjectStoreFactory, std::sync::atomic::AtomicU64);
//! impl Harness for Memory {
//!     fn factory(&self) -> &dyn ObjectStoreFactory { &self.0 }
//!     fn fresh_path(&self) -> PathBuf {
//!         let n = self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!         PathBuf::from(format!("/memory/repo-{n}"))
//!     }
//! }
//! // In a test crate: one #[test] per case.
//! sf_sdk::object_store_conformance!(|| Memory(InMemoryObjectStoreFactory::new(), 0.into()));
//! ```

use std::fmt::Debug;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sf_contracts::git_object::{
    Commit, EntryMode, ObjectId, ObjectKind, TreeEntry, encode_commit, encode_tree, object_id,
};
use sf_contracts::{
    EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreFactory, READ_FRAMING_BYTES, RefName,
    RefUpdate, RefValue, StoreRoot,
};

/// What a backend's test supplies to run the suite against it.
pub trait Harness {
    /// The backend under test.
    fn factory(&self) -> &dyn ObjectStoreFactory;

    /// A fresh path where `create` may make a root: it does not exist yet, it is absolute and
    /// canonical, and its parent is a private directory of the current user. Every call
    /// returns a different path.
    fn fresh_path(&self) -> PathBuf;

    /// The deadline each operation gets. The default, two minutes from now, suits a slow
    /// machine; the suite never tests timing.
    fn deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs(120)
    }

    /// Makes `name` in `store`'s root a symbolic ref to `target`, as tampering from outside
    /// would (sf never writes one). Returns false when the backend offers no way to do it;
    /// the symbolic-ref case then fails, so every harness should implement it.
    fn make_symbolic_ref(&self, store: &dyn ObjectStore, name: &RefName, target: &str) -> bool {
        let _ = (store, name, target);
        false
    }
}

/// One case of the suite: it panics, naming what went wrong, if the backend fails it.
pub type Case = fn(&dyn Harness);

super::suite! {
    [$]
    /// One `#[test]` per case of the ObjectStore suite
    /// ([`conformance::object_store`](crate::conformance::object_store)), each named after its
    /// case and given a fresh harness from the argument: a closure or function returning an
    /// [`object_store::Harness`](crate::conformance::object_store::Harness).
    ///
    /// ```text
    /// mod git_cli {
    ///     sf_sdk::object_store_conformance!(|| MyHarness::new());
    /// }
    /// mod loaded {
    ///     sf_sdk::object_store_conformance!(loaded_harness, ignore: {
    ///         compare_and_swap_refuses_a_symbolic_ref: "its roots are out of the test's reach",
    ///     });
    /// }
    /// ```
    macro object_store_conformance, helper __sf_object_store_case, suite object_store;
    cases: [
        create_twice_is_exists,
        create_relative_path_is_invalid_input,
        fresh_root_has_the_given_path,
        open_unmarked_root_is_unavailable,
        open_checks_marker_and_identity,
        mark_twice_is_refused,
        compare_and_swap_refuses_a_symbolic_ref,
        objects_round_trip,
        a_boundary_commit_is_written_without_its_parents,
        write_objects_is_idempotent,
        forged_object_is_refused,
        missing_object_reads_none,
        duplicate_ids_read_in_order,
        read_budget_is_exact,
        absent_ref_reads_none,
        create_ref_applies_once,
        compare_and_swap_moves_only_from_expected,
        list_refs_filters_and_sorts,
        list_refs_refuses_bad_prefixes,
    ]
}

/// Runs every case in [`CASES`], then panics naming each case that failed (with its message)
/// if any did.
pub fn run_all(harness: &dyn Harness) {
    super::run_cases("object-store", CASES, harness);
}

/// Runs the case called `name`; panics if there is none.
pub fn run_case(harness: &dyn Harness, name: &str) {
    super::run_named("object-store", CASES, harness, name);
}

// ---------------------------------------------------------------------------------------------
// Fixtures

/// The marker every case marks its roots with. Plain ASCII, so that no backend has an excuse.
const MARKER: &[u8] = b"sf object-store conformance marker v1\n";

/// A closed set of objects: a blob in a subtree, another blob at the top, the root tree and
/// a commit of it. Unique per `tag`, in the order a strict writer needs (referenced objects
/// first).
struct Closure {
    blob: EncodedObject,
    subtree: EncodedObject,
    tree: EncodedObject,
    commit: EncodedObject,
}

impl Closure {
    fn new(tag: &str) -> Self {
        let blob = EncodedObject::new(
            ObjectKind::Blob,
            format!("conformance blob {tag}\n").into_bytes(),
        );
        let subtree = EncodedObject::new(
            ObjectKind::Tree,
            encode_tree(&[TreeEntry {
                mode: EntryMode::File,
                name: "inner.txt".into(),
                id: blob.id,
            }]),
        );
        let tree = EncodedObject::new(
            ObjectKind::Tree,
            encode_tree(&[
                TreeEntry {
                    mode: EntryMode::Tree,
                    name: "dir".into(),
                    id: subtree.id,
                },
                TreeEntry {
                    mode: EntryMode::File,
                    name: "top.txt".into(),
                    id: blob.id,
                },
            ]),
        );
        let commit = EncodedObject::new(
            ObjectKind::Commit,
            encode_commit(&commit_of(tree.id, Vec::new(), tag)),
        );
        Self {
            blob,
            subtree,
            tree,
            commit,
        }
    }

    fn objects(&self) -> Vec<EncodedObject> {
        vec![
            self.blob.clone(),
            self.subtree.clone(),
            self.tree.clone(),
            self.commit.clone(),
        ]
    }

    fn ids(&self) -> Vec<ObjectId> {
        self.objects().iter().map(|object| object.id).collect()
    }
}

fn commit_of(tree: ObjectId, parents: Vec<ObjectId>, tag: &str) -> Commit {
    Commit {
        tree,
        parents,
        author: "sf conformance <conformance@sf.invalid> 1700000000 +0000".into(),
        committer: "sf conformance <conformance@sf.invalid> 1700000000 +0000".into(),
        message: format!("conformance commit {tag}\n"),
    }
}

fn name(text: &str) -> RefName {
    RefName::parse(text).expect("the suite's ref names are valid")
}

/// Enough budget for any read the suite makes.
const AMPLE: u64 = 1 << 20;

fn create(harness: &dyn Harness) -> Box<dyn ObjectStore> {
    let path = harness.fresh_path();
    harness
        .factory()
        .create(&path, harness.deadline())
        .unwrap_or_else(|error| panic!("create {} failed: {error}", path.display()))
}

/// A store as the host uses one after creation: created, filled with `closure`, marked and
/// opened again.
fn opened_with(harness: &dyn Harness, closure: &Closure) -> Box<dyn ObjectStore> {
    let created = create(harness);
    write(harness, created.as_ref(), &closure.objects());
    created
        .mark(MARKER, harness.deadline())
        .unwrap_or_else(|error| panic!("mark failed: {error}"));
    open(harness, created.root(), MARKER)
        .unwrap_or_else(|error| panic!("open with the right marker failed: {error}"))
}

fn open(
    harness: &dyn Harness,
    root: &StoreRoot,
    marker: &[u8],
) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
    harness.factory().open(root, marker, harness.deadline())
}

fn write(harness: &dyn Harness, store: &dyn ObjectStore, objects: &[EncodedObject]) {
    store
        .write_objects(objects, harness.deadline())
        .unwrap_or_else(|error| panic!("write_objects failed: {error}"));
}

fn read(
    harness: &dyn Harness,
    store: &dyn ObjectStore,
    ids: &[ObjectId],
) -> Vec<Option<(ObjectKind, Vec<u8>)>> {
    store
        .read_objects(ids, AMPLE, harness.deadline())
        .unwrap_or_else(|error| panic!("read_objects failed: {error}"))
        .into_iter()
        .map(|object| object.map(|object| (object.kind, object.body)))
        .collect()
}

fn expected(objects: &[&EncodedObject]) -> Vec<Option<(ObjectKind, Vec<u8>)>> {
    objects
        .iter()
        .map(|object| Some((object.kind, object.body.clone())))
        .collect()
}

fn read_ref(harness: &dyn Harness, store: &dyn ObjectStore, refname: &RefName) -> Option<RefValue> {
    store
        .read_ref(refname, harness.deadline())
        .unwrap_or_else(|error| panic!("read_ref {refname} failed: {error}"))
}

fn create_ref(
    harness: &dyn Harness,
    store: &dyn ObjectStore,
    refname: &RefName,
    value: &ObjectId,
) -> RefUpdate {
    store
        .create_ref(refname, value, harness.deadline())
        .unwrap_or_else(|error| panic!("create_ref {refname} failed: {error}"))
}

fn swap(
    harness: &dyn Harness,
    store: &dyn ObjectStore,
    refname: &RefName,
    from: &ObjectId,
    to: &ObjectId,
) -> RefUpdate {
    store
        .compare_and_swap_ref(refname, from, to, harness.deadline())
        .unwrap_or_else(|error| panic!("compare_and_swap_ref {refname} failed: {error}"))
}

#[track_caller]
fn assert_code<T: Debug>(result: Result<T, ObjectStoreError>, code: &str, what: &str) {
    match result {
        Ok(value) => panic!("{what}: expected the error {code:?}, got Ok({value:?})"),
        Err(error) => assert_eq!(error.code(), code, "{what}: wrong error: {error}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Cases: lifecycle

/// Creating a root where one was created fails `exists` and leaves the first root intact.
pub fn create_twice_is_exists(harness: &dyn Harness) {
    let closure = Closure::new("create twice");
    let first = create(harness);
    write(harness, first.as_ref(), &closure.objects());
    let path = first.root().path.clone();
    assert_code(
        harness
            .factory()
            .create(&path, harness.deadline())
            .map(|store| store.root().clone()),
        "exists",
        "second create on one path",
    );
    assert_eq!(
        read(harness, first.as_ref(), &closure.ids()),
        expected(&[
            &closure.blob,
            &closure.subtree,
            &closure.tree,
            &closure.commit
        ]),
        "the first root's objects survive a refused create"
    );
}

/// A relative path is `invalid-input`.
pub fn create_relative_path_is_invalid_input(harness: &dyn Harness) {
    assert_code(
        harness
            .factory()
            .create(
                std::path::Path::new("sf-conformance/relative"),
                harness.deadline(),
            )
            .map(|store| store.root().clone()),
        "invalid-input",
        "create with a relative path",
    );
}

/// A fresh store's root is at the path it was created at.
pub fn fresh_root_has_the_given_path(harness: &dyn Harness) {
    let path = harness.fresh_path();
    let store = harness
        .factory()
        .create(&path, harness.deadline())
        .unwrap_or_else(|error| panic!("create {} failed: {error}", path.display()));
    assert_eq!(store.root().path, path);
}

/// A root that was never marked never opens.
pub fn open_unmarked_root_is_unavailable(harness: &dyn Harness) {
    let created = create(harness);
    write(
        harness,
        created.as_ref(),
        &Closure::new("unmarked").objects(),
    );
    for marker in [MARKER, b""] {
        assert_code(
            open(harness, created.root(), marker).map(|store| store.root().clone()),
            "unavailable",
            "open of an unmarked root",
        );
    }
}

/// Open checks the marker byte for byte and the root's identity; the right marker opens a
/// store that shares objects and refs with the creating one, both ways.
pub fn open_checks_marker_and_identity(harness: &dyn Harness) {
    let closure = Closure::new("open");
    let main = name("refs/heads/main");
    let created = create(harness);
    write(harness, created.as_ref(), &closure.objects());
    assert_eq!(
        create_ref(harness, created.as_ref(), &main, &closure.commit.id),
        RefUpdate::Applied
    );
    created
        .mark(MARKER, harness.deadline())
        .unwrap_or_else(|error| panic!("mark failed: {error}"));
    let root = created.root().clone();

    let mut longer = MARKER.to_vec();
    longer.push(b'x');
    let wrong_markers: [&[u8]; 4] = [
        b"another marker\n",
        &MARKER[..MARKER.len() - 1],
        &longer,
        b"",
    ];
    for marker in wrong_markers {
        assert_code(
            open(harness, &root, marker).map(|store| store.root().clone()),
            "unavailable",
            &format!(
                "open with the wrong marker {:?}",
                String::from_utf8_lossy(marker)
            ),
        );
    }
    let other_inode = StoreRoot {
        ino: root.ino.wrapping_add(1),
        ..root.clone()
    };
    assert_code(
        open(harness, &other_inode, MARKER).map(|store| store.root().clone()),
        "unavailable",
        "open with another inode",
    );

    let opened = open(harness, &root, MARKER)
        .unwrap_or_else(|error| panic!("open with the right marker failed: {error}"));
    assert_eq!(
        opened.root(),
        &root,
        "an opened store owns the root it opened"
    );
    assert_eq!(
        read(harness, opened.as_ref(), &closure.ids()),
        expected(&[
            &closure.blob,
            &closure.subtree,
            &closure.tree,
            &closure.commit
        ]),
        "the opened store sees the objects written before"
    );
    assert_eq!(
        read_ref(harness, opened.as_ref(), &main),
        Some(RefValue::Direct(closure.commit.id)),
        "the opened store sees the ref created before"
    );

    // And the other way: what the opened store writes, the creating store (now marked) sees.
    let next = Closure::new("open, second");
    write(harness, opened.as_ref(), &next.objects());
    assert_eq!(
        swap(
            harness,
            opened.as_ref(),
            &main,
            &closure.commit.id,
            &next.commit.id
        ),
        RefUpdate::Applied
    );
    assert_eq!(
        read(harness, created.as_ref(), &[next.commit.id]),
        expected(&[&next.commit]),
        "the creating store sees objects written through the opened one"
    );
    assert_eq!(
        read_ref(harness, created.as_ref(), &main),
        Some(RefValue::Direct(next.commit.id)),
        "the creating store sees a ref moved through the opened one"
    );
}

/// A second `mark` is refused and leaves the first marker in force.
pub fn mark_twice_is_refused(harness: &dyn Harness) {
    let created = create(harness);
    created
        .mark(MARKER, harness.deadline())
        .unwrap_or_else(|error| panic!("first mark failed: {error}"));
    let second = created.mark(b"a second marker\n", harness.deadline());
    assert!(second.is_err(), "a second mark was accepted");
    assert_code(
        open(harness, created.root(), b"a second marker\n").map(|store| store.root().clone()),
        "unavailable",
        "open with the refused second marker",
    );
    open(harness, created.root(), MARKER)
        .unwrap_or_else(|error| panic!("the first marker no longer opens the root: {error}"));
}

// ---------------------------------------------------------------------------------------------
// Cases: objects

/// Blobs, trees and commits read back with their kinds and exact bytes, including a commit
/// whose tree and parent were written by an earlier call.
pub fn objects_round_trip(harness: &dyn Harness) {
    let closure = Closure::new("round trip");
    let store = create(harness);
    write(harness, store.as_ref(), &closure.objects());
    let child = EncodedObject::new(
        ObjectKind::Commit,
        encode_commit(&commit_of(
            closure.tree.id,
            vec![closure.commit.id],
            "round trip, child",
        )),
    );
    write(harness, store.as_ref(), std::slice::from_ref(&child));
    let all = [
        &closure.blob,
        &closure.subtree,
        &closure.tree,
        &closure.commit,
        &child,
    ];
    let ids: Vec<ObjectId> = all.iter().map(|object| object.id).collect();
    assert_eq!(read(harness, store.as_ref(), &ids), expected(&all));
    for object in all {
        assert_eq!(
            object_id(object.kind, &object.body),
            object.id,
            "fixture ids are the host's"
        );
    }
}

/// A commit recorded as a history boundary is written and read back though its parent is in
/// no store (an imported base); recording it again changes nothing. The factory says its
/// stores hold boundaries, as the host asks before it creates a root that needs one.
pub fn a_boundary_commit_is_written_without_its_parents(harness: &dyn Harness) {
    harness
        .factory()
        .supports_boundaries()
        .unwrap_or_else(|error| panic!("a store holding boundaries says it does not: {error}"));
    let closure = Closure::new("boundary");
    let store = create(harness);
    let absent_parent = object_id(ObjectKind::Commit, b"a parent no store holds");
    let imported = EncodedObject::new(
        ObjectKind::Commit,
        encode_commit(&commit_of(
            closure.tree.id,
            vec![absent_parent],
            "boundary, imported",
        )),
    );
    let mut objects = vec![
        closure.blob.clone(),
        closure.subtree.clone(),
        closure.tree.clone(),
    ];
    objects.push(imported.clone());
    for _ in 0..2 {
        store
            .record_boundaries(&[imported.id], harness.deadline())
            .expect("recording a boundary");
    }
    write(harness, store.as_ref(), &objects);
    assert_eq!(
        read(harness, store.as_ref(), &[imported.id]),
        expected(&[&imported]),
        "the boundary commit reads back"
    );
    // The boundary is part of the root: it still opens, and the commit still reads.
    store
        .mark(MARKER, harness.deadline())
        .unwrap_or_else(|error| panic!("mark failed: {error}"));
    let reopened = open(harness, store.root(), MARKER)
        .unwrap_or_else(|error| panic!("a root with a boundary does not open: {error}"));
    assert_eq!(
        read(harness, reopened.as_ref(), &[imported.id]),
        expected(&[&imported])
    );
}

/// Writing objects that are already present succeeds and changes nothing.
pub fn write_objects_is_idempotent(harness: &dyn Harness) {
    let closure = Closure::new("idempotent");
    let store = create(harness);
    write(harness, store.as_ref(), &closure.objects());
    write(harness, store.as_ref(), &closure.objects());
    write(harness, store.as_ref(), std::slice::from_ref(&closure.blob));
    assert_eq!(
        read(harness, store.as_ref(), &closure.ids()),
        expected(&[
            &closure.blob,
            &closure.subtree,
            &closure.tree,
            &closure.commit
        ])
    );
}

/// An object whose id is not the hash of its bytes is `invalid-input`, and nothing of the
/// write is readable afterwards: not the forged object under either id, not the honest
/// object written beside it.
pub fn forged_object_is_refused(harness: &dyn Harness) {
    let store = create(harness);
    let honest = EncodedObject::new(ObjectKind::Blob, b"conformance honest blob\n".to_vec());
    let claimed = object_id(ObjectKind::Blob, b"conformance claimed blob\n");
    let forged = EncodedObject {
        kind: ObjectKind::Blob,
        id: claimed,
        body: b"conformance forged blob\n".to_vec(),
    };
    let true_id = object_id(forged.kind, &forged.body);
    assert_code(
        store.write_objects(&[honest.clone(), forged], harness.deadline()),
        "invalid-input",
        "write of a forged object",
    );
    assert_eq!(
        read(harness, store.as_ref(), &[claimed, true_id, honest.id]),
        vec![None, None, None],
        "a refused write left objects readable"
    );
}

/// A missing object reads as `None`, beside present ones.
pub fn missing_object_reads_none(harness: &dyn Harness) {
    let closure = Closure::new("missing");
    let store = create(harness);
    write(harness, store.as_ref(), &closure.objects());
    let missing = object_id(ObjectKind::Blob, b"conformance: never written\n");
    assert_eq!(
        read(harness, store.as_ref(), &[missing]),
        vec![None],
        "a missing object"
    );
    assert_eq!(
        read(harness, store.as_ref(), &[closure.blob.id, missing]),
        vec![Some((ObjectKind::Blob, closure.blob.body.clone())), None]
    );
}

/// Ids come back in the order asked, duplicates included.
pub fn duplicate_ids_read_in_order(harness: &dyn Harness) {
    let closure = Closure::new("order");
    let store = create(harness);
    write(harness, store.as_ref(), &closure.objects());
    let missing = object_id(ObjectKind::Tree, b"conformance: no such tree");
    let ids = [
        closure.commit.id,
        closure.blob.id,
        closure.commit.id,
        missing,
        closure.tree.id,
        closure.blob.id,
    ];
    let mut wanted = expected(&[&closure.commit, &closure.blob, &closure.commit]);
    wanted.push(None);
    wanted.extend(expected(&[&closure.tree, &closure.blob]));
    assert_eq!(read(harness, store.as_ref(), &ids), wanted);
}

/// The budget is the bodies plus 64 bytes per unique id, exactly: that much is enough, one
/// byte less is `limit`, and a duplicate id costs nothing more.
pub fn read_budget_is_exact(harness: &dyn Harness) {
    let closure = Closure::new("budget");
    let store = opened_with(harness, &closure);
    let deadline = harness.deadline();
    let blob_len = closure.blob.body.len() as u64;
    let single = blob_len + READ_FRAMING_BYTES;

    let answer = store
        .read_objects(&[closure.blob.id], single, deadline)
        .unwrap_or_else(|error| panic!("a read within its budget ({single}) failed: {error}"));
    assert_eq!(answer.len(), 1);
    assert_code(
        store.read_objects(&[closure.blob.id], single - 1, deadline),
        "limit",
        "a read one byte over its budget",
    );
    let twice = store
        .read_objects(&[closure.blob.id, closure.blob.id], single, deadline)
        .unwrap_or_else(|error| {
            panic!("a duplicate id was charged twice (budget {single}): {error}")
        });
    assert_eq!(twice.len(), 2);

    let pair = [closure.blob.id, closure.tree.id];
    let both = single + closure.tree.body.len() as u64 + READ_FRAMING_BYTES;
    store
        .read_objects(&pair, both, deadline)
        .unwrap_or_else(|error| panic!("a two-object read within its budget failed: {error}"));
    assert_code(
        store.read_objects(&pair, both - 1, deadline),
        "limit",
        "a two-object read one byte over its budget",
    );
}

// ---------------------------------------------------------------------------------------------
// Cases: refs

/// An absent ref reads as `None`.
pub fn absent_ref_reads_none(harness: &dyn Harness) {
    let closure = Closure::new("absent ref");
    let store = opened_with(harness, &closure);
    assert_eq!(
        read_ref(harness, store.as_ref(), &name("refs/heads/absent")),
        None
    );
}

/// `create_ref` applies once; a second create, even of the same value, is refused with the
/// current value and changes nothing.
pub fn create_ref_applies_once(harness: &dyn Harness) {
    let first = Closure::new("create ref");
    let second = Closure::new("create ref, second");
    let store = opened_with(harness, &first);
    write(harness, store.as_ref(), &second.objects());
    let refname = name("refs/heads/main");
    let current = Some(RefValue::Direct(first.commit.id));

    assert_eq!(
        create_ref(harness, store.as_ref(), &refname, &first.commit.id),
        RefUpdate::Applied
    );
    assert_eq!(read_ref(harness, store.as_ref(), &refname), current);
    assert_eq!(
        create_ref(harness, store.as_ref(), &refname, &first.commit.id),
        RefUpdate::Refused {
            current: current.clone()
        },
        "a second create with the same value"
    );
    assert_eq!(
        create_ref(harness, store.as_ref(), &refname, &second.commit.id),
        RefUpdate::Refused {
            current: current.clone()
        },
        "a second create with another value"
    );
    assert_eq!(read_ref(harness, store.as_ref(), &refname), current);
}

/// `compare_and_swap_ref` moves a ref only from the expected value; otherwise it is refused
/// with the current value (`None` for an absent ref) and nothing changes.
pub fn compare_and_swap_moves_only_from_expected(harness: &dyn Harness) {
    let first = Closure::new("swap");
    let second = Closure::new("swap, second");
    let third = Closure::new("swap, third");
    let store = opened_with(harness, &first);
    write(harness, store.as_ref(), &second.objects());
    write(harness, store.as_ref(), &third.objects());
    let refname = name("refs/heads/main");
    let (a, b, c) = (first.commit.id, second.commit.id, third.commit.id);

    assert_eq!(
        create_ref(harness, store.as_ref(), &refname, &a),
        RefUpdate::Applied
    );
    assert_eq!(
        swap(harness, store.as_ref(), &refname, &a, &b),
        RefUpdate::Applied
    );
    assert_eq!(
        read_ref(harness, store.as_ref(), &refname),
        Some(RefValue::Direct(b))
    );
    assert_eq!(
        swap(harness, store.as_ref(), &refname, &a, &c),
        RefUpdate::Refused {
            current: Some(RefValue::Direct(b))
        },
        "a swap from a stale value"
    );
    assert_eq!(
        read_ref(harness, store.as_ref(), &refname),
        Some(RefValue::Direct(b)),
        "a refused swap moved the ref"
    );

    let absent = name("refs/heads/absent");
    assert_eq!(
        swap(harness, store.as_ref(), &absent, &a, &b),
        RefUpdate::Refused { current: None },
        "a swap of an absent ref"
    );
    assert_eq!(
        read_ref(harness, store.as_ref(), &absent),
        None,
        "a refused swap created the ref"
    );
}

/// A symbolic ref reads as symbolic, and a compare-and-swap of it is refused before anything
/// starts (`symbolic-ref`), leaving it as it was: integration relies on never moving or
/// dereferencing one.
pub fn compare_and_swap_refuses_a_symbolic_ref(harness: &dyn Harness) {
    let first = Closure::new("symbolic");
    let second = Closure::new("symbolic, second");
    let store = opened_with(harness, &first);
    write(harness, store.as_ref(), &second.objects());
    let target = name("refs/heads/main");
    let link = name("refs/heads/link");
    assert_eq!(
        create_ref(harness, store.as_ref(), &target, &first.commit.id),
        RefUpdate::Applied
    );
    assert!(
        harness.make_symbolic_ref(store.as_ref(), &link, target.as_str()),
        "the harness cannot make a symbolic ref; implement Harness::make_symbolic_ref"
    );
    assert_eq!(
        read_ref(harness, store.as_ref(), &link),
        Some(RefValue::Symbolic(target.as_str().to_owned()))
    );
    let result = store.compare_and_swap_ref(
        &link,
        &first.commit.id,
        &second.commit.id,
        harness.deadline(),
    );
    assert_code(result, "symbolic-ref", "a swap of a symbolic ref");
    assert_eq!(
        read_ref(harness, store.as_ref(), &target),
        Some(RefValue::Direct(first.commit.id)),
        "a refused swap of a symbolic ref moved its target"
    );
    assert_eq!(
        create_ref(harness, store.as_ref(), &link, &second.commit.id),
        RefUpdate::Refused {
            current: Some(RefValue::Symbolic(target.as_str().to_owned()))
        },
        "a create over a symbolic ref"
    );
}

/// `list_refs` answers exactly the refs under the prefix, sorted by name.
pub fn list_refs_filters_and_sorts(harness: &dyn Harness) {
    let first = Closure::new("list");
    let second = Closure::new("list, second");
    let store = opened_with(harness, &first);
    write(harness, store.as_ref(), &second.objects());
    let (a, b) = (first.commit.id, second.commit.id);
    // Created out of order; `a-b` sorts before `b` and after `a`, `c/d` after `b`.
    let inside = [
        ("refs/conformance/list/b", a),
        ("refs/conformance/list/c/d", b),
        ("refs/conformance/list/a-b", b),
        ("refs/conformance/list/a", a),
    ];
    let outside = [
        ("refs/conformance/listing", a),
        ("refs/conformance/other/list", b),
        ("refs/heads/main", a),
    ];
    for (refname, value) in inside.iter().chain(&outside) {
        assert_eq!(
            create_ref(harness, store.as_ref(), &name(refname), value),
            RefUpdate::Applied
        );
    }
    let mut wanted: Vec<(RefName, RefValue)> = inside
        .iter()
        .map(|(refname, value)| (name(refname), RefValue::Direct(*value)))
        .collect();
    wanted.sort_by(|left, right| left.0.cmp(&right.0));
    let listed = store
        .list_refs("refs/conformance/list/", harness.deadline())
        .unwrap_or_else(|error| panic!("list_refs failed: {error}"));
    assert_eq!(listed, wanted);

    let all = store
        .list_refs("refs/", harness.deadline())
        .unwrap_or_else(|error| panic!("list_refs refs/ failed: {error}"));
    let names: Vec<&str> = all.iter().map(|(refname, _)| refname.as_str()).collect();
    assert_eq!(
        names,
        [
            "refs/conformance/list/a",
            "refs/conformance/list/a-b",
            "refs/conformance/list/b",
            "refs/conformance/list/c/d",
            "refs/conformance/listing",
            "refs/conformance/other/list",
            "refs/heads/main",
        ]
    );
    let none = store
        .list_refs("refs/conformance/empty/", harness.deadline())
        .unwrap_or_else(|error| panic!("list_refs of an empty prefix failed: {error}"));
    assert_eq!(none, vec![]);
}

/// A prefix that does not start with `refs/` or does not end in `/` is `invalid-input`.
pub fn list_refs_refuses_bad_prefixes(harness: &dyn Harness) {
    let closure = Closure::new("bad prefix");
    let store = opened_with(harness, &closure);
    assert_eq!(
        create_ref(
            harness,
            store.as_ref(),
            &name("refs/heads/main"),
            &closure.commit.id
        ),
        RefUpdate::Applied
    );
    for prefix in ["refs/heads", "heads/", "", "refs"] {
        assert_code(
            store.list_refs(prefix, harness.deadline()),
            "invalid-input",
            &format!("list_refs with the prefix {prefix:?}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{self, AssertUnwindSafe};

    use crate::panic_payload;
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};

    use sf_contracts::StoredObject;

    use super::*;
    use crate::testing::InMemoryObjectStoreFactory;

    struct Memory<F> {
        factory: F,
        next: AtomicU64,
        /// Shares the roots of `factory`, to tamper with them.
        roots: InMemoryObjectStoreFactory,
    }

    impl<F: ObjectStoreFactory> Harness for Memory<F> {
        fn factory(&self) -> &dyn ObjectStoreFactory {
            &self.factory
        }

        fn fresh_path(&self) -> PathBuf {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            PathBuf::from(format!("/memory/conformance/repo-{n}"))
        }

        fn make_symbolic_ref(&self, store: &dyn ObjectStore, name: &RefName, target: &str) -> bool {
            self.roots
                .store_at(&store.root().path)
                .is_some_and(|store| store.set_symbolic_ref(name, target))
        }
    }

    fn memory<F>(factory: F, roots: InMemoryObjectStoreFactory) -> Memory<F> {
        Memory {
            factory,
            next: AtomicU64::new(0),
            roots,
        }
    }

    fn plain_memory() -> Memory<InMemoryObjectStoreFactory> {
        let factory = InMemoryObjectStoreFactory::new();
        memory(factory.clone(), factory)
    }

    #[test]
    fn every_case_runs_by_name() {
        let harness = plain_memory();
        for (name, _) in CASES {
            run_case(&harness, name);
        }
    }

    /// One way to get the contract wrong, to show the suite notices it.
    #[derive(Clone, Copy)]
    enum Flaw {
        BudgetOffByOne,
        CreateRefOverwrites,
        SwapIgnoresExpected,
        IgnoresMarker,
        UnsortedList,
        AcceptsForgery,
    }

    struct Flawed {
        inner: InMemoryObjectStoreFactory,
        flaw: Flaw,
    }

    struct FlawedStore {
        inner: Box<dyn ObjectStore>,
        flaw: Flaw,
    }

    impl ObjectStoreFactory for Flawed {
        fn create(
            &self,
            path: &Path,
            deadline: Instant,
        ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
            let inner = self.inner.create(path, deadline)?;
            Ok(Box::new(FlawedStore {
                inner,
                flaw: self.flaw,
            }))
        }

        fn open(
            &self,
            root: &StoreRoot,
            marker: &[u8],
            deadline: Instant,
        ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
            let inner = match self.flaw {
                Flaw::IgnoresMarker => Box::new(self.inner.store_at(&root.path).unwrap()),
                _ => self.inner.open(root, marker, deadline)?,
            };
            Ok(Box::new(FlawedStore {
                inner,
                flaw: self.flaw,
            }))
        }
    }

    impl ObjectStore for FlawedStore {
        fn root(&self) -> &StoreRoot {
            self.inner.root()
        }

        fn mark(&self, marker: &[u8], deadline: Instant) -> Result<(), ObjectStoreError> {
            self.inner.mark(marker, deadline)
        }

        fn write_objects(
            &self,
            objects: &[EncodedObject],
            deadline: Instant,
        ) -> Result<(), ObjectStoreError> {
            if let Flaw::AcceptsForgery = self.flaw {
                let honest: Vec<EncodedObject> = objects
                    .iter()
                    .map(|object| EncodedObject::new(object.kind, object.body.clone()))
                    .collect();
                return self.inner.write_objects(&honest, deadline);
            }
            self.inner.write_objects(objects, deadline)
        }

        fn read_objects(
            &self,
            ids: &[ObjectId],
            budget: u64,
            deadline: Instant,
        ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
            let budget = match self.flaw {
                Flaw::BudgetOffByOne => budget + 1,
                _ => budget,
            };
            self.inner.read_objects(ids, budget, deadline)
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
            let mut refs = self.inner.list_refs(prefix, deadline)?;
            if let Flaw::UnsortedList = self.flaw {
                refs.reverse();
            }
            Ok(refs)
        }

        fn create_ref(
            &self,
            name: &RefName,
            value: &ObjectId,
            deadline: Instant,
        ) -> Result<RefUpdate, ObjectStoreError> {
            if let (Flaw::CreateRefOverwrites, Some(RefValue::Direct(current))) =
                (self.flaw, self.inner.read_ref(name, deadline)?)
            {
                return self
                    .inner
                    .compare_and_swap_ref(name, &current, value, deadline);
            }
            self.inner.create_ref(name, value, deadline)
        }

        fn compare_and_swap_ref(
            &self,
            name: &RefName,
            expected: &ObjectId,
            new: &ObjectId,
            deadline: Instant,
        ) -> Result<RefUpdate, ObjectStoreError> {
            if let (Flaw::SwapIgnoresExpected, Some(RefValue::Direct(current))) =
                (self.flaw, self.inner.read_ref(name, deadline)?)
            {
                return self
                    .inner
                    .compare_and_swap_ref(name, &current, new, deadline);
            }
            self.inner
                .compare_and_swap_ref(name, expected, new, deadline)
        }
    }

    #[test]
    fn the_suite_catches_flawed_stores() {
        let cases = [
            (Flaw::BudgetOffByOne, "read_budget_is_exact"),
            (Flaw::CreateRefOverwrites, "create_ref_applies_once"),
            (
                Flaw::SwapIgnoresExpected,
                "compare_and_swap_moves_only_from_expected",
            ),
            (Flaw::IgnoresMarker, "open_checks_marker_and_identity"),
            (Flaw::UnsortedList, "list_refs_filters_and_sorts"),
            (Flaw::AcceptsForgery, "forged_object_is_refused"),
        ];
        for (flaw, case) in cases {
            let roots = InMemoryObjectStoreFactory::new();
            let harness = memory(
                Flawed {
                    inner: roots.clone(),
                    flaw,
                },
                roots,
            );
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| run_case(&harness, case)));
            assert!(outcome.is_err(), "{case} passed a flawed store");
            let all = panic::catch_unwind(AssertUnwindSafe(|| run_all(&harness)));
            let message = panic_payload::message(all.unwrap_err().as_ref());
            assert!(message.contains(case), "{message}");
        }
    }
}
