//! The repository observation (`sf-repository-observation/3`): what the collector saw of one
//! check's run, as the payload of one Evidence record.
//!
//! ```text
//! "sf-repository-observation/2\n"
//! <facts length, decimal, no leading zeros>"\n"
//! <facts: canonical JSON, naming the lengths and SHA-256 of stdout and stderr>
//! <stdout bytes><stderr bytes>
//! ```
//!
//! The collector's facts come first and are framed by their length, and the output streams
//! follow with lengths the facts fix: whatever a program prints (a forged facts header
//! included) stays inside its stdout or stderr bytes and is never read as facts.
//!
//! Version 2 added the harness to the run's identities; version 3 states the run's
//! enforcement as the executor's facts (`identities.enforcement`, an object of mechanism →
//! status) instead of the fixed fields `landlockAbi`, `landlock` and the optional
//! `hostIdentity` and `memory`. Records of versions 1 and 2 ([`OBSERVATION_FORMAT_V1`],
//! [`OBSERVATION_FORMAT_V2`]) are still read (a version 1 run had no harness, so its harness
//! identity is the empty snapshot's; their fixed fields read as the facts of four mechanisms,
//! as sf-contracts' `legacy_enforcement` maps them) but the collector writes, and the judge
//! counts, only version 3.

use crate::canonical::{self, Digest, Value, object};
use crate::contracts::legacy_enforcement::{LegacyEnforcement, NOT_STATED};
use crate::contracts::{Enforcement, RunIdentities, RunStatus};
use crate::repository::record::{FieldError, Fields};

use super::AssuranceError;
use super::acceptance::{Phase, Stage};
use super::time;

/// The protocol string of an observation, and the format of its Evidence records.
pub const OBSERVATION_FORMAT: &str = "sf-repository-observation/3";
/// The format of observations written before enforcement was stated as facts; read, never
/// written.
pub const OBSERVATION_FORMAT_V2: &str = "sf-repository-observation/2";
/// The format of observations written before the harness existed; read, never written.
pub const OBSERVATION_FORMAT_V1: &str = "sf-repository-observation/1";
/// The most problems one observation records.
pub const MAX_PROBLEMS: usize = 16;
/// The most characters of one problem.
pub const MAX_PROBLEM_CHARS: usize = 1024;

/// How far a check's run got, as the collector saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObservationStatus {
    /// The executor answered for a run that started.
    Observed,
    /// Something may have started, but the executor gave no answer (it panicked).
    Unresolved,
    /// Nothing was started; the problems say why.
    NotStarted,
}

impl ObservationStatus {
    /// The status as written in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observed => "observed",
            Self::Unresolved => "unresolved",
            Self::NotStarted => "not-started",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "observed" => Some(Self::Observed),
            "unresolved" => Some(Self::Unresolved),
            "not-started" => Some(Self::NotStarted),
            _ => None,
        }
    }
}

fn parse_run_status(text: &str) -> Option<RunStatus> {
    [
        RunStatus::Exited,
        RunStatus::Signalled,
        RunStatus::TimedOut,
        RunStatus::OutputLimit,
        RunStatus::Aborted,
    ]
    .into_iter()
    .find(|status| status.code() == text)
}

/// The process facts of a run that started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessFacts {
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The effective timeout the run was given (at most the recipe's).
    pub timeout_ms: u64,
    /// The stdout and stderr limit the run was given (the recipe's).
    pub output_limit: u64,
    pub wall_ms: u64,
    pub user_ms: u64,
    pub system_ms: u64,
    pub max_rss_kib: u64,
    /// The run's peak memory as a whole, where the executor measured it (recorded only then).
    pub memory_peak_bytes: Option<u64>,
    /// Whether the executor confirmed that no process of the run was left.
    pub reaped: bool,
}

/// Everything the collector records about one check's run, besides the output bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservationFacts {
    /// The collector closure of the code that wrote the record.
    pub collector: Digest,
    /// The Candidate digest.
    pub candidate: Digest,
    pub check: String,
    pub phase: Phase,
    pub stage: Stage,
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
    pub process: Option<ProcessFacts>,
    /// Milliseconds since the epoch by the collector's clock, immediately around the run.
    pub started_at: Option<u64>,
    pub ended_at: Option<u64>,
    /// The collection's deadline.
    pub deadline: u64,
}

/// One observation: the facts and the output bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Observation {
    pub facts: ObservationFacts,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
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

fn stream_value(bytes: &[u8]) -> Value {
    object([
        ("bytes", Value::Integer(bytes.len() as i64)),
        ("sha256", Digest::of(bytes).to_string().into()),
    ])
}

fn nullable_int(value: Option<i64>) -> Value {
    value.map_or(Value::Null, Value::Integer)
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value)
        .unwrap_or(canonical::MAX_SAFE_INTEGER)
        .min(canonical::MAX_SAFE_INTEGER)
}

