//! The Gate conformance suite.
//!
//! A gate's source (a file, a service, a capability's check) is something the harness can set
//! to one of three [`Setting`]s; the suite checks, the same way for every backend, that an
//! open gate proceeds in time, a closed one refuses with a valid reason, a broken one never
//! proceeds, answers are read anew on every call, a deadline already passed never yields a
//! proceed, and nothing panics.
//!
//! ```no_run
//! # use std::sync::Mutex;
//! # use std::time::Instant;
//! # use sf_sdk::conformance::gate::{Harness, Setting};
//! # use sf_sdk::contracts::{Gate, GateAnswer, GateError};
//! struct Switch(Mutex<Setting>);
//! impl Gate for Switch {
//!     fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
//!         if Instant::now() >= deadline { return Err(GateError::Timeout); }
//!         match *self.0.lock().unwrap() {
//!             Setting::Open => Ok(GateAnswer::Proceed),
//!             Setting::Closed => Ok(GateAnswer::Refuse { reason: "closed".into() }),
//!             Setting::Broken => Err(GateError::Malformed { what: "broken".into() }),
//!         }
//!     }
//! }
//! struct Harnessed(Switch);
//! impl Harness for Harnessed {
//!     fn gate(&self) -> &dyn Gate { &self.0 }
//!     fn set(&self, setting: Setting) { *(self.0).0.lock().unwrap() = setting; }
//! }
//! // In a test crate: one #[test] per case.
//! sf_sdk::gate_conformance!(|| Harnessed(Switch(Mutex::new(Setting::Open))));
//! ```

use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::panic_payload;

use sf_contracts::{Gate, GateAnswer, GateError, is_valid_reason};

/// What the gate's source says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The source allows proceeding.
    Open,
    /// The source refuses, with a reason.
    Closed,
    /// The source says something that is neither (malformed, unreadable, failing).
    Broken,
}

/// What a backend's test supplies to run the suite against it.
pub trait Harness {
    /// The gate under test.
    fn gate(&self) -> &dyn Gate;

    /// Makes the gate's source say `setting` from now on.
    fn set(&self, setting: Setting);

    /// How long one answer may take; deadlines in the suite are this far ahead. The default
    /// suits a gate that runs a confined program on a loaded two-core machine.
    fn patience(&self) -> Duration {
        Duration::from_secs(30)
    }

    /// Extra time an answer may take beyond its deadline before the suite calls it late.
    fn margin(&self) -> Duration {
        Duration::from_secs(3)
    }
}

/// One case of the suite: it panics, naming what went wrong, if the backend fails it.
pub type Case = fn(&dyn Harness);

super::suite! {
    [$]
    /// One `#[test]` per case of the Gate suite
    /// ([`conformance::gate`](crate::conformance::gate)), each named after its case and given
    /// a fresh harness from the argument: a closure or function returning a
    /// [`gate::Harness`](crate::conformance::gate::Harness). Takes
    /// `ignore: { case: "reason" }` after the harness, as
    /// [`object_store_conformance!`](crate::object_store_conformance) does.
    macro gate_conformance, helper __sf_gate_case, suite gate;
    cases: [
        open_proceeds,
        closed_refuses_with_a_valid_reason,
        broken_never_proceeds,
        answers_are_read_on_every_call,
        a_passed_deadline_never_proceeds,
    ]
}

/// Runs every case in [`CASES`], then panics naming each case that failed (with its message)
/// if any did.
pub fn run_all(harness: &dyn Harness) {
    super::run_cases("gate", CASES, harness);
}

/// Runs the case called `name`; panics if there is none.
pub fn run_case(harness: &dyn Harness, name: &str) {
    super::run_named("gate", CASES, harness, name);
}

/// Asks the gate with a deadline `patience` ahead; fails on a panic or a late answer.
fn ask(harness: &dyn Harness) -> Result<GateAnswer, GateError> {
    let started = Instant::now();
    let deadline = started + harness.patience();
    let answer = panic::catch_unwind(AssertUnwindSafe(|| harness.gate().current(deadline)))
        .unwrap_or_else(|payload| {
            panic!(
                "the gate panicked: {}",
                panic_payload::message(payload.as_ref())
            )
        });
    assert!(
        Instant::now() <= deadline + harness.margin(),
        "the gate answered {:?} after its deadline",
        started.elapsed()
    );
    answer
}

/// An open gate proceeds before its deadline.
pub fn open_proceeds(harness: &dyn Harness) {
    harness.set(Setting::Open);
    assert_eq!(ask(harness), Ok(GateAnswer::Proceed));
}

/// A closed gate refuses with a reason callers accept (1 to 4096 printable ASCII).
pub fn closed_refuses_with_a_valid_reason(harness: &dyn Harness) {
    harness.set(Setting::Closed);
    match ask(harness) {
        Ok(GateAnswer::Refuse { reason }) => {
            assert!(
                is_valid_reason(&reason),
                "invalid refusal reason {reason:?}"
            );
        }
        other => panic!("a closed gate answered {other:?}, not a refusal"),
    }
}

/// A broken source never yields a proceed: the answer is an error or a refusal.
pub fn broken_never_proceeds(harness: &dyn Harness) {
    harness.set(Setting::Broken);
    let answer = ask(harness);
    assert_ne!(answer, Ok(GateAnswer::Proceed), "a broken gate proceeded");
}

/// The gate reads its source on every call: open, closed, open again.
pub fn answers_are_read_on_every_call(harness: &dyn Harness) {
    harness.set(Setting::Open);
    assert_eq!(ask(harness), Ok(GateAnswer::Proceed));
    harness.set(Setting::Closed);
    assert!(
        matches!(ask(harness), Ok(GateAnswer::Refuse { .. })),
        "the gate kept an earlier answer"
    );
    harness.set(Setting::Open);
    assert_eq!(ask(harness), Ok(GateAnswer::Proceed));
}

/// Asked with a deadline that has already passed, even an open gate does not proceed.
pub fn a_passed_deadline_never_proceeds(harness: &dyn Harness) {
    harness.set(Setting::Open);
    let deadline = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    let answer = panic::catch_unwind(AssertUnwindSafe(|| harness.gate().current(deadline)))
        .unwrap_or_else(|payload| {
            panic!(
                "the gate panicked: {}",
                panic_payload::message(payload.as_ref())
            )
        });
    assert_ne!(
        answer,
        Ok(GateAnswer::Proceed),
        "the gate proceeded after its deadline"
    );
}
