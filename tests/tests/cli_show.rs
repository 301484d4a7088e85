//! `sf show` and `sf list` on the demo's repository (`sf demo --keep`): its Verified
//! Candidate, integrated and delivered, and its Failed one, never prepared; by digest and by
//! commit; colour only on a real terminal (`script`), never with `NO_COLOR`; nothing written.

use std::path::{Path, PathBuf};

use sf_tests::plugins::{run_json, sf};
use sf_tests::private_dir;

/// A kept demo: its directory (the temporary directory holding it lives as long).
fn demo() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = private_dir();
    let kept = root.join("demo");
    let output = sf().arg("demo").arg("--keep").arg(&kept).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    (dir, kept)
}

fn on(kept: &Path, args: &[&str]) -> std::process::Command {
    let mut command = sf();
    command
        .args(args)
        .arg("--identity")
        .arg(kept.join("identity.json"));
    command
}

fn tree_hash(kept: &Path) -> String {
    sf_tests::tree_hash(&kept.join("repo.git")) + &sf_tests::tree_hash(&kept.join("slice"))
}

#[test]
fn list_and_show_read_verdicts_and_landings_without_writing() {
    let (_dir, kept) = demo();
    let before = tree_hash(&kept);
    let slice = kept.join("slice");
    let slice = slice.to_str().unwrap();
    let listed = run_json(&mut on(&kept, &["list", "--json", "--slice", slice]));
    let rows = listed.result()["candidates"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let verified = rows
        .iter()
        .find(|row| row["verdict"]["outcome"] == "verified")
        .expect("the fix is Verified");
    let failed = rows
        .iter()
        .find(|row| row["verdict"]["outcome"] == "failed")
        .expect("the no-fix is Failed");
    assert_eq!(verified["landing"], "delivered");
    assert_eq!(verified["integrations"][0]["invocation"], "confirmed");
    assert_eq!(verified["deliveries"][0]["invocation"], "confirmed");
    assert_eq!(failed["landing"], "-");
    assert_eq!(failed["integrations"], serde_json::json!([]));

    // By commit id and by digest: the same facts.
    let commit = verified["commit"].as_str().unwrap();
    let digest = verified["digest"].as_str().unwrap();
    let by_commit = run_json(&mut on(
        &kept,
        &["show", "--json", commit, "--slice", slice],
    ));
    let by_digest = run_json(&mut on(
        &kept,
        &["show", "--json", digest, "--slice", slice],
    ));
    assert_eq!(by_commit.result(), by_digest.result());
    assert_eq!(by_commit.result(), verified);

    let output = on(&kept, &["show", commit, "--slice", slice])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    for needle in [
        &format!("candidate  {digest}\n"),
        &format!("commit     {commit}\n"),
        "verdict    verified (attempt ",
        "landing    delivered\n",
        "  integration land/",
        ": confirmed (desired-state-observed)\n",
        "  changed  sum.sh\n",
        // The message's blank line is the bar alone: no line ends with a space.
        "| sum.sh: fix\n|\n| Proposed by the sf demo.\n",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
    assert!(!text.contains('\x1b'), "no colour off a terminal: {text:?}");
    assert!(text.lines().all(|line| !line.ends_with(' ')), "{text:?}");

    // Without --slice there is no Verdict, and it says why.
    let listed = run_json(&mut on(&kept, &["list", "--json"]));
    assert_eq!(
        listed.result()["candidates"][0]["verdict"]["none"],
        "no --slice given"
    );

    // A commit no Candidate has, and something that is neither.
    let missing = run_json(&mut on(&kept, &["show", "--json", &"0".repeat(40)]));
    assert_eq!(missing.error_code(), "missing");
    let neither = run_json(&mut on(&kept, &["show", "--json", "HEAD"]));
    assert_eq!(neither.error_code(), "usage");
    assert_eq!(neither.code, Some(2));
    assert_eq!(
        tree_hash(&kept),
        before,
        "sf list and sf show wrote nothing"
    );
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let (_dir, kept) = demo();
    let sf = sf_tests::plugins::built().sf.clone();
    let command = format!(
        "{} list --identity {} --slice {}",
        sf.display(),
        kept.join("identity.json").display(),
        kept.join("slice").display()
    );
    let on_terminal = |no_color: Option<&str>| {
        let mut script = std::process::Command::new("script");
        script
            .args(["-qec", &command, "/dev/null"])
            .env("TERM", "xterm")
            .env_remove("SF_PLUGIN_PATH")
            .env_remove("NO_COLOR");
        if let Some(value) = no_color {
            script.env("NO_COLOR", value);
        }
        let output = script.output().unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let coloured = on_terminal(None);
    assert!(coloured.contains("\x1b[32mverified\x1b[0m"), "{coloured:?}");
    assert!(coloured.contains("\x1b[31mfailed\x1b[0m"), "{coloured:?}");
    let plain = on_terminal(Some("1"));
    assert!(!plain.contains('\x1b'), "{plain:?}");
    assert!(plain.contains("verified"), "{plain:?}");
    // An empty NO_COLOR is unset, as the convention says.
    assert!(on_terminal(Some("")).contains("\x1b[32m"));
}
