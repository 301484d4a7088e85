//! A run's command, in the real sandbox: `argv` with no shell, `argv[0]` searched on the run's
//! `PATH` (a dependency environment's `bin` first), the working directory asked for, exactly
//! the fixed environment and the command's own variables, a dependency environment bound
//! read-only at the path it was built for (its executables run, it cannot be written), and a
//! results file read from scratch once every process of the run has ended: a link, a
//! directory, a file past its cap or a FIFO is refused, and a process left behind cannot
//! rewrite it. The command's digest is the answer's identity.

mod sandbox_support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use sandbox_support::*;
use sf_host::contracts::{
    CancelToken, CapturedResults, Executor, ExecutorError, ResultsRequest, RunAnswer, RunBounds,
    RunCommand, RunEnvironment, RunRequest, RunStatus,
};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{Limits, RuntimeConfig, SandboxExecutor};

fn executor() -> SandboxExecutor {
    executor_with(RuntimeConfig::shell(), Limits::default())
}

fn command(argv: &[&str]) -> RunCommand {
    RunCommand {
        argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
        cwd: "/sf/program".to_owned(),
        env: BTreeMap::new(),
        environment: None,
        results: None,
        resources: Default::default(),
        scratch_executable: false,
        network: None,
        output: None,
    }
}

fn request(command: RunCommand) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: Some(command),
        program: vec![
            SnapshotFile::regular("README", b"top\n".to_vec()),
            SnapshotFile::regular("tests/data.txt", b"below\n".to_vec()),
        ],
        entry: "README".into(),
        args: Vec::new(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(30), 1 << 20),
    }
}

fn run(executor: &SandboxExecutor, request: &RunRequest) -> RunAnswer {
    executor
        .run(request, &CancelToken::new())
        .unwrap_or_else(|error| panic!("the run starts: {error}"))
}

fn stdout(answer: &RunAnswer) -> String {
    String::from_utf8_lossy(&answer.stdout).into_owned()
}

#[test]
fn argv_is_searched_on_path_run_in_its_cwd_with_exactly_its_environment() {
    let executor = executor();
    let mut shown = command(&["sh", "-c", "pwd; cat data.txt; env | sort", "ignored-0"]);
    shown.cwd = "/sf/program/tests".to_owned();
    shown
        .env
        .insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    let answer = run(&executor, &request(shown.clone()));
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(answer.exit_code, Some(0), "{answer:?}");
    let out = stdout(&answer);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("/sf/program/tests"));
    assert_eq!(lines.next(), Some("below"));
    let env: Vec<&str> = lines.filter(|line| !line.starts_with("PWD=")).collect();
    assert_eq!(
        env,
        [
            "HOME=/sf/scratch",
            "LANG=C.UTF-8",
            "PATH=/usr/bin:/bin",
            "PYTHONDONTWRITEBYTECODE=1",
            "TMPDIR=/sf/scratch",
            "TZ=UTC",
        ],
        "{out}"
    );
    assert_eq!(answer.identities.command, Some(shown.digest()));
    assert_eq!(answer.results, None, "no results were asked for");
}

#[test]
fn no_shell_is_implied_and_a_missing_program_starts_nothing() {
    let executor = executor();
    let answer = run(&executor, &request(command(&["echo", "$HOME", "a;b"])));
    assert_eq!(stdout(&answer), "$HOME a;b\n");
    match executor.run(
        &request(command(&["no-such-program-anywhere"])),
        &CancelToken::new(),
    ) {
        Err(ExecutorError::Unavailable { mechanism, .. }) => assert_eq!(mechanism, "runtime"),
        other => panic!("a program found nowhere on PATH is not run: {other:?}"),
    }
    // A file of the program is not executable (its mount is noexec), even by absolute path.
    match executor.run(
        &request(command(&["/sf/program/README"])),
        &CancelToken::new(),
    ) {
        Err(ExecutorError::Unavailable { .. }) => {}
        other => panic!("a program file is not executed: {other:?}"),
    }
    // A working directory that is not a directory of the program is refused before a start.
    let mut elsewhere = command(&["true"]);
    elsewhere.cwd = "/sf/program/absent".into();
    assert!(matches!(
        executor.run(&request(elsewhere), &CancelToken::new()),
        Err(ExecutorError::InvalidInput { .. })
    ));
}

