//! The supervisor: has the fork server fork a launcher and hands it the plan ([`start`]: the
//! launcher then prepares the sandbox), later hands it one run's plan and bounds that run
//! ([`supervise`]).
//!
//! One thread polls the launcher's socket and the program's stdout and stderr (all
//! non-blocking), so output is read concurrently with hard byte caps. The wall-clock timeout
//! runs on the monotonic clock from just before the launcher starts. When the timeout passes,
//! an output cap is exceeded or the caller cancels, the supervisor asks the launcher to kill
//! the namespace's init (SIGKILL), which makes the kernel kill every process of the pid
//! namespace; the launcher reports once the init is reaped, that is once the namespace is
//! gone. Should the launcher not answer within a grace period, the supervisor kills it, and
//! the init, whose parent-death signal is SIGKILL, dies with it.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::MsgFlags;
use sf_contracts::{
    CancelToken, CapturedResults, ExecutorError, LimitHit, NamespaceDisposition, RunBounds,
    RunStatus, RunTimes,
};

use crate::cgroup::{self, Cleaner, CleanerHandle, Hierarchy, RunGroup};
use crate::identity::Ids;
use crate::plan::{Binds, Plan, Report, ResultsSeen};
use crate::profile::Limits;
use crate::relay::Relay;
use crate::zygote::ForkServer;

/// How often cancellation is checked while nothing else happens.
const CANCEL_TICK: Duration = Duration::from_millis(10);
/// How long the launcher has to confirm a kill before it is killed itself.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long output is still drained after the launcher itself was killed.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// What every sandbox of an Executor is started from.
#[derive(Debug)]
pub(crate) struct Source {
    pub server: ForkServer,
    /// The [`crate::plan::Plan`] every sandbox of the Executor is built from, without a
    /// dependency environment.
    pub plan: Plan,
    /// The host ids the sandboxes run as (as root; `None`: sf's own).
    pub ids: Option<Ids>,
    /// The control groups that bound each run, where the machine allows.
    pub resources: Resources,
}

/// How runs are bounded as a whole.
#[derive(Debug)]
pub(crate) struct Resources {
    /// Where runs' groups are made (`None`: nowhere; the reason is kept).
    /// A group made already (to find the hierarchy), for the first sandbox.
    pub spare: std::sync::Mutex<Option<RunGroup>>,
    pub bounds: cgroup::Bounds,
    /// Whether a run without a group fails (`unavailable`, mechanism `cgroup`).
    pub required: bool,
    /// Dropped after the fork server, once every launcher has exited.
    pub cleaner: Cleaner,
    /// Declared last: its collection group is removed once every run's group inside it is.
    pub hierarchy: Result<Hierarchy, String>,
}

impl Resources {
    /// A group for one run: `Ok(None)` when there is none and none is required.
    fn group(&self) -> Result<Option<RunGroup>, ExecutorError> {
        let spare = self
            .spare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let made = match (spare, &self.hierarchy) {
            (Some(group), _) => Ok(group),
            (None, Ok(hierarchy)) => hierarchy.create(&self.bounds),
            (None, Err(reason)) => Err(reason.clone()),
        };
        match made {
            Ok(group) => Ok(Some(group)),
            Err(reason) if self.required => Err(ExecutorError::Unavailable {
                mechanism: "cgroup".to_owned(),
                reason: format!(
                    "the profile requires a control group per run and none could be made: \
                     {reason}"
                ),
            }),
            Err(_) => Ok(None),
        }
    }
}

/// A launcher that got its plan: its sandbox is being (or has been) prepared and waits for
/// the one run it will serve. Dropping it ends the launcher and its sandbox unused.
#[derive(Debug)]
pub(crate) struct Started {
    socket: UnixStream,
    stdout: File,
    stderr: File,
    /// A pidfd of the launcher.
    launcher: OwnedFd,
    /// The host uid the sandbox runs as, when it has one of its own.
    pub id: Option<u32>,
    /// The run's control group, removed once the launcher has exited.
    group: Option<RunGroup>,
    /// The launcher, when it is this process's child (it served its request itself) rather
    /// than the fork server's: reaped once it has exited.
    child: Option<Child>,
    /// Removes the group and reaps the launcher once it has exited.
    cleaner: Option<CleanerHandle>,
}

