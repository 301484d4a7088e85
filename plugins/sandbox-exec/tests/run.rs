//! The executor end to end with the launcher Cargo built for this crate's tests.

use std::path::PathBuf;
use std::time::Duration;

use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::{CancelToken, Executor, RunBounds, RunRequest, RunStatus};
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

fn executor(runtime: RuntimeConfig) -> SandboxExecutor {
    let mut config = SandboxConfig::new(runtime);
    config.launcher = Some(PathBuf::from(env!("CARGO_BIN_EXE_sf-sandbox-launcher")));
    SandboxExecutor::new(config).expect("the executor configures")
}

fn request(script: &str) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular("main.sh", script.as_bytes().to_vec())],
        entry: "main.sh".into(),
        args: vec!["one".into()],
        input: vec![SnapshotFile::regular(
            "data/in.txt",
            b"input bytes".to_vec(),
        )],
        harness: Vec::new(),
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
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular(path, content.as_bytes().to_vec())],
        entry: path.into(),
        args: vec![],
        input: vec![],
        harness: Vec::new(),
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

/// An Executor's first run starts its launcher without the fork server (the launcher, a child
/// of this process, serves its one request itself and is reaped after the run); the second
/// run starts the fork server, which serves every later run and exits with the Executor.
#[test]
fn fork_server_starts_with_the_second_run_and_exits_with_the_executor() {
    let executor = executor(RuntimeConfig::shell());
    assert_eq!(
        executor.fork_server_pid(),
        None,
        "nothing runs before the first run"
    );
    let (launcher, answer) =
        launcher_of_a_run(&executor, "echo first; tr '\\0' ' ' < /proc/1/cmdline");
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "first\nsf-sandbox-launcher --once ",
        "{answer:?}"
    );
    assert_eq!(launcher.parent, std::process::id());
    assert_eq!(launcher.cmdline, "sf-sandbox-launcher --once ");
    assert_eq!(executor.fork_server_pid(), None, "the first run needs none");
    eventually("the first run's launcher is reaped", || {
        !std::path::Path::new(&format!("/proc/{}", launcher.pid)).exists()
    });
    let answer = executor
        .run(&request("echo second"), &CancelToken::new())
        .unwrap();
    assert_eq!(answer.stdout, b"second\n");
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
        .run(&request("echo third"), &CancelToken::new())
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
    for _ in 0..2 {
        executor
            .run(&request("echo before"), &CancelToken::new())
            .unwrap();
    }
    let first = executor.fork_server_pid().expect("the fork server runs");
    // SAFETY: SIGKILL to our own child process.
    assert_eq!(unsafe { libc::kill(first as i32, libc::SIGKILL) }, 0);
    // Once it is gone (a zombie of this process, or reaped), the launcher it had prepared
    // for the next run is doomed too (its parent-death signal).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(format!("/proc/{first}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    }) {
        assert!(
            std::time::Instant::now() < deadline,
            "the fork server did not die"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
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
        answer.identities.enforcement.status("landlock"),
        Some("fully-enforced")
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

/// The time since boot in clock ticks (the unit of a process's start time in /proc).
fn uptime_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let uptime = std::fs::read_to_string("/proc/uptime").unwrap();
    let seconds: f64 = uptime.split(' ').next().unwrap().parse().unwrap();
    (seconds * hz) as u64
}

/// A run's launcher, seen on the host while the run was live.
struct Launcher {
    pid: u32,
    parent: u32,
    /// Its command line, NULs as spaces.
    cmdline: String,
    /// When it started, in clock ticks since boot.
    started: u64,
}

/// The parent of host process `pid`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
}

