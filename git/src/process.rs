//! Running the pinned Git binary: the hardening shared by the git-cli ObjectStore plugin and
//! the host's read-only source reader ([`crate::git_source`]). Neither the subcommands nor
//! their arguments live here (each user keeps its own fixed list); what lives here is what
//! must be the same for both: which binary (root-owned, writable by no one else, every
//! directory above it too), the `-c` settings that switch off hooks, fsmonitor, reflogs, gc,
//! maintenance, replace refs, transports and credential helpers, the cleared environment
//! whose HOME is an empty private directory (so no user configuration, hook or credential helper reaches it), and the bounds: input
//! written from a thread, stdout and stderr drained by threads with byte caps, and a
//! wall-clock deadline that kills (SIGKILL) and reaps the process.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use sf_contracts::canonical::Digest;

/// Where Git is looked for when no path is configured, in order.
pub const DEFAULT_GIT_PATHS: &[&str] = &["/usr/bin/git", "/usr/local/bin/git"];

/// The largest Git binary digested (a real one is a few MiB).
const GIT_MAX_BYTES: u64 = 512 * 1024 * 1024;

/// A Git binary that passed the checks, and the SHA-256 of its bytes when it did.
#[derive(Debug, Clone)]
pub struct PinnedGit {
    /// The binary's path, as checked.
    pub path: PathBuf,
    /// The SHA-256 of its bytes when it was checked.
    pub digest: Digest,
}

/// Resolves `configured` (or the first of [`DEFAULT_GIT_PATHS`] that exists), checks that it
/// and every directory above it are root's and writable by no one else, and digests it. The
/// error is a sentence naming the path at fault and the rule.
pub fn pin_git(configured: Option<&Path>) -> Result<PinnedGit, String> {
    let at = |path: &Path, rule: &str| format!("{}: {rule}", path.display());
    let named = match configured {
        Some(path) => path.to_path_buf(),
        None => DEFAULT_GIT_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|path| path.symlink_metadata().is_ok())
            .ok_or_else(|| {
                format!(
                    "no git binary at {}; name one in the configuration",
                    DEFAULT_GIT_PATHS.join(" or ")
                )
            })?,
    };
    let path = std::fs::canonicalize(&named)
        .map_err(|_| at(&named, "the git binary must exist and resolve"))?;
    // The file is checked and read through one descriptor, so the bytes digested are the
    // bytes of the file that passed.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&path)
        .map_err(|_| at(&path, "the git binary must be readable"))?;
    let meta = file
        .metadata()
        .map_err(|_| at(&path, "the git binary cannot be examined"))?;
    if !meta.file_type().is_file() {
        return Err(at(&path, "the git binary must be a regular file"));
    }
    if meta.uid() != 0 {
        return Err(at(&path, "the git binary must be owned by root (uid 0)"));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(at(
            &path,
            "the git binary must not be writable by group or others",
        ));
    }
    for dir in path.ancestors().skip(1) {
        let meta = std::fs::symlink_metadata(dir)
            .map_err(|_| at(dir, "a directory above the git binary cannot be examined"))?;
        if !meta.file_type().is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            return Err(at(
                dir,
                "every directory above the git binary must be root's and not writable by group \
                 or others",
            ));
        }
    }
    let mut bytes = Vec::new();
    file.take(GIT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| at(&path, "the git binary must be readable"))?;
    if bytes.len() as u64 > GIT_MAX_BYTES {
        return Err(at(&path, "the git binary is larger than 512 MiB"));
    }
    Ok(PinnedGit {
        digest: Digest::of(&bytes),
        path,
    })
}

/// Configuration repeated on every command line, so that the owned config is never the only
/// thing keeping Git's code-running features off.
pub const COMMAND_CONFIG: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.fsync=all",
    "core.logAllRefUpdates=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "core.useReplaceRefs=false",
    "protocol.allow=never",
    "core.sshCommand=false",
    "credential.helper=",
    "core.askPass=false",
];

/// The fixed environment besides `GIT_DIR` and `HOME`.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("PATH", "/usr/bin:/bin"),
    ("LC_ALL", "C"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_NO_LAZY_FETCH", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_ATTR_NOSYSTEM", "1"),
];

/// Stderr bytes kept; the rest is drained and dropped so that Git never blocks on it.
const STDERR_KEPT_BYTES: usize = 16 * 1024;

/// Stderr bytes reported in an error.
const STDERR_REPORTED_BYTES: usize = 1024;

/// How long output is still collected after Git ended at (or just before) its deadline.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// How a Git process ended.
#[derive(Debug)]
pub enum Ending {
    /// It exited (or was killed by a signal someone else sent) on its own.
    Exited(ExitStatus),
    /// The deadline passed; it was killed and reaped.
    TimedOut,
    /// It wrote more than the stdout cap; it was killed and reaped.
    OutputOverflow,
    /// Its output could not be read (a pipe failed); it was killed and reaped.
    OutputUnreadable,
}

