//! The acceptance (`sf-repository-acceptance/2`): a Slice's frozen checks and what each
//! expects. Process checks run an entry file, of one stage's tree or of the Slice's harness,
//! in the sandbox; review checks are reserved and never run.
//!
//! Version 2 added where the entry is (`{"from": "tree" | "harness", "path"}`) and
//! `entryInScope`, which says whether the Candidate may rewrite the entry (a check of stage
//! candidate whose entry is a tree file inside the Slice's scope): the freeze refuses a Slice
//! where it does not say so truthfully.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::contracts::executor::{EntryPlace, MAX_ARG_BYTES, MAX_ARGS, RunEntry};
use crate::contracts::tree_path;
use crate::repository::{ID_RULE, is_valid_id};

use super::{AssuranceError, invalid_field, read_record, record_bytes, record_bytes_digest};

/// The protocol string of the acceptance record.
pub const ACCEPTANCE_PROTOCOL: &str = "sf-repository-acceptance/2";
/// The most checks an acceptance holds.
pub const MAX_CHECKS: usize = 64;
/// The longest review prompt, in bytes.
pub const MAX_PROMPT_BYTES: usize = 4096;

crate::contracts::word_enum! {
    /// When a process check runs, and what it shows.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Phase {
        /// Shows the defect on the base: runs on stage base, and its expectation is the failure.
        "before" Before,
        /// Shows the fix on the Candidate: runs on stage candidate.
        "after" After,
        /// Shows that something that must keep working does: runs on either stage.
        "guardrail" Guardrail,
    }
}

crate::contracts::word_enum! {
    /// Which tree a process check runs: the base B or the Candidate M.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Stage {
        /// The base commit B's tree, as it was before the proposal.
        "base" Base,
        /// The Candidate commit M's tree: the base with the proposal applied.
        "candidate" Candidate,
    }
}

/// What a process check's run must show: its exit code and, unless `None`, the SHA-256 of
/// its stdout. The expected stdout itself is never stored where a Candidate could read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectation {
    /// The exit code the program must end with (0 to 255).
    pub exit_code: i32,
    /// The `sha256:` the stdout bytes must have, or `None` when stdout is not compared.
    #[serde(deserialize_with = "canonical::nullable")]
    pub stdout_digest: Option<Digest>,
}

/// A check that runs one program once in the sandbox (`"kind": "process"` in records).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
pub struct ProcessCheck {
    /// The check's id, distinct within the acceptance; follows [`ID_RULE`].
    pub id: String,
    /// When the check runs and what it shows.
    pub phase: Phase,
    /// Which tree it runs: a before check runs on the base, an after check on the Candidate.
    pub stage: Stage,
    /// The file given to the runtime first: a file of the stage's tree
    /// ([`EntryPlace::Program`], written `"tree"`) or of the Slice's harness.
    #[serde(with = "entry_record")]
    pub entry: RunEntry,
    /// Whether the Candidate may rewrite the entry: true exactly for a check of stage
    /// candidate whose entry is a tree file inside the Slice's scope.
    pub entry_in_scope: bool,
    /// The arguments passed after the entry: at most 256, 64 KiB together, none holding NUL.
    pub args: Vec<String>,
    /// The snapshot digest of the one input the program reads.
    pub input: Digest,
    /// What the run must show for the check to pass.
    pub expectation: Expectation,
}

canonical::literal_fields!(ProcessCheck { "kind": "process" });

/// How a record writes an entry: `{"from": "tree" | "harness", "path"}`.
mod entry_record {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::contracts::executor::{EntryPlace, RunEntry};

    #[derive(Clone, Copy, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum From {
        Tree,
        Harness,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry<'a> {
        from: From,
        #[serde(borrow)]
        path: std::borrow::Cow<'a, str>,
    }

    pub(super) fn serialize<S: Serializer>(
        entry: &RunEntry,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let from = match entry.place {
            EntryPlace::Program => From::Tree,
            EntryPlace::Harness => From::Harness,
        };
        Entry {
            from,
            path: entry.path.as_str().into(),
        }
        .serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<RunEntry, D::Error> {
        let entry = Entry::deserialize(deserializer)?;
        let place = match entry.from {
            From::Tree => EntryPlace::Program,
            From::Harness => EntryPlace::Harness,
        };
        Ok(RunEntry {
            place,
            path: entry.path.into_owned(),
        })
    }
}

/// A check for a person to answer; reserved: sf never runs it and the judge does not count it
/// (`"kind": "review"` in records).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ReviewCheck {
    /// The check's id, distinct within the acceptance; follows [`ID_RULE`].
    pub id: String,
    /// The question for the reviewer: 1 to 4096 bytes.
    pub prompt: String,
}
canonical::literal_fields!(ReviewCheck { "kind": "review" });

/// One check of an acceptance; its `kind` says which (see [`Acceptance::from_json`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Check {
    /// A program run once in the sandbox (`"kind": "process"`).
    Process(ProcessCheck),
    /// A question for a person; reserved, never run (`"kind": "review"`).
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(remote = "Self")]
pub struct Acceptance {
    /// 1 to 64 checks with distinct ids, the process checks in phase order.
    pub checks: Vec<Check>,
}
canonical::literal_fields!(serialize Acceptance { "protocol": ACCEPTANCE_PROTOCOL });

/// The acceptance as it is read: its checks as JSON, each then read as the kind it names.
#[derive(Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct AcceptanceRecord {
    checks: Vec<Value>,
}
canonical::literal_fields!(deserialize AcceptanceRecord { "protocol": ACCEPTANCE_PROTOCOL });

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
                    tree_path::check_path(&process.entry.path, None)
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
        canonical::to_value(self).expect("an acceptance holds only strings and integers")
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        record_bytes(self, "acceptance")
    }

    /// The `sha256:` of the canonical bytes: what a Candidate is sealed for.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_bytes_digest(self, "acceptance")
    }

    /// Parses an acceptance strictly (any valid JSON; exactly the declared fields; each check
    /// exactly the fields of the `kind` it names) and validates it.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let record: AcceptanceRecord = read_record(bytes, "acceptance")?;
        let mut checks = Vec::with_capacity(record.checks.len());
        for (at, check) in record.checks.iter().enumerate() {
            let path = format!("acceptance.checks[{at}]");
            let kind = canonical::variant_tag(check, &path, "kind", &["process", "review"])
                .map_err(invalid_field)?;
            checks.push(if kind == "process" {
                Check::Process(canonical::from_value(check, &path).map_err(invalid_field)?)
            } else {
                Check::Review(canonical::from_value(check, &path).map_err(invalid_field)?)
            });
        }
        let acceptance = Self { checks };
        acceptance.validate()?;
        Ok(acceptance)
    }

    /// The checks whose entry is a file of the harness.
    pub fn harness_entries(&self) -> impl Iterator<Item = &ProcessCheck> {
        self.process_checks()
            .filter(|check| check.entry.place == EntryPlace::Harness)
    }
}
