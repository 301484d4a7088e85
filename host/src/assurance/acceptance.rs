//! The acceptance (`sf-repository-acceptance/2`): a Slice's frozen checks and what each
//! expects. Process checks run an entry file, of one stage's tree or of the Slice's harness,
//! in the sandbox; review checks are reserved and never run.
//!
//! Version 2 added where the entry is (`{"from": "tree" | "harness", "path"}`) and
//! `entryInScope`, which says whether the Candidate may rewrite the entry (a check of stage
//! candidate whose entry is a tree file inside the Slice's scope): the freeze refuses a Slice
//! where it does not say so truthfully.

use std::collections::BTreeSet;

use crate::canonical::{self, Digest, Value, object};
use crate::contracts::executor::{EntryPlace, MAX_ARG_BYTES, MAX_ARGS, RunEntry};
use crate::repository::record::{FieldError, Fields, index};
use crate::repository::{ID_RULE, is_valid_id};
use crate::source_path;

use super::{AssuranceError, record_digest, record_from_json};

/// The protocol string of the acceptance record.
pub const ACCEPTANCE_PROTOCOL: &str = "sf-repository-acceptance/2";
/// The most checks an acceptance holds.
pub const MAX_CHECKS: usize = 64;
/// The longest review prompt, in bytes.
pub const MAX_PROMPT_BYTES: usize = 4096;

/// When a process check runs, and what it shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Shows the defect on the base: runs on stage base, and its expectation is the failure.
    Before,
    /// Shows the fix on the Candidate: runs on stage candidate.
    After,
    /// Shows that something that must keep working does: runs on either stage.
    Guardrail,
}

impl Phase {
    /// The phase as written in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Before => "before",
            Self::After => "after",
            Self::Guardrail => "guardrail",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "before" => Some(Self::Before),
            "after" => Some(Self::After),
            "guardrail" => Some(Self::Guardrail),
            _ => None,
        }
    }
}

/// Which tree a process check runs: the base B or the Candidate M.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Base,
    Candidate,
}

impl Stage {
    /// The stage as written in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Base => "base",
            Self::Candidate => "candidate",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "base" => Some(Self::Base),
            "candidate" => Some(Self::Candidate),
            _ => None,
        }
    }
}

/// What a process check's run must show: its exit code and, unless `None`, the SHA-256 of
/// its stdout. The expected stdout itself is never stored where a Candidate could read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    pub exit_code: i32,
    pub stdout_digest: Option<Digest>,
}

/// A check that runs one program once in the sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessCheck {
    pub id: String,
    pub phase: Phase,
    pub stage: Stage,
    /// The file given to the runtime first: a file of the stage's tree
    /// ([`EntryPlace::Program`], written `"tree"`) or of the Slice's harness.
    pub entry: RunEntry,
    /// Whether the Candidate may rewrite the entry: true exactly for a check of stage
    /// candidate whose entry is a tree file inside the Slice's scope.
    pub entry_in_scope: bool,
    pub args: Vec<String>,
    /// The snapshot digest of the one input the program reads.
    pub input: Digest,
    pub expectation: Expectation,
}

/// How a record writes where an entry is.
fn entry_from(place: EntryPlace) -> &'static str {
    match place {
        EntryPlace::Program => "tree",
        EntryPlace::Harness => "harness",
    }
}

/// A check for a person to answer; reserved: sf never runs it and the judge does not count it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewCheck {
    pub id: String,
    pub prompt: String,
}

/// One check of an acceptance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    Process(ProcessCheck),
    Review(ReviewCheck),
}

impl Check {
    /// The check's id.
    pub fn id(&self) -> &str {
        match self {
            Self::Process(check) => &check.id,
            Self::Review(check) => &check.id,
        }
    }
}

/// A Slice's frozen acceptance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acceptance {
    pub checks: Vec<Check>,
}

impl Acceptance {
    /// The process checks, in the order listed (which is phase order).
    pub fn process_checks(&self) -> impl Iterator<Item = &ProcessCheck> {
        self.checks.iter().filter_map(|check| match check {
            Check::Process(check) => Some(check),
            Check::Review(_) => None,
        })
    }

