//! The repository observation (`sf-repository-observation/5`): what the collector saw of one
//! check's run, as the payload of one Evidence record.
//!
//! ```text
//! "sf-repository-observation/5\n"
//! <facts length, decimal, no leading zeros>"\n"
//! <facts: canonical JSON, naming the lengths and SHA-256 of stdout, stderr and results>
//! <stdout bytes><stderr bytes><results bytes>
//! ```
//!
//! The collector's facts come first and are framed by their length, and the output streams
//! follow with lengths the facts fix: whatever a program prints (a forged facts header
//! included) stays inside its stdout or stderr bytes and is never read as facts.
//!
//! Version 2 added the harness to the run's identities; version 3 states the run's
//! enforcement as the executor's facts (`identities.enforcement`, an object of mechanism →
//! status) instead of the fixed fields `landlockAbi`, `landlock` and the optional
//! `hostIdentity` and `memory`; version 4 adds the executor's limits the run hit
//! (`process.limitsHit`, a list of `{detail, limit, value}`, possibly empty, required);
//! version 5 adds a command's identity (`identities.command`, written for a command check's
//! run) and the results file the run left (`results`: `null`, or `{"state": "absent"}`,
//! `{"state": "refused", "reason"}` or `{"state": "written", "bytes", "sha256"}` with the
//! bytes after stderr), and, left out for a local run, where a remote run was executed
//! (`remote`: `{"action": "HASH/SIZE", "worker": <name or null>}`); a version 5 record
//! without `remote` stays valid. Version 4 records are read as holding none of these.
//! Records of versions 1 to 3 ([`OBSERVATION_FORMAT_V1`], [`OBSERVATION_FORMAT_V2`],
//! [`OBSERVATION_FORMAT_V3`]) are still read (a version 1 run had no harness, so its harness
//! identity is the empty snapshot's; their fixed fields read as the facts of four mechanisms,
//! as sf-contracts' `legacy_enforcement` maps them; they recorded no limits, which read as
//! not recorded, never as none hit) but the collector writes, and the judge counts, only
//! version 5.

use serde::{Deserialize, Deserializer, Serialize};

use crate::canonical::{self, Digest, FieldError, Value};
use crate::contracts::legacy_enforcement::{LegacyEnforcement, NOT_STATED};
use crate::contracts::{
    CapturedResults, Enforcement, LimitHit, RemoteRun, RunIdentities, RunStatus,
};

use super::AssuranceError;
use super::acceptance::{Phase, Stage};
use super::time;

/// The protocol string of an observation, and the format of its Evidence records.
pub const OBSERVATION_FORMAT: &str = "sf-repository-observation/5";
/// The format of observations written before commands and results were recorded; read,
/// never written.
pub const OBSERVATION_FORMAT_V4: &str = "sf-repository-observation/4";
/// The format of observations written before the limits a run hit were recorded; read,
/// never written.
pub const OBSERVATION_FORMAT_V3: &str = "sf-repository-observation/3";
/// The format of observations written before enforcement was stated as facts; read, never
/// written.
pub const OBSERVATION_FORMAT_V2: &str = "sf-repository-observation/2";
/// The format of observations written before the harness existed; read, never written.
pub const OBSERVATION_FORMAT_V1: &str = "sf-repository-observation/1";
/// The most problems one observation records.
pub const MAX_PROBLEMS: usize = 16;
/// The most characters of one problem.
pub const MAX_PROBLEM_CHARS: usize = 1024;

crate::contracts::word_enum! {
    /// How far a check's run got, as the collector saw it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ObservationStatus {
        /// The executor answered for a run that started.
        "observed" Observed,
        /// Something may have started, but the executor gave no answer (it panicked).
        "unresolved" Unresolved,
        /// Nothing was started; the problems say why.
        "not-started" NotStarted,
    }
}

/// The process facts of a run that started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessFacts {
    /// How the run ended.
    pub status: RunStatus,
    /// The exit code when the run exited.
    pub exit_code: Option<i32>,
    /// The signal number when the run was signalled.
    pub signal: Option<i32>,
    /// The effective timeout the run was given, in ms (at most the recipe's).
    pub timeout_ms: u64,
    /// The stdout and stderr limit the run was given, in bytes (the recipe's).
    pub output_limit: u64,
    /// Monotonic wall-clock time of the run, in ms.
    pub wall_ms: u64,
    /// User CPU time of the run's reaped processes, in ms.
    pub user_ms: u64,
    /// System CPU time of the run's reaped processes, in ms.
    pub system_ms: u64,
    /// The largest resident set of any one process of the run, in KiB.
    pub max_rss_kib: u64,
    /// The run's peak memory as a whole, where the executor measured it (recorded only then).
    pub memory_peak_bytes: Option<u64>,
    /// The executor's limits the run hit, as the executor stated them (each once, in
    /// `Limit` order); `None` in records of formats before version 4, which did not record
    /// them. A run that hit one is never attributable: it failed for the sandbox's reason.
    pub limits_hit: Option<Vec<LimitHit>>,
    /// Whether the executor confirmed that no process of the run was left (written as
    /// `namespace: "reaped"` or `"unconfirmed"`).
    pub reaped: bool,
}

