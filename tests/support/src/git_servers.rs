//! Real Git servers on loopback for tests that push to and fetch from a remote: bare
//! repositories with scripted hook behaviours, `git daemon` (git://), smart HTTP
//! (`git http-backend` run as CGI by a small std HTTP/1.1 server), and hostile servers that
//! misbehave in the git:// and HTTP protocols.
//!
//! - [`BareRemote`]: a bare repository in a temporary directory, empty or cloned from a
//!   bundle or a repository, with [`BareRemote::file_url`], ref reading and writing, and the
//!   faults a push can meet: [`BareRemote::count_pushes`], [`BareRemote::refuse_pushes`],
//!   [`BareRemote::hang_pushes`], [`BareRemote::accept_then_drop`].
//! - [`GitDaemon`]: `git daemon` serving a directory over git://, push enabled.
//! - [`HttpGit`]: smart HTTP over a directory, push enabled.
//! - [`HostileServer`]: a TCP server that speaks git:// or HTTP badly ([`Hostility`]).
//! - [`run_bounded`]: runs a client with a deadline, killing its whole process group when
//!   the deadline passes, so a test never hangs on a server that does.
//!
//! Every server listens on 127.0.0.1 on a port the kernel chose, and is stopped (its
//! processes killed and reaped, its threads joined) when its guard is dropped; every
//! temporary directory goes with its guard too.
//!
//! # What the real Git client does against each fault
//!
//! Observed with git 2.47.3 (`/usr/local/bin/git`) and 2.39.5 (`/usr/bin/git`) as clients
//! (the same for both), 2.47.3 as the server, and asserted by this crate's `git_servers`
//! tests. "Hangs" means the client never returns by itself: Git has no deadline of its own
//! on file://, git:// or smart HTTP, so only the caller's deadline ends it. (On HTTP,
//! `-c http.lowSpeedLimit=1 -c http.lowSpeedTime=<n>` ends a *silent* server's run: exit
//! 128, `fatal: unable to access '<url>/': Operation too slow. Less than 1 bytes/sec
//! transferred the last <n> seconds`; it does nothing against a server that keeps
//! sending.)
//!
//! | fault | `git ls-remote` | `git push --porcelain --atomic` |
//! |---|---|---|
//! | [`BareRemote::refuse_pushes`] | unaffected | exit 1; stdout `!\t<src>:<dst>\t[remote rejected] (pre-receive hook declined)` for each ref, then `Done`; stderr `remote: <message>` and `error: failed to push some refs to '<url>'`; no ref moves |
//! | [`BareRemote::hang_pushes`] | unaffected | hangs, printing nothing; no ref moves |
//! | [`BareRemote::accept_then_drop`] | unaffected | every ref moved on the server; the client prints no status line and exits 128 (file://, git://) or 1 (HTTP): see there |
//! | [`Hostility::Silent`] | hangs, printing nothing | hangs, printing nothing |
//! | [`Hostility::Malformed`] | exit 128 at once: `fatal: protocol error: bad line length character: this` (git:// and HTTP) | the same |
//! | [`Hostility::OverlongPktLine`] | git://: exit 128 at once, `fatal: protocol error: bad line length 65531`. HTTP: hangs, its memory growing (the HTTP client reads the whole advertisement before parsing any of it) | the same |
//! | [`Hostility::OversizedAdvertisement`] | exit 0, every ref printed (200,000 refs, 13 MB, in under a second): no size limit | takes it whole, sends its pack, then waits for the report this server never sends (hangs) |
//! | [`Hostility::EndlessAdvertisement`] | hangs, printing nothing, its memory growing without bound (a peak RSS of 170–280 MiB after 3 seconds) | the same |
//! | [`Hostility::EndlessPushProgress`] | exit 0 (the advertisement is small) | hangs, writing `remote: sf-test: still working <n>` lines to stderr without end (5–10 MB a second), memory flat |
//!
//! So a caller that runs Git against a remote it does not control must bound the
//! wall-clock time of every run, the bytes it keeps of stdout and stderr, and the client's
//! memory; and must treat a push that ends in an error with no status line as one whose
//! outcome is unknown (its refs may have moved), and read the remote's refs to find out.

mod daemon;
mod hostile;
mod http;

pub use daemon::GitDaemon;
pub use hostile::{HostileServer, Hostility, Protocol};
pub use http::{HttpGit, HttpRequestRecord};

