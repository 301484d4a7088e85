//! The sandbox's hostile probes run through a remote-execution cluster (BuildGrid on loopback,
//! one `sf worker` whose sandbox runs the probe program as its runtime), with the reapi
//! Executor loaded as a plugin: nothing escapes the worker's sandbox. Reads outside the
//! allowlist, writes outside scratch, the network (the cluster's own server among it),
//! signals to the worker and to init, and dangerous system calls are denied, each beside a
//! control that works; and the worker serves the next run.

mod sandbox_support;

use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;
use std::time::Duration;

use sandbox_support::{allowed, denied, probe_copy, probe_request, public_dir, write_file};
use sf_host::contracts::{CancelToken, Executor, RunStatus};
use sf_host::plugin::{PluginExecutor, load};
use sf_test_support::buildgrid::{Cluster, INSTANCE, Options};
use sf_tests::plugins::built;

/// A cluster with one worker whose runtime is the probe, and the reapi plugin sending runs to
/// it.
fn cluster() -> (Cluster, Arc<dyn Executor>) {
    let runtime = format!("{{ executable = \"{}\" }}", probe_copy().display());
    let cluster = Cluster::start(
        &[built().sf_worker.clone()],
        &[&runtime],
        Options::default(),
    );
    let plugin = load(&built().reapi).unwrap_or_else(|error| panic!("{error}"));
    let mut section = serde_json::Map::new();
    section.insert("endpoint".into(), cluster.grid.endpoint().into());
    section.insert("instance".into(), INSTANCE.into());
    section.insert("worker".into(), cluster.description(&runtime).into());
    section.insert("wait_seconds".into(), 60.into());
    let executor =
        PluginExecutor::new(&plugin, "reapi", &section).unwrap_or_else(|error| panic!("{error}"));
    (cluster, Arc::new(executor))
}

#[test]
fn nothing_escapes_the_workers_sandbox() {
    let (cluster, executor) = cluster();
    let dir = public_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sentinel = dir.path().join("sentinel.txt");
    write_file(&sentinel, b"SENTINEL-SECRET-REMOTE", 0o644);
    let host = dir.path().display().to_string();
    let worker = cluster.workers[0].pid();
    let list = vec![
        format!("read={}", sentinel.display()),
        format!("read=/proc/1/root{}", sentinel.display()),
        "read=/etc/passwd".to_owned(),
        "create=/tmp/sf-remote-escape.txt".to_owned(),
        format!("create={host}/new.txt"),
        format!("tcp=127.0.0.1:{}", cluster.grid.port()),
        format!("kill={worker}"),
        "kill=1".to_owned(),
        "mount=/sf/scratch".to_owned(),
        "ptrace=1".to_owned(),
        // Controls: what the run may do, it does.
        "read=/sf/input/data.txt".to_owned(),
        "create=/sf/scratch/ok.txt".to_owned(),
        "kill=0".to_owned(),
    ];
    let answer = executor
        .run(
            &probe_request(&list, Duration::from_secs(20)),
            &CancelToken::new(),
        )
        .unwrap_or_else(|error| panic!("the run starts: {error}"));
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(
        answer.identities.enforcement.status("confinement"),
        Some("remote"),
        "{answer:?}"
    );
    for probe in &list[..10] {
        denied(&answer, probe);
    }
    assert!(allowed(&answer, "read=/sf/input/data.txt").contains("probe input"));
    allowed(&answer, "create=/sf/scratch/ok.txt");
    allowed(&answer, "kill=0");
    assert!(!String::from_utf8_lossy(&answer.stdout).contains("SENTINEL-SECRET"));
    assert!(!dir.path().join("new.txt").exists());
    assert!(!std::path::Path::new("/tmp/sf-remote-escape.txt").exists());
    // The worker survived the probes and serves the next run.
    let next = executor
        .run(
            &probe_request(&["hostname".to_owned()], Duration::from_secs(20)),
            &CancelToken::new(),
        )
        .unwrap_or_else(|error| panic!("the run starts: {error}"));
    assert_eq!(allowed(&next, "hostname"), "ok sf-sandbox");
}
