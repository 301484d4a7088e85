//! What a sandbox-exec answer proves, failing closed, and placement
//! against a real runtime. sandbox-exec's own crate runs the conformance suite
//! (plugins/sandbox-exec/tests/conformance.rs).

mod sandbox_support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use sandbox_support::*;
use sf_host::collector::placement_problem;
use sf_host::contracts::{CancelToken, Executor, RunBounds, RunIdentities};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{Limits, RuntimeConfig, SandboxConfig, SandboxExecutor};

fn identities(
    executor: &SandboxExecutor,
    request: &sf_host::contracts::RunRequest,
) -> RunIdentities {
    let answer = executor.run(request, &CancelToken::new()).unwrap();
    assert_eq!(
        answer.status,
        sf_host::contracts::RunStatus::Exited,
        "{answer:?}"
    );
    answer.identities
}

/// Which of the five digests differ between two runs.
fn changed(a: &RunIdentities, b: &RunIdentities) -> Vec<&'static str> {
    let mut names = Vec::new();
    for (name, same) in [
        ("program", a.program == b.program),
        ("input", a.input == b.input),
        ("runtime", a.runtime == b.runtime),
        ("profile", a.profile == b.profile),
        ("bounds", a.bounds == b.bounds),
    ] {
        if !same {
            names.push(name);
        }
    }
    names
}

/// Must show 12: the same inputs give the same digests; one changed byte in the program, the
/// input or the runtime (its list or its executable), or one changed limit or bound, changes
/// exactly that digest.
#[test]
fn each_identity_names_exactly_its_part() {
    let executor = probe_executor();
    let request = probe_request(&["getpid".to_owned()], Duration::from_secs(20));
    let base = identities(&executor, &request);
    assert_eq!(
        changed(&base, &identities(&executor, &request)),
        Vec::<&str>::new()
    );
    assert_eq!(
        changed(&base, &identities(&probe_executor(), &request)),
        Vec::<&str>::new(),
        "a second executor with the same configuration"
    );

    let mut program = request.clone();
    program
        .program
        .push(SnapshotFile::regular("extra.txt", b"x".to_vec()));
    assert_eq!(
        changed(&base, &identities(&executor, &program)),
        vec!["program"]
    );
    let mut program = request.clone();
    program.program[0].content.push(b'!');
    assert_eq!(
        changed(&base, &identities(&executor, &program)),
        vec!["program"]
    );

    let mut input = request.clone();
    input.input[0].content[0] ^= 1;
    assert_eq!(
        changed(&base, &identities(&executor, &input)),
        vec!["input"]
    );

    let mut bounds = request.clone();
    bounds.bounds = RunBounds::new(Duration::from_millis(20_001), 1 << 20);
    assert_eq!(
        changed(&base, &identities(&executor, &bounds)),
        vec!["bounds"]
    );

    let listed = executor_with(
        probe_runtime(&[std::path::Path::new("/usr/share/zoneinfo")]),
        Limits::default(),
    );
    assert_eq!(
        changed(&base, &identities(&listed, &request)),
        vec!["runtime"]
    );

    // One byte appended to the executable in place (ELF ignores it): same path and inode,
    // new bytes.
    let dir = public_dir();
    let executable = dir.path().join("sf-sandbox-probe");
    let bytes = std::fs::read(probe_copy()).unwrap();
    write_file(&executable, &bytes, 0o755);
    let own = executor_with(
        RuntimeConfig::with_libraries(&executable, &[]),
        Limits::default(),
    );
    let before = identities(&own, &request);
    let mut edited = bytes.clone();
    edited.push(0);
    std::fs::write(&executable, &edited).unwrap();
    assert_eq!(
        changed(&before, &identities(&own, &request)),
        vec!["runtime"]
    );

    let limits = Limits {
        open_files: 300,
        ..Limits::default()
    };
    let limited = executor_with(probe_runtime(&[]), limits);
    assert_eq!(
        changed(&base, &identities(&limited, &request)),
        vec!["profile"]
    );
}

/// Fail closed: a missing launcher, and a runtime path replaced after configuration, start
/// nothing and name the mechanism.
#[test]
fn fails_closed() {
    let mut config = SandboxConfig::new(RuntimeConfig::shell());
    config.launcher = Some(PathBuf::from("/nonexistent/sf-sandbox-launcher"));
    let error = SandboxExecutor::new(config).unwrap_err();
    assert_eq!(error.code(), "unavailable");
    assert!(error.to_string().contains("launcher"), "{error}");

    let dir = public_dir();
    let library = dir.path().join("library");
    std::fs::create_dir(&library).unwrap();
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o755)).unwrap();
    let executor = executor_with(probe_runtime(&[&library]), Limits::default());
    let request = probe_request(&["getpid".to_owned()], Duration::from_secs(20));
    allowed(&run_probes(&executor, &["getpid".to_owned()]), "getpid");
    // Replace the directory: same path, another inode.
    std::fs::rename(&library, dir.path().join("old")).unwrap();
    std::fs::create_dir(&library).unwrap();
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o755)).unwrap();
    let error = executor.run(&request, &CancelToken::new()).unwrap_err();
    assert_eq!(error.code(), "unavailable");
    assert!(error.to_string().contains("runtime"), "{error}");

    // A runtime path under a reserved directory is refused at configuration.
    let mut config =
        SandboxConfig::new(RuntimeConfig::with_libraries(probe_copy(), &["/proc/self"]));
    config.launcher = Some(binaries().launcher.clone());
    assert_eq!(
        SandboxExecutor::new(config).unwrap_err().code(),
        "invalid-input"
    );
}

/// Placement against the real default shell runtime: a protected path outside what it can
/// read is placeable; inside a runtime directory (by name, through a link, through `..`
/// after a link, or via /proc) it is refused.
#[test]
fn placement_against_a_real_runtime() {
    let executor = executor_with(RuntimeConfig::shell(), Limits::default());
    let runtime = executor.describe_runtime().unwrap();
    let dir = public_dir();
    let secret = dir.path().join("answer-key");
    std::fs::create_dir(&secret).unwrap();
    assert_eq!(
        placement_problem(std::slice::from_ref(&secret), &runtime),
        None
    );
    let refused = [
        PathBuf::from("/usr/lib/answer-key"),
        PathBuf::from("/lib/answer-key"),
        PathBuf::from("/usr/bin"),
        PathBuf::from("/usr"),
        PathBuf::from("/dev/null"),
        PathBuf::from("/proc/self/root/usr/lib/answer-key"),
        PathBuf::from("/lib/x86_64-linux-gnu/../answer-key"),
    ];
    for path in refused {
        assert!(
            placement_problem(&[secret.clone(), path.clone()], &runtime).is_some(),
            "{} was placeable",
            path.display()
        );
    }
    let link = dir.path().join("link");
    std::os::unix::fs::symlink("/usr/lib", &link).unwrap();
    assert!(placement_problem(&[link.join("answer-key")], &runtime).is_some());
}