/// Runs `script` (then a short sleep) and finds its launcher while it runs: the parent of the
/// init, whose child the program is (found by a marker argument on its command line).
fn launcher_of_a_run(
    executor: &SandboxExecutor,
    script: &str,
) -> (Launcher, sf_contracts::RunAnswer) {
    let marker = format!(
        "sf-marker-{}-{:?}",
        std::process::id(),
        std::time::Instant::now()
    );
    let mut request = request(&format!("{script}\nsleep 1"));
    request.args = vec![marker.clone()];
    std::thread::scope(|scope| {
        let run = scope.spawn(|| executor.run(&request, &CancelToken::new()).unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let launcher = loop {
            assert!(std::time::Instant::now() < deadline, "the run never showed");
            let program = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .find_map(|entry| {
                    let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                    String::from_utf8_lossy(&cmdline)
                        .contains(&marker)
                        .then_some(pid)
                });
            if let Some(launcher) = program.and_then(parent_of).and_then(parent_of) {
                let cmdline = std::fs::read(format!("/proc/{launcher}/cmdline")).unwrap();
                let stat = std::fs::read_to_string(format!("/proc/{launcher}/stat")).unwrap();
                let started = stat
                    .rsplit_once(") ")
                    .unwrap()
                    .1
                    .split(' ')
                    .nth(19)
                    .unwrap();
                break Launcher {
                    pid: launcher,
                    parent: parent_of(launcher).unwrap(),
                    cmdline: String::from_utf8_lossy(&cmdline).replace('\0', " "),
                    started: started.parse().unwrap(),
                };
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        (launcher, run.join().unwrap())
    })
}

/// The host pids of the live (not zombie) processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        if status
            .lines()
            .any(|line| line == format!("PPid:\t{parent}"))
            && alive(pid)
        {
            found.push(pid);
        }
    }
    found
}

/// Waits (bounded) until `condition` holds.
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The launcher started ahead for the first run outlives the thread that made the Executor
/// and serves a run from any thread (a launcher dies with the thread that started it: a
/// thread of the Executor's own starts it).
#[test]
fn the_first_run_comes_from_any_thread() {
    let executor = std::thread::scope(|scope| {
        scope
            .spawn(|| executor(RuntimeConfig::shell()))
            .join()
            .unwrap()
    });
    // Long enough for the first launcher to have died with that thread, were it its child.
    std::thread::sleep(Duration::from_millis(200));
    // The first run's launcher (its run on a thread of its own) is the one started ahead,
    // at least 200 ms before the run: one started by the run would be younger.
    let before = uptime_ticks();
    let (launcher, answer) = launcher_of_a_run(&executor, "echo ahead");
    assert_eq!(answer.stdout, b"ahead\n", "{answer:?}");
    assert!(
        launcher.started + 10 <= before,
        "started at {}, the run at {before}",
        launcher.started
    );
    for round in ["second", "third"] {
        let answer = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    executor
                        .run(&request(&format!("echo {round}")), &CancelToken::new())
                        .unwrap()
                })
                .join()
                .unwrap()
        });
        assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
        assert_eq!(answer.stdout, format!("{round}\n").into_bytes());
    }
}

/// An Executor used once (as `sf exec` uses it) starts nothing it does not use: no fork
/// server, no sandbox prepared ahead, and its one launcher is reaped after the run.
#[test]
fn a_single_run_starts_no_fork_server_and_prepares_nothing_ahead() {
    let executor = executor(RuntimeConfig::shell());
    let (launcher, answer) = launcher_of_a_run(&executor, "echo once");
    assert_eq!(answer.stdout, b"once\n", "{answer:?}");
    assert_eq!(launcher.parent, std::process::id());
    eventually("the run's launcher is reaped", || {
        !std::path::Path::new(&format!("/proc/{}", launcher.pid)).exists()
    });
    // Long enough for a preparing thread to have started one, were it going to.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!executor.has_prepared_sandbox());
    assert_eq!(executor.fork_server_pid(), None);
}

