//! The agent's path on a real repository, through the `sf` binary and nothing written by
//! hand but the environment: psf/requests at the parent of a fix (47914226, an empty netrc
//! entry), its team's repository served by `git daemon` on loopback. `sf slice suggest
//! --fix` reads the lists from sandboxed pytest runs (a test made flaky on purpose is named
//! and left out), a misspelt test id is refused at freeze with the real one named, `sf
//! propose --commit … --only src/` makes the proposal, `sf land --deliver` lands and
//! delivers it; a bug-left-in Candidate made with `sf propose --diff` is Failed.

mod land_support;

use std::path::{Path, PathBuf};

use land_support::{Public, Work, team_git};
use sf_test_support::git_servers::{BareRemote, GitDaemon};

/// The fix: a commit of psf/requests changing `src/requests/utils.py` and its test.
const FIX: &str = "47914226";

/// The FAIL_TO_PASS test the fix adds.
const FIXED_TEST: &str =
    "tests.test_utils.TestGetNetrcAuth::test_empty_default_credentials_ignored";

/// A test that fails at random, added to the fix's test file.
const FLAKY: &str =
    "\n\ndef test_sf_flaky():\n    import random\n    assert random.random() < 0.5\n";

/// Its id.
const FLAKY_TEST: &str = "tests.test_utils::test_sf_flaky";

