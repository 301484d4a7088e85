//! A finished operation as the run's answer.
//!
//! Only an `ExecuteResponse` with an OK status, not taken from a cache, whose ActionResult
//! carries exactly one worker attestation ([`crate::attestation`]) naming the Action sent, is
//! a run: anything else (a non-OK status such as `DEADLINE_EXCEEDED`, `UNAVAILABLE` or
//! `ABORTED` for a worker that was lost, a cached result, an operation that ended in an
//! error, a result nobody attests) is an infrastructure outcome, answered as a lost run
//! ([`RunAnswer::lost`]) that no judge attributes to the program.
//!
//! A run's answer is the worker's: its status, exit code or signal, times, problems, limits
//! hit and the identities it attests, with the bytes downloaded within the run's limits (a
//! blob larger than its limit is never fetched, and the answer says so). What the worker
//! attests is compared with what was sent (the program, input and harness digests, the
//! bounds, the command, the runtime and profile the Action required): a difference is stated
//! as a problem, and the attested digest is kept, so a judge pinning identities sees it too.
//! The worker's profile digest becomes this Executor's own (whose recipe names it), and the
//! enforcement facts gain `confinement: remote`: the confinement was a worker's, not this
//! host's. The answer names where it ran ([`RunAnswer::remote`]): the Action sent and the
//! worker that attests it; a lost run names the Action only ([`lost_remote`]).

use prost::Message as _;
use sf_contracts::canonical::Digest as SfDigest;
use sf_contracts::command::CapturedResults;
use sf_contracts::{RemoteRun, RequestDigests, RunAnswer, RunRequest, RunStatus};

use crate::action::Target;
use crate::attestation::Attestation;
use crate::digest;
use crate::proto::execution::{Digest, ExecuteResponse};
use crate::proto::longrunning::{Operation, operation};
use crate::tree::Blobs;

/// The enforcement fact every answer of this Executor states, and its profile pins.
pub const REMOTE_FACT: (&str, &str) = ("confinement", "remote");

/// The type URL of an `ExecuteResponse` in an Operation.
const EXECUTE_RESPONSE: &str =
    "type.googleapis.com/build.bazel.remote.execution.v2.ExecuteResponse";

/// What was sent, to compare the worker's attestation with.
pub struct Sent<'a> {
    /// The request.
    pub request: &'a RunRequest,
    /// Its snapshots' digests.
    pub digests: &'a RequestDigests,
    /// The Action's digest.
    pub action: &'a Digest,
    /// The worker's runtime and profile the Action required.
    pub target: &'a Target,
    /// This Executor's own profile digest.
    pub profile: &'a SfDigest,
}

/// A run's answer as the worker attested it, before its bytes are downloaded.
#[derive(Debug)]
pub struct Attested {
    answer: RunAnswer,
    worker: String,
    problems: Vec<String>,
    stdout: Option<Digest>,
    stderr: Option<Digest>,
    results: Option<Digest>,
}

/// The run the finished `operation` reports, before its bytes are downloaded; `Err` with the
/// problem when it reports no run sf can take (an infrastructure outcome).
pub fn attested(sent: &Sent, operation: &Operation) -> Result<Attested, String> {
    let response = match &operation.result {
        Some(operation::Result::Response(any)) if any.type_url == EXECUTE_RESPONSE => {
            ExecuteResponse::decode(any.value.as_slice()).map_err(|error| {
                format!("the cluster's ExecuteResponse does not decode: {error}")
            })?
        }
        Some(operation::Result::Response(any)) => {
            return Err(format!(
                "the operation ended with a {}, not an ExecuteResponse",
                any.type_url
            ));
        }
        Some(operation::Result::Error(status)) => {
            return Err(format!(
                "the cluster ended the operation with status {} ({}): {}",
                status.code,
                code_name(status.code),
                status.message
            ));
        }
        None => return Err("the operation ended without a result".to_owned()),
    };
    let status = response.status.clone().unwrap_or_default();
    if status.code != 0 {
        return Err(format!(
            "the cluster reports execution status {} ({}): {}",
            status.code,
            code_name(status.code),
            status.message
        ));
    }
    if response.cached_result {
        return Err("the cluster answered from a cache: a cached result is not a run".to_owned());
    }
    let result = response
        .result
        .ok_or("the ExecuteResponse holds no ActionResult")?;
    let metadata = result.execution_metadata.clone().unwrap_or_default();
    let attestation = Attestation::find(&metadata.auxiliary_metadata)?;
    if attestation.action != *sent.action {
        return Err(format!(
            "the worker attests Action {}, not the {} sent",
            digest::text(&attestation.action),
            digest::text(sent.action)
        ));
    }
    let (answer, worker) = (attestation.answer, attestation.worker);
    let mut problems = Vec::new();
    if answer.status == RunStatus::Exited && answer.exit_code != Some(result.exit_code) {
        problems.push(format!(
            "the ActionResult's exit code {} is not the {:?} the worker attests",
            result.exit_code, answer.exit_code
        ));
    }
    let bounds = &sent.request.bounds;
    let mut keep = |what: &str, digest: Option<Digest>, limit: u64| {
        within(what, digest, limit).unwrap_or_else(|problem| {
            problems.push(problem);
            None
        })
    };
    let stdout = keep("stdout", result.stdout_digest.clone(), bounds.stdout_limit);
    let stderr = keep("stderr", result.stderr_digest.clone(), bounds.stderr_limit);
    let written = matches!(answer.results, Some(CapturedResults::Written(_)));
    let mut results = None;
    let mut strays = Vec::new();
    for file in &result.output_files {
        match results_path(sent.request) {
            Some((path, limit)) if written && file.path == path && results.is_none() => {
                results = Some(keep("results file", file.digest.clone(), limit));
            }
            _ => strays.push(format!(
                "the worker returned an output file {:?} the run did not write",
                file.path
            )),
        }
    }
    problems.extend(strays);
    if written && results.is_none() {
        problems.push("the worker attests a results file it did not return".to_owned());
    }
    let results = results.flatten();
    if !result.stdout_raw.is_empty() || !result.stderr_raw.is_empty() {
        problems.push("the worker inlined output sf did not ask for".to_owned());
    }
    Ok(Attested {
        answer,
        worker,
        problems,
        stdout,
        stderr,
        results,
    })
}