impl Started {
    /// Whether the launcher still runs (a prepared one may have ended: its fork server was
    /// killed, or building the sandbox failed).
    pub fn is_alive(&self) -> bool {
        let mut fd = libc::pollfd {
            fd: self.launcher.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no waiting; a pidfd is readable once its process ended.
        unsafe { libc::poll(&mut fd, 1, 0) == 0 }
    }

    /// Which kind of control group bounds the run, if one does.
    pub fn group_version(&self) -> Option<cgroup::Version> {
        self.group.as_ref().map(RunGroup::version)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let (group, child) = (self.group.take(), self.child.take());
        if group.is_none() && child.is_none() {
            return;
        }
        match (&self.cleaner, self.launcher.try_clone()) {
            (Some(cleaner), Ok(launcher)) => cleaner.after_exit(launcher, group, child),
            // Without the cleaner the group is removed now, once it is empty.
            _ => cgroup::remove_after_exit(None, group, child),
        }
    }
}

/// How a sandbox's launcher is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// Forked by the fork server (started if it is not running).
    Forked,
    /// Serving its request itself, without a fork server: an Executor's first run.
    Once,
}

/// Has a launcher started (in a control group of its own and under a host id of its own,
/// where there are) and hands it the plan, with `binds` bound.
pub(crate) fn start(source: &Source, binds: &Binds, how: Start) -> Result<Started, ExecutorError> {
    let plan = serde_json::to_vec(&source.plan.with_binds(binds)).map_err(|error| {
        ExecutorError::Unavailable {
            mechanism: "launcher".to_owned(),
            reason: format!("the plan did not encode: {error}"),
        }
    })?;
    let group = source.resources.group()?;
    let procs = match &group {
        Some(group) => group.procs().map_err(|reason| ExecutorError::Unavailable {
            mechanism: "cgroup".to_owned(),
            reason,
        })?,
        None => Vec::new(),
    };
    let id = source.ids.as_ref().map(Ids::take);
    if let (Some(output), Some(id)) = (&binds.output, id) {
        give_output_to(&output.host, id)?;
    }
    let (socket, theirs) = UnixStream::pair()
        .map_err(|error| unavailable_launcher(format!("a socket pair: {error}")))?;
    let (stdout, stdout_end) = pipe()?;
    let (stderr, stderr_end) = pipe()?;
    // Our copies of the launcher's ends are closed once it has been started, so that the
    // streams end when the run's processes are gone.
    let theirs = OwnedFd::from(theirs);
    let (launcher, child) = match how {
        Start::Forked => (
            source
                .server
                .fork_run(theirs, stdout_end, stderr_end, id, &procs)?,
            None,
        ),
        Start::Once => {
            let (launcher, child) = source
                .server
                .run_once(theirs, stdout_end, stderr_end, id, &procs)?;
            (launcher, Some(child))
        }
    };
    drop(procs);
    let started = Started {
        socket,
        stdout,
        stderr,
        launcher,
        id,
        group,
        child,
        cleaner: source.resources.cleaner.handle(),
    };
    // The plan is small enough for the socket's buffer; a launcher that is gone already
    // shows up as a failed write, and its report says why when the run reads it.
    let _ = started
        .socket
        .set_write_timeout(Some(PLAN_WRITE_TIMEOUT))
        .and_then(|()| send_all(&started.socket, &(plan.len() as u64).to_le_bytes()))
        .and_then(|()| send_all(&started.socket, &plan));
    Ok(started)
}

/// Makes an environment build's output directory its sandbox's: owned by the host id the
/// sandbox runs as (which is its user inside), writable by it alone.
fn give_output_to(dir: &Path, id: u32) -> Result<(), ExecutorError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::os::unix::fs::chown(dir, Some(id), Some(id))
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|error| ExecutorError::Unavailable {
            mechanism: "output".to_owned(),
            reason: format!(
                "giving the output directory {} to the sandbox's user: {error}",
                dir.display()
            ),
        })
}