/// Everything the collector records about one check's run, besides the output bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservationFacts {
    /// The collector closure of the code that wrote the record.
    pub collector: Digest,
    /// The Candidate digest.
    pub candidate: Digest,
    /// The id of the process check that ran.
    pub check: String,
    /// The check's phase, as the collector ran it.
    pub phase: Phase,
    /// Which tree the check ran on.
    pub stage: Stage,
    /// How far the run got.
    pub status: ObservationStatus,
    /// The collector's own verdict on attribution: true only for an observed run with no
    /// problem. The judge checks every identity again and never relies on this alone.
    pub attributable: bool,
    /// Why the run did not start, or why it is not attributable; at most [`MAX_PROBLEMS`],
    /// each at most [`MAX_PROBLEM_CHARS`] characters without control characters.
    pub problems: Vec<String>,
    /// The digest of the environment record in force for the run, when it could be described.
    pub environment: Option<Digest>,
    /// The identities the executor reported for the run.
    pub identities: Option<RunIdentities>,
    /// The process facts of a run that started.
    pub process: Option<ProcessFacts>,
    /// Milliseconds since the epoch by the collector's clock, immediately before the run.
    pub started_at: Option<u64>,
    /// Milliseconds since the epoch by the collector's clock, immediately after the run.
    pub ended_at: Option<u64>,
    /// The collection's deadline, in milliseconds since the epoch; a run that ended later is
    /// not attributable.
    pub deadline: u64,
    /// Where a remote Executor's run was executed (the Action, and the worker that vouched
    /// for it); `None` for a local run and a run that did not start.
    pub remote: Option<RemoteRun>,
}

/// One observation: the facts and the output bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Observation {
    /// What the collector recorded about the run.
    pub facts: ObservationFacts,
    /// The stdout bytes kept (at most the output limit).
    pub stdout: Vec<u8>,
    /// The stderr bytes kept (at most the output limit).
    pub stderr: Vec<u8>,
    /// The results file a command's run left, when its check asked for one and the run
    /// answered.
    pub results: Option<CapturedResults>,
}

impl std::fmt::Debug for Observation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observation")
            .field("facts", &self.facts)
            .field("stdout", &String::from_utf8_lossy(&self.stdout))
            .field("stderr", &String::from_utf8_lossy(&self.stderr))
            .finish()
    }
}

/// Makes `problem` fit a record: control characters U+0000–U+001F and U+007F become `?`,
/// and at most [`MAX_PROBLEM_CHARS`] characters are kept.
pub fn sanitize_problem(problem: &str) -> String {
    problem
        .chars()
        .map(|c| {
            if c < '\u{20}' || c == '\u{7f}' {
                '?'
            } else {
                c
            }
        })
        .take(MAX_PROBLEM_CHARS)
        .collect()
}

/// Sanitises `problems` and keeps at most [`MAX_PROBLEMS`]; when there are more, the last
/// kept one says how many were left out.
pub fn sanitize_problems(problems: &[String]) -> Vec<String> {
    let mut kept: Vec<String> = problems.iter().map(|p| sanitize_problem(p)).collect();
    if kept.len() > MAX_PROBLEMS {
        let left_out = kept.len() - (MAX_PROBLEMS - 1);
        kept.truncate(MAX_PROBLEMS - 1);
        kept.push(format!("and {left_out} more problems"));
    }
    kept
}

/// The facts as the encoding holds them, in the shape of one format: `I` is the run's
/// identities ([`IdentitiesWire`] from version 3, [`LegacyIdentitiesWire`] before).
#[derive(Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "camelCase",
    bound(deserialize = "I: Deserialize<'de>", serialize = "I: Serialize")
)]
struct FactsWire<I> {
    protocol: String,
    collector: Digest,
    candidate: Digest,
    check: String,
    phase: Phase,
    stage: Stage,
    status: ObservationStatus,
    attributable: bool,
    #[serde(deserialize_with = "problems")]
    problems: Vec<String>,
    #[serde(deserialize_with = "canonical::nullable")]
    environment: Option<Digest>,
    #[serde(deserialize_with = "canonical::nullable")]
    identities: Option<I>,
    #[serde(deserialize_with = "canonical::nullable")]
    process: Option<ProcessWire>,
    #[serde(with = "nullable_time")]
    started_at: Option<u64>,
    #[serde(with = "nullable_time")]
    ended_at: Option<u64>,
    #[serde(with = "time_of_day")]
    deadline: u64,
    stdout: StreamWire,
    stderr: StreamWire,
    /// Version 5 only: `null` or the results file's state.
    #[serde(
        default,
        deserialize_with = "results_wire",
        skip_serializing_if = "ResultsField::is_absent"
    )]
    results: ResultsField,
    /// Version 5 only, and only for a remote run.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    remote: Option<RemoteRun>,
}

/// The `results` field: absent (versions before 5), `null`, or a state.
#[derive(Default)]
enum ResultsField {
    #[default]
    Absent,
    Null,
    Stated(ResultsWire),
}

impl ResultsField {
    fn is_absent(&self) -> bool {
        matches!(self, Self::Absent)
    }
}

impl Serialize for ResultsField {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Absent | Self::Null => serializer.serialize_none(),
            Self::Stated(results) => results.serialize(serializer),
        }
    }
}

fn results_wire<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ResultsField, D::Error> {
    Ok(match canonical::nullable::<_, ResultsWire>(deserializer)? {
        Some(results) => ResultsField::Stated(results),
        None => ResultsField::Null,
    })
}

/// A results file's state as recorded.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultsWire {
    state: String,
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    bytes: Option<u64>,
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    sha256: Option<Digest>,
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    reason: Option<String>,
}

