//! Spawning Git: the one place a Git process starts, with a fixed surface and hard bounds.
//!
//! Only four subcommands run, each with a fixed argument list, under `-c` settings that switch
//! off hooks, fsmonitor, reflogs, gc, maintenance, replace refs, transports and credential
//! helpers, in a cleared environment whose HOME is an empty private directory (seed 001,
//! invariant 13). Input is written from a thread, stdout and stderr are drained by threads
//! with byte caps, and a wall-clock deadline kills (SIGKILL) and reaps the process. The
//! runner knows nothing of ownership: callers check it before and after [`GitRunner::run`].

use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use sf_host::contracts::{ObjectStoreError, RefName};
use sf_host::git_object::ObjectId;

/// Configuration repeated on every command line, so that the owned config is never the only
/// thing keeping Git's code-running features off.
const COMMAND_CONFIG: &[&str] = &[
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
const ENVIRONMENT: &[(&str, &str)] = &[
    ("PATH", "/usr/bin:/bin"),
    ("LC_ALL", "C"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
    ("GIT_NO_LAZY_FETCH", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_ATTR_NOSYSTEM", "1"),
];

/// The `for-each-ref` format: name, symbolic target and object, NUL-separated because none of
/// them can hold a NUL.
pub(crate) const REF_FORMAT: &str = "--format=%(refname)%00%(symref)%00%(objectname)";

/// Stderr bytes kept; the rest is drained and dropped so that Git never blocks on it.
const STDERR_KEPT_BYTES: usize = 16 * 1024;

/// Stderr bytes reported in an error.
const STDERR_REPORTED_BYTES: usize = 1024;

/// How long output is still collected after Git ended at (or just before) its deadline.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// The only Git invocations this store makes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subcommand<'a> {
    /// `unpack-objects --strict -q`, reading a pack on stdin.
    UnpackObjects,
    /// `cat-file --batch`, reading object ids on stdin.
    CatFileBatch,
    /// `update-ref --no-deref <name> <new> <old>`; `old` zero means "must be absent".
    UpdateRef {
        name: &'a RefName,
        new: &'a ObjectId,
        old: &'a ObjectId,
    },
    /// `for-each-ref --format=... <pattern>`; the pattern is a validated ref name or prefix.
    ForEachRef { pattern: &'a str },
}

impl Subcommand<'_> {
    fn args(&self) -> Vec<String> {
        match self {
            Self::UnpackObjects => vec!["unpack-objects".into(), "--strict".into(), "-q".into()],
            Self::CatFileBatch => vec!["cat-file".into(), "--batch".into()],
            Self::UpdateRef { name, new, old } => vec![
                "update-ref".into(),
                "--no-deref".into(),
                name.as_str().into(),
                new.to_hex(),
                old.to_hex(),
            ],
            Self::ForEachRef { pattern } => {
                vec!["for-each-ref".into(), REF_FORMAT.into(), (*pattern).into()]
            }
        }
    }

    /// How the command is named in errors and reasons.
    pub(crate) fn describe(&self) -> String {
        format!("git {}", self.args().join(" "))
    }
}

/// How a Git process ended.
#[derive(Debug)]
pub(crate) enum Ending {
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
pub(crate) struct GitRun {
    pub(crate) ending: Ending,
    pub(crate) stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl GitRun {
    /// Whether Git exited 0 within its bounds.
    pub(crate) fn succeeded(&self) -> bool {
        matches!(&self.ending, Ending::Exited(status) if status.success())
    }

    /// Stderr as text, trimmed to [`STDERR_REPORTED_BYTES`] at a character boundary.
    pub(crate) fn stderr(&self) -> String {
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
    pub(crate) fn describe_ending(&self) -> String {
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

/// Runs the pinned Git binary with a private empty HOME.
#[derive(Debug, Clone)]
pub(crate) struct GitRunner {
    git: PathBuf,
    home: Arc<tempfile::TempDir>,
}

impl GitRunner {
    pub(crate) fn new(git: PathBuf, home: Arc<tempfile::TempDir>) -> Self {
        Self { git, home }
    }

    /// Runs `subcommand` in `root` with `stdin` as input, at most `stdout_cap` bytes of output
    /// and `deadline`. `Err` only when the process could not be started at all.
    pub(crate) fn run(
        &self,
        root: &Path,
        subcommand: &Subcommand<'_>,
        stdin: Vec<u8>,
        stdout_cap: u64,
        deadline: Instant,
    ) -> Result<GitRun, ObjectStoreError> {
        let mut command = Command::new(&self.git);
        for setting in COMMAND_CONFIG {
            command.arg("-c").arg(setting);
        }
        command
            .args(subcommand.args())
            .env_clear()
            .env("GIT_DIR", root)
            .env("HOME", self.home.path())
            .envs(ENVIRONMENT.iter().copied())
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|error| ObjectStoreError::Unavailable {
                reason: format!(
                    "{}: could not start {}: {error}",
                    self.git.display(),
                    subcommand.describe()
                ),
            })?;
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

    let mut ending = wait_bounded(child, &overflow, deadline);
    let grace = deadline
        .saturating_duration_since(Instant::now())
        .max(DRAIN_GRACE);
    let stdout = stdout_rx.recv_timeout(grace).ok().flatten();
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
fn wait_bounded(child: &mut Child, overflow: &AtomicBool, deadline: Instant) -> Ending {
    let mut pause = Duration::from_millis(1);
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

/// SIGKILL, then wait so that no zombie is left. Errors mean it already ended.
fn kill_and_reap(child: &mut Child) {
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
