//! The fork server ("zygote"): one long-lived, single-threaded launcher per Executor that
//! forks one per-run launcher per request, so that a run pays for a fork instead of an exec,
//! the dynamic loader and the start-up of a Rust program.
//!
//! Its standard input is one end of a `SOCK_SEQPACKET` socket pair (the control socket); each
//! message is one datagram:
//!
//! 1. host → zygote, once: `init <join> <outside-id>` (`join` is `0` or `1`), with the shared
//!    empty network namespace's descriptor attached (SCM_RIGHTS) when `join` is `1`. The
//!    zygote enters that namespace and, when it runs as root, gives up root for the outside
//!    id (`setgroups([])`, `setresgid`, `setresuid`) — once, before it ever forks — and answers
//!    `ready`, or a report line `fail <mechanism> <detail>` and exits.
//! 2. host → zygote, per run: `run` with exactly three descriptors attached: the launcher's
//!    end of the run's report socket, the write ends of its stdout and stderr pipes. The zygote
//!    forks; the child moves them to 0, 1, 2, closes every other descriptor (the control
//!    socket, the pidfds of other runs), sets its parent-death signal and runs the ordinary
//!    launcher code ([`super::run_plan`]) on them. The zygote closes its copies of the three
//!    at once, so no request's descriptors ever reach another request, and answers
//!    `forked <pid>` with a pidfd of the child attached (opened before the zygote could reap
//!    the child, so it names that process and no other), or `fail …`.
//!
//! The zygote reaps its children (it polls their pidfds) and exits when the host's end of
//! the control socket closes (the Executor was dropped or sf died); its children then die of
//! their parent-death signal, and their inits of theirs.

use std::os::fd::RawFd;

use super::Prepared;
use super::sys::{self, Failure, Step, check};
use crate::plan::Report;

/// The argument that makes the launcher a fork server.
pub const ARGUMENT: &str = "--zygote";

/// The control socket (the zygote's standard input).
const CONTROL: RawFd = 0;

/// The largest control message.
const MESSAGE_BYTES: usize = 256;

/// The fork server's entry point. Never returns.
pub fn main() -> ! {
    std::panic::set_hook(Box::new(|_| sys::exit_now(126)));
    // Nothing the host left open may reach a run.
    sys::close_range(3, u32::MAX);
    let prepared = match init() {
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
    let mut cmsg = nix::cmsg_space!([RawFd; 4]);
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

/// Reads the init message; enters the network namespace and gives up root as it says.
fn init() -> Step<Prepared> {
    let message = receive()?;
    let text = String::from_utf8_lossy(&message.bytes).into_owned();
    let mut words = text.split(' ');
    let (Some("init"), Some(join), Some(outside), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        close_all(&message.fds);
        return Err(Failure::new(
            "launcher",
            format!("an unknown init message {text:?}"),
        ));
    };
    let outside: u32 = outside
        .parse()
        .map_err(|_| Failure::new("launcher", "the init message's outside id"))?;
    let join = match join {
        "1" => true,
        "0" => false,
        _ => return Err(Failure::new("launcher", "the init message's join flag")),
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
    // SAFETY: credential changes of this single-threaded process.
    unsafe {
        if libc::geteuid() == 0 {
            if outside == 0 {
                return Err(Failure::new(
                    "identity",
                    "the sandbox would run as host root; configure a non-zero outside id",
                ));
            }
            check(
                libc::setgroups(0, std::ptr::null()).into(),
                "identity",
                "setgroups",
            )?;
            check(
                libc::setresgid(outside, outside, outside).into(),
                "identity",
                "setresgid",
            )?;
            check(
                libc::setresuid(outside, outside, outside).into(),
                "identity",
                "setresuid",
            )?;
            // The credential change cleared the dumpable flag; it stays clear in the zygote
            // (nothing of the outside user may trace it). Each forked launcher sets it again
            // for the few steps that need /proc/self to be its own.
        }
        if libc::geteuid() == 0 || libc::getuid() == 0 {
            return Err(Failure::new("identity", "the zygote is still root"));
        }
    }
    Ok(Prepared {
        network_joined: join,
    })
}

/// One forked launcher not yet reaped.
struct Child {
    pid: libc::pid_t,
    pidfd: RawFd,
}

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
            sys::exit_now(1);
        }
        // Reap the children that ended.
        let ended: Vec<usize> = fds[1..]
            .iter()
            .enumerate()
            .filter(|(_, fd)| fd.revents != 0)
            .map(|(index, _)| index)
            .collect();
        for index in ended.into_iter().rev() {
            let child = children.swap_remove(index);
            let mut status = 0;
            // SAFETY: waitpid of our own child, which has ended (its pidfd is readable).
            unsafe {
                libc::waitpid(child.pid, &mut status, libc::__WALL);
                libc::close(child.pidfd);
            }
        }
        if fds[0].revents == 0 {
            continue;
        }
        let message = match receive() {
            Ok(message) => message,
            Err(_) => sys::exit_now(0),
        };
        if message.bytes.is_empty() && message.fds.is_empty() {
            // The host's end closed: the Executor is gone. Our children die with us.
            sys::exit_now(0);
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

/// Forks the launcher of one run.
fn fork_run(message: &Message, prepared: Prepared, me: libc::pid_t) -> Step<Child> {
    if message.bytes != b"run" {
        return Err(Failure::new("launcher", "an unknown request"));
    }
    let [socket, stdout, stderr] = message.fds[..] else {
        return Err(Failure::new(
            "launcher",
            "a request needs exactly three descriptors",
        ));
    };
    // SAFETY: fork of a single-threaded process; the child runs only the launcher's code.
    let pid = unsafe { libc::fork() };
    check(pid.into(), "launcher", "fork of a run's launcher")?;
    if pid == 0 {
        child_main(socket, stdout, stderr, prepared, me);
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

/// The forked launcher: the request's descriptors at 0, 1, 2 and nothing else, then the
/// ordinary launcher code. Never returns.
fn child_main(
    socket: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    prepared: Prepared,
    zygote: libc::pid_t,
) -> ! {
    // SAFETY: descriptor moves and prctl on this process; the received descriptors are all
    // above 2 (0–2 of the zygote are open), so no dup2 overwrites another one's source.
    unsafe {
        if libc::dup2(socket, 0) < 0 || libc::dup2(stdout, 1) < 0 || libc::dup2(stderr, 2) < 0 {
            sys::exit_now(126);
        }
        sys::close_range(3, u32::MAX);
        // If the zygote goes away, so does this run (and with it, its init).
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != zygote {
            sys::exit_now(125);
        }
        // /proc/self must be this process's own for the uid map (see the zygote's init).
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    super::run_plan(Some(prepared))
}
