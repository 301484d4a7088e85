//! The `executor` contract in the host: [`Executor`] over a loaded plugin (every trait method
//! is one call with the message of [`super::executor_protocol`], and every answer, error and
//! failure comes back as the trait's own value), and `[executor]` with its compiled-in
//! backends.
//!
//! # Cancellation
//!
//! The [`CancelToken`] lives in the host, the run in the plugin. While `run` is in flight, a
//! watcher thread of the adapter polls the token every [`CANCEL_TICK`]; once it is cancelled,
//! the watcher calls the instance's `cancel` method with the run's id (calls on one instance
//! may run concurrently), and the plugin cancels the run's own token. So cancellation reaches
//! the plugin within a tick, and the run answers `aborted` as it would in-process.
//!
//! # What a plugin's failure becomes
//!
//! - `describe_runtime` and `profile`: a contract error is the same [`ExecutorError`];
//!   anything else (panic, malformed reply, unsupported method) is `unavailable` with
//!   mechanism `plugin`, naming the plugin and the fix.
//! - `run`: the request is checked here first, so an invalid request is `invalid-input`
//!   without crossing the boundary, and a token cancelled before the call is `aborted`. A
//!   contract error is the same [`ExecutorError`] (the plugin says nothing started). A method
//!   the plugin does not support or a request it refused before running anything is
//!   `unavailable`. But a **panic or a malformed reply after the call was made** may come
//!   after the program started: answering `Err` would claim that nothing ran. It becomes an
//!   answer instead: status `aborted` ("the Executor lost control of the run"), no output,
//!   the namespace `unconfirmed`, the failure in `problems`, and the runtime, profile and
//!   bounds identities set to [`unknown_identity`] digests, which match no real description,
//!   so that a judge pinning identities never takes such an answer as evidence of anything.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::backend::PluginBackend;
use super::config::Configured;
use super::contract::{self, HostContract, malformed_message};
use super::error::PluginError;
use super::executor_protocol::{self as wire, ExecutorContract, method};
use super::loader::CallReply;
use crate::contracts::{
    CancelToken, Executor, ExecutorError, Overlap, ProfileDescription, RequestDigests, RunAnswer,
    RunRequest, RuntimeDescription,
};

/// How often the adapter looks at a run's cancel token.
pub const CANCEL_TICK: Duration = Duration::from_millis(10);

pub use crate::contracts::executor::{UNKNOWN_IDENTITY_PROTOCOL, unknown_identity};

impl HostContract for ExecutorContract {
    type State = RunIds;
    const REQUIRES_MINOR: u32 = 0;

    /// Nothing ran: `unavailable`, mechanism `plugin`.
    fn unavailable(reason: String) -> ExecutorError {
        ExecutorError::Unavailable {
            mechanism: "plugin".to_owned(),
            reason,
        }
    }
}

/// An Executor living in a plugin.
pub type PluginExecutor = PluginBackend<ExecutorContract>;

/// The ids an Executor adapter names its runs by: from 1, one per run, never reused.
#[derive(Debug, Default)]
pub struct RunIds(AtomicU64);

impl RunIds {
    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

impl PluginExecutor {
    /// Watches `cancel` until `finished`, and forwards a cancellation to the plugin once.
    /// Returns a problem to report if forwarding failed.
    fn watch(&self, run_id: u64, cancel: &CancelToken, finished: &AtomicBool) -> Option<String> {
        loop {
            if finished.load(Ordering::SeqCst) {
                return None;
            }
            if cancel.is_cancelled() {
                return self.forward_cancel(run_id);
            }
            std::thread::park_timeout(CANCEL_TICK);
        }
    }

    /// Calls `cancel {runId}`; a problem to report if that failed.
    fn forward_cancel(&self, run_id: u64) -> Option<String> {
        let plugin = self.plugin().name();
        let request = wire::encode_cancel(run_id);
        let sent = self
            .instance()
            .call(method::CANCEL, &request, |reply| match reply {
                CallReply::Answer {
                    bytes,
                    new_instance: None,
                } => wire::decode_cancelled(bytes).map_err(|error| error.to_string()),
                CallReply::Answer { .. } => Err(contract::UNEXPECTED_INSTANCE.to_owned()),
                CallReply::ContractError { bytes } => {
                    Err(format!("a contract error: {:?}", wire::decode_error(bytes)))
                }
            });
        let failure = match sent {
            Ok(Ok(())) => return None,
            Ok(Err(detail)) => malformed_message(plugin, method::CANCEL, detail).to_string(),
            Err(error) => error.to_string(),
        };
        Some(format!(
            "forwarding the cancellation to plugin {plugin} failed ({failure}); the run went on \
             to its own end"
        ))
    }
}

impl Executor for PluginExecutor {
    fn describe_runtime(&self) -> Result<RuntimeDescription, ExecutorError> {
        // Nothing runs in the describing methods: every failure is an `Err`.
        self.call(
            method::DESCRIBE_RUNTIME,
            &wire::encode_no_arguments(),
            wire::decode_runtime,
        )
    }

