//! The executor end to end with the launcher Cargo built for this crate's tests.

use std::path::PathBuf;
use std::time::Duration;

use sf_host::contracts::{CancelToken, Executor, RunBounds, RunRequest, RunStatus};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

fn executor(runtime: RuntimeConfig) -> SandboxExecutor {
    let mut config = SandboxConfig::new(runtime);
    config.launcher = Some(PathBuf::from(env!("CARGO_BIN_EXE_sf-sandbox-launcher")));
    SandboxExecutor::new(config).expect("the executor configures")
}

fn request(script: &str) -> RunRequest {
    RunRequest {
        program: vec![SnapshotFile {
            path: "main.sh".into(),
            content: script.as_bytes().to_vec(),
        }],
        entry: "main.sh".into(),
        args: vec!["one".into()],
        input: vec![SnapshotFile {
            path: "data/in.txt".into(),
            content: b"input bytes".to_vec(),
        }],
        bounds: RunBounds::new(Duration::from_secs(10), 1 << 20),
    }
}

#[test]
fn shell_runs_confined() {
    let executor = executor(RuntimeConfig::shell());
    let answer = executor
        .run(
            &request("echo hello $1; cat /sf/input/data/in.txt; id -u; pwd; echo err >&2; exit 3"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(answer.exit_code, Some(3));
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "hello one\ninput bytes1000\n/sf/program\n"
    );
    assert_eq!(answer.stderr, b"err\n");
}

fn single(path: &str, content: &str) -> RunRequest {
    RunRequest {
        program: vec![SnapshotFile {
            path: path.into(),
            content: content.as_bytes().to_vec(),
        }],
        entry: path.into(),
        args: vec![],
        input: vec![],
        bounds: RunBounds::new(Duration::from_secs(20), 1 << 20),
    }
}

#[test]
fn python_and_node_run() {
    for (runtime, path, source) in [
        (
            RuntimeConfig::python3(),
            "main.py",
            "import os, sys\nprint('py', os.getuid(), sys.version_info[0])\n",
        ),
        (
            RuntimeConfig::node(),
            "main.js",
            "console.log('js', process.getuid())\n",
        ),
    ] {
        if !runtime.executable.exists() {
            eprintln!("skipping {}: not installed", runtime.executable.display());
            continue;
        }
        let executor = executor(runtime);
        let answer = executor
            .run(&single(path, source), &CancelToken::new())
            .unwrap();
        assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
        assert_eq!(answer.exit_code, Some(0), "{answer:?}");
        assert!(
            String::from_utf8_lossy(&answer.stdout).ends_with(" 1000\n")
                || String::from_utf8_lossy(&answer.stdout).ends_with(" 1000 3\n"),
            "{answer:?}"
        );
    }
}

/// Whether a process with this pid exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|rest| rest.starts_with('Z') || rest.starts_with('X'))
        }
        Err(_) => false,
    }
}

#[test]
fn fork_server_starts_with_the_first_run_and_exits_with_the_executor() {
    let executor = executor(RuntimeConfig::shell());
    assert_eq!(
        executor.fork_server_pid(),
        None,
        "nothing runs before the first run"
    );
    let answer = executor
        .run(&request("echo first"), &CancelToken::new())
        .unwrap();
    assert_eq!(answer.stdout, b"first\n");
    let pid = executor.fork_server_pid().expect("the fork server runs");
    assert!(alive(pid));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        cmdline.ends_with(b"--zygote\0"),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );
    // The same fork server serves the next run.
    executor
        .run(&request("echo second"), &CancelToken::new())
        .unwrap();
    assert_eq!(executor.fork_server_pid(), Some(pid));
    drop(executor);
    // Dropping the executor closes the control socket; the fork server exits and is reaped.
    assert!(!alive(pid), "the fork server {pid} outlived its executor");
    assert!(
        std::fs::metadata(format!("/proc/{pid}")).is_err(),
        "the fork server {pid} was not reaped"
    );
}

#[test]
fn a_killed_fork_server_is_replaced_by_the_next_run() {
    let executor = executor(RuntimeConfig::shell());
    executor
        .run(&request("echo before"), &CancelToken::new())
        .unwrap();
    let first = executor.fork_server_pid().expect("the fork server runs");
    // SAFETY: SIGKILL to our own child process.
    assert_eq!(unsafe { libc::kill(first as i32, libc::SIGKILL) }, 0);
    // The next run finds it dead, starts another one and runs with the same confinement.
    let answer = executor
        .run(
            &request("echo after; id -u; grep NoNewPrivs /proc/self/status"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "after\n1000\nNoNewPrivs:\t1\n"
    );
    assert_eq!(
        answer.identities.enforcement.landlock,
        sf_host::contracts::LandlockStatus::FullyEnforced
    );
    let second = executor.fork_server_pid().expect("a new fork server runs");
    assert_ne!(first, second);
    assert!(!alive(first));
}

#[test]
fn concurrent_runs_from_several_threads_keep_their_own_streams() {
    let executor = executor(RuntimeConfig::shell());
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|thread| {
                let executor = &executor;
                scope.spawn(move || {
                    for round in 0..5 {
                        let script = format!(
                            "echo out-{thread}-{round}; echo err-{thread}-{round} >&2; \
                             cat /sf/input/data/in.txt; exit {thread}"
                        );
                        let answer = executor
                            .run(&request(&script), &CancelToken::new())
                            .unwrap();
                        assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
                        assert_eq!(answer.exit_code, Some(thread));
                        assert_eq!(
                            String::from_utf8_lossy(&answer.stdout),
                            format!("out-{thread}-{round}\ninput bytes")
                        );
                        assert_eq!(
                            String::from_utf8_lossy(&answer.stderr),
                            format!("err-{thread}-{round}\n")
                        );
                    }
                })
            })
            .collect();
        for run in runs {
            run.join().expect("a run thread");
        }
    });
}
