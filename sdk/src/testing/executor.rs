//! A scripted Executor: it runs nothing, records every request, and answers either with
//! results scripted in advance or, when none is queued, by interpreting the entry file as a
//! tiny program, so that it passes the same conformance suite as a real Executor.
//!
//! The entry file's lines, in order:
//!
//! | line | effect |
//! |---|---|
//! | `out <text>` | `<text>` and a newline on stdout |
//! | `err <text>` | `<text>` and a newline on stderr |
//! | `arg <n>` | argument `n` (from 0) and a newline on stdout |
//! | `cat-input <path>` | the input file's bytes on stdout |
//! | `flood` | stdout without end (the run stops at the stdout limit) |
//! | `sleep` | nothing more happens until the timeout or a cancellation (in real time) |
//! | `signal <n>` | the run ends by signal `n` |
//! | `exit <n>` | the run ends with exit code `n` |
//! | `hit <limit> <value> <detail>` | the answer states that the run hit `limit` (a word of `Limit`), whose value was `value`, as `detail` says |
//!
//! Output past a limit ends the run with `output-limit` and exactly the limit's bytes, as
//! the contract says. A program that ends without `exit` or `signal` exits 0.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sf_contracts::canonical::Digest;
use sf_contracts::{
    CancelToken, Enforcement, EntryPlace, Executor, ExecutorError, Limit, LimitHit,
    NamespaceDisposition, ProfileDescription, ReadableKind, ReadablePath, RequestDigests,
    RunAnswer, RunIdentities, RunRequest, RunStatus, RunTimes, RuntimeDescription,
};

/// One scripted outcome of a run that started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedRun {
    /// How the run ended.
    pub status: RunStatus,
    /// The exit code, kept only when `status` is exited.
    pub exit_code: Option<i32>,
    /// The signal, kept only when `status` is signalled.
    pub signal: Option<i32>,
    /// stdout (cut to the request's limit, which makes the status output-limit).
    pub stdout: Vec<u8>,
    /// stderr (likewise).
    pub stderr: Vec<u8>,
    /// The Executor's limits the run hit (stated in [`Limit`] order, each once).
    pub limits_hit: Vec<LimitHit>,
}

impl ScriptedRun {
    /// A run that exited with `code` after writing `stdout`.
    pub fn exited(code: i32, stdout: &[u8]) -> Self {
        Self {
            status: RunStatus::Exited,
            exit_code: Some(code),
            signal: None,
            stdout: stdout.to_vec(),
            stderr: Vec::new(),
            limits_hit: Vec::new(),
        }
    }
}

/// The scripted Executor. Identities are computed as a real Executor would (from the
/// request and its fixed descriptions); it states no enforcement fact, in its profile or in
/// its answers, because nothing is confined.
#[derive(Debug)]
pub struct ScriptedExecutor {
    runtime: RuntimeDescription,
    profile: ProfileDescription,
    script: Mutex<VecDeque<Result<ScriptedRun, ExecutorError>>>,
    requests: Mutex<Vec<RunRequest>>,
}

