//! The sandbox's bounds: no process outlives its run, the
//! timeout and output caps hold, the rlimits hold, and fork and memory bombs end within
//! bounds with the host unharmed.

mod sandbox_support;

use std::time::{Duration, Instant};

use sandbox_support::*;
use sf_host::contracts::{CancelToken, Executor, NamespaceDisposition, RunBounds, RunStatus};
use sf_sandbox_exec::{Limits, RuntimeConfig};

/// Must show 4: orphans that double-fork and setsid die with the run, whether the program
/// then exits or times out. Control: while the run lasts, the host does see the orphan.
#[test]
fn orphans_do_not_survive_the_run() {
    let executor = probe_executor();
    let name = marker("sforph");
    let list = vec![format!("orphan={name}"), "sleep=1500".to_owned()];
    let request = probe_request(&list, Duration::from_secs(20));
    let answer = std::thread::scope(|scope| {
        let run = scope.spawn(|| executor.run(&request, &CancelToken::new()));
        // Control: the scan finds the orphan while the run is still going.
        let until = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while seen.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
            seen = host_processes_matching(&name);
        }
        assert!(!seen.is_empty(), "the orphan was never seen from the host");
        run.join().unwrap().unwrap()
    });
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    allowed(&answer, &format!("orphan={name}"));
    assert!(
        String::from_utf8_lossy(&answer.stdout).contains(&format!("probe orphan-alive {name}"))
    );
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);
    assert_eq!(host_processes_matching(&name), Vec::<String>::new());

    // The same when the program outlives its timeout.
    let name = marker("sforph");
    let list = vec![format!("orphan={name}"), "sleep=100000".to_owned()];
    let answer = executor
        .run(
            &probe_request(&list, Duration::from_millis(800)),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(answer.status, RunStatus::TimedOut, "{answer:?}");
    assert!(
        String::from_utf8_lossy(&answer.stdout).contains(&format!("probe orphan-alive {name}"))
    );
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);
    assert_eq!(host_processes_matching(&name), Vec::<String>::new());
}

/// Must show 5: `sleep 1000` under a 200 ms timeout is timed out within the limit plus a
/// small margin, and no process of it survives.
#[test]
fn timeout_kills_everything_in_time() {
    let executor = executor_with(RuntimeConfig::shell(), Limits::default());
    // A distinctive duration so that the survivor scan matches only this run.
    let seconds = 1000 + std::process::id() % 1000;
    let script = format!("echo started; sleep {seconds}.5 & sleep {seconds}.25\n");
    let start = Instant::now();
    let answer = executor
        .run(
            &shell_request(&script, Duration::from_millis(200), 1 << 16),
            &CancelToken::new(),
        )
        .unwrap();
    let took = start.elapsed();
    assert_eq!(answer.status, RunStatus::TimedOut, "{answer:?}");
    assert_eq!(answer.stdout, b"started\n", "the program ran");
    assert!(took >= Duration::from_millis(200), "{took:?}");
    // A small margin that still holds on a loaded two-core machine.
    assert!(took < Duration::from_millis(700), "stopped late: {took:?}");
    assert!(answer.times.wall < Duration::from_millis(700));
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);
    assert_eq!(
        host_processes_matching(&format!("sleep {seconds}.")),
        Vec::<String>::new()
    );
}

/// Must show 6: a flood against a 64 KiB cap keeps exactly 64 KiB, ends with output-limit,
/// quickly.
#[test]
fn output_flood_stops_at_the_cap() {
    let executor = probe_executor();
    let mut request = probe_request(&["flood".to_owned()], Duration::from_secs(20));
    request.bounds = RunBounds::new(Duration::from_secs(20), 64 * 1024);
    let start = Instant::now();
    let answer = executor.run(&request, &CancelToken::new()).unwrap();
    assert_eq!(answer.status, RunStatus::OutputLimit);
    assert_eq!(answer.stdout.len(), 64 * 1024);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);

    // The same on stderr, from a shell.
    let executor = executor_with(RuntimeConfig::shell(), Limits::default());
    let answer = executor
        .run(
            &shell_request(
                "echo out; while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx >&2; done\n",
                Duration::from_secs(20),
                4096,
            ),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(answer.status, RunStatus::OutputLimit);
    assert_eq!(answer.stderr.len(), 4096);
    assert_eq!(answer.stdout, b"out\n");
}

/// Must show 7: the file-size, open-files and CPU rlimits hold.
#[test]
fn rlimits_hold() {
    let limits = Limits {
        file_size_bytes: 1 << 20,
        scratch_bytes: 8 << 20,
        open_files: 32,
        cpu_seconds: 1,
        ..Limits::default()
    };
    let executor = executor_with(probe_runtime(&[]), limits);
    let list = vec![
        "fill=/sf/scratch/big.bin:4194304".to_owned(),
        "fill=/sf/scratch/small.bin:65536".to_owned(),
        "nofile".to_owned(),
    ];
    let answer = run_probes(&executor, &list);
    assert_eq!(
        allowed(&answer, &list[0]),
        format!("ok wrote {} then EFBIG", 1 << 20)
    );
    assert_eq!(allowed(&answer, &list[1]), "ok wrote 65536");
    let nofile = allowed(&answer, "nofile");
    let opened: u64 = nofile.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(
        nofile.ends_with("EMFILE") && opened < 32 && opened > 20,
        "{nofile}"
    );

    let start = Instant::now();
    let answer = executor
        .run(
            &probe_request(&["cpu".to_owned()], Duration::from_secs(20)),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(answer.status, RunStatus::Signalled, "{answer:?}");
    assert_eq!(answer.signal, Some(nix::libc::SIGXCPU));
    assert!(
        answer.times.user >= Duration::from_millis(800),
        "{answer:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
}

/// Must show 13: a fork bomb and a memory bomb end within their bounds, and the host is
/// unharmed (nothing left running, the host can still fork).
#[test]
fn bombs_end_within_bounds() {
    let limits = Limits {
        processes: 32,
        address_space_bytes: 256 << 20,
        ..Limits::default()
    };
    let executor = executor_with(probe_runtime(&[]), limits);
    let bomb = marker("bomb");
    let start = Instant::now();
    let answer = executor
        .run(
            &probe_request(
                &["forkbomb".to_owned(), bomb.clone()],
                Duration::from_millis(1500),
            ),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(answer.status, RunStatus::TimedOut, "{answer:?}");
    assert!(
        String::from_utf8_lossy(&answer.stdout).contains("probe forkbomb-limit : ok fork failed"),
        "{answer:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);
    // The host can still start processes, and none of the bomb's is left.
    assert!(
        std::process::Command::new("true")
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(host_processes_matching(&bomb), Vec::<String>::new());

    let start = Instant::now();
    let answer = executor
        .run(
            &probe_request(&["membomb".to_owned()], Duration::from_secs(20)),
            &CancelToken::new(),
        )
        .unwrap();
    let verdict = allowed(&answer, "membomb");
    let mib: u64 = verdict.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(mib <= 256 && verdict.ends_with("ENOMEM"), "{verdict}");
    assert_eq!(answer.status, RunStatus::Exited);
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
}
