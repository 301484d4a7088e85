//! The launcher: the small, single-threaded helper program (`sf-sandbox-launcher`) that
//! builds the sandbox and execs the runtime in it.
//!
//! The Executor starts it once with `std::process::Command` as a fork server (see the `zygote` module);
//! nothing runs between that fork and the exec but std's own async-signal-safe steps, and
//! everything below runs in single-threaded processes forked from the fork server. Started
//! without `--zygote`, it serves one plan itself. Three processes take part in a run:
//!
//! 1. The launcher (host pid namespace): closes every inherited descriptor, reads the plan,
//!    enters the shared empty network namespace when one is passed, gives up root for the
//!    configured unprivileged user when started as root (forked by the fork server, it has
//!    already become its sandbox's own host user), sets its parent-death signal,
//!    unshares user, mount, pid, ipc, uts, cgroup (and, without a shared one, network)
//!    namespaces,
//!    maps its user to the unprivileged id inside with setgroups denied, sets the host name
//!    and forks the init. Then it only watches: it kills the init (SIGKILL) when the
//!    supervisor asks or goes away, and reports the init's end and resource use.
//! 2. The init (pid 1 of the new pid namespace): builds the root (see [`mounts`]), pivots
//!    into it, and waits for the run plan: up to here the sandbox is prepared ahead of its
//!    run (see [`crate::plan`]). Then it mounts the program, the input and the scratch, forks
//!    the program's process, reaps, reports how that process ended, and exits, which makes
//!    the kernel kill everything left in the namespace.
//! 3. The program's process (see [`confine`]): drops every privilege, applies Landlock,
//!    seccomp and rlimits, closes every other descriptor and execs the runtime.

mod confine;
mod mounts;
mod proxy_listener;
mod results;
mod seen;
pub(crate) mod sys;
mod zygote;

pub(crate) use zygote::{ARGUMENT as ZYGOTE_ARGUMENT, ONCE_ARGUMENT};

use std::io::Read;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::plan::{MAX_HEADER_BYTES, PLAN_PROTOCOL, Plan, Report, RunPlan};
use sys::{Failure, Step, check};

/// The launcher's end of the socket to the supervisor.
const SOCKET: RawFd = 0;

/// Where reports go: [`SOCKET`], until the program's process moves it out of the way.
static REPORTS: AtomicI32 = AtomicI32::new(SOCKET);

/// The launcher's entry point. Never returns. With the single argument `--zygote` it is the
/// fork server, with `--once` it serves one fork server request itself (see [`zygote`]);
/// otherwise it runs one plan read from its standard input.
pub fn main() -> ! {
    match std::env::args_os().nth(1) {
        Some(arg) if arg == zygote::ARGUMENT => zygote::main(),
        Some(arg) if arg == zygote::ONCE_ARGUMENT => zygote::once(),
        _ => {}
    }
    // Descriptors the supervisor's process left open without close-on-exec must not reach
    // the sandbox: close them before anything else.
    sys::close_range(3, u32::MAX);
    run_plan(None)
}

/// What a fork server already did for the launcher it forked, once for all its runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prepared {
    /// Whether this process is already in the shared empty network namespace.
    pub network_joined: bool,
}

/// Runs the plan read from the socket at [`SOCKET`], with stdout and stderr at 1 and 2 and
/// nothing else open. Never returns.
pub(crate) fn run_plan(prepared: Option<Prepared>) -> ! {
    // A panic is a setup failure like any other: report it and stop, never run on.
    std::panic::set_hook(Box::new(|info| {
        report(
            REPORTS.load(Ordering::SeqCst),
            &Report::Fail {
                mechanism: "launcher".to_owned(),
                detail: format!("the launcher panicked: {info}"),
            },
        );
        sys::exit_now(126);
    }));
    match launch(prepared) {
        Ok(code) => sys::exit_now(code),
        Err(failure) => {
            report(SOCKET, &fail(failure));
            sys::exit_now(126)
        }
    }
}

