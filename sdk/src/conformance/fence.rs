//! The AttemptFence conformance suite.
//!
//! Holds are per Candidate of a Product; the cases take [`candidate`]`("conformance")` unless
//! they say otherwise. Every case gets a fresh fence (no epoch handed out for any Product) from
//! [`Harness::fresh_fence`]. A second collector is a second handle on the same fence
//! ([`Harness::another_handle`]: another open of the directory, another database
//! connection). Two cases need the backend's own faults: [`Harness::lose`] makes an active
//! hold lost from outside the API (a lock file replaced, a database session terminated), and
//! [`Harness::kill_a_holder`] takes a fence in another process and kills that process with
//! SIGKILL while it holds.
//!
//! ```text
//! mod file {
//!     sf_sdk::fence_conformance!(|| FileHarness::new());
//! }
//! ```

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use sf_contracts::canonical::Digest;
use sf_contracts::fence::{AttemptFence, FenceError, FenceHold};

/// What a backend's test supplies to run the suite against it.
pub trait Harness {
    /// A fresh fence: no epoch handed out for any Product.
    fn fresh_fence(&self) -> Arc<dyn AttemptFence>;

    /// Another handle on the same fence as `fence` (a fence made by this harness), as a
    /// collector in another process or on another machine has.
    fn another_handle(&self, fence: &Arc<dyn AttemptFence>) -> Arc<dyn AttemptFence>;

    /// Makes `hold`, an active hold of `fence`, lost in the backend's own way, from outside
    /// the fence's API. Returns false when the backend offers no way; the case then fails.
    fn lose(&self, fence: &Arc<dyn AttemptFence>, hold: &dyn FenceHold) -> bool;

    /// Takes the fence of `product` (for the Candidate [`candidate`]`(`[`CANDIDATE`]`)`) in
    /// `fence` from another process, kills that process with SIGKILL while it holds, waits for
    /// it to be gone, and returns the epoch it held.
    fn kill_a_holder(&self, fence: &Arc<dyn AttemptFence>, product: &str) -> u64;

    /// How long a backend may take to notice that a holder is gone (its session closed);
    /// `acquire` is retried while `busy` for this long after a loss or a kill. 10 s by
    /// default.
    fn settle_time(&self) -> Duration {
        Duration::from_secs(10)
    }
}

/// One case of the suite: it panics, naming what went wrong, if the backend fails it.
pub type Case = fn(&dyn Harness);

super::suite! {
    [$]
    /// One `#[test]` per case of the AttemptFence suite
    /// ([`conformance::fence`](crate::conformance::fence)), each named after its case and
    /// given a fresh harness from the argument: a closure or function returning a
    /// [`fence::Harness`](crate::conformance::fence::Harness). Takes
    /// `ignore: { case: "reason" }` after the harness, as
    /// [`object_store_conformance!`](crate::object_store_conformance) does.
    macro fence_conformance, helper __sf_fence_case, suite fence;
    cases: [
        epochs_grow_by_one_per_hold,
        products_are_independent,
        a_second_holder_is_busy,
        candidates_of_a_product_hold_at_once,
        racing_acquires_have_one_winner,
        racing_candidates_take_one_epoch_each,
        a_released_hold_is_not_active,
        a_dropped_hold_frees_the_fence,
        a_lost_hold_is_not_active_and_stays_so,
        a_killed_holders_epoch_is_never_handed_out_again,
        bad_product_ids_are_invalid_input,
    ]
}

/// Runs every case in [`CASES`], then panics naming each case that failed (with its message)
/// if any did.
pub fn run_all(harness: &dyn Harness) {
    super::run_cases("fence", CASES, harness);
}

/// Runs the case called `name`; panics if there is none.
pub fn run_case(harness: &dyn Harness, name: &str) {
    super::run_named("fence", CASES, harness, name);
}

// ---------------------------------------------------------------------------------------------
// Fixtures

const PRODUCT: &str = "conformance";

/// The name of the Candidate the cases hold unless they say otherwise (and a killed holder
/// holds).
pub const CANDIDATE: &str = "conformance";

/// The Candidate digest the cases use for `name`.
pub fn candidate(name: &str) -> Digest {
    Digest::of(name.as_bytes())
}

fn acquire(fence: &dyn AttemptFence, product: &str) -> Box<dyn FenceHold> {
    acquire_for(fence, product, CANDIDATE)
}

fn acquire_for(fence: &dyn AttemptFence, product: &str, name: &str) -> Box<dyn FenceHold> {
    fence
        .acquire(product, &candidate(name))
        .unwrap_or_else(|error| panic!("acquire {product} for {name}: {error}"))
}