/// The result of one Git process.
#[derive(Debug)]
pub struct GitRun {
    /// How the process ended.
    pub ending: Ending,
    /// Its standard output (at most the cap it was given).
    pub stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl GitRun {
    /// Whether Git exited 0 within its bounds.
    pub fn succeeded(&self) -> bool {
        matches!(&self.ending, Ending::Exited(status) if status.success())
    }

    /// Stderr as text, trimmed to [`STDERR_REPORTED_BYTES`] at a character boundary.
    pub fn stderr(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let text = text.trim();
        if text.len() <= STDERR_REPORTED_BYTES {
            return text.to_owned();
        }
        let mut end = STDERR_REPORTED_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    }

    /// A one-line account of how the process ended, for errors and `Unknown` reasons.
    pub fn describe_ending(&self) -> String {
        let stderr = self.stderr();
        let how = match &self.ending {
            Ending::Exited(status) => match status.code() {
                Some(code) => format!("exited {code}"),
                None => "was killed by a signal".to_owned(),
            },
            Ending::TimedOut => "timed out and was killed".to_owned(),
            Ending::OutputOverflow => "exceeded its output cap and was killed".to_owned(),
            Ending::OutputUnreadable => "output could not be read".to_owned(),
        };
        if stderr.is_empty() {
            how
        } else {
            format!("{how}: {stderr}")
        }
    }
}

/// Runs `git` with the shared `-c` settings then `args`, in a cleared environment (the fixed
/// [`ENVIRONMENT`], `GIT_DIR` = `git_dir`, `HOME` = `home`, which must be an empty private
/// directory), in `git_dir`, with `stdin` as input, at most `stdout_cap` bytes of output and
/// `deadline`. `Err` only when the process could not be started at all.
pub fn run_git(
    git: &Path,
    home: &Path,
    git_dir: &Path,
    args: &[String],
    stdin: Vec<u8>,
    stdout_cap: u64,
    deadline: Instant,
) -> std::io::Result<GitRun> {
    GitCall {
        git,
        home,
        git_dir,
        args,
        address_space: None,
        extra_env: &[],
    }
    .run(stdin, stdout_cap, deadline)
}

/// One Git process as [`run_git`] runs it, with a bound on its address space when it talks to
/// something hostile (a remote's endless advertisement makes the client grow without end).
#[derive(Debug, Clone, Copy)]
pub struct GitCall<'a> {
    /// The pinned binary.
    pub git: &'a Path,
    /// An empty private directory: Git's `HOME`.
    pub home: &'a Path,
    /// The repository, and the working directory.
    pub git_dir: &'a Path,
    /// The arguments after the shared `-c` settings.
    pub args: &'a [String],
    /// `RLIMIT_AS` of the process (and what it runs), in bytes; `None`: unbounded.
    pub address_space: Option<u64>,
    /// Variables set besides the fixed [`ENVIRONMENT`] (an SSH agent's socket for a push the
    /// user configured one for); never one of its names.
    pub extra_env: &'a [(String, String)],
}

impl GitCall<'_> {
    /// The command [`GitCall::run`] starts, for a caller that keeps the process running and
    /// talks to it itself (a long-lived `cat-file --batch-command`): the shared `-c` settings
    /// then the arguments, the cleared environment (the fixed [`ENVIRONMENT`], `GIT_DIR`,
    /// `HOME`, the extra variables), `git_dir` as working directory, a process group of its
    /// own, the address-space bound, and every standard stream piped. Whoever spawns it
    /// bounds, drains, kills and reaps it.
    pub fn command(&self) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut command = Command::new(self.git);
        for setting in COMMAND_CONFIG {
            command.arg("-c").arg(setting);
        }
        command
            .args(self.args)
            .env_clear()
            .env("GIT_DIR", self.git_dir)
            .env("HOME", self.home)
            .envs(ENVIRONMENT.iter().copied())
            .envs(
                self.extra_env
                    .iter()
                    .filter(|(name, _)| ENVIRONMENT.iter().all(|(fixed, _)| fixed != name))
                    .map(|(name, value)| (name.as_str(), value.as_str())),
            )
            .current_dir(self.git_dir)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(bytes) = self.address_space {
            // SAFETY: between fork and exec only async-signal-safe calls are made: setrlimit,
            // on values computed before the fork.
            unsafe {
                command.pre_exec(move || {
                    nix::sys::resource::setrlimit(
                        nix::sys::resource::Resource::RLIMIT_AS,
                        bytes,
                        bytes,
                    )
                    .map_err(std::io::Error::from)
                });
            }
        }
        command
    }

    /// Runs it: see [`run_git`]. The process leads a process group of its own, so that at the
    /// deadline (or the output cap) everything it started (a transport helper, a local
    /// receive-pack) is killed with it.
    pub fn run(
        self,
        stdin: Vec<u8>,
        stdout_cap: u64,
        deadline: Instant,
    ) -> std::io::Result<GitRun> {
        let mut command = self.command();
        let mut child = command.spawn()?;
        Ok(supervise(&mut child, stdin, stdout_cap, deadline))
    }
}