impl Observation {
    /// The facts as the canonical JSON value the encoding holds (problems sanitised).
    pub fn facts_value(&self) -> Value {
        let facts = &self.facts;
        let identities = facts.identities.as_ref().map_or(Value::Null, |ids| {
            object([
                ("program", ids.program.to_string().into()),
                ("input", ids.input.to_string().into()),
                ("harness", ids.harness.to_string().into()),
                ("runtime", ids.runtime.to_string().into()),
                ("profile", ids.profile.to_string().into()),
                ("bounds", ids.bounds.to_string().into()),
                ("enforcement", ids.enforcement.to_value()),
            ])
        });
        let process = facts.process.as_ref().map_or(Value::Null, |process| {
            object([
                ("status", process.status.code().into()),
                ("exitCode", nullable_int(process.exit_code.map(i64::from))),
                ("signal", nullable_int(process.signal.map(i64::from))),
                ("timeoutMs", Value::Integer(clamp(process.timeout_ms))),
                ("outputLimit", Value::Integer(clamp(process.output_limit))),
                ("wallMs", Value::Integer(clamp(process.wall_ms))),
                ("userMs", Value::Integer(clamp(process.user_ms))),
                ("systemMs", Value::Integer(clamp(process.system_ms))),
                ("maxRssKib", Value::Integer(clamp(process.max_rss_kib))),
                (
                    "namespace",
                    if process.reaped {
                        "reaped"
                    } else {
                        "unconfirmed"
                    }
                    .into(),
                ),
            ])
        });
        let mut process = process;
        if let (Value::Object(map), Some(peak)) = (
            &mut process,
            facts
                .process
                .as_ref()
                .and_then(|facts| facts.memory_peak_bytes),
        ) {
            map.insert("memoryPeakBytes".to_owned(), Value::Integer(clamp(peak)));
        }
        let time = |millis: Option<u64>| millis.map(time::format_millis).into();
        object([
            ("protocol", OBSERVATION_FORMAT.into()),
            ("collector", facts.collector.to_string().into()),
            ("candidate", facts.candidate.to_string().into()),
            ("check", facts.check.as_str().into()),
            ("phase", facts.phase.as_str().into()),
            ("stage", facts.stage.as_str().into()),
            ("status", facts.status.as_str().into()),
            ("attributable", Value::Bool(facts.attributable)),
            (
                "problems",
                Value::Array(
                    sanitize_problems(&facts.problems)
                        .into_iter()
                        .map(Value::from)
                        .collect(),
                ),
            ),
            (
                "environment",
                facts.environment.as_ref().map(ToString::to_string).into(),
            ),
            ("identities", identities),
            ("process", process),
            ("startedAt", time(facts.started_at)),
            ("endedAt", time(facts.ended_at)),
            ("deadline", time::format_millis(facts.deadline).into()),
            ("stdout", stream_value(&self.stdout)),
            ("stderr", stream_value(&self.stderr)),
        ])
    }

    /// Encodes the observation (see the module documentation). Problems are sanitised here.
    pub fn encode(&self) -> Result<Vec<u8>, AssuranceError> {
        let facts = canonical::encode(&self.facts_value())
            .map_err(|error| AssuranceError::invalid("observation facts", error.to_string()))?;
        let mut bytes =
            Vec::with_capacity(64 + facts.len() + self.stdout.len() + self.stderr.len());
        bytes.extend_from_slice(&crate::framing::prefix(OBSERVATION_FORMAT, facts.len()));
        bytes.extend_from_slice(&facts);
        bytes.extend_from_slice(&self.stdout);
        bytes.extend_from_slice(&self.stderr);
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
            OBSERVATION_FORMAT_V2,
            OBSERVATION_FORMAT_V1,
        ]
        .contains(&format)
    }

    /// Decodes an observation of `format` (the current one, [`OBSERVATION_FORMAT_V2`] or
    /// [`OBSERVATION_FORMAT_V1`]), as strictly as [`Observation::decode`].
    pub fn decode_format(format: &str, bytes: &[u8]) -> Result<Self, String> {
        if !Self::is_format(format) {
            return Err(format!("{format:?} is not an observation format"));
        }
        let (head, streams) = crate::framing::split(bytes, format, "facts", 8)?;
        let value = canonical::parse_canonical(head).map_err(|error| format!("facts: {error}"))?;
        let (facts, stdout_len, stdout_sha, stderr_len, stderr_sha) =
            facts_from_value(&value, format)
                .map_err(|error| format!("{}: {}", error.field, error.rule))?;
        if stdout_len.checked_add(stderr_len) != Some(streams.len()) {
            return Err("the output bytes are not the lengths the facts name".into());
        }
        let (stdout, stderr) = streams.split_at(stdout_len);
        if Digest::of(stdout) != stdout_sha || Digest::of(stderr) != stderr_sha {
            return Err("the output bytes do not hash to the digests the facts name".into());
        }
        Ok(Self {
            facts,
            stdout: stdout.to_vec(),
            stderr: stderr.to_vec(),
        })
    }
}

