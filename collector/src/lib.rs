//! sf-collector: the repository collector and everything the records it writes are
//! attributed to: the frozen assurance records (Slice, acceptance, recipe, environment), the
//! pins, the observation each run is recorded as, the judge, the attempt fence, and the
//! stores of dependency environments and materialised trees a collection runs from.
//!
//! Its sources and those of the sf crates it depends on (sf-candidate, sf-contracts, sf-io)
//! are the collector closure ([`collector::collector_closure`]): a recipe pins it, every
//! observation names it, and a record is never attributed to other code. Being a crate of
//! its own, it cannot use integration, delivery, import, the plugin loader or the command
//! line, so no edit there changes it.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// The paths the collector's code is written against, as the host names them.
pub(crate) use sf_candidate as repository;
pub(crate) use sf_contracts as contracts;
pub(crate) use sf_contracts::{canonical, framing, git_object, path_glob, snapshot};
pub(crate) use sf_io::{dir_fd, private_dir, text_escape};

pub mod assurance;
pub mod collector;
pub mod environment_builds;
mod environment_stamps;
pub mod environment_store;
pub mod fence;
pub mod file_fence;
pub mod judging;
pub mod tree_store;

/// The version of sf (its workspace version): in the collector closure and every
/// environment record.
pub const SF_VERSION: &str = env!("CARGO_PKG_VERSION");
