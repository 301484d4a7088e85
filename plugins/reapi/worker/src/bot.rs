//! The bot: one session with the cluster's Bots service at a time (Remote Workers API
//! v1test2), one lease at a time.
//!
//! The session's worker has one device whose properties are the platform it serves
//! (`OSFamily=linux`, `sf-runtime`, `sf-profile`), so the scheduler leases it only Actions
//! requiring exactly this runtime and profile. While idle the bot long-polls
//! `UpdateBotSession`; a lease it is given is marked active and run ([`crate::lease`]); while
//! it runs, the bot reports every second (the session's keepalive), and a lease the cluster
//! takes back (cancelled, or gone from the session) has its run cancelled. When the lease's
//! task asks whether the cluster still gives it the lease ([`crate::claim`]), the bot reports
//! at once and answers from the cluster's answer to that report. A finished lease is
//! reported completed with its result at once. A session the cluster no longer knows, or one
//! the bot could not reach the cluster for until it expired, ends: the run in flight is
//! cancelled (its lease is the cluster's to settle) and a new session is made.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sf_contracts::CancelToken;
use sf_reapi::action::{OS_FAMILY, PROFILE_PROPERTY, RUNTIME_PROPERTY};
use sf_reapi::cas::{self, MAX_MESSAGE};
use sf_reapi::proto::remoteworkers::bots_client::BotsClient;
use sf_reapi::proto::remoteworkers::{
    BotSession, BotStatus, CreateBotSessionRequest, Device, Lease, LeaseState,
    UpdateBotSessionRequest, Worker as WorkerMessage, device,
};
use tonic::transport::Channel;

use crate::claim::{self, Questions};
use crate::lease::{self, Outcome, Worker};

/// How long an idle bot's `UpdateBotSession` may wait for a lease.
const IDLE_POLL: Duration = Duration::from_secs(20);
/// How often a busy bot reports.
const BUSY_POLL: Duration = Duration::from_secs(1);
/// The longest a busy bot's report may take.
const BUSY_CALL: Duration = Duration::from_secs(10);
/// How long the bot waits before trying an unreachable cluster again.
const RETRY: Duration = Duration::from_secs(1);

/// A lease being run.
struct Running {
    lease: Lease,
    cancel: CancelToken,
    task: tokio::task::JoinHandle<Outcome>,
    /// How it ended, once it has.
    outcome: Option<Outcome>,
    /// Whether the cluster took the lease back: its end is not reported.
    taken_back: bool,
    /// The lease task's questions whether the cluster still gives it the lease.
    questions: Questions,
    /// A question asked before the report in flight was sent, answered by its answer.
    asked: Option<tokio::sync::oneshot::Sender<bool>>,
}

