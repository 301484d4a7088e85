//! Hostile Git configuration never runs: hooks, a reference-transaction hook, fsmonitor, a
//! promisor remote with a command, replace refs and ssh commands, written into the owned
//! repository or into the environment of the calling process. Every case has a negative
//! control: the same hostile thing, given to a plain `git`, does run.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sf_tests::{TestRepo, edit, frozen, proposal, seal_command, write_seal_inputs};

const FILES: &[(&str, &str)] = &[("src/a.txt", "alpha\n")];

/// An executable script that creates `marker` when run.
fn script(dir: &Path, name: &str, marker: &Path) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A copy of the repository for a negative control, without sf's protective configuration
/// (`core.hooksPath=/dev/null`, `core.useReplaceRefs=false`, …): what a plain bare repository
/// would be. The control's plain git never touches the owned root.
fn copy(test: &TestRepo, name: &str) -> PathBuf {
    let target = test.parent.join(name);
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(&test.path)
            .arg(&target)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(
        target.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
    )
    .unwrap();
    target
}

/// A plain `git update-ref` in `git_dir`: what runs a reference-transaction hook.
fn plain_update_ref(git_dir: &Path, envs: &[(&str, String)]) {
    let initial = String::from_utf8(
        Command::new("git")
            .arg("--git-dir")
            .arg(git_dir)
            .args(["rev-parse", "refs/heads/main"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let status = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["update-ref", "refs/heads/control", initial.trim()])
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .status()
        .unwrap();
    assert!(status.success());
}

fn seal_attempt(test: &TestRepo, tag: &str) -> Result<(), String> {
    test.repo
        .seal(
            &frozen(test.identity.initial, &["src"]),
            &proposal(vec![edit(
                "src/a.txt",
                Some("alpha\n"),
                Some(&format!("{tag}\n")),
            )]),
        )
        .map(|_| ())
        .map_err(|error| error.code().to_owned())
}

fn append_config(git_dir: &Path, text: &str) {
    let mut config = std::fs::read(git_dir.join("config")).unwrap();
    config.extend_from_slice(text.as_bytes());
    std::fs::write(git_dir.join("config"), config).unwrap();
}

#[test]
fn hooks_in_the_repository_never_run() {
    let test = TestRepo::git(FILES);
    let marker = test.parent.join("hook-ran");
    // Control: in a copy, git runs the hook.
    let control = copy(&test, "control");
    std::fs::create_dir(control.join("hooks")).unwrap();
    script(&control.join("hooks"), "reference-transaction", &marker);
    plain_update_ref(&control, &[]);
    assert!(
        marker.exists(),
        "control: the hook did not run under plain git"
    );
    std::fs::remove_file(&marker).unwrap();

    std::fs::create_dir(test.path.join("hooks")).unwrap();
    script(&test.path.join("hooks"), "reference-transaction", &marker);
    script(&test.path.join("hooks"), "post-update", &marker);
    assert_eq!(seal_attempt(&test, "hooked"), Err("unavailable".into()));
    assert!(!marker.exists(), "a repository hook ran");
}

#[test]
fn hooks_path_and_fsmonitor_in_the_repository_config_never_run() {
    let test = TestRepo::git(FILES);
    let hooks = test.parent.join("evil-hooks");
    std::fs::create_dir(&hooks).unwrap();
    let marker = test.parent.join("hook-ran");
    script(&hooks, "reference-transaction", &marker);
    let hooks_line = format!("[core]\n\thooksPath = {}\n", hooks.display());

    let control = copy(&test, "control");
    append_config(&control, &hooks_line);
    plain_update_ref(&control, &[]);
    assert!(
        marker.exists(),
        "control: core.hooksPath did not run under plain git"
    );
    std::fs::remove_file(&marker).unwrap();

    append_config(&test.path, &hooks_line);
    assert_eq!(seal_attempt(&test, "hooks-path"), Err("unavailable".into()));
    assert!(
        !marker.exists(),
        "core.hooksPath from the repository config ran"
    );

    // fsmonitor: git consults it for work-tree commands; the control shows the configured
    // command is live, and sf refuses the configuration before any git process starts.
    let fsmonitor_marker = test.parent.join("fsmonitor-ran");
    let monitor = script(&test.parent, "fsmonitor.sh", &fsmonitor_marker);
    let fsmonitor_line = format!("[core]\n\tfsmonitor = {}\n", monitor.display());
    let worktree = test.parent.join("worktree");
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .arg(&worktree)
            .status()
            .unwrap()
            .success()
    );
    append_config(&worktree.join(".git"), &fsmonitor_line);
    let _ = Command::new("git")
        .arg("-C")
        .arg(&worktree)
        .arg("status")
        .output()
        .unwrap();
    assert!(
        fsmonitor_marker.exists(),
        "control: fsmonitor did not run under plain git"
    );
    std::fs::remove_file(&fsmonitor_marker).unwrap();

    let test = TestRepo::git(FILES);
    append_config(&test.path, &fsmonitor_line);
    assert_eq!(seal_attempt(&test, "fsmonitor"), Err("unavailable".into()));
    assert!(!fsmonitor_marker.exists(), "fsmonitor ran");
}

#[test]
fn a_promisor_remote_with_a_command_never_runs() {
    let test = TestRepo::git(FILES);
    let marker = test.parent.join("ssh-ran");
    let ssh = script(&test.parent, "ssh.sh", &marker);
    let promisor = format!(
        "[extensions]\n\tpartialClone = origin\n[remote \"origin\"]\n\turl = ssh://example.invalid/x\n\tpromisor = true\n\
         [core]\n\tsshCommand = {}\n",
        ssh.display()
    );
    let control = copy(&test, "control");
    let config = std::fs::read_to_string(control.join("config"))
        .unwrap()
        .replace("repositoryformatversion = 0", "repositoryformatversion = 1");
    std::fs::write(control.join("config"), config + &promisor).unwrap();
    let _ = Command::new("git")
        .arg("--git-dir")
        .arg(&control)
        .args(["cat-file", "-p", "1111111111111111111111111111111111111111"])
        .output()
        .unwrap();
    assert!(
        marker.exists(),
        "control: the promisor fetch command did not run under plain git"
    );
    std::fs::remove_file(&marker).unwrap();

    let config = std::fs::read_to_string(test.path.join("config"))
        .unwrap()
        .replace("repositoryformatversion = 0", "repositoryformatversion = 1");
    std::fs::write(test.path.join("config"), config + &promisor).unwrap();
    assert_eq!(seal_attempt(&test, "promisor"), Err("unavailable".into()));
    let missing = sf_host::git_object::ObjectId::from_bytes([0x11; 20]);
    assert!(test.repo.snapshot(&missing).is_err());
    assert!(!marker.exists(), "the promisor remote's command ran");
}

#[test]
fn replace_refs_never_substitute_objects() {
    let test = TestRepo::git(FILES);
    let sealed = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("genuine\n"))]),
        )
        .unwrap();
    let genuine = sf_host::git_object::object_id(
        sf_host::git_object::ObjectKind::Blob,
        &test.repo.candidate_files(&sealed).unwrap()[0].content,
    );
    // A replacement object and a replace ref, written as a hostile writer would.
    let forged = Command::new("git")
        .arg("--git-dir")
        .arg(&test.path)
        .args(["hash-object", "-w", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(b"forged\n")?;
            child.wait_with_output()
        })
        .unwrap();
    let forged = String::from_utf8(forged.stdout).unwrap().trim().to_owned();
    std::fs::create_dir_all(test.path.join("refs/replace")).unwrap();
    std::fs::write(
        test.path.join(format!("refs/replace/{genuine}")),
        format!("{forged}\n"),
    )
    .unwrap();
    // Control: plain git, in a copy without sf's configuration, shows the forged bytes.
    let control = copy(&test, "control");
    let shown = Command::new("git")
        .arg("--git-dir")
        .arg(&control)
        .args(["cat-file", "-p", &genuine.to_hex()])
        .output()
        .unwrap();
    assert_eq!(
        shown.stdout, b"forged\n",
        "control: the replace ref did not substitute under plain git"
    );
    // sf reads the genuine object.
    let reopened = test.reopen();
    let exported = reopened.export_candidate(&sealed.digest).unwrap();
    assert_eq!(
        reopened.candidate_files(&exported).unwrap()[0].content,
        b"genuine\n"
    );
}