fn fail(failure: Failure) -> Report {
    Report::Fail {
        mechanism: failure.mechanism.to_owned(),
        detail: failure.detail,
    }
}

/// Writes one report line.
pub(crate) fn report(fd: RawFd, report: &Report) {
    let mut line = report.encode().into_bytes();
    line.push(b'\n');
    sys::write_all(fd, &line);
}

/// Writes one report line with `fd` attached (SCM_RIGHTS): the supervisor takes the
/// descriptor with the line.
pub(crate) fn report_with_descriptor(
    socket: RawFd,
    report: &Report,
    fd: RawFd,
) -> Result<(), nix::Error> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let mut line = report.encode().into_bytes();
    line.push(b'\n');
    let fds = [fd];
    let control = [ControlMessage::ScmRights(&fds)];
    let iov = [std::io::IoSlice::new(&line)];
    let sent = sendmsg::<()>(socket, &iov, &control, MsgFlags::empty(), None)?;
    // A line is a few bytes and the socket's buffer empty this early: a short write would
    // cut the line, so it is an error.
    if sent == line.len() {
        Ok(())
    } else {
        Err(nix::Error::EMSGSIZE)
    }
}

/// The plan, and the shared network namespace's descriptor when one came with it.
struct Received {
    plan: Plan,
    network: Option<RawFd>,
}

/// The socket at [`SOCKET`] as a stream; never closed through it (fd 0 stays open for the
/// whole process).
fn socket() -> std::mem::ManuallyDrop<UnixStream> {
    // SAFETY: fd 0 is the socket the supervisor gave; the stream is never dropped.
    std::mem::ManuallyDrop::new(unsafe { UnixStream::from_raw_fd(SOCKET) })
}

/// Reads one header (its eight length bytes after the `first` already read) as a `T`.
fn read_header<T: serde::de::DeserializeOwned>(
    mut length: [u8; 8],
    first: usize,
    what: &str,
) -> Step<T> {
    let read_error =
        |error: std::io::Error| Failure::new("launcher", format!("reading the {what}: {error}"));
    let mut socket = socket();
    socket
        .read_exact(&mut length[first..])
        .map_err(read_error)?;
    let header_length = u64::from_le_bytes(length);
    if header_length > MAX_HEADER_BYTES {
        return Err(Failure::new(
            "launcher",
            format!("the {what} header is too large"),
        ));
    }
    let mut header = vec![0u8; header_length as usize];
    socket.read_exact(&mut header).map_err(read_error)?;
    serde_json::from_slice(&header)
        .map_err(|error| Failure::new("launcher", format!("the {what} does not parse: {error}")))
}

/// Reads the run plan and the bytes of every program and input file, in plan order. `None`:
/// the supervisor closed the socket first (the prepared sandbox is not wanted).
fn read_run() -> Step<Option<(RunPlan, Vec<Vec<u8>>)>> {
    let mut length = [0u8; 8];
    let first = loop {
        // SAFETY: reading into a buffer of the given length.
        let read = unsafe { libc::read(SOCKET, length.as_mut_ptr().cast(), length.len()) };
        if read >= 0 {
            break read as usize;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(Failure::last("launcher", "reading the run plan"));
        }
    };
    if first == 0 {
        return Ok(None);
    }
    let run: RunPlan = read_header(length, first, "run plan")?;
    if run.file_bytes() > 3 * sf_contracts::snapshot::MAX_SNAPSHOT_BYTES {
        return Err(Failure::new(
            "launcher",
            "the run plan's files are too large",
        ));
    }
    let mut socket = socket();
    let mut files = Vec::with_capacity(run.files().count());
    for file in run.files() {
        let mut bytes = vec![0u8; file.size as usize];
        socket.read_exact(&mut bytes).map_err(|error| {
            Failure::new("launcher", format!("reading the run's files: {error}"))
        })?;
        files.push(bytes);
    }
    Ok(Some((run, files)))
}