    fn profile(&self) -> Result<ProfileDescription, ExecutorError> {
        self.call(
            method::PROFILE,
            &wire::encode_no_arguments(),
            wire::decode_profile,
        )
    }

    /// A plugin before ABI 1.15 does not say (its runs overlap, as they always did); one that
    /// cannot answer is taken at its word that runs may not overlap, so that a broken answer
    /// never lets runs overlap unbounded.
    fn overlap(&self) -> Overlap {
        if self.plugin().abi_minor() < wire::OVERLAP_SINCE_MINOR {
            return Overlap::Allowed;
        }
        self.call(
            method::OVERLAP,
            &wire::encode_no_arguments(),
            wire::decode_overlap,
        )
        .unwrap_or_else(|error| Overlap::OneAtATime {
            reason: format!("the executor plugin did not say whether runs may overlap: {error}"),
        })
    }

    fn run(&self, request: &RunRequest, cancel: &CancelToken) -> Result<RunAnswer, ExecutorError> {
        if cancel.is_cancelled() {
            return Err(ExecutorError::Aborted);
        }
        // Checked here too, so that an invalid request never crosses and a lost-control answer
        // can name what was asked.
        let digests = request.check()?;
        let plugin = self.plugin();
        let run_id = self.state().next();
        let (shape, bytes) = encode_run_for(plugin.name(), plugin.abi_minor(), run_id, request)?;
        let started = Instant::now();
        let finished = AtomicBool::new(false);
        let (outcome, cancel_problem) = std::thread::scope(|scope| {
            let watcher = std::thread::Builder::new()
                .name("sf-cancel-watch".into())
                .spawn_scoped(scope, || self.watch(run_id, cancel, &finished));
            let outcome = self.instance().call(shape.method(), &bytes, |reply| {
                read_run_reply(plugin.name(), reply, shape)
            });
            finished.store(true, Ordering::SeqCst);
            let problem = match watcher {
                Ok(watcher) => {
                    watcher.thread().unpark();
                    watcher
                        .join()
                        .unwrap_or_else(|_| Some("the cancellation watcher panicked".to_owned()))
                }
                // Without a watcher the run still ends at its own bounds; say why a cancel
                // may have gone unheard.
                Err(error) => cancel.is_cancelled().then(|| {
                    format!("no thread to forward the cancellation ({error}); it was not sent")
                }),
            };
            (outcome, problem)
        });
        let mut result = finish_run(plugin.name(), request, digests, started.elapsed(), outcome);
        if let Ok(answer) = &mut result {
            answer.problems.extend(cancel_problem);
        }
        result
    }
}

/// The run message shape for a plugin of ABI minor `minor`: `run` before minor 2, then the
/// method of each minor up to `run_v6` from minor 6 on, and `run_v7` from
/// [`wire::REMOTE_RUN_SINCE_MINOR`].
pub fn run_wire(minor: u32) -> wire::RunWire {
    match minor {
        0 | 1 => wire::RunWire::V1,
        2 => wire::RunWire::V2,
        3 => wire::RunWire::V3,
        4 => wire::RunWire::V4,
        5 => wire::RunWire::V5,
        m if m < wire::REMOTE_RUN_SINCE_MINOR => wire::RunWire::V6,
        _ => wire::RunWire::V7,
    }
}

/// The shape and bytes of `request` for plugin `plugin` of ABI minor `minor`; `unavailable`,
/// naming what the plugin's run cannot carry (a harness, an executable or a link), when its
/// shape cannot carry the request. Nothing is sent then: a plugin is never handed a request
/// without what it holds (the files without their modes would run as something else).
pub fn encode_run_for(
    plugin: &str,
    minor: u32,
    run_id: u64,
    request: &RunRequest,
) -> Result<(wire::RunWire, Vec<u8>), ExecutorError> {
    let shape = run_wire(minor);
    if let Some(feature) = wire::RunFeature::lacking_for(minor, shape, request) {
        return Err(ExecutorError::Unavailable {
            mechanism: feature.mechanism().to_owned(),
            reason: format!(
                "plugin {plugin} speaks ABI {major}.{minor}, {lacking}; rebuild it with an sdk of \
                 ABI {major}.{since} or later",
                major = super::abi::ABI_MAJOR,
                lacking = feature.lacking(),
                since = feature.since_minor(),
            ),
        });
    }
    match wire::encode_run(run_id, request, shape) {
        Some(bytes) => Ok((shape, bytes)),
        None => Err(ExecutorError::Unavailable {
            mechanism: "plugin".to_owned(),
            reason: format!("the request did not encode for plugin {plugin}"),
        }),
    }
}

/// What a `run` call's outcome means for the caller: the rules of the module documentation.
/// `digests` are the request's program, input and harness digests, `wall` the time the call
/// took.
pub fn finish_run(
    plugin: &str,
    request: &RunRequest,
    digests: RequestDigests,
    wall: Duration,
    outcome: Result<RunReply, PluginError>,
) -> Result<RunAnswer, ExecutorError> {
    let detail = match outcome {
        Ok(RunReply::Answer(answer)) => return Ok(*answer),
        Ok(RunReply::Refused(error)) => return Err(error),
        Ok(RunReply::Lost(detail)) => detail,
        // Refused before the method ran: the sdk answers these before calling the trait.
        Err(error @ (PluginError::UnsupportedMethod { .. } | PluginError::Refused { .. })) => {
            return Err(ExecutorContract::failed(error));
        }
        Err(error) => error.to_string(),
    };
    Ok(RunAnswer::lost(
        request,
        digests,
        wall,
        format!(
            "plugin {plugin} failed during run, so whether the program started and whether \
             its processes ended is unknown"
        ),
        vec![detail],
    ))
}

/// A `run` reply, read while the plugin's buffer is alive.
#[derive(Debug)]
pub enum RunReply {
    /// A well-formed answer: the run started and this is its outcome.
    Answer(Box<RunAnswer>),
    /// A contract error: nothing started, the plugin says.
    Refused(ExecutorError),
    /// Not a well-formed answer or error: what happened is unknown.
    Lost(String),
}

/// Reads a reply of plugin `plugin` to a run sent in the shape of `shape`.
pub fn read_run_reply(plugin: &str, reply: CallReply<'_>, shape: wire::RunWire) -> RunReply {
    let method = shape.method();
    match reply {
        CallReply::Answer {
            bytes,
            new_instance,
        } => {
            if new_instance.is_some() {
                return RunReply::Lost(
                    malformed_message(plugin, method, contract::UNEXPECTED_INSTANCE).to_string(),
                );
            }
            match wire::decode_answer(bytes, shape) {
                Ok(answer) => RunReply::Answer(Box::new(answer)),
                Err(error) => {
                    RunReply::Lost(malformed_message(plugin, method, error.to_string()).to_string())
                }
            }
        }
        CallReply::ContractError { bytes } => match wire::decode_error(bytes) {
            Ok(decoded) => RunReply::Refused(contract::contract_error::<ExecutorContract>(
                plugin, method, decoded,
            )),
            Err(error) => {
                RunReply::Lost(malformed_message(plugin, method, error.to_string()).to_string())
            }
        },
    }
}

/// An Executor backend compiled into the running program, configured from its section.
///
/// ```text
/// #[typetag::serde(name = "sandbox-exec")]
/// impl ExecutorBackend for SandboxExecBackend {
///     fn executor(&self) -> Result<Arc<dyn Executor>, ExecutorError> { … }
/// }
/// ```
#[typetag::serde(tag = "type")]
pub trait ExecutorBackend: Debug + Send + Sync {
    /// Builds the configured Executor.
    fn executor(&self) -> Result<Arc<dyn Executor>, ExecutorError>;
}

impl Configured for ExecutorContract {
    const SECTION: &'static str = "executor";
    const DEFAULT_TAG: &'static str = "sandbox-exec";
    type Object = dyn Executor;
    type Compiled = Box<dyn ExecutorBackend>;
    type Context<'a> = ();

