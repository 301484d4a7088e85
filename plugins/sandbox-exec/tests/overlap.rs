//! Runs at once where no control group can bound them together: the executor, run as an
//! unprivileged user (this test binary re-executed with `setpriv` as `nobody`, where cgroup v1
//! groups cannot be made), refuses a run that would overlap another, naming the setting that
//! allows it; with `parallel_runs_without_cgroup` the two overlap.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::{CancelToken, Executor, RunBounds, RunRequest, RunStatus};
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

const CHILD_ENV: &str = "SF_OVERLAP_TEST_CHILD";

fn executor(parallel_runs_without_cgroup: bool) -> SandboxExecutor {
    let mut config = SandboxConfig::new(RuntimeConfig::shell());
    config.launcher = Some(PathBuf::from(env!("CARGO_BIN_EXE_sf-sandbox-launcher")));
    config.parallel_runs_without_cgroup = parallel_runs_without_cgroup;
    SandboxExecutor::new(config).expect("the executor configures")
}

fn request(script: &str) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular("main.sh", script.as_bytes().to_vec())],
        entry: "main.sh".into(),
        args: Vec::new(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(30), 1 << 16),
    }
}

/// Starts a 3 s run on a thread, waits until it has begun (its sandbox is up), then runs a
/// second one: its answer, and the first's.
fn two_at_once(
    executor: &SandboxExecutor,
) -> (
    Result<sf_contracts::RunAnswer, sf_contracts::ExecutorError>,
    sf_contracts::RunAnswer,
) {
    std::thread::scope(|scope| {
        let first = scope.spawn(|| {
            executor
                .run(&request("sleep 3; echo first"), &CancelToken::new())
                .expect("the first run")
        });
        std::thread::sleep(Duration::from_millis(1000));
        let started = Instant::now();
        let second = executor.run(&request("echo second"), &CancelToken::new());
        let first = first.join().expect("the first run's thread");
        assert!(
            second.is_err() || started.elapsed() < Duration::from_secs(3),
            "the second run waited for the first rather than overlapping"
        );
        (second, first)
    })
}

/// The child: as `nobody`, without control groups.
#[test]
fn overlap_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    assert_ne!(unsafe { libc::geteuid() }, 0, "the child runs unprivileged");
    let one_at_a_time = executor(false);
    assert_eq!(one_at_a_time.control_groups(), None);
    let (second, first) = two_at_once(&one_at_a_time);
    let refused = second.expect_err("a run overlapping another is refused");
    assert_eq!(refused.code(), "unavailable", "{refused}");
    assert!(
        refused.to_string().contains("parallel_runs_without_cgroup"),
        "{refused}"
    );
    assert_eq!(first.stdout, b"first\n", "{first:?}");
    // One at a time, each runs.
    let after = one_at_a_time
        .run(&request("echo after"), &CancelToken::new())
        .expect("a run after the first ended");
    assert_eq!(after.status, RunStatus::Exited);

    let allowed = executor(true);
    let (second, first) = two_at_once(&allowed);
    assert_eq!(second.expect("allowed to overlap").stdout, b"second\n");
    assert_eq!(first.stdout, b"first\n", "{first:?}");
    println!("OVERLAP CHECKED");
}

#[test]
fn runs_without_control_groups_overlap_only_when_the_operator_allows() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut command = if root {
        let mut setpriv = Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        setpriv.arg(std::env::current_exe().expect("the test binary"));
        setpriv
    } else {
        Command::new(std::env::current_exe().expect("the test binary"))
    };
    let output = command
        .args([
            "--exact",
            "overlap_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, "1")
        .env("HOME", "/tmp")
        .output()
        .expect("the child starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("OVERLAP CHECKED"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