fn read_plan() -> Step<Received> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut length = [0u8; 8];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut network = None;
    let first = {
        let mut iov = [std::io::IoSliceMut::new(&mut length)];
        let message = recvmsg::<()>(
            SOCKET,
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(|error| Failure::new("launcher", format!("reading the plan: {error}")))?;
        for control in message
            .cmsgs()
            .map_err(|error| Failure::new("launcher", format!("reading the plan: {error}")))?
        {
            if let ControlMessageOwned::ScmRights(fds) = control {
                for fd in fds {
                    if network.is_none() {
                        network = Some(fd);
                    } else {
                        // SAFETY: a descriptor just received and owned by no one else.
                        unsafe { libc::close(fd) };
                    }
                }
            }
        }
        message.bytes
    };
    let plan: Plan = read_header(length, first, "plan")?;
    if plan.protocol != PLAN_PROTOCOL {
        return Err(Failure::new(
            "launcher",
            format!(
                "plan protocol {} but this launcher speaks {PLAN_PROTOCOL}; install the \
                 launcher built with this plugin",
                plan.protocol
            ),
        ));
    }
    Ok(Received { plan, network })
}

/// The launcher's own steps; returns its exit code once the init has been reaped.
fn launch(prepared: Option<Prepared>) -> Step<i32> {
    let received = read_plan()?;
    let plan = &received.plan;
    // A build's sandbox makes a network namespace of its own wherever the fork server is.
    let own_network = plan.proxy_port.is_some();
    if let Some(prepared) = prepared
        && prepared.network_joined != plan.join_network
        && !own_network
    {
        return Err(Failure::new(
            "network-namespace",
            "the fork server's network namespace does not match the plan",
        ));
    }
    let network_joined = prepared.is_some_and(|prepared| prepared.network_joined);
    let new_network = if own_network {
        if let Some(fd) = received.network {
            // SAFETY: a received descriptor this launcher does not use.
            unsafe { libc::close(fd) };
        }
        true
    } else {
        join_shared_network(&received, network_joined)?
    };
    let outside = become_outside_id(plan)?;
    // If the supervisor's thread goes away, so does the launcher (and with it, the init).
    // SAFETY: prctl with integer arguments. Set after the credential change, which clears it.
    let status = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    check(status.into(), "launcher", "PR_SET_PDEATHSIG")?;
    unshare_namespaces(new_network)?;
    map_user_and_group(plan, outside)?;
    if let Some(port) = plan.proxy_port {
        proxy_listener::open(port)?;
    }
    let hostname = plan.hostname.as_bytes();
    // SAFETY: a valid buffer of the given length.
    let status = unsafe { libc::sethostname(hostname.as_ptr().cast(), hostname.len()) };
    check(status.into(), "uts-namespace", "sethostname")?;
    start_init_and_watch(plan)
}

/// Enters the shared empty network namespace when the plan joins one (unless the fork server
/// entered it already, once for all its runs). Answers whether the run needs a new network
/// namespace of its own instead.
fn join_shared_network(received: &Received, network_joined: bool) -> Step<bool> {
    if network_joined {
        // The fork server entered the shared namespace once, before it forked this process.
        return Ok(false);
    }
    if !received.plan.join_network {
        return Ok(true);
    }
    let fd = received
        .network
        .ok_or_else(|| Failure::new("network-namespace", "no namespace descriptor came"))?;
    // SAFETY: setns on a received descriptor; it is closed right after.
    let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    check(
        rc.into(),
        "network-namespace",
        "setns into the shared network namespace",
    )?;
    // SAFETY: our own descriptor, not used again.
    unsafe { libc::close(fd) };
    Ok(false)
}

