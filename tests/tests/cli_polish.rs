//! The command line as a new user meets it: `--json` with `--help` and `--version`, usage
//! errors exiting 2 whatever the command, unknown configuration keys, error texts that state
//! the violation (never the rule, which reads as its opposite), each flag named once, `sf
//! exec`'s bounds and runtime path, a truncated plugin library, `sf oats --config`, the
//! identity alone on stdout, and the text of `sf collect` and `sf judge`. Each drives the
//! real `sf` binary.

mod land_support;

use std::path::{Path, PathBuf};

use land_support::{SUM_FIXED, SUM_LOOPS, Work};
use sf_tests::plugins::{built, run_json, sf};
use sf_tests::private_dir;

fn source(root: &Path) -> PathBuf {
    let source = root.join("source");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("a.txt"), "a\n").unwrap();
    source
}

fn create(root: &Path) -> std::process::Command {
    let mut command = sf();
    command
        .args([
            "repo",
            "create",
            "--product",
            "p",
            "--target",
            "refs/heads/main",
        ])
        .arg("--path")
        .arg(root.join("repo"));
    command
}

#[test]
fn help_and_version_with_json_are_ok_envelopes() {
    let version = run_json(sf().args(["--json", "--version"]));
    assert_eq!(version.code, Some(0));
    assert_eq!(version.result()["version"], env!("CARGO_PKG_VERSION"));
    for args in [
        &["--json", "--help"][..],
        &["--json", "seal", "--help"],
        &["repo", "create", "--help", "--json"],
    ] {
        let help = run_json(sf().args(args));
        assert_eq!(help.code, Some(0), "{args:?}");
        let text = help.result()["help"].as_str().unwrap();
        assert!(text.contains("Usage: sf"), "{args:?}: {text}");
    }
    // Without --json, the text as before.
    let output = sf().arg("--version").output().unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().trim(),
        format!("sf {}", env!("CARGO_PKG_VERSION"))
    );
    // A command missing its subcommand is still a usage error.
    let missing = run_json(sf().args(["--json", "repo"]));
    assert_eq!(missing.error_code(), "usage");
    assert_eq!(missing.code, Some(2));
}

#[test]
fn usage_errors_exit_2_in_every_command() {
    let (_dir, root) = private_dir();
    let source = source(&root);
    // --rev with --from: clap lets it through (the two sources conflict), the command refuses.
    let refused = run_json(
        create(&root)
            .args(["--json", "--rev", "main", "--from"])
            .arg(&source),
    );
    assert_eq!(refused.error_code(), "usage");
    assert_eq!(refused.code, Some(2));
    assert!(
        refused
            .error_message()
            .contains("--rev goes with --from-git")
    );
    assert!(!root.join("repo").exists());
    let output = create(&root)
        .args(["--rev", "main", "--from"])
        .arg(&source)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).starts_with("sf: error (usage): --rev"),
        "{output:?}"
    );
    // A refusal of a flag combination in other commands.
    let (_p, program) = private_dir();
    std::fs::write(program.join("main.sh"), "echo hi\n").unwrap();
    let exec = run_json(
        sf().args(["exec", "--json", "--runtime", "sh", "--entry", "main.sh"])
            .args(["--entry-in", "harness", "--program"])
            .arg(&program)
            .arg("--input")
            .arg(&program),
    );
    assert_eq!(exec.error_code(), "usage");
    assert_eq!(exec.code, Some(2));
    let demo = run_json(sf().args(["demo", "--json", "--config", "/nonexistent/sf.toml"]));
    assert_eq!(demo.error_code(), "usage");
    assert_eq!(demo.code, Some(2));
}

