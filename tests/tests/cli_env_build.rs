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

/// A small Node project whose one npm dependency is pinned in its `package-lock.json`.
const PACKAGE_JSON: &str = r#"{
  "name": "sf-node-sample",
  "version": "1.0.0",
  "private": true,
  "dependencies": {
    "ms": "2.1.3"
  }
}
"#;

const PACKAGE_LOCK: &str = r#"{
  "name": "sf-node-sample",
  "version": "1.0.0",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": {
      "name": "sf-node-sample",
      "version": "1.0.0",
      "dependencies": {
        "ms": "2.1.3"
      }
    },
    "node_modules/ms": {
      "version": "2.1.3",
      "resolved": "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz",
      "integrity": "sha512-6FlzubTLZG3J2a/NVCAleEhjzq5oxgHyaCU9yYXvcLsvoVaHJq/s5xXI6/XXP6tz7R9xAOtHnSO/tXtF3WRTlA==",
      "license": "MIT"
    }
  }
}
"#;

const DURATION_BUGGY: &str = "module.exports = (text) => Number(text);\n";
const DURATION_STILL_BUGGY: &str = "module.exports = (text) => Number(text) || 0;\n";
const DURATION_FIXED: &str = "const ms = require('ms');\nmodule.exports = (text) => ms(text);\n";
const DURATION_TEST: &str = "const test = require('node:test');\n\
const assert = require('node:assert');\n\
const duration = require('../lib/duration');\n\
test('reads days', () => { assert.strictEqual(duration('2 days'), 172800000); });\n\
test('reads plain numbers', () => { assert.strictEqual(duration('5'), 5); });\n";

/// The project with its lockfile, in a Git repository `node` in `dir`.
fn node_project(dir: &Path) -> String {
    let source = dir.join("node");
    std::fs::create_dir_all(source.join("lib")).unwrap();
    std::fs::write(source.join("package.json"), PACKAGE_JSON).unwrap();
    std::fs::write(source.join("package-lock.json"), PACKAGE_LOCK).unwrap();
    std::fs::write(source.join("lib/duration.js"), DURATION_BUGGY).unwrap();
    team_git(&source, &["init", "-q", "-b", "main"]);
    team_git(&source, &["add", "-A"]);
    team_git(&source, &["commit", "-q", "-m", "durations"]);
    "node".into()
}

#[test]
fn a_node_projects_npm_dependency_is_built_and_its_node_test_suite_lands_the_fix() {
    let public = Public::new();
    let work = Work::from_git(node_project, "HEAD").with_public(&public);
    let built = work.sf(&[
        "env",
        "build",
        "node-deps",
        "--identity",
        "identity.json",
        "--recipe",
        "npm",
    ]);
    let built = built.result().clone();
    assert_eq!(
        built["build"]["registries"],
        serde_json::json!(["registry.npmjs.org:443"]),
        "{built}"
    );
    let at = built["at"].as_str().unwrap().to_owned();
    let stored = public
        .store()
        .join("objects")
        .join(
            built["digest"]
                .as_str()
                .unwrap()
                .trim_start_matches("sha256:"),
        )
        .join("tree/node_modules/ms/index.js");
    assert!(stored.is_file(), "{built}");
    let again = work.sf(&[
        "env",
        "build",
        "node-deps-again",
        "--identity",
        "identity.json",
        "--recipe",
        "npm",
    ]);
    assert_eq!(
        again.result()["digest"],
        built["digest"],
        "npm ci reproduces"
    );

    // The fix, committed after the base was taken; and a Candidate that leaves the bug in.
    let project = work.dir.join("node");
    std::fs::write(project.join("lib/duration.js"), DURATION_STILL_BUGGY).unwrap();
    team_git(&project, &["commit", "-q", "-a", "-m", "still a number"]);
    std::fs::write(project.join("lib/duration.js"), DURATION_FIXED).unwrap();
    std::fs::create_dir_all(project.join("test")).unwrap();
    std::fs::write(project.join("test/duration.test.js"), DURATION_TEST).unwrap();
    team_git(&project, &["add", "-A"]);
    team_git(&project, &["commit", "-q", "-m", "read durations with ms"]);

    let node_path = format!("NODE_PATH={at}/node_modules");
    let found = work.sf(&[
        "slice",
        "suggest",
        "--identity",
        "identity.json",
        "--dir",
        "slice",
        "--id",
        "durations",
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
    ]);
    let found = found.result().clone();
    assert_eq!(
        found["failToPass"],
        serde_json::json!(["test::reads days"]),
        "{found}"
    );
    work.freeze("slice").result();
    let seal = |rev: &str| {
        let sealed = work.sf(&[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--commit",
            rev,
            "--repo",
            "node",
            "--only",
            "lib/",
        ]);
        sealed.result()["digest"].as_str().unwrap().to_owned()
    };
    let left = seal("HEAD~1");
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
    let landed = work.land(&seal("HEAD"), "slice", &[]);
    assert_eq!(landed.result()["outcome"], "integrated", "{landed:?}");
}