/// How long handing a launcher its plan may block.
const PLAN_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What to run in a started launcher's sandbox.
pub(crate) struct Launch<'a> {
    pub started: Started,
    /// The encoded [`crate::plan::RunPlan`].
    pub header: Vec<u8>,
    pub files: Vec<&'a [u8]>,
    pub bounds: RunBounds,
    pub cancel: &'a CancelToken,
    /// The limits in force for this run (the profile's, or lower ones the run asked for),
    /// whose values the limits hit state.
    pub limits: &'a Limits,
    /// The group bounds to lower the run's control group to before the run starts, when the
    /// run asks for less memory or fewer processes than the profile; a run that asks and
    /// has no group starts nothing.
    pub lower: Option<cgroup::Bounds>,
    /// An environment build's proxy socket, which the run's connections are relayed to.
    pub proxy: Option<&'a Path>,
}

/// What happened to a run that started.
#[derive(Debug)]
pub(crate) struct Ran {
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub times: RunTimes,
    /// The Landlock ABI and status the program's process reported, if it got that far.
    pub landlock: Option<(u32, String)>,
    pub namespace: NamespaceDisposition,
    pub problems: Vec<String>,
    /// The host uid the run ran under, when it had one of its own.
    pub id: Option<u32>,
    /// Which kind of control group bounded the run, if one did.
    pub group: Option<cgroup::Version>,
    /// The limits the run hit, as far as the group and the init saw.
    pub limits_hit: Vec<LimitHit>,
    /// The results file the init read, for a command that asked for one.
    pub results: Option<CapturedResults>,
}

/// Why the supervisor stopped the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    TimedOut,
    OutputLimit,
    Aborted,
}

/// One output stream, capped.
struct Capped {
    kept: Vec<u8>,
    limit: u64,
    exceeded: bool,
    open: bool,
}

impl Capped {
    fn new(limit: u64) -> Self {
        Self {
            kept: Vec::new(),
            limit,
            exceeded: false,
            open: true,
        }
    }

    /// Takes `bytes`, keeping at most the limit; returns whether the limit was passed.
    fn take(&mut self, bytes: &[u8]) -> bool {
        let room = usize::try_from(self.limit.saturating_sub(self.kept.len() as u64))
            .unwrap_or(usize::MAX);
        if bytes.len() > room {
            self.kept.extend_from_slice(&bytes[..room]);
            self.exceeded = true;
        } else {
            self.kept.extend_from_slice(bytes);
        }
        self.exceeded
    }
}

/// Runs one launch to its end. `Err` only when the program did not start.
pub(crate) fn supervise(launch: Launch<'_>) -> Result<Ran, ExecutorError> {
    let start = Instant::now();
    let deadline = start + launch.bounds.timeout;
    let mut started = launch.started;
    lower_group_bounds(&started, launch.lower.as_ref())?;
    let mut watch = Watch::new(&mut started, &launch.bounds, deadline, launch.cancel);
    watch.proxy = launch.proxy;
    watch.hand_over_run(&launch.header, &launch.files);
    watch.read_until_streams_end();
    let wall = start.elapsed();
    let ended = watch.end();
    answer(&started, ended, wall, launch.limits)
}

/// Lowers the run's control group to the bounds the run asks for, before the run starts: a
/// memory or process bound below the profile's holds only through the group, so a run that
/// asks for one and cannot have it starts nothing.
fn lower_group_bounds(
    started: &Started,
    lower: Option<&cgroup::Bounds>,
) -> Result<(), ExecutorError> {
    let Some(bounds) = lower else {
        return Ok(());
    };
    let lowered = match &started.group {
        Some(group) => group.bound(bounds),
        None => Err("no control group bounds this run".to_owned()),
    };
    lowered.map_err(|reason| ExecutorError::Unavailable {
        mechanism: "cgroup".to_owned(),
        reason: format!(
            "the run asks for a memory or process bound below the profile's, which only its \
             control group can enforce: {reason}"
        ),
    })
}

