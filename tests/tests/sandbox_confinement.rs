//! Hostile programs inside the sandbox: each probe
//! prints its own verdict after attempting, and each denial is paired with a positive control
//! showing the same operation works on an allowed target. These run as root in CI and still
//! prove confinement: the sentinel files are world-readable, so only the sandbox keeps them
//! out of reach.

mod sandbox_support;

use std::io::Read;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use sandbox_support::*;
use sf_host::contracts::{NamespaceDisposition, RunStatus};
use sf_sandbox_exec::Limits;

fn probes(list: &[&str]) -> Vec<String> {
    list.iter().map(|probe| probe.to_string()).collect()
}

/// Must show 1: reads outside the allowlist fail, directly and through /proc/1/root and
/// /proc/self/root; reading an allowed runtime file, the program and the input works.
#[test]
fn reads_outside_the_allowlist_fail() {
    let dir = public_dir();
    let sentinel = dir.path().join("sentinel.txt");
    write_file(&sentinel, b"SENTINEL-SECRET-1", 0o644);
    // Control: the sentinel is readable on the host, by anyone.
    assert_eq!(std::fs::read(&sentinel).unwrap(), b"SENTINEL-SECRET-1");
    let path = sentinel.display().to_string();
    let list = [
        format!("read={path}"),
        format!("read=/proc/1/root{path}"),
        format!("read=/proc/self/root{path}"),
        "read=/etc/passwd".to_owned(),
        "read=/root/.bash_history".to_owned(),
        format!("list={}", dir.path().display()),
        "list=/".to_owned(),
        "list=/home".to_owned(),
        "read=/usr/lib/os-release".to_owned(),
        "read=/sf/program/entry.txt".to_owned(),
        "read=/sf/input/data.txt".to_owned(),
        "read=/sf/harness/tests/check.txt".to_owned(),
        "list=/usr/lib".to_owned(),
    ];
    let answer = run_probes(&probe_executor(), &list);
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    for probe in &list[..8] {
        denied(&answer, probe);
    }
    assert!(allowed(&answer, "read=/usr/lib/os-release").contains("bytes"));
    assert!(allowed(&answer, "read=/sf/program/entry.txt").contains("sf probe program"));
    assert!(allowed(&answer, "read=/sf/input/data.txt").contains("probe input"));
    assert!(allowed(&answer, "read=/sf/harness/tests/check.txt").contains("probe harness"));
    assert!(allowed(&answer, "list=/usr/lib").contains("os-release"));
    assert!(
        !String::from_utf8_lossy(&answer.stdout).contains("SENTINEL-SECRET"),
        "sentinel bytes reached the output"
    );
}

