//! sf-sdk: what plugin authors depend on.
//!
//! - [`contracts`]: the traits a backend implements, with their request, answer and error
//!   types (sf-contracts, the crate the host is built on too, so host and plugins agree on
//!   them exactly).
//! - [`testing`]: in-memory backends with test hooks, for tests of code over the contracts.
//! - [`conformance`]: one suite per contract that every backend must pass.
//! - [`export`]: the [`export_plugin!`] macro that turns trait implementations into a plugin
//!   library sf loads at run time (see docs/plugins.md).
//! - `mocks` (feature `mocks`): mockall fakes of the contracts, for faults that cannot be
//!   made for real.

#![deny(missing_docs)]

/// serde and serde_json as the sdk uses them, so that a plugin's configuration type can derive
/// `Deserialize` with `#[serde(crate = "sf_sdk::serde")]` without its own dependency.
pub use serde;
pub use serde_json;
pub use sf_contracts as contracts;
/// The `sha256:` digests (Evidence record ids, pins) and canonical JSON the contracts use.
pub use sf_contracts::canonical;
/// The object ids and encodings the contracts use.
pub use sf_contracts::git_object;

pub mod conformance;
pub mod export;
#[cfg(feature = "mocks")]
pub mod mocks;
mod panic_payload;
pub mod testing;
