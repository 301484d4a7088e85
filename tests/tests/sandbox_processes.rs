//! No process and no zombie is left behind: not after an Executor that never ran (whose first
//! run's launcher was started ahead) is dropped, not after an Executor that ran (and prepared a
//! sandbox ahead) is dropped, not after `sf exec` exits, and not after `sf collect` exits. This test process makes itself
//! a child subreaper, so every process orphaned by the Executor or by `sf exec` becomes its
//! child (and would show here as a live child or a zombie) instead of going to the host's
//! init. One test in this binary, because the subreaper setting is the process's.

mod land_support;
mod sandbox_support;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use nix::libc;
use sandbox_support::*;
use sf_host::contracts::RunStatus;

/// The pids and states of this process's children, zombies included.
fn own_children() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields.get(1) == Some(&me.as_str()) {
            found.push(format!(
                "{name} {} {}",
                head.split_once(" (").map_or("", |p| p.1),
                fields[0]
            ));
        }
    }
    found
}

/// Waits (bounded) until this process has no child left; the children left are the failure.
fn no_children_left(after: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let children = own_children();
        if children.is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "after {after}, processes were left (pid comm state): {children:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) until this process has a child: the control that the watch sees what an
/// Executor starts (its first launcher is started by a thread of its own, so not at once).
fn a_child_appears(what: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while own_children().is_empty() {
        assert!(
            Instant::now() < until,
            "{what} never appeared among the children"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn nothing_is_left_after_an_executor_sf_exec_or_sf_collect() {
    // SAFETY: prctl with integer arguments, on this process.
    let status = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(status, 0);
    // Built before anything is watched (the build runs cargo, whose children are reaped).
    let sf = sf_tests::plugins::built().sf.clone();

    let unused = probe_executor();
    // Control: the launcher started ahead for its first run waits.
    a_child_appears("the launcher started ahead");
    drop(unused);
    no_children_left("an Executor that never ran was dropped");

    let executor = probe_executor();
    for _ in 0..3 {
        let answer = run_probes(&executor, &["getpid".to_owned()]);
        assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    }
    let until = Instant::now() + Duration::from_secs(10);
    while !executor.has_prepared_sandbox() {
        assert!(Instant::now() < until, "no sandbox was prepared ahead");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Control: the fork server, and the launcher it keeps for the next run, are alive now.
    a_child_appears("the fork server");
    drop(executor);
    no_children_left("the Executor was dropped");

    let dir = public_dir();
    let program = dir.path().join("program");
    std::fs::create_dir(&program).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_file(
        &program.join("main.sh"),
        b"echo hello; sleep 0.2 &\n",
        0o644,
    );
    let input = dir.path().join("input");
    std::fs::create_dir(&input).unwrap();
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = std::process::Command::new(&sf)
        .args(["exec", "--json", "--runtime", "/bin/sh", "--program"])
        .arg(&program)
        .args(["--entry", "main.sh", "--input"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("hello"),
        "{output:?}"
    );
    no_children_left("sf exec exited");

    // A whole collection through the binary: three sandboxed runs, then sf exits.
    let work = land_support::Work::new();
    let candidate = work.seal("slice", land_support::SUM_FIXED);
    no_children_left("the set-up commands exited");
    let collected = work.sf(&[
        "collect",
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--slice",
        "slice",
    ]);
    assert_eq!(collected.result()["evidence"].as_array().unwrap().len(), 3);
    no_children_left("sf collect exited");
}