/// The team's work tree: requests with `main` at the fix's parent and, on branch `fix`, the
/// fix with the flaky test in its test file.
fn team_repository(dir: &Path) -> PathBuf {
    let work = dir.join("requests-work");
    let bundle = sf_tests::fixture_bundle("requests.bundle");
    team_git(
        dir,
        &[
            "clone",
            "-q",
            bundle.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    team_git(&work, &["checkout", "-q", "-B", "main", &format!("{FIX}^")]);
    team_git(&work, &["checkout", "-q", "-b", "fix", FIX]);
    let tests = work.join("tests/test_utils.py");
    let mut text = std::fs::read_to_string(&tests).unwrap();
    text.push_str(FLAKY);
    std::fs::write(&tests, text).unwrap();
    team_git(&work, &["commit", "-q", "-a", "--amend", "--no-edit"]);
    team_git(&work, &["checkout", "-q", "main"]);
    work
}

#[test]
fn a_fix_is_suggested_frozen_proposed_landed_and_delivered() {
    let (_tmp, dir) = sf_tests::private_dir();
    let team = team_repository(&dir);
    let remote = BareRemote::from_repository(&team);
    let daemon = GitDaemon::start(remote.root());
    let url = daemon.url(remote.name());
    let source = remote.path().to_str().unwrap().to_owned();
    let public = Public::new();
    let work = Work::from_git_upstream_at(move |_| source, "main", Some(&url)).with_public(&public);
    let venv = land_support::pytest_venv();
    work.sf(&["env", "add", "pytest", venv.to_str().unwrap()])
        .result();
    let team_dir = team.to_str().unwrap();

    // The Slice, from the fix: its test file the overlay, its code the scope, the lists from
    // six runs of each tree (a flaky test passes or fails at random: six runs that agree on
    // both trees happen once in a thousand times).
    let suggested = work.sf(&[
        "slice",
        "suggest",
        "--identity",
        "identity.json",
        "--dir",
        "slice",
        "--id",
        "netrc-fix",
        "--environment",
        "pytest",
        "--runner",
        "pytest",
        "--fix",
        "fix",
        "--repo",
        team_dir,
        "--env",
        "PYTHONPATH=/sf/program/src",
        "--runs",
        "6",
        "--",
        "-k",
        "netrc or super_len or flaky",
    ]);
    let found = suggested.result().clone();
    assert_eq!(
        found["overlay"],
        serde_json::json!(["tests/test_utils.py"]),
        "{found}"
    );
    assert_eq!(
        found["scope"],
        serde_json::json!(["src/requests/utils.py"]),
        "{found}"
    );
    assert_eq!(
        found["failToPass"],
        serde_json::json!([FIXED_TEST]),
        "{found}"
    );
    assert_eq!(found["flaky"], serde_json::json!([FLAKY_TEST]), "{found}");
    assert_eq!(
        found["deselected"],
        serde_json::json!([FLAKY_TEST]),
        "{found}"
    );
    let pass_to_pass = found["passToPass"].as_array().unwrap();
    assert!(pass_to_pass.len() >= 10, "{found}");
    assert!(!pass_to_pass.iter().any(|id| id == FLAKY_TEST));
    let acceptance = std::fs::read_to_string(work.dir.join("slice/acceptance.json")).unwrap();
    assert!(acceptance.contains("--deselect=tests/test_utils.py::test_sf_flaky"));

    // A misspelt id is refused at freeze, the real one named; nothing is frozen.
    let typo = work.dir.join("slice-typo");
    copy_dir(&work.dir.join("slice"), &typo);
    let misspelt = FIXED_TEST.replace("ignored", "ignord");
    let typo_acceptance = acceptance.replace(FIXED_TEST, &misspelt);
    std::fs::write(typo.join("acceptance.json"), typo_acceptance).unwrap();
    let refused = work.sf(&[
        "slice",
        "freeze",
        "--dir",
        "slice-typo",
        "--identity",
        "identity.json",
    ]);
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert_eq!(
        refused.json["error"]["code"], "invalid-input",
        "{refused:?}"
    );
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "lists failToPass test {misspelt}, which the base run does not report: did you \
             mean {FIXED_TEST}?"
        )),
        "{message}"
    );
    assert!(!typo.join("frozen").exists());

    // The suggested Slice freezes, its dry run confirming the lists on the base.
    let frozen = work.freeze("slice").result().clone();
    let dry_run = &frozen["dryRun"]["checks"];
    assert_eq!(dry_run[0]["check"], "bug-shown", "{frozen}");
    assert_eq!(dry_run[0]["exitCode"], 1, "{frozen}");

    // A bug-left-in Candidate, from a diff that only touches a comment: Failed, the fixed
    // test named.
    let utils_path = team.join("src/requests/utils.py");
    let utils = std::fs::read_to_string(&utils_path).unwrap();
    std::fs::write(&utils_path, format!("# looked at, left as it was\n{utils}")).unwrap();
    let diff = std::process::Command::new("git")
        .current_dir(&team)
        .args(["diff", "--binary"])
        .output()
        .unwrap();
    assert!(diff.status.success(), "{diff:?}");
    std::fs::write(&utils_path, &utils).unwrap();
    std::fs::write(work.dir.join("left.diff"), &diff.stdout).unwrap();
    let left = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--diff",
        "left.diff",
    ]);
    let left = left.result()["digest"].as_str().unwrap().to_owned();
    let failed = work.sf_decided(&[
        "land",
        "--identity",
        "identity.json",
        "--candidate",
        &left,
        "--slice",
        "slice",
    ]);
    assert_eq!(failed.code, Some(3), "{failed:?}");
    let text = failed.json.to_string();
    assert!(text.contains(FIXED_TEST), "{text}");
    assert_eq!(remote.read_ref("refs/heads/main").unwrap(), work.target());

    // The fix's code, proposed from its commit, lands and is delivered.
    let proposed = work.sf(&[
        "propose",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--commit",
        "fix",
        "--repo",
        team_dir,
        "--only",
        "src/",
        "--out",
        "fix.json",
    ]);
    proposed.result();
    let sealed = work.seal_file("slice", &work.dir.join("fix.json"));
    let candidate = sealed.result()["digest"].as_str().unwrap().to_owned();
    let landed = work.land(&candidate, "slice", &["--deliver"]);
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated", "{result}");
    let commit = result["delivery"]["observation"]["commit"]
        .as_str()
        .unwrap();
    assert_eq!(remote.read_ref("refs/heads/main").unwrap(), commit);
    let delivered = remote.git(&["show", &format!("{commit}:src/requests/utils.py")]);
    let fixed = land_support::show(&team.join(".git"), "fix", "src/requests/utils.py");
    assert_eq!(delivered.trim_end(), fixed.trim_end());
}

/// Copies the directory `from` (files only, as a suggested Slice holds) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
