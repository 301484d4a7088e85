//! One lease: the Action it carries, checked against this worker's runtime and profile;
//! its input root fetched (through the local content store) and read back as the run's
//! request; the run in sandbox-exec; its output uploaded; and the ActionResult with this
//! worker's attestation.
//!
//! An Action this worker would not have made of the request it holds (another platform, a
//! cacheable or unsalted Action, a root holding anything else, a Command that is not the
//! request's) is refused before anything runs, with `FAILED_PRECONDITION`; so is a request the
//! sandbox refuses before starting anything. An Action a worker started before (its start
//! marker is in the CAS: the cluster retried it) is refused with `ABORTED`, which no engine
//! retries; one whose claim could not be made sure of ([`crate::claim`]) with `UNAVAILABLE`,
//! which an engine may give to another worker. A run that started always ends with an
//! ActionResult, whatever its status: the attestation says how it ended.
//!
//! The log (`--log`) has a line when a run starts, when it ends, and when a lease is refused,
//! each naming the worker, the lease and the Action; the start and end lines also name the
//! run (`run`: its label, `check <id>` for a collection's check).

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use prost::Message as _;
use sf_contracts::command::CapturedResults;
use sf_contracts::snapshot::MAX_SNAPSHOT_BYTES;
use sf_contracts::{CancelToken, Executor, RunAnswer, RunRequest, RunStatus};
use sf_reapi::action::{self, Target};
use sf_reapi::attestation::Attestation;
use sf_reapi::cas::Cas;
use sf_reapi::digest;
use sf_reapi::proto::execution::{
    Action, ActionResult, Command, Digest, Directory, ExecutedActionMetadata, OutputFile,
};
use sf_reapi::proto::protobuf::{Any, Timestamp};
use sf_reapi::proto::rpc::Status;
use sf_reapi::tree::{self, Blobs};

use crate::claim::{self, Holder, Unclaimed};
use crate::program;
use crate::store::{self, Store};

/// The type URL of a lease payload holding an Action.
const ACTION_TYPE: &str = "type.googleapis.com/build.bazel.remote.execution.v2.Action";
/// The type URL of a lease payload holding an Action's digest.
const DIGEST_TYPE: &str = "type.googleapis.com/build.bazel.remote.execution.v2.Digest";
/// The type URL of a lease result.
const RESULT_TYPE: &str = "type.googleapis.com/build.bazel.remote.execution.v2.ActionResult";
/// The most bytes an Action or a Command may hold.
const MAX_MESSAGE_BYTES: u64 = 1024 * 1024;

/// `google.rpc.Code.FAILED_PRECONDITION`.
const FAILED_PRECONDITION: i32 = 9;
/// `google.rpc.Code.ABORTED`: not retried by an engine.
const ABORTED: i32 = 10;
/// `google.rpc.Code.UNAVAILABLE`: an engine may give the lease to another worker.
const UNAVAILABLE: i32 = 14;
/// `google.rpc.Code.INTERNAL`.
const INTERNAL: i32 = 13;

/// Everything a lease needs of the worker.
pub struct Worker {
    /// The worker's name in the cluster.
    pub id: String,
    /// The cluster's CAS.
    pub cas: Cas,
    /// Blobs of recent leases.
    pub store: Mutex<Store>,
    /// The sandbox runs execute in.
    pub sandbox: Arc<dyn Executor>,
    /// This worker's runtime and profile.
    pub target: Target,
    /// Where one line per run is appended, if anywhere.
    pub log: Option<Mutex<std::fs::File>>,
}

/// How a lease ended: the result to report, and the status.
pub struct Outcome {
    /// The ActionResult, for a run that started.
    pub result: Option<Any>,
    /// OK for a run that started; why nothing ran otherwise.
    pub status: Status,
}

fn refused(code: i32, message: String) -> Outcome {
    Outcome {
        result: None,
        status: Status {
            code,
            message,
            details: Vec::new(),
        },
    }
}

