//! What the conformance macros promise a backend author: every case is its own test, named
//! after the case, so a failing case shows its name in the output, one case runs alone with a
//! test filter, and one failing case does not hide the others.
//!
//! The module `switchable` runs the ObjectStore suite against the in-memory store; with
//! `SF_SDK_FLAWED_STORE` set (only in the child processes the tests below start) the factory
//! accepts relative paths, which exactly one case checks.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Instant;

use sf_sdk::contracts::{ObjectStore, ObjectStoreError, ObjectStoreFactory, StoreRoot};
use sf_sdk::testing::InMemoryObjectStoreFactory;
use sf_test_support::object_store::{PrivateDirHarness, SymbolicRefs};

/// Set in a child: make the store of `switchable` flawed.
const FLAWED: &str = "SF_SDK_FLAWED_STORE";

/// The one case the flaw fails.
const FAILING: &str = "create_relative_path_is_invalid_input";

/// An in-memory factory that takes a relative path as if it were below `/`.
struct AcceptsRelativePaths(InMemoryObjectStoreFactory);

impl ObjectStoreFactory for AcceptsRelativePaths {
    fn create(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        self.0.create(&Path::new("/").join(path), deadline)
    }

    fn open(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        self.0.open(root, marker, deadline)
    }

    fn supports_boundaries(&self) -> Result<(), ObjectStoreError> {
        self.0.supports_boundaries()
    }
}

fn harness() -> PrivateDirHarness {
    if std::env::var_os(FLAWED).is_none() {
        return PrivateDirHarness::in_memory();
    }
    let roots = InMemoryObjectStoreFactory::new();
    PrivateDirHarness::new(
        Arc::new(AcceptsRelativePaths(roots.clone())),
        SymbolicRefs::InMemory(roots),
    )
}

mod switchable {
    sf_sdk::object_store_conformance!(super::harness);
}

/// This test executable, run with `args` against the flawed store.
fn flawed_run(args: &[&str]) -> (Output, String) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(args)
        .args(["--test-threads=1"])
        .env(FLAWED, "1")
        .output()
        .expect("running the test executable");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output, text)
}

#[test]
fn a_failing_case_is_reported_under_its_own_name() {
    let (output, text) = flawed_run(&["switchable::"]);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains(&format!("test switchable::{FAILING} ... FAILED")),
        "{text}"
    );
    assert!(
        text.contains(&format!("---- switchable::{FAILING} stdout ----")),
        "{text}"
    );
    let cases = sf_sdk::conformance::object_store::CASES.len();
    assert!(
        text.contains(&format!("{} passed; 1 failed", cases - 1)),
        "every other case still ran and passed: {text}"
    );
    for (name, _) in sf_sdk::conformance::object_store::CASES {
        if *name != FAILING {
            assert!(
                text.contains(&format!("test switchable::{name} ... ok")),
                "{name}: {text}"
            );
        }
    }
}

#[test]
fn one_case_runs_alone_with_a_filter() {
    let (output, text) = flawed_run(&[FAILING]);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("running 1 test"), "{text}");
    assert!(text.contains("0 passed; 1 failed"), "{text}");

    let (output, text) = flawed_run(&["--exact", "switchable::read_budget_is_exact"]);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("running 1 test"), "{text}");
    assert!(
        text.contains("test switchable::read_budget_is_exact ... ok"),
        "{text}"
    );
}
