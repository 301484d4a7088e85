//! The probe harness: a program run *as the runtime* inside the sandbox that attempts one
//! operation per argument and prints one verdict line per probe:
//!
//! ```text
//! probe <name> <argument>: ok <detail>
//! probe <name> <argument>: denied <errno name> <detail>
//! ```
//!
//! Every line is printed after the attempt by the probe itself, so a verdict line proves the
//! probe ran; tests pair each denial with a positive control that the same operation works
//! on an allowed target. Run it as `sf-sandbox-probe <entry file> <probe>=<argument>…`; the
//! entry file is read first (and its length printed), proving the program snapshot is
//! readable. Outside a sandbox it runs the same way, which tests use as controls.

use std::ffi::CString;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(entry) = args.get(1) else {
        eprintln!("usage: sf-sandbox-probe <entry> <probe>=<argument>…");
        std::process::exit(2);
    };
    match std::fs::read(entry) {
        Ok(bytes) => say("entry", entry, Ok(format!("{} bytes", bytes.len()))),
        Err(error) => say("entry", entry, Err(error)),
    }
    for probe in &args[2..] {
        let (name, argument) = probe.split_once('=').unwrap_or((probe, ""));
        run(name, argument);
    }
}

fn errno_name(error: &std::io::Error) -> String {
    let code = error.raw_os_error().unwrap_or(0);
    let name = match code {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EACCES => "EACCES",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::EROFS => "EROFS",
        libc::ENOSPC => "ENOSPC",
        libc::EFBIG => "EFBIG",
        libc::EMFILE => "EMFILE",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::ENOSYS => "ENOSYS",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EINVAL => "EINVAL",
        libc::ENOTTY => "ENOTTY",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENOTDIR => "ENOTDIR",
        libc::EBADF => "EBADF",
        libc::EFAULT => "EFAULT",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        _ => return format!("errno-{code}"),
    };
    name.to_owned()
}

fn say(name: &str, argument: &str, outcome: Result<String, std::io::Error>) {
    let line = match outcome {
        Ok(detail) => format!("probe {name} {argument}: ok {detail}\n"),
        Err(error) => format!(
            "probe {name} {argument}: denied {} {error}\n",
            errno_name(&error)
        ),
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

fn last() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn rc(value: libc::c_long) -> Result<String, std::io::Error> {
    if value < 0 {
        Err(last())
    } else {
        Ok(format!("returned {value}"))
    }
}

fn cstr(text: &str) -> CString {
    CString::new(text).expect("no NUL in probe arguments")
}

/// The outcome of one probe: a detail when the operation worked, the error when it did not.
type Outcome = Result<String, std::io::Error>;

fn run(name: &str, argument: &str) {
    let outcome = file_probe(name, argument)
        .or_else(|| network_probe(name, argument))
        .or_else(|| process_probe(name, argument))
        .or_else(|| privilege_probe(name, argument))
        .or_else(|| resource_probe(name, argument))
        .unwrap_or_else(|| Ok(format!("unknown probe {name}")));
    say(name, argument, outcome);
}

/// Reads, lists, creates and changes files and links: what the file system lets the program
/// reach. `None`: not one of these.
fn file_probe(name: &str, argument: &str) -> Option<Outcome> {
    let outcome = match name {
        "read" => std::fs::read(argument).map(|bytes| {
            format!(
                "{} bytes: {}",
                bytes.len(),
                String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).trim()
            )
        }),
        "show" => std::fs::read(argument).map(|bytes| {
            // The whole file on one line: line breaks as `|`, NULs as `^@`.
            String::from_utf8_lossy(&bytes)
                .replace('\n', "|")
                .replace('\0', "^@")
        }),
        "list" => std::fs::read_dir(argument).map(|entries| {
            let mut names: Vec<String> = entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names.join(",")
        }),
        "readlink" => {
            std::fs::read_link(argument).map(|target| target.to_string_lossy().into_owned())
        }
        "create" => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(argument)
            .and_then(|mut file| file.write_all(b"probe"))
            .map(|()| "created".to_owned()),
        "append" => std::fs::OpenOptions::new()
            .append(true)
            .open(argument)
            .and_then(|mut file| file.write_all(b"probe"))
            .map(|()| "appended".to_owned()),
        "truncate" => std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(argument)
            .map(|_| "truncated".to_owned()),
        "rename" => {
            // rename=<from>:<to>
            let (from, to) = argument.split_once(':').unwrap_or((argument, ""));
            std::fs::rename(from, to).map(|()| "renamed".to_owned())
        }
        "hardlink" => {
            // hardlink=<target>:<link>
            let (target, link) = argument.split_once(':').unwrap_or((argument, ""));
            std::fs::hard_link(target, link).map(|()| "linked".to_owned())
        }
        "fill" => fill(argument),
        "lstat" => lstat(argument),
        "symlink" => symlink_and_write(argument),
        _ => return None,
    };
    Some(outcome)
}

/// Opens sockets and connects: what the network namespace, Landlock and seccomp let through.
/// `None`: not one of these.
fn network_probe(name: &str, argument: &str) -> Option<Outcome> {
    let outcome = match name {
        "tcp" => {
            let address: std::net::SocketAddr = argument.parse().expect("tcp=<ip:port>");
            std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500))
                .map(|_| "connected".to_owned())
        }
        "udp" => std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|socket| socket.send_to(b"probe", argument))
            .map(|sent| format!("sent {sent}")),
        "netlink" => {
            // SAFETY: plain socket(2).
            let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, 0) };
            rc(fd.into())
        }
        "vsock" => {
            // SAFETY: plain socket(2).
            let fd = unsafe { libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0) };
            rc(fd.into())
        }
        "abstract" => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(argument.as_bytes())
                .and_then(|address| std::os::unix::net::UnixStream::connect_addr(&address))
                .map(|_| "connected".to_owned())
        }
        "unixpath" => {
            std::os::unix::net::UnixStream::connect(argument).map(|_| "connected".to_owned())
        }
        "unixlocal" => unix_local(argument),
        "mptcp" => {
            // SAFETY: plain socket(2).
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 262) };
            rc(fd.into())
        }
        "tfo" => fast_open(argument),
        _ => return None,
    };
    Some(outcome)
}