/// From the second run on, the next run's sandbox is built ahead of it (a launcher of the
/// fork server's waits); the next run takes it and is confined the same, in a fresh sandbox
/// (nothing of the previous run's scratch); dropping the Executor ends the waiting sandbox.
#[test]
fn the_next_sandbox_is_prepared_ahead_used_once_and_ended_with_the_executor() {
    let executor = executor(RuntimeConfig::shell());
    assert!(!executor.has_prepared_sandbox());
    executor
        .run(&request("echo zero"), &CancelToken::new())
        .unwrap();
    let first = executor
        .run(
            &request("echo left > /sf/scratch/mark; echo one"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(first.stdout, b"one\n", "{first:?}");
    eventually("a sandbox is prepared after the second run", || {
        executor.has_prepared_sandbox()
    });
    let server = executor.fork_server_pid().expect("the fork server runs");
    // The first run's launcher ends; the prepared one stays.
    eventually("one launcher waits", || children(server).len() == 1);
    let waiting = children(server);

    let second = executor
        .run(
            &request(
                "if [ -e /sf/scratch/mark ]; then echo reused; else echo fresh; fi; id -u; \
                 grep -E 'NoNewPrivs|CapEff|Seccomp:' /proc/self/status",
            ),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(second.status, RunStatus::Exited, "{second:?}");
    let status: Vec<String> = String::from_utf8_lossy(&second.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(status[..2], ["fresh", "1000"], "{status:?}");
    for wanted in ["CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"] {
        assert!(
            status.iter().any(|line| line == wanted),
            "{wanted}: {status:?}"
        );
    }
    // The launcher that waited served the second run and is gone with it.
    eventually("the prepared launcher ended with its run", || {
        !alive(waiting[0])
    });

    eventually("the next sandbox is prepared again", || {
        executor.has_prepared_sandbox()
    });
    eventually("one launcher waits again", || children(server).len() == 1);
    let waiting = children(server);
    drop(executor);
    for pid in waiting.iter().chain([&server]) {
        eventually(
            "the prepared sandbox and the fork server end with the executor",
            || !alive(*pid),
        );
    }
}

/// A prepared sandbox holds the runtime files it cloned; once the configured executable is
/// replaced, the next run does not use it (which would run the old bytes under the new
/// digest): it starts a new launcher, which refuses the replaced file as it always does.
#[test]
fn a_runtime_replaced_after_preparing_is_refused_not_run_stale() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix("sf-runtime-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let shell = dir.path().join("sh");
    std::fs::copy("/bin/sh", &shell).unwrap();
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    let executor = executor(RuntimeConfig::with_libraries(&shell, &[]));
    for _ in 0..2 {
        executor
            .run(&request("echo ready"), &CancelToken::new())
            .unwrap();
    }
    eventually("a sandbox is prepared", || executor.has_prepared_sandbox());

    // Replace the executable by a new file (a new inode) under the same name.
    let replacement = dir.path().join("sh.new");
    std::fs::copy("/bin/sh", &replacement).unwrap();
    std::fs::set_permissions(&replacement, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&replacement, &shell).unwrap();
    let error = executor
        .run(&request("echo stale"), &CancelToken::new())
        .expect_err("a replaced runtime file is refused");
    let sf_contracts::ExecutorError::Unavailable { mechanism, reason } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(mechanism, "runtime", "{reason}");
    assert!(reason.contains("configure the Executor again"), "{reason}");
}

/// The launcher ignores SIGPIPE (it is a Rust program), and whatever started sf may ignore or
/// block others; the program starts with every signal at its default and none blocked (a
/// pipeline's writer dies when its reader is gone).
#[test]
fn the_program_starts_with_no_signal_ignored_or_blocked() {
    let executor = executor(RuntimeConfig::shell());
    let answer = executor
        .run(
            &request(
                "while read line; do case \"$line\" in SigIgn*|SigBlk*) echo \"$line\";; esac; \
                 done < /proc/self/status",
            ),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n",
        "{answer:?}"
    );
}