type DecodedFacts = (ObservationFacts, usize, Digest, usize, Digest);

/// A run's identities in the shape of `format`: the fixed enforcement fields of versions 1
/// and 2, the facts of version 3.
fn identities_from_value(
    value: &Value,
    path: &str,
    format: &str,
) -> Result<RunIdentities, FieldError> {
    let v1 = format == OBSERVATION_FORMAT_V1;
    let v3 = format == OBSERVATION_FORMAT;
    let mut names = vec!["program", "input", "runtime", "profile", "bounds"];
    if !v1 {
        names.push("harness");
    }
    let optional: &[&str] = if v3 {
        names.push("enforcement");
        &[]
    } else {
        names.extend(["landlockAbi", "landlock"]);
        &["hostIdentity", "memory"]
    };
    let ids = Fields::with_optional(value, path, &names, optional)?;
    let harness = if v1 {
        crate::snapshot::snapshot_digest(&[])
            .map_err(|error| FieldError::wrong(&ids.path("harness"), error.to_string()))?
    } else {
        ids.digest("harness")?
    };
    let enforcement = if v3 {
        Enforcement::from_value(ids.value("enforcement"))
            .map_err(|rule| FieldError::wrong(&ids.path("enforcement"), rule))?
    } else {
        // A stated fact is never written as not-stated: that is its absence.
        let fact = |key: &str| -> Result<Option<String>, FieldError> {
            match ids.optional(key) {
                None => Ok(None),
                Some(Value::String(text)) if text != NOT_STATED => Ok(Some(text.clone())),
                Some(_) => Err(FieldError::wrong(
                    &ids.path(key),
                    "is a stated fact's name when present",
                )),
            }
        };
        LegacyEnforcement {
            landlock_abi: u32::try_from(ids.natural("landlockAbi")?)
                .map_err(|_| FieldError::wrong(&ids.path("landlockAbi"), "is a small integer"))?,
            landlock: ids.string("landlock")?.to_owned(),
            host_identity: fact("hostIdentity")?,
            memory: fact("memory")?,
        }
        .to_facts()
        .map_err(|(field, rule)| FieldError::wrong(&ids.path(field), rule))?
    };
    Ok(RunIdentities {
        program: ids.digest("program")?,
        input: ids.digest("input")?,
        harness,
        runtime: ids.digest("runtime")?,
        profile: ids.digest("profile")?,
        bounds: ids.digest("bounds")?,
        enforcement,
    })
}

