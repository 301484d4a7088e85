//! The sandbox's own limits, as real test suites meet them: a Python program that starts 100
//! threads passes under the default limits; one that starts more than the process limit
//! allows is answered with that limit named (`limits_hit`), as are a fork bomb, a memory
//! bomb, a write past the file-size limit, a process past its CPU time and a full scratch;
//! a run that stays within every limit states none; and the host is unharmed (it can still
//! fork). As root (as CI runs them): the process and memory counts come from the run's
//! control group, which only root can make here.

mod sandbox_support;

use std::time::Duration;

use sandbox_support::*;
use sf_host::contracts::{
    CancelToken, Executor, Limit, LimitHit, RunAnswer, RunBounds, RunRequest, RunStatus,
};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{Limits, RuntimeConfig, SandboxExecutor};

const MIB: u64 = 1 << 20;

/// Starts `count` threads that each wait on one barrier, joins them, and prints how many
/// started; a thread that cannot start ends the program with exit code 3 and Python's own
/// message.
fn threads_program(count: usize) -> String {
    format!(
        "import sys, threading\n\
         barrier = threading.Barrier({count} + 1)\n\
         threads = []\n\
         try:\n\
         \x20   for _ in range({count}):\n\
         \x20       thread = threading.Thread(target=barrier.wait)\n\
         \x20       thread.start()\n\
         \x20       threads.append(thread)\n\
         except RuntimeError as error:\n\
         \x20   print('failed after', len(threads), error)\n\
         \x20   barrier.abort()\n\
         \x20   sys.exit(3)\n\
         barrier.wait()\n\
         for thread in threads:\n\
         \x20   thread.join()\n\
         print('started', len(threads))\n"
    )
}

fn python_request(source: &str) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular("main.py", source.as_bytes().to_vec())],
        entry: "main.py".into(),
        args: Vec::new(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(60), 1 << 20),
    }
}

fn run(executor: &SandboxExecutor, request: &RunRequest) -> RunAnswer {
    executor
        .run(request, &CancelToken::new())
        .unwrap_or_else(|error| panic!("the run starts: {error}"))
}

fn root_required() {
    assert!(
        is_root(),
        "these tests need root (as CI runs them): only root can make control groups here"
    );
}

/// The hit of `limit` in `answer`, panicking (with the answer) when there is none.
fn hit(answer: &RunAnswer, limit: Limit) -> &LimitHit {
    answer
        .limits_hit
        .iter()
        .find(|hit| hit.limit() == limit)
        .unwrap_or_else(|| panic!("no {} hit stated: {answer:?}", limit.as_str()))
}

fn limits_of(answer: &RunAnswer) -> Vec<Limit> {
    answer.limits_hit.iter().map(LimitHit::limit).collect()
}

/// The host can still start a process.
fn host_can_fork() {
    assert!(
        std::process::Command::new("true")
            .status()
            .expect("the host forks")
            .success()
    );
}

/// A test module that starts 100 threads (as the real library's did) passes under the
/// default limits, with no limit hit; under a process limit of 50 the same program fails,
/// and the answer names the process limit and its value. The control run is what shows the
/// limited one failed for the limit, not for the program.
#[test]
fn a_hundred_threads_pass_under_the_defaults_and_a_smaller_limit_is_named() {
    root_required();
    let request = python_request(&threads_program(100));
    let defaults = executor_with(RuntimeConfig::python3(), Limits::default());
    let answer = run(&defaults, &request);
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(answer.exit_code, Some(0), "{answer:?}");
    assert_eq!(String::from_utf8_lossy(&answer.stdout), "started 100\n");
    assert_eq!(answer.limits_hit, [], "{answer:?}");
    assert_eq!(
        answer.identities.enforcement.status("memory"),
        Some("cgroup-v1"),
        "a control group bounded the run"
    );

    let limited = executor_with(
        RuntimeConfig::python3(),
        Limits {
            processes: 50,
            ..Limits::default()
        },
    );
    let answer = run(&limited, &request);
    assert_eq!(answer.exit_code, Some(3), "{answer:?}");
    assert!(
        String::from_utf8_lossy(&answer.stdout).contains("can't start new thread"),
        "{answer:?}"
    );
    assert_eq!(limits_of(&answer), [Limit::Processes], "{answer:?}");
    let processes = hit(&answer, Limit::Processes);
    assert_eq!(processes.value(), 50);
    assert!(
        processes.detail().contains("pids.events max"),
        "{processes}"
    );
    assert!(
        processes
            .to_string()
            .starts_with("the run hit the sandbox's process limit (50): "),
        "{processes}"
    );
    host_can_fork();
}

/// A fork bomb stops at the process limit, the answer names it, nothing of the bomb is left
/// and the host can still fork.
#[test]
fn a_fork_bomb_stops_at_the_process_limit_and_the_answer_says_so() {
    root_required();
    let executor = executor_with(
        probe_runtime(&[]),
        Limits {
            processes: 32,
            ..Limits::default()
        },
    );
    let bomb = marker("bomb");
    let answer = run(
        &executor,
        &probe_request(
            &["forkbomb".to_owned(), bomb.clone()],
            Duration::from_millis(1500),
        ),
    );
    assert!(
        String::from_utf8_lossy(&answer.stdout).contains("probe forkbomb-limit : ok fork failed"),
        "{answer:?}"
    );
    let processes = hit(&answer, Limit::Processes);
    assert_eq!(processes.value(), 32);
    assert_eq!(host_processes_matching(&bomb), Vec::<String>::new());
    host_can_fork();
}