/// Runs the lease whose payload is `payload`; `cancel` is cancelled when the cluster takes
/// the lease back, and `holder` asks the bot whether the cluster still gives it the lease.
pub async fn execute(
    worker: &Arc<Worker>,
    lease: &str,
    payload: Option<&Any>,
    cancel: CancelToken,
    holder: Holder,
) -> Outcome {
    let (action, action_digest) = match action_of(worker, payload).await {
        Ok(action) => action,
        Err(message) => return refused_lease(worker, lease, None, FAILED_PRECONDITION, message),
    };
    let refuse = |code, message: String| {
        let message = format!(
            "worker {} refuses Action {}: {message}",
            worker.id,
            digest::text(&action_digest)
        );
        refused_lease(worker, lease, Some(&action_digest), code, message)
    };
    // The program's base, for a program by reference, lives as long as the run.
    let (request, command, _base) = match receive(worker, &action).await {
        Ok(received) => received,
        Err(message) => return refuse(FAILED_PRECONDITION, message),
    };
    match claim::claim(worker, &action_digest, &holder).await {
        Ok(()) => {}
        Err(Unclaimed::Started(message)) => return refuse(ABORTED, message),
        Err(Unclaimed::Unsure(message)) => return refuse(UNAVAILABLE, message),
    }
    log_event(
        worker,
        lease,
        (&action_digest, request.label.as_deref()),
        "started",
        serde_json::json!({}),
    );
    let started = std::time::SystemTime::now();
    let answer = match run(worker, &request, cancel).await {
        Ok(answer) => answer,
        Err(outcome) => {
            let reason = outcome.status.message.clone();
            log_event(
                worker,
                lease,
                (&action_digest, request.label.as_deref()),
                "ended",
                serde_json::json!({ "reason": reason }),
            );
            return outcome;
        }
    };
    log_event(
        worker,
        lease,
        (&action_digest, request.label.as_deref()),
        "ended",
        serde_json::json!({ "status": answer.status.code(), "exitCode": answer.exit_code }),
    );
    match report(worker, &command, &action_digest, &answer, started).await {
        Ok(result) => Outcome {
            result: Some(Any {
                type_url: RESULT_TYPE.to_owned(),
                value: result.encode_to_vec(),
            }),
            status: Status::default(),
        },
        Err(message) => refused(INTERNAL, message),
    }
}

/// Runs `request` in the worker's sandbox; `Err` with the lease's outcome when the sandbox
/// started nothing or failed.
async fn run(
    worker: &Worker,
    request: &RunRequest,
    cancel: CancelToken,
) -> Result<RunAnswer, Outcome> {
    let sandbox = Arc::clone(&worker.sandbox);
    let request = request.clone();
    match tokio::task::spawn_blocking(move || sandbox.run(&request, &cancel)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(refused(
            FAILED_PRECONDITION,
            format!(
                "the sandbox of worker {} started nothing ({}): {error}",
                worker.id,
                error.code()
            ),
        )),
        Err(panic) => Err(refused(
            INTERNAL,
            format!("the sandbox of worker {} failed: {panic}", worker.id),
        )),
    }
}

/// The outcome of a lease refused with `code` and `message`, logged.
fn refused_lease(
    worker: &Worker,
    lease: &str,
    action: Option<&Digest>,
    code: i32,
    message: String,
) -> Outcome {
    let line = serde_json::json!({
        "event": "refused",
        "worker": worker.id,
        "lease": lease,
        "action": action.map(digest::text),
        "code": code,
        "reason": message,
    });
    eprintln!("sf-worker {}: {line}", worker.id);
    write_line(worker, &line);
    refused(code, message)
}

/// The Action a lease carries (inline or by digest) and its digest.
async fn action_of(worker: &Worker, payload: Option<&Any>) -> Result<(Action, Digest), String> {
    let payload = payload.ok_or("the lease carries no payload")?;
    let bytes = match payload.type_url.as_str() {
        ACTION_TYPE => payload.value.clone(),
        DIGEST_TYPE => {
            let digest = Digest::decode(payload.value.as_slice())
                .map_err(|e| format!("the lease's digest: {e}"))?;
            if !digest::is_valid(&digest) || digest::size(&digest) > MAX_MESSAGE_BYTES {
                return Err(format!(
                    "the lease names Action {}, which sf never makes",
                    digest::text(&digest)
                ));
            }
            let blobs = store::fetch(
                &worker.store,
                &worker.cas,
                std::slice::from_ref(&digest),
                MAX_MESSAGE_BYTES,
            )
            .await
            .map_err(|e| format!("the Action could not be read: {e}"))?;
            blobs
                .get(&digest)
                .map(<[u8]>::to_vec)
                .ok_or("the Action was not returned")?
        }
        other => return Err(format!("the lease carries a {other}, not an Action")),
    };
    let action =
        Action::decode(bytes.as_slice()).map_err(|e| format!("the Action does not decode: {e}"))?;
    // The digest of the Action as sf encodes it: what the Executor sent and compares.
    let digest = digest::of(&action.encode_to_vec());
    Ok((action, digest))
}