#[test]
fn sf_oats_refuses_config_rather_than_ignoring_it() {
    let (_dir, root) = private_dir();
    let config = root.join("sf.toml");
    std::fs::write(&config, "[bogus]\n").unwrap();
    let refused = run_json(
        sf().args(["--json", "--config"])
            .arg(&config)
            .args(["oats", "list"]),
    );
    assert_eq!(refused.error_code(), "usage");
    assert_eq!(refused.code, Some(2));
    assert!(refused.error_message().contains("read no sf.toml"));
    // The program itself refuses it too (it is no longer a hidden no-op).
    let output = std::process::Command::new(&built().sf_oats)
        .args(["--config", "x", "list"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

#[test]
fn an_unknown_key_of_a_plugin_section_is_config_invalid() {
    let (_dir, root) = private_dir();
    let source = source(&root);
    let config = root.join("sf.toml");
    std::fs::write(&config, "[object_store]\ntype = \"git-cli\"\nbogus = 1\n").unwrap();
    let refused = run_json(
        create(&root)
            .args(["--json", "--config"])
            .arg(&config)
            .arg("--from")
            .arg(&source),
    );
    assert_eq!(refused.error_code(), "config-invalid");
    assert!(
        refused.error_message().contains("unknown field `bogus`"),
        "{}",
        refused.error_message()
    );
    assert!(!root.join("repo").exists());
}

#[test]
fn messages_state_the_violation_and_name_each_input_once() {
    let (_dir, root) = private_dir();
    let source = source(&root);
    std::fs::create_dir(source.join(".GIT")).unwrap();
    std::fs::write(source.join(".GIT/config"), "x\n").unwrap();
    let refused = run_json(create(&root).arg("--json").arg("--from").arg(&source));
    assert_eq!(refused.error_code(), "git-segment");
    let message = refused.error_message();
    assert!(
        message.contains("a segment is .git in a spelling Git refuses"),
        "{message}"
    );
    assert!(!message.contains("no segment"), "{message}");
    std::fs::remove_dir_all(source.join(".GIT")).unwrap();

    // A missing --from-git repository: the flag and the path once each.
    let refused = run_json(
        create(&root)
            .args(["--json", "--rev", "main", "--from-git"])
            .arg(root.join("nonexistent")),
    );
    assert_eq!(refused.error_code(), "not-a-repository");
    let message = refused.error_message();
    assert_eq!(message.matches("--from-git").count(), 1, "{message}");
    assert_eq!(message.matches("nonexistent").count(), 1, "{message}");

    // A proposal whose text holds a NUL: the violation, not the rule.
    let work = Work::new();
    let proposal = work.sum_proposal("nul", "a\u{0}b");
    let refused = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--proposal",
        proposal.to_str().unwrap(),
    ]);
    assert_eq!(refused.error_code(), "rejected");
    let message = refused.error_message();
    assert!(message.contains("holds a NUL character"), "{message}");
    assert!(!message.contains("holds no"), "{message}");
}

#[test]
fn exec_refuses_an_output_limit_of_zero_and_resolves_a_relative_runtime() {
    let (_dir, root) = private_dir();
    let program = root.join("program");
    std::fs::create_dir(&program).unwrap();
    std::fs::write(program.join("main.sh"), "echo hi\n").unwrap();
    let exec = |cwd: &Path, runtime: &str, extra: &[&str]| {
        run_json(
            sf().current_dir(cwd)
                .args(["exec", "--json", "--runtime", runtime, "--entry", "main.sh"])
                .arg("--program")
                .arg(&program)
                .arg("--input")
                .arg(&program)
                .args(extra),
        )
    };
    let refused = exec(&root, "/bin/sh", &["--output-limit", "0"]);
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(refused.error_message().contains("--output-limit 0"));
    // `./sh` in /bin names /bin/sh: resolved, then checked and run.
    let ran = exec(Path::new("/bin"), "./sh", &[]);
    assert_eq!(ran.result()["status"], "exited", "{}", ran.json);
    assert_eq!(ran.result()["exitCode"], 0, "{}", ran.json);
    let ran = exec(Path::new("/usr/bin"), "../bin/sh", &[]);
    assert_eq!(ran.result()["status"], "exited", "{}", ran.json);
}

#[test]
fn a_truncated_plugin_library_is_a_typed_error_never_a_crash() {
    let (_dir, root) = private_dir();
    let library = root.join("libsf_git_cli.so");
    let bytes = std::fs::read(&built().git_cli).unwrap();
    let manifest = sf_host::plugin::manifest::manifest_path(&built().git_cli);
    std::fs::copy(
        &manifest,
        sf_host::plugin::manifest::manifest_path(&library),
    )
    .unwrap();
    for keep in [bytes.len() / 2, bytes.len() - 1, 4096] {
        std::fs::write(&library, &bytes[..keep]).unwrap();
        let refused = run_json(sf().args(["plugins", "check", "--json"]).arg(&library));
        assert_eq!(refused.error_code(), "truncated-library", "{keep}");
        assert!(
            refused
                .error_message()
                .contains(&format!("holds {keep} bytes")),
            "{}",
            refused.error_message()
        );
    }
    // The whole copy loads.
    std::fs::write(&library, &bytes).unwrap();
    let checked = run_json(sf().args(["plugins", "check", "--json"]).arg(&library));
    assert_eq!(checked.result()["name"], "git-cli");
}

#[test]
fn repo_create_without_identity_out_prints_the_identity_alone() {
    let (_dir, root) = private_dir();
    let source = source(&root);
    let output = create(&root).arg("--from").arg(&source).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let identity: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(identity["productId"], "p");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("created repository"),
        "{output:?}"
    );
}

