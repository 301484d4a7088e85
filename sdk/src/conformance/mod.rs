//! Conformance suites: one per contract, which every backend must pass (the in-memory ones in
//! [`crate::testing`], the built-ins, and every plugin, linked statically or loaded as a
//! dynamic library).
//!
//! A backend's test crate implements the suite's `Harness` and invokes the suite's macro,
//! which expands to one `#[test]` per case, named after the case:
//!
//! | suite | macro |
//! |---|---|
//! | [`object_store`] | [`object_store_conformance!`](crate::object_store_conformance) |
//! | [`executor`] | [`executor_conformance!`](crate::executor_conformance) |
//! | [`evidence_store`] | [`evidence_store_conformance!`](crate::evidence_store_conformance) |
//! | [`gate`] | [`gate_conformance!`](crate::gate_conformance) |
//! | [`fence`] | [`fence_conformance!`](crate::fence_conformance) |
//!
//! ```text
//! mod in_memory {
//!     sf_sdk::object_store_conformance!(|| MyHarness::new());
//! }
//! ```
//!
//! `cargo test create_twice_is_exists` then runs that one case, and a failing case is
//! reported under its own name (`in_memory::create_twice_is_exists`). The argument is
//! anything callable with no arguments that returns a harness (a closure or a function); each
//! case calls it once, so every case gets a fresh harness. A case a harness cannot support is
//! named with a reason, `ignore: { case_name: "why" }`, and becomes an ignored test that says
//! why; naming something that is not a case of the suite does not compile.
//!
//! Expand each suite once per module: the tests are named after the cases alone, so a module
//! that runs a suite against two backends needs one submodule per backend.
//!
//! Code that is not a test runs a whole suite with its `run_all` (every case, then one panic
//! naming each case that failed) or one case by name with its `run_case`; each suite's
//! `CASES` lists the cases in order.

pub mod evidence_store;
pub mod executor;
pub mod fence;
pub mod gate;
pub mod object_store;

use std::panic::{self, AssertUnwindSafe};

use crate::panic_payload;

/// A suite's cases by name, over its harness type `H`.
type Cases<'a, H> = &'a [(&'a str, fn(&H))];

/// Declares a suite's cases once: the module's `CASES` table and the exported macro that
/// expands to one `#[test]` per case. The first argument is a literal `$` (in brackets), so
/// that the generated macro can have metavariables of its own; `helper` names the macro each
/// expansion defines for itself, one name per suite, so that two suites expanded in one
/// module do not shadow each other's helper.
macro_rules! suite {
    (
        [$d:tt]
        $(#[$doc:meta])*
        macro $macro:ident, helper $helper:ident, suite $suite:ident;
        cases: [$($case:ident),* $(,)?]
    ) => {
        /// Every case, by name, in the order `run_all` runs them.
        pub const CASES: &[(&str, Case)] = &[$((stringify!($case), $case as Case)),*];

        $(#[$doc])*
        #[macro_export]
        macro_rules! $macro {
            ($d harness:expr $d(,)?) => {
                $d crate::__conformance_tests!(
                    $helper, $suite, ($d harness), [], [$($case),*]
                );
            };
            (
                $d harness:expr,
                ignore: { $d($d skip:ident : $d why:literal),* $d(,)? } $d(,)?
            ) => {
                $d crate::__conformance_tests!(
                    $helper, $suite, ($d harness), [$d($d skip : $d why),*], [$($case),*]
                );
            };
        }
    };
}
use suite;

/// The expansion behind every suite's macro: one `#[test]` per case, calling the case with a
/// fresh harness; the cases named in the ignore list become `#[ignore = reason]` tests.
///
/// macro_rules cannot compare two identifiers, so the expansion defines a helper macro whose
/// first arms match exactly the ignored names and whose last arm matches any other case.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    (
        $helper:ident, $suite:ident, ($harness:expr),
        [$($skip:ident : $why:literal),*], [$($case:ident),*]
    ) => {
        $crate::__conformance_tests!(
            @expand [$] $helper, $suite, ($harness), [$($skip : $why),*], [$($case),*]
        );
    };
    (
        @expand [$d:tt] $helper:ident, $suite:ident, ($harness:expr),
        [$($skip:ident : $why:literal),*], [$($case:ident),*]
    ) => {
        // Each ignored name must be a case of the suite.
        $(const _: $crate::conformance::$suite::Case = $crate::conformance::$suite::$skip;)*

        macro_rules! $helper {
            $(
                ($skip) => {
                    #[test]
                    #[ignore = $why]
                    fn $skip() {
                        $crate::conformance::$suite::$skip(&($harness)());
                    }
                };
            )*
            ($d case:ident) => {
                #[test]
                fn $d case() {
                    $crate::conformance::$suite::$d case(&($harness)());
                }
            };
        }

        $($helper!($case);)*
    };
}

/// Runs every case of the `suite`, then panics naming each case that failed (with its
/// message) if any did: one failing case never hides another.
fn run_cases<H: ?Sized>(suite: &str, cases: Cases<'_, H>, harness: &H) {
    let mut failures = Vec::new();
    for (name, case) in cases {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| case(harness))) {
            failures.push(format!(
                "{name}: {}",
                panic_payload::message(payload.as_ref())
            ));
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