/// The request and Command of `action`, fetched and checked, and for a program by reference
/// the directory holding its base ([`program::place`]).
async fn receive(
    worker: &Worker,
    action: &Action,
) -> Result<(RunRequest, Command, Option<tempfile::TempDir>), String> {
    let parts = action::check_action(action, &worker.target)?;
    let fetch = |digests: Vec<Digest>, budget: u64| async move {
        store::fetch(&worker.store, &worker.cas, &digests, budget)
            .await
            .map_err(|e| format!("the CAS: {e}"))
    };
    let blobs = fetch(
        vec![parts.command.clone(), parts.root.clone()],
        2 * MAX_MESSAGE_BYTES,
    )
    .await?;
    let decode_failed = |what: &str| format!("the {what} does not decode");
    let command = Command::decode(
        blobs
            .get(&parts.command)
            .ok_or("the Command was not returned")?,
    )
    .map_err(|_| decode_failed("Command"))?;
    let root = Directory::decode(
        blobs
            .get(&parts.root)
            .ok_or("the input root was not returned")?,
    )
    .map_err(|_| decode_failed("input root"))?;
    let (run, trees) = action::root_entries(&root)?;
    let blobs = fetch(vec![run.clone()], action::MAX_RUN_FILE_BYTES).await?;
    let mut request = action::decode_run(blobs.get(&run).ok_or("the request was not returned")?)?;
    let mut snapshots = Vec::new();
    for root in trees {
        let mut walk = tree::Walk::new(root.clone());
        while !walk.missing().is_empty() {
            let wanted = walk.missing().to_vec();
            let fetched = fetch(wanted.clone(), MAX_SNAPSHOT_BYTES).await?;
            for digest in &wanted {
                walk.add(
                    digest,
                    fetched.get(digest).ok_or("a directory was not returned")?,
                )?;
            }
            walk.next_round();
        }
        let entries = walk.entries(&root)?;
        let files: Vec<Digest> = entries
            .iter()
            .filter_map(|(_, leaf)| match leaf {
                tree::Leaf::File(digest, _) => Some(digest.clone()),
                tree::Leaf::Symlink(_) => None,
            })
            .collect();
        let contents = fetch(files, MAX_SNAPSHOT_BYTES).await?;
        snapshots.push(tree::snapshot(&entries, &contents)?);
    }
    let mut snapshots = snapshots.into_iter();
    let program = snapshots.next().unwrap_or_default();
    request.input = snapshots.next().unwrap_or_default();
    request.harness = snapshots.next().unwrap_or_default();
    action::check_command(&request, &command, action, &worker.target)?;
    let base = program::place(&mut request, program)?;
    Ok((request, command, base))
}

/// Uploads the run's output and makes its ActionResult, with the attestation.
async fn report(
    worker: &Worker,
    command: &Command,
    action_digest: &Digest,
    answer: &RunAnswer,
    started: std::time::SystemTime,
) -> Result<ActionResult, String> {
    let mut blobs = Blobs::default();
    let stdout = blobs.add(answer.stdout.clone());
    let stderr = blobs.add(answer.stderr.clone());
    let mut output_files = Vec::new();
    if let (Some(CapturedResults::Written(bytes)), Some(path)) =
        (&answer.results, command.output_paths.first())
    {
        output_files.push(OutputFile {
            path: path.clone(),
            digest: Some(blobs.add(bytes.clone())),
            is_executable: false,
            contents: Vec::new(),
            node_properties: None,
        });
    }
    worker.cas.upload(&blobs).await.map_err(|e| {
        format!(
            "worker {} could not upload the run's output: {e}",
            worker.id
        )
    })?;
    let attestation = Attestation {
        action: action_digest.clone(),
        worker: worker.id.clone(),
        answer: answer.clone(),
    };
    let exit_code = match answer.status {
        RunStatus::Exited => answer.exit_code.unwrap_or(-1),
        RunStatus::Signalled => 128 + answer.signal.unwrap_or(0),
        RunStatus::TimedOut | RunStatus::OutputLimit | RunStatus::Aborted => -1,
    };
    #[allow(deprecated)]
    Ok(ActionResult {
        output_files,
        output_file_symlinks: Vec::new(),
        output_symlinks: Vec::new(),
        output_directories: Vec::new(),
        output_directory_symlinks: Vec::new(),
        exit_code,
        stdout_raw: Vec::new(),
        stdout_digest: Some(stdout),
        stderr_raw: Vec::new(),
        stderr_digest: Some(stderr),
        execution_metadata: Some(ExecutedActionMetadata {
            worker: worker.id.clone(),
            execution_start_timestamp: Some(timestamp(started)),
            execution_completed_timestamp: Some(timestamp(std::time::SystemTime::now())),
            auxiliary_metadata: vec![attestation.to_any()],
            ..ExecutedActionMetadata::default()
        }),
    })
}

fn timestamp(time: std::time::SystemTime) -> Timestamp {
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
    }
}

/// Appends the line of a run's `event` (`started`, `ended`) with the run's label (the check a
/// collection runs) and the `extra` fields, and says it on stderr.
fn log_event(
    worker: &Worker,
    lease: &str,
    (action, label): (&Digest, Option<&str>),
    event: &str,
    extra: serde_json::Value,
) {
    let mut line = serde_json::json!({
        "event": event,
        "worker": worker.id,
        "lease": lease,
        "action": digest::text(action),
        "run": label,
    });
    if let (Some(line), Some(extra)) = (line.as_object_mut(), extra.as_object()) {
        line.extend(extra.clone());
    }
    eprintln!("sf-worker {}: {line}", worker.id);
    write_line(worker, &line);
}

/// Appends `line` to the worker's log, if it keeps one.
fn write_line(worker: &Worker, line: &serde_json::Value) {
    let Some(log) = &worker.log else {
        return;
    };
    let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(file, "{line}");
}