/// Looks at this process and others (identity, descriptors, signals), or ends or replaces
/// it. `None`: not one of these.
fn process_probe(name: &str, argument: &str) -> Option<Outcome> {
    let outcome = match name {
        "fds" => fds(),
        "whoami" => {
            // SAFETY: credential queries.
            Ok(unsafe {
                format!(
                    "uid={} euid={} gid={} egid={}",
                    libc::getuid(),
                    libc::geteuid(),
                    libc::getgid(),
                    libc::getegid()
                )
            })
        }
        "kill" => {
            let pid: libc::pid_t = argument.parse().expect("kill=<pid>");
            // SAFETY: signal 0 only checks permission and existence.
            rc(unsafe { libc::kill(pid, 0) }.into())
        }
        "getpid" => {
            // SAFETY: no preconditions.
            rc(unsafe { libc::getpid() }.into())
        }
        "sigkill" => {
            let pid: libc::pid_t = argument.parse().expect("sigkill=<pid>");
            // SAFETY: kill(2) with plain integers.
            rc(unsafe { libc::kill(pid, libc::SIGKILL) }.into())
        }
        "mark" => Ok("marked".to_owned()),
        "exit" => {
            let code: i32 = argument.parse().expect("exit=<code>");
            let _ = std::io::stdout().flush();
            std::process::exit(code);
        }
        "orphan" => orphan(argument),
        "exec" => exec(argument),
        "hostname" => hostname(),
        "status" => status(),
        _ => return None,
    };
    Some(outcome)
}

/// Tries the calls that would widen the sandbox: new namespaces, mounts, tracing, terminal
/// input, kernel interfaces. `None`: not one of these.
fn privilege_probe(name: &str, argument: &str) -> Option<Outcome> {
    let outcome = match name {
        "unshare-user" => {
            // SAFETY: plain unshare(2).
            rc(unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into())
        }
        "unshare-net" => {
            // SAFETY: plain unshare(2).
            rc(unsafe { libc::unshare(libc::CLONE_NEWNET) }.into())
        }
        "clone-newuser" => clone_with(libc::CLONE_NEWUSER as libc::c_ulong),
        "clone-newns" => clone_with(libc::CLONE_NEWNS as libc::c_ulong),
        "clone-plain" => clone_with(0),
        "tiocsti" => {
            let byte = b'x';
            // SAFETY: TIOCSTI reads one byte from a valid pointer.
            rc(unsafe { libc::ioctl(1, libc::TIOCSTI, &byte as *const u8) }.into())
        }
        "bpf" => {
            // SAFETY: bpf(BPF_PROG_LOAD) with a null attribute fails or is refused.
            rc(unsafe { libc::syscall(libc::SYS_bpf, 5, std::ptr::null::<u8>(), 0) })
        }
        "keyctl" => {
            // SAFETY: KEYCTL_GET_KEYRING_ID of the session keyring, integer arguments.
            rc(unsafe { libc::syscall(libc::SYS_keyctl, 0, -3i64, 0) })
        }
        "syscall" => {
            // syscall=<number>: the call with every argument 0.
            let number: libc::c_long = argument.parse().expect("syscall=<number>");
            // SAFETY: a raw system call with zero arguments; the calls tests name take no
            // pointer they would write through when it is null, or fail on it.
            rc(unsafe { libc::syscall(number, 0, 0, 0, 0, 0, 0) })
        }
        "clone3" => clone3_new_user(),
        "setns" => enter_namespace(argument),
        "ptrace" => attach(argument),
        "mount" => mount_tmpfs(argument),
        _ => return None,
    };
    Some(outcome)
}

