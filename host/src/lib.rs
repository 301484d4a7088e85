//! sf-host: the core of sf and the host of its plugins.
//!
//! sf seals proposals as immutable Candidates in an owned Git repository ([`repository`]),
//! runs the checks of a frozen Slice against the base and the Candidate ([`collector`]),
//! keeps one write-once Evidence record per run and judges it ([`assurance`]), and moves the
//! target at most once per approved intent, behind a gate and only with the judge's proof
//! ([`judging::Verified`], [`repository`]). The core never names a backend: it works over the traits of sf-contracts (re-exported as [`contracts`]).
//! The plugin host ([`plugin`]) loads backends from libraries and from `sf.toml`, and the
//! built-in backends (the SQLite evidence store, the file and open gates) live here too, and
//! so does the [`registry_proxy`], an environment build's only way out of its sandbox.
//!
//! The layers below are separate crates, re-exported under the names the core uses:
//! sf-contracts (the traits and encodings), sf-io (descriptor-relative file access), sf-git
//! (the pinned, hardened git binary: [`pin_git`]) and sf-plugin-abi (the wire, through
//! [`plugin`]). The use cases that compose the core (landing among them) are the sf-app
//! crate, and the command line over them is the sf-cli crate.

#![deny(missing_docs)]

pub use sf_collector::{
    SF_VERSION, assurance, collector, environment_builds, environment_store, fence, file_fence,
    judging,
};
pub use sf_contracts as contracts;
pub use sf_contracts::{canonical, framing, git_object, path_glob, snapshot};
pub use sf_git::process::{PinnedGit, pin_git};
pub use sf_io::{dir_fd, private_dir, text_escape};

pub mod commit_changes;
pub mod evidence;
pub mod fault;
pub mod gate;
pub mod git_remote;
pub mod git_source;
pub mod plugin;
pub mod registry_proxy;
pub mod repository;
pub mod snapshot_store;
pub mod source_dir;
pub mod tree_store;
