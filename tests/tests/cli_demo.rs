//! `sf demo` through the built binary and its plugins: every step of the pipeline on the
//! bundled sample project behaves as described, on the safe path (`sf land --deliver`, from a
//! team repository the demo makes).

use sf_tests::plugins::{run_json, sf};

#[test]
fn the_demo_verifies_integrates_once_and_fails_the_non_fix() {
    let (_tmp, dir) = sf_tests::private_dir();
    let demo = run_json(sf().current_dir(&dir).args(["demo", "--json"]));
    let result = demo.result();
    assert_eq!(result["ok"], true, "{result}");
    let steps = result["steps"].as_array().expect("steps");
    let step = |name: &str| {
        steps
            .iter()
            .find(|step| step["step"] == name)
            .unwrap_or_else(|| panic!("no step {name} in {result}"))
    };
    for step in steps {
        assert_eq!(step["ok"], true, "{step}");
    }
    let landed = step("land fix");
    assert_eq!(landed["outcome"], "integrated");
    assert_eq!(landed["exit"], 0);
    assert_eq!(landed["invocation"], "confirmed");
    assert!(landed["verdict"].as_str().unwrap().starts_with("sha256:"));
    let fix_commit = &step("seal fix")["commit"];
    assert_eq!(&landed["target"], fix_commit);
    let again = step("land again");
    assert_eq!(again["replayed"], true);
    assert!(again["attempt"].is_null());
    let failed = step("land no-fix");
    assert_eq!(failed["outcome"], "failed");
    assert_eq!(failed["exit"], 3);
    assert!(failed["invocation"].is_null(), "never prepared");
    assert!(
        step("seal tamper")["refused"]
            .as_str()
            .unwrap()
            .contains("protected-path")
    );
    assert_ne!(
        step("seal no-fix")["candidate"],
        step("seal fix")["candidate"]
    );
    let not_integrated = step("not integrated");
    assert_eq!(&not_integrated["target"], fix_commit);
    // Delivered to the team's repository: its main is the fix's commit, whose parent is the
    // team's own commit the owned repository was created from.
    assert_eq!(&not_integrated["team"], fix_commit);
    assert_eq!(
        step("repo create")["initial"],
        step("team repository")["main"]
    );
    // Progress on stderr, one line per run, for both collections.
    let progress = demo
        .stderr
        .lines()
        .filter(|line| line.starts_with("sf: [") && line.contains(" exited 0 in "))
        .count();
    assert_eq!(progress, 6, "{}", demo.stderr);
    // The temporary directory is gone.
    assert!(result.get("dir").is_none());
}

#[test]
fn the_demo_keeps_its_files_in_a_new_directory_only() {
    let (_tmp, dir) = sf_tests::private_dir();
    let kept = dir.join("kept");
    let output = sf()
        .current_dir(&dir)
        .args(["demo", "--keep", "kept"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("demo ok"), "{stdout}");
    for command in ["sf judge", "sf evidence find", "sf land", "git --git-dir"] {
        assert!(stdout.contains(command), "{stdout}");
    }
    assert!(kept.join("identity.json").is_file());
    assert!(kept.join("slice/frozen/slice.json").is_file());

    // An existing directory is refused, and left as it was.
    let again = run_json(
        sf().current_dir(&dir)
            .args(["demo", "--json", "--keep", "kept"]),
    );
    assert_eq!(again.error_code(), "exists");
    assert!(
        again.error_message().contains("--keep"),
        "{}",
        again.error_message()
    );
    assert!(again.error_message().contains("already exists"));
    let text = sf()
        .current_dir(&dir)
        .args(["demo", "--keep", "kept"])
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&text.stderr).contains("already exists"));
    assert!(kept.join("identity.json").is_file());
}