/// Uses up a resource (descriptors, CPU, output, memory, processes) or time. `None`: not
/// one of these.
fn resource_probe(name: &str, argument: &str) -> Option<Outcome> {
    let outcome = match name {
        "flood" => {
            let chunk = vec![b'x'; 65536];
            let mut out = std::io::stdout().lock();
            loop {
                if let Err(error) = out.write_all(&chunk) {
                    break Err(error);
                }
            }
        }
        "sleep" => {
            let ms: u64 = argument.parse().expect("sleep=<ms>");
            std::thread::sleep(Duration::from_millis(ms));
            Ok("slept".to_owned())
        }
        "memfd" => memfd_fill(argument),
        "shm" => shm_fill(argument),
        "forkbomb" => fork_bomb(),
        "membomb" => memory_bomb(),
        "spin" => spin(argument),
        "nofile" => open_until_refused(),
        "cpu" => spin_forever(),
        _ => return None,
    };
    Some(outcome)
}

/// `clone3` asking for a new user namespace (a child, if one is made, exits at once).
fn clone3_new_user() -> Outcome {
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
    }
    let args = CloneArgs {
        flags: libc::CLONE_NEWUSER as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 with a valid argument struct; a child (if any) exits at once.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        // SAFETY: the child leaves at once.
        unsafe { libc::_exit(0) };
    }
    rc(pid)
}

/// setns=<namespace file>: opens it, then enters it.
fn enter_namespace(argument: &str) -> Outcome {
    let path = cstr(argument);
    // SAFETY: open(2) of a valid C string; setns of the descriptor if it opened.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            Err(last())
        } else {
            let entered = rc(libc::setns(fd, 0).into());
            libc::close(fd);
            entered
        }
    }
}

/// ptrace=<pid>: attaches to the process as a tracer.
fn attach(argument: &str) -> Outcome {
    let pid: libc::pid_t = argument.parse().expect("ptrace=<pid>");
    // SAFETY: PTRACE_ATTACH takes no pointers.
    rc(unsafe {
        libc::ptrace(
            libc::PTRACE_ATTACH,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    })
}

/// mount=<dir>: a tmpfs over the directory.
fn mount_tmpfs(argument: &str) -> Outcome {
    // SAFETY: mount(2) with valid C strings.
    rc(unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            cstr(argument).as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    }
    .into())
}

/// spin=<ms>: a busy loop for that much wall-clock time; tells the CPU time used.
fn spin(argument: &str) -> Outcome {
    let ms: u64 = argument.parse().expect("spin=<ms>");
    let start = Instant::now();
    let mut x: u64 = 1;
    while start.elapsed() < Duration::from_millis(ms) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    // SAFETY: a zeroed rusage is a valid value, to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage of this process into a struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let cpu_ms = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) as u64 * 1000
        + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) as u64 / 1000;
    Ok(format!("cpu {cpu_ms} ms ({x:x})"))
}

/// Opens /dev/null until the descriptor limit refuses one.
fn open_until_refused() -> Outcome {
    let mut opened = 0;
    let error = loop {
        match std::fs::File::open("/dev/null") {
            Ok(file) => {
                std::mem::forget(file);
                opened += 1;
                if opened > 1_000_000 {
                    break std::io::Error::from_raw_os_error(0);
                }
            }
            Err(error) => break error,
        }
    };
    Ok(format!("opened {opened} then {}", errno_name(&error)))
}

/// Spins until the CPU time limit ends the process.
fn spin_forever() -> Outcome {
    let start = Instant::now();
    let mut x: u64 = 1;
    loop {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        if x == 0 && start.elapsed() > Duration::from_secs(3600) {
            break;
        }
    }
    Ok(format!("spun {x}"))
}

/// exec=<path>:<args separated by ,>: replaces this process.
fn exec(argument: &str) -> Outcome {
    let (path, rest) = argument.split_once(':').unwrap_or((argument, ""));
    let mut argv = vec![cstr(path)];
    argv.extend(rest.split(',').filter(|a| !a.is_empty()).map(cstr));
    let mut pointers: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    let env: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: null-terminated arrays of valid C strings.
    unsafe { libc::execve(argv[0].as_ptr(), pointers.as_ptr(), env.as_ptr()) };
    Err(last())
}