impl Default for ScriptedExecutor {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ScriptedExecutor {
    /// An executor with a fixed runtime (`/scripted/runtime`) and profile.
    pub fn new() -> Self {
        let recipe = br#"{"protocol":"sf-scripted-profile/1"}"#.to_vec();
        Self {
            runtime: RuntimeDescription {
                executable: PathBuf::from("/scripted/runtime"),
                readable: vec![ReadablePath {
                    path: PathBuf::from("/scripted/runtime"),
                    kind: ReadableKind::File,
                }],
                digest: Digest::of(b"sf-scripted-runtime/1"),
            },
            profile: ProfileDescription {
                digest: Digest::of(&recipe),
                recipe,
            },
            script: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Queues the outcome of the next run that gets past validation (an `Err` is returned
    /// as it is, as if nothing started).
    pub fn push(&self, outcome: Result<ScriptedRun, ExecutorError>) {
        lock(&self.script).push_back(outcome);
    }

    /// Every request that got past validation, in order.
    pub fn requests(&self) -> Vec<RunRequest> {
        lock(&self.requests).clone()
    }

    fn interpret(&self, request: &RunRequest, cancel: &CancelToken, start: Instant) -> ScriptedRun {
        let place = match (request.entry.place, &request.program_tree) {
            (EntryPlace::Program, Some(tree)) => &tree.layer,
            (EntryPlace::Program, None) => &request.program,
            (EntryPlace::Harness, _) => &request.harness,
        };
        let entry = place
            .iter()
            .find(|file| file.path == request.entry.path)
            .map(|file| file.content.clone())
            .or_else(|| {
                // A program by reference: an entry the layer does not hold is the base's.
                let tree = request.program_tree.as_ref()?;
                std::fs::read(tree.dir.join(&request.entry.path)).ok()
            })
            .map(|content| String::from_utf8_lossy(&content).into_owned())
            .unwrap_or_default();
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let mut hits = Vec::new();
        let ended =
            |status: RunStatus, stdout: Vec<u8>, stderr: Vec<u8>, hits: &mut Vec<LimitHit>| {
                ScriptedRun {
                    status,
                    exit_code: None,
                    signal: None,
                    stdout,
                    stderr,
                    limits_hit: std::mem::take(hits),
                }
            };
        for line in entry.lines() {
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            match word {
                "out" => {
                    stdout.extend_from_slice(rest.as_bytes());
                    stdout.push(b'\n');
                }
                "err" => {
                    stderr.extend_from_slice(rest.as_bytes());
                    stderr.push(b'\n');
                }
                "arg" => {
                    if let Some(arg) = rest.parse::<usize>().ok().and_then(|n| request.args.get(n))
                    {
                        stdout.extend_from_slice(arg.as_bytes());
                        stdout.push(b'\n');
                    }
                }
                "cat-input" => {
                    if let Some(file) = request.input.iter().find(|file| file.path == rest) {
                        stdout.extend_from_slice(&file.content);
                    }
                }
                "flood" => {
                    let limit = request.bounds.stdout_limit as usize;
                    stdout.resize(limit + 1, b'x');
                }
                "sleep" => loop {
                    if cancel.is_cancelled() {
                        return ended(RunStatus::Aborted, stdout, stderr, &mut hits);
                    }
                    if start.elapsed() >= request.bounds.timeout {
                        return ended(RunStatus::TimedOut, stdout, stderr, &mut hits);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                },
                "signal" => {
                    return ScriptedRun {
                        signal: Some(rest.parse().unwrap_or(9)),
                        ..ended(RunStatus::Signalled, stdout, stderr, &mut hits)
                    };
                }
                "hit" => {
                    let mut parts = rest.splitn(3, ' ');
                    let hit = (parts.next().and_then(Limit::parse))
                        .zip(parts.next().and_then(|value| value.parse().ok()))
                        .and_then(|(limit, value)| {
                            LimitHit::new(limit, value, parts.next().unwrap_or("")).ok()
                        });
                    hits.extend(hit);
                }
                "exit" => {
                    return ScriptedRun {
                        exit_code: Some(rest.parse().unwrap_or(1)),
                        ..ended(RunStatus::Exited, stdout, stderr, &mut hits)
                    };
                }
                _ => {}
            }
        }
        ScriptedRun {
            exit_code: Some(0),
            ..ended(RunStatus::Exited, stdout, stderr, &mut hits)
        }
    }
}

impl Executor for ScriptedExecutor {
    fn describe_runtime(&self) -> Result<RuntimeDescription, ExecutorError> {
        Ok(self.runtime.clone())
    }

    fn profile(&self) -> Result<ProfileDescription, ExecutorError> {
        Ok(self.profile.clone())
    }

    fn run(&self, request: &RunRequest, cancel: &CancelToken) -> Result<RunAnswer, ExecutorError> {
        if cancel.is_cancelled() {
            return Err(ExecutorError::Aborted);
        }
        let RequestDigests {
            program,
            input,
            harness,
        } = request.check()?;
        if let Some(tree) = &request.program_tree {
            // The base is the directory the store verified, or nothing runs.
            let same = std::fs::symlink_metadata(&tree.dir).is_ok_and(|metadata| {
                use std::os::unix::fs::MetadataExt as _;
                metadata.is_dir() && metadata.dev() == tree.dev && metadata.ino() == tree.ino
            });
            if !same {
                return Err(ExecutorError::Unavailable {
                    mechanism: "program-tree".into(),
                    reason: format!(
                        "{} is not the directory the store verified",
                        tree.dir.display()
                    ),
                });
            }
        }
        let start = Instant::now();
        lock(&self.requests).push(request.clone());
        let scripted = lock(&self.script).pop_front();
        let mut run = match scripted {
            Some(outcome) => outcome?,
            None => self.interpret(request, cancel, start),
        };
        // Output past a limit ends the run, keeping exactly the limit's bytes.
        for (bytes, limit) in [
            (&mut run.stdout, request.bounds.stdout_limit),
            (&mut run.stderr, request.bounds.stderr_limit),
        ] {
            if bytes.len() as u64 > limit {
                bytes.truncate(limit as usize);
                run.status = RunStatus::OutputLimit;
            }
        }
        if !matches!(run.status, RunStatus::Exited) {
            run.exit_code = None;
        }
        if !matches!(run.status, RunStatus::Signalled) {
            run.signal = None;
        }
        // As the contract lists them: each limit once, in order.
        run.limits_hit.sort_by_key(LimitHit::limit);
        run.limits_hit.dedup_by_key(|hit| hit.limit());
        Ok(RunAnswer {
            remote: None,
            results: None,
            status: run.status,
            exit_code: run.exit_code,
            signal: run.signal,
            stdout: run.stdout,
            stderr: run.stderr,
            times: RunTimes {
                wall: start.elapsed(),
                ..RunTimes::default()
            },
            bounds: request.bounds,
            identities: RunIdentities {
                command: None,
                program,
                input,
                harness,
                runtime: self.runtime.digest.clone(),
                profile: self.profile.digest.clone(),
                bounds: request.bounds.digest(),
                enforcement: Enforcement::new(),
            },
            namespace: NamespaceDisposition::Reaped,
            problems: Vec::new(),
            limits_hit: run.limits_hit,
        })
    }
}
