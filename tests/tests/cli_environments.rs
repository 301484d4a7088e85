//! Real test suites in dependency environments, through the `sf` binary: psf/requests' pytest
//! module `tests/test_utils.py` at three fix commits, run by pytest from a venv that the
//! test builds from the package registry and adds to sf's environment store (`sf env add`);
//! the check names the environment, the freeze pins its digest and the path it was built
//! for, collect verifies it and the sandbox binds it read-only there. Each fix is Verified,
//! its parent (with a cosmetic edit) Failed with the FAIL_TO_PASS test named; a check whose
//! environment changed in the store runs nothing (`corrupt`).

mod greeter_support;
mod land_support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use greeter_support::{GREET_BUGGY, GREET_FIXED, greeter_slice};
use land_support::{Public, Work, show, write};
use sf_host::canonical::Digest;
use sf_tests::plugins::Envelope;

/// Adds the shared pytest venv ([`land_support::pytest_venv`]) to `public`'s store as
/// `pytest`; its digest and where it was built.
fn pytest_environment(public: &Public) -> (String, PathBuf) {
    let venv = land_support::pytest_venv();
    let added = Envelope::parse(
        public
            .sf()
            .args(["--json", "env", "add", "pytest"])
            .arg(&venv)
            .output()
            .unwrap(),
    );
    (added.result()["digest"].as_str().unwrap().to_owned(), venv)
}

struct Fix {
    commit: &'static str,
    fail_to_pass: &'static [&'static str],
}

const FIXES: &[Fix] = &[
    Fix {
        commit: "a4f9a599",
        fail_to_pass: &[
            "tests.test_utils::test_should_bypass_proxies_no_proxy_domain_boundary[http://prelocalhost/-False]",
        ],
    },
    Fix {
        commit: "47914226",
        fail_to_pass: &[
            "tests.test_utils.TestGetNetrcAuth::test_empty_default_credentials_ignored",
        ],
    },
    Fix {
        commit: "f0198e6d",
        fail_to_pass: &["tests.test_utils::test_get_encoding_from_headers[value3-ISO-8859-1]"],
    },
];

const PASS_TO_PASS: &[&str] = &["tests.test_utils.TestSuperLen::test_io_streams[StringIO-Test]"];
const SOURCE: &str = "src/requests/utils.py";
const TESTS: &str = "tests/test_utils.py";

/// The work of `fix`: its parent as the base, the fix's tests over both trees, pytest from
/// the environment; the parent's and the fix's source.
fn slice_for(
    fix: &Fix,
    public: &Public,
    environment: &(String, PathBuf),
) -> (Work, String, String) {
    let mut clone = None;
    let work = Work::from_git(
        |dir| {
            let (path, _) = sf_tests::clone_fixture(dir, "requests.bundle");
            clone = Some(path.clone());
            path.file_name().unwrap().to_str().unwrap().to_owned()
        },
        &format!("{}^", fix.commit),
    )
    .with_public(public);
    let clone = clone.unwrap();
    let slice = work.dir.join("slice");
    write(
        &slice.join("slice.json"),
        &serde_json::json!({
            "id": format!("fix-{}", fix.commit), "revision": 1,
            "scope": [SOURCE], "protected": [TESTS, "tests/conftest.py"],
        })
        .to_string(),
    );
    write(
        &slice.join("overlay").join(TESTS),
        &show(&clone, fix.commit, TESTS),
    );
    write(&slice.join("inputs/none/README"), "no input\n");
    write(
        &slice.join("recipe.json"),
        r#"{"timeoutMs":300000,"outputLimit":1048576}"#,
    );
    let check = |id: &str, phase: &str, stage: &str, exit: i32| {
        serde_json::json!({
            "kind": "command", "id": id, "phase": phase, "stage": stage,
            "argv": ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", TESTS,
                     "--junitxml=/sf/scratch/results.xml"],
            "cwd": {"from": "tree", "path": ""},
            "env": {"PYTHONPATH": "/sf/program/src", "PYTHONDONTWRITEBYTECODE": "1"},
            "environment": "pytest",
            "results": {"junit": "results.xml", "maxBytes": 4194304},
            "input": "none",
            "expectation": {"exitCode": exit, "stdoutDigest": null,
                            "failToPass": fix.fail_to_pass, "passToPass": PASS_TO_PASS},
        })
    };
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [
                check("tests-fail-on-base", "before", "base", 1),
                check("tests-pass-on-candidate", "after", "candidate", 0),
            ],
        })
        .to_string(),
    );
    let frozen = work.sf(&[
        "slice",
        "freeze",
        "--dir",
        "slice",
        "--identity",
        "identity.json",
    ]);
    frozen.result();
    let acceptance: serde_json::Value =
        serde_json::from_slice(&std::fs::read(slice.join("frozen/acceptance.json")).unwrap())
            .unwrap();
    let pinned = &acceptance["checks"][0]["environment"];
    assert_eq!(pinned["name"], "pytest");
    assert_eq!(pinned["digest"], environment.0);
    assert_eq!(pinned["at"], environment.1.to_str().unwrap());
    let parent = show(&clone, &format!("{}^", fix.commit), SOURCE);
    let fixed = show(&clone, fix.commit, SOURCE);
    (work, parent, fixed)
}

