//! Conformance suites: one per contract, which every backend must pass (the in-memory ones in
//! [`crate::testing`], the built-ins, and every plugin, linked statically or loaded as a
//! dynamic library).
//!
//! A backend's test crate implements the suite's `Harness` and calls its `run_all`; each case
//! is also a public function, so a failing one can be run alone.

pub mod evidence_store;
pub mod executor;
pub mod gate;
pub mod object_store;

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

/// A suite's cases by name, over its harness type `H`.
type Cases<'a, H> = &'a [(&'a str, fn(&H))];

/// Runs every case of the `suite`, then panics naming each case that failed (with its
/// message) if any did: one failing case never hides another.
fn run_cases<H: ?Sized>(suite: &str, cases: Cases<'_, H>, harness: &H) {
    let mut failures = Vec::new();
    for (name, case) in cases {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| case(harness))) {
            failures.push(format!("{name}: {}", panic_message(payload.as_ref())));
        }
    }
    assert!(
        failures.is_empty(),
        "{suite} conformance: {} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Runs the case of the `suite` called `name`; panics if there is none.
fn run_named<H: ?Sized>(suite: &str, cases: Cases<'_, H>, harness: &H, name: &str) {
    let Some((_, case)) = cases.iter().find(|(case, _)| *case == name) else {
        panic!("no {suite} conformance case is called {name:?}");
    };
    case(harness);
}

/// The message a panic carried, for failure reports.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