use std::collections::HashSet;
use std::io::Read as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Where the servers' Git is looked for, in order: the newer build first.
pub const SERVER_GIT_PATHS: &[&str] = &["/usr/local/bin/git", "/usr/bin/git"];

/// Where client Git binaries are looked for: the paths sf itself tries (`/usr/bin/git`
/// first), then the newer build.
pub const CLIENT_GIT_PATHS: &[&str] = &["/usr/bin/git", "/usr/local/bin/git"];

/// The name every [`BareRemote`] is served under: its directory is `<root>/remote.git`.
pub const REMOTE_NAME: &str = "remote";

/// The Git the servers run (`git daemon`, `git http-backend`, and every helper here): the
/// first of [`SERVER_GIT_PATHS`] that exists.
pub fn server_git() -> &'static Path {
    static GIT: OnceLock<PathBuf> = OnceLock::new();
    GIT.get_or_init(|| {
        SERVER_GIT_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|path| path.is_file())
            .unwrap_or_else(|| panic!("no git binary at any of {SERVER_GIT_PATHS:?}"))
    })
}

/// Every distinct Git binary installed among [`CLIENT_GIT_PATHS`], in that order: the
/// clients a test should try, since sf runs whichever it finds first. Panics if there is
/// none.
pub fn client_gits() -> Vec<PathBuf> {
    let mut seen = HashSet::new();
    let gits: Vec<PathBuf> = CLIENT_GIT_PATHS
        .iter()
        .map(PathBuf::from)
        .filter(|path| path.is_file())
        .filter(|path| seen.insert(path.canonicalize().unwrap_or_else(|_| path.clone())))
        .collect();
    assert!(
        !gits.is_empty(),
        "no git binary at any of {CLIENT_GIT_PATHS:?}"
    );
    gits
}

/// A command running `git` with an environment no user setting reaches: every `GIT_*`
/// variable of the test's environment removed, no system or global configuration, no
/// terminal prompt, the C locale (so messages are the ones documented here), and a fixed
/// author and committer.
pub fn git_command(git: &Path) -> Command {
    let mut command = Command::new(git);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GIT_") {
            command.env_remove(name);
        }
    }
    command
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "sf test")
        .env("GIT_AUTHOR_EMAIL", "sf-test@example.invalid")
        .env("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_COMMITTER_NAME", "sf test")
        .env("GIT_COMMITTER_EMAIL", "sf-test@example.invalid")
        .env("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z")
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .stdin(Stdio::null());
    command
}

/// Runs the server's Git with `args` in `dir` and returns its stdout without the trailing
/// newline; panics with Git's stderr if it fails.
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let output = git_command(server_git())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("running git {args:?}: {error}"));
    assert!(
        output.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .trim_end_matches('\n')
        .to_owned()
}

/// A bundle of the shared fixture repositories (`requests.bundle`,
/// `typing_extensions.bundle`): where `SF_FIXTURE_REPOS` names, else beside the checkout
/// (`../shared/fixtures/repos`), else `/work/shared/fixtures/repos`. A missing fixture
/// panics: a test that needs one fails rather than skips.
pub fn fixture_bundle(name: &str) -> PathBuf {
    let candidates: Vec<PathBuf> = std::env::var_os("SF_FIXTURE_REPOS")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/repos"),
            PathBuf::from("/work/shared/fixtures/repos"),
        ])
        .collect();
    candidates
        .iter()
        .map(|dir| dir.join(name))
        .find(|bundle| bundle.is_file())
        .unwrap_or_else(|| panic!("the fixture {name} is missing from {candidates:?}"))
}

/// How a run under [`run_bounded`] ended.
#[derive(Debug)]
pub struct Bounded {
    /// The exit status, once the process was reaped (after a kill too: then it is a signal).
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
    /// Whether the deadline passed and the process group was killed.
    pub killed: bool,
    /// How long it ran.
    pub elapsed: Duration,
    /// When it was killed: the largest peak resident set (`VmHWM`, KiB) among the processes
    /// of its group just before the kill (the client's memory, or its transport helper's).
    pub peak_rss_kib: Option<u64>,
}

