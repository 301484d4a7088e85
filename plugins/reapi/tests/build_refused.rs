//! An environment build's run (a command with network or an output directory) is the caller
//! host's: the remote Executor refuses it before it connects to anything.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::Duration;

use sf_reapi::{ReapiBackend, ReapiExecutor};
use sf_sdk::contracts::snapshot::SnapshotFile;
use sf_sdk::contracts::{
    CancelToken, Executor, ExecutorError, RunBounds, RunCommand, RunNetwork, RunOutput, RunRequest,
};

#[test]
fn a_build_is_refused_before_the_cluster_is_reached() {
    let cluster = TcpListener::bind("127.0.0.1:0").unwrap();
    cluster.set_nonblocking(true).unwrap();
    let backend = ReapiBackend {
        endpoint: format!("http://{}", cluster.local_addr().unwrap()),
        instance: String::new(),
        worker: format!("{}/100", "ab".repeat(32)),
        wait_seconds: None,
        reconnect_seconds: None,
        call_seconds: None,
    };
    let executor = ReapiExecutor::new(&backend).unwrap();
    let command = RunCommand {
        argv: vec!["pip".into(), "install".into()],
        cwd: "/sf/program".into(),
        env: BTreeMap::new(),
        environment: None,
        results: None,
        resources: Default::default(),
        scratch_executable: false,
        network: Some(RunNetwork {
            proxy: "/run/sf/proxy.sock".into(),
        }),
        output: Some(RunOutput {
            at: "/opt/sf-env/pip-0".into(),
            dir: "/var/lib/sf/environments/builds/b/out".into(),
        }),
    };
    let request = RunRequest {
        label: None,
        program_tree: None,
        command: Some(command),
        program: vec![SnapshotFile::regular(
            "requirements.txt",
            b"x==1\n".to_vec(),
        )],
        entry: "requirements.txt".into(),
        args: Vec::new(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(10), 1 << 16),
    };
    match executor.run(&request, &CancelToken::new()) {
        Err(ExecutorError::InvalidInput { rule, .. }) => {
            assert!(rule.contains("environment build"), "{rule}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(cluster.accept().is_err(), "the cluster was reached");
}