impl ResultsWire {
    fn of(results: &CapturedResults) -> Self {
        let (state, bytes, reason) = match results {
            CapturedResults::Absent => ("absent", None, None),
            CapturedResults::Written(bytes) => ("written", Some(bytes), None),
            CapturedResults::Refused(reason) => ("refused", None, Some(sanitize_problem(reason))),
        };
        Self {
            state: state.to_owned(),
            bytes: bytes.map(|bytes| bytes.len() as u64),
            sha256: bytes.map(|bytes| Digest::of(bytes)),
            reason,
        }
    }
}

/// A run's identities from version 3: the executor's enforcement facts as they are.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentitiesWire {
    program: Digest,
    input: Digest,
    harness: Digest,
    runtime: Digest,
    profile: Digest,
    bounds: Digest,
    enforcement: Enforcement,
    /// Version 5 only, for a command check's run.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    command: Option<Digest>,
}

/// A run's identities in versions 1 (no harness) and 2: enforcement in fixed fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LegacyIdentitiesWire {
    program: Digest,
    input: Digest,
    #[serde(default, deserialize_with = "canonical::optional")]
    harness: Option<Digest>,
    runtime: Digest,
    profile: Digest,
    bounds: Digest,
    landlock_abi: u32,
    landlock: String,
    #[serde(default, deserialize_with = "canonical::optional")]
    host_identity: Option<String>,
    #[serde(default, deserialize_with = "canonical::optional")]
    memory: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ProcessWire {
    #[serde(with = "run_status")]
    status: RunStatus,
    #[serde(deserialize_with = "canonical::nullable")]
    exit_code: Option<i32>,
    #[serde(deserialize_with = "canonical::nullable")]
    signal: Option<i32>,
    timeout_ms: u64,
    output_limit: u64,
    wall_ms: u64,
    user_ms: u64,
    system_ms: u64,
    max_rss_kib: u64,
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    memory_peak_bytes: Option<u64>,
    /// Required from version 4, absent before.
    #[serde(
        default,
        deserialize_with = "limits_hit",
        skip_serializing_if = "Option::is_none"
    )]
    limits_hit: Option<Vec<LimitHit>>,
    #[serde(with = "namespace")]
    namespace: bool,
}

/// A recorded list of limits hit, checked as the contract states them.
fn limits_hit<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<LimitHit>>, D::Error> {
    crate::contracts::limit_hit::deserialize_limits_hit(deserializer).map(Some)
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamWire {
    bytes: u64,
    sha256: Digest,
}

impl StreamWire {
    fn of(bytes: &[u8]) -> Self {
        Self {
            bytes: bytes.len() as u64,
            sha256: Digest::of(bytes),
        }
    }
}

/// A count the record can hold: at most 2^53 − 1.
fn clamp(value: u64) -> u64 {
    value.min(canonical::MAX_SAFE_INTEGER as u64)
}

impl ProcessWire {
    fn of(process: &ProcessFacts) -> Self {
        Self {
            status: process.status,
            exit_code: process.exit_code,
            signal: process.signal,
            timeout_ms: clamp(process.timeout_ms),
            output_limit: clamp(process.output_limit),
            wall_ms: clamp(process.wall_ms),
            user_ms: clamp(process.user_ms),
            system_ms: clamp(process.system_ms),
            max_rss_kib: clamp(process.max_rss_kib),
            memory_peak_bytes: process.memory_peak_bytes.map(clamp),
            limits_hit: process.limits_hit.clone(),
            namespace: process.reaped,
        }
    }

    fn facts(self) -> ProcessFacts {
        ProcessFacts {
            status: self.status,
            exit_code: self.exit_code,
            signal: self.signal,
            timeout_ms: self.timeout_ms,
            output_limit: self.output_limit,
            wall_ms: self.wall_ms,
            user_ms: self.user_ms,
            system_ms: self.system_ms,
            max_rss_kib: self.max_rss_kib,
            memory_peak_bytes: self.memory_peak_bytes,
            limits_hit: self.limits_hit,
            reaped: self.namespace,
        }
    }
}

/// Problems as recorded: at most [`MAX_PROBLEMS`], each already sanitised.
fn problems<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    canonical::checked(deserializer, |problems: &Vec<String>| {
        if problems.len() > MAX_PROBLEMS {
            Err("holds at most 16 problems")
        } else if problems.iter().any(|p| sanitize_problem(p) != *p) {
            Err("must be sanitised strings")
        } else {
            Ok(())
        }
    })
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
mod time_of_day {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::time;

    pub(super) fn serialize<S: Serializer>(millis: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&time::format_millis(*millis))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let text = String::deserialize(deserializer)?;
        time::parse_millis(&text)
            .ok_or_else(|| serde::de::Error::custom("must be YYYY-MM-DDTHH:MM:SS.mmmZ"))
    }
}

/// A time of day, or null.
mod nullable_time {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<S: Serializer>(
        millis: &Option<u64>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        millis.map(super::time::format_millis).serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(transparent)]
        struct Time(#[serde(with = "super::time_of_day")] u64);
        Ok(Option::<Time>::deserialize(deserializer)?.map(|time| time.0))
    }
}

/// The run status as its code.
mod run_status {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::contracts::RunStatus;

    const ALL: [RunStatus; 5] = [
        RunStatus::Exited,
        RunStatus::Signalled,
        RunStatus::TimedOut,
        RunStatus::OutputLimit,
        RunStatus::Aborted,
    ];

