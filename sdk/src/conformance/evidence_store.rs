//! The EvidenceStore conformance suite.
//!
//! Every case gets a fresh, empty store from [`Harness::fresh_store`]. The corruption cases
//! need [`Harness::corrupt`], which changes a stored record's bytes from outside (as a
//! damaged disk or an intruder would); a harness that cannot do it fails those cases.
//!
//! ```no_run
//! # use sf_sdk::conformance::evidence_store::Harness;
//! # use sf_sdk::contracts::EvidenceStore;
//! # use sf_sdk::testing::InMemoryEvidenceStore;
//! # use sf_contracts::canonical::Digest;
//! # use std::sync::Arc;
//! struct Memory;
//! impl Harness for Memory {
//!     fn fresh_store(&self) -> Arc<dyn EvidenceStore> { Arc::new(InMemoryEvidenceStore::new()) }
//!     fn corrupt(&self, store: &Arc<dyn EvidenceStore>, id: &Digest) -> bool { false }
//! }
//! // In a test crate: one #[test] per case.
//! sf_sdk::evidence_store_conformance!(|| Memory);
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use sf_contracts::canonical::Digest;
use sf_contracts::{AttemptId, EvidenceRecord, EvidenceStore};

/// What a backend's test supplies to run the suite against it.
pub trait Harness {
    /// A fresh, empty store.
    fn fresh_store(&self) -> Arc<dyn EvidenceStore>;

    /// Changes the bytes stored under `id` in `store` (a store made by this harness) so that
    /// they no longer hash to `id`, from outside the store's API. Returns false when the
    /// backend offers no way to do it; the corruption cases then fail.
    fn corrupt(&self, store: &Arc<dyn EvidenceStore>, id: &Digest) -> bool;

    /// The deadline each call gets: two minutes from now by default.
    fn deadline(&self) -> Instant {
        Instant::now() + Duration::from_secs(120)
    }
}

/// One case of the suite: it panics, naming what went wrong, if the backend fails it.
pub type Case = fn(&dyn Harness);

super::suite! {
    [$]
    /// One `#[test]` per case of the EvidenceStore suite
    /// ([`conformance::evidence_store`](crate::conformance::evidence_store)), each named after
    /// its case and given a fresh harness from the argument: a closure or function returning
    /// an [`evidence_store::Harness`](crate::conformance::evidence_store::Harness). Takes
    /// `ignore: { case: "reason" }` after the harness, as
    /// [`object_store_conformance!`](crate::object_store_conformance) does.
    macro evidence_store_conformance, helper __sf_evidence_store_case, suite evidence_store;
    cases: [
        put_returns_the_sha256_of_the_bytes,
        get_returns_the_exact_record,
        identical_put_is_one_record,
        get_of_an_unknown_id_is_missing,
        find_lists_by_pins_in_stored_order,
        find_of_unknown_pins_is_empty,
        large_payload_round_trips,
        concurrent_identical_puts_converge,
        a_passed_deadline_stores_nothing,
        corrupt_bytes_are_reported_never_repaired,
        put_over_different_bytes_is_conflict,
    ]
}

/// Runs every case in [`CASES`], then panics naming each case that failed (with its message)
/// if any did.
pub fn run_all(harness: &dyn Harness) {
    super::run_cases("evidence-store", CASES, harness);
}

/// Runs the case called `name`; panics if there is none.
pub fn run_case(harness: &dyn Harness, name: &str) {
    super::run_named("evidence-store", CASES, harness, name);
}

// ---------------------------------------------------------------------------------------------
// Fixtures

const FORMAT: &str = "sf-conformance-payload/1";

fn pins(n: u8) -> Digest {
    Digest::of(&[b'p', n])
}

fn attempt(epoch: u64) -> AttemptId {
    AttemptId {
        product: "conformance".into(),
        epoch,
    }
}

fn record(pins: &Digest, payload: &[u8]) -> EvidenceRecord {
    EvidenceRecord::new(pins.clone(), attempt(1), FORMAT, payload)
        .expect("a fixture record encodes")
}

// ---------------------------------------------------------------------------------------------
// Cases

/// `put` answers the `sha256:` of the record's exact bytes.
pub fn put_returns_the_sha256_of_the_bytes(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let record = record(&pins(1), b"payload");
    let id = store.put(&record, harness.deadline()).expect("put");
    assert_eq!(id, Digest::of(record.bytes()));
    assert_eq!(id, record.id());
}

/// `get` gives back exactly the bytes put, with the same pins, attempt, format and payload.
pub fn get_returns_the_exact_record(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let record = record(&pins(1), b"\x00\xffbinary\nbytes");
    let id = store.put(&record, harness.deadline()).expect("put");
    let read = store.get(&id, harness.deadline()).expect("get");
    assert_eq!(read.bytes(), record.bytes());
    assert_eq!(read.pins(), record.pins());
    assert_eq!(read.attempt(), record.attempt());
    assert_eq!(read.format(), FORMAT);
    assert_eq!(read.payload(), b"\x00\xffbinary\nbytes");
}

