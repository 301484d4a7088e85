//! The fork server ("zygote"): one long-lived, single-threaded launcher per Executor that
//! forks one per-run launcher per request, so that a run pays for a fork instead of an exec,
//! the dynamic loader and the start-up of a Rust program.
//!
//! Its standard input is one end of a `SOCK_SEQPACKET` socket pair (the control socket); each
//! message is one datagram:
//!
//! 1. host → zygote, once: `init <join>` (`join` is `0` or `1`), with the shared empty
//!    network namespace's descriptor attached (SCM_RIGHTS) when `join` is `1`. The zygote
//!    enters that namespace, makes itself undumpable, and answers `ready`, or a report line
//!    `fail <mechanism> <detail>` and exits. It keeps the identity it was started with (root,
//!    when sf runs as root): no other host user may signal or trace it.
//! 2. host → zygote, per run: `run <id> <groups>` with `3 + groups` descriptors attached:
//!    the launcher's end of the run's report socket, the write ends of its stdout and stderr
//!    pipes, then one open `tasks` (v1) or `cgroup.procs` (v2) file per control group the run
//!    joins. `<id>` is the
//!    host uid and gid the sandbox runs as (one of its own, given by the host), or `-` to keep
//!    the zygote's (when sf is not root). The zygote forks; the child moves itself into each
//!    control group, gives up root for the id (`setgroups([])`, `setresgid`, `setresuid`),
//!    moves the first three descriptors to 0, 1, 2, closes every other descriptor (the
//!    control socket, the pidfds of other runs), sets its parent-death signal and runs the
//!    ordinary launcher code ([`super::run_plan`]) on them. The zygote closes its copies of the
//!    descriptors at once, so no request's descriptors ever reach another request, and
//!    answers `forked <pid>` with a pidfd of the child attached (opened before the zygote could
//!    reap the child, so it names that process and no other), or `fail …`.
//!
//! The zygote reaps its children (it polls their pidfds). When the host's end of the control
//! socket closes (the Executor was dropped or sf died) it gives its children a moment to end
//! (a launcher whose socket closed ends its sandbox and exits), kills the rest, reaps every
//! one and exits: no launcher outlives it, not even as a zombie.
//!
//! Started with [`ONCE_ARGUMENT`] instead, the program serves exactly one request and does
//! not fork: it reads the same two messages (`init`, then `run`, sent together, with no
//! answer awaited), does the fork server's once-only steps and then its child's steps itself,
//! and runs the launcher code. That is an Executor's first run: a fork server is pure cost
//! for a single run (an exec, a fork and two round trips), and an Executor cannot know
//! whether a second run will come; the second run starts the fork server. A failure of those
//! steps is reported on the run's socket, as any launcher failure is.

use std::os::fd::RawFd;

use super::Prepared;
use super::sys::{self, Failure, Step, check};
use crate::plan::Report;

/// The argument that makes the launcher a fork server.
pub const ARGUMENT: &str = "--zygote";

/// The argument that makes the launcher serve one fork server request itself.
pub const ONCE_ARGUMENT: &str = "--once";

/// The control socket (the zygote's standard input).
const CONTROL: RawFd = 0;

/// The largest control message.
const MESSAGE_BYTES: usize = 256;

/// The fork server's entry point. Never returns.
pub fn main() -> ! {
    std::panic::set_hook(Box::new(|_| sys::exit_now(126)));
    // Nothing the host left open may reach a run.
    sys::close_range(3, u32::MAX);
    let prepared = match receive().and_then(|message| enter(&message)) {
        Ok(prepared) => {
            send(b"ready", None);
            prepared
        }
        Err(failure) => {
            send(fail_line(failure).as_bytes(), None);
            sys::exit_now(126)
        }
    };
    serve(prepared)
}

/// The entry point with [`ONCE_ARGUMENT`]: one request, served by this process itself.
/// Never returns.
pub fn once() -> ! {
    std::panic::set_hook(Box::new(|_| sys::exit_now(126)));
    sys::close_range(3, u32::MAX);
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    // Until the run's descriptors are in place there is nowhere to report to: a launcher
    // that ends without a report is a failure the supervisor names itself.
    let Ok(init) = receive() else {
        sys::exit_now(126)
    };
    let request = match receive().and_then(|message| {
        let request = parse_run(&message);
        if request.is_err() {
            close_all(&message.fds);
        }
        request
    }) {
        Ok(request) => request,
        Err(_) => sys::exit_now(126),
    };
    child_main(&request, enter(&init), parent)
}

