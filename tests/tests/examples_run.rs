//! Runs every example program of `sf-examples` (except the benchmarks `plugin_overhead`,
//! `collect_jobs`, `collect_suites` and `seal_scale`, which measure and want a release build)
//! and checks that its output holds the lines a reader is told to expect, so that the
//! examples cannot rot.
//!
//! `cargo test` builds the examples of the package under test only, and sf-examples is another
//! package, so the first test builds them once per test process with `cargo build`, together
//! with the sandbox launcher the Executor examples start, into the target directory this test
//! was built in (as `sf_tests::plugins` does for the plugin libraries; sf-tests joins the build
//! so that shared dependencies keep the features of the test build).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sf_test_support::build::{cargo_build, strip_group_write};

/// `<target>/<profile>/examples`, after building the examples and the launcher once.
fn examples_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = cargo_build(
            &["sf-tests", "sf-examples", "sf-sandbox-exec"],
            &["--examples", "--bin", "sf-sandbox-launcher"],
        );
        strip_group_write(&dir.join("sf-sandbox-launcher"));
        dir.join("examples")
    })
}

/// Runs example `name`, asserts it succeeded, and returns its stdout.
fn run(name: &str) -> String {
    let path = examples_dir().join(name);
    let output = Command::new(&path)
        .output()
        .unwrap_or_else(|error| panic!("running {}: {error}", path.display()));
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 stdout");
    assert!(
        output.status.success(),
        "example {name} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Asserts that each pattern is the start of some line of `stdout`, after collapsing runs of
/// spaces, in the given order.
fn expect_lines(name: &str, stdout: &str, patterns: &[&str]) {
    let lines: Vec<String> = stdout
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let mut at = 0;
    for pattern in patterns {
        match lines[at..]
            .iter()
            .position(|line| line.starts_with(pattern))
        {
            Some(offset) => at += offset + 1,
            None => panic!("example {name}: no line starting {pattern:?} (in order) in:\n{stdout}"),
        }
    }
}

/// The value after `label` on the line that starts with it.
fn value<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(label))
        .unwrap_or_else(|| panic!("no line starting {label:?} in:\n{stdout}"))
        .trim()
}

#[test]
fn seal_and_export() {
    let stdout = run("seal_and_export");
    expect_lines(
        "seal_and_export",
        &stdout,
        &[
            "repository /",
            "initial ",
            "candidate sha256:",
            "tree sha256:",
            "commit M ",
            "README.md 45 bytes sha256:",
            "src/farewell.txt 16 bytes sha256:",
            "src/greeting.txt 14 bytes sha256:",
        ],
    );
}

#[test]
fn integrate() {
    let stdout = run("integrate");
    expect_lines(
        "integrate",
        &stdout,
        &[
            "candidate sha256:",
            "base B ",
            "commit M ",
            "invoke #1 (gate closed) invocation=withheld dispatched=false",
            "invoke #2 (gate open) invocation=confirmed dispatched=true \
             postcondition=desired-state-observed",
            "invoke #2 again (replay) invocation=confirmed dispatched=false",
            "inspect #1 ",
            "inspect #2 invocation=confirmed",
            "target now ",
        ],
    );
    assert_eq!(value(&stdout, "target now"), value(&stdout, "commit M"));
}

#[test]
fn collect_and_judge() {
    let stdout = run("collect_and_judge");
    expect_lines(
        "collect_and_judge",
        &stdout,
        &[
            "repository /",
            "acceptance sha256:",
            "recipe sha256:",
            "environment sha256:",
            "collector sha256:",
            "Candidate sha256:",
            "bug-shown observed sha256:",
            "bug-fixed observed sha256:",
            "empty-base observed sha256:",
            "empty-candidate observed sha256:",
            "verdict verified",
            "Candidate sha256:",
            "bug-shown observed sha256:",
            "bug-fixed observed sha256:",
            "verdict failed",
            "records 8",
        ],
    );
}

#[test]
fn run_confined() {
    let stdout = run("run_confined");
    expect_lines(
        "run_confined",
        &stdout,
        &[
            "launcher /",
            "executable /bin/sh",
            "status exited",
            "exit code 3",
            "stdout hello, reader, from the sandbox",
            "stderr a line on stderr",
            "program sha256:",
            "input sha256:",
            "runtime sha256:",
            "profile sha256:",
            "bounds sha256:",
            "enforced host-identity ",
            "enforced landlock fully-enforced",
            "enforced landlock-abi ",
            "enforced memory ",
            "pinnable true",
        ],
    );
}

#[test]
fn evidence() {
    let stdout = run("evidence");
    expect_lines(
        "evidence",
        &stdout,
        &[
            "store /",
            "put sha256:",
            "put sha256:",
            "get sha256:",
            "same bytes true",
            "find 2 records under sha256:",
            "put again sha256:",
            "records 2",
            "get absent missing: ",
        ],
    );
    let first = stdout
        .lines()
        .find_map(|line| line.strip_prefix("put "))
        .expect("a put line")
        .trim();
    let again = value(&stdout, "put again");
    assert_eq!(again, format!("{first} (same id: true)"));
    assert!(value(&stdout, "get").starts_with(first), "{stdout}");
}

#[test]
fn gate() {
    let stdout = run("gate");
    expect_lines(
        "gate",
        &stdout,
        &[
            "file gate (open) proceed",
            "file gate (closed) refuse: release freeze until Monday",
            "file gate (malformed) refuse (malformed): ",
            "file gate (absent) refuse (unavailable): ",
            "quota gate (call 1) proceed",
            "quota gate (call 2) proceed",
            "quota gate (call 3) refuse: the quota of 2 integrations is spent",
        ],
    );
}
