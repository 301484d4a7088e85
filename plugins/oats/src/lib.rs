//! sf-oats: oats capability packages (a directory with an `oats.json` manifest and Node
//! scripts) registered and run as sf plugins, implementing the oats 0.24.0 capability
//! contract without oats installed.
//!
//! A capability is registered ([`Oats::register`]): its manifest is parsed strictly
//! ([`manifest`]), its compatibility range checked ([`compat`]), every declared path checked
//! to stay inside it after symbolic links ([`containment`]), and its bytes hashed with the
//! portable tree digest ([`artifact`]). The registry ([`registry`]) holds `{id, version,
//! path, integrity, trusted}`. Trust ([`Oats::trust`]) approves the executable surface of
//! exactly the registered bytes; any byte change resets it. Before every run all of this is
//! checked again, and the script runs through a `dyn Executor` ([`launch`]): commands
//! ([`Oats::run_command`]), operations with their envelope ([`operation`]), binding phases
//! ([`binding`]), lifecycle hooks with rollback and quarantine ([`hooks`]). A capability's
//! `binding.check` can serve as sf's Gate ([`gate`]).
//!
//! What sf does not provide (the oats kernel callbacks through `OATS_CLI_BIN`, source
//! receipts, instance models) is listed in docs/oats.md.
//!
//! Modules, one job each:
//! - `error`: the error type and its stable codes;
//! - `json`: strict JSON (duplicate keys refused, bounded);
//! - `grammar`: ids, names and lexical path rules;
//! - `compat`: `compatibility.oats` ranges;
//! - `manifest`: the strict manifest parser;
//! - `containment`: declared paths and links stay inside the artifact;
//! - `artifact`: the tree walk, the integrity digest and the program files of a run;
//! - `registry`: the registry file;
//! - `launch`: one script through the Executor (the launcher and the kernel stub);
//! - `host`: [`Oats`]: register, show, trust, prepare, commands;
//! - `operation`, `binding`, `gate`, `hooks`: the other executable surfaces;
//! - `check`: an operation staged as a Slice's check, and the Slices that pin a capability;
//! - `state`: where sf's state directory is.
//!
//! The `sf oats` command line (the `sf-oats` program) is the sf-oats-cli package; which
//! Executor runs the scripts is its choice (sandbox-exec with the Node runtime), not this
//! crate's.

#![deny(missing_docs)]

pub mod artifact;
pub mod binding;
pub mod check;
pub mod compat;
pub mod containment;
pub mod environment_file;
pub mod error;
pub mod gate;
pub mod grammar;
pub mod hooks;
mod host;
pub mod json;
pub mod launch;
pub mod manifest;
pub mod operation;
pub mod registry;
pub mod state;

pub use compat::OATS_CONTRACT_VERSION;
pub use error::{ErrorCode, OatsError};
pub use gate::{OatsBindingGate, OatsBindingGateConfig};
pub use host::{
    CommandOutcome, Examined, Oats, OatsOptions, Prepared, Registration, RunContext, Shown,
    Surface, TrustOutcome, blocked, check_environment_value, examine, roles_of, trust_state_of,
};
pub use manifest::{HookEvent, Manifest, Phase};