/// One run's three streams (the launcher's socket, the program's stdout and stderr) while
/// the run goes on, and what has been read from them.
struct Watch<'a> {
    started: &'a mut Started,
    deadline: Instant,
    cancel: &'a CancelToken,
    reports: Reports,
    out: Capped,
    err: Capped,
    stopping: Stopping,
    problems: Vec<String>,
    /// An environment build's proxy socket, and the relay to it once the launcher has
    /// handed its listener over.
    proxy: Option<&'a Path>,
    relay: Option<Relay>,
}

/// The launcher's reports, read line by line as they arrive.
struct Reports {
    open: bool,
    /// The start of a line not yet ended.
    pending: Vec<u8>,
    read: Vec<Report>,
    /// The program's first process has ended (exited or killed by a signal).
    ended: bool,
    /// The last report came: the namespace is gone.
    done: bool,
}

/// Why the supervisor stops the run, and how far the stopping has gone.
#[derive(Default)]
struct Stopping {
    why: Option<Stop>,
    /// When the launcher was asked to kill the namespace's init.
    kill_sent: Option<Instant>,
    /// When the launcher, which did not confirm the kill in time, was killed itself.
    launcher_killed: Option<Instant>,
}

/// The streams of a run have ended: what the answer is made from.
struct Ended {
    reports: Vec<Report>,
    out: Capped,
    err: Capped,
    stop: Option<Stop>,
    /// How the launcher ended, for the answer's problems and errors.
    launcher_status: String,
    problems: Vec<String>,
}

impl<'a> Watch<'a> {
    fn new(
        started: &'a mut Started,
        bounds: &RunBounds,
        deadline: Instant,
        cancel: &'a CancelToken,
    ) -> Self {
        Self {
            started,
            deadline,
            cancel,
            reports: Reports {
                open: true,
                pending: Vec::new(),
                read: Vec::new(),
                ended: false,
                done: false,
            },
            out: Capped::new(bounds.stdout_limit),
            err: Capped::new(bounds.stderr_limit),
            stopping: Stopping::default(),
            problems: Vec::new(),
            proxy: None,
            relay: None,
        }
    }

    /// Hands the launcher the run's plan and files, which starts the program. A launcher
    /// that fails to take them is noted, not refused: its report says why.
    fn hand_over_run(&mut self, header: &[u8], files: &[&[u8]]) {
        if let Err(error) = send_run(&mut self.started.socket, header, files, self.deadline) {
            // The launcher ended early (its report says why) or the deadline passed.
            self.problems
                .push(format!("handing over the plan: {error}"));
        }
    }

    /// Reads the reports and the output, all three streams at once so that none blocks the
    /// others, until they have all ended; stops the run when it is due, and gives up on
    /// output still open after the launcher had to be killed.
    fn read_until_streams_end(&mut self) {
        let started = &*self.started;
        for stream in [
            started.socket.as_fd(),
            started.stdout.as_fd(),
            started.stderr.as_fd(),
        ] {
            set_nonblocking(stream);
        }
        let mut buffer = vec![0u8; 64 * 1024];
        while self.reports.open || self.out.open || self.err.open {
            let now = Instant::now();
            self.stop_when_due(now);
            self.kill_when_stopping(now);
            if self.drained_too_long(now) {
                break;
            }
            for stream in self.poll_ready(self.wake(now)) {
                match stream {
                    0 => self.read_reports(&mut buffer),
                    1 | 2 => self.read_output(stream, &mut buffer),
                    _ => unreachable!("three streams"),
                }
            }
        }
    }

    /// Stops the run when the caller cancels or the deadline passes, unless the program has
    /// ended already (its namespace is being reaped, and the answer is its own).
    fn stop_when_due(&mut self, now: Instant) {
        if self.stopping.why.is_none() && !self.reports.ended {
            if self.cancel.is_cancelled() {
                self.stopping.why = Some(Stop::Aborted);
            } else if now >= self.deadline {
                self.stopping.why = Some(Stop::TimedOut);
            }
        }
    }