/// Must show 2: writes outside the scratch fail (create, rename into, truncate, write
/// through a symlink, hard link to a protected file); a write in scratch works and the
/// scratch size cap holds.
#[test]
fn writes_outside_scratch_fail_and_scratch_is_capped() {
    let dir = public_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let protected = dir.path().join("protected.txt");
    write_file(&protected, b"original", 0o666);
    let host = dir.path().display();
    let probe = probe_copy().display().to_string();
    let list = vec![
        "create=/sf/scratch/ok.txt".to_owned(),
        "append=/sf/scratch/ok.txt".to_owned(),
        "create=/sf/program/new.txt".to_owned(),
        "create=/sf/input/new.txt".to_owned(),
        "create=/sf/harness/new.txt".to_owned(),
        "create=/sf/harness/tests/new.txt".to_owned(),
        "create=/usr/lib/sf-probe-new.txt".to_owned(),
        "create=/new.txt".to_owned(),
        "create=/tmp/new.txt".to_owned(),
        format!("create={host}/new.txt"),
        format!("append={}", protected.display()),
        "rename=/sf/scratch/ok.txt:/sf/program/moved.txt".to_owned(),
        "rename=/sf/scratch/ok.txt:/usr/lib/moved.txt".to_owned(),
        "truncate=/sf/program/entry.txt".to_owned(),
        "truncate=/sf/input/data.txt".to_owned(),
        "truncate=/sf/harness/tests/check.txt".to_owned(),
        "rename=/sf/harness/tests/check.txt:/sf/scratch/taken.txt".to_owned(),
        format!("truncate={probe}"),
        "symlink=/sf/program/entry.txt:/sf/scratch/link-program".to_owned(),
        "symlink=/usr/lib/os-release:/sf/scratch/link-lib".to_owned(),
        "hardlink=/sf/program/entry.txt:/sf/scratch/hard-program".to_owned(),
        "hardlink=/usr/lib/os-release:/sf/scratch/hard-lib".to_owned(),
        "fill=/sf/scratch/big.bin:4194304".to_owned(),
    ];
    let limits = Limits {
        scratch_bytes: 1 << 20,
        file_size_bytes: 64 << 20,
        ..Limits::default()
    };
    let executor = executor_with(probe_runtime(&[]), limits);
    let answer = run_probes(&executor, &list);
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    allowed(&answer, "create=/sf/scratch/ok.txt");
    allowed(&answer, "append=/sf/scratch/ok.txt");
    for probe in &list[2..22] {
        denied(&answer, probe);
    }
    // The scratch holds 1 MiB: the 4 MiB write stops with ENOSPC at or below it.
    let fill = allowed(&answer, "fill=/sf/scratch/big.bin:4194304");
    let written: u64 = fill
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("fill verdict {fill}"));
    assert!(fill.ends_with("ENOSPC"), "{fill}");
    assert!(
        ((512 << 10)..=(1 << 20)).contains(&written),
        "wrote {written}: {fill}"
    );
    // Nothing changed on the host.
    assert_eq!(std::fs::read(&protected).unwrap(), b"original");
    assert!(!Path::new("/usr/lib/sf-probe-new.txt").exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// Must show 3: no network. TCP to a loopback listener, UDP to a loopback socket, netlink,
/// vsock, an abstract Unix socket and a pathname Unix socket, all made by the test, are out
/// of reach; a Unix socket inside the scratch works.
#[test]
fn network_is_unreachable() {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_address = tcp.local_addr().unwrap();
    // Control: the listener accepts from the host.
    TcpStream::connect(tcp_address).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_address = udp.local_addr().unwrap();
    udp.set_nonblocking(true).unwrap();
    let name = marker("sf-abstract-");
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
        std::os::unix::net::UnixStream::connect_addr(&address).expect("control: abstract");
        listener
    };
    let dir = public_dir();
    let socket_path = dir.path().join("socket");
    let path_listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::net::UnixStream::connect(&socket_path).expect("control: pathname socket");

    let list = vec![
        format!("tcp={tcp_address}"),
        format!("udp={udp_address}"),
        "netlink".to_owned(),
        "vsock".to_owned(),
        format!("abstract={name}"),
        format!("unixpath={}", socket_path.display()),
        "tcp=1.1.1.1:53".to_owned(),
        "unixlocal=/sf/scratch/local.sock".to_owned(),
    ];
    let answer = run_probes(&probe_executor(), &list);
    for probe in &list[..7] {
        denied(&answer, probe);
    }
    assert!(allowed(&answer, "unixlocal=/sf/scratch/local.sock").contains("echoed ping"));
    // Nothing arrived from the sandbox.
    let mut buffer = [0u8; 16];
    assert!(udp.recv_from(&mut buffer).is_err(), "a datagram arrived");
    tcp.set_nonblocking(true).unwrap();
    // The control connection above is the only one ever made.
    let mut accepted = 0;
    while let Ok((mut stream, _)) = tcp.accept() {
        let _ = stream.read(&mut buffer);
        accepted += 1;
    }
    assert_eq!(accepted, 1, "a connection came from the sandbox");
    drop((abstract_listener, path_listener));
}

/// Must show 8: the denied system calls fail (and a plain clone and getpid work).
#[test]
fn dangerous_system_calls_fail() {
    let list = probes(&[
        "unshare-user",
        "unshare-net",
        "clone-newuser",
        "clone-newns",
        "clone3",
        "mount=/sf/scratch",
        "ptrace=1",
        "tiocsti",
        "bpf",
        "keyctl",
        "clone-plain",
        "getpid",
    ]);
    let answer = run_probes(&probe_executor(), &list);
    for probe in &list[..10] {
        let verdict = denied(&answer, probe);
        let expected = if probe == "clone3" { "ENOSYS" } else { "EPERM" };
        assert!(
            verdict.starts_with(&format!("denied {expected}")),
            "{probe}: {verdict}"
        );
    }
    allowed(&answer, "clone-plain");
    allowed(&answer, "getpid");
}