    pub(super) fn serialize<S: Serializer>(
        status: &RunStatus,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(status.code())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<RunStatus, D::Error> {
        let text = String::deserialize(deserializer)?;
        ALL.into_iter()
            .find(|status| status.code() == text)
            .ok_or_else(|| serde::de::Error::custom("must be a run status"))
    }
}

/// Whether the run's processes were confirmed gone: `reaped` or `unconfirmed`.
mod namespace {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        reaped: &bool,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(if *reaped { "reaped" } else { "unconfirmed" })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<bool, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "reaped" => Ok(true),
            "unconfirmed" => Ok(false),
            _ => Err(serde::de::Error::custom("must be reaped or unconfirmed")),
        }
    }
}

impl Observation {
    fn wire(&self) -> FactsWire<IdentitiesWire> {
        let facts = &self.facts;
        FactsWire {
            protocol: OBSERVATION_FORMAT.to_owned(),
            collector: facts.collector.clone(),
            candidate: facts.candidate.clone(),
            check: facts.check.clone(),
            phase: facts.phase,
            stage: facts.stage,
            status: facts.status,
            attributable: facts.attributable,
            problems: sanitize_problems(&facts.problems),
            environment: facts.environment.clone(),
            identities: facts.identities.as_ref().map(|ids| IdentitiesWire {
                program: ids.program.clone(),
                input: ids.input.clone(),
                harness: ids.harness.clone(),
                runtime: ids.runtime.clone(),
                profile: ids.profile.clone(),
                bounds: ids.bounds.clone(),
                enforcement: ids.enforcement.clone(),
                command: ids.command.clone(),
            }),
            process: facts.process.as_ref().map(ProcessWire::of),
            started_at: facts.started_at,
            ended_at: facts.ended_at,
            deadline: facts.deadline,
            stdout: StreamWire::of(&self.stdout),
            stderr: StreamWire::of(&self.stderr),
            results: match &self.results {
                Some(results) => ResultsField::Stated(ResultsWire::of(results)),
                None => ResultsField::Null,
            },
            remote: facts.remote.clone(),
        }
    }

    /// The facts as the canonical JSON value the encoding holds (problems sanitised).
    pub fn facts_value(&self) -> Value {
        canonical::to_value(&self.wire()).expect("facts hold only strings, integers and booleans")
    }

    /// Encodes the observation (see the module documentation). Problems are sanitised here.
    pub fn encode(&self) -> Result<Vec<u8>, AssuranceError> {
        let facts = canonical::to_canonical_bytes(&self.wire())
            .map_err(|error| AssuranceError::invalid("observation facts", error.to_string()))?;
        let results: &[u8] = match &self.results {
            Some(CapturedResults::Written(bytes)) => bytes,
            _ => &[],
        };
        let mut bytes = Vec::with_capacity(
            64 + facts.len() + self.stdout.len() + self.stderr.len() + results.len(),
        );
        bytes.extend_from_slice(&crate::framing::prefix(OBSERVATION_FORMAT, facts.len()));
        bytes.extend_from_slice(&facts);
        bytes.extend_from_slice(&self.stdout);
        bytes.extend_from_slice(&self.stderr);
        bytes.extend_from_slice(results);
        Ok(bytes)
    }

    /// Decodes an observation strictly: the exact framing, canonical facts with exactly the
    /// declared fields, and output bytes of exactly the lengths and digests the facts name.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        Self::decode_format(OBSERVATION_FORMAT, bytes)
    }

    /// Whether `format` is one [`Observation::decode_format`] reads.
    pub fn is_format(format: &str) -> bool {
        [
            OBSERVATION_FORMAT,
            OBSERVATION_FORMAT_V4,
            OBSERVATION_FORMAT_V3,
            OBSERVATION_FORMAT_V2,
            OBSERVATION_FORMAT_V1,
        ]
        .contains(&format)
    }

    /// Decodes an observation of `format` (the current one, [`OBSERVATION_FORMAT_V3`],
    /// [`OBSERVATION_FORMAT_V2`] or [`OBSERVATION_FORMAT_V1`]), as strictly as
    /// [`Observation::decode`].
    pub fn decode_format(format: &str, bytes: &[u8]) -> Result<Self, String> {
        if !Self::is_format(format) {
            return Err(format!("{format:?} is not an observation format"));
        }
        let (head, streams) = crate::framing::split(bytes, format, "facts", 8)?;
        let (facts, stdout, stderr, results) =
            read_facts(head, format).map_err(|error| format!("{}: {}", error.field, error.rule))?;
        let written = match &results {
            Some(RecordedResults::Written { bytes, .. }) => *bytes,
            _ => 0,
        };
        let lengths =
            [stdout.bytes, stderr.bytes, written].map(|length| usize::try_from(length).ok());
        let [Some(stdout_len), Some(stderr_len), Some(results_len)] = lengths else {
            return Err("the output bytes are not the lengths the facts name".into());
        };
        if stdout_len
            .checked_add(stderr_len)
            .and_then(|n| n.checked_add(results_len))
            != Some(streams.len())
        {
            return Err("the output bytes are not the lengths the facts name".into());
        }
        let (stdout_bytes, rest) = streams.split_at(stdout_len);
        let (stderr_bytes, results_bytes) = rest.split_at(stderr_len);
        if Digest::of(stdout_bytes) != stdout.sha256 || Digest::of(stderr_bytes) != stderr.sha256 {
            return Err("the output bytes do not hash to the digests the facts name".into());
        }
        let results = match results {
            None => None,
            Some(RecordedResults::Absent) => Some(CapturedResults::Absent),
            Some(RecordedResults::Refused(reason)) => Some(CapturedResults::Refused(reason)),
            Some(RecordedResults::Written { sha256, .. }) => {
                if Digest::of(results_bytes) != sha256 {
                    return Err("the results bytes do not hash to the digest the facts name".into());
                }
                Some(CapturedResults::Written(results_bytes.to_vec()))
            }
        };
        Ok(Self {
            facts,
            stdout: stdout_bytes.to_vec(),
            stderr: stderr_bytes.to_vec(),
            results,
        })
    }
}