    /// Once the run is stopping, asks the launcher to kill the namespace's init, and kills
    /// the launcher itself should it not confirm within [`KILL_GRACE`]: the init's
    /// parent-death signal then ends the namespace.
    fn kill_when_stopping(&mut self, now: Instant) {
        if self.stopping.why.is_some() {
            self.send_kill(now);
        }
        if let Some(sent) = self.stopping.kill_sent
            && self.stopping.launcher_killed.is_none()
            && now >= sent + KILL_GRACE
        {
            kill_launcher(&self.started.launcher);
            self.stopping.launcher_killed = Some(now);
            self.problems
                .push("the launcher did not confirm the kill in time and was killed".into());
        }
    }

    /// Asks the launcher, once, to kill the namespace's init.
    fn send_kill(&mut self, at: Instant) {
        if self.stopping.kill_sent.is_none() {
            let _ = send_all(&self.started.socket, b"k");
            self.stopping.kill_sent = Some(at);
        }
    }

    /// Whether output stayed open [`DRAIN_GRACE`] after the launcher was killed: something
    /// outside the namespace holds it, and the run is not waited for any longer.
    fn drained_too_long(&mut self, now: Instant) -> bool {
        if let Some(killed) = self.stopping.launcher_killed
            && now >= killed + DRAIN_GRACE
        {
            self.problems
                .push("output was still open after the launcher was killed".into());
            return true;
        }
        false
    }

    /// How long to wait for the streams: up to the deadline, but never so long that a
    /// cancellation goes unseen; once the run is ending, in slower ticks.
    fn wake(&self, now: Instant) -> Duration {
        if self.stopping.kill_sent.is_some() || self.reports.ended {
            CANCEL_TICK.max(Duration::from_millis(50))
        } else {
            self.deadline
                .saturating_duration_since(now)
                .min(CANCEL_TICK)
        }
    }

    /// Waits up to `wake` for the open streams; answers the ones with something to read (0:
    /// the socket, 1: stdout, 2: stderr). A failed poll stops the run.
    fn poll_ready(&mut self, wake: Duration) -> Vec<usize> {
        let started = &*self.started;
        let mut fds = Vec::with_capacity(3);
        let mut which = Vec::with_capacity(3);
        if self.reports.open {
            fds.push(PollFd::new(started.socket.as_fd(), PollFlags::POLLIN));
            which.push(0);
        }
        if self.out.open {
            fds.push(PollFd::new(started.stdout.as_fd(), PollFlags::POLLIN));
            which.push(1);
        }
        if self.err.open {
            fds.push(PollFd::new(started.stderr.as_fd(), PollFlags::POLLIN));
            which.push(2);
        }
        let timeout =
            PollTimeout::try_from(wake.as_millis().max(1) as u64).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return Vec::new(),
            Ok(_) => {}
            Err(error) => {
                self.problems.push(format!("poll: {error}"));
                self.stopping.why.get_or_insert(Stop::Aborted);
                return Vec::new();
            }
        }
        fds.iter()
            .zip(&which)
            .filter(|(fd, _)| fd.revents().is_some_and(|events| !events.is_empty()))
            .map(|(_, which)| *which)
            .collect()
    }

    /// Reads what the launcher reported, and takes the listener an environment build's
    /// launcher hands over with its `listening` line.
    fn read_reports(&mut self, buffer: &mut [u8]) {
        let (result, descriptors) = receive_some(&self.started.socket, buffer);
        for descriptor in descriptors {
            match (self.proxy, &self.relay) {
                (Some(proxy), None) => {
                    self.relay = Some(Relay::start(descriptor, proxy.to_path_buf()));
                }
                // Nothing else is ever handed over: closed unused.
                _ => self
                    .problems
                    .push("the launcher handed over a descriptor it was not asked for".into()),
            }
        }
        match result {
            ReadResult::Nothing => {}
            ReadResult::End => self.reports.open = false,
            ReadResult::Data(read) => self.reports.take(&buffer[..read], &mut self.problems),
        }
    }

    /// Reads the program's output on stream 1 (stdout) or 2 (stderr), up to its cap.
    fn read_output(&mut self, stream: usize, buffer: &mut [u8]) {
        let (pipe, capped): (&mut dyn Read, &mut Capped) = if stream == 1 {
            (&mut self.started.stdout, &mut self.out)
        } else {
            (&mut self.started.stderr, &mut self.err)
        };
        match read_some(pipe, buffer) {
            ReadResult::Nothing => {}
            ReadResult::End => capped.open = false,
            ReadResult::Data(read) => {
                if capped.take(&buffer[..read]) {
                    // Past the cap: stop reading this stream and end the run.
                    capped.open = false;
                    self.stopping.why.get_or_insert(Stop::OutputLimit);
                    self.send_kill(Instant::now());
                }
            }
        }
    }

    /// What the answer is made from, once the streams have ended; a launcher that somehow
    /// still runs is killed.
    fn end(mut self) -> Ended {
        if let Some(relay) = self.relay.take() {
            self.problems.extend(relay.stop());
        }
        let launcher_status = if self.reports.done {
            "the launcher reported the namespace's end".to_owned()
        } else {
            launcher_state(
                &self.started.launcher,
                self.stopping.launcher_killed.is_some(),
            )
        };
        let mut stop = self.stopping.why;
        if self.out.exceeded || self.err.exceeded {
            stop = Some(Stop::OutputLimit);
        }
        Ended {
            reports: self.reports.read,
            out: self.out,
            err: self.err,
            stop,
            launcher_status,
            problems: self.problems,
        }
    }
}

