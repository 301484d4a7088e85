//! One long-lived `git cat-file --batch-command --buffer`: a process that answers many reads,
//! so that an operation reading a tree level by level pays for one Git start instead of one
//! per level.
//!
//! A read writes one `contents <id>` command per id and a `flush`, and parses the answers (in
//! `--batch`'s format) as they arrive, with non-blocking
//! pipes and `poll`, so that a large request cannot deadlock against a full output pipe and
//! the deadline holds while Git is silent. Every answer is checked as [`crate::batch`] checks
//! it (re-hashed against the id it answers). The output of one read is bounded by its
//! budget. A read that fails in any way (timeout, budget, malformed answer, Git gone) leaves
//! the process in a state nothing can trust, so the caller drops it, which kills it with its
//! process group and reaps it; the next read starts a fresh one.
//!
//! The reader knows nothing of ownership: the store checks the root before each read is
//! sent and after its answers are in, before it accepts them.

use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use sf_contracts::git_object::ObjectId;
use sf_contracts::{ObjectStoreError, StoredObject};
use sf_git::process::kill_and_reap;

use crate::batch;

/// Stderr bytes kept for an error report; the rest is drained and dropped.
const STDERR_KEPT_BYTES: usize = 16 * 1024;

/// Stderr bytes shown in an error.
const STDERR_REPORTED_BYTES: usize = 1024;

/// The most bytes taken from stdout per `read` call.
const READ_CHUNK: usize = 64 * 1024;
/// The room asked for in the pipe of Git's answers (the most an unprivileged process may ask
/// for by default).
const PIPE_BYTES: i32 = 1 << 20;

/// Parsed bytes are dropped from the front of the buffer once this many have accumulated, so
/// that a long answer stream is not copied once per answer.
const COMPACT_AFTER: usize = 1 << 20;

/// How long a Git whose output ended is given to exit before it is killed, so that its exit
/// status can be reported.
const EXIT_GRACE: Duration = Duration::from_millis(100);

/// Why a read failed. Each leaves the process unusable.
#[derive(Debug)]
pub(crate) enum ReadFailure {
    /// The deadline passed before every answer was in.
    TimedOut,
    /// Git wrote more than the budget allows.
    OverBudget,
    /// An answer broke the format or did not hash to its id (`corrupt`).
    Malformed(ObjectStoreError),
    /// Git stopped reading or writing: how it ended, with its stderr.
    Ended(String),
}

/// A running `git cat-file --batch-command --buffer`.
pub(crate) struct BatchReader {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Output read but not yet parsed (from `start`).
    buffer: Vec<u8>,
    start: usize,
    /// Where each `read` of stdout lands, allocated once.
    chunk: Vec<u8>,
}

