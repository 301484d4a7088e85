//! `sf slice suggest` and the freeze's dry run through the `sf` binary: a Slice suggested for
//! python/typing_extensions' unittest suite (the trusted JUnit runner in its harness) from a
//! fix commit and from a directory of tests alone, frozen and the fix Verified; a freeze
//! whose base-stage check misses on the base is refused and writes nothing (and
//! `--no-dry-run` freezes it); arguments suggest cannot use are refused and leave no
//! directory behind; a Node project's `node --test` suite with an npm dependency.

mod greeter_support;
mod land_support;

use std::path::{Path, PathBuf};

use greeter_support::{GREET_FIXED, GREET_TEST, node_modules, node_project};
use land_support::{Public, Work, team_git, write};

/// A fix of python/typing_extensions and the test it makes pass, as the runner names it when
/// given the test file by its path from the tree's top.
const FIX: &str = "2f06414";
const FIXED_TEST: &str =
    "src.test_typing_extensions.TypeAliasTypeTests::test_cannot_set_attributes";
const TESTS: &str = "src/test_typing_extensions.py";

/// A repository at the fix's parent, and a bare clone of the fixture (the fix's repository).
fn typing_extensions() -> (Work, PathBuf) {
    let mut clone = None;
    let work = Work::from_git(
        |dir| {
            let (path, _) = sf_tests::clone_fixture(dir, "typing_extensions.bundle");
            clone = Some(path.clone());
            path.file_name().unwrap().to_str().unwrap().to_owned()
        },
        &format!("{FIX}^"),
    );
    (work, clone.unwrap())
}

/// `sf slice suggest` for the unittest suite in `dir`, with `source`'s arguments.
fn suggest(work: &Work, dir: &str, source: &[&str]) -> sf_tests::plugins::Envelope {
    let mut args = vec![
        "slice",
        "suggest",
        "--identity",
        "identity.json",
        "--dir",
        dir,
        "--id",
        "alias-fix",
        "--runner",
        "unittest",
        "--env",
        "PYTHONPATH=/sf/program/src",
        "--runs",
        "2",
    ];
    args.extend_from_slice(source);
    // The runner's own filter keeps the runs short.
    args.extend_from_slice(&["--", "-k", "TypeAliasType"]);
    work.sf(&args)
}

#[test]
fn a_unittest_slice_is_suggested_from_a_fix_frozen_and_the_fix_verified() {
    let (work, clone) = typing_extensions();
    let repo = clone.to_str().unwrap();
    let found = suggest(&work, "slice", &["--fix", FIX, "--repo", repo]);
    let found = found.result().clone();
    assert_eq!(found["overlay"], serde_json::json!([TESTS]), "{found}");
    // The fix's other changed files, its changelog among them.
    assert_eq!(
        found["scope"],
        serde_json::json!(["CHANGELOG.md", "src/typing_extensions.py"]),
        "{found}"
    );
    // The source sits beside the test module, whose directory the freeze closes: the Slice
    // opens it again.
    let slice: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.dir.join("slice/slice.json")).unwrap())
            .unwrap();
    assert_eq!(
        slice["open"],
        serde_json::json!(["src/typing_extensions.py"]),
        "{slice}"
    );
    assert_eq!(
        found["failToPass"],
        serde_json::json!([FIXED_TEST]),
        "{found}"
    );
    assert!(found["flaky"].as_array().unwrap().is_empty(), "{found}");
    let pass_to_pass = found["passToPass"].as_array().unwrap();
    // The runner's filter ran the TypeAliasType tests (and the module's doctests, which
    // unittest's filter leaves in).
    let aliases = pass_to_pass
        .iter()
        .filter(|id| id.as_str().unwrap().contains("TypeAliasTypeTests::"))
        .count();
    assert!(aliases >= 10, "{found}");
    assert!(work.dir.join("slice/harness/sf_unittest_junit.py").exists());

    let frozen = work.freeze("slice").result().clone();
    assert_eq!(frozen["dryRun"]["checks"][0]["exitCode"], 1, "{frozen}");
    let protected = frozen["protected"].as_array().unwrap();
    assert!(protected.iter().any(|path| path == TESTS), "{frozen}");

    let proposed = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--commit",
        FIX,
        "--repo",
        repo,
        "--only",
        "src/typing_extensions.py",
    ]);
    let candidate = proposed.result()["digest"].as_str().unwrap().to_owned();
    let verdict = work.collect_and_judge(&candidate, "slice");
    assert_eq!(verdict["outcome"], "verified", "{verdict}");
}

#[test]
fn without_a_fix_the_tests_of_a_directory_are_the_overlay_and_the_base_decides() {
    let (work, clone) = typing_extensions();
    // A checkout of the parent with the fix's test file: a reproduction, before any fix.
    let checkout = work.dir.join("checkout");
    team_git(
        &work.dir,
        &[
            "clone",
            "-q",
            clone.to_str().unwrap(),
            checkout.to_str().unwrap(),
        ],
    );
    team_git(&checkout, &["checkout", "-q", &format!("{FIX}^")]);
    team_git(&checkout, &["checkout", "-q", FIX, "--", TESTS]);
    let checkout = checkout.to_str().unwrap();

    let refused = suggest(&work, "slice", &["--repo", checkout]);
    assert_eq!(
        refused.json["error"]["code"], "invalid-input",
        "{refused:?}"
    );
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--scope")
    );

    let found = suggest(
        &work,
        "slice",
        &["--repo", checkout, "--scope", "src/typing_extensions.py"],
    );
    let found = found.result().clone();
    assert_eq!(found["overlay"], serde_json::json!([TESTS]), "{found}");
    assert_eq!(
        found["failToPass"],
        serde_json::json!([FIXED_TEST]),
        "{found}"
    );
    assert!(
        !found["passToPass"].as_array().unwrap().is_empty(),
        "{found}"
    );
    work.freeze("slice").result();
}