#[test]
fn collect_and_judge_text_names_how_each_run_ended_once() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    let loops = work.seal("slice", SUM_LOOPS);
    let on = |command: &str, candidate: &str| {
        work.text_command(&[
            command,
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
        ])
        .output()
        .unwrap()
    };
    let collected = on("collect", &fix);
    assert!(collected.status.success(), "{collected:?}");
    let stderr = String::from_utf8_lossy(&collected.stderr);
    assert!(
        stderr.contains("sf: running 3 process check(s)\n"),
        "{stderr}"
    );
    assert!(stderr.contains("sf: [1/3] bug-shown started"), "{stderr}");
    assert!(stderr.contains("sf: [3/3] "), "{stderr}");
    assert!(stderr.contains(" exited 0 in "), "{stderr}");
    let stdout = String::from_utf8_lossy(&collected.stdout);
    assert!(stdout.contains("exited 0"), "{stdout}");
    assert!(!stdout.contains("observed"), "{stdout}");

    let collected = on("collect", &loops);
    let stderr = String::from_utf8_lossy(&collected.stderr);
    let stdout = String::from_utf8_lossy(&collected.stdout);
    assert!(stdout.contains("timed-out"), "{stdout}");
    assert!(stderr.contains("timed-out in"), "{stderr}");
    let judged = on("judge", &loops);
    let text = String::from_utf8_lossy(&judged.stdout);
    assert!(text.starts_with("inconclusive"), "{text}");
    // The timed-out check's problem is on its line, and not again as a reason.
    let problem = "the run was stopped (timed-out)";
    assert_eq!(
        text.lines().filter(|line| line.contains(problem)).count(),
        text.lines()
            .filter(|line| line.contains("not attributable"))
            .count(),
        "{text}"
    );
    assert!(!text.contains("reason: check bug"), "{text}");
    for output in [&collected.stdout, &judged.stdout, &collected.stderr] {
        let text = String::from_utf8_lossy(output);
        assert!(
            text.lines().all(|line| !line.ends_with(' ')),
            "a trailing space: {text:?}"
        );
    }
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_itself() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = sf().args(["completions", shell]).output().unwrap();
        assert!(output.status.success(), "{shell}: {output:?}");
        let script = String::from_utf8(output.stdout).unwrap();
        // Every subcommand is completed, including the newest.
        for command in ["seal", "land", "completions", "man"] {
            assert!(script.contains(command), "{shell}: {command}");
        }
    }
    let refused = sf().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));

    let page = run_json(sf().args(["man", "--json"]));
    let page = page.result()["page"].as_str().unwrap();
    assert!(page.starts_with(".ie") || page.contains(".TH sf"), "{page}");
    let (_dir, root) = private_dir();
    let out = root.join("man");
    let written = run_json(sf().args(["man", "--json", "--out"]).arg(&out));
    let pages = written.result()["pages"].as_array().unwrap().clone();
    for page in ["sf.1", "sf-seal.1", "sf-repo-create.1"] {
        assert!(pages.iter().any(|p| p == page), "{page}: {pages:?}");
        let text = std::fs::read_to_string(out.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
    let seal = std::fs::read_to_string(out.join("sf-seal.1")).unwrap();
    assert!(seal.contains("proposal"), "{seal}");
    // Never over pages that exist.
    let again = run_json(sf().args(["man", "--json", "--out"]).arg(&out));
    assert_eq!(again.error_code(), "write-failed");
}
