//! `sf demo` (issue 8, item 1) through the built binary and its plugins: every step of the
//! pipeline on the bundled sample project behaves as described.

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
    assert_eq!(step("judge fix")["outcome"], "verified");
    assert_eq!(step("collect fix")["evidence"].as_array().unwrap().len(), 3);
    let invoked = step("integrate invoke");
    assert_eq!(invoked["invocation"], "confirmed");
    assert_eq!(invoked["dispatched"], true);
    assert_eq!(step("integrate inspect")["invocation"], "confirmed");
    assert_eq!(step("invoke again")["dispatched"], false);
    let fix_commit = &step("seal fix")["commit"];
    assert_eq!(&invoked["target"], fix_commit);
    assert_eq!(step("judge no-fix")["outcome"], "failed");
    assert_ne!(
        step("seal no-fix")["candidate"],
        step("seal fix")["candidate"]
    );
    let not_integrated = step("not integrated");
    assert_eq!(&not_integrated["target"], fix_commit);
    // Progress on stderr, one line per run, for both collections.
    let progress = demo
        .stderr
        .lines()
        .filter(|line| line.starts_with("sf collect: ") && !line.contains("attempt"))
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
    for command in ["sf evidence find", "sf integrate inspect", "git --git-dir"] {
        assert!(stdout.contains(command), "{stdout}");
    }
    assert!(kept.join("identity.json").is_file());
    assert!(kept.join("slice/frozen/frozen-inputs.json").is_file());

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