fn fail_line(failure: Failure) -> String {
    Report::Fail {
        mechanism: failure.mechanism.to_owned(),
        detail: failure.detail,
    }
    .encode()
}

/// Sends one datagram on the control socket, with `fd` attached if given. Errors are
/// ignored: the host judges a missing answer itself.
fn send(bytes: &[u8], fd: Option<RawFd>) {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds;
    let controls: Vec<ControlMessage<'_>> = match fd {
        Some(fd) => {
            fds = [fd];
            vec![ControlMessage::ScmRights(&fds)]
        }
        None => Vec::new(),
    };
    loop {
        match sendmsg::<()>(
            CONTROL,
            &[std::io::IoSlice::new(bytes)],
            &controls,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return,
        }
    }
}

/// One received datagram: its bytes (empty at end of file) and the descriptors attached.
struct Message {
    bytes: Vec<u8>,
    fds: Vec<RawFd>,
}

fn receive() -> Step<Message> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut buffer = [0u8; MESSAGE_BYTES];
    let mut cmsg = nix::cmsg_space!([RawFd; 8]);
    loop {
        let mut iov = [std::io::IoSliceMut::new(&mut buffer)];
        let message = match recvmsg::<()>(
            CONTROL,
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(message) => message,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(error) => {
                return Err(Failure::new(
                    "launcher",
                    format!("reading the control socket: {error}"),
                ));
            }
        };
        let mut fds = Vec::new();
        if let Ok(controls) = message.cmsgs() {
            for control in controls {
                if let ControlMessageOwned::ScmRights(received) = control {
                    fds.extend(received);
                }
            }
        }
        let truncated = message.flags.contains(MsgFlags::MSG_CTRUNC)
            || message.flags.contains(MsgFlags::MSG_TRUNC);
        let length = message.bytes;
        if truncated {
            close_all(&fds);
            return Err(Failure::new("launcher", "a control message was truncated"));
        }
        return Ok(Message {
            bytes: buffer[..length].to_vec(),
            fds,
        });
    }
}

fn close_all(fds: &[RawFd]) {
    for fd in fds {
        // SAFETY: descriptors just received and owned by no one else.
        unsafe { libc::close(*fd) };
    }
}

/// Enters the network namespace as the init message says, once for every run.
fn enter(message: &Message) -> Step<Prepared> {
    let text = String::from_utf8_lossy(&message.bytes).into_owned();
    let mut words = text.split(' ');
    let (Some("init"), Some(join), None) = (words.next(), words.next(), words.next()) else {
        close_all(&message.fds);
        return Err(Failure::new(
            "launcher",
            format!("an unknown init message {text:?}"),
        ));
    };
    let join = match join {
        "1" => true,
        "0" => false,
        _ => {
            close_all(&message.fds);
            return Err(Failure::new("launcher", "the init message's join flag"));
        }
    };
    if join {
        let [fd] = message.fds[..] else {
            close_all(&message.fds);
            return Err(Failure::new(
                "network-namespace",
                "no single namespace descriptor came",
            ));
        };
        // SAFETY: setns on a received descriptor; it is closed right after.
        let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
        // SAFETY: our own descriptor, not used again.
        unsafe { libc::close(fd) };
        check(
            rc.into(),
            "network-namespace",
            "setns into the shared network namespace",
        )?;
    } else {
        close_all(&message.fds);
    }
    // Nothing may trace the fork server or read its memory through /proc; each forked
    // launcher sets the flag again for the few steps that need /proc/self to be its own.
    // SAFETY: prctl with integer arguments.
    let status = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    check(status.into(), "launcher", "PR_SET_DUMPABLE")?;
    Ok(Prepared {
        network_joined: join,
    })
}

/// One forked launcher not yet reaped.
struct Child {
    pid: libc::pid_t,
    pidfd: RawFd,
}