/// A memory bomb (anonymous memory, far below the address-space limit) stops at the run's
/// memory limit, and the answer names it with the group's OOM kill. Control: the same
/// program's allocation under a limit it fits stops at its own address-space limit and
/// states no memory hit.
#[test]
fn a_memory_bomb_stops_at_the_memory_limit_and_the_answer_says_so() {
    root_required();
    let bounded = executor_with(
        probe_runtime(&[]),
        Limits {
            memory_bytes: 96 * MIB,
            ..Limits::default()
        },
    );
    let answer = run_probes(&bounded, &["membomb".to_owned()]);
    assert_eq!(answer.status, RunStatus::Signalled, "{answer:?}");
    assert_eq!(answer.signal, Some(9), "{answer:?}");
    let memory = hit(&answer, Limit::Memory);
    assert_eq!(memory.value(), 96 * MIB);
    assert!(memory.detail().contains("oom_kill 1"), "{memory}");
    assert!(answer.times.memory_peak_bytes.unwrap() <= 96 * MIB);
    host_can_fork();

    // The address-space rlimit (per process, not counted outside) ends the same bomb first
    // when the run's memory limit is above it: the program sees ENOMEM and exits.
    let per_process = executor_with(
        probe_runtime(&[]),
        Limits {
            address_space_bytes: 256 * MIB,
            ..Limits::default()
        },
    );
    let answer = run_probes(&per_process, &["membomb".to_owned()]);
    assert!(
        allowed(&answer, "membomb").ends_with("ENOMEM"),
        "{answer:?}"
    );
    assert!(!limits_of(&answer).contains(&Limit::Memory), "{answer:?}");
}

fn shell(script: &str) -> RunRequest {
    shell_request(script, Duration::from_secs(30), 1 << 16)
}

/// A write past the file-size limit ends the writing process with SIGXFSZ, and the answer
/// names the file-size limit; a write within it states nothing.
#[test]
fn a_write_past_the_file_size_limit_is_named() {
    let executor = executor_with(
        RuntimeConfig::shell(),
        Limits {
            file_size_bytes: MIB,
            ..Limits::default()
        },
    );
    let write = |bytes: u64| {
        shell(&format!(
            "exec head -c {bytes} /dev/zero > /sf/scratch/out.bin\n"
        ))
    };
    let within = run(&executor, &write(MIB / 2));
    assert_eq!(within.exit_code, Some(0), "{within:?}");
    assert_eq!(within.limits_hit, [], "{within:?}");
    let past = run(&executor, &write(2 * MIB));
    assert_eq!(past.status, RunStatus::Signalled, "{past:?}");
    assert_eq!(past.signal, Some(nix::libc::SIGXFSZ), "{past:?}");
    let file_size = hit(&past, Limit::FileSize);
    assert_eq!(file_size.value(), MIB);
    assert!(file_size.detail().contains("SIGXFSZ"), "{file_size}");
}

/// A process past its CPU time is ended by SIGXCPU, and the answer names the CPU-time
/// limit.
#[test]
fn a_process_past_its_cpu_time_is_named() {
    let executor = executor_with(
        probe_runtime(&[]),
        Limits {
            cpu_seconds: 1,
            ..Limits::default()
        },
    );
    let answer = run_probes(&executor, &["cpu".to_owned()]);
    assert_eq!(answer.signal, Some(nix::libc::SIGXCPU), "{answer:?}");
    let cpu = hit(&answer, Limit::CpuTime);
    assert_eq!(cpu.value(), 1);
    assert!(cpu.detail().contains("SIGXCPU"), "{cpu}");
}

/// A scratch filled to its last block, or its last inode, is named when the program ends;
/// one half full states nothing.
#[test]
fn a_full_scratch_is_named() {
    let executor = executor_with(
        probe_runtime(&[]),
        Limits {
            scratch_bytes: 4 * MIB,
            scratch_inodes: 64,
            file_size_bytes: 16 * MIB,
            ..Limits::default()
        },
    );
    let half = format!("fill=/sf/scratch/half:{}", 2 * MIB);
    let answer = run_probes(&executor, std::slice::from_ref(&half));
    assert_eq!(allowed(&answer, &half), format!("ok wrote {}", 2 * MIB));
    assert_eq!(answer.limits_hit, [], "{answer:?}");

    let full = format!("fill=/sf/scratch/full:{}", 8 * MIB);
    let answer = run_probes(&executor, std::slice::from_ref(&full));
    assert!(allowed(&answer, &full).ends_with("ENOSPC"), "{answer:?}");
    assert_eq!(limits_of(&answer), [Limit::Scratch], "{answer:?}");
    assert_eq!(hit(&answer, Limit::Scratch).value(), 4 * MIB);

    let shell_executor = executor_with(
        RuntimeConfig::shell(),
        Limits {
            scratch_inodes: 64,
            ..Limits::default()
        },
    );
    let answer = run(
        &shell_executor,
        &shell("i=0; while [ $i -lt 100 ]; do : > /sf/scratch/f$i; i=$((i+1)); done\n"),
    );
    assert_eq!(limits_of(&answer), [Limit::ScratchFiles], "{answer:?}");
    assert_eq!(hit(&answer, Limit::ScratchFiles).value(), 64);
}