/// An identical put returns the same id and stores nothing new.
pub fn identical_put_is_one_record(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let record = record(&pins(1), b"same");
    let first = store.put(&record, harness.deadline()).expect("first put");
    let second = store
        .put(&record, harness.deadline())
        .expect("identical put");
    assert_eq!(first, second);
    assert_eq!(
        store.find(&pins(1), harness.deadline()).expect("find"),
        vec![first]
    );
}

/// `get` of an id nothing was stored under is `missing`.
pub fn get_of_an_unknown_id_is_missing(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let error = store
        .get(&Digest::of(b"nothing"), harness.deadline())
        .expect_err("nothing is stored");
    assert_eq!(error.code(), "missing", "{error}");
}

/// `find` lists exactly the records filed under the pins, in the order first stored.
pub fn find_lists_by_pins_in_stored_order(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let deadline = harness.deadline();
    let mut expected_one = Vec::new();
    let mut expected_two = Vec::new();
    for n in 0..6u8 {
        let filed = pins(1 + n % 2);
        let id = store
            .put(&record(&filed, &[b'z' - n]), deadline)
            .expect("put");
        if n % 2 == 0 {
            expected_one.push(id);
        } else {
            expected_two.push(id);
        }
    }
    // A replay does not move a record in the order.
    store
        .put(&record(&pins(1), b"z"), deadline)
        .expect("replay");
    assert_eq!(store.find(&pins(1), deadline).expect("find"), expected_one);
    assert_eq!(store.find(&pins(2), deadline).expect("find"), expected_two);
}

/// `find` of pins nothing is filed under is empty, not an error.
pub fn find_of_unknown_pins_is_empty(harness: &dyn Harness) {
    let store = harness.fresh_store();
    store
        .put(&record(&pins(1), b"x"), harness.deadline())
        .expect("put");
    assert!(
        store
            .find(&pins(9), harness.deadline())
            .expect("find")
            .is_empty()
    );
}

/// A record of several MiB round-trips byte for byte.
pub fn large_payload_round_trips(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let payload: Vec<u8> = (0..4 * 1024 * 1024u32).map(|n| (n % 251) as u8).collect();
    let record = record(&pins(1), &payload);
    let id = store.put(&record, harness.deadline()).expect("put");
    assert_eq!(
        store.get(&id, harness.deadline()).expect("get").payload(),
        payload.as_slice()
    );
}

/// Identical puts from several threads at once converge on one record.
pub fn concurrent_identical_puts_converge(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let record = record(&pins(1), b"raced");
    let deadline = harness.deadline();
    let ids: Vec<Digest> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| store.put(&record, deadline).expect("racing put")))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("no panic"))
            .collect()
    });
    assert!(ids.iter().all(|id| *id == record.id()));
    assert_eq!(
        store.find(&pins(1), deadline).expect("find"),
        vec![record.id()]
    );
}

/// A call whose deadline has passed fails and stores nothing.
pub fn a_passed_deadline_stores_nothing(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let record = record(&pins(1), b"late");
    let passed = Instant::now() - Duration::from_millis(1);
    assert!(store.put(&record, passed).is_err());
    assert!(
        store
            .find(&pins(1), harness.deadline())
            .expect("find")
            .is_empty()
    );
}

/// Bytes changed under an id are `corrupt` on every read, and stay as they are.
pub fn corrupt_bytes_are_reported_never_repaired(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let record = record(&pins(1), b"to be damaged");
    let id = store.put(&record, harness.deadline()).expect("put");
    assert!(
        harness.corrupt(&store, &id),
        "the harness must be able to corrupt a record"
    );
    for _ in 0..2 {
        let error = store
            .get(&id, harness.deadline())
            .expect_err("corrupt bytes are never returned");
        assert_eq!(error.code(), "corrupt", "{error}");
    }
    // Still listed: reported, never removed or repaired.
    assert_eq!(
        store.find(&pins(1), harness.deadline()).expect("find"),
        vec![id]
    );
}

/// A put of a record whose id already holds different bytes is `conflict`, and the stored
/// bytes stay as they are.
pub fn put_over_different_bytes_is_conflict(harness: &dyn Harness) {
    let store = harness.fresh_store();
    let record = record(&pins(1), b"original");
    let id = store.put(&record, harness.deadline()).expect("put");
    assert!(
        harness.corrupt(&store, &id),
        "the harness must be able to corrupt a record"
    );
    let error = store
        .put(&record, harness.deadline())
        .expect_err("different bytes are held under the id");
    assert_eq!(error.code(), "conflict", "{error}");
    assert_eq!(
        store
            .get(&id, harness.deadline())
            .expect_err("still corrupt")
            .code(),
        "corrupt"
    );
}