/// A run's scratch is not executable unless its command asks (a compiled language's test
/// suite builds its test programs there and runs them); asking is part of the command's
/// digest, and nothing else of the run becomes executable.
#[test]
fn the_scratch_is_executable_only_for_a_command_that_asks() {
    let executor = executor();
    let built = "cp /bin/true /sf/scratch/built && /sf/scratch/built && echo ran";
    let plain = command(&["sh", "-c", built]);
    let answer = run(&executor, &request(plain.clone()));
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(answer.exit_code, Some(126), "{answer:?}");
    assert!(
        String::from_utf8_lossy(&answer.stderr).contains("Permission denied"),
        "{answer:?}"
    );
    let mut asking = plain.clone();
    asking.scratch_executable = true;
    assert_ne!(asking.digest(), plain.digest());
    let answer = run(&executor, &request(asking.clone()));
    assert_eq!(answer.exit_code, Some(0), "{answer:?}");
    assert_eq!(stdout(&answer), "ran\n");
    assert_eq!(answer.identities.command, Some(asking.digest()));
    // The program's executables stay noexec: only the scratch is what the command asked for.
    let mut tree = command(&["sh", "-c", "/sf/program/run.sh"]);
    tree.scratch_executable = true;
    let mut in_tree = request(tree);
    in_tree.program.push(SnapshotFile::new(
        "run.sh".to_owned(),
        sf_host::contracts::tree_path::EntryMode::Executable,
        b"#!/bin/sh\necho ran from the tree\n".to_vec(),
    ));
    let answer = run(&executor, &in_tree);
    assert_eq!(answer.exit_code, Some(126), "{answer:?}");
    assert_eq!(stdout(&answer), "");
}

