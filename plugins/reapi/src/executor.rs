//! The Executor: each run an Action on the cluster.
//!
//! `describe_runtime` is the worker's runtime, from the worker description the configuration
//! names (read from the CAS once, looked for again for up to `reconnect_seconds` while the
//! CAS lacks it, and checked against its digest); `profile` is this
//! Executor's own recipe, which names the worker's profile and states the worker's
//! enforcement facts and `confinement: remote`.
//!
//! `run` checks the request, encodes it ([`crate::action`]), uploads what the CAS lacks and
//! executes the Action (`skip_cache_lookup`), then follows the operation, reconnecting with
//! `WaitExecution` when the stream breaks. It returns `Err` only while nothing can have
//! started: the request is invalid, the cancel token was cancelled, the description or the
//! uploads failed, or the cluster refused the Action outright (an invalid argument, a failed
//! precondition, no permission). Once Execute may have queued the Action, the outcome is an
//! answer: the worker's ([`crate::answer`]), or a lost run when the cluster reports no run
//! sf can take, is unreachable for longer than `reconnect_seconds`, or has not finished when
//! the run's timeout and `wait_seconds` have passed; then, and on cancellation, the operation
//! is cancelled (`CancelOperation`) before the answer is given.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sf_contracts::canonical::{self, Digest as SfDigest, Value};
use sf_contracts::{
    CancelToken, Executor, ExecutorError, ProfileDescription, RequestDigests, RunAnswer,
    RunRequest, RuntimeDescription,
};
use tonic::transport::{Channel, Endpoint};

use crate::action;
use crate::answer::{self, REMOTE_FACT, Sent};
use crate::cas::{self, Cas};
use crate::config::{ReapiBackend, Settings};
use crate::description::WorkerDescription;
use crate::digest;
use crate::proto::execution::execution_client::ExecutionClient;
use crate::proto::execution::{ExecuteRequest, WaitExecutionRequest};
use crate::proto::longrunning::operations_client::OperationsClient;
use crate::proto::longrunning::{CancelOperationRequest, Operation};

/// The protocol string of this Executor's profile recipe.
pub const PROFILE_PROTOCOL: &str = "sf-reapi-profile/1";

/// How often a run looks at its cancel token.
const CANCEL_TICK: Duration = Duration::from_millis(20);

/// How long a run waits before it looks for a missing worker description again.
const DESCRIPTION_RETRY: Duration = Duration::from_secs(1);

/// The most bytes a worker description may hold.
const MAX_DESCRIPTION_BYTES: u64 = 4 * 1024 * 1024;

/// The Executor over a REAPI cluster.
pub struct ReapiExecutor {
    settings: Settings,
    runtime: tokio::runtime::Runtime,
    channel: Channel,
    description: Mutex<Option<WorkerDescription>>,
}

impl std::fmt::Debug for ReapiExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReapiExecutor")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn unavailable(reason: impl Into<String>) -> ExecutorError {
    ExecutorError::Unavailable {
        mechanism: "cluster".to_owned(),
        reason: reason.into(),
    }
}

/// What a run's wait for its operation ended with.
enum Followed {
    /// The operation finished.
    Done(Operation),
    /// No run sf can take: the problem, and why the end of its processes is unconfirmed.
    Lost(String, String),
}

impl ReapiExecutor {
    /// The Executor of `backend`; it connects on first use.
    pub fn new(backend: &ReapiBackend) -> Result<Self, ExecutorError> {
        let settings = backend.settings()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sf-reapi")
            .enable_all()
            .build()
            .map_err(|error| unavailable(format!("no async runtime: {error}")))?;
        let endpoint = Endpoint::from_shared(settings.endpoint.clone())
            .map_err(|error| ExecutorError::InvalidInput {
                input: format!("endpoint {:?}: {error}", settings.endpoint),
                rule: "the endpoint is http://HOST:PORT",
            })?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_while_idle(true);
        let channel = {
            let _entered = runtime.enter();
            endpoint.connect_lazy()
        };
        Ok(Self {
            settings,
            runtime,
            channel,
            description: Mutex::new(None),
        })
    }

    fn cas(&self) -> Cas {
        Cas::new(
            self.channel.clone(),
            &self.settings.instance,
            self.settings.call,
        )
    }

