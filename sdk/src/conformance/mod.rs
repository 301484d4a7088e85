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