/// The pinned requirements of the small Python project, before and after it moves to the
/// next release of its one dependency.
const REQUIREMENTS_2_0: &str = "iniconfig==2.0.0 \\\n    \
--hash=sha256:b6a85871a79d2e3b22d2d1b94ac2824226a63c6b741c88f7ae975f18b6778374\n";
const REQUIREMENTS_2_1: &str = "iniconfig==2.1.0 \\\n    \
--hash=sha256:9deba5723312380e77435581c6bf4935c94cbfab9b1ed33ef8d238ea168eb760\n";

/// A Slice whose one check prints the installed iniconfig's version, its environment named
/// by recipe: built from the base's `requirements.txt`.
fn versioned_slice(work: &Work, name: &str, revision: u32, version: &str) {
    let slice = work.dir.join(name);
    std::fs::create_dir_all(&slice).unwrap();
    let check = |id: &str, phase: &str, stage: &str| {
        serde_json::json!({
            "kind": "command", "id": id, "phase": phase, "stage": stage,
            "argv": ["python3", "-c",
                     "import importlib.metadata as m; print(m.version('iniconfig'))"],
            "cwd": {"from": "scratch", "path": ""},
            "env": {},
            "environment": {"build": {"recipe": "pip"}},
            "results": null,
            "expectation": {"exitCode": 0,
                            "stdoutDigest": sf_host::canonical::Digest::of(
                                format!("{version}\n").as_bytes()).to_string()},
        })
    };
    std::fs::write(
        slice.join("slice.json"),
        serde_json::json!({"id": "deps", "revision": revision,
                           "scope": ["requirements.txt"]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        slice.join("acceptance.json"),
        serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [check("before", "before", "base"), check("after", "after", "candidate")],
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        slice.join("recipe.json"),
        r#"{"timeoutMs":60000,"outputLimit":65536}"#,
    )
    .unwrap();
}

/// The environments in the work's store named by recipe (`pip-…`), with their digests.
fn built_environments(work: &Work) -> Vec<(String, String)> {
    let listed = work.sf(&["env", "list"]);
    listed.result()["environments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|environment| environment["name"].as_str().unwrap().starts_with("pip-"))
        .map(|environment| {
            assert_eq!(environment["built"]["lockfile"], "requirements.txt");
            (
                environment["name"].as_str().unwrap().to_owned(),
                environment["digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_slice_names_its_environment_by_recipe_and_it_follows_the_base() {
    let (_tmp, dir) = sf_tests::private_dir();
    let source = dir.join("project");
    std::fs::create_dir(&source).unwrap();
    team_git(&source, &["init", "-q", "-b", "main"]);
    std::fs::write(source.join("requirements.txt"), REQUIREMENTS_2_0).unwrap();
    team_git(&source, &["add", "."]);
    team_git(&source, &["commit", "-q", "-m", "pin iniconfig"]);
    let public = Public::new();
    let path = source.to_str().unwrap().to_owned();
    let work = Work::from_git(move |_| path, "main").with_public(&public);

    // The freeze builds the environment from the base's lockfile; a second freeze finds it.
    versioned_slice(&work, "slice", 1, "2.0.0");
    work.freeze("slice").result();
    let first = built_environments(&work);
    assert_eq!(first.len(), 1, "{first:?}");
    versioned_slice(&work, "slice-again", 1, "2.0.0");
    work.freeze("slice-again").result();
    assert_eq!(built_environments(&work), first);

    // A Candidate that moves the lockfile on: its own lockfile is never built (the check runs
    // in the base's environment), and it lands.
    std::fs::write(source.join("requirements.txt"), REQUIREMENTS_2_1).unwrap();
    let diff = std::process::Command::new("git")
        .current_dir(&source)
        .args(["diff", "--binary"])
        .output()
        .unwrap();
    std::fs::write(work.dir.join("move.diff"), &diff.stdout).unwrap();
    let sealed = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--diff",
        "move.diff",
    ]);
    let candidate = sealed.result()["digest"].as_str().unwrap().to_owned();
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.result()["outcome"], "integrated", "{landed:?}");
    assert_eq!(
        built_environments(&work),
        first,
        "a Candidate's lockfile is not built"
    );

    // Frozen again on the new base, the Slice gets a new environment, never the stale one;
    // the first stays stored for the Slice frozen with it.
    versioned_slice(&work, "slice-next", 2, "2.1.0");
    work.freeze("slice-next").result();
    let now = built_environments(&work);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(now.contains(&first[0]), "{now:?}");
    let fresh: Vec<_> = now.iter().filter(|built| **built != first[0]).collect();
    assert_ne!(fresh[0].1, first[0].1, "{now:?}");
}

/// A project locked with uv (tests/fixtures/uv-sample): `packaging` a dependency, `iniconfig`
/// in its `tests` group. The `uv` recipe installs the locked dependencies and the groups
/// asked for, never the project itself, and gives the same environment twice.
#[test]
fn a_uv_lock_is_built_with_its_groups_and_without_the_project() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/uv-sample");
    let prepare = move |dir: &Path| {
        let source = dir.join("uv-project");
        std::fs::create_dir(&source).unwrap();
        for file in ["pyproject.toml", "uv.lock"] {
            std::fs::copy(fixture.join(file), source.join(file)).unwrap();
        }
        team_git(&source, &["init", "-q", "-b", "main"]);
        team_git(&source, &["add", "."]);
        team_git(&source, &["commit", "-q", "-m", "locked with uv"]);
        "uv-project".to_owned()
    };
    let public = Public::new();
    let work = Work::from_git(prepare, "main").with_public(&public);
    let uv = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "env",
            "build",
            name,
            "--identity",
            "identity.json",
            "--recipe",
            "uv",
        ];
        args.extend(extra);
        work.sf(&args)
    };
    let site_packages = |built: &serde_json::Value| {
        let digest = built["digest"]
            .as_str()
            .unwrap()
            .trim_start_matches("sha256:");
        let dir = public
            .store()
            .join("objects")
            .join(digest)
            .join("tree/lib/python3.11/site-packages");
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with('_') && !name.ends_with(".pth"))
            .collect();
        names.sort();
        names
    };
    let with_tests = uv("with-tests", &["--group", "tests"]);
    let with_tests = with_tests.result().clone();
    assert_eq!(
        site_packages(&with_tests),
        [
            "iniconfig",
            "iniconfig-2.0.0.dist-info",
            "packaging",
            "packaging-24.0.dist-info"
        ],
        "{with_tests}"
    );
    assert_eq!(with_tests["build"]["groups"], serde_json::json!(["tests"]));
    assert_eq!(with_tests["build"]["tools"]["uv"], "0.13.9", "{with_tests}");
    let again = uv("with-tests-again", &["--group", "tests"]);
    assert_eq!(again.result()["digest"], with_tests["digest"]);
    let plain = uv("plain", &[]);
    let plain = plain.result().clone();
    assert_eq!(
        site_packages(&plain),
        ["packaging", "packaging-24.0.dist-info"],
        "{plain}"
    );
    assert_ne!(plain["at"], with_tests["at"]);
    // A group's name is checked before anything runs.
    let refused = uv("bad", &["--group", "tests; rm -rf /"]);
    assert_eq!(
        refused.json["error"]["code"], "invalid-input",
        "{refused:?}"
    );
}