    /// The worker description, read from the CAS the first time and kept (it is named by its
    /// digest, so it never changes).
    fn description(&self) -> Result<WorkerDescription, ExecutorError> {
        let mut kept = self.description.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(description) = kept.as_ref() {
            return Ok(description.clone());
        }
        let named = &self.settings.worker;
        let text = digest::text(named);
        if digest::size(named) > MAX_DESCRIPTION_BYTES {
            return Err(unavailable(format!(
                "the worker description {text} is larger than {MAX_DESCRIPTION_BYTES} bytes"
            )));
        }
        // A restarted cluster with an in-memory CAS lacks the description until a worker puts
        // it back: it is looked for again for up to `reconnect_seconds`.
        let looking = Instant::now();
        let blobs = loop {
            let read = self.runtime.block_on(
                self.cas()
                    .read(std::slice::from_ref(named), digest::size(named)),
            );
            match read {
                Ok(blobs) => break blobs,
                Err(_) if looking.elapsed() < self.settings.reconnect => {
                    std::thread::sleep(DESCRIPTION_RETRY);
                }
                Err(error) => {
                    return Err(unavailable(format!(
                        "the worker description {text} could not be read from {} for {} s: \
                         {error} (is a worker running? it puts its description in the CAS when \
                         it starts)",
                        self.settings.endpoint,
                        self.settings.reconnect.as_secs()
                    )));
                }
            }
        };
        let bytes = blobs
            .get(named)
            .ok_or_else(|| unavailable(format!("the cluster did not return {text}")))?;
        let description = WorkerDescription::decode(bytes)
            .map_err(|error| unavailable(format!("the worker description {text}: {error}")))?;
        *kept = Some(description.clone());
        Ok(description)
    }

    /// This Executor's profile over the worker's `description`.
    fn profile_of(description: &WorkerDescription) -> Result<ProfileDescription, ExecutorError> {
        let worker = &description.profile;
        let recipe = canonical::parse_canonical(&worker.recipe)
            .map_err(|_| unavailable("the worker's profile recipe is not canonical JSON"))?;
        let mut enforces = worker.enforces()?;
        enforces
            .insert(REMOTE_FACT.0, REMOTE_FACT.1)
            .map_err(|rule| unavailable(format!("the worker's enforcement facts: {rule}")))?;
        let document = canonical::object([
            ("enforces", enforces.to_value()),
            ("protocol", Value::from(PROFILE_PROTOCOL)),
            (
                "worker",
                canonical::object([
                    ("digest", Value::from(worker.digest.to_string())),
                    ("recipe", recipe),
                ]),
            ),
        ]);
        let recipe = canonical::encode(&document)
            .map_err(|error| unavailable(format!("the profile recipe: {error}")))?;
        Ok(ProfileDescription {
            digest: SfDigest::of(&recipe),
            recipe,
        })
    }

    /// Runs the Action of `request` (already uploaded): follows it to its end.
    async fn execute(
        &self,
        request: &RunRequest,
        digests: RequestDigests,
        sent: &Sent<'_>,
        cancel: &CancelToken,
        started: Instant,
    ) -> Result<RunAnswer, ExecutorError> {
        let deadline = started + request.bounds.timeout + self.settings.wait;
        let mut execution =
            ExecutionClient::new(self.channel.clone()).max_decoding_message_size(cas::MAX_MESSAGE);
        let call = cas::request(
            ExecuteRequest {
                instance_name: self.settings.instance.clone(),
                skip_cache_lookup: true,
                action_digest: Some(sent.action.clone()),
                ..ExecuteRequest::default()
            },
            // The stream lasts as long as the run may.
            deadline.saturating_duration_since(Instant::now()),
        );
        let lost = |problem: String, unconfirmed: String| {
            let mut answer = RunAnswer::lost(
                request,
                digests.clone(),
                started.elapsed(),
                unconfirmed,
                vec![problem],
            );
            answer.remote = Some(answer::lost_remote(sent.action));
            Ok(answer)
        };
        let stream = match cas::bounded(self.settings.call, execution.execute(call)).await {
            Ok(stream) => stream.into_inner(),
            Err(status) if refused_before_queueing(status.code()) => {
                return Err(unavailable(format!(
                    "the cluster refused the Action {}: {}: {}",
                    digest::text(sent.action),
                    status.code(),
                    status.message()
                )));
            }
            Err(status) => {
                return lost(
                    format!(
                        "Execute failed ({}: {}); the cluster may have queued the Action {}",
                        status.code(),
                        status.message(),
                        digest::text(sent.action)
                    ),
                    "the cluster may run the Action; sf cannot follow it".to_owned(),
                );
            }
        };
        match self.follow(stream, deadline, cancel).await {
            (Followed::Done(operation), _) => match answer::attested(sent, &operation) {
                Ok(attested) => {
                    let budget = attested.blobs().iter().map(digest::size).sum::<u64>();
                    match self.cas().read(&attested.blobs(), budget).await {
                        Ok(blobs) => Ok(attested.answer(sent, &blobs)),
                        Err(error) => lost(
                            format!("the run's output could not be read: {error}"),
                            "the worker's answer could not be read".to_owned(),
                        ),
                    }
                }
                Err(problem) => lost(
                    problem,
                    "the cluster reports no run whose processes sf can account for".to_owned(),
                ),
            },
            (Followed::Lost(problem, unconfirmed), name) => {
                let cancelled = match name {
                    Some(name) => self.cancel_operation(&name).await,
                    None => "no operation name was known to cancel".to_owned(),
                };
                lost(format!("{problem}; {cancelled}"), unconfirmed)
            }
        }
    }

