//! The host's side of the fork server (see `launcher::zygote` for the protocol): started
//! lazily by the second run, restarted when it has died, stopped when the Executor is dropped.
//! The first run's launcher serves its one request itself ([`ForkServer::run_once`]); it is
//! started ahead, when the Executor is configured ([`FirstLauncher`]), so that its exec and
//! start-up overlap what the host does before the run.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, setsockopt, socketpair, sockopt,
};
use nix::sys::time::TimeVal;
use sf_contracts::ExecutorError;

use crate::plan::Report;

/// How long the fork server may take to answer one message before it is taken for dead.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopped fork server has to exit on its own before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A launcher process started, with the socket that talks to it, or why it did not start.
type Spawned = Result<(OwnedFd, Child), ExecutorError>;

/// The fork server of one Executor.
#[derive(Debug)]
pub(crate) struct ForkServer {
    launcher: PathBuf,
    network: Option<OwnedFd>,
    running: Mutex<Option<Running>>,
    first: Mutex<Option<FirstLauncher>>,
}

/// A launcher started ahead for the first run (`--once`, waiting for its two messages), by a
/// thread of its own that stays until this is dropped: a launcher's parent-death signal names
/// the thread that started it, so that thread must outlive the run, whichever thread runs.
#[derive(Debug)]
pub(crate) struct FirstLauncher {
    /// What the thread started, until a run takes it.
    started: Mutex<Option<mpsc::Receiver<Spawned>>>,
    /// Dropped to end the thread.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FirstLauncher {
    /// Starts `launcher` with `--once` on a new thread (none when no thread can be made: the
    /// first run then starts its own launcher).
    pub fn start(launcher: PathBuf) -> Option<Self> {
        let (started_tx, started) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sf-sandbox-first".into())
            .spawn(move || {
                let _ = started_tx.send(spawn(&launcher, crate::launcher::ONCE_ARGUMENT));
                // Until the Executor is dropped (nothing is ever sent).
                let _ = stopped.recv();
            })
            .ok()?;
        Some(Self {
            started: Mutex::new(Some(started)),
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The launcher, the first time it is asked for, when it was started and has not ended.
    /// The thread stays: it is the launcher's parent until the Executor is dropped.
    fn take(&self) -> Option<(OwnedFd, Child)> {
        let started = self
            .started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        let (control, mut child) = started.recv().ok()?.ok()?;
        if matches!(child.try_wait(), Ok(None)) {
            Some((control, child))
        } else {
            reap(child);
            None
        }
    }
}

impl Drop for FirstLauncher {
    fn drop(&mut self) {
        // Not used: ended and reaped (killed: it holds nothing of a run).
        let unused = self
            .started
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Ok((_control, child))) = unused.and_then(|started| started.recv().ok()) {
            reap(child);
        }
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Kills and reaps a launcher that is this process's child.
fn reap(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[derive(Debug)]
struct Running {
    child: Child,
    control: OwnedFd,
}

/// Why a request got no pidfd.
enum Failed {
    /// The fork server is gone or does not answer: start another.
    Dead(String),
    /// It answered with a failure: report it.
    Refused(ExecutorError),
}

fn unavailable(reason: String) -> ExecutorError {
    ExecutorError::Unavailable {
        mechanism: "launcher".to_owned(),
        reason,
    }
}

impl ForkServer {
    /// A fork server that will run `launcher` and enter `network` (when given), its first
    /// run served by `first` when given. Starts nothing yet.
    pub fn new(launcher: PathBuf, network: Option<OwnedFd>, first: Option<FirstLauncher>) -> Self {
        Self {
            launcher,
            network,
            running: Mutex::new(None),
            first: Mutex::new(first),
        }
    }

    /// Whether the fork server is running (it has not ended, however it ended). A launcher
    /// it forked earlier dies with it, of its parent-death signal.
    pub fn is_running(&self) -> bool {
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        running
            .as_mut()
            .is_some_and(|server| matches!(server.child.try_wait(), Ok(None)))
    }

    /// The host pid of the fork server, if one is running.
    pub fn pid(&self) -> Option<u32> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        running.as_ref().map(|running| running.child.id())
    }

    /// Has the fork server fork a launcher for one run, which joins the control groups whose
    /// `tasks` or `cgroup.procs` files are open at `groups`, becomes host uid and gid `id` (when given),
    /// and gets `socket` as its standard input and `stdout`, `stderr` as its standard output
    /// and error (the caller's copies are closed here). Returns a pidfd of that launcher.
    /// Starts (or restarts, once) the fork server when it is not running.
    pub fn fork_run(
        &self,
        socket: OwnedFd,
        stdout: OwnedFd,
        stderr: OwnedFd,
        id: Option<u32>,
        groups: &[OwnedFd],
    ) -> Result<OwnedFd, ExecutorError> {
        let (text, fds) = run_request(&socket, &stdout, &stderr, id, groups);
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut last = String::new();
        for _ in 0..2 {
            if let Some(server) = running.as_mut()
                && !matches!(server.child.try_wait(), Ok(None))
            {
                stop(running.take().expect("checked above"));
            }
            if running.is_none() {
                *running = Some(self.start()?);
            }
            let server = running.as_mut().expect("started above");
            match request(server, text.as_bytes(), &fds) {
                Ok(pidfd) => return Ok(pidfd),
                Err(Failed::Refused(error)) => return Err(error),
                Err(Failed::Dead(reason)) => {
                    last = reason;
                    stop(running.take().expect("present above"));
                }
            }
        }
        Err(unavailable(format!(
            "the launcher's fork server ended before it forked the run: {last}"
        )))
    }

    /// Starts a launcher that serves the request of [`ForkServer::fork_run`] itself, without
    /// a fork server: the fork server's once-only steps and its child's steps, in one process,
    /// which is a child of this one (the caller reaps it). For an Executor's first run, which
    /// would otherwise pay for starting the fork server too. Returns a pidfd of the launcher and
    /// the launcher. Waits for no answer: a failure is reported on the run's socket.
    pub fn run_once(
        &self,
        socket: OwnedFd,
        stdout: OwnedFd,
        stderr: OwnedFd,
        id: Option<u32>,
        groups: &[OwnedFd],
    ) -> Spawned {
        let (text, fds) = run_request(&socket, &stdout, &stderr, id, groups);
        // Both messages wait in the socket's queue until the launcher reads them, after this
        // end is closed too.
        let hand_over = |control: OwnedFd| {
            self.send_init(&control)
                .and_then(|()| send(&control, text.as_bytes(), Some(&fds)))
        };
        let ahead = self
            .first
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(FirstLauncher::take);
        let (sent, child) = match ahead {
            Some((control, child)) => match hand_over(control) {
                Ok(()) => (Ok(()), child),
                // It ended before it took the run (killed, say): another one takes it.
                Err(_) => {
                    reap(child);
                    let (control, child) = spawn(&self.launcher, crate::launcher::ONCE_ARGUMENT)?;
                    (hand_over(control), child)
                }
            },
            None => {
                let (control, child) = spawn(&self.launcher, crate::launcher::ONCE_ARGUMENT)?;
                (hand_over(control), child)
            }
        };
        let pidfd = sent.and_then(|()| {
            crate::launcher::sys::pidfd_open(child.id() as libc::pid_t)
                .map_err(|error| format!("pidfd_open: {error}"))
        });
        match pidfd {
            // SAFETY: a pidfd just opened, owned by no one else.
            Ok(pidfd) => Ok((unsafe { OwnedFd::from_raw_fd(pidfd) }, child)),
            Err(reason) => {
                reap(child);
                Err(unavailable(format!(
                    "starting a launcher for one run: {reason}"
                )))
            }
        }
    }

    /// Sends the init message: whether to enter the shared network namespace, whose
    /// descriptor comes with it.
    fn send_init(&self, control: &OwnedFd) -> Result<(), String> {
        let init = format!("init {}", u8::from(self.network.is_some()));
        let fds = self.network.as_ref().map(|fd| [fd.as_raw_fd()]);
        send(control, init.as_bytes(), fds.as_ref().map(|f| &f[..]))
    }

    fn start(&self) -> Result<Running, ExecutorError> {
        let (control, child) = spawn(&self.launcher, crate::launcher::ZYGOTE_ARGUMENT)?;
        let server = Running { child, control };
        let answer = self
            .send_init(&server.control)
            .and_then(|()| receive(&server.control));
        match answer {
            Ok((text, fds)) if text == "ready" && fds.is_empty() => Ok(server),
            Ok((text, _)) => {
                stop(server);
                Err(match Report::parse(&text) {
                    Some(Report::Fail { mechanism, detail }) => ExecutorError::Unavailable {
                        mechanism,
                        reason: detail,
                    },
                    _ => unavailable(format!("the fork server answered {text:?}")),
                })
            }
            Err(reason) => {
                stop(server);
                Err(unavailable(format!(
                    "the fork server did not start: {reason}"
                )))
            }
        }
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        let running = self
            .running
            .get_mut()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(server) = running.take() {
            stop(server);
        }
    }
}

/// Starts the launcher program `launcher` with `argument`, its standard input one end of a
/// new control socket; the other end.
fn spawn(launcher: &PathBuf, argument: &str) -> Spawned {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|error| unavailable(format!("a socket pair: {error}")))?;
    let timeout = TimeVal::new(ANSWER_TIMEOUT.as_secs() as i64, 0);
    setsockopt(&ours, sockopt::ReceiveTimeout, &timeout)
        .map_err(|error| unavailable(format!("a receive timeout: {error}")))?;
    // A name without the host path: the sandbox's init is a fork of this process, and its
    // command line is readable inside.
    let child = Command::new(launcher)
        .arg0(crate::LAUNCHER_NAME)
        .arg(argument)
        .env_clear()
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| unavailable(format!("{}: {error}", launcher.display())))?;
    Ok((ours, child))
}

/// Closes the control socket, which makes the fork server exit, and reaps it (killing it if
/// it has not exited in time).
fn stop(server: Running) {
    let Running { mut child, control } = server;
    drop(control);
    if let Ok(pidfd) = crate::launcher::sys::pidfd_open(child.id() as libc::pid_t) {
        let mut fd = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; then closing our own pidfd.
        unsafe {
            libc::poll(&mut fd, 1, EXIT_GRACE.as_millis() as libc::c_int);
            libc::close(pidfd);
        }
    }
    if !matches!(child.try_wait(), Ok(Some(_))) {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The text and descriptors of a `run` request (see `launcher::zygote`).
fn run_request(
    socket: &OwnedFd,
    stdout: &OwnedFd,
    stderr: &OwnedFd,
    id: Option<u32>,
    groups: &[OwnedFd],
) -> (String, Vec<RawFd>) {
    let mut fds = vec![socket.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd()];
    fds.extend(groups.iter().map(AsRawFd::as_raw_fd));
    let text = format!(
        "run {} {}",
        id.map_or_else(|| "-".to_owned(), |id| id.to_string()),
        groups.len()
    );
    (text, fds)
}

fn request(server: &Running, text: &[u8], fds: &[RawFd]) -> Result<OwnedFd, Failed> {
    send(&server.control, text, Some(fds)).map_err(Failed::Dead)?;
    let (text, mut received) = receive(&server.control).map_err(Failed::Dead)?;
    if let Some(pid) = text.strip_prefix("forked ")
        && pid.parse::<u32>().is_ok()
        && received.len() == 1
    {
        return Ok(received.pop().expect("one descriptor"));
    }
    Err(match Report::parse(&text) {
        Some(Report::Fail { mechanism, detail }) => Failed::Refused(ExecutorError::Unavailable {
            mechanism,
            reason: detail,
        }),
        _ => Failed::Dead(format!("the fork server answered {text:?}")),
    })
}

fn send(control: &OwnedFd, bytes: &[u8], fds: Option<&[RawFd]>) -> Result<(), String> {
    let controls: Vec<ControlMessage<'_>> = fds
        .map(|fds| vec![ControlMessage::ScmRights(fds)])
        .unwrap_or_default();
    loop {
        match sendmsg::<()>(
            control.as_raw_fd(),
            &[IoSlice::new(bytes)],
            &controls,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(error) => return Err(format!("sending to the fork server: {error}")),
        }
    }
}

/// One answer: its text and the descriptors attached (owned).
fn receive(control: &OwnedFd) -> Result<(String, Vec<OwnedFd>), String> {
    let mut buffer = [0u8; 4096];
    let mut cmsg = nix::cmsg_space!([RawFd; 2]);
    loop {
        let mut iov = [IoSliceMut::new(&mut buffer)];
        let message = match recvmsg::<()>(
            control.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(message) => message,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(format!(
                    "no answer from the fork server within {ANSWER_TIMEOUT:?}"
                ));
            }
            Err(error) => return Err(format!("reading the fork server's answer: {error}")),
        };
        let mut fds = Vec::new();
        if let Ok(controls) = message.cmsgs() {
            for control in controls {
                if let ControlMessageOwned::ScmRights(received) = control {
                    // SAFETY: descriptors just received, owned by no one else.
                    fds.extend(
                        received
                            .into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
        }
        let length = message.bytes;
        if length == 0 && fds.is_empty() {
            return Err("the fork server closed its control socket".to_owned());
        }
        return Ok((String::from_utf8_lossy(&buffer[..length]).into_owned(), fds));
    }
}
