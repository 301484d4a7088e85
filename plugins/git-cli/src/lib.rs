//! sf-git-cli: the [`ObjectStore`](sf_contracts::ObjectStore) over the git binary.
//!
//! A [`GitCliFactory`] pins one root-owned Git binary and hands out a [`GitCliStore`] per
//! owned root. Git is an execution surface, so it is hidden behind a fixed one: five
//! subcommands with fixed arguments, a cleared environment, hooks and every automatic
//! maintenance off, and time and output bounds. The root is a bare repository whose layout
//! the store writes itself and re-checks, byte for byte, before every Git process starts and
//! again before its result is accepted, and Git runs with a cleared environment whose HOME is an
//! empty private directory.
//!
//! Modules, one job each:
//! - `layout`: the fixed on-disk layout and the exclusive creation of a root;
//! - `ownership`: the check that a root is still exactly the one created;
//! - `boundary`: the history boundaries of imported bases (Git's `shallow` list);
//! - `binary`: pinning and digesting the Git binary;
//! - `runner`: spawning Git with a fixed surface and hard bounds;
//! - `reader`: a long-lived `cat-file --batch-command --buffer` serving the reads of a read
//!   scope;
//! - `batch`: parsing `cat-file` answers as they arrive;
//! - `packs`: the pack files one object write leaves, checked by name and shape;
//! - `rollup`: keeping the number of packs bounded (the pack lock and the count);
//! - `refs`: parsing `for-each-ref` output and judging ref files Git skipped;
//! - `store`: the trait implementation;
//! - `factory`: configuration and the factory;
//! - `plugin`: the `git-cli` configuration section, its typetag registration, and the
//!   `export_plugin!` that makes the cdylib a plugin sf loads at run time.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod batch;
mod binary;
mod boundary;
mod errors;
mod factory;
mod layout;
mod ownership;
mod packs;
mod plugin;
mod reader;
mod refs;
mod rollup;
mod runner;
mod store;

pub use binary::DEFAULT_GIT_PATHS;
pub use factory::{GitCliConfig, GitCliFactory};
pub use layout::{
    CONFIG, HEAD, HEAD_LOCK, MARKER_MAX_BYTES, MARKER_NAME, PATH_MAX_BYTES, TOP_LEVEL,
};
pub use packs::FINALISATION_SEARCH_LIMIT;
pub use plugin::GitCliBackend;
pub use refs::{LIST_REFS_OUTPUT_BYTES, LIST_REFS_WALK_ENTRIES, READ_REF_OUTPUT_BYTES};
pub use rollup::MAX_PACKS;
pub use store::GitCliStore;
