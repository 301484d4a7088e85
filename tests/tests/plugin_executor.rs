//! The Executor contract through the plugin machinery: sandbox-exec loaded as a dynamic
//! library through the real loader and the executor adapter (the same identities as the
//! statically linked backend, errors and cancellation across the boundary), and sandbox-exec
//! resolved from `[executor]` configuration through its typetag registration (the conformance
//! suite). sandbox-exec's own crate runs the suite against the linked backend and the loaded
//! library (plugins/sandbox-exec/tests/conformance.rs).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sf_host::contracts::{
    CancelToken, Executor, NamespaceDisposition, RunBounds, RunRequest, RunStatus,
};
use sf_host::plugin::{Config, ConfigOrigin, PluginExecutor, PluginPath, load};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};
use sf_test_support::executor::ShellHarness;
use sf_tests::plugins::built;

fn config(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// sandbox-exec loaded from its library, with `section` as its configuration.
fn dynamic(section: Value) -> PluginExecutor {
    let plugin = load(&built().sandbox_exec).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "sandbox-exec");
    PluginExecutor::new(&plugin, "sandbox-exec", &config(section))
        .unwrap_or_else(|error| panic!("{error}"))
}

/// The same backend linked statically, with the launcher the dynamic one finds.
fn static_shell() -> SandboxExecutor {
    let mut config = SandboxConfig::new(RuntimeConfig::shell());
    config.launcher = Some(built().launcher.clone());
    SandboxExecutor::new(config).unwrap_or_else(|error| panic!("{error}"))
}

fn shell_request(script: &str, timeout: Duration) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular("main.sh", script.as_bytes().to_vec())],
        entry: "main.sh".into(),
        args: vec!["arg-\u{e9}".into()],
        input: vec![SnapshotFile::regular("in/data.bin", vec![0, 255, 10])],
        harness: Vec::new(),
        bounds: RunBounds::new(timeout, 1 << 16),
    }
}

/// sandbox-exec resolved from `[executor]` configuration through its typetag registration.
fn configured_sandbox_exec() -> ShellHarness {
    // This test links sf-tests' registration of sf-sandbox-exec, which makes "sandbox-exec"
    // a compiled-in tag here: the configuration resolves to the static backend.
    let _linked = sf_tests::linked::LinkedSandboxExec::default();
    assert!(
        sf_host::plugin::compiled_executor_tags().contains(&"sandbox-exec"),
        "sandbox-exec is registered with typetag"
    );
    let text = format!(
        "[executor]\ntype = \"sandbox-exec\"\nruntime = \"sh\"\nlauncher = {:?}\n",
        built().launcher.to_str().unwrap()
    );
    let config = Config::parse(&text, ConfigOrigin::File("test.toml".into())).unwrap();
    let executor = config
        .executor(&PluginPath::new([]))
        .unwrap_or_else(|error| panic!("{error}"));
    ShellHarness(executor)
}

mod sandbox_exec_resolved_from_configuration {
    sf_sdk::executor_conformance!(super::configured_sandbox_exec);
}

/// Every field of the descriptions and of an answer crosses the boundary unchanged: the
/// dynamic plugin and the static backend, configured alike, describe and answer alike.
#[test]
fn dynamic_and_static_answers_agree() {
    let dynamic = dynamic(json!({}));
    let fixed = static_shell();
    assert_eq!(
        dynamic.describe_runtime().unwrap(),
        fixed.describe_runtime().unwrap()
    );
    assert_eq!(dynamic.profile().unwrap(), fixed.profile().unwrap());
    let request = shell_request(
        "printf '\\377\\000%s' \"$1\"; cat /sf/input/in/data.bin; printf 'e' >&2; exit 7\n",
        Duration::from_secs(30),
    );
    let through_plugin = dynamic.run(&request, &CancelToken::new()).unwrap();
    let linked = fixed.run(&request, &CancelToken::new()).unwrap();
    assert_eq!(through_plugin.status, RunStatus::Exited);
    assert_eq!(through_plugin.exit_code, Some(7));
    let mut expected = b"\xff\x00arg-\xc3\xa9".to_vec();
    expected.extend_from_slice(&[0, 255, 10]);
    assert_eq!(through_plugin.stdout, expected);
    assert_eq!(through_plugin.stderr, b"e");
    assert_eq!(through_plugin.namespace, NamespaceDisposition::Reaped);
    assert_eq!(through_plugin.identities, linked.identities);
    assert_eq!(through_plugin.bounds, linked.bounds);
    assert_eq!(
        (&through_plugin.stdout, &through_plugin.stderr),
        (&linked.stdout, &linked.stderr)
    );
    assert!(through_plugin.problems.is_empty(), "{through_plugin:?}");
}