    /// Checks the rules the types do not carry: 1 to 64 checks with distinct valid ids, at
    /// least one process check, process checks listed in phase order (before, after,
    /// guardrail), a before check on stage base and an after check on stage candidate, valid
    /// entries and arguments, exit codes 0 to 255, and review prompts of 1 to 4096 bytes.
    pub fn validate(&self) -> Result<(), AssuranceError> {
        let invalid = |input: String, rule: &str| AssuranceError::invalid(input, rule);
        if self.checks.is_empty() || self.checks.len() > MAX_CHECKS {
            return Err(invalid("acceptance.checks".into(), "holds 1 to 64 checks"));
        }
        let mut ids = BTreeSet::new();
        let mut last_phase = Phase::Before;
        let mut processes = 0;
        for (at, check) in self.checks.iter().enumerate() {
            let field = format!("acceptance.checks[{at}]");
            if !is_valid_id(check.id()) {
                return Err(invalid(format!("{field}.id"), ID_RULE));
            }
            if !ids.insert(check.id()) {
                return Err(invalid(
                    format!("{field}.id ({})", check.id()),
                    "check ids are distinct",
                ));
            }
            match check {
                Check::Review(review) => {
                    if review.prompt.is_empty() || review.prompt.len() > MAX_PROMPT_BYTES {
                        return Err(invalid(format!("{field}.prompt"), "holds 1 to 4096 bytes"));
                    }
                }
                Check::Process(process) => {
                    processes += 1;
                    if process.phase < last_phase {
                        return Err(invalid(
                            format!("{field}.phase"),
                            "process checks are listed in phase order: before, after, guardrail",
                        ));
                    }
                    last_phase = process.phase;
                    match (process.phase, process.stage) {
                        (Phase::Before, Stage::Candidate) => {
                            return Err(invalid(
                                format!("{field}.stage"),
                                "a before check runs on stage base",
                            ));
                        }
                        (Phase::After, Stage::Base) => {
                            return Err(invalid(
                                format!("{field}.stage"),
                                "an after check runs on stage candidate",
                            ));
                        }
                        _ => {}
                    }
                    source_path::check_path(&process.entry.path)
                        .map_err(|rule| invalid(format!("{field}.entry.path"), rule.describe()))?;
                    if process.entry_in_scope
                        && (process.stage != Stage::Candidate
                            || process.entry.place != EntryPlace::Program)
                    {
                        return Err(invalid(
                            format!("{field}.entryInScope"),
                            "only a check of stage candidate with an entry of the tree can have \
                             its entry in the scope",
                        ));
                    }
                    if process.args.len() > MAX_ARGS
                        || process.args.iter().map(String::len).sum::<usize>() > MAX_ARG_BYTES
                        || process.args.iter().any(|arg| arg.contains('\0'))
                    {
                        return Err(invalid(
                            format!("{field}.args"),
                            "at most 256 arguments of at most 64 KiB together, none holding NUL",
                        ));
                    }
                    if !(0..=255).contains(&process.expectation.exit_code) {
                        return Err(invalid(
                            format!("{field}.expectation.exitCode"),
                            "an exit code is 0 to 255",
                        ));
                    }
                }
            }
        }
        if processes == 0 {
            return Err(invalid(
                "acceptance.checks".into(),
                "holds at least one process check",
            ));
        }
        Ok(())
    }

    /// The record as a JSON value.
    pub fn to_value(&self) -> Value {
        let checks = self
            .checks
            .iter()
            .map(|check| match check {
                Check::Process(process) => object([
                    ("kind", "process".into()),
                    ("id", process.id.as_str().into()),
                    ("phase", process.phase.as_str().into()),
                    ("stage", process.stage.as_str().into()),
                    (
                        "entry",
                        object([
                            ("from", entry_from(process.entry.place).into()),
                            ("path", process.entry.path.as_str().into()),
                        ]),
                    ),
                    ("entryInScope", Value::Bool(process.entry_in_scope)),
                    (
                        "args",
                        Value::Array(process.args.iter().map(|arg| arg.as_str().into()).collect()),
                    ),
                    ("input", process.input.to_string().into()),
                    (
                        "expectation",
                        object([
                            (
                                "exitCode",
                                Value::Integer(i64::from(process.expectation.exit_code)),
                            ),
                            (
                                "stdoutDigest",
                                process
                                    .expectation
                                    .stdout_digest
                                    .as_ref()
                                    .map(ToString::to_string)
                                    .into(),
                            ),
                        ]),
                    ),
                ]),
                Check::Review(review) => object([
                    ("kind", "review".into()),
                    ("id", review.id.as_str().into()),
                    ("prompt", review.prompt.as_str().into()),
                ]),
            })
            .collect();
        object([
            ("protocol", ACCEPTANCE_PROTOCOL.into()),
            ("checks", Value::Array(checks)),
        ])
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        canonical::encode(&self.to_value())
            .map_err(|error| AssuranceError::invalid("acceptance", error.to_string()))
    }