/// `acquire`, retried while `busy` for the harness's settle time (a backend may notice a
/// lost or killed holder a moment late; it must never hand the fence out early).
fn acquire_once_settled(
    harness: &dyn Harness,
    fence: &dyn AttemptFence,
    product: &str,
) -> Box<dyn FenceHold> {
    let until = Instant::now() + harness.settle_time();
    loop {
        match fence.acquire(product, &candidate(CANDIDATE)) {
            Ok(hold) => return hold,
            Err(FenceError::Busy { .. }) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(error) => panic!("acquire {product} after its holder was gone: {error}"),
        }
    }
}

fn assert_released(hold: &dyn FenceHold, when: &str) {
    let error = hold
        .assert_active()
        .expect_err(&format!("{when}, the hold is not active"));
    assert_eq!(error.code(), "released", "{when}: {error}");
}

// ---------------------------------------------------------------------------------------------
// Cases

/// Each hold's epoch is one more than the last, on any handle, and `last_epoch` says so.
pub fn epochs_grow_by_one_per_hold(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let other = harness.another_handle(&fence);
    assert_eq!(fence.last_epoch(PRODUCT).expect("last_epoch"), 0);
    for expected in 1..=3u64 {
        let handle = if expected % 2 == 0 { &other } else { &fence };
        let hold = acquire(handle.as_ref(), PRODUCT);
        assert_eq!(hold.attempt().epoch, expected);
        assert_eq!(hold.attempt().product, PRODUCT);
        hold.assert_active().expect("a new hold is active");
        assert_eq!(other.last_epoch(PRODUCT).expect("last_epoch"), expected);
        hold.release();
    }
    assert_eq!(fence.last_epoch(PRODUCT).expect("last_epoch"), 3);
}

/// Holds on two Products do not exclude each other, and each has its own epochs.
pub fn products_are_independent(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let first = acquire(fence.as_ref(), "product-a");
    let second = acquire(fence.as_ref(), "product-b");
    assert_eq!(first.attempt().epoch, 1);
    assert_eq!(second.attempt().epoch, 1);
    first.assert_active().expect("active");
    second.assert_active().expect("active");
    assert_eq!(fence.last_epoch("product-c").expect("last_epoch"), 0);
}

/// While a hold is active, a second acquire is `busy` on the same handle and on another,
/// and the hold stays active.
pub fn a_second_holder_is_busy(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let other = harness.another_handle(&fence);
    let hold = acquire(fence.as_ref(), PRODUCT);
    for handle in [&fence, &other] {
        let error = handle
            .acquire(PRODUCT, &candidate(CANDIDATE))
            .expect_err("the fence is held");
        assert_eq!(error.code(), "busy", "{error}");
    }
    hold.assert_active().expect("the holder is still active");
    assert_eq!(fence.last_epoch(PRODUCT).expect("last_epoch"), 1);
}

/// Holds on two Candidates of one Product are active at once, with the Product's next epochs;
/// each still excludes a second hold on its own Candidate, and ending one leaves the other.
pub fn candidates_of_a_product_hold_at_once(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let other = harness.another_handle(&fence);
    let first = acquire_for(fence.as_ref(), PRODUCT, "a");
    let second = acquire_for(other.as_ref(), PRODUCT, "b");
    assert_eq!(first.attempt().epoch, 1);
    assert_eq!(second.attempt().epoch, 2);
    assert_eq!(second.attempt().product, PRODUCT);
    first
        .assert_active()
        .expect("the first hold is active beside the second");
    second
        .assert_active()
        .expect("the second hold is active beside the first");
    for (handle, name) in [(&fence, "b"), (&other, "a")] {
        let error = handle
            .acquire(PRODUCT, &candidate(name))
            .expect_err("the Candidate is held");
        assert_eq!(error.code(), "busy", "{error}");
    }
    first.release();
    second
        .assert_active()
        .expect("ending another Candidate's hold leaves this one");
    let third = acquire_for(other.as_ref(), PRODUCT, "a");
    assert_eq!(third.attempt().epoch, 3);
    second.assert_active().expect("still active");
    assert_eq!(fence.last_epoch(PRODUCT).expect("last_epoch"), 3);
}

/// Eight handles racing for eight Candidates of one Product: every one wins, and the epochs
/// are one each, 1 to 8.
pub fn racing_candidates_take_one_epoch_each(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let handles: Vec<_> = (0..8).map(|_| harness.another_handle(&fence)).collect();
    let barrier = Barrier::new(handles.len());
    let holds: Vec<Box<dyn FenceHold>> = std::thread::scope(|scope| {
        let racers: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(index, handle)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    acquire_for(handle.as_ref(), PRODUCT, &format!("racer-{index}"))
                })
            })
            .collect();
        racers
            .into_iter()
            .map(|racer| racer.join().expect("every racer holds its own Candidate"))
            .collect()
    });
    let mut epochs: Vec<u64> = holds.iter().map(|hold| hold.attempt().epoch).collect();
    epochs.sort_unstable();
    assert_eq!(epochs, (1..=8).collect::<Vec<u64>>());
    for hold in &holds {
        hold.assert_active().expect("every racer's hold is active");
    }
}