/// An npm lockfile whose package is resolved from a server on the host's loopback: the proxy
/// refuses it (an address, never a registry), the build fails naming it, and the server sees
/// no connection. Install scripts never run in the npm recipe (`npm ci --ignore-scripts`).
#[test]
fn an_npm_package_resolved_from_the_hosts_loopback_is_refused() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    server.set_nonblocking(true).unwrap();
    let port = server.local_addr().unwrap().port();
    let lock = PACKAGE_LOCK.replace(
        "https://registry.npmjs.org/ms/-/ms-2.1.3.tgz",
        &format!("https://127.0.0.1:{port}/ms-2.1.3.tgz"),
    );
    assert_ne!(lock, PACKAGE_LOCK);
    let prepare = move |dir: &Path| {
        node_project(dir);
        let source = dir.join("node");
        std::fs::write(source.join("package-lock.json"), &lock).unwrap();
        team_git(&source, &["commit", "-q", "-a", "-m", "resolved elsewhere"]);
        "node".to_owned()
    };
    let public = Public::new();
    let work = Work::from_git(prepare, "HEAD").with_public(&public);
    let refused = work.sf(&[
        "env",
        "build",
        "node-deps",
        "--identity",
        "identity.json",
        "--recipe",
        "npm",
    ]);
    assert_eq!(refused.json["error"]["code"], "build-failed", "{refused:?}");
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(
        server.accept().is_err(),
        "the loopback server saw a connection"
    );
}