impl std::fmt::Debug for BatchReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchReader")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl BatchReader {
    /// Starts `command` (a hardened `git cat-file --batch-command --buffer` with every stream
    /// piped).
    pub(crate) fn spawn(mut command: std::process::Command) -> std::io::Result<Self> {
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            kill_and_reap(&mut child);
            return Err(std::io::Error::other("a standard stream was not piped"));
        };
        let reader = Self {
            child,
            stdin,
            stdout,
            stderr: Arc::new(Mutex::new(Vec::new())),
            buffer: Vec::new(),
            start: 0,
            chunk: vec![0; READ_CHUNK],
        };
        for fd in [reader.stdin.as_raw_fd(), reader.stdout.as_raw_fd()] {
            fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(std::io::Error::from)?;
        }
        // Git writes its answers a few KiB at a time: with room for a megabyte in the pipe it
        // runs ahead of the reader instead of waking it (and waiting for it) at every write.
        // Only a speed: a system that allows less keeps the default pipe.
        let _ = fcntl(
            reader.stdout.as_raw_fd(),
            FcntlArg::F_SETPIPE_SZ(PIPE_BYTES),
        );
        let kept = Arc::clone(&reader.stderr);
        // Ends when Git's stderr closes, that is when Git ends (it is killed on drop at the
        // latest).
        thread::spawn(move || drain_stderr(stderr, &kept));
        Ok(reader)
    }

    /// Whether the process is still running (a reader whose Git ended is not reused).
    pub(crate) fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Reads `ids` (distinct), their answers together within `budget` bytes of output, by
    /// `deadline`. Answers come back in the order of `ids`, each checked and re-hashed.
    pub(crate) fn read(
        &mut self,
        ids: &[ObjectId],
        budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ReadFailure> {
        if self.start != self.buffer.len() {
            return Err(ReadFailure::Malformed(crate::errors::corrupt(
                "git cat-file wrote output no read asked for",
            )));
        }
        self.buffer.clear();
        self.start = 0;
        // `--buffer`: Git runs the commands and writes their answers when it reads the
        // flush, in large writes instead of one per object.
        let mut request = Vec::with_capacity(ids.len() * 50 + 6);
        for id in ids {
            request.extend_from_slice(b"contents ");
            request.extend_from_slice(id.to_hex().as_bytes());
            request.push(b'\n');
        }
        request.extend_from_slice(b"flush\n");
        let mut sent = 0usize;
        let mut received = 0u64;
        let mut answers = Vec::with_capacity(ids.len());
        loop {
            while let Some(id) = ids.get(answers.len()) {
                match batch::parse_next(id, &self.buffer[self.start..]) {
                    Ok(Some((answer, used))) => {
                        answers.push(answer);
                        self.start += used;
                    }
                    Ok(None) => break,
                    Err(error) => return Err(ReadFailure::Malformed(error)),
                }
            }
            if answers.len() == ids.len() {
                if self.start != self.buffer.len() {
                    return Err(ReadFailure::Malformed(crate::errors::corrupt(format!(
                        "git cat-file wrote {} bytes after the last answer",
                        self.buffer.len() - self.start
                    ))));
                }
                return Ok(answers);
            }
            if self.start >= COMPACT_AFTER {
                self.buffer.drain(..self.start);
                self.start = 0;
            }
            let writing = sent < request.len();
            let (readable, writable) = self.wait(writing, deadline)?;
            if writable {
                match self.stdin.write(&request[sent..]) {
                    Ok(written) => sent += written,
                    Err(error) if would_block(&error) => {}
                    Err(_) => return Err(self.ended("stopped reading its input")),
                }
            }
            if readable {
                self.take_output(&mut received, budget)?;
            }
        }
    }

    /// Moves what Git has written so far into the buffer, counting it against `budget`.
    fn take_output(&mut self, received: &mut u64, budget: u64) -> Result<(), ReadFailure> {
        loop {
            match self.stdout.read(&mut self.chunk) {
                Ok(0) => return Err(self.ended("closed its output")),
                Ok(read) => {
                    *received += read as u64;
                    if *received > budget {
                        return Err(ReadFailure::OverBudget);
                    }
                    self.buffer.extend_from_slice(&self.chunk[..read]);
                    if read < self.chunk.len() {
                        return Ok(());
                    }
                }
                Err(error) if would_block(&error) => return Ok(()),
                Err(_) => return Err(self.ended("output could not be read")),
            }
        }
    }

    /// Waits until stdout is readable (or closed) or, while `writing`, stdin writable, or the
    /// deadline passes.
    fn wait(&self, writing: bool, deadline: Instant) -> Result<(bool, bool), ReadFailure> {
        let now = Instant::now();
        if now >= deadline {
            return Err(ReadFailure::TimedOut);
        }
        let millis = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
        let mut fds = vec![PollFd::new(self.stdout.as_fd(), PollFlags::POLLIN)];
        if writing {
            fds.push(PollFd::new(self.stdin.as_fd(), PollFlags::POLLOUT));
        }
        match poll(
            &mut fds,
            PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok((false, false)),
            Err(_) => return Err(ReadFailure::Ended("its pipes could not be polled".into())),
        }
        let ready = |fd: &PollFd<'_>, wanted: PollFlags| {
            fd.revents().is_some_and(|events| {
                events.intersects(wanted | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        };
        let readable = ready(&fds[0], PollFlags::POLLIN);
        let writable = fds.get(1).is_some_and(|fd| ready(fd, PollFlags::POLLOUT));
        Ok((readable, writable))
    }

    /// How Git ended, with its stderr, once its pipes say it stopped.
    fn ended(&mut self, what: &str) -> ReadFailure {
        let grace = Instant::now() + EXIT_GRACE;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < grace => thread::sleep(Duration::from_millis(1)),
                _ => break None,
            }
        };
        let how = match status.map(|status| status.code()) {
            Some(Some(code)) => format!("{what} and exited {code}"),
            Some(None) => format!("{what} and was killed by a signal"),
            None => format!("{what} and did not exit"),
        };
        let stderr = self.stderr();
        ReadFailure::Ended(if stderr.is_empty() {
            how
        } else {
            format!("{how}: {stderr}")
        })
    }

    /// Stderr so far, trimmed to [`STDERR_REPORTED_BYTES`] at a character boundary.
    fn stderr(&self) -> String {
        let kept = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let text = String::from_utf8_lossy(&kept);
        let text = text.trim();
        let mut end = text.len().min(STDERR_REPORTED_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end < text.len() {
            format!("{}…", &text[..end])
        } else {
            text.to_owned()
        }
    }
}

impl Drop for BatchReader {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

fn would_block(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}

/// Keeps the first [`STDERR_KEPT_BYTES`] of `pipe` in `kept` and drops the rest, until the
/// pipe closes.
fn drain_stderr(mut pipe: impl Read, kept: &Mutex<Vec<u8>>) {
    let mut chunk = [0u8; 4096];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return,
            Ok(read) => {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                let room = STDERR_KEPT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..read.min(room)]);
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