/// Eight handles racing for one Candidate's fence: exactly one wins, the rest are `busy`.
pub fn racing_acquires_have_one_winner(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let handles: Vec<_> = (0..8).map(|_| harness.another_handle(&fence)).collect();
    let barrier = Barrier::new(handles.len());
    let outcomes: Vec<Result<Box<dyn FenceHold>, FenceError>> = std::thread::scope(|scope| {
        let racers: Vec<_> = handles
            .iter()
            .map(|handle| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    handle.acquire(PRODUCT, &candidate(CANDIDATE))
                })
            })
            .collect();
        racers
            .into_iter()
            .map(|racer| racer.join().expect("no panic"))
            .collect()
    });
    let mut winners = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(hold) => winners.push(hold),
            Err(error) => assert_eq!(error.code(), "busy", "{error}"),
        }
    }
    assert_eq!(winners.len(), 1, "one holder at a time");
    assert_eq!(winners[0].attempt().epoch, 1);
    winners[0].assert_active().expect("the winner is active");
}

/// A released hold is `released` from then on (release is idempotent), and the next
/// acquire gets the next epoch.
pub fn a_released_hold_is_not_active(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let hold = acquire(fence.as_ref(), PRODUCT);
    hold.release();
    assert_released(hold.as_ref(), "after release");
    hold.release();
    assert_released(hold.as_ref(), "after a second release");
    let next = acquire(harness.another_handle(&fence).as_ref(), PRODUCT);
    assert_eq!(next.attempt().epoch, 2);
    next.assert_active().expect("the next hold is active");
    // The old hold's release does not reach the new one.
    hold.release();
    next.assert_active().expect("still active");
}

/// Dropping a hold ends it: the fence can be taken again.
pub fn a_dropped_hold_frees_the_fence(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    drop(acquire(fence.as_ref(), PRODUCT));
    let next = acquire(fence.as_ref(), PRODUCT);
    assert_eq!(next.attempt().epoch, 2);
}

/// A hold lost in the backend's own way is `released`, stays so, and is never taken back
/// silently; another attempt can then take the fence, under a larger epoch.
pub fn a_lost_hold_is_not_active_and_stays_so(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let hold = acquire(fence.as_ref(), PRODUCT);
    hold.assert_active().expect("active before the loss");
    assert!(
        harness.lose(&fence, hold.as_ref()),
        "the harness must be able to lose a hold"
    );
    assert_released(hold.as_ref(), "after the loss");
    assert_released(hold.as_ref(), "asked again after the loss");
    let other = harness.another_handle(&fence);
    let next = acquire_once_settled(harness, other.as_ref(), PRODUCT);
    assert!(next.attempt().epoch > hold.attempt().epoch);
    next.assert_active().expect("the next hold is active");
    assert_released(hold.as_ref(), "while another attempt holds");
}

/// A holder killed while it holds never blocks its Candidate, and its epoch is never handed
/// out again.
pub fn a_killed_holders_epoch_is_never_handed_out_again(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    drop(acquire(fence.as_ref(), PRODUCT));
    let killed = harness.kill_a_holder(&fence, PRODUCT);
    assert_eq!(killed, 2, "the killed holder took the next epoch");
    let next = acquire_once_settled(harness, fence.as_ref(), PRODUCT);
    assert_eq!(next.attempt().epoch, killed + 1);
}

/// A Product id outside the id grammar is `invalid-input` for every method.
pub fn bad_product_ids_are_invalid_input(harness: &dyn Harness) {
    let fence = harness.fresh_fence();
    let long = "p".repeat(129);
    for bad in ["", "bad id", "-leading", "../up", "a\nb", long.as_str()] {
        let error = fence
            .acquire(bad, &candidate(CANDIDATE))
            .expect_err("a bad id is refused");
        assert_eq!(error.code(), "invalid-input", "{bad:?}: {error}");
        let error = fence.last_epoch(bad).expect_err("a bad id is refused");
        assert_eq!(error.code(), "invalid-input", "{bad:?}: {error}");
    }
    // Nothing was taken: a good id still starts at epoch 1.
    assert_eq!(acquire(fence.as_ref(), PRODUCT).attempt().epoch, 1);
}