/// The host name, from /proc or gethostname.
fn hostname() -> Outcome {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| {
            let mut buffer = [0u8; 256];
            // SAFETY: a buffer of the given size.
            if unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } != 0 {
                return Err(last());
            }
            let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
            Ok(String::from_utf8_lossy(&buffer[..end]).into_owned())
        })
        .map(|name| name.trim().to_owned())
}

/// Identity, no_new_privs, seccomp and capability lines of /proc/self/status.
fn status() -> Outcome {
    std::fs::read_to_string("/proc/self/status").map(|text| {
        text.lines()
            .filter(|line| {
                ["Uid:", "Gid:", "NoNewPrivs:", "Seccomp:", "Cap"]
                    .iter()
                    .any(|prefix| line.starts_with(prefix))
            })
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// The kind and mode of a name, without following it.
fn lstat(argument: &str) -> Outcome {
    std::fs::symlink_metadata(argument).map(|metadata| {
        use std::os::unix::fs::PermissionsExt as _;
        let kind = if metadata.is_symlink() {
            "symlink"
        } else if metadata.is_dir() {
            "directory"
        } else if metadata.is_file() {
            "file"
        } else {
            "other"
        };
        format!("{kind} {:o}", metadata.permissions().mode() & 0o7777)
    })
}

/// symlink=<target>:<link>, then a write through the link.
fn symlink_and_write(argument: &str) -> Outcome {
    let (target, link) = argument.split_once(':').unwrap_or((argument, ""));
    std::os::unix::fs::symlink(target, link).and_then(|()| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(link)
            .and_then(|mut file| file.write_all(b"probe"))
            .map(|()| "linked and wrote through".to_owned())
    })
}

fn clone_with(flags: libc::c_ulong) -> Result<String, std::io::Error> {
    // SAFETY: a fork-like clone (no new stack); the child exits at once.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags | libc::SIGCHLD as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid == 0 {
        // SAFETY: the child leaves at once.
        unsafe { libc::_exit(0) };
    }
    if pid > 0 {
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
    }
    rc(pid)
}

/// fill=<path>:<bytes>: writes up to that many bytes in 64 KiB chunks and tells how far it got.
fn fill(argument: &str) -> Result<String, std::io::Error> {
    // A file-size rlimit signals SIGXFSZ; ignore it to see EFBIG instead.
    // SAFETY: setting a signal disposition to ignore.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let (path, bytes) = argument.split_once(':').expect("fill=<path>:<bytes>");
    let wanted: u64 = bytes.parse().expect("a byte count");
    let mut file = std::fs::File::create(path)?;
    let chunk = vec![b'f'; 65536];
    let mut written = 0u64;
    while written < wanted {
        let size = chunk.len().min((wanted - written) as usize);
        match file.write(&chunk[..size]) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(error) => {
                return Ok(format!("wrote {written} then {}", errno_name(&error)));
            }
        }
    }
    match file.sync_all() {
        Ok(()) => Ok(format!("wrote {written}")),
        Err(error) => Ok(format!("wrote {written} then {}", errno_name(&error))),
    }
}

/// A Unix socket bound and connected inside the sandbox (the positive control for the
/// socket probes): unixlocal=<path of the socket to create>.
fn unix_local(path: &str) -> Result<String, std::io::Error> {
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    let mut client = std::os::unix::net::UnixStream::connect(path)?;
    let (mut server, _) = listener.accept()?;
    client.write_all(b"ping")?;
    let mut buffer = [0u8; 4];
    server.read_exact(&mut buffer)?;
    Ok(format!("echoed {}", String::from_utf8_lossy(&buffer)))
}

fn fds() -> Result<String, std::io::Error> {
    let directory = std::fs::read_dir("/proc/self/fd")?;
    let mut numbers: Vec<i32> = directory
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect();
    numbers.sort();
    // The listing itself holds one descriptor, the highest; leave it out.
    let listed: Vec<String> = numbers
        .iter()
        .filter(|fd| {
            std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .map(|target| !target.to_string_lossy().ends_with("/fd"))
                .unwrap_or(false)
        })
        .map(|fd| fd.to_string())
        .collect();
    Ok(listed.join(","))
}

