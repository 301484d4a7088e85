//! An environment build's run, in the real sandbox: its network namespace reaches exactly one
//! place, a listener on `127.0.0.1:3128` whose connections are relayed to the caller's proxy
//! socket on the host (here a stand-in that answers a `CONNECT` and echoes); no other address
//! or port is reachable, a listener on the host's loopback sees no connection, and a run
//! without network cannot reach the proxy's port at all. Its output directory is bound
//! writable at the path asked for, and what the run leaves there stays on the host.

mod sandbox_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Duration;

use sandbox_support::*;
use sf_host::contracts::{
    CancelToken, Executor, ExecutorError, RunAnswer, RunBounds, RunCommand, RunNetwork, RunOutput,
    RunRequest,
};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{Limits, RuntimeConfig, SandboxExecutor};

const OUTPUT_AT: &str = "/opt/sf-build-test";

/// Connects to the proxy port, asks for a tunnel and sends a word through it; tries the
/// host's listener, a private address and a public one; writes to the output directory.
const BUILD_SCRIPT: &str = r#"
import os, socket, sys
def attempt(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        print('reached', host, port)
    except OSError:
        print('unreachable', host, port)
try:
    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)
    s.sendall(b'CONNECT registry.example:443 HTTP/1.1\r\nHost: registry.example:443\r\n\r\n')
    head = b''
    while not head.endswith(b'\r\n\r\n'):
        head += s.recv(1)
    print(head.decode().splitlines()[0])
    s.sendall(b'hello')
    print(s.recv(5).decode())
except OSError as error:
    print('no proxy', error)
attempt('127.0.0.1', int(sys.argv[1]))
attempt('10.0.0.1', 80)
attempt('1.1.1.1', 443)
out = os.environ.get('OUT')
if out:
    with open(out + '/made.txt', 'w') as f:
        f.write('built\n')
    os.makedirs(out + '/bin')
    os.symlink('/usr/bin/python3', out + '/bin/python3')
    print(open(out + '/made.txt').read().strip())
"#;

fn executor() -> SandboxExecutor {
    executor_with(RuntimeConfig::shell(), Limits::default())
}

fn build_command(host_port: u16) -> RunCommand {
    RunCommand {
        argv: vec![
            "python3".into(),
            "-c".into(),
            BUILD_SCRIPT.into(),
            host_port.to_string(),
        ],
        cwd: "/sf/program".into(),
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
        program: vec![SnapshotFile::regular(
            "requirements.txt",
            b"x==1\n".to_vec(),
        )],
        entry: "requirements.txt".into(),
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

/// A stand-in for the caller's proxy: answers the first `CONNECT` line of each connection
/// with `200` and echoes what follows in upper case; answers the request lines it saw.
fn stand_in_proxy(socket: &Path) -> std::thread::JoinHandle<Vec<String>> {
    let listener = UnixListener::bind(socket).unwrap();
    listener.set_nonblocking(false).unwrap();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        // One connection is expected; the test's end closes the listener's socket file.
        if let Ok((stream, _)) = listener.accept() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            seen.push(line.trim_end().to_owned());
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                    break;
                }
            }
            let mut stream = stream;
            stream
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .unwrap();
            let mut word = [0u8; 5];
            reader.read_exact(&mut word).unwrap();
            stream.write_all(&word.to_ascii_uppercase()).unwrap();
        }
        seen
    })
}

#[test]
fn a_build_reaches_only_its_proxy_and_leaves_its_output() {
    let private = tempfile::tempdir().unwrap();
    let socket = private.path().join("proxy.sock");
    let proxy = stand_in_proxy(&socket);
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let host_port = host.local_addr().unwrap().port();
    let public = public_dir();
    let out = public.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut build = build_command(host_port);
    build.network = Some(RunNetwork {
        proxy: socket.clone(),
    });
    build.output = Some(RunOutput {
        at: OUTPUT_AT.into(),
        dir: out.clone(),
    });
    build.env.insert("OUT".into(), OUTPUT_AT.into());
    let executor = executor();
    let answer = run(&executor, &request(build.clone()));
    let stdout = String::from_utf8_lossy(&answer.stdout).into_owned();
    assert_eq!(answer.exit_code, Some(0), "{answer:?}");
    assert_eq!(
        stdout,
        format!(
            "HTTP/1.1 200 Connection Established\nHELLO\nunreachable 127.0.0.1 {host_port}\n\
             unreachable 10.0.0.1 80\nunreachable 1.1.1.1 443\nbuilt\n"
        ),
        "{answer:?}"
    );
    assert_eq!(
        proxy.join().unwrap(),
        ["CONNECT registry.example:443 HTTP/1.1"]
    );
    assert!(
        host.accept().is_err(),
        "the host's loopback listener saw a connection"
    );
    assert_eq!(answer.identities.command, Some(build.digest()));
    assert!(answer.problems.is_empty(), "{answer:?}");
    // The output stays on the host, with its link kept as a link.
    assert_eq!(
        std::fs::read_to_string(out.join("made.txt")).unwrap(),
        "built\n"
    );
    assert_eq!(
        std::fs::read_link(out.join("bin/python3")).unwrap(),
        Path::new("/usr/bin/python3")
    );

    // A run without network cannot reach the port, and sees no output directory.
    let plain = run(&executor, &request(build_command(host_port)));
    let stdout = String::from_utf8_lossy(&plain.stdout).into_owned();
    assert!(stdout.starts_with("no proxy"), "{plain:?}");
    assert!(!stdout.contains("reached"), "{plain:?}");
    assert!(
        host.accept().is_err(),
        "the host's loopback listener saw a connection"
    );
}

