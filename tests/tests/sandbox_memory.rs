//! A run's memory, processes and CPU are bounded as a whole by a control group of its own
//! (as root, as CI runs: cgroup v1 on this machine kind, v2 where delegated): tmpfs and
//! anonymous memory past the run's bound end the run or fail the allocation, the run's
//! measured peak (the group's) stays within the bound, memfd and SysV shared memory are
//! denied outright, and the group is gone after the run.

mod sandbox_support;

use std::time::Duration;

use sandbox_support::*;
use sf_host::contracts::{CancelToken, Executor, RunAnswer, RunStatus};
use sf_sandbox_exec::Limits;

const MIB: u64 = 1 << 20;

fn bounded(memory_bytes: u64) -> Limits {
    Limits {
        memory_bytes,
        scratch_bytes: 512 * MIB,
        file_size_bytes: 512 * MIB,
        ..Limits::default()
    }
}

fn run(limits: Limits, list: &[String]) -> RunAnswer {
    let executor = executor_with(probe_runtime(&[]), limits);
    executor
        .run(
            &probe_request(list, Duration::from_secs(30)),
            &CancelToken::new(),
        )
        .unwrap_or_else(|error| panic!("the run starts: {error}"))
}

fn root_required() {
    assert!(
        is_root(),
        "these tests need root (as CI runs them): only root can make control groups here"
    );
}

fn peak(answer: &RunAnswer) -> u64 {
    assert!(
        matches!(
            answer.identities.enforcement.status("memory"),
            Some("cgroup-v1" | "cgroup-v2")
        ),
        "a control group bounded the run: {answer:?}"
    );
    answer
        .times
        .memory_peak_bytes
        .unwrap_or_else(|| panic!("the run's peak was measured: {answer:?}"))
}

/// Filling a tmpfs (the scratch, sized far above the memory bound) past the bound ends the
/// run or fails the write, and the run's peak stays within the bound. Control: with a
/// bound above the fill, the same fill completes and the peak shows it.
#[test]
fn a_tmpfs_fill_stops_at_the_runs_memory_bound() {
    root_required();
    let fill = vec![format!("fill=/sf/scratch/big:{}", 200 * MIB)];
    let control = run(bounded(400 * MIB), &fill);
    assert_eq!(
        verdict(&control, &fill[0]),
        format!("ok wrote {}", 200 * MIB),
        "{control:?}"
    );
    assert!(peak(&control) > 200 * MIB, "{control:?}");

    let answer = run(bounded(64 * MIB), &fill);
    let peak = peak(&answer);
    assert!(peak <= 64 * MIB, "peak {peak} above the bound: {answer:?}");
    // The kernel kills the program's process (whose OOM score is the highest in the group),
    // or the write fails first.
    let stopped = (answer.status == RunStatus::Signalled && answer.signal == Some(9))
        || !verdict(&answer, &fill[0]).contains(&format!("wrote {}", 200 * MIB));
    assert!(stopped, "the fill went past the bound: {answer:?}");
}

/// Anonymous memory past the run's bound (far below the address-space limit) ends the run;
/// the peak stays within the bound.
#[test]
fn anonymous_memory_stops_at_the_runs_memory_bound() {
    root_required();
    let answer = run(bounded(96 * MIB), &["membomb".to_owned()]);
    let peak = peak(&answer);
    assert!(peak <= 96 * MIB, "peak {peak} above the bound: {answer:?}");
    assert_eq!(answer.status, RunStatus::Signalled, "{answer:?}");
    assert_eq!(answer.signal, Some(9), "{answer:?}");
}

/// memfd and SysV shared memory, which no per-process limit counts, cannot be allocated at
/// all (with or without a control group). Control: both work outside the sandbox.
#[test]
fn memfd_and_shared_memory_fail() {
    let list = vec![format!("memfd={}", 200 * MIB), format!("shm={}", 200 * MIB)];
    let outside = std::process::Command::new(probe_copy())
        .arg("/dev/null")
        .args(["memfd=1048576", "shm=1048576"])
        .output()
        .unwrap();
    let outside = String::from_utf8_lossy(&outside.stdout);
    let worked = outside
        .lines()
        .filter(|line| line.starts_with("probe memfd") || line.starts_with("probe shm"))
        .filter(|line| line.contains(": ok "))
        .count();
    assert_eq!(worked, 2, "control: {outside}");
    let answer = run(bounded(64 * MIB), &list);
    for probe in &list {
        assert!(
            denied(&answer, probe).starts_with("denied EPERM"),
            "{answer:?}"
        );
    }
}

/// While a run lasts, its processes sit in a group of their own with the profile's bounds
/// (memory, processes, CPU); after the run the group is removed.
#[test]
fn each_run_has_a_bounded_group_removed_after_it() {
    root_required();
    let limits = Limits {
        memory_bytes: 300 * MIB,
        processes: 20,
        cpu_percent: 50,
        ..Limits::default()
    };
    let executor = executor_with(probe_runtime(&[]), limits);
    let mark = marker("sfgroup");
    let list = vec![format!("mark={mark}"), "sleep=1500".to_owned()];
    let request = probe_request(&list, Duration::from_secs(20));
    let (answer, directories) = std::thread::scope(|scope| {
        let run = scope.spawn(|| executor.run(&request, &CancelToken::new()));
        let pid = wait_for_host_pid(&mark);
        let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let mut directories = Vec::new();
        for (controller, file, expected) in [
            ("memory", "memory.limit_in_bytes", (300 * MIB).to_string()),
            ("pids", "pids.max", "22".to_owned()),
            ("cpu", "cpu.cfs_quota_us", "50000".to_owned()),
        ] {
            let path = groups
                .lines()
                .find_map(|line| {
                    let mut parts = line.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers
                        .split(',')
                        .any(|name| name == controller)
                        .then(|| path.to_owned())
                })
                .unwrap_or_else(|| panic!("no {controller} group in {groups}"));
            assert!(path.contains("/sf-run-"), "{path}");
            let directory = format!("/sys/fs/cgroup/{controller}{path}");
            let value = std::fs::read_to_string(format!("{directory}/{file}")).unwrap();
            assert_eq!(value.trim(), expected, "{directory}/{file}");
            let procs = std::fs::read_to_string(format!("{directory}/cgroup.procs")).unwrap();
            assert!(procs.lines().any(|line| line == pid.to_string()), "{procs}");
            directories.push(directory);
        }
        (run.join().unwrap().unwrap(), directories)
    });
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(
        answer.identities.enforcement.status("memory"),
        Some("cgroup-v1")
    );
    drop(executor);
    for directory in directories {
        assert!(
            !std::path::Path::new(&directory).exists(),
            "{directory} outlived its run"
        );
    }
}

/// The CPU bound holds for the run as a whole: a busy loop for a second of wall-clock time
/// under a 10 % bound gets about a tenth of a second. Control: under a 200 % bound the same
/// loop gets much more.
#[test]
fn the_cpu_bound_holds() {
    root_required();
    let spin = |cpu_percent| {
        let limits = Limits {
            cpu_percent,
            ..Limits::default()
        };
        let answer = run(limits, &["spin=1000".to_owned()]);
        let verdict = allowed(&answer, "spin=1000");
        verdict
            .split_whitespace()
            .nth(2)
            .and_then(|ms| ms.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{verdict}"))
    };
    let bounded = spin(10);
    assert!(bounded < 400, "{bounded} ms of CPU under a 10 % bound");
    let control = spin(200);
    assert!(
        control > 2 * bounded && control > 250,
        "control: {control} ms of CPU under a 200 % bound, {bounded} under 10 %"
    );
}