/// Serves the cluster until the process ends.
pub async fn serve(worker: Arc<Worker>, channel: Channel, instance: String) {
    let bots = BotsClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    loop {
        let call = cas::request(
            CreateBotSessionRequest {
                parent: instance.clone(),
                bot_session: Some(session_of(&worker)),
            },
            IDLE_POLL,
        );
        let mut client = bots.clone();
        match cas::bounded(IDLE_POLL + RETRY, client.create_bot_session(call)).await {
            Ok(session) => {
                eprintln!(
                    "sf-worker {}: session {}",
                    worker.id,
                    session.get_ref().name
                );
                run_session(&worker, bots.clone(), session.into_inner()).await;
            }
            Err(status) => {
                eprintln!(
                    "sf-worker {}: no session ({}: {}); trying again",
                    worker.id,
                    status.code(),
                    status.message()
                );
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// The session a new bot asks for.
fn session_of(worker: &Worker) -> BotSession {
    let properties = [
        (OS_FAMILY.0, OS_FAMILY.1.to_owned()),
        (PROFILE_PROPERTY, worker.target.profile.to_string()),
        (RUNTIME_PROPERTY, worker.target.runtime.digest.to_string()),
    ];
    BotSession {
        bot_id: worker.id.clone(),
        status: BotStatus::Ok as i32,
        worker: Some(WorkerMessage {
            devices: vec![Device {
                handle: "sandbox-exec".to_owned(),
                properties: properties
                    .into_iter()
                    .map(|(key, value)| device::Property {
                        key: key.to_owned(),
                        value,
                    })
                    .collect(),
            }],
            properties: Vec::new(),
            configs: Vec::new(),
        }),
        ..BotSession::default()
    }
}

/// Keeps `session` until the cluster loses it.
async fn run_session(worker: &Arc<Worker>, mut bots: BotsClient<Channel>, mut session: BotSession) {
    let mut running: Option<Running> = None;
    // A lease the cluster gave while another still ran (one whose run was taken back and is
    // still ending): it is kept, reported active, and started next. A lease the bot does not
    // report is one the cluster may never give again.
    let mut queued: Option<Lease> = None;
    // A finished lease, reported completed until the cluster has answered that report.
    let mut completed: Option<Lease> = None;
    // The leases of the cluster's last answer not yet taken in (the new session's, first).
    let mut answered = Some(std::mem::take(&mut session.leases));
    let mut contact = Instant::now();
    loop {
        let started = answered
            .take()
            .is_some_and(|leases| intake(worker, &leases, &mut running, &mut queued));
        if !started && let Some(run) = running.as_mut().filter(|run| run.outcome.is_none()) {
            // Report every BUSY_POLL, or as soon as the run ends.
            tokio::select! {
                joined = &mut run.task => {
                    run.outcome = Some(joined.unwrap_or_else(|panic| Outcome {
                        result: None,
                        status: sf_reapi::proto::rpc::Status {
                            code: 13,
                            message: format!("the lease's task failed: {panic}"),
                            details: Vec::new(),
                        },
                    }));
                }
                asked = run.questions.recv(), if run.asked.is_none() => run.asked = asked,
                _ = tokio::time::sleep(BUSY_POLL) => {}
            }
        }
        finish(&mut running, &mut completed);
        session.leases = completed
            .iter()
            .chain(
                running
                    .iter()
                    .filter(|run| !run.taken_back)
                    .map(|run| &run.lease),
            )
            .chain(queued.iter())
            .cloned()
            .collect();
        let limit = if running.is_some() || queued.is_some() {
            BUSY_CALL
        } else {
            IDLE_POLL
        };
        let call = cas::request(
            UpdateBotSessionRequest {
                name: session.name.clone(),
                bot_session: Some(session.clone()),
                update_mask: None,
            },
            limit,
        );
        // The server answers within the request's timeout; a little more is allowed for the
        // answer to arrive.
        match cas::bounded(limit + RETRY, bots.update_bot_session(call)).await {
            Ok(answer) => {
                contact = Instant::now();
                session = answer.into_inner();
                let leases = std::mem::take(&mut session.leases);
                if let Some(run) = running.as_mut()
                    && let Some(asked) = run.asked.take()
                {
                    let _ = asked.send(!run.taken_back && holds(&leases, &run.lease.id));
                }
                answered = Some(leases);
                completed = None;
            }
            Err(status) if lost_session(status.code()) => {
                eprintln!(
                    "sf-worker {}: the cluster lost session {} ({}: {})",
                    worker.id,
                    session.name,
                    status.code(),
                    status.message()
                );
                cancel(running);
                return;
            }
            Err(status) => {
                let expired = session.expire_time.as_ref().is_some_and(past);
                eprintln!(
                    "sf-worker {}: the cluster did not answer ({}: {})",
                    worker.id,
                    status.code(),
                    status.message()
                );
                if expired || contact.elapsed() > Duration::from_secs(600) {
                    cancel(running);
                    return;
                }
                // The same leases are reported again.
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Takes in the `leases` of the cluster's answer: a running lease it no longer holds is
/// cancelled (taken back), a queued one it no longer holds dropped, a new one queued, and the
/// queued one started when nothing runs. Returns whether one was started.
fn intake(
    worker: &Arc<Worker>,
    leases: &[Lease],
    running: &mut Option<Running>,
    queued: &mut Option<Lease>,
) -> bool {
    let held = |id: &str| holds(leases, id);
    if let Some(run) = running.as_mut().filter(|run| !run.taken_back)
        && !held(&run.lease.id)
    {
        eprintln!(
            "sf-worker {}: lease {} was taken back",
            worker.id, run.lease.id
        );
        run.cancel.cancel();
        run.taken_back = true;
    }
    if queued.as_ref().is_some_and(|lease| !held(&lease.id)) {
        *queued = None;
    }
    for lease in leases {
        let new =
            lease.state == LeaseState::Pending as i32 || lease.state == LeaseState::Active as i32;
        let known = running.as_ref().is_some_and(|run| run.lease.id == lease.id)
            || queued.as_ref().is_some_and(|queued| queued.id == lease.id);
        if new && !known && queued.is_none() {
            let mut accepted = lease.clone();
            accepted.state = LeaseState::Active as i32;
            *queued = Some(accepted);
        }
    }
    if running.is_none()
        && let Some(lease) = queued.take()
    {
        eprintln!("sf-worker {}: lease {}", worker.id, lease.id);
        *running = Some(start(worker, lease));
        return true;
    }
    false
}

/// Whether the cluster's `leases` still give this worker the lease `id`.
fn holds(leases: &[Lease], id: &str) -> bool {
    leases
        .iter()
        .any(|lease| lease.id == id && lease.state != LeaseState::Cancelled as i32)
}

/// Moves a finished run's lease into `completed`, with its result, unless the cluster took
/// it back (then its end is not reported).
fn finish(running: &mut Option<Running>, completed: &mut Option<Lease>) {
    if let Some(run) = running.take_if(|run| run.outcome.is_some())
        && !run.taken_back
    {
        let outcome = run.outcome.expect("a finished run");
        let mut lease = run.lease;
        lease.state = LeaseState::Completed as i32;
        lease.result = outcome.result;
        lease.status = Some(outcome.status);
        *completed = Some(lease);
    }
}

/// Starts running `lease`.
fn start(worker: &Arc<Worker>, lease: Lease) -> Running {
    let cancel = CancelToken::new();
    let (holder, questions) = claim::holder();
    let task = {
        let worker = Arc::clone(worker);
        let (id, payload, token) = (lease.id.clone(), lease.payload.clone(), cancel.clone());
        tokio::spawn(
            async move { lease::execute(&worker, &id, payload.as_ref(), token, holder).await },
        )
    };
    Running {
        lease,
        cancel,
        task,
        outcome: None,
        taken_back: false,
        questions,
        asked: None,
    }
}

/// Whether an `UpdateBotSession` error means the cluster no longer has the session.
fn lost_session(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::NotFound
            | tonic::Code::InvalidArgument
            | tonic::Code::FailedPrecondition
            | tonic::Code::Aborted
            | tonic::Code::PermissionDenied
    )
}

fn past(expiry: &sf_reapi::proto::protobuf::Timestamp) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_secs()).unwrap_or(i64::MAX) > expiry.seconds
}

/// Cancels the run in flight, if any; its lease is the cluster's to settle.
fn cancel(running: Option<Running>) {
    if let Some(run) = running {
        run.cancel.cancel();
    }
}