/// How long the children have, once the host is gone, to end on their own before they are
/// killed: a launcher whose socket closed ends its sandbox (and reaps its init) at once.
const SHUTDOWN_GRACE_MS: libc::c_int = 1000;

/// Serves requests until the control socket closes. Never returns.
fn serve(prepared: Prepared) -> ! {
    let me = std::process::id() as libc::pid_t;
    let mut children: Vec<Child> = Vec::new();
    loop {
        let mut fds: Vec<libc::pollfd> = std::iter::once(CONTROL)
            .chain(children.iter().map(|child| child.pidfd))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: a valid array of pollfd of the given length.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            shut_down(children);
        }
        reap_ended(&mut children, &fds[1..]);
        if fds[0].revents == 0 {
            continue;
        }
        let message = match receive() {
            Ok(message) => message,
            Err(_) => shut_down(children),
        };
        if message.bytes.is_empty() && message.fds.is_empty() {
            // The host's end closed: the Executor is gone.
            shut_down(children);
        }
        match fork_run(&message, prepared, me) {
            Ok(child) => {
                send(
                    format!("forked {}", child.pid).as_bytes(),
                    Some(child.pidfd),
                );
                children.push(child);
            }
            Err(failure) => send(fail_line(failure).as_bytes(), None),
        }
        // This request's descriptors stay with its child only.
        close_all(&message.fds);
    }
}

/// Reaps the children whose pidfd (in `polled`, in `children`' order) became readable.
fn reap_ended(children: &mut Vec<Child>, polled: &[libc::pollfd]) {
    let ended: Vec<usize> = polled
        .iter()
        .enumerate()
        .filter(|(_, fd)| fd.revents != 0)
        .map(|(index, _)| index)
        .collect();
    for index in ended.into_iter().rev() {
        let child = children.swap_remove(index);
        reap(&child);
    }
}

fn reap(child: &Child) {
    let mut status = 0;
    // SAFETY: waitpid of our own child (it has ended, or was just killed); then closing our
    // own pidfd.
    unsafe {
        while libc::waitpid(child.pid, &mut status, libc::__WALL) < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        libc::close(child.pidfd);
    }
}