/// The host uid and gid the sandbox runs as, never root. Started directly as root (not by
/// the fork server, whose child has already become its sandbox's own host user), the
/// launcher becomes the plan's outside id first.
fn become_outside_id(plan: &Plan) -> Step<(libc::uid_t, libc::gid_t)> {
    // SAFETY: plain credential queries of this single-threaded process.
    let outside = if unsafe { libc::geteuid() } == 0 {
        let id = plan.outside_id_when_root;
        zygote::become_id(Some(id))?;
        // A credential change clears the dumpable flag, which would make /proc/self/*
        // root-owned and the uid map unwritable.
        // SAFETY: prctl with integer arguments.
        let status = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
        check(status.into(), "identity", "dumpable")?;
        (id, id)
    } else {
        // SAFETY: credential queries.
        unsafe { (libc::geteuid(), libc::getegid()) }
    };
    if outside.0 == 0 {
        return Err(Failure::new(
            "identity",
            "the sandbox would run as host root; configure a non-zero outside id",
        ));
    }
    Ok(outside)
}

/// Unshares the user, mount, pid, ipc, uts and cgroup namespaces, and the network namespace
/// unless the run joined the shared one. The cgroup namespace makes the run's control group
/// (joined by the fork server's child, before this) the root of what the sandbox sees in
/// /proc/self/cgroup.
fn unshare_namespaces(new_network: bool) -> Step {
    let mut namespaces = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP;
    if new_network {
        namespaces |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare of a single-threaded process.
    let status = unsafe { libc::unshare(namespaces) };
    check(
        status.into(),
        "user-namespace",
        "unshare(user, mount, pid, ipc, uts, cgroup, network)",
    )?;
    Ok(())
}

/// Maps the outside uid and gid, and nothing else, to the unprivileged id inside, with
/// setgroups denied (so no process can drop a group to get past a group's denial).
fn map_user_and_group(plan: &Plan, outside: (libc::uid_t, libc::gid_t)) -> Step {
    write_file("/proc/self/setgroups", "deny")?;
    write_file(
        "/proc/self/uid_map",
        &format!("{} {} 1\n", plan.inside_id, outside.0),
    )?;
    write_file(
        "/proc/self/gid_map",
        &format!("{} {} 1\n", plan.inside_id, outside.1),
    )
}

/// Forks the namespace's init (pid 1 of the new pid namespace), then watches it.
fn start_init_and_watch(plan: &Plan) -> Step<i32> {
    // The init learns that the launcher died through this pipe's other end closing.
    let alive = pipe()?;
    // The launcher learns that the init took the run plan off the socket (or died) through
    // this one's: until then the socket is the init's to read.
    let handoff = pipe()?;
    // SAFETY: fork of a single-threaded process; the child runs only its own code.
    let init = unsafe { libc::fork() };
    check(init.into(), "pid-namespace", "fork of the namespace's init")?;
    if init == 0 {
        // SAFETY: closing the child's copies of the ends it does not use.
        unsafe {
            libc::close(alive[1]);
            libc::close(handoff[0]);
        }
        init_main(plan, alive[0], handoff[1]);
    }
    // SAFETY: closing our copies of the ends we do not use.
    unsafe {
        libc::close(alive[0]);
        libc::close(handoff[1]);
    }
    watch(init, handoff[0])
}

/// A close-on-exec pipe: [read end, write end].
fn pipe() -> Step<[RawFd; 2]> {
    let mut ends = [0 as RawFd; 2];
    // SAFETY: a two-element array for pipe2.
    let status = unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) };
    check(status.into(), "launcher", "pipe2")?;
    Ok(ends)
}

fn write_file(path: &str, content: &str) -> Step {
    std::fs::write(path, content)
        .map_err(|error| Failure::new("user-namespace", format!("writing {path}: {error}")))
}

