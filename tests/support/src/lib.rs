//! sf-test-support: the test helpers that the backend crates' tests and sf-tests share, each
//! written once.
//!
//! - [`private_dir`]: a private, canonical temporary directory (what an owned root's parent
//!   or a state directory must be); [`private_store_dir`]: one inside it (what a SQLite
//!   store's directory must be).
//! - [`object_store::PrivateDirHarness`]: the ObjectStore conformance harness over any
//!   factory, with fresh roots in a private directory.
//! - [`executor::ShellHarness`]: the Executor conformance harness for a `/bin/sh` runtime.
//! - [`build`]: building another package's plugin library or programs into the target
//!   directory the test runs from, and the directory test-only plugins are installed in.
//! - [`git_servers`]: real Git servers on loopback (bare remotes with faulty hooks,
//!   `git daemon`, smart HTTP, hostile servers) for tests that push and fetch.
//! - [`fence`]: killing a fence holder, by re-executing the test binary as one.
//! - [`postgres`]: a throwaway PostgreSQL cluster on 127.0.0.1, run as an unprivileged user.
//! - [`bench`]: what the benchmark programs share (bubblewrap's minimal profile, medians, the
//!   machine's load).
//! - [`buildgrid`]: a throwaway BuildGrid (a remote-execution server) on 127.0.0.1, its
//!   scheduler in a [`postgres`] cluster.
//! - [`browser`]: headless Chromium, for sf's pages.
//! - [`py_venv`]: Python venvs of pinned PyPI packages; [`attest`] (securesystemslib, an
//!   independent DSSE verifier) and [`prometheus`] (Prometheus's text-format parser) use them.
//!
//! It depends on no backend and not on sf-host, so any backend crate can dev-depend on it.

pub mod attest;
pub mod bench;
pub mod browser;
pub mod build;
pub mod buildgrid;
pub mod executor;
pub mod fence;
pub mod git_servers;
pub mod object_store;
pub mod postgres;
pub mod prometheus;
pub mod py_venv;

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

/// A private (0700), canonical temporary directory, removed when the guard is dropped.
pub fn private_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("sf-test-")
        .tempdir()
        .expect("temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod 0700");
    let path = dir
        .path()
        .canonicalize()
        .expect("canonical temporary directory");
    (dir, path)
}

/// A private (0700) directory `store` inside a fresh [`private_dir`], removed with the guard:
/// what a SQLite evidence store requires of the directory of its file (private, and in a
/// parent no one else can write).
pub fn private_store_dir() -> (tempfile::TempDir, PathBuf) {
    let (dir, parent) = private_dir();
    let store = parent.join("store");
    std::fs::create_dir(&store).expect("mkdir store");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).expect("chmod 0700");
    (dir, store)
}

/// Runs `cleanup` when the test process exits. A fixture a test binary shares between its
/// tests lives in a static, and statics are never dropped: a server or a worker it started
/// would outlive the tests. The closures run in the order they were added, from one handler
/// registered with the C library's `atexit` (which the test harness's normal exit runs).
pub fn at_exit(cleanup: impl FnOnce() + Send + 'static) {
    use std::sync::{Mutex, Once};
    type Cleanups = Mutex<Vec<Box<dyn FnOnce() + Send>>>;
    static CLEANUPS: Cleanups = Mutex::new(Vec::new());
    static REGISTER: Once = Once::new();
    extern "C" fn run_cleanups() {
        let cleanups = std::mem::take(&mut *CLEANUPS.lock().unwrap_or_else(|e| e.into_inner()));
        for cleanup in cleanups {
            cleanup();
        }
    }
    CLEANUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(cleanup));
    REGISTER.call_once(|| {
        // SAFETY: atexit only records the function pointer; run_cleanups is a plain extern
        // "C" function that neither unwinds (every cleanup is expected not to panic, and a
        // poisoned lock is taken anyway) nor calls exit.
        unsafe {
            nix::libc::atexit(run_cleanups);
        }
    });
}