/// `digest` when it names at most `limit` bytes; otherwise the problem to state.
fn within(what: &str, digest: Option<Digest>, limit: u64) -> Result<Option<Digest>, String> {
    match digest {
        Some(digest) if digest::is_valid(&digest) && digest::size(&digest) <= limit => {
            Ok(Some(digest))
        }
        Some(digest) => Err(format!(
            "the worker's {what} ({}) is larger than the {limit} bytes allowed; it was not \
             downloaded",
            digest::text(&digest)
        )),
        None => Ok(None),
    }
}

/// The results file's path in the ActionResult and its limit, for a run that asks for one.
fn results_path(request: &RunRequest) -> Option<(String, u64)> {
    let command = request.command.as_ref()?;
    let results = command.results.as_ref()?;
    let command = crate::action::command_for(request, "");
    command
        .output_paths
        .first()
        .map(|path| (path.clone(), results.max_bytes))
}

impl Attested {
    /// The blobs to download.
    pub fn blobs(&self) -> Vec<Digest> {
        [&self.stdout, &self.stderr, &self.results]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// The run's answer with the downloaded `blobs`, checked against what was `sent`.
    pub fn answer(self, sent: &Sent, blobs: &Blobs) -> RunAnswer {
        let Self {
            mut answer,
            worker,
            mut problems,
            stdout,
            stderr,
            results,
        } = self;
        let bytes = |digest: &Option<Digest>| {
            digest
                .as_ref()
                .and_then(|digest| blobs.get(digest))
                .map(<[u8]>::to_vec)
                .unwrap_or_default()
        };
        answer.stdout = bytes(&stdout);
        answer.stderr = bytes(&stderr);
        if let Some(CapturedResults::Written(written)) = &mut answer.results {
            *written = bytes(&results);
        }
        let request = sent.request;
        let ids = &mut answer.identities;
        let command = request.command.as_ref().map(|command| command.digest());
        for (what, actual, expected) in [
            ("program", Some(&ids.program), Some(&sent.digests.program)),
            ("input", Some(&ids.input), Some(&sent.digests.input)),
            ("harness", Some(&ids.harness), Some(&sent.digests.harness)),
            ("bounds", Some(&ids.bounds), Some(&request.bounds.digest())),
            (
                "runtime",
                Some(&ids.runtime),
                Some(&sent.target.runtime.digest),
            ),
            ("command", ids.command.as_ref(), command.as_ref()),
        ] {
            if actual != expected {
                problems.push(format!(
                    "the worker attests {what} {}, not the {} sent",
                    shown(actual),
                    shown(expected)
                ));
            }
        }
        if ids.profile == sent.target.profile {
            ids.profile = sent.profile.clone();
        } else {
            problems.push(format!(
                "the worker attests profile {}, not the {} the Action required",
                ids.profile, sent.target.profile
            ));
        }
        if let Err(rule) = ids.enforcement.insert(REMOTE_FACT.0, REMOTE_FACT.1) {
            problems.push(format!("the worker's enforcement facts: {rule}"));
        }
        if answer.bounds != request.bounds {
            problems.push("the worker enforced other bounds than requested".to_owned());
        }
        let remote = RemoteRun {
            action: digest::text(sent.action),
            worker: Some(worker),
        };
        answer.remote = match remote.check() {
            Ok(()) => Some(remote),
            Err(rule) => {
                problems.push(format!("the worker's name breaks the rule: {rule}"));
                Some(lost_remote(sent.action))
            }
        };
        answer.problems.extend(problems);
        answer
    }
}

/// Where a lost run was sent: the Action, and no worker vouching for it.
pub fn lost_remote(action: &Digest) -> RemoteRun {
    RemoteRun {
        action: digest::text(action),
        worker: None,
    }
}

fn shown(digest: Option<&SfDigest>) -> String {
    digest.map_or_else(|| "none".to_owned(), ToString::to_string)
}

/// The name of a google.rpc code.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "an unknown code",
    }
}