impl Bounded {
    /// The exit code, or `None` when a signal ended it.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Stdout as text (lossy).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Stderr as text (lossy).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Runs `command` (stdin from /dev/null, stdout and stderr captured) in a process group of
/// its own; if it has not exited after `deadline`, kills the whole group (the command and
/// every process it started that stayed in the group: `git-remote-http`, a local
/// `receive-pack` and its hooks) with SIGKILL. Either way the command is reaped and its
/// output read to the end before this returns.
pub fn run_bounded(mut command: Command, deadline: Duration) -> Bounded {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("spawning {command:?}: {error}"));
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("a pid fits in i32"));
    let collect = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = collect(Box::new(child.stdout.take().expect("stdout")));
    let stderr = collect(Box::new(child.stderr.take().expect("stderr")));
    // Waits for the exit without reaping, so until this thread's word and the kill the
    // group id cannot be reused.
    let (exited, exit) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        wait_unreaped(pid);
        let _ = exited.send(());
    });
    let (killed, peak_rss_kib) = match exit.recv_timeout(deadline) {
        Ok(()) => (false, None),
        Err(_) => {
            let peak = group_peak_rss_kib(pid);
            let _ = killpg(pid, Signal::SIGKILL);
            (true, peak)
        }
    };
    let _ = waiter.join();
    if killed {
        // What the command started in its group dies with it before this returns.
        wait_group_gone(pid);
    }
    let status = child.wait().expect("reaping the command");
    Bounded {
        status,
        stdout: stdout.join().expect("the stdout reader does not panic"),
        stderr: stderr.join().expect("the stderr reader does not panic"),
        killed,
        elapsed: started.elapsed(),
        peak_rss_kib,
    }
}

/// The live (not yet exited) processes of the process group `group`.
fn group_members(group: Pid) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // `pid (comm) state ppid pgrp …`: the fields after the last `)`.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
                    let state = fields.next()?;
                    let pgrp = fields.nth(1)?.parse::<i32>().ok()?;
                    Some(pgrp == group.as_raw() && state != "Z" && state != "X")
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Kills (SIGKILL) the process group led by the child `leader`, which must not have been
/// reaped (so the group id is still its), and waits until the leader has exited and no
/// process of the group is alive: a killed server's listening socket, held by its
/// children too, is closed by then. The leader is left for the caller to reap. Gives up
/// waiting after a minute.
pub(crate) fn kill_group(leader: Pid) {
    let _ = killpg(leader, Signal::SIGKILL);
    wait_unreaped(leader);
    wait_group_gone(leader);
}

/// Waits (polling: the kernel announces no such thing) until no process of `group` is
/// alive, for at most a minute.
fn wait_group_gone(group: Pid) {
    let started = Instant::now();
    while !group_members(group).is_empty() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The largest `VmHWM` (KiB) among the live processes of the process group `group`.
fn group_peak_rss_kib(group: Pid) -> Option<u64> {
    group_members(group)
        .into_iter()
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .max()
}

/// Waits until the child `pid` has exited, leaving it unreaped (a zombie whose pid, and
/// process group id, no other process can take until it is reaped).
pub(crate) fn wait_unreaped(pid: Pid) {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return,
        }
    }
}

/// A bare repository in a temporary directory, removed with the guard, at
/// `<root>/remote.git`, where `<root>` is what a [`GitDaemon`] or [`HttpGit`] serves
/// ([`BareRemote::root`]) and [`REMOTE_NAME`] the name to give their `url`.
///
/// Its configuration lets every transport push (`daemon.receivepack`, `http.receivepack`),
/// advertises atomic pushes (`receive.advertiseAtomic`, Git's default, set explicitly), and
/// turns off what would make a push's effects vary (`receive.autogc`, `gc.auto`).
///
/// The fault behaviours share two hooks: `pre-receive` is [`BareRemote::refuse_pushes`] or
/// [`BareRemote::hang_pushes`] (the last one set wins), and `reference-transaction` serves
/// both [`BareRemote::count_pushes`] and [`BareRemote::accept_then_drop`] (each switched on
/// by a flag file outside the repository). [`BareRemote::set_ref`] runs no hook, so it is
/// neither counted nor dropped.
pub struct BareRemote {
    _dir: tempfile::TempDir,
    root: PathBuf,
    path: PathBuf,
    control: PathBuf,
}

impl BareRemote {
    /// An empty bare repository (default branch `main`).
    pub fn empty() -> Self {
        let remote = Self::unborn();
        git_in(
            &remote.root,
            &[
                "init",
                "-q",
                "--bare",
                "--initial-branch=main",
                path_str(&remote.path),
            ],
        );
        remote.configure();
        remote
    }

