//! No host process but root can reach a run from outside: as root (as CI runs) each sandbox
//! runs under a host uid of its own from the reserved range, which owns its user namespace,
//! and the fork server stays root. While a run is live, processes of uid 65534 (`nobody`, the
//! outside uid of earlier versions, common among daemons), of another ordinary uid and of
//! another id of the sandbox range try to trace it, kill it and enter its namespaces, and to
//! trace and kill its launcher, its init and the fork server: every attempt is refused, and
//! the run's answer is the program's own (it exits 1). Both ways a launcher starts are
//! attacked: an Executor's first run (its launcher a child of sf, serving itself) and a later
//! one (forked by the fork server). Controls: the same attacker can trace a process of its
//! own uid, and root can signal the run's processes.

mod sandbox_support;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use sandbox_support::*;
use sf_host::contracts::{CancelToken, Executor, RunStatus};
use sf_sandbox_exec::DEFAULT_IDS;

/// Runs the probe outside the sandbox as `uid` (and the same gid, no supplementary groups)
/// with `probes` (std drops the supplementary groups when root changes uid); returns its
/// stdout.
fn attack_as(uid: u32, probes: &[String]) -> String {
    let output = Command::new(probe_copy())
        .arg("/dev/null")
        .args(probes)
        .uid(uid)
        .gid(uid)
        .output()
        .expect("the attacker runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn parent_of(pid: u32) -> u32 {
    status_field(pid, "PPid")
        .and_then(|ppid| ppid.parse().ok())
        .unwrap_or_else(|| panic!("no parent of {pid}"))
}

#[test]
fn no_other_uid_can_trace_signal_or_enter_a_run() {
    assert!(
        is_root(),
        "this test needs root (as CI runs it): the sandbox gets a uid of its own only then"
    );
    let executor = probe_executor();
    // The first run's launcher serves itself, a child of this process; the second's is
    // forked by the fork server, which that run starts.
    attack_a_run(&executor, |launcher| {
        assert_eq!(parent_of(launcher), std::process::id());
        assert_eq!(executor.fork_server_pid(), None);
        None
    });
    attack_a_run(&executor, |launcher| {
        let server = executor.fork_server_pid().expect("the fork server runs");
        assert_eq!(parent_of(launcher), server);
        assert_eq!(status_field(server, "Uid").as_deref(), Some("0 0 0 0"));
        Some(server)
    });
}

/// Attacks one run of `executor` while it is live; `started_by` checks how its launcher was
/// started and names the fork server to attack too, if one started it.
fn attack_a_run(
    executor: &sf_sandbox_exec::SandboxExecutor,
    started_by: impl Fn(u32) -> Option<u32>,
) {
    let mark = marker("sfattack");
    let list = vec![
        format!("mark={mark}"),
        "sleep=2500".to_owned(),
        "exit=1".to_owned(),
    ];
    let request = probe_request(&list, Duration::from_secs(30));
    let answer = std::thread::scope(|scope| {
        let run = scope.spawn(|| executor.run(&request, &CancelToken::new()));
        let program = wait_for_host_pid(&mark);
        let init = parent_of(program);
        let launcher = parent_of(init);
        let server = started_by(launcher);
        let uid: u32 = status_field(program, "Uid")
            .and_then(|uids| uids.split(' ').next()?.parse().ok())
            .expect("the program's uid");
        assert!(
            (DEFAULT_IDS.first..=DEFAULT_IDS.last()).contains(&uid),
            "the program runs as {uid}, not an id of the reserved range"
        );
        assert_eq!(status_field(launcher, "Uid"), status_field(program, "Uid"));
        let other_sandbox_id = if uid > DEFAULT_IDS.first {
            uid - 1
        } else {
            uid + 1
        };

        let mut attempts = Vec::new();
        for namespace in ["user", "mnt", "pid", "net", "ipc", "uts", "cgroup"] {
            attempts.push(format!("setns=/proc/{program}/ns/{namespace}"));
        }
        for target in [program, init, launcher].into_iter().chain(server) {
            attempts.push(format!("ptrace={target}"));
            attempts.push(format!("sigkill={target}"));
        }
        for attacker in [65534, 54321, other_sandbox_id] {
            let stdout = attack_as(attacker, &attempts);
            for attempt in &attempts {
                let (name, argument) = attempt.split_once('=').unwrap();
                let line = stdout
                    .lines()
                    .find(|line| line.starts_with(&format!("probe {name} {argument}: ")))
                    .unwrap_or_else(|| panic!("uid {attacker}: no verdict for {attempt}"));
                assert!(
                    line.contains(": denied "),
                    "uid {attacker} could {attempt}: {line}"
                );
            }
        }

        // Control: the attacker's harness works: as 65534 it traces a process of its own.
        let mut own = Command::new("/bin/sleep")
            .arg("30")
            .uid(65534)
            .gid(65534)
            .spawn()
            .unwrap();
        let traced = attack_as(65534, &[format!("ptrace={}", own.id())]);
        let _ = own.kill();
        let _ = own.wait();
        assert!(
            traced.contains(&format!("probe ptrace {}: ok", own.id())),
            "control: {traced}"
        );
        // Control: root may signal the program (signal 0: the check only).
        let root = attack_as(0, &[format!("kill={program}")]);
        assert!(root.contains(": ok "), "control: {root}");
        run.join().unwrap().unwrap()
    });
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(answer.exit_code, Some(1), "{answer:?}");
    allowed(&answer, "sleep=2500");
    assert_eq!(
        answer.identities.enforcement.status("host-identity"),
        Some("reserved-id")
    );
}