fn facts_from_value(value: &Value, format: &str) -> Result<DecodedFacts, FieldError> {
    let fields = Fields::exact(
        value,
        "facts",
        &[
            "protocol",
            "collector",
            "candidate",
            "check",
            "phase",
            "stage",
            "status",
            "attributable",
            "problems",
            "environment",
            "identities",
            "process",
            "startedAt",
            "endedAt",
            "deadline",
            "stdout",
            "stderr",
        ],
    )?;
    fields.literal("protocol", format)?;
    let wrong = |key: &str, rule: &str| FieldError::wrong(&fields.path(key), rule);
    let phase = match fields.string("phase")? {
        "before" => Phase::Before,
        "after" => Phase::After,
        "guardrail" => Phase::Guardrail,
        _ => return Err(wrong("phase", "must be before, after or guardrail")),
    };
    let stage = Stage::parse(fields.string("stage")?)
        .ok_or_else(|| wrong("stage", "must be base or candidate"))?;
    let status = ObservationStatus::parse(fields.string("status")?)
        .ok_or_else(|| wrong("status", "must be observed, unresolved or not-started"))?;
    let attributable = match fields.value("attributable") {
        Value::Bool(flag) => *flag,
        _ => return Err(wrong("attributable", "must be a boolean")),
    };
    let mut problems = Vec::new();
    for item in fields.array("problems")? {
        match item {
            Value::String(text) if sanitize_problem(text) == *text => problems.push(text.clone()),
            _ => return Err(wrong("problems", "must be sanitised strings")),
        }
    }
    if problems.len() > MAX_PROBLEMS {
        return Err(wrong("problems", "holds at most 16 problems"));
    }
    let identities = match fields.value("identities") {
        Value::Null => None,
        value => Some(identities_from_value(
            value,
            &fields.path("identities"),
            format,
        )?),
    };
    let process = match fields.value("process") {
        Value::Null => None,
        value => {
            let process = Fields::with_optional(
                value,
                &fields.path("process"),
                &[
                    "status",
                    "exitCode",
                    "signal",
                    "timeoutMs",
                    "outputLimit",
                    "wallMs",
                    "userMs",
                    "systemMs",
                    "maxRssKib",
                    "namespace",
                ],
                &["memoryPeakBytes"],
            )?;
            let small = |key: &str| -> Result<Option<i32>, FieldError> {
                match process.value(key) {
                    Value::Null => Ok(None),
                    Value::Integer(n) => i32::try_from(*n)
                        .map(Some)
                        .map_err(|_| FieldError::wrong(&process.path(key), "is a 32-bit integer")),
                    _ => Err(FieldError::wrong(
                        &process.path(key),
                        "is an integer or null",
                    )),
                }
            };
            let reaped = match process.string("namespace")? {
                "reaped" => true,
                "unconfirmed" => false,
                _ => {
                    return Err(FieldError::wrong(
                        &process.path("namespace"),
                        "must be reaped or unconfirmed",
                    ));
                }
            };
            Some(ProcessFacts {
                status: parse_run_status(process.string("status")?).ok_or_else(|| {
                    FieldError::wrong(&process.path("status"), "must be a run status")
                })?,
                exit_code: small("exitCode")?,
                signal: small("signal")?,
                timeout_ms: process.natural("timeoutMs")?,
                output_limit: process.natural("outputLimit")?,
                wall_ms: process.natural("wallMs")?,
                user_ms: process.natural("userMs")?,
                system_ms: process.natural("systemMs")?,
                max_rss_kib: process.natural("maxRssKib")?,
                memory_peak_bytes: match process.optional("memoryPeakBytes") {
                    None => None,
                    Some(_) => Some(process.natural("memoryPeakBytes")?),
                },
                reaped,
            })
        }
    };
    let time = |key: &str| -> Result<Option<u64>, FieldError> {
        match fields.nullable_string(key)? {
            None => Ok(None),
            Some(text) => time::parse_millis(text)
                .map(Some)
                .ok_or_else(|| wrong(key, "must be YYYY-MM-DDTHH:MM:SS.mmmZ")),
        }
    };
    let deadline = time("deadline")?.ok_or_else(|| wrong("deadline", "must be a timestamp"))?;
    let stream = |key: &str| -> Result<(usize, Digest), FieldError> {
        let stream = Fields::exact(fields.value(key), &fields.path(key), &["bytes", "sha256"])?;
        let bytes = usize::try_from(stream.natural("bytes")?)
            .map_err(|_| FieldError::wrong(&stream.path("bytes"), "is too large"))?;
        Ok((bytes, stream.digest("sha256")?))
    };
    let (stdout_len, stdout_sha) = stream("stdout")?;
    let (stderr_len, stderr_sha) = stream("stderr")?;
    let facts = ObservationFacts {
        collector: fields.digest("collector")?,
        candidate: fields.digest("candidate")?,
        check: fields.string("check")?.to_owned(),
        phase,
        stage,
        status,
        attributable,
        problems,
        environment: fields.nullable_digest("environment")?,
        identities,
        process,
        started_at: time("startedAt")?,
        ended_at: time("endedAt")?,
        deadline,
    };
    Ok((facts, stdout_len, stdout_sha, stderr_len, stderr_sha))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(stdout: &[u8]) -> Observation {
        Observation {
            facts: ObservationFacts {
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
                    reaped: true,
                }),
                started_at: Some(1_000),
                ended_at: Some(2_000),
                deadline: 3_000,
            },
            stdout: stdout.to_vec(),
            stderr: b"warn\n".to_vec(),
        }
    }

    #[test]
    fn round_trip() {
        let original = observation(b"ok\n");
        let bytes = original.encode().unwrap();
        assert_eq!(Observation::decode(&bytes).unwrap(), original);
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

    /// `original` in the shape of an older `format`: its facts as the fixed fields, and (in
    /// version 1) no harness.
    fn older(original: &Observation, format: &str, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut value = original.facts_value();
        let canonical::Value::Object(map) = &mut value else {
            unreachable!()
        };
        map.insert("protocol".into(), format.into());
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
        let facts = canonical::encode(&value).unwrap();
        let mut bytes = crate::framing::prefix(format, facts.len());
        bytes.extend_from_slice(&facts);
        bytes.extend_from_slice(&original.stdout);
        bytes.extend_from_slice(&original.stderr);
        bytes
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
            "the current decoder reads only version 3"
        );
        assert!(Observation::decode_format("sf-evidence/1", &bytes).is_err());

        let stated = [("hostIdentity", "reserved-id"), ("memory", "cgroup-v1")];
        let bytes = older(&original, OBSERVATION_FORMAT_V2, &stated);
        let decoded = Observation::decode_format(OBSERVATION_FORMAT_V2, &bytes).unwrap();
        assert_eq!(
            decoded, original,
            "version 2's fields are the same four facts"
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
