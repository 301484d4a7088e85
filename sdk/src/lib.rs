//! sf-sdk: what plugin authors depend on.
//!
//! - [`contracts`]: the traits a backend implements, with their request, answer and error
//!   types (re-exported from the host, so host and plugins agree on them exactly).
//! - [`testing`]: in-memory backends with test hooks, for tests of code over the contracts.
//! - [`conformance`]: one suite per contract that every backend must pass.
//! - `mocks` (feature `mocks`): mockall fakes of the contracts, for faults that cannot be
//!   made for real.

#![warn(missing_docs)]

pub use sf_host::contracts;

pub mod conformance;
#[cfg(feature = "mocks")]
pub mod mocks;
pub mod testing;