    /// A bare clone of the bundle at `bundle` (its branches; `HEAD` as the bundle has it).
    pub fn from_bundle(bundle: &Path) -> Self {
        let remote = Self::unborn();
        git_in(
            &remote.root,
            &[
                "clone",
                "-q",
                "--bare",
                path_str(bundle),
                path_str(&remote.path),
            ],
        );
        // A clone from a bundle remembers it as `origin`; the remote has no upstream.
        git_in(&remote.path, &["remote", "remove", "origin"]);
        remote.configure();
        remote
    }

    /// A mirror of the repository at `repository` (every ref it has, under the same name),
    /// copied with `git clone --mirror --no-local` so nothing is shared with it.
    pub fn from_repository(repository: &Path) -> Self {
        let remote = Self::unborn();
        git_in(
            &remote.root,
            &[
                "clone",
                "-q",
                "--mirror",
                "--no-local",
                path_str(repository),
                path_str(&remote.path),
            ],
        );
        git_in(&remote.path, &["remote", "remove", "origin"]);
        remote.configure();
        remote
    }

    fn unborn() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("sf-git-remote-")
            .tempdir()
            .expect("temporary directory for a remote");
        let base = dir
            .path()
            .canonicalize()
            .expect("canonical temporary directory");
        let root = base.join("root");
        let control = base.join("control");
        std::fs::create_dir(&root).expect("mkdir root");
        std::fs::create_dir(&control).expect("mkdir control");
        let path = root.join(format!("{REMOTE_NAME}.git"));
        Self {
            _dir: dir,
            root,
            path,
            control,
        }
    }

    fn configure(&self) {
        for (key, value) in [
            ("receive.advertiseAtomic", "true"),
            ("daemon.receivepack", "true"),
            ("http.receivepack", "true"),
            ("receive.autogc", "false"),
            ("gc.auto", "0"),
        ] {
            self.git(&["config", key, value]);
        }
    }

    /// The repository's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory the repository is in: the base path of a [`GitDaemon`], the project
    /// root of an [`HttpGit`].
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The name servers of [`BareRemote::root`] know the repository by ([`REMOTE_NAME`]).
    pub fn name(&self) -> &'static str {
        REMOTE_NAME
    }

    /// `file:///…/remote.git`.
    pub fn file_url(&self) -> String {
        format!("file://{}", self.path.display())
    }

    /// Runs the server's Git in the repository (no hooks: `core.hooksPath` is pointed at an
    /// empty directory) and returns its stdout without the trailing newline.
    pub fn git(&self, args: &[&str]) -> String {
        let no_hooks = format!("core.hooksPath={}", self.no_hooks_dir().display());
        let mut all = vec!["-c", &no_hooks];
        all.extend_from_slice(args);
        git_in(&self.path, &all)
    }

    fn no_hooks_dir(&self) -> PathBuf {
        let dir = self.control.join("no-hooks");
        std::fs::create_dir_all(&dir).expect("mkdir no-hooks");
        dir
    }

    /// The object id `name` (a full ref name such as `refs/heads/main`, or `HEAD`) points at,
    /// or `None` when there is no such ref. A symbolic ref is followed; a tag is not peeled.
    pub fn read_ref(&self, name: &str) -> Option<String> {
        if name == "HEAD" {
            let output = git_command(server_git())
                .current_dir(&self.path)
                .args(["rev-parse", "--verify", "-q", "HEAD"])
                .output()
                .expect("running git rev-parse");
            return output
                .status
                .success()
                .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned());
        }
        // `for-each-ref` takes the name as a pattern (it also lists refs below it); only the
        // exact name counts.
        self.git(&[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "--",
            name,
        ])
        .lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(refname, _)| *refname == name)
        .map(|(_, oid)| oid.to_owned())
    }

    /// Every ref as (name, object id), sorted by name.
    pub fn refs(&self) -> Vec<(String, String)> {
        self.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
            .lines()
            .filter_map(|line| line.split_once(' '))
            .map(|(name, oid)| (name.to_owned(), oid.to_owned()))
            .collect()
    }

    /// Points `name` at `oid` (creating it), with no hook run.
    pub fn set_ref(&self, name: &str, oid: &str) {
        self.git(&["update-ref", name, oid]);
    }

    /// Deletes `name`, with no hook run.
    pub fn delete_ref(&self, name: &str) {
        self.git(&["update-ref", "-d", name]);
    }

    /// Writes `script` (a whole script, `#!/bin/sh` line included) as the hook `name` and
    /// makes it executable, replacing any hook of that name.
    pub fn install_hook(&self, name: &str, script: &str) {
        let hooks = self.path.join("hooks");
        std::fs::create_dir_all(&hooks).expect("mkdir hooks");
        let path = hooks.join(name);
        // Written beside and renamed, so a push running the old hook never reads half of it.
        let staged = hooks.join(format!(".{name}.new"));
        std::fs::write(&staged, script).expect("writing a hook");
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))
            .expect("chmod a hook");
        std::fs::rename(&staged, &path).expect("installing a hook");
    }

    /// Counts pushes from now on: each `receive-pack` that commits at least one ref update
    /// appends one line (its pid and start time) to a log, however many refs it updates
    /// (an atomic push commits one transaction, a non-atomic one a transaction per ref). A
    /// push that updates nothing (up to date, rejected by the client's lease check or by a
    /// hook) writes nothing. A push dropped by [`BareRemote::accept_then_drop`] is counted:
    /// its refs moved.
    pub fn count_pushes(&self) {
        std::fs::write(self.control.join("count"), b"").expect("writing a flag");
        self.install_reference_transaction_hook();
    }

    /// How many pushes [`BareRemote::count_pushes`] has seen.
    pub fn push_count(&self) -> usize {
        match std::fs::read_to_string(self.control.join("pushes.log")) {
            Ok(log) => log.lines().collect::<HashSet<_>>().len(),
            Err(_) => 0,
        }
    }

    /// Refuses every push from now on: a `pre-receive` hook that prints `message` (so the
    /// client shows `remote: <message>`) and exits 1; each ref is then reported
    /// `[remote rejected] (pre-receive hook declined)` and none moves.
    pub fn refuse_pushes(&self, message: &str) {
        let script = format!(
            "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' {} >&2\nexit 1\n",
            shell_quote(message)
        );
        self.install_hook("pre-receive", &script);
    }

    /// Makes every push from now on hang for `duration` (in whole seconds, at least one)
    /// after the client has sent its pack: a `pre-receive` hook that sleeps. If it wakes,
    /// the push goes on and succeeds (a slow server); killed before, it refuses.
    /// `receive.keepAlive` is set to 0 so `receive-pack` sends nothing meanwhile (by default
    /// it sends an empty side-band packet every 5 seconds while a hook runs, and the server
    /// would not look stopped). Each sleeping hook's pid is recorded, and the guard kills
    /// those still sleeping when it is dropped, whichever transport started them.
    pub fn hang_pushes(&self, duration: Duration) {
        self.git(&["config", "receive.keepAlive", "0"]);
        let pids = self.control.join("hung.pids");
        let script = format!(
            "#!/bin/sh\ncat >/dev/null\necho $$ >> {}\nexec sleep {}\n",
            shell_quote(path_str(&pids)),
            duration.as_secs().max(1)
        );
        self.install_hook("pre-receive", &script);
    }

    /// Makes every push from now on succeed on the server and fail on the client: once
    /// `receive-pack` has committed the ref updates (the `reference-transaction` hook's
    /// `committed` call, made before any report is sent), the hook kills `receive-pack`
    /// (`kill -9 $PPID`, after checking that its parent is `receive-pack`), so the
    /// connection ends with no report-status.
    ///
    /// Observed with git 2.47.3 on the server and 2.47.3 or 2.39.5 as the client, on every
    /// transport (and asserted by the tests): the server's refs moved, and the client
    /// prints no status line at all (neither `ok` nor a rejection), and exits with an error:
    /// - file:// and git://: exit 128, stdout empty, stderr `send-pack: unexpected
    ///   disconnect while reading sideband packet` then `fatal: the remote end hung up
    ///   unexpectedly` (on file://, preceded by `Killed` from the shell the client ran
    ///   `git-receive-pack` under).
    /// - HTTP ([`HttpGit`] ends a response whose CGI failed without the last chunk): exit 1,
    ///   stdout `Done` alone, stderr `error: RPC failed; curl 18 transfer closed with
    ///   outstanding read data remaining`, `send-pack: unexpected disconnect while reading
    ///   sideband packet`, `fatal: the remote end hung up unexpectedly`.
    ///
    /// With a non-atomic push of several refs only the first ref's transaction is
    /// committed before the kill: the first ref moves, the others do not.
    pub fn accept_then_drop(&self) {
        std::fs::write(self.control.join("drop"), b"").expect("writing a flag");
        self.install_reference_transaction_hook();
    }

    fn install_reference_transaction_hook(&self) {
        let control = shell_quote(path_str(&self.control));
        let script = format!(
            "#!/bin/sh\n\
             # Only a receive-pack's committed transactions: not the helpers', nor a gc's.\n\
             [ \"$1\" = committed ] || exit 0\n\
             cat >/dev/null\n\
             case \"$(tr '\\000' ' ' < /proc/$PPID/cmdline)\" in\n\
             *receive-pack*) ;;\n\
             *) exit 0 ;;\n\
             esac\n\
             control={control}\n\
             if [ -e \"$control/count\" ]; then\n\
             \x20   echo \"$PPID $(cut -d' ' -f22 /proc/$PPID/stat)\" >> \"$control/pushes.log\"\n\
             fi\n\
             if [ -e \"$control/drop\" ]; then\n\
             \x20   kill -9 \"$PPID\"\n\
             fi\n\
             exit 0\n"
        );
        self.install_hook("reference-transaction", &script);
    }
}