impl Reports {
    /// Takes `bytes` read from the socket, and every report they complete.
    fn take(&mut self, bytes: &[u8], problems: &mut Vec<String>) {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            match Report::parse(&text) {
                Some(report) => self.push(report),
                None => problems.push(format!("unreadable report {text:?}")),
            }
        }
    }

    fn push(&mut self, report: Report) {
        if matches!(report, Report::Exit { .. } | Report::Signal { .. }) {
            self.ended = true;
        }
        if matches!(report, Report::Done { .. }) {
            // The last report: the namespace is gone, and the launcher has nothing left to
            // do but exit (which the fork server reaps); no need to wait for it.
            self.open = false;
            self.done = true;
        }
        self.read.push(report);
    }
}

/// What the launcher's reports said, each kind of report in its place.
#[derive(Default)]
struct Seen {
    confined: Option<(u32, String)>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    /// User and system microseconds and the largest resident set (KiB) of the run.
    usage: Option<(u64, u64, u64)>,
    /// The first set-up step that failed: its mechanism and why.
    failure: Option<(String, String)>,
    exec_failed: Option<i32>,
    hits: Vec<(String, String)>,
    results: Option<CapturedResults>,
}

impl Seen {
    fn tally(reports: Vec<Report>) -> Self {
        let mut seen = Self::default();
        for report in reports {
            match report {
                Report::Fail { mechanism, detail } => {
                    seen.failure.get_or_insert((mechanism, detail));
                }
                Report::Confined {
                    landlock_abi,
                    landlock,
                } => seen.confined = Some((landlock_abi, landlock)),
                Report::ExecFailed { errno } => seen.exec_failed = Some(errno),
                Report::Listening { .. } => {}
                Report::Hit { limit, detail } => seen.hits.push((limit, detail)),
                Report::Results(results) => {
                    seen.results = Some(match results {
                        ResultsSeen::Absent => CapturedResults::Absent,
                        ResultsSeen::Written(bytes) => CapturedResults::Written(bytes),
                        ResultsSeen::Refused(reason) => CapturedResults::Refused(reason),
                    })
                }
                Report::Exit { code } => seen.exit_code = Some(code),
                Report::Signal { signal: number } => seen.signal = Some(number),
                Report::Done {
                    user_us,
                    system_us,
                    max_rss_kib,
                } => seen.usage = Some((user_us, system_us, max_rss_kib)),
            }
        }
        seen
    }