/// Waits for the init, killing it when the supervisor asks (or is gone); reports its end.
/// Until `handoff` closes (the init read the run plan, or died) the socket is left alone.
fn watch(init: libc::pid_t, handoff: RawFd) -> Step<i32> {
    // The run's output belongs to the program alone.
    // SAFETY: closing our own standard output and error.
    unsafe {
        libc::close(1);
        libc::close(2);
    }
    let pidfd = sys::pidfd_open(init)
        .map_err(|error| Failure::new("launcher", format!("pidfd_open: {error}")))?;
    wait_for_handoff(pidfd, handoff);
    // SAFETY: our own descriptor, not used again.
    unsafe { libc::close(handoff) };
    kill_when_asked(init, pidfd);
    let usage = reap_init(init)?;
    let micros = |time: libc::timeval| time.tv_sec as u64 * 1_000_000 + time.tv_usec as u64;
    report(
        SOCKET,
        &Report::Done {
            user_us: micros(usage.ru_utime),
            system_us: micros(usage.ru_stime),
            max_rss_kib: usage.ru_maxrss.max(0) as u64,
        },
    );
    Ok(0)
}

/// Waits until the init has taken the run plan off the socket (its end of `handoff` closes)
/// or has ended: until then the socket is the init's to read.
fn wait_for_handoff(pidfd: RawFd, handoff: RawFd) {
    loop {
        let mut fds = [pidfd, handoff].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: a valid array of two pollfd.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready > 0 {
            break;
        }
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
}

/// Waits for the init to end, killing it (SIGKILL, which ends the whole pid namespace) once
/// the supervisor sends `k`, closes the socket or cannot be read.
fn kill_when_asked(init: libc::pid_t, pidfd: RawFd) {
    let mut killed = false;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if killed { -1 } else { SOCKET },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: a valid array of two pollfd.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // SAFETY: kill of our own unreaped child.
            unsafe { libc::kill(init, libc::SIGKILL) };
            break;
        }
        if fds[0].revents != 0 {
            break;
        }
        if fds[1].revents != 0 {
            let mut byte = [0u8; 1];
            // SAFETY: a one-byte buffer.
            let read = unsafe { libc::read(SOCKET, byte.as_mut_ptr().cast(), 1) };
            if read == 1 && byte[0] != b'k' {
                continue;
            }
            // `k`, end of file or an error: the supervisor wants the run ended.
            // SAFETY: kill of our own child, which cannot have been reaped yet.
            unsafe { libc::kill(init, libc::SIGKILL) };
            killed = true;
        }
    }
}

/// Reaps the init (its pid namespace is gone then), with the resource use of every process
/// of the run it reaped.
fn reap_init(init: libc::pid_t) -> Step<libc::rusage> {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to status and usage.
        let reaped = unsafe { libc::wait4(init, &mut status, libc::__WALL, &mut usage) };
        if reaped == init {
            return Ok(usage);
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Err(Failure::last("launcher", "wait4 of the init"));
        }
    }
}

/// Reaps any one process of the namespace: its pid (negative: none, or an error), status and
/// resource use.
fn reap_any() -> (libc::pid_t, libc::c_int, libc::rusage) {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid status and usage pointers.
    let reaped = unsafe { libc::wait4(-1, &mut status, libc::__WALL, &mut usage) };
    (reaped, status, usage)
}