/// orphan=<name>: double-forks; the grandchild starts a new session, renames itself `name`,
/// says so on stdout and sleeps; the probe itself returns at once.
fn orphan(name: &str) -> Result<String, std::io::Error> {
    // SAFETY: fork in a single-threaded program; the children only make plain calls.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(last());
    }
    if child == 0 {
        // SAFETY: as above.
        unsafe {
            if libc::fork() != 0 {
                libc::_exit(0);
            }
            libc::setsid();
            let title = cstr(name);
            libc::prctl(libc::PR_SET_NAME, title.as_ptr(), 0, 0, 0);
            let line = format!("probe orphan-alive {name}: ok pid {}\n", libc::getpid());
            libc::write(1, line.as_ptr().cast(), line.len());
            loop {
                libc::pause();
            }
        }
    }
    // SAFETY: reaping the intermediate child.
    unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    std::thread::sleep(Duration::from_millis(50));
    Ok(format!("intermediate {child} exited"))
}

/// Forks until fork fails, in every process; reports the first failure it saw.
fn fork_bomb() -> Result<String, std::io::Error> {
    let mut made = 0u64;
    loop {
        // SAFETY: fork in a single-threaded program; children continue this loop.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let error = last();
            if made > 0 || error.raw_os_error() == Some(libc::EAGAIN) {
                let line = format!(
                    "probe forkbomb-limit : ok fork failed after {made} with {}\n",
                    errno_name(&error)
                );
                // SAFETY: a plain write of a valid buffer.
                unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
            }
            // Keep the processes alive, as a bomb would.
            loop {
                // SAFETY: pause has no preconditions.
                unsafe { libc::pause() };
            }
        }
        if pid > 0 {
            made += 1;
        }
    }
}

/// Allocates and touches 64 MiB at a time until allocation fails.
fn memory_bomb() -> Result<String, std::io::Error> {
    let mut total = 0usize;
    let mut kept: Vec<*mut u8> = Vec::new();
    loop {
        let size = 64 << 20;
        // SAFETY: malloc returns null or a block of `size` bytes that we touch.
        let block = unsafe { libc::malloc(size) } as *mut u8;
        if block.is_null() {
            return Ok(format!("allocated {} MiB then ENOMEM", total >> 20));
        }
        // SAFETY: writing inside the block just allocated.
        unsafe { std::ptr::write_bytes(block, 1, size) };
        kept.push(block);
        total += size;
    }
}

/// memfd=<bytes>: makes a memfd and writes that many bytes into it, keeping it open.
fn memfd_fill(bytes: &str) -> Result<String, std::io::Error> {
    let wanted: u64 = bytes.parse().expect("memfd=<bytes>");
    // SAFETY: memfd_create with a valid name; the descriptor is kept (leaked) on purpose.
    let fd = unsafe { libc::memfd_create(c"probe".as_ptr(), 0) };
    if fd < 0 {
        return Err(last());
    }
    let chunk = vec![b'm'; 1 << 20];
    let mut written = 0u64;
    while written < wanted {
        // SAFETY: a write of a valid buffer.
        let n = unsafe { libc::write(fd, chunk.as_ptr().cast(), chunk.len()) };
        if n <= 0 {
            return Ok(format!("wrote {written} then {}", errno_name(&last())));
        }
        written += n as u64;
    }
    Ok(format!("wrote {written}"))
}

/// shm=<bytes>: makes a SysV shared memory segment of that size and touches every page.
fn shm_fill(bytes: &str) -> Result<String, std::io::Error> {
    let size: usize = bytes.parse().expect("shm=<bytes>");
    // SAFETY: shmget/shmat with plain arguments; the segment is touched within its size.
    unsafe {
        let id = libc::shmget(libc::IPC_PRIVATE, size, libc::IPC_CREAT | 0o600);
        if id < 0 {
            return Err(last());
        }
        let at = libc::shmat(id, std::ptr::null(), 0);
        if at as isize == -1 {
            return Err(last());
        }
        std::ptr::write_bytes(at.cast::<u8>(), 1, size);
        Ok(format!("segment {id} of {size} bytes touched"))
    }
}

/// tfo=<ip:port>: a TCP Fast Open send, which connects without connect(2).
fn fast_open(address: &str) -> Result<String, std::io::Error> {
    let address: std::net::SocketAddrV4 = address.parse().expect("tfo=<ipv4:port>");
    let sockaddr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: address.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*address.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a socket and a sendto with a valid buffer and address of the given length.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd < 0 {
            return Err(last());
        }
        let sent = libc::sendto(
            fd,
            b"x".as_ptr().cast(),
            1,
            libc::MSG_FASTOPEN,
            (&sockaddr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        let outcome = if sent < 0 {
            Err(last())
        } else {
            Ok(format!("sent {sent}"))
        };
        libc::close(fd);
        outcome
    }
}