    fn compiled(backend: Self::Compiled, (): ()) -> Result<Arc<dyn Executor>, ExecutorError> {
        backend.executor()
    }

    fn adapt(backend: PluginExecutor) -> Arc<dyn Executor> {
        Arc::new(backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::Digest;
    use crate::contracts::{
        Enforcement, NamespaceDisposition, RunBounds, RunIdentities, RunStatus, RunTimes,
    };
    use crate::snapshot::SnapshotFile;

    fn request() -> RunRequest {
        RunRequest {
            label: None,
            program_tree: None,
            command: None,
            program: vec![SnapshotFile::regular("main.sh", b"echo hi".to_vec())],
            entry: "main.sh".into(),
            args: Vec::new(),
            input: Vec::new(),
            harness: Vec::new(),
            bounds: RunBounds::new(Duration::from_secs(1), 1024),
        }
    }

    fn finish(outcome: Result<RunReply, PluginError>) -> Result<RunAnswer, ExecutorError> {
        let request = request();
        let digests = request.check().unwrap();
        finish_run("p", &request, digests, Duration::from_millis(5), outcome)
    }

    fn reply(bytes: &[u8], error: bool) -> RunReply {
        read_run_reply(
            "p",
            if error {
                CallReply::ContractError { bytes }
            } else {
                CallReply::Answer {
                    bytes,
                    new_instance: None,
                }
            },
            wire::RunWire::V2,
        )
    }

    #[track_caller]
    fn assert_lost(result: Result<RunAnswer, ExecutorError>, needle: &str) {
        let answer = result.expect("a lost run is an answer, never an error");
        assert_eq!(answer.status, RunStatus::Aborted);
        assert!(matches!(
            answer.namespace,
            NamespaceDisposition::Unconfirmed { .. }
        ));
        assert!(answer.stdout.is_empty() && answer.exit_code.is_none());
        assert_eq!(answer.identities.runtime, unknown_identity("runtime"));
        assert_eq!(answer.identities.profile, unknown_identity("profile"));
        assert_eq!(answer.identities.bounds, unknown_identity("bounds"));
        assert!(answer.identities.enforcement.is_empty());
        let digests = request().check().unwrap();
        assert_eq!(
            (
                &answer.identities.program,
                &answer.identities.input,
                &answer.identities.harness
            ),
            (&digests.program, &digests.input, &digests.harness)
        );
        assert!(
            answer
                .problems
                .iter()
                .any(|problem| problem.contains(needle)),
            "{:?}",
            answer.problems
        );
    }

    #[test]
    fn unknown_identities_are_distinct_and_fixed() {
        assert_ne!(unknown_identity("runtime"), unknown_identity("profile"));
        assert_eq!(unknown_identity("bounds"), unknown_identity("bounds"));
        let bounds = RunBounds::new(Duration::from_secs(1), 1);
        assert_ne!(unknown_identity("bounds"), bounds.digest());
    }

    #[test]
    fn failures_after_the_call_are_aborted_answers() {
        assert_lost(
            finish(Err(PluginError::Panicked {
                plugin: "p".into(),
                during: "run".into(),
                message: "boom".into(),
            })),
            "boom",
        );
        assert_lost(
            finish(Err(PluginError::MalformedMessage {
                plugin: "p".into(),
                during: "run".into(),
                detail: "status 42".into(),
            })),
            "status 42",
        );
        assert_lost(finish(Ok(reply(b"garbage", false))), "malformed message");
        assert_lost(finish(Ok(reply(b"garbage", true))), "malformed message");
        let wrong_shape = crate::plugin::message::encode_header(&serde_json::json!({"x": 1}));
        assert_lost(finish(Ok(reply(&wrong_shape, false))), "malformed message");
    }

    #[test]
    fn refusals_before_the_run_are_errors() {
        let error = wire::encode_error(&ExecutorError::Unavailable {
            mechanism: "landlock".into(),
            reason: "old kernel".into(),
        });
        assert_eq!(
            finish(Ok(reply(&error, true))).unwrap_err(),
            ExecutorError::Unavailable {
                mechanism: "landlock".into(),
                reason: "old kernel".into(),
            }
        );
        let unknown = crate::plugin::message::encode_header(
            &serde_json::json!({"code": "frozen", "message": "later"}),
        );
        let error = finish(Ok(reply(&unknown, true))).unwrap_err();
        assert_eq!(error.code(), "unavailable");
        assert!(error.to_string().contains("frozen"), "{error}");
        for refusal in [
            PluginError::UnsupportedMethod {
                plugin: "p".into(),
                method: "run".into(),
                detail: "old".into(),
            },
            PluginError::Refused {
                plugin: "p".into(),
                during: "run".into(),
                code: "malformed-request".into(),
                message: "bad".into(),
            },
        ] {
            assert_eq!(finish(Err(refusal)).unwrap_err().code(), "unavailable");
        }
    }

    #[test]
    fn answers_pass_through_unchanged() {
        let request = request();
        let RequestDigests {
            program,
            input,
            harness,
        } = request.check().unwrap();
        let answer = RunAnswer {
            remote: None,
            results: None,
            status: RunStatus::Exited,
            exit_code: Some(3),
            signal: None,
            stdout: b"\xffout".to_vec(),
            stderr: b"err".to_vec(),
            times: RunTimes::default(),
            bounds: request.bounds,
            identities: RunIdentities {
                command: None,
                program,
                input,
                harness,
                runtime: Digest::of(b"r"),
                profile: Digest::of(b"p"),
                bounds: request.bounds.digest(),
                enforcement: Enforcement::from_facts([
                    ("landlock-abi", "7"),
                    ("landlock", "fully-enforced"),
                    ("host-identity", "caller-id"),
                    ("memory", "per-process"),
                ])
                .unwrap(),
            },
            namespace: NamespaceDisposition::Reaped,
            problems: Vec::new(),
            limits_hit: Vec::new(),
        };
        let bytes = wire::encode_answer(&answer, wire::RunWire::V2);
        assert_eq!(finish(Ok(reply(&bytes, false))).unwrap(), answer);
    }

    #[test]
    fn plugins_before_minor_two_are_sent_run() {
        assert_eq!(run_wire(0), wire::RunWire::V1);
        assert_eq!(run_wire(1), wire::RunWire::V1);
        assert_eq!(run_wire(2), wire::RunWire::V2);
        assert_eq!(run_wire(3), wire::RunWire::V3);
        assert_eq!(run_wire(4), wire::RunWire::V4);
        assert_eq!(run_wire(5), wire::RunWire::V5);
        assert_eq!(run_wire(6), wire::RunWire::V6);
        assert_eq!(run_wire(7), wire::RunWire::V6);
        assert_eq!(run_wire(14), wire::RunWire::V6);
        assert_eq!(run_wire(15), wire::RunWire::V7);
    }

    /// A plugin older than what a request holds is refused before anything is sent, naming
    /// what it lacks; each plugin gets the newest shape it speaks otherwise.
    #[test]
    fn requests_a_plugin_cannot_carry_are_refused_before_sending() {
        let plain = request();
        let mut harnessed = request();
        harnessed.harness = vec![SnapshotFile::regular("t.sh", b"sh".to_vec())];
        harnessed.entry = crate::contracts::RunEntry::harness("t.sh");
        let mut moded = request();
        moded.program[0].mode = crate::contracts::tree_path::EntryMode::Executable;
        let mut linked = request();
        linked
            .input
            .push(SnapshotFile::symlink("data", b"elsewhere".to_vec()));
        let refused =
            |minor: u32, request: &RunRequest| match encode_run_for("old", minor, 1, request) {
                Err(ExecutorError::Unavailable { mechanism, reason }) => {
                    assert!(reason.contains(&format!("ABI 1.{minor}")), "{reason}");
                    assert!(reason.contains("plugin old"), "{reason}");
                    mechanism
                }
                other => panic!("minor {minor}: {other:?}"),
            };
        for minor in 0..=5 {
            let (shape, _) = encode_run_for("p", minor, 1, &plain).unwrap();
            assert_eq!(shape, run_wire(minor));
        }
        assert_eq!(refused(1, &harnessed), "harness");
        assert!(encode_run_for("p", 2, 1, &harnessed).is_ok());
        for minor in 0..=3 {
            assert_eq!(refused(minor, &moded), "snapshot-modes");
            assert_eq!(refused(minor, &linked), "snapshot-modes");
        }
        for (request, minor) in [(&moded, 4), (&linked, 5)] {
            let (shape, bytes) = encode_run_for("p", minor, 1, request).unwrap();
            assert_eq!(shape, run_wire(minor));
            let decoded = wire::Request::decode(shape.method(), &bytes).unwrap();
            assert!(
                matches!(decoded, Some(wire::Request::Run { request: ref got, .. }) if got == request),
                "{decoded:?}"
            );
        }
    }
}