    /// `Err` when the program never started and the supervisor did not stop it: the sandbox
    /// could not be set up (the failed step's mechanism), or the runtime could not be
    /// executed inside it.
    fn check_program_started(
        &self,
        stop: Option<Stop>,
        launcher_status: &str,
        problems: &[String],
    ) -> Result<(), ExecutorError> {
        if self.confined.is_none() && stop.is_none() {
            return Err(match &self.failure {
                Some((mechanism, detail)) => ExecutorError::Unavailable {
                    mechanism: mechanism.clone(),
                    reason: detail.clone(),
                },
                None => unavailable_launcher(format!(
                    "the launcher ended without a report ({launcher_status}); {}",
                    problems.join("; ")
                )),
            });
        }
        if let Some(errno) = self.exec_failed
            && stop.is_none()
        {
            return Err(ExecutorError::Unavailable {
                mechanism: "runtime".to_owned(),
                reason: format!(
                    "the runtime could not be executed inside the sandbox: {}",
                    std::io::Error::from_raw_os_error(errno)
                ),
            });
        }
        Ok(())
    }
}

/// How the run ended: the supervisor's stop, else the program's own end; a program whose end
/// was never reported counts as aborted, never as exited.
fn run_status(
    stop: Option<Stop>,
    seen: &Seen,
    launcher_status: &str,
    problems: &mut Vec<String>,
) -> RunStatus {
    match stop {
        Some(Stop::OutputLimit) => RunStatus::OutputLimit,
        Some(Stop::TimedOut) => RunStatus::TimedOut,
        Some(Stop::Aborted) => RunStatus::Aborted,
        None => match (seen.exit_code, seen.signal) {
            (Some(_), _) => RunStatus::Exited,
            (None, Some(_)) => RunStatus::Signalled,
            (None, None) => {
                problems.push(format!(
                    "the program's end was not reported ({launcher_status})"
                ));
                RunStatus::Aborted
            }
        },
    }
}

/// The answer for a run whose streams have ended. `Err` when the program never started.
fn answer(
    started: &Started,
    ended: Ended,
    wall: Duration,
    limits: &Limits,
) -> Result<Ran, ExecutorError> {
    let Ended {
        reports,
        out,
        err,
        stop,
        launcher_status,
        mut problems,
    } = ended;
    let seen = Seen::tally(reports);
    seen.check_program_started(stop, &launcher_status, &problems)?;
    let namespace = if seen.usage.is_some() {
        NamespaceDisposition::Reaped
    } else {
        NamespaceDisposition::Unconfirmed {
            reason: format!("the launcher did not report the init's end ({launcher_status})"),
        }
    };
    let (user_us, system_us, max_rss_kib) = seen.usage.unwrap_or((0, 0, 0));
    let status = run_status(stop, &seen, &launcher_status, &mut problems);
    let (exit_code, signal) = match status {
        RunStatus::Exited => (seen.exit_code, None),
        RunStatus::Signalled => (None, seen.signal),
        _ => (None, None),
    };
    // Read once the run's namespace is gone (or the launcher was killed), so that the
    // counters are final.
    let group = started
        .group
        .as_ref()
        .map(|group| (group.version(), group.events()));
    let limits_hit = crate::limits::limits_hit(limits, &seen.hits, group, &mut problems);
    Ok(Ran {
        status,
        exit_code,
        signal,
        stdout: out.kept,
        stderr: err.kept,
        times: RunTimes {
            wall,
            user: Duration::from_micros(user_us),
            system: Duration::from_micros(system_us),
            max_rss_kib,
            memory_peak_bytes: started.group.as_ref().and_then(RunGroup::peak),
        },
        landlock: seen.confined,
        namespace,
        problems,
        id: started.id,
        group: started.group_version(),
        limits_hit,
        results: seen.results,
    })
}

fn unavailable_launcher(reason: String) -> ExecutorError {
    ExecutorError::Unavailable {
        mechanism: "launcher".to_owned(),
        reason,
    }
}

fn set_nonblocking(fd: BorrowedFd<'_>) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// What one non-blocking read found.
enum ReadResult {
    Data(usize),
    /// End of file, or an error that ends the stream.
    End,
    /// Nothing after all (a spurious wake-up).
    Nothing,
}

fn read_some(pipe: &mut dyn Read, buffer: &mut [u8]) -> ReadResult {
    loop {
        match pipe.read(buffer) {
            Ok(0) => return ReadResult::End,
            Ok(read) => return ReadResult::Data(read),
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) if error.kind() == ErrorKind::WouldBlock => return ReadResult::Nothing,
            Err(_) => return ReadResult::End,
        }
    }
}