#[test]
fn what_suggest_cannot_use_is_refused_and_leaves_no_directory() {
    let (work, clone) = typing_extensions();
    let repo = clone.to_str().unwrap();
    let gone = |name: &str| !work.dir.join(name).exists();

    // No changed file is a test file under the globs given.
    let refused = suggest(
        &work,
        "none",
        &["--fix", FIX, "--repo", repo, "--tests", "docs/**"],
    );
    assert_eq!(
        refused.json["error"]["code"], "invalid-input",
        "{refused:?}"
    );
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--tests")
    );
    assert!(gone("none"));

    // The tests fail on both trees when the runner cannot import the package: no
    // FAIL_TO_PASS, so no Slice, and the draft is removed.
    let broken = work.sf(&[
        "slice",
        "suggest",
        "--identity",
        "identity.json",
        "--dir",
        "broken",
        "--id",
        "x",
        "--runner",
        "unittest",
        "--fix",
        FIX,
        "--repo",
        repo,
        "--runs",
        "1",
        "--",
        "-k",
        "TypeAliasType",
    ]);
    assert_eq!(broken.json["ok"], false, "{broken:?}");
    assert!(gone("broken"), "{broken:?}");

    // A directory that holds something is never written into.
    std::fs::create_dir(work.dir.join("taken")).unwrap();
    std::fs::write(work.dir.join("taken/keep"), "mine").unwrap();
    let refused = suggest(&work, "taken", &["--fix", FIX, "--repo", repo]);
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not empty"),
        "{refused:?}"
    );
    assert_eq!(
        std::fs::read_to_string(work.dir.join("taken/keep")).unwrap(),
        "mine"
    );

    let refused = work.sf(&[
        "slice",
        "suggest",
        "--identity",
        "identity.json",
        "--dir",
        "x",
        "--id",
        "x",
        "--runner",
        "rspec",
        "--fix",
        FIX,
        "--repo",
        repo,
    ]);
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pytest, unittest, node"),
        "{refused:?}"
    );
    assert!(gone("x"));
}

#[test]
fn a_freeze_whose_base_stage_misses_on_the_base_is_refused_and_writes_nothing() {
    let work = Work::unfrozen();
    // The demo's bug-shown check expects the base's wrong sum; expect the right one instead.
    let acceptance = include_str!("../../cli/src/demo/sample/slice/acceptance.json").replacen(
        "sha256:f0b5c2c2211c8d67ed15e75e656c7862d086e9245420892a7de62cd9ec582a06",
        "sha256:06e9d52c1720fca412803e3b07c4b228ff113e303f4c7ab94665319d832bbfb7",
        1,
    );
    let slice = work.author_slice("slice", &[("acceptance.json", &acceptance)]);
    let refused = work.freeze("slice");
    assert_eq!(
        refused.json["error"]["code"], "invalid-input",
        "{refused:?}"
    );
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("check bug-shown misses on the base, so every Candidate would be Failed: stdout hashes to"),
        "{message}"
    );
    assert!(!frozen_dir(&slice).exists());

    let frozen = work.sf(&[
        "slice",
        "freeze",
        "--dir",
        "slice",
        "--identity",
        "identity.json",
        "--no-dry-run",
    ]);
    assert!(frozen.result()["dryRun"].is_null(), "{frozen:?}");
    assert!(frozen_dir(&slice).exists());
}

fn frozen_dir(slice: &Path) -> PathBuf {
    slice.join("frozen")
}

#[test]
fn a_node_test_suite_is_suggested_from_a_fix_and_the_fix_lands() {
    let public = Public::new();
    let env = node_modules(&public);
    let work = Work::from_git(node_project, "HEAD").with_public(&public);
    work.sf(&["env", "add", "node-deps", env.to_str().unwrap()])
        .result();
    // The fix, committed after the base was taken: the code and the test that shows it.
    let project = work.dir.join("node");
    write(&project.join("lib/greet.js"), GREET_FIXED);
    write(&project.join("test/greet.test.js"), GREET_TEST);
    team_git(&project, &["add", "-A"]);
    team_git(&project, &["commit", "-q", "-m", "shout the greeting"]);

    let node_path = format!("NODE_PATH={}/node_modules", env.display());
    let found = work.sf(&[
        "slice",
        "suggest",
        "--identity",
        "identity.json",
        "--dir",
        "slice",
        "--id",
        "shout",
        "--runner",
        "node",
        "--environment",
        "node-deps",
        "--env",
        &node_path,
        "--fix",
        "HEAD",
        "--repo",
        "node",
        "--runs",
        "2",
    ]);
    let found = found.result().clone();
    assert_eq!(
        found["overlay"],
        serde_json::json!(["test/greet.test.js"]),
        "{found}"
    );
    assert_eq!(
        found["scope"],
        serde_json::json!(["lib/greet.js"]),
        "{found}"
    );
    assert_eq!(
        found["failToPass"],
        serde_json::json!(["test::greets loudly"]),
        "{found}"
    );
    assert_eq!(
        found["passToPass"],
        serde_json::json!(["test::keeps the name"]),
        "{found}"
    );
    work.freeze("slice").result();

    let sealed = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--commit",
        "HEAD",
        "--repo",
        "node",
        "--only",
        "lib/",
    ]);
    let candidate = sealed.result()["digest"].as_str().unwrap().to_owned();
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.result()["outcome"], "integrated", "{landed:?}");
}