/// Gives the children a moment to end, kills the rest, reaps them all and exits.
fn shut_down(mut children: Vec<Child>) -> ! {
    let mut left_ms = SHUTDOWN_GRACE_MS;
    while !children.is_empty() && left_ms > 0 {
        let mut fds: Vec<libc::pollfd> = children
            .iter()
            .map(|child| libc::pollfd {
                fd: child.pidfd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let began = std::time::Instant::now();
        // SAFETY: a valid array of pollfd of the given length.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, left_ms) };
        if ready <= 0
            && !(ready < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted)
        {
            break;
        }
        reap_ended(&mut children, &fds);
        left_ms -= began.elapsed().as_millis().min(left_ms as u128) as libc::c_int;
    }
    for child in &children {
        sys::pidfd_kill(child.pidfd);
    }
    for child in &children {
        reap(child);
    }
    sys::exit_now(0)
}

/// What a `run` request asks for.
struct RunRequest {
    /// The host uid and gid the launcher becomes (`None`: keep the zygote's).
    id: Option<u32>,
    socket: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    /// The `tasks` or `cgroup.procs` files of the run's control groups.
    groups: Vec<RawFd>,
}

fn parse_run(message: &Message) -> Step<RunRequest> {
    let text = std::str::from_utf8(&message.bytes)
        .map_err(|_| Failure::new("launcher", "an unknown request"))?;
    let mut words = text.split(' ');
    let (Some("run"), Some(id), Some(groups), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(Failure::new(
            "launcher",
            format!("an unknown request {text:?}"),
        ));
    };
    let id = match id {
        "-" => None,
        id => Some(
            id.parse::<u32>()
                .map_err(|_| Failure::new("identity", "the request's id"))?,
        ),
    };
    let groups: usize = groups
        .parse()
        .map_err(|_| Failure::new("launcher", "the request's group count"))?;
    let [socket, stdout, stderr, ref cgroups @ ..] = message.fds[..] else {
        return Err(Failure::new(
            "launcher",
            "a request needs the run's three descriptors",
        ));
    };
    if cgroups.len() != groups {
        return Err(Failure::new(
            "launcher",
            "a request's descriptors do not match its group count",
        ));
    }
    Ok(RunRequest {
        id,
        socket,
        stdout,
        stderr,
        groups: cgroups.to_vec(),
    })
}

/// Forks the launcher of one run.
fn fork_run(message: &Message, prepared: Prepared, me: libc::pid_t) -> Step<Child> {
    let request = parse_run(message)?;
    if let Some(id) = request.id {
        // SAFETY: credential queries.
        let root = unsafe { libc::geteuid() == 0 && libc::getuid() == 0 };
        if id == 0 || !root {
            return Err(Failure::new(
                "identity",
                format!(
                    "the sandbox cannot run as host uid {id}: it is root, or the fork server \
                     is not"
                ),
            ));
        }
    }
    // SAFETY: fork of a single-threaded process; the child runs only the launcher's code.
    let pid = unsafe { libc::fork() };
    check(pid.into(), "launcher", "fork of a run's launcher")?;
    if pid == 0 {
        child_main(&request, Ok(prepared), me);
    }
    match sys::pidfd_open(pid) {
        Ok(pidfd) => Ok(Child { pid, pidfd }),
        Err(error) => {
            // SAFETY: our own unreaped child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
            }
            Err(Failure::new("launcher", format!("pidfd_open: {error}")))
        }
    }
}

/// The forked launcher (or the one that serves its one request itself, whose once-only steps
/// `prepared` reports): joins the run's control groups, becomes the run's own host user, then
/// holds the request's descriptors at 0, 1, 2 and nothing else and runs the ordinary launcher
/// code; a failure is reported on the run's socket. `parent` is the process whose end ends
/// this one. Never returns.
fn child_main(request: &RunRequest, prepared: Step<Prepared>, parent: libc::pid_t) -> ! {
    let joined = prepared.and_then(|prepared| {
        join_groups(&request.groups)?;
        become_id(request.id)?;
        Ok(prepared)
    });
    // SAFETY: descriptor moves and prctl on this process; the received descriptors are all
    // above 2 (0–2 of the zygote are open), so no dup2 overwrites another one's source.
    unsafe {
        if libc::dup2(request.socket, 0) < 0
            || libc::dup2(request.stdout, 1) < 0
            || libc::dup2(request.stderr, 2) < 0
        {
            sys::exit_now(126);
        }
        sys::close_range(3, u32::MAX);
    }
    let prepared = match joined {
        Ok(prepared) => prepared,
        Err(failure) => {
            super::report(0, &super::fail(failure));
            sys::exit_now(126);
        }
    };
    // SAFETY: prctl and getppid on this process.
    unsafe {
        // If the parent goes away, so does this run (and with it, its init). Set after the
        // credential change, which clears it.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            sys::exit_now(125);
        }
        // /proc/self must be this process's own for the uid map (see the zygote's init).
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    super::run_plan(Some(prepared))
}

/// Moves this process into each control group whose `tasks` or `cgroup.procs` file is open at
/// `groups` (opened by the host: the kernel checks a write against the opener's credentials).
fn join_groups(groups: &[RawFd]) -> Step {
    for fd in groups {
        // SAFETY: a write of a valid buffer to a received descriptor.
        let written = unsafe { libc::write(*fd, b"0\n".as_ptr().cast(), 2) };
        if written != 2 {
            return Err(Failure::last("cgroup", "joining the run's control group"));
        }
    }
    Ok(())
}

/// Gives up root for `id` (uid and gid, no supplementary groups), when given.
pub(super) fn become_id(id: Option<u32>) -> Step {
    let Some(id) = id else {
        return Ok(());
    };
    // SAFETY: credential changes of this single-threaded process.
    unsafe {
        check(
            libc::setgroups(0, std::ptr::null()).into(),
            "identity",
            "setgroups",
        )?;
        check(libc::setresgid(id, id, id).into(), "identity", "setresgid")?;
        check(libc::setresuid(id, id, id).into(), "identity", "setresuid")?;
        if libc::geteuid() != id || libc::getuid() != id || libc::getegid() != id {
            return Err(Failure::new(
                "identity",
                "the credential change did not hold",
            ));
        }
    }
    Ok(())
}
