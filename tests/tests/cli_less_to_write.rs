//! Less to write: a check that reads no input names none (no empty `inputs/` directory),
//! and one graded on its exit code alone omits `stdoutDigest`; both still grade, through the
//! built `sf` on the sample project.

mod land_support;

use land_support::{SUM_FIXED, Work};

/// An acceptance of one after check running the tree's `sum.sh` over `/dev/null` (which sums
/// to 0), expecting exit code `exit`: no `input`, no `stdoutDigest`.
fn acceptance(exit: i32) -> String {
    serde_json::json!({
        "protocol": "sf-repository-acceptance/2",
        "checks": [{
            "kind": "process", "id": "sums-nothing", "phase": "guardrail", "stage": "candidate",
            "entry": {"from": "tree", "path": "sum.sh"}, "entryInScope": true,
            "args": ["/dev/null"], "expectation": {"exitCode": exit},
        }],
    })
    .to_string()
}

#[test]
fn a_check_without_input_or_stdout_digest_freezes_and_grades_on_its_exit_code() {
    let work = Work::unfrozen();
    for (name, exit, outcome) in [("meets", 0, "verified"), ("misses", 3, "failed")] {
        // The demo's inputs are gone: nothing names them.
        work.author_slice(
            name,
            &[
                ("acceptance.json", &acceptance(exit)),
                ("inputs/numbers/numbers.txt", ""),
                ("inputs/empty/numbers.txt", ""),
            ],
        );
        let frozen = work.freeze(name);
        frozen.result();
        let stored =
            std::fs::read_to_string(work.dir.join(name).join("frozen/acceptance.json")).unwrap();
        // The frozen record is explicit: the empty input pinned, stdout not compared.
        assert!(stored.contains(r#""stdoutDigest":null"#), "{stored}");
        assert!(stored.contains(r#""input":"sha256:"#), "{stored}");
        let candidate = work.seal(name, SUM_FIXED);
        let verdict = work.collect_and_judge(&candidate, name);
        assert_eq!(verdict["outcome"], outcome, "{name}: {verdict}");
    }
}

/// The sample project committed twice in `dir/team` (the second commit adds a README); its
/// path.
fn team_with_history(dir: &std::path::Path) -> String {
    let team = dir.join("team");
    land_support::write(&team.join("sum.sh"), land_support::SUM_BUGGY);
    land_support::team_git(&team, &["init", "-q", "-b", "main"]);
    land_support::team_git(&team, &["add", "."]);
    land_support::team_git(&team, &["commit", "-q", "-m", "first"]);
    land_support::write(&team.join("README"), "later\n");
    land_support::team_git(&team, &["add", "."]);
    land_support::team_git(&team, &["commit", "-q", "-m", "second"]);
    "team".to_owned()
}

#[test]
fn a_slice_freezes_on_an_older_factory_commit_with_base() {
    let work = Work::from_git(team_with_history, "main~1");
    let first = work.target();
    work.sf(&[
        "repo",
        "import",
        "--identity",
        "identity.json",
        "--from-git",
        "team",
        "--rev",
        "main",
        "--advance",
    ])
    .result();
    let second = work.target();
    assert_ne!(first, second);
    work.author_slice("at-target", &[]);
    assert_eq!(work.freeze("at-target").result()["base"], second.as_str());
    work.author_slice("older", &[]);
    let freeze = |slice: &str, base: &str| {
        work.sf(&[
            "slice",
            "freeze",
            "--dir",
            slice,
            "--identity",
            "identity.json",
            "--base",
            base,
        ])
    };
    assert_eq!(freeze("older", &first).result()["base"], first.as_str());
    // A Candidate sealed there is a child of the older base.
    let candidate = work.seal("older", SUM_FIXED);
    let shown = work.sf(&["show", "--identity", "identity.json", &candidate]);
    assert_eq!(shown.result()["base"], first.as_str(), "{}", shown.json);

    // A commit the repository does not hold, and not a commit id: refused, nothing frozen.
    work.author_slice("wrong", &[]);
    let refused = freeze("wrong", "1111111111111111111111111111111111111111");
    assert_eq!(refused.error_code(), "missing", "{}", refused.json);
    assert!(
        refused.error_message().contains("--base"),
        "{}",
        refused.json
    );
    let garbage = freeze("wrong", "HEAD~1");
    assert_eq!(garbage.error_code(), "invalid-input", "{}", garbage.json);
    assert!(!work.dir.join("wrong/frozen").exists());
}

/// `sf --json env list` from `cwd` with `args` and the environment `vars`.
fn env_list(
    cwd: &std::path::Path,
    args: &[&str],
    vars: &[(&str, &str)],
) -> sf_tests::plugins::Envelope {
    let mut command = sf_tests::plugins::sf();
    command.current_dir(cwd).env_remove("SF_CONFIG");
    for (name, value) in vars {
        command.env(name, value);
    }
    sf_tests::plugins::run_json(command.args(["--json", "env", "list"]).args(args))
}

#[test]
fn the_configuration_is_found_by_convention_and_said() {
    // Some of the lists below find no configuration: as root, they read the machine's
    // default store, which another test adds to and removes.
    let _lock = sf_tests::default_environment_store_lock();
    let work = Work::unfrozen();
    let broken = |dir: &std::path::Path, name: &str| {
        let file = dir.join(name);
        land_support::write(&file, "[executor\n");
        file
    };
    // Beside the repository identity, from another directory.
    let elsewhere = work.dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let beside = broken(&work.dir, "sf.toml");
    let identity = work.dir.join("identity.json");
    let identity = format!("--identity={}", identity.display());
    let listed = env_list(&elsewhere, &[], &[]);
    listed.result();
    let found = sf_tests::plugins::run_json(
        sf_tests::plugins::sf()
            .current_dir(&elsewhere)
            .env_remove("SF_CONFIG")
            .args(["--json", "list", &identity]),
    );
    assert!(
        found
            .error_message()
            .contains(&beside.display().to_string()),
        "{}",
        found.json
    );
    assert!(
        found
            .stderr
            .contains("found beside the repository identity"),
        "{}",
        found.stderr
    );
    // In the working directory, before the one beside the identity.
    let here = broken(&elsewhere, "sf.toml");
    let found = env_list(&elsewhere, &[], &[]);
    assert!(found.error_message().contains("sf.toml"), "{}", found.json);
    assert!(
        found
            .stderr
            .contains("./sf.toml (found in the working directory"),
        "{}",
        found.stderr
    );
    // SF_CONFIG first of all; --config before it, and then nothing is said.
    let named = broken(&work.dir, "named.toml");
    let found = env_list(&elsewhere, &[], &[("SF_CONFIG", named.to_str().unwrap())]);
    assert!(
        found.error_message().contains("named.toml"),
        "{}",
        found.json
    );
    assert!(found.stderr.contains("from SF_CONFIG"), "{}", found.stderr);
    std::fs::remove_file(&here).unwrap();
    let good = work.dir.join("good.toml");
    land_support::write(&good, "");
    let explicit = env_list(
        &elsewhere,
        &["--config", good.to_str().unwrap()],
        &[("SF_CONFIG", named.to_str().unwrap())],
    );
    explicit.result();
    assert!(
        !explicit.stderr.contains("sf: configuration"),
        "{}",
        explicit.stderr
    );
}

#[test]
fn an_environment_store_the_sandbox_cannot_reach_is_refused_before_anything_is_stored() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_keep, dir) = sf_tests::private_dir();
    // A HOME only its owner may pass, as root's is, and a store set below it (as root, the
    // default store is /var/lib/sf/environments, which the sandbox's user can reach).
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let config = dir.join("sf.toml");
    land_support::write(
        &config,
        &format!(
            "[environments]\nstore = \"{}\"\n",
            home.join(".local/share/sf/environments").display()
        ),
    );
    let venv = dir.join("venv");
    land_support::write(&venv.join("bin/tool"), "#!/bin/sh\n");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let add = || {
        sf_tests::plugins::run_json(
            sf_tests::plugins::sf()
                .current_dir(&dir)
                .env("HOME", &home)
                .env_remove("SF_CONFIG")
                .arg("--config")
                .arg(&config)
                .args(["--json", "env", "add", "tools"])
                .arg(&venv),
        )
    };
    if nix::unistd::geteuid().is_root() {
        let refused = add();
        assert_eq!(
            refused.error_code(),
            "unreachable-store",
            "{}",
            refused.json
        );
        assert!(
            refused.error_message().contains("chmod o+x"),
            "{}",
            refused.json
        );
        assert!(!home.join(".local").exists(), "nothing was stored");
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    // Run as another user, the runs read as sf's own user: nothing to refuse.
    add().result();
}

#[test]
fn an_environment_name_takes_a_new_version_or_goes_and_the_old_tree_stays() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_keep, dir) = sf_tests::private_dir();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = dir.join("envs");
    let config = dir.join("envs.toml");
    land_support::write(
        &config,
        &format!("[environments]\nstore = \"{}\"\n", store.display()),
    );
    let env = |args: &[&str]| {
        sf_tests::plugins::run_json(
            sf_tests::plugins::sf()
                .env_remove("SF_CONFIG")
                .arg("--config")
                .arg(&config)
                .args(["--json", "env"])
                .args(args),
        )
    };
    let tree = |version: &str| {
        let tree = dir.join(format!("tools-{version}"));
        land_support::write(&tree.join("VERSION"), version);
        tree.to_str().unwrap().to_owned()
    };
    let first = env(&["add", "tools", &tree("1")]).result()["digest"].clone();
    // Without --replace a name is never re-pointed.
    let refused = env(&["add", "tools", &tree("2")]);
    assert_eq!(refused.error_code(), "conflict", "{}", refused.json);
    let second = env(&["add", "tools", &tree("2"), "--replace"]);
    assert_eq!(second.result()["replaced"], first, "{}", second.json);
    assert!(
        env(&["add", "tools", &tree("2"), "--replace"])
            .result()
            .get("replaced")
            .is_none()
    );
    let second = second.result()["digest"].clone();
    assert_ne!(first, second);
    let listed = env(&["list"]);
    assert_eq!(listed.result()["environments"][0]["digest"], second);
    // The old version is still stored and verifies: a Slice frozen with it pins its digest.
    env(&["show", first.as_str().unwrap()]).result();
    let removed = env(&["remove", "tools"]);
    assert_eq!(removed.result()["removed"], second);
    assert_eq!(env(&["show", "tools"]).error_code(), "missing");
    env(&["show", second.as_str().unwrap()]).result();
    assert_eq!(env(&["remove", "tools"]).error_code(), "missing");
}