#[test]
fn the_callers_environment_never_reaches_git() {
    let test = TestRepo::git(FILES);
    let hooks = test.parent.join("env-hooks");
    std::fs::create_dir(&hooks).unwrap();
    let marker = test.parent.join("env-hook-ran");
    script(&hooks, "reference-transaction", &marker);
    let home = test.parent.join("home");
    std::fs::create_dir(&home).unwrap();
    let config_file = test.parent.join("hostile.gitconfig");
    let hooks_config = format!("[core]\n\thooksPath = {}\n", hooks.display());
    std::fs::write(home.join(".gitconfig"), &hooks_config).unwrap();
    std::fs::write(&config_file, &hooks_config).unwrap();
    let elsewhere = test.parent.join("elsewhere-objects");
    std::fs::create_dir(&elsewhere).unwrap();
    let hooks_value = hooks.display().to_string();
    let variants: Vec<(&str, Vec<(&str, String)>)> = vec![
        (
            "GIT_CONFIG_COUNT",
            vec![
                ("GIT_CONFIG_COUNT", "1".into()),
                ("GIT_CONFIG_KEY_0", "core.hooksPath".into()),
                ("GIT_CONFIG_VALUE_0", hooks_value.clone()),
            ],
        ),
        (
            "GIT_CONFIG_PARAMETERS",
            vec![(
                "GIT_CONFIG_PARAMETERS",
                format!("'core.hooksPath'='{hooks_value}'"),
            )],
        ),
        ("HOME", vec![("HOME", home.display().to_string())]),
        (
            "GIT_CONFIG_GLOBAL",
            vec![("GIT_CONFIG_GLOBAL", config_file.display().to_string())],
        ),
        (
            "GIT_CONFIG_SYSTEM",
            vec![("GIT_CONFIG_SYSTEM", config_file.display().to_string())],
        ),
    ];
    for (name, envs) in &variants {
        // Control: plain git, given this environment, runs the hook.
        let control = copy(&test, &format!("control-{name}"));
        let _ = std::fs::remove_file(&marker);
        let mut control_envs = envs.clone();
        if *name == "HOME" {
            control_envs.push(("GIT_CONFIG_NOSYSTEM", "1".into()));
        }
        plain_update_ref(&control, &control_envs);
        assert!(
            marker.exists(),
            "control {name}: the hook did not run under plain git"
        );
        std::fs::remove_file(&marker).unwrap();
    }
    // sf, in a child process whose whole environment is hostile at once, seals (which creates
    // a ref with update-ref) and no hook runs; objects land in the repository, not elsewhere.
    let work = test.parent.join("work");
    std::fs::create_dir(&work).unwrap();
    let inputs = frozen(test.identity.initial, &["src"]);
    let edits = proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("env\n"))]);
    write_seal_inputs(&work, &test.identity, &inputs, &edits);
    let mut child = seal_command(env!("CARGO_BIN_EXE_sf-test-child"), &work);
    for (_, envs) in &variants {
        child.envs(envs.iter().map(|(k, v)| (*k, v.as_str())));
    }
    child
        .env("GIT_DIR", "/nonexistent")
        .env("GIT_OBJECT_DIRECTORY", &elsewhere)
        .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &elsewhere)
        .env(
            "GIT_SSH_COMMAND",
            script(&test.parent, "env-ssh.sh", &marker),
        )
        .env("GIT_EXEC_PATH", &hooks)
        .env("GIT_TRACE", test.parent.join("trace").display().to_string());
    let output = child.output().unwrap();
    assert!(
        output.status.success(),
        "sf failed under a hostile environment: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!marker.exists(), "a hook from the caller's environment ran");
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "objects went elsewhere"
    );
    assert!(!test.parent.join("trace").exists(), "GIT_TRACE reached git");
    let digest = String::from_utf8(output.stdout).unwrap();
    let digest = sf_host::canonical::Digest::parse(digest.trim()).unwrap();
    let exported = test.repo.export_candidate(&digest).unwrap();
    assert_eq!(
        test.repo.candidate_files(&exported).unwrap()[0].content,
        b"env\n"
    );
}