/// Must show 9: no privilege inside, even though the tests run as root: NoNewPrivs 1,
/// every capability set empty, an unprivileged uid, and a setuid-root binary does not elevate
/// (it does outside, which proves the binary is really setuid).
#[test]
fn no_privilege_inside() {
    let dir = public_dir();
    let setuid = dir.path().join("setuid-probe");
    std::fs::copy(probe_copy(), &setuid).unwrap();
    std::fs::set_permissions(&setuid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { nix::libc::geteuid() } == 0;
    if root {
        // Control: as an unprivileged user outside, the setuid binary does run as root.
        use std::os::unix::process::CommandExt;
        // Another test's thread may fork while the copy's write descriptor is open, and its
        // child holds that descriptor until it execs: the exec then fails with ETXTBSY for
        // that moment, so it is tried again.
        let output = (0..50)
            .find_map(|_| {
                match std::process::Command::new(&setuid)
                    .args(["/dev/null", "whoami"])
                    .uid(65534)
                    .gid(65534)
                    .output()
                {
                    Err(error) if error.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        None
                    }
                    output => Some(output.unwrap()),
                }
            })
            .expect("the setuid copy stayed busy for a second");
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("euid=0"), "setuid control: {text}");
    }
    let executor = executor_with(probe_runtime(&[&setuid]), Limits::default());
    let list = vec![
        "status".to_owned(),
        "whoami".to_owned(),
        format!("exec={}:/sf/program/entry.txt,whoami", setuid.display()),
    ];
    let answer = run_probes(&executor, &list);
    let status = allowed(&answer, "status");
    for expected in [
        "NoNewPrivs: 1",
        "CapInh: 0000000000000000",
        "CapPrm: 0000000000000000",
        "CapEff: 0000000000000000",
        "CapBnd: 0000000000000000",
        "CapAmb: 0000000000000000",
        "Uid: 1000 1000 1000 1000",
        "Seccomp: 2",
    ] {
        assert!(
            status.contains(expected),
            "{expected} missing from {status}"
        );
    }
    assert!(allowed(&answer, "whoami").contains("uid=1000 euid=1000"));
    // The exec replaced the probe: the setuid copy printed its own whoami verdict.
    let stdout = String::from_utf8_lossy(&answer.stdout);
    let after_exec: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("probe whoami"))
        .collect();
    assert_eq!(after_exec.len(), 2, "{stdout}");
    assert!(after_exec[1].contains("euid=1000"), "{stdout}");
    let facts = &answer.identities.enforcement;
    assert_eq!(facts.status("landlock"), Some("fully-enforced"));
    let abi: u32 = facts.status("landlock-abi").unwrap().parse().unwrap();
    assert!(abi >= 6, "{facts:?}");
}

/// Must show 10: a descriptor the host opened without close-on-exec is not visible inside.
#[test]
fn inherited_descriptors_are_closed() {
    // SAFETY: open(2) without O_CLOEXEC, on purpose; closed at the end.
    let fd = unsafe { nix::libc::open(c"/dev/zero".as_ptr(), nix::libc::O_RDONLY) };
    assert!(fd >= 3);
    // Control: it is inheritable.
    // SAFETY: fcntl query on our own descriptor.
    assert_eq!(unsafe { nix::libc::fcntl(fd, nix::libc::F_GETFD) }, 0);
    let answer = run_probes(&probe_executor(), &probes(&["fds"]));
    assert_eq!(allowed(&answer, "fds"), "ok 0,1,2");
    // SAFETY: closing our own descriptor.
    unsafe { nix::libc::close(fd) };
}

/// Must show 11: the sandbox cannot signal a host process (and can signal itself).
#[test]
fn host_processes_cannot_be_signalled() {
    let host = std::process::id();
    let list = vec![
        format!("kill={host}"),
        "kill=1".to_owned(),
        "kill=0".to_owned(),
    ];
    let answer = run_probes(&probe_executor(), &list);
    denied(&answer, &list[0]);
    denied(&answer, &list[1]);
    allowed(&answer, "kill=0");
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);
    // The host name is the sandbox's own.
    let answer = run_probes(&probe_executor(), &probes(&["hostname"]));
    assert_eq!(allowed(&answer, "hostname"), "ok sf-sandbox");
    let _ = Duration::ZERO;
}