/// Reaps every process left in the namespace (they were all killed), counting each.
fn reap_all(seen: &mut seen::Seen) {
    loop {
        let (reaped, status, usage) = reap_any();
        if reaped > 0 {
            seen.reaped(status, &usage);
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// The namespace's init: builds the root, waits for the run plan, mounts the run's files,
/// starts the program, reaps (counting the limits it sees hit, see [`seen`]), reports,
/// exits.
fn init_main(plan: &Plan, alive: RawFd, handoff: RawFd) -> ! {
    become_init(alive);
    let mut armed =
        or_report_and_exit(mounts::build_root(plan).and_then(|proc| confine::arm(plan, proc)));
    // Prepared: from here on the sandbox waits for its one run.
    let Some((run, files)) = or_report_and_exit(read_run()) else {
        sys::exit_now(0)
    };
    // SAFETY: closing our end tells the launcher the socket is its own again.
    unsafe { libc::close(handoff) };
    or_report_and_exit(
        mounts::mount_run(plan, &run, &files).and_then(|()| armed.finish(plan, &run)),
    );
    let mut seen = seen::Seen::new(plan);
    let program = sys::spawn_until_exec(&mut || {
        // SAFETY: closing the pipe end the program must not hold (in its own table).
        unsafe { libc::close(alive) };
        confine::confine_and_exec(plan, &run, &armed)
    });
    // The child ran in this process's memory: the report channel it chose is its own.
    REPORTS.store(SOCKET, Ordering::SeqCst);
    let program = or_report_and_exit(program);
    // The program's process has exec'd (or failed); the init needs no ruleset.
    drop(armed);
    // SAFETY: closing our standard output and error (the program's own copies stay), and
    // making this process undumpable so that the program cannot reach it through /proc.
    unsafe {
        libc::close(1);
        libc::close(2);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    reap_until_program_ends(plan, &run, program, &mut seen)
}

/// The init's first steps: it dies with the launcher, and shows a neutral name.
fn become_init(alive: RawFd) {
    // SAFETY: prctl and poll on our own descriptor.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // A neutral name in /proc/1/comm (the command line is the fork server's, which holds
        // no host path either).
        libc::prctl(libc::PR_SET_NAME, c"sf-sandbox-init".as_ptr(), 0, 0, 0);
        let mut parent = libc::pollfd {
            fd: alive,
            events: libc::POLLIN,
            revents: 0,
        };
        // The launcher died before the death signal was set: stop here.
        if libc::poll(&mut parent, 1, 0) != 0 {
            sys::exit_now(125);
        }
    }
}

/// What a step of the init answered; a failed step is reported and ends the init (126),
/// and with it the sandbox.
fn or_report_and_exit<T>(step: Step<T>) -> T {
    match step {
        Ok(value) => value,
        Err(failure) => {
            report(SOCKET, &fail(failure));
            sys::exit_now(126);
        }
    }
}

/// Reaps every process of the namespace until the program's first process ends, then
/// reports how the run ended and exits: exiting kills every process left in the namespace.
fn reap_until_program_ends(
    plan: &Plan,
    run: &RunPlan,
    program: libc::pid_t,
    seen: &mut seen::Seen,
) -> ! {
    loop {
        let (reaped, status, usage) = reap_any();
        if reaped > 0 {
            seen.reaped(status, &usage);
        }
        if reaped == program {
            report_program_end(plan, run, seen, status);
            // Exiting kills every process left in the namespace.
            sys::exit_now(0);
        }
        if reaped < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            sys::exit_now(0);
        }
    }
}

/// Reports the end of the program's first process: the results file its command asked for
/// (read once every other process has ended), the limits seen hit, and its exit or signal.
fn report_program_end(plan: &Plan, run: &RunPlan, seen: &mut seen::Seen, status: libc::c_int) {
    if let Some((path, max_bytes)) = run
        .command
        .as_ref()
        .and_then(|command| command.results.as_ref())
    {
        // Nothing of the run may change the file while it is read: every other process of
        // the namespace ends first (pid 1 is never signalled by -1).
        // SAFETY: signalling every other process of this pid namespace.
        unsafe { libc::kill(-1, libc::SIGKILL) };
        reap_all(seen);
        let results = results::read(&plan.scratch_dir, path, *max_bytes);
        report(SOCKET, &Report::Results(results));
    }
    for hit in seen.reports() {
        report(SOCKET, &hit);
    }
    let line = if libc::WIFEXITED(status) {
        Report::Exit {
            code: libc::WEXITSTATUS(status),
        }
    } else {
        Report::Signal {
            signal: libc::WTERMSIG(status),
        }
    };
    report(SOCKET, &line);
}