/// A results state as read, before its bytes are checked.
enum RecordedResults {
    Absent,
    Refused(String),
    Written { bytes: u64, sha256: Digest },
}

impl RecordedResults {
    fn read(wire: ResultsWire) -> Result<Self, FieldError> {
        let wrong = |rule: &str| Err(FieldError::wrong("facts.results", rule.to_owned()));
        match (wire.state.as_str(), wire.bytes, wire.sha256, wire.reason) {
            ("absent", None, None, None) => Ok(Self::Absent),
            ("refused", None, None, Some(reason)) => Ok(Self::Refused(reason)),
            ("written", Some(bytes), Some(sha256), None) => Ok(Self::Written { bytes, sha256 }),
            ("absent" | "refused" | "written", ..) => {
                wrong("absent has no other field, refused a reason, written bytes and sha256")
            }
            _ => wrong("state must be absent, refused or written"),
        }
    }
}

type ReadFacts = (
    ObservationFacts,
    StreamWire,
    StreamWire,
    Option<RecordedResults>,
);

/// Reads the canonical facts `head` in the shape of `format`.
fn read_facts(head: &[u8], format: &str) -> Result<ReadFacts, FieldError> {
    if [
        OBSERVATION_FORMAT,
        OBSERVATION_FORMAT_V4,
        OBSERVATION_FORMAT_V3,
    ]
    .contains(&format)
    {
        let wire: FactsWire<IdentitiesWire> = canonical::from_canonical_slice(head, "facts")?;
        let current = format == OBSERVATION_FORMAT;
        if !current
            && wire
                .identities
                .as_ref()
                .is_some_and(|ids| ids.command.is_some())
        {
            return Err(FieldError::wrong(
                "facts.identities.command",
                format!("is not a field of a {format} observation"),
            ));
        }
        into_facts(wire, format, |ids| {
            Ok(RunIdentities {
                command: ids.command,
                program: ids.program,
                input: ids.input,
                harness: ids.harness,
                runtime: ids.runtime,
                profile: ids.profile,
                bounds: ids.bounds,
                enforcement: ids.enforcement,
            })
        })
    } else {
        let wire: FactsWire<LegacyIdentitiesWire> = canonical::from_canonical_slice(head, "facts")?;
        into_facts(wire, format, |ids| legacy_identities(ids, format))
    }
}

fn into_facts<I>(
    wire: FactsWire<I>,
    format: &str,
    identities: impl FnOnce(I) -> Result<RunIdentities, FieldError>,
) -> Result<ReadFacts, FieldError> {
    if wire.protocol != format {
        return Err(FieldError::wrong(
            "facts.protocol",
            format!("must be {format:?}"),
        ));
    }
    let results = match (format == OBSERVATION_FORMAT, wire.results) {
        (true, ResultsField::Absent) => {
            return Err(FieldError::wrong("facts.results", "is missing"));
        }
        (true, ResultsField::Null) => None,
        (true, ResultsField::Stated(results)) => Some(RecordedResults::read(results)?),
        (false, ResultsField::Absent) => None,
        (false, _) => {
            return Err(FieldError::wrong(
                "facts.results",
                format!("is not a field of a {format} observation"),
            ));
        }
    };
    let remote = match (format == OBSERVATION_FORMAT, wire.remote) {
        (_, None) => None,
        (true, Some(remote)) => {
            remote
                .check()
                .map_err(|rule| FieldError::wrong("facts.remote", rule))?;
            Some(remote)
        }
        (false, Some(_)) => {
            return Err(FieldError::wrong(
                "facts.remote",
                format!("is not a field of a {format} observation"),
            ));
        }
    };
    let limits_recorded = format == OBSERVATION_FORMAT || format == OBSERVATION_FORMAT_V4;
    if let Some(process) = &wire.process {
        match (limits_recorded, &process.limits_hit) {
            (true, None) => {
                return Err(FieldError::wrong("facts.process.limitsHit", "is missing"));
            }
            (false, Some(_)) => {
                return Err(FieldError::wrong(
                    "facts.process.limitsHit",
                    format!("is not a field of a {format} observation"),
                ));
            }
            _ => {}
        }
    }
    let facts = ObservationFacts {
        collector: wire.collector,
        candidate: wire.candidate,
        check: wire.check,
        phase: wire.phase,
        stage: wire.stage,
        status: wire.status,
        attributable: wire.attributable,
        problems: wire.problems,
        environment: wire.environment,
        identities: wire.identities.map(identities).transpose()?,
        process: wire.process.map(ProcessWire::facts),
        started_at: wire.started_at,
        ended_at: wire.ended_at,
        deadline: wire.deadline,
        remote,
    };
    Ok((facts, wire.stdout, wire.stderr, results))
}