impl Drop for BareRemote {
    fn drop(&mut self) {
        // Hooks of `hang_pushes` still sleeping: each recorded its pid, then exec'd `sleep`;
        // a pid whose command line is no longer `sleep` has been reused and is left alone.
        let Ok(pids) = std::fs::read_to_string(self.control.join("hung.pids")) else {
            return;
        };
        let asleep = |pid: i32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .starts_with(b"sleep\0")
        };
        let hung: Vec<i32> = pids
            .lines()
            .filter_map(|line| line.trim().parse::<i32>().ok())
            .filter(|pid| asleep(*pid))
            .collect();
        for pid in &hung {
            let _ = nix::sys::signal::kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        // Gone (a zombie has no command line) before the guard returns.
        let started = Instant::now();
        while hung.iter().any(|pid| asleep(*pid)) && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// `path` as UTF-8 (every path here is under a temporary directory, which is).
fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// `text` quoted for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A loopback TCP server: an accept loop on its own thread and a thread per connection
/// running `handler`. Dropping it stops accepting, shuts every open connection down (so a
/// handler blocked on the socket returns), runs `on_stop` (for what a handler may block on
/// besides the socket), and joins every thread.
pub(crate) struct LoopbackServer {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    connections: Arc<Mutex<Connections>>,
    acceptor: Option<JoinHandle<()>>,
    on_stop: Box<dyn Fn() + Send + Sync>,
}

#[derive(Default)]
struct Connections {
    next: u64,
    open: Vec<(u64, TcpStream)>,
    threads: Vec<JoinHandle<()>>,
}

impl LoopbackServer {
    pub(crate) fn start(
        handler: Arc<dyn Fn(TcpStream) + Send + Sync>,
        on_stop: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let addr = listener.local_addr().expect("the listener's address");
        let stopping = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(Mutex::new(Connections::default()));
        let acceptor = {
            let stopping = Arc::clone(&stopping);
            let accepted = Arc::clone(&accepted);
            let connections = Arc::clone(&connections);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let Ok(registered) = stream.try_clone() else {
                        continue;
                    };
                    let mut table = connections.lock().expect("connections lock");
                    let id = table.next;
                    table.next += 1;
                    table.open.push((id, registered));
                    let handler = Arc::clone(&handler);
                    let connections = Arc::clone(&connections);
                    let thread = std::thread::spawn(move || {
                        handler(stream);
                        // The registered clone would keep the socket open: the peer sees
                        // the end only once it is gone too.
                        let mut table = connections.lock().expect("connections lock");
                        if let Some(at) = table.open.iter().position(|(open, _)| *open == id) {
                            let (_, stream) = table.open.swap_remove(at);
                            let _ = stream.shutdown(Shutdown::Both);
                        }
                    });
                    table.threads.push(thread);
                }
            })
        };
        Self {
            addr,
            stopping,
            accepted,
            connections,
            acceptor: Some(acceptor),
            on_stop,
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which sees the flag and returns, dropping the listener.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let threads = {
            let mut table = self.connections.lock().expect("connections lock");
            for (_, stream) in &table.open {
                let _ = stream.shutdown(Shutdown::Both);
            }
            std::mem::take(&mut table.threads)
        };
        (self.on_stop)();
        for thread in threads {
            let _ = thread.join();
        }
    }
}

/// Reads and discards from `stream` until the peer closes it or it is shut down.
pub(crate) fn drain(mut stream: &TcpStream) {
    let mut sink = [0u8; 8192];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}
