//! `sf env build` through the binary, with the real package registries: an environment built
//! from the lockfile in a commit's tree, inside the sandbox, its network reaching only sf's
//! registry proxy. psf/requests' test dependencies (a pinned requirements file committed on
//! the fix's parent) are built with pip, a second build gives the same digest, and the Slice
//! suggested from the fix with that environment lands the fix and fails a bug-left-in
//! Candidate. A requirements file naming an index on the host's loopback is refused by the
//! proxy, the host named, and its listener sees no connection; nothing is stored.

mod land_support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use land_support::{PYTEST_PACKAGES, Public, Work, team_git};

/// The fix: a commit of psf/requests changing `src/requests/utils.py` and its test.
const FIX: &str = "47914226";

/// The FAIL_TO_PASS test the fix adds.
const FIXED_TEST: &str =
    "tests.test_utils.TestGetNetrcAuth::test_empty_default_credentials_ignored";

/// requests at the fix's parent with `requirements-test.txt` (the pinned test dependencies)
/// committed on `main`, and the fix on `fix`, rebased onto it.
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
    std::fs::write(
        work.join("requirements-test.txt"),
        format!("{}\n", PYTEST_PACKAGES.join("\n")),
    )
    .unwrap();
    team_git(&work, &["add", "requirements-test.txt"]);
    team_git(&work, &["commit", "-q", "-m", "Pin the test dependencies"]);
    team_git(&work, &["checkout", "-q", "-b", "fix", FIX]);
    team_git(&work, &["rebase", "-q", "main"]);
    team_git(&work, &["checkout", "-q", "main"]);
    work
}

fn build(work: &Work, name: &str, lockfile: &str) -> sf_tests::plugins::Envelope {
    work.sf(&[
        "env",
        "build",
        name,
        "--identity",
        "identity.json",
        "--recipe",
        "pip",
        "--lockfile",
        lockfile,
    ])
}

#[test]
fn requests_test_dependencies_are_built_with_pip_and_land_the_fix() {
    let (_tmp, dir) = sf_tests::private_dir();
    let team = team_repository(&dir);
    let public = Public::new();
    let source = team.to_str().unwrap().to_owned();
    let work = Work::from_git(move |_| source, "main").with_public(&public);

    let built = build(&work, "pytest", "requirements-test.txt");
    let first = built.result().clone();
    let build_record = &first["build"];
    assert_eq!(build_record["recipe"], "pip", "{first}");
    assert_eq!(build_record["lockfile"], "requirements-test.txt", "{first}");
    assert_eq!(build_record["commit"], work.target(), "{first}");
    assert_eq!(
        build_record["registries"],
        serde_json::json!(["pypi.org:443", "files.pythonhosted.org:443"]),
        "{first}"
    );
    assert!(build_record["tools"]["pip"].is_string(), "{first}");
    assert!(
        first["at"]
            .as_str()
            .unwrap()
            .starts_with("/opt/sf-env/pip-"),
        "{first}"
    );
    // Reproducible: the same lockfile gives the same environment.
    let again = build(&work, "pytest-again", "requirements-test.txt");
    let again = again.result();
    assert_eq!(again["digest"], first["digest"], "{again}");
    assert_eq!(again["build"]["rebuilt"], true, "{again}");
    // `sf env list` says what each was built from.
    let listed = work.sf(&["env", "list"]);
    let listed = listed.result();
    let pytest = listed["environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|environment| environment["name"] == "pytest")
        .unwrap();
    assert_eq!(
        pytest["built"]["lockfile"], "requirements-test.txt",
        "{listed}"
    );

    // The Slice from the fix, with the built environment.
    let team_dir = team.to_str().unwrap();
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
        "--",
        "-k",
        "netrc",
    ]);
    let found = suggested.result().clone();
    assert_eq!(
        found["failToPass"],
        serde_json::json!([FIXED_TEST]),
        "{found}"
    );
    work.freeze("slice").result();

    // A bug-left-in Candidate (a comment only) is Failed.
    let utils_path = team.join("src/requests/utils.py");
    let utils = std::fs::read_to_string(&utils_path).unwrap();
    std::fs::write(&utils_path, format!("# looked at\n{utils}")).unwrap();
    let diff = std::process::Command::new("git")
        .current_dir(&team)
        .args(["diff", "--binary"])
        .output()
        .unwrap();
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

    // The fix lands.
    work.sf(&[
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
    ])
    .result();
    let sealed = work.seal_file("slice", &work.dir.join("fix.json"));
    let candidate = sealed.result()["digest"].as_str().unwrap().to_owned();
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.result()["outcome"], "integrated", "{landed:?}");
}

#[test]
fn an_index_on_the_hosts_loopback_is_refused_and_nothing_is_stored() {
    let (_tmp, dir) = sf_tests::private_dir();
    let index = TcpListener::bind("127.0.0.1:0").unwrap();
    index.set_nonblocking(true).unwrap();
    let port = index.local_addr().unwrap().port();
    let source = dir.join("project");
    std::fs::create_dir(&source).unwrap();
    team_git(&source, &["init", "-q", "-b", "main"]);
    std::fs::write(
        source.join("requirements.txt"),
        format!("--index-url https://127.0.0.1:{port}/simple\niniconfig==2.0.0\n"),
    )
    .unwrap();
    team_git(&source, &["add", "."]);
    team_git(&source, &["commit", "-q", "-m", "a local index"]);
    let public = Public::new();
    let path = source.to_str().unwrap().to_owned();
    let work = Work::from_git(move |_| path, "main").with_public(&public);
    let refused = build(&work, "local", "requirements.txt");
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert_eq!(refused.json["error"]["code"], "build-failed", "{refused:?}");
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("127.0.0.1:{port}")),
        "the refused host is named: {message}"
    );
    assert!(
        index.accept().is_err(),
        "the index on loopback saw a connection"
    );
    let listed = work.sf(&["env", "list"]);
    assert_eq!(
        listed.result()["environments"],
        serde_json::json!([]),
        "{listed:?}"
    );
}
