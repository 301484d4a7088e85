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