/// Reads what the socket has (as [`read_some`]), with any descriptors that came with it.
fn receive_some(socket: &UnixStream, buffer: &mut [u8]) -> (ReadResult, Vec<OwnedFd>) {
    use nix::sys::socket::{ControlMessageOwned, recvmsg};
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
    loop {
        let mut iov = [std::io::IoSliceMut::new(buffer)];
        let message = match recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(message) => message,
            Err(nix::Error::EINTR) => continue,
            Err(nix::Error::EAGAIN) => return (ReadResult::Nothing, Vec::new()),
            Err(_) => return (ReadResult::End, Vec::new()),
        };
        let mut descriptors = Vec::new();
        for control in message.cmsgs().into_iter().flatten() {
            if let ControlMessageOwned::ScmRights(fds) = control {
                // SAFETY: descriptors just received, owned by no one else.
                descriptors.extend(
                    fds.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        let result = match message.bytes {
            0 => ReadResult::End,
            read => ReadResult::Data(read),
        };
        return (result, descriptors);
    }
}

/// Sends the run plan and the run's files, before `deadline`.
fn send_run(
    socket: &mut UnixStream,
    header: &[u8],
    files: &[&[u8]],
    deadline: Instant,
) -> std::io::Result<()> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    socket.set_write_timeout(Some(remaining.max(Duration::from_millis(1))))?;
    send_all(socket, &(header.len() as u64).to_le_bytes())?;
    send_all(socket, header)?;
    for file in files {
        send_all(socket, file)?;
    }
    Ok(())
}

/// Writes all of `bytes` without ever raising SIGPIPE (the host process may not ignore it).
fn send_all(socket: &UnixStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match nix::sys::socket::send(socket.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL) {
            Ok(sent) => bytes = &bytes[sent..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(error) => return Err(std::io::Error::from(error)),
        }
    }
    Ok(())
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> Result<(File, OwnedFd), ExecutorError> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|error| unavailable_launcher(format!("a pipe: {error}")))?;
    Ok((File::from(read), write))
}

/// SIGKILL to the launcher through its pidfd (which names it and no later process).
fn kill_launcher(pidfd: &OwnedFd) {
    crate::launcher::sys::pidfd_kill(pidfd.as_raw_fd());
}

/// Describes the launcher once every stream has ended. Its socket end closed, so it is
/// exiting (the fork server reaps it); if it somehow still runs, it is killed.
fn launcher_state(pidfd: &OwnedFd, killed: bool) -> String {
    let mut fd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no waiting.
    let ended = unsafe { libc::poll(&mut fd, 1, 0) } == 1;
    match (ended, killed) {
        (true, false) => "the launcher ended".to_owned(),
        (true, true) | (false, true) => "the launcher was killed".to_owned(),
        (false, false) => {
            kill_launcher(pidfd);
            "the launcher closed its socket and was killed".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(hierarchy: Result<Hierarchy, String>, required: bool) -> Resources {
        Resources {
            hierarchy,
            spare: std::sync::Mutex::new(None),
            bounds: cgroup::Bounds {
                memory_bytes: 1 << 30,
                processes: 66,
                cpu_percent: 200,
            },
            required,
            cleaner: Cleaner::new(),
        }
    }

    /// Without a usable hierarchy a run goes ahead with the per-process limits only, unless
    /// the profile requires a group: then it fails closed, naming the mechanism and why.
    #[test]
    fn a_required_group_that_cannot_be_made_fails_closed() {
        let missing = || Err("cgroup v1: only root can make groups and bound them".to_owned());
        assert!(matches!(resources(missing(), false).group(), Ok(None)));
        let error = resources(missing(), true).group().unwrap_err();
        let ExecutorError::Unavailable { mechanism, reason } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(mechanism, "cgroup");
        assert!(reason.contains("only root can make groups"), "{reason}");
    }
}