    /// Follows an operation from its Execute stream to its end, reconnecting with
    /// WaitExecution; gives up at `deadline`, on cancellation, or when the cluster stays
    /// unreachable. Returns the operation's name too, once known.
    async fn follow(
        &self,
        mut stream: tonic::Streaming<Operation>,
        deadline: Instant,
        cancel: &CancelToken,
    ) -> (Followed, Option<String>) {
        let mut name: Option<String> = None;
        let mut tick = tokio::time::interval(CANCEL_TICK);
        loop {
            let message = tokio::select! {
                message = stream.message() => message,
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return (self.past_deadline(), name);
                }
                _ = wait_cancelled(&mut tick, cancel) => {
                    return (Followed::Lost(
                        "the run was cancelled".to_owned(),
                        "the run was cancelled and the cluster asked to cancel it".to_owned(),
                    ), name);
                }
            };
            if let Ok(Some(operation)) = message {
                if name.is_none() && !operation.name.is_empty() {
                    name = Some(operation.name.clone());
                }
                if operation.done {
                    return (Followed::Done(operation), name);
                }
                continue;
            }
            // The stream broke or ended early: wait on the operation again.
            let Some(operation) = name.clone() else {
                return (
                    Followed::Lost(
                        "the Execute stream ended before the cluster named the operation"
                            .to_owned(),
                        "the cluster may run the Action; sf cannot follow it".to_owned(),
                    ),
                    None,
                );
            };
            // The window for reconnecting starts when the stream broke: a stream may stay
            // quiet for as long as the run takes.
            match self
                .reconnect(&operation, Instant::now(), deadline, cancel)
                .await
            {
                Ok(next) => stream = next,
                Err(followed) => return (followed, name),
            }
        }
    }

    /// A run given up at its deadline (its timeout and `wait_seconds`).
    fn past_deadline(&self) -> Followed {
        Followed::Lost(
            format!(
                "the cluster had not finished the run {} s after its timeout",
                self.settings.wait.as_secs()
            ),
            "sf gave up on the run at its deadline and asked the cluster to cancel it".to_owned(),
        )
    }

    /// A new stream of the operation `name` (WaitExecution), retried until the cluster
    /// answers or `reconnect_seconds` have passed since the stream `broke`.
    async fn reconnect(
        &self,
        name: &str,
        broke: Instant,
        deadline: Instant,
        cancel: &CancelToken,
    ) -> Result<tonic::Streaming<Operation>, Followed> {
        let mut pause = Duration::from_millis(100);
        let mut last = String::new();
        while broke.elapsed() < self.settings.reconnect && Instant::now() < deadline {
            if cancel.is_cancelled() {
                return Err(Followed::Lost(
                    "the run was cancelled".to_owned(),
                    "the run was cancelled and the cluster asked to cancel it".to_owned(),
                ));
            }
            let call = cas::request(
                WaitExecutionRequest {
                    name: name.to_owned(),
                },
                deadline.saturating_duration_since(Instant::now()),
            );
            let mut execution = ExecutionClient::new(self.channel.clone())
                .max_decoding_message_size(cas::MAX_MESSAGE);
            match cas::bounded(self.settings.call, execution.wait_execution(call)).await {
                Ok(stream) => return Ok(stream.into_inner()),
                Err(status) if status.code() == tonic::Code::NotFound => {
                    return Err(Followed::Lost(
                        format!("the cluster no longer knows the operation {name}"),
                        "the cluster lost the operation".to_owned(),
                    ));
                }
                Err(status) => last = format!("{}: {}", status.code(), status.message()),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
        // The run's deadline, not the reconnect window, may be what ended the tries: then the
        // run is lost for that reason, and said so.
        if Instant::now() >= deadline {
            return Err(self.past_deadline());
        }
        Err(Followed::Lost(
            format!(
                "the cluster was unreachable for {} s while the run was in flight ({last})",
                self.settings.reconnect.as_secs()
            ),
            "the cluster was lost while it ran the Action".to_owned(),
        ))
    }

    /// Asks the cluster to cancel operation `name`; says how that went.
    async fn cancel_operation(&self, name: &str) -> String {
        let limit = Duration::from_secs(5).min(self.settings.call);
        let call = cas::request(
            CancelOperationRequest {
                name: name.to_owned(),
            },
            limit,
        );
        let mut operations = OperationsClient::new(self.channel.clone());
        match cas::bounded(limit, operations.cancel_operation(call)).await {
            Ok(_) => format!("the operation {name} was cancelled"),
            Err(status) => format!(
                "cancelling the operation {name} failed ({}: {})",
                status.code(),
                status.message()
            ),
        }
    }
}

/// Whether Execute's error `code` means the cluster refused the Action before queueing it.
fn refused_before_queueing(code: tonic::Code) -> bool {
    use tonic::Code;
    matches!(
        code,
        Code::InvalidArgument
            | Code::FailedPrecondition
            | Code::PermissionDenied
            | Code::Unauthenticated
            | Code::NotFound
            | Code::Unimplemented
            | Code::OutOfRange
            | Code::ResourceExhausted
    )
}

/// Resolves once `cancel` is cancelled, looking every tick.
async fn wait_cancelled(tick: &mut tokio::time::Interval, cancel: &CancelToken) {
    loop {
        tick.tick().await;
        if cancel.is_cancelled() {
            return;
        }
    }
}

impl Executor for ReapiExecutor {
    fn describe_runtime(&self) -> Result<RuntimeDescription, ExecutorError> {
        Ok(self.description()?.runtime)
    }

    fn profile(&self) -> Result<ProfileDescription, ExecutorError> {
        Self::profile_of(&self.description()?)
    }

    fn run(&self, request: &RunRequest, cancel: &CancelToken) -> Result<RunAnswer, ExecutorError> {
        let digests = request.check()?;
        // An environment build's network and output directory are the caller's host's: a
        // worker elsewhere can reach neither.
        if let Some(command) = &request.command
            && (command.network.is_some() || command.output.is_some())
        {
            return Err(ExecutorError::InvalidInput {
                input: "a command with network or an output directory".to_owned(),
                rule: "a remote executor runs no environment build; build it with the local \
                       sandbox ([env.build] executor)",
            });
        }
        if cancel.is_cancelled() {
            return Err(ExecutorError::Aborted);
        }
        let description = self.description()?;
        let profile = Self::profile_of(&description)?;
        let target = description.target();
        let started = Instant::now();
        let base;
        let program = match &request.program_tree {
            Some(tree) => {
                base = crate::base::read(tree)?;
                &base
            }
            None => &request.program,
        };
        let encoded = action::encode(request, program, &target, cas::fresh(action::SALT_BYTES))
            .map_err(|reason| ExecutorError::Unavailable {
                mechanism: "reapi".to_owned(),
                reason,
            })?;
        let sent = Sent {
            request,
            digests: &digests,
            action: &encoded.digest,
            target: &target,
            profile: &profile.digest,
        };
        self.runtime.block_on(async {
            self.cas().upload(&encoded.blobs).await.map_err(|error| {
                unavailable(format!(
                    "the run's files could not be put in the CAS of {}: {error}",
                    self.settings.endpoint
                ))
            })?;
            if cancel.is_cancelled() {
                return Err(ExecutorError::Aborted);
            }
            self.execute(request, digests.clone(), &sent, cancel, started)
                .await
        })
    }
}
