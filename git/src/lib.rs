//! sf-git: running the Git binary as sf does, for every part of sf that runs it (the git-cli
//! object store and the `--from-git` import): the pinned binary, its hardened settings and
//! bounds ([`process`]), the ownership and shape rules a foreign repository must pass before
//! Git reads it ([`foreign`]), the read-only, verifying reader of its objects ([`objects`]), and the pack framing objects are
//! written through ([`pack`]).

#![deny(missing_docs)]

pub mod foreign;
pub mod objects;
pub mod pack;
pub mod process;
