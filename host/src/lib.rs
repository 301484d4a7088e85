//! sf-host: the contracts, the core and (later) the plugin host of sf.
//!
//! sf seals proposals of text edits as immutable Candidates in an owned bare Git repository,
//! exports their exact bytes, and (in later modules) runs their frozen checks, keeps their
//! evidence and integrates them at most once. The core here never names a backend: it works
//! over the traits in [`contracts`].

pub mod assurance;
pub mod canonical;
pub mod cli;
pub mod collector;
pub mod contracts;
pub mod dir_fd;
pub mod evidence;
pub mod fault;
pub mod fence;
pub mod foreign_repository;
pub mod framing;
pub mod gate;
pub mod git_object;
pub mod git_process;
pub mod git_source;
pub mod landing;
pub mod path_glob;
pub mod plugin;
pub mod private_dir;
pub mod repository;
pub mod snapshot;
pub mod snapshot_store;
pub mod source_dir;
pub mod source_path;
pub mod text_escape;

/// The version of sf, recorded in records that name the code that wrote them.
pub const SF_VERSION: &str = env!("CARGO_PKG_VERSION");
