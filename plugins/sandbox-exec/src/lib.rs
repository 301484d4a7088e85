//! sf-sandbox-exec: the [`Executor`](sf_contracts::Executor) that confines one program
//! on Linux.
//!
//! A [`SandboxExecutor`] is configured with one runtime (an executable and the host paths a
//! program may read) and a set of limits. Its first run starts the `sf-sandbox-launcher` helper
//! (built by this crate) as a fork server, which forks one launcher per sandbox; the
//! supervisor hands that launcher a plan over a socket (ahead of the run, so that the sandbox
//! is built before the run needs it), then the run's own plan, and bounds the run from
//! outside: the
//! launcher puts the program in new user, mount, pid, network, ipc and uts namespaces as an
//! unprivileged user, on a read-only tmpfs root holding only the runtime's files, the program
//! and input (read-only, at `/sf/program` and `/sf/input`), a size-capped scratch
//! (`/sf/scratch`), a fresh `/proc` and four device files; it drops every capability, sets
//! no_new_privs, applies Landlock and seccomp and rlimits, closes every other descriptor and
//! execs the runtime with a cleared environment. `docs/sandbox.md` has the threat model.
//!
//! Modules, one job each:
//! - `runtime`: resolving and digesting a runtime;
//! - `identity`: the reserved host ids sandboxes run as when sf is root;
//! - `cgroup`: the control group that bounds each run as a whole;
//! - `build`: an environment build's output directory and proxy socket, checked;
//! - `limits`: the limits a run hit, from the group's counters and the init's reports;
//! - `profile`: the confinement recipe and its digest;
//! - `seccomp`: the seccomp filters;
//! - `plan`: what the supervisor hands the launcher and what comes back;
//! - `supervisor`: starting a run's launcher and bounding the run;
//! - `relay`: an environment build's connections, relayed to the caller's proxy;
//! - `prepare`: keeping the next run's sandbox built ahead of it;
//! - `zygote`: the host's side of the fork server;
//! - `executor`: configuration and the trait implementation;
//! - [`plugin`]: the `[executor]` configuration and the plugin export;
//! - `launcher`: the helper program's code (namespaces, mounts, confinement).
//!
//! Only x86_64 Linux is supported; the crate refuses to build elsewhere.

#![deny(missing_docs)]

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
compile_error!("sf-sandbox-exec supports x86_64 Linux only");

mod build;
mod cgroup;
mod enforcement;
mod executor;
mod identity;
#[doc(hidden)]
pub mod launcher;
mod limits;
mod overlap;
mod plan;
pub mod plugin;
mod prepare;
mod profile;
mod relay;
mod runtime;
mod seccomp;
mod supervisor;
mod zygote;

pub use executor::{LAUNCHER_NAME, SandboxConfig, SandboxExecutor};
pub use identity::{DEFAULT_IDS, IdRange};
pub use profile::{
    HARNESS_DIR, INPUT_DIR, INSIDE_ID, LANDLOCK_ABI_NUMBER, Limits, NPROC_ABOVE_GROUP, NetworkMode,
    PROFILE_PROTOCOL, PROGRAM_DIR, SANDBOX_PROCESSES, SCRATCH_DIR,
};
pub use runtime::{DEVICES, LIBRARY_DIRECTORIES, RUNTIME_PROTOCOL, RuntimeConfig};