    /// The `sha256:` of the canonical bytes: what a Candidate is sealed for.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_digest(&self.to_value(), "acceptance")
    }

    /// Parses an acceptance strictly (any valid JSON; exactly the declared fields) and
    /// validates it.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let acceptance = record_from_json(bytes, "acceptance", Self::from_value)?;
        acceptance.validate()?;
        Ok(acceptance)
    }

    /// The checks whose entry is a file of the harness.
    pub fn harness_entries(&self) -> impl Iterator<Item = &ProcessCheck> {
        self.process_checks()
            .filter(|check| check.entry.place == EntryPlace::Harness)
    }

    pub(crate) fn from_value(value: &Value) -> Result<Self, FieldError> {
        let fields = Fields::exact(value, "acceptance", &["protocol", "checks"])?;
        fields.literal("protocol", ACCEPTANCE_PROTOCOL)?;
        let mut checks = Vec::new();
        for (at, item) in fields.array("checks")?.iter().enumerate() {
            let path = index("acceptance.checks", at);
            let kind = match item {
                Value::Object(map) => map.get("kind"),
                _ => None,
            };
            let check = match kind {
                Some(Value::String(kind)) if kind == "review" => {
                    let check = Fields::exact(item, &path, &["kind", "id", "prompt"])?;
                    Check::Review(ReviewCheck {
                        id: check.string("id")?.to_owned(),
                        prompt: check.string("prompt")?.to_owned(),
                    })
                }
                Some(Value::String(kind)) if kind == "process" => {
                    let check = Fields::exact(
                        item,
                        &path,
                        &[
                            "kind",
                            "id",
                            "phase",
                            "stage",
                            "entry",
                            "entryInScope",
                            "args",
                            "input",
                            "expectation",
                        ],
                    )?;
                    let entry = Fields::exact(
                        check.value("entry"),
                        &check.path("entry"),
                        &["from", "path"],
                    )?;
                    let place = match entry.string("from")? {
                        "tree" => EntryPlace::Program,
                        "harness" => EntryPlace::Harness,
                        _ => {
                            return Err(FieldError::wrong(
                                &entry.path("from"),
                                "must be tree or harness",
                            ));
                        }
                    };
                    let entry_in_scope = match check.value("entryInScope") {
                        Value::Bool(flag) => *flag,
                        _ => {
                            return Err(FieldError::wrong(
                                &check.path("entryInScope"),
                                "must be true or false",
                            ));
                        }
                    };
                    let phase = Phase::parse(check.string("phase")?).ok_or_else(|| {
                        FieldError::wrong(
                            &check.path("phase"),
                            "must be before, after or guardrail",
                        )
                    })?;
                    let stage = Stage::parse(check.string("stage")?).ok_or_else(|| {
                        FieldError::wrong(&check.path("stage"), "must be base or candidate")
                    })?;
                    let mut args = Vec::new();
                    for (arg_at, arg) in check.array("args")?.iter().enumerate() {
                        match arg {
                            Value::String(text) => args.push(text.clone()),
                            other => {
                                return Err(FieldError::wrong(
                                    &index(&check.path("args"), arg_at),
                                    format!("must be a string, not {}", other.type_name()),
                                ));
                            }
                        }
                    }
                    let expectation = Fields::exact(
                        check.value("expectation"),
                        &check.path("expectation"),
                        &["exitCode", "stdoutDigest"],
                    )?;
                    let exit_code =
                        i32::try_from(expectation.integer("exitCode")?).map_err(|_| {
                            FieldError::wrong(
                                &expectation.path("exitCode"),
                                "an exit code is 0 to 255",
                            )
                        })?;
                    Check::Process(ProcessCheck {
                        id: check.string("id")?.to_owned(),
                        phase,
                        stage,
                        entry: RunEntry {
                            place,
                            path: entry.string("path")?.to_owned(),
                        },
                        entry_in_scope,
                        args,
                        input: check.digest("input")?,
                        expectation: Expectation {
                            exit_code,
                            stdout_digest: expectation.nullable_digest("stdoutDigest")?,
                        },
                    })
                }
                _ => {
                    return Err(FieldError::wrong(
                        &format!("{path}.kind"),
                        "must be \"process\" or \"review\"",
                    ));
                }
            };
            checks.push(check);
        }
        Ok(Self { checks })
    }
}