/// The identities of a version 1 or 2 record: its fixed enforcement fields as facts, and a
/// version 1 run's harness as the empty snapshot's.
fn legacy_identities(ids: LegacyIdentitiesWire, format: &str) -> Result<RunIdentities, FieldError> {
    let path = |field: &str| format!("facts.identities.{field}");
    let harness = match (format == OBSERVATION_FORMAT_V1, ids.harness) {
        (true, None) => crate::snapshot::snapshot_digest(&[])
            .map_err(|error| FieldError::wrong(&path("harness"), error.to_string()))?,
        (false, Some(harness)) => harness,
        (true, Some(_)) => {
            return Err(FieldError::wrong(
                &path("harness"),
                "is not a field of a version 1 observation",
            ));
        }
        (false, None) => return Err(FieldError::wrong(&path("harness"), "is missing")),
    };
    // A stated fact is never written as not-stated: that is its absence.
    for (field, value) in [
        ("hostIdentity", &ids.host_identity),
        ("memory", &ids.memory),
    ] {
        if value.as_deref() == Some(NOT_STATED) {
            return Err(FieldError::wrong(
                &path(field),
                "is a stated fact's name when present",
            ));
        }
    }
    let enforcement = LegacyEnforcement {
        landlock_abi: ids.landlock_abi,
        landlock: ids.landlock,
        host_identity: ids.host_identity,
        memory: ids.memory,
    }
    .to_facts()
    .map_err(|(field, rule)| FieldError::wrong(&path(field), rule))?;
    Ok(RunIdentities {
        command: None,
        program: ids.program,
        input: ids.input,
        harness,
        runtime: ids.runtime,
        profile: ids.profile,
        bounds: ids.bounds,
        enforcement,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(stdout: &[u8]) -> Observation {
        Observation {
            facts: ObservationFacts {
                remote: None,
                collector: Digest::of(b"c"),
                candidate: Digest::of(b"m"),
                check: "after".into(),
                phase: Phase::After,
                stage: Stage::Candidate,
                status: ObservationStatus::Observed,
                attributable: true,
                problems: vec![],
                environment: Some(Digest::of(b"e")),
                identities: Some(RunIdentities {
                    command: None,
                    program: Digest::of(b"p"),
                    input: Digest::of(b"i"),
                    harness: Digest::of(b"h"),
                    runtime: Digest::of(b"r"),
                    profile: Digest::of(b"f"),
                    bounds: Digest::of(b"b"),
                    enforcement: Enforcement::from_facts([
                        ("host-identity", "reserved-id"),
                        ("landlock", "fully-enforced"),
                        ("landlock-abi", "6"),
                        ("memory", "cgroup-v1"),
                    ])
                    .unwrap(),
                }),
                process: Some(ProcessFacts {
                    status: RunStatus::Exited,
                    exit_code: Some(0),
                    signal: None,
                    timeout_ms: 1000,
                    output_limit: 4096,
                    wall_ms: 12,
                    user_ms: 1,
                    system_ms: 2,
                    max_rss_kib: 900,
                    memory_peak_bytes: Some(5 << 20),
                    limits_hit: Some(Vec::new()),
                    reaped: true,
                }),
                started_at: Some(1_000),
                ended_at: Some(2_000),
                deadline: 3_000,
            },
            stdout: stdout.to_vec(),
            stderr: b"warn\n".to_vec(),
            results: None,
        }
    }

    #[test]
    fn round_trip() {
        let original = observation(b"ok\n");
        let bytes = original.encode().unwrap();
        assert_eq!(Observation::decode(&bytes).unwrap(), original);
    }

    /// Version 5 keeps a command's identity and the results file's state, its bytes after
    /// stderr, each checked: a changed byte of the results is refused, as is a version 4
    /// record that names either.
    #[test]
    fn a_commands_results_are_kept_after_the_output_and_checked() {
        for results in [
            CapturedResults::Absent,
            CapturedResults::Refused("a directory".into()),
            CapturedResults::Written(b"<testsuites/>".to_vec()),
            CapturedResults::Written(Vec::new()),
        ] {
            let mut original = observation(b"ok\n");
            original.results = Some(results.clone());
            if let Some(ids) = original.facts.identities.as_mut() {
                ids.command = Some(Digest::of(b"command"));
            }
            let bytes = original.encode().unwrap();
            assert_eq!(
                Observation::decode(&bytes).unwrap(),
                original,
                "{results:?}"
            );
            if let CapturedResults::Written(written) = &results
                && !written.is_empty()
            {
                let mut changed = bytes.clone();
                *changed.last_mut().unwrap() ^= 1;
                let error = Observation::decode(&changed).unwrap_err();
                assert!(error.contains("results bytes"), "{error}");
            }
        }
        let mut v4_with_command = observation(b"");
        if let Some(ids) = v4_with_command.facts.identities.as_mut() {
            ids.command = Some(Digest::of(b"command"));
        }
        let mut facts = v4_with_command.facts_value();
        let canonical::Value::Object(map) = &mut facts else {
            unreachable!()
        };
        map.insert("protocol".into(), OBSERVATION_FORMAT_V4.into());
        map.remove("results");
        let encoded = canonical::encode(&facts).unwrap();
        let mut framed = crate::framing::prefix(OBSERVATION_FORMAT_V4, encoded.len());
        framed.extend_from_slice(&encoded);
        let error = Observation::decode_format(OBSERVATION_FORMAT_V4, &framed).unwrap_err();
        assert!(error.contains("identities.command"), "{error}");
    }

    /// A remote run's record names its Action and worker; a local one's leaves `remote` out
    /// and stays valid; a malformed name, or `remote` in a version 4 record, is refused.
    #[test]
    fn a_remote_run_names_its_action_and_worker() {
        let action = format!("{}/140", "a".repeat(64));
        let mut remote = observation(b"ok\n");
        remote.facts.remote = Some(RemoteRun {
            action: action.clone(),
            worker: Some("worker-0".into()),
        });
        let bytes = remote.encode().unwrap();
        assert_eq!(Observation::decode(&bytes).unwrap(), remote);
        let shown = format!(r#""remote":{{"action":"{action}","worker":"worker-0"}}"#);
        assert!(String::from_utf8_lossy(&bytes).contains(&shown));
        let local = observation(b"ok\n").encode().unwrap();
        assert!(!String::from_utf8_lossy(&local).contains("remote"));
        let mut facts = remote.facts_value();
        let canonical::Value::Object(map) = &mut facts else {
            unreachable!()
        };
        let mut bad = map.clone();
        bad.insert(
            "remote".into(),
            canonical::object([("action", "nope".into()), ("worker", Value::Null)]),
        );
        let error = Observation::decode(&framed(OBSERVATION_FORMAT, &Value::Object(bad), &remote))
            .unwrap_err();
        assert!(error.contains("facts.remote"), "{error}");
        map.insert("protocol".into(), OBSERVATION_FORMAT_V4.into());
        map.remove("results");
        let v4 = framed(OBSERVATION_FORMAT_V4, &facts, &remote);
        let error = Observation::decode_format(OBSERVATION_FORMAT_V4, &v4).unwrap_err();
        assert!(error.contains("facts.remote"), "{error}");
    }

    /// The enforcement facts are the executor's, in its words: those it does not state are
    /// absent, and any others are kept as they are.
    #[test]
    fn enforcement_is_the_executors_facts() {
        let mut original = observation(b"ok\n");
        let stated = String::from_utf8_lossy(&original.encode().unwrap()).into_owned();
        assert!(
            stated.contains(
                r#""enforcement":{"host-identity":"reserved-id","landlock":"fully-enforced","landlock-abi":"6","memory":"cgroup-v1"}"#
            ),
            "{stated}"
        );
        assert!(stated.contains("\"memoryPeakBytes\":5242880"), "{stated}");
        if let Some(ids) = original.facts.identities.as_mut() {
            ids.enforcement = Enforcement::from_facts([("macos-sandbox", "enforced")]).unwrap();
        }
        if let Some(process) = original.facts.process.as_mut() {
            process.memory_peak_bytes = None;
        }
        let bytes = original.encode().unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for key in ["landlock", "memoryPeakBytes", "not-stated"] {
            assert!(!text.contains(key), "{key} in {text}");
        }
        assert_eq!(Observation::decode(&bytes).unwrap(), original);
    }

    /// The facts of `original` as an object, in the shape of `format` before version 4: no
    /// limits hit.
    fn facts_before_limits(original: &Observation, format: &str) -> Value {
        let mut value = original.facts_value();
        let canonical::Value::Object(map) = &mut value else {
            unreachable!()
        };
        map.insert("protocol".into(), format.into());
        map.remove("results");
        if let Some(canonical::Value::Object(process)) = map.get_mut("process") {
            process.remove("limitsHit");
        }
        value
    }

    fn framed(format: &str, facts: &Value, original: &Observation) -> Vec<u8> {
        let facts = canonical::encode(facts).unwrap();
        let mut bytes = crate::framing::prefix(format, facts.len());
        bytes.extend_from_slice(&facts);
        bytes.extend_from_slice(&original.stdout);
        bytes.extend_from_slice(&original.stderr);
        bytes
    }

    /// `original` in the shape of an older `format`: its facts as the fixed fields, and (in
    /// version 1) no harness.
    fn older(original: &Observation, format: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut value = facts_before_limits(original, format);
        let canonical::Value::Object(map) = &mut value else {
            unreachable!()
        };
        let Some(canonical::Value::Object(ids)) = map.get_mut("identities") else {
            unreachable!()
        };
        ids.remove("enforcement");
        ids.insert("landlockAbi".into(), canonical::Value::Integer(6));
        ids.insert("landlock".into(), "fully-enforced".into());
        for (key, text) in extra {
            ids.insert((*key).into(), (*text).into());
        }
        if format == OBSERVATION_FORMAT_V1 {
            ids.remove("harness");
        }
        framed(format, &value, original)
    }

    /// The limits a run hit are recorded from version 4 on, each checked as the contract
    /// states it; version 3 records read with them not recorded, and neither version takes
    /// the other's shape.
    #[test]
    fn version_four_records_the_limits_hit_and_version_three_reads_without_them() {
        use crate::contracts::Limit;
        let mut hit = observation(b"");
        if let Some(process) = hit.facts.process.as_mut() {
            process.limits_hit = Some(vec![
                LimitHit::new(Limit::Processes, 1024, "pids.events max 3").unwrap(),
                LimitHit::new(Limit::Scratch, 512 << 20, "no free block").unwrap(),
            ]);
        }
        let bytes = hit.encode().unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains(r#""limitsHit":[{"detail":"pids.events max 3","limit":"processes","value":1024},{"detail":"no free block","limit":"scratch","value":536870912}]"#),
            "{text}"
        );
        assert_eq!(Observation::decode(&bytes).unwrap(), hit);
        let none = observation(b"");
        assert!(
            String::from_utf8_lossy(&none.encode().unwrap()).contains(r#""limitsHit":[]"#),
            "an empty list is written: none hit, recorded"
        );

        let v3 = framed(
            OBSERVATION_FORMAT_V3,
            &facts_before_limits(&hit, OBSERVATION_FORMAT_V3),
            &hit,
        );
        let read = Observation::decode_format(OBSERVATION_FORMAT_V3, &v3).unwrap();
        assert_eq!(read.facts.process.as_ref().unwrap().limits_hit, None);
        assert!(
            Observation::decode(&v3).is_err(),
            "the judge's decoder reads only version 4"
        );
        // A version 3 record with limits, or a version 4 one without, is refused.
        let mut with_limits = hit.facts_value();
        let canonical::Value::Object(map) = &mut with_limits else {
            unreachable!()
        };
        map.insert("protocol".into(), OBSERVATION_FORMAT_V3.into());
        let mislabelled = framed(OBSERVATION_FORMAT_V3, &with_limits, &hit);
        assert!(Observation::decode_format(OBSERVATION_FORMAT_V3, &mislabelled).is_err());
        let without = facts_before_limits(&hit, OBSERVATION_FORMAT);
        assert!(Observation::decode(&framed(OBSERVATION_FORMAT, &without, &hit)).is_err());
        // Out of order, twice, or an unknown limit: refused.
        for bad in [
            r#"[{"detail":"b","limit":"scratch","value":1},{"detail":"a","limit":"processes","value":1}]"#,
            r#"[{"detail":"a","limit":"memory","value":1},{"detail":"a","limit":"memory","value":1}]"#,
            r#"[{"detail":"a","limit":"disk","value":1}]"#,
            r#"null"#,
        ] {
            let mut value = hit.facts_value();
            let canonical::Value::Object(map) = &mut value else {
                unreachable!()
            };
            let Some(canonical::Value::Object(process)) = map.get_mut("process") else {
                unreachable!()
            };
            process.insert(
                "limitsHit".into(),
                canonical::parse_canonical(bad.as_bytes()).unwrap(),
            );
            assert!(
                Observation::decode(&framed(OBSERVATION_FORMAT, &value, &hit)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn versions_one_and_two_are_read_as_facts() {
        let original = observation(b"ok\n");
        let bytes = older(&original, OBSERVATION_FORMAT_V1, &[]);
        let decoded = Observation::decode_format(OBSERVATION_FORMAT_V1, &bytes).unwrap();
        let ids = decoded.facts.identities.unwrap();
        assert_eq!(ids.harness, crate::snapshot::snapshot_digest(&[]).unwrap());
        assert_eq!(
            ids.enforcement,
            Enforcement::from_facts([("landlock", "fully-enforced"), ("landlock-abi", "6")])
                .unwrap()
        );
        assert!(
            Observation::decode(&bytes).is_err(),
            "the current decoder reads only version 4"
        );
        assert!(Observation::decode_format("sf-evidence/1", &bytes).is_err());

        let stated = [("hostIdentity", "reserved-id"), ("memory", "cgroup-v1")];
        let bytes = older(&original, OBSERVATION_FORMAT_V2, &stated);
        let decoded = Observation::decode_format(OBSERVATION_FORMAT_V2, &bytes).unwrap();
        let mut without_limits = original.clone();
        if let Some(process) = without_limits.facts.process.as_mut() {
            process.limits_hit = None;
        }
        assert_eq!(
            decoded, without_limits,
            "version 2's fields are the same four facts, and it recorded no limits"
        );
        assert!(Observation::decode(&bytes).is_err());
        for bad in [[("hostIdentity", "not-stated")], [("memory", "lots")]] {
            let bytes = older(&original, OBSERVATION_FORMAT_V2, &bad);
            assert!(
                Observation::decode_format(OBSERVATION_FORMAT_V2, &bytes).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_forged_header_on_stdout_stays_in_stdout() {
        let honest = observation(b"").encode().unwrap();
        let mut forged_facts = observation(b"").facts;
        forged_facts.check = "forged".into();
        let forged = Observation {
            facts: forged_facts,
            stdout: vec![],
            stderr: vec![],
            results: None,
        }
        .encode()
        .unwrap();
        // The program prints a whole forged observation on stdout.
        let original = observation(&forged);
        let decoded = Observation::decode(&original.encode().unwrap()).unwrap();
        assert_eq!(decoded.facts.check, "after");
        assert_eq!(decoded.stdout, forged);
        assert_ne!(honest, forged);
    }

    #[test]
    fn any_change_is_refused() {
        let bytes = observation(b"ok\n").encode().unwrap();
        for at in [0, 30, bytes.len() - 1] {
            let mut changed = bytes.clone();
            changed[at] ^= 0x20;
            assert!(Observation::decode(&changed).is_err(), "byte {at}");
        }
        let mut longer = bytes.clone();
        longer.push(b'x');
        assert!(Observation::decode(&longer).is_err());
    }

    #[test]
    fn problems_are_sanitised_and_bounded() {
        let many: Vec<String> = (0..20).map(|n| format!("p{n}\n\u{7f}")).collect();
        let kept = sanitize_problems(&many);
        assert_eq!(kept.len(), MAX_PROBLEMS);
        assert_eq!(kept[0], "p0??");
        assert_eq!(kept[15], "and 5 more problems");
        assert_eq!(sanitize_problem(&"é".repeat(2000)).chars().count(), 1024);
    }
}