fn verdict(work: &Work, parent: &str, name: &str, text: &str) -> serde_json::Value {
    work.collect_and_judge(
        &work.seal_text("slice", SOURCE, parent, name, text),
        "slice",
    )
}

#[test]
fn requests_fixes_run_by_pytest_from_a_venv_environment_are_verified() {
    let public = Public::new();
    let environment = pytest_environment(&public);
    for fix in FIXES {
        let (work, parent, fixed) = slice_for(fix, &public, &environment);
        let verified = verdict(&work, &parent, "fix", &fixed);
        assert_eq!(
            verified["outcome"], "verified",
            "{}: {verified}",
            fix.commit
        );
        let failed = verdict(
            &work,
            &parent,
            "cosmetic",
            &format!("{parent}\n# cosmetic\n"),
        );
        assert_eq!(failed["outcome"], "failed", "{}: {failed}", fix.commit);
        let missed = failed["checks"][1]["problems"].to_string();
        assert!(
            missed.contains(&format!("failToPass test {}", fix.fail_to_pass[0])),
            "{}: {missed}",
            fix.commit
        );
    }
}

/// A small environment of its own (the shared venv stays whole): `bin/greet`, a script.
fn tiny_environment(public: &Public) -> PathBuf {
    let tiny = public.path().join("tiny");
    write(
        &tiny.join("bin/greet"),
        "#!/bin/sh\necho hello from the environment\n",
    );
    std::fs::set_permissions(
        tiny.join("bin/greet"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    tiny
}

#[test]
fn an_environment_that_changed_in_the_store_is_never_used() {
    let public = Public::new();
    let tiny = tiny_environment(&public);
    let work = Work::new().with_public(&public);
    let added = work.sf(&["env", "add", "tiny", tiny.to_str().unwrap()]);
    let digest = added.result()["digest"].as_str().unwrap().to_owned();
    let slice = work.author_slice("tiny-slice", &[]);
    write(
        &slice.join("slice.json"),
        r#"{"id":"tiny","revision":1,"scope":["sum.sh","tests"],"protected":["tests/numbers.sh"]}"#,
    );
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [{
                "kind": "command", "id": "greets", "phase": "guardrail", "stage": "candidate",
                "argv": ["greet"], "cwd": {"from": "scratch", "path": ""}, "env": {},
                "environment": "tiny", "results": null, "input": "numbers",
                "expectation": {"exitCode": 0, "stdoutDigest":
                    Digest::of(b"hello from the environment\n").to_string()},
            }],
        })
        .to_string(),
    );
    work.sf(&[
        "slice",
        "freeze",
        "--dir",
        "tiny-slice",
        "--identity",
        "identity.json",
    ])
    .result();
    let candidate = work.seal("tiny-slice", land_support::SUM_FIXED);
    assert_eq!(
        work.collect_and_judge(&candidate, "tiny-slice")["outcome"],
        "verified"
    );

    // The stored copy changes (its owner can always make a read-only file writable again).
    let stored = public.stored_tree(&digest).join("bin/greet");
    let mut permissions = std::fs::metadata(&stored).unwrap().permissions();
    permissions.set_mode(0o755);
    std::fs::set_permissions(&stored, permissions).unwrap();
    std::fs::write(&stored, "#!/bin/sh\necho hello from the environment\n#\n").unwrap();
    let epochs = || -> Vec<Vec<u8>> {
        let fence = work.dir.join("tiny-slice/state/fence");
        let mut files: Vec<_> = std::fs::read_dir(&fence)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "epoch"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|path| std::fs::read(path).unwrap())
            .collect()
    };
    let before = epochs();
    assert!(!before.is_empty());
    let refused = work.sf(&[
        "collect",
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--slice",
        "tiny-slice",
    ]);
    assert_eq!(refused.error_code(), "corrupt", "{:?}", refused);
    assert_eq!(epochs(), before, "no attempt was claimed");
}

#[test]
fn a_node_project_runs_node_test_with_a_node_modules_environment() {
    let public = Public::new();
    let work = greeter_slice(
        &public,
        &serde_json::json!({"id": "greet", "revision": 1, "scope": ["lib"],
                            "protected": ["test/greet.test.js"]}),
    );
    let judged = |name: &str, text: &str| {
        let candidate = work.seal_text("node-slice", "lib/greet.js", GREET_BUGGY, name, text);
        work.collect_and_judge(&candidate, "node-slice")
    };
    let fixed = judged("fix", GREET_FIXED);
    assert_eq!(fixed["outcome"], "verified", "{fixed}");
    let unfixed = judged("no-fix", &format!("{GREET_BUGGY}// tidied\n"));
    assert_eq!(unfixed["outcome"], "failed", "{unfixed}");
    assert!(
        unfixed["checks"][1]["problems"]
            .to_string()
            .contains("failToPass test test::greets loudly"),
        "{unfixed}"
    );
    // The record's per-test table, as `sf evidence get` shows it.
    let record = unfixed["checks"][1]["record"].as_str().unwrap();
    let shown = work
        .text_command(&["evidence", "get", record, "--slice", "node-slice"])
        .output()
        .unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains("results 2 tests: 1 passed, 1 failed, 0 errored, 0 skipped"),
        "{shown}"
    );
    assert!(
        shown
            .lines()
            .any(|line| line.trim_start().starts_with("failed")
                && line.ends_with("test::greets loudly")),
        "{shown}"
    );
}
