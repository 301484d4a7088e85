//! sf-reapi: the [`Executor`](sf_contracts::Executor) that runs each program on a
//! remote-execution cluster speaking the Bazel Remote Execution API v2 (BuildGrid, Buildbarn,
//! Buildfarm, …), and the wire it shares with `sf worker`, the Remote Workers API bot that
//! runs the cluster's leases in sandbox-exec.
//!
//! A run becomes an Action ([`action`]): its snapshots as Merkle trees ([`tree`]) in the
//! input root, the request itself beside them, a Command stating what runs, and a platform
//! requiring the worker's runtime and confinement profile, which the worker's description
//! ([`description`]) in the CAS names. The Executor uploads what the CAS lacks, executes the
//! Action without the action cache, follows the operation (reconnecting with WaitExecution),
//! cancels it at its deadline or on cancellation, and turns the ActionResult and the worker's
//! attestation ([`attestation`]) into the run's answer ([`answer`]), downloading stdout,
//! stderr and the results file within the run's limits. A non-OK execution status, a lost
//! cluster, or an answer the worker does not vouch for is an answer no judge attributes to the
//! program, never a failure of it.
//!
//! Modules, one job each:
//! - [`proto`]: the protocol messages and clients;
//! - [`digest`]: REAPI digests;
//! - [`tree`]: snapshots as Merkle trees, and back;
//! - [`base`]: a program by reference's base, read from the host's tree store and checked;
//! - [`action`]: a run as an Action, and the worker's checks of one;
//! - [`attestation`]: what a worker states about a run;
//! - [`description`]: what a worker offers;
//! - [`cas`]: reading and writing blobs;
//! - [`start_marker`]: the CAS blob that says a run's Action was started, so it runs once;
//! - [`answer`]: a finished operation as the run's answer;
//! - [`config`]: the `[executor]` section;
//! - [`executor`]: the Executor.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod action;
pub mod answer;
pub mod attestation;
pub mod base;
pub mod cas;
pub mod config;
pub mod description;
pub mod digest;
pub mod executor;
pub mod proto;
pub mod start_marker;
pub mod tree;

pub use config::ReapiBackend;
pub use executor::ReapiExecutor;