/// A contract error raised inside the plugin after configuration comes back as the same
/// error: a runtime directory replaced since configuration fails the run closed.
#[test]
fn contract_errors_cross_with_their_fields() {
    let dir = tempfile::Builder::new()
        .prefix("sf-plugin-executor-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let library = dir.path().join("library");
    std::fs::create_dir(&library).unwrap();
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut readable: Vec<PathBuf> = RuntimeConfig::shell().readable;
    readable.push(library.clone());
    let executor = dynamic(json!({
        "runtime": {"executable": "/bin/sh", "readable": readable},
    }));
    let request = shell_request("exit 0\n", Duration::from_secs(30));
    assert_eq!(
        executor
            .run(&request, &CancelToken::new())
            .unwrap()
            .exit_code,
        Some(0)
    );
    std::fs::rename(&library, dir.path().join("old")).unwrap();
    std::fs::create_dir(&library).unwrap();
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o755)).unwrap();
    let error = executor.run(&request, &CancelToken::new()).unwrap_err();
    assert_eq!(error.code(), "unavailable", "{error}");
    assert!(error.to_string().contains("runtime"), "{error}");

    // Refused in the host before anything crosses, with the contract's own rule.
    let mut bad = request.clone();
    bad.entry = "missing.sh".into();
    let error = executor.run(&bad, &CancelToken::new()).unwrap_err();
    assert_eq!(error.code(), "invalid-input");
    assert!(
        error
            .to_string()
            .contains("the entry is a file of the program")
    );
}

/// Cancellation reaches the run it names: two runs in flight on one plugin instance, one
/// cancelled; it aborts promptly and the other runs on to its own timeout.
#[test]
fn cancellation_reaches_the_run_it_names() {
    let executor = dynamic(json!({}));
    let cancel = CancelToken::new();
    let timeout = Duration::from_millis(2500);
    let request = shell_request("sleep 600\n", timeout);
    let start = Instant::now();
    let (cancelled, other) = std::thread::scope(|scope| {
        let cancelled = scope.spawn(|| {
            let answer = executor.run(&request, &cancel).unwrap();
            (answer, start.elapsed())
        });
        let other = scope.spawn(|| {
            let answer = executor.run(&request, &CancelToken::new()).unwrap();
            (answer, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
        (cancelled.join().unwrap(), other.join().unwrap())
    });
    assert_eq!(cancelled.0.status, RunStatus::Aborted, "{:?}", cancelled.0);
    assert!(
        cancelled.1 < timeout,
        "the cancelled run took {:?}",
        cancelled.1
    );
    assert_eq!(cancelled.0.namespace, NamespaceDisposition::Reaped);
    assert_eq!(other.0.status, RunStatus::TimedOut, "{:?}", other.0);
    assert!(other.1 >= timeout, "the other run took {:?}", other.1);
}

#[test]
fn plugin_configuration_is_checked_by_the_plugin() {
    let plugin = load(&built().sandbox_exec).unwrap();
    for (section, needle) in [
        (json!({"runtim": "sh"}), "runtim"),
        (json!({"runtime": "perl"}), "perl"),
        (json!({"limits": {"processes": 0}}), "processes"),
        (json!({"launcher": "/nonexistent/launcher"}), "launcher"),
    ] {
        let error = PluginExecutor::new(&plugin, "sandbox-exec", &config(section.clone()))
            .expect_err("refused");
        assert_eq!(error.code(), "plugin-refused", "{section}: {error}");
        assert!(error.to_string().contains(needle), "{section}: {error}");
    }
    // The plugin provides no object store.
    let error = sf_host::plugin::PluginObjectStoreFactory::new(
        &plugin,
        "sandbox-exec",
        &serde_json::Map::new(),
    )
    .unwrap_err();
    assert_eq!(error.code(), "unknown-contract", "{error}");
}