#[test]
fn a_build_whose_output_or_proxy_is_wrong_starts_nothing() {
    let executor = executor();
    let public = public_dir();
    let private = tempfile::tempdir().unwrap();
    let socket = private.path().join("proxy.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let out = public.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    let refused = |change: &dyn Fn(&mut RunCommand)| {
        let mut command = build_command(1);
        command.output = Some(RunOutput {
            at: OUTPUT_AT.into(),
            dir: out.clone(),
        });
        command.network = Some(RunNetwork {
            proxy: socket.clone(),
        });
        change(&mut command);
        match executor.run(&request(command), &CancelToken::new()) {
            Err(ExecutorError::InvalidInput { input, rule }) => format!("{input}: {rule}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    };
    // Over a runtime path.
    let error = refused(&|c| c.output.as_mut().unwrap().at = "/usr/lib/sf-out".into());
    assert!(error.contains("runtime path"), "{error}");
    // A proxy that is not a socket.
    let error = refused(&|c| c.network.as_mut().unwrap().proxy = out.clone());
    assert!(error.contains("Unix socket"), "{error}");
    // A missing output directory, then one that is not empty.
    let error = refused(&|c| c.output.as_mut().unwrap().dir = public.path().join("absent"));
    assert!(error.contains("exists"), "{error}");
    std::fs::write(out.join("left-over"), "x").unwrap();
    let error = refused(&|_| {});
    assert!(error.contains("empty"), "{error}");
    std::fs::remove_file(out.join("left-over")).unwrap();
    // One anyone may write.
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let error = refused(&|_| {});
    assert!(error.contains("writable by neither"), "{error}");
}

/// Through sf's own registry proxy, a build's `pip` downloads a pinned package from the real
/// PyPI (the proxy allows its two hosts and records them); an index on the host's loopback,
/// named by address, is refused by the proxy and its listener sees no connection.
#[test]
fn pip_reaches_pypi_through_the_registry_proxy_and_nothing_else() {
    use sf_host::registry_proxy::{ProxyConfig, ProxyListener, RegistryProxy};
    let private = tempfile::tempdir().unwrap();
    let socket = private.path().join("proxy.sock");
    let proxy = RegistryProxy::start(
        ProxyListener::Unix(UnixListener::bind(&socket).unwrap()),
        ProxyConfig::allowing(["pypi.org", "files.pythonhosted.org"]),
    )
    .unwrap();
    let local_index = TcpListener::bind("127.0.0.1:0").unwrap();
    local_index.set_nonblocking(true).unwrap();
    let local_port = local_index.local_addr().unwrap().port();
    let public = public_dir();
    // Each build its own output directory: the first run gives its directory to the
    // sandbox's user, and an output directory must be the caller's.
    let output_dir = |name: &str| {
        let out = public.path().join(name);
        std::fs::create_dir(&out).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
        out
    };
    let pip = |index: &str, out: &Path| {
        let mut command = build_command(0);
        command.argv = [
            "python3",
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--retries",
            "0",
            "--index-url",
            index,
            "--dest",
            OUTPUT_AT,
            "packaging==24.0",
        ]
        .map(str::to_owned)
        .to_vec();
        command
            .env
            .insert("HTTPS_PROXY".into(), "http://127.0.0.1:3128".into());
        command.network = Some(RunNetwork {
            proxy: socket.clone(),
        });
        command.output = Some(RunOutput {
            at: OUTPUT_AT.into(),
            dir: out.to_path_buf(),
        });
        request(command)
    };
    // A build's tools check the registries' certificates against the host's bundle.
    let executor = executor_with(
        RuntimeConfig::with_libraries("/bin/sh", &["/usr/bin", "/bin", "/etc/ssl/certs"]),
        Limits::default(),
    );
    let refused = run(
        &executor,
        &pip(
            &format!("https://127.0.0.1:{local_port}/simple"),
            &output_dir("refused"),
        ),
    );
    assert_ne!(refused.exit_code, Some(0), "{refused:?}");
    assert!(
        local_index.accept().is_err(),
        "the index on the host's loopback saw a connection"
    );
    let out = output_dir("fetched");
    let fetched = run(&executor, &pip("https://pypi.org/simple", &out));
    assert_eq!(fetched.exit_code, Some(0), "{fetched:?}");
    assert!(
        out.join("packaging-24.0-py3-none-any.whl").is_file(),
        "{fetched:?}"
    );
    let log = proxy.stop();
    let reached: Vec<&str> = log.reached.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(reached, ["pypi.org", "files.pythonhosted.org"], "{log:?}");
    assert!(log.reached.iter().all(|r| r.bytes_down > 0), "{log:?}");
    assert!(
        log.refused
            .iter()
            .any(|refusal| refusal.target == format!("127.0.0.1:{local_port}")),
        "{log:?}"
    );
}