/// Feeds, drains and bounds a started child until it ends; the child is always reaped.
fn supervise(child: &mut Child, stdin: Vec<u8>, stdout_cap: u64, deadline: Instant) -> GitRun {
    let overflow = Arc::new(AtomicBool::new(false));
    if let Some(mut pipe) = child.stdin.take() {
        // Detached: it ends when the input is written or when Git's end closes the pipe.
        // A write error means Git stopped reading; how Git ended says why.
        thread::spawn(move || {
            let _ = pipe.write_all(&stdin);
        });
    }
    let (stdout_tx, stdout_rx) = mpsc::channel();
    if let Some(pipe) = child.stdout.take() {
        let overflow = Arc::clone(&overflow);
        thread::spawn(move || {
            let _ = stdout_tx.send(drain(pipe, stdout_cap, Some(&overflow)));
        });
    }
    let (stderr_tx, stderr_rx) = mpsc::channel();
    if let Some(pipe) = child.stderr.take() {
        thread::spawn(move || {
            let _ = stderr_tx.send(drain(pipe, STDERR_KEPT_BYTES as u64, None));
        });
    }

    // Git's stdout reaches its end when Git exits (or when the drain stops at the cap): wait
    // for that, up to the deadline, rather than poll for the exit. Most calls take a few
    // milliseconds, and a poll's sleeps would add as much again to each of them.
    let drained = stdout_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    let mut ending = wait_bounded(child, &overflow, deadline);
    let stdout = match drained {
        Ok(stdout) => stdout,
        Err(_) => {
            let grace = deadline
                .saturating_duration_since(Instant::now())
                .max(DRAIN_GRACE);
            stdout_rx.recv_timeout(grace).ok().flatten()
        }
    };
    let stderr = stderr_rx.recv_timeout(DRAIN_GRACE).ok().flatten();
    if overflow.load(Ordering::SeqCst) {
        ending = Ending::OutputOverflow;
    }
    let stdout = match stdout {
        Some(bytes) => bytes,
        None => {
            if matches!(ending, Ending::Exited(_)) {
                ending = Ending::OutputUnreadable;
            }
            Vec::new()
        }
    };
    GitRun {
        ending,
        stdout,
        stderr: stderr.unwrap_or_default(),
    }
}

/// Polls the child with a short backoff until it exits, overflows or passes the deadline.
/// Called once its stdout ended, when it is usually exiting already: the first pauses are
/// short.
fn wait_bounded(child: &mut Child, overflow: &AtomicBool, deadline: Instant) -> Ending {
    let mut pause = Duration::from_micros(50);
    loop {
        if overflow.load(Ordering::SeqCst) {
            kill_and_reap(child);
            return Ending::OutputOverflow;
        }
        match child.try_wait() {
            Ok(Some(status)) => return Ending::Exited(status),
            Ok(None) => {}
            Err(_) => {
                kill_and_reap(child);
                return Ending::OutputUnreadable;
            }
        }
        let now = Instant::now();
        if now >= deadline {
            kill_and_reap(child);
            return Ending::TimedOut;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// SIGKILL to its process group (everything it started), then wait so that no zombie is
/// left. Errors mean it already ended. For a process started from [`GitCall::command`], which
/// leads its own group.
pub fn kill_and_reap(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads `pipe` to its end keeping at most `cap` bytes. With `overflow`, going past the cap
/// raises the flag and stops reading (the supervisor kills Git); without it, the excess is
/// drained and dropped. `None` when the pipe failed.
fn drain(mut pipe: impl Read, cap: u64, overflow: Option<&AtomicBool>) -> Option<Vec<u8>> {
    let mut kept = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match pipe.read(&mut buffer) {
            Ok(0) => return Some(kept),
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        let room = usize::try_from(cap.saturating_sub(kept.len() as u64)).unwrap_or(usize::MAX);
        if read > room {
            kept.extend_from_slice(&buffer[..room]);
            if let Some(flag) = overflow {
                flag.store(true, Ordering::SeqCst);
                return Some(kept);
            }
        } else {
            kept.extend_from_slice(&buffer[..read]);
        }
    }
}