/// A directory shaped like a dependency environment: `bin/tool` (a shell script with an
/// absolute shebang) and a data file, readable by everyone, writable by its owner only.
fn environment_tree(root: &Path) {
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("share")).unwrap();
    std::fs::write(
        root.join("bin/tool"),
        "#!/bin/sh\necho \"tool from $0\"; cat /opt/sf-test-env/share/data\n",
    )
    .unwrap();
    std::fs::set_permissions(
        root.join("bin/tool"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(root.join("share/data"), "environment data\n").unwrap();
}

#[test]
fn a_dependency_environment_is_bound_read_only_at_its_path_and_searched_first() {
    let dir = public_dir();
    let tree = dir.path().join("tree");
    environment_tree(&tree);
    let executor = executor();
    let mut with = command(&[
        "sh",
        "-c",
        "tool; echo x > /opt/sf-test-env/share/data && echo wrote; \
         touch /opt/sf-test-env/new 2>/dev/null && echo created; echo done",
    ]);
    with.environment = Some(RunEnvironment {
        digest: sf_host::canonical::Digest::of(b"a test environment"),
        tree: tree.clone(),
        at: "/opt/sf-test-env".into(),
    });
    let answer = run(&executor, &request(with.clone()));
    assert_eq!(
        stdout(&answer),
        "tool from /opt/sf-test-env/bin/tool\nenvironment data\ndone\n",
        "{answer:?}"
    );
    assert_eq!(answer.identities.command, Some(with.digest()));
    assert_eq!(
        std::fs::read_to_string(tree.join("share/data")).unwrap(),
        "environment data\n"
    );
    // The same executor runs a command without it next, and the environment is gone.
    let without = run(
        &executor,
        &request(command(&[
            "sh",
            "-c",
            "ls /opt/sf-test-env 2>&1; command -v tool",
        ])),
    );
    assert_ne!(without.exit_code, Some(0), "{without:?}");
    assert!(!stdout(&without).contains("bin"), "{without:?}");
    // And with it again, several times (a prepared sandbox binds the last run's).
    for _ in 0..3 {
        let again = run(&executor, &request(with.clone()));
        assert!(stdout(&again).starts_with("tool from"), "{again:?}");
    }
    // An environment bound inside a runtime directory is refused before a start.
    let mut inside = with.clone();
    inside.environment.as_mut().unwrap().at = "/usr/bin/env-here".into();
    assert!(matches!(
        executor.run(&request(inside), &CancelToken::new()),
        Err(ExecutorError::InvalidInput { .. })
    ));
    // An environment anyone may write is refused.
    std::fs::set_permissions(&tree, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(matches!(
        executor.run(&request(with), &CancelToken::new()),
        Err(ExecutorError::InvalidInput { .. })
    ));
}

fn with_results(script: &str, max_bytes: u64) -> RunRequest {
    let mut results = command(&["sh", "-c", script]);
    results.results = Some(ResultsRequest {
        path: "out/results.xml".into(),
        max_bytes,
    });
    request(results)
}

#[test]
fn the_results_file_is_read_after_every_process_ended_and_only_if_regular() {
    let executor = executor();
    let written = run(
        &executor,
        &with_results(
            "mkdir -p $TMPDIR/out; echo '<testsuites/>' > $TMPDIR/out/results.xml; exit 1",
            100,
        ),
    );
    assert_eq!(written.exit_code, Some(1));
    assert_eq!(
        written.results,
        Some(CapturedResults::Written(b"<testsuites/>\n".to_vec()))
    );
    let absent = run(&executor, &with_results("true", 100));
    assert_eq!(absent.results, Some(CapturedResults::Absent));
    for script in [
        // a link, even to a file beneath scratch
        "mkdir -p $TMPDIR/out; echo x > $TMPDIR/real; ln -s ../real $TMPDIR/out/results.xml",
        // a link in the middle of the path
        "mkdir -p $TMPDIR/real; echo x > $TMPDIR/real/results.xml; ln -s real $TMPDIR/out",
        // a directory
        "mkdir -p $TMPDIR/out/results.xml",
        // a FIFO, which would block a reader that waits
        "mkdir -p $TMPDIR/out; mkfifo $TMPDIR/out/results.xml",
        // past the cap
        "mkdir -p $TMPDIR/out; head -c 101 /dev/zero > $TMPDIR/out/results.xml",
    ] {
        let answer = run(&executor, &with_results(script, 100));
        assert!(
            matches!(answer.results, Some(CapturedResults::Refused(_))),
            "{script}: {answer:?}"
        );
    }
    // A process left behind is killed before the file is read: the file read is the one
    // the program left.
    let raced = run(
        &executor,
        &with_results(
            "mkdir -p $TMPDIR/out; echo first > $TMPDIR/out/results.xml; \
             (sleep 0.3; echo second > $TMPDIR/out/results.xml) & exit 0",
            100,
        ),
    );
    assert_eq!(
        raced.results,
        Some(CapturedResults::Written(b"first\n".to_vec()))
    );
}

/// Starts the given number of threads (each waits on one barrier) and prints how many
/// started; a refused thread ends it with exit code 3.
const THREADS: &str = "import sys, threading\n\
n = int(sys.argv[1]); b = threading.Barrier(n + 1); ts = []\n\
try:\n\
\x20   for _ in range(n):\n\
\x20       t = threading.Thread(target=b.wait); t.start(); ts.append(t)\n\
except RuntimeError as e:\n\
\x20   print('refused after', len(ts)); b.abort(); sys.exit(3)\n\
b.wait()\n\
[t.join() for t in ts]\n\
print('started', n)\n";

fn python(script: &str, args: &[&str], resources: sf_host::contracts::RunResources) -> RunRequest {
    let mut argv = vec!["python3", "-c", script];
    argv.extend(args);
    let mut command = command(&argv);
    command.resources = resources;
    request(command)
}

/// A run may ask for less than the profile allows: the bound it asks for is enforced and is
/// the value the limit hit states; one above the profile's is refused before a start. As
/// root (as CI runs them) the run's control group bounds memory and processes.
#[test]
fn a_command_asks_for_lower_bounds_and_they_hold() {
    use sf_host::contracts::{Limit, RunResources};
    let executor = executor();
    let few = RunResources {
        processes: Some(16),
        ..RunResources::default()
    };
    let refused = run(&executor, &python(THREADS, &["40"], few));
    assert_eq!(refused.exit_code, Some(3), "{refused:?}");
    let hit = &refused.limits_hit;
    assert_eq!(hit.len(), 1, "{refused:?}");
    assert_eq!((hit[0].limit(), hit[0].value()), (Limit::Processes, 16));
    // The same program under the profile's limits starts every thread.
    let fits = run(
        &executor,
        &python(THREADS, &["40"], RunResources::default()),
    );
    assert_eq!(stdout(&fits), "started 40\n", "{fits:?}");
    assert!(fits.limits_hit.is_empty(), "{fits:?}");

    let small = RunResources {
        memory_bytes: Some(64 << 20),
        ..RunResources::default()
    };
    let bomb = run(
        &executor,
        &python(
            "x = bytearray(256 << 20); x[::4096] = b'1' * len(x[::4096]); print('kept')",
            &[],
            small,
        ),
    );
    assert!(!stdout(&bomb).contains("kept"), "{bomb:?}");
    let memory: Vec<_> = bomb
        .limits_hit
        .iter()
        .filter(|hit| hit.limit() == Limit::Memory)
        .collect();
    assert_eq!(memory.len(), 1, "{bomb:?}");
    assert_eq!(memory[0].value(), 64 << 20);

    let tight = RunResources {
        scratch_bytes: Some(1 << 20),
        ..RunResources::default()
    };
    let mut fill = command(&[
        "sh",
        "-c",
        "head -c 4194304 /dev/zero > $TMPDIR/big; echo $?",
    ]);
    fill.resources = tight;
    let filled = run(&executor, &request(fill));
    assert_ne!(
        stdout(&filled),
        "0\n",
        "the write past the bound fails: {filled:?}"
    );
    let scratch: Vec<_> = filled
        .limits_hit
        .iter()
        .filter(|hit| hit.limit() == Limit::Scratch)
        .collect();
    assert_eq!(scratch.len(), 1, "{filled:?}");
    assert_eq!(scratch[0].value(), 1 << 20);

    let greedy = RunResources {
        processes: Some(1 << 40),
        ..RunResources::default()
    };
    assert!(matches!(
        executor.run(&python("pass", &[], greedy), &CancelToken::new()),
        Err(ExecutorError::InvalidInput { .. })
    ));
}
