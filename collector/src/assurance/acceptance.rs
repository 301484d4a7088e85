//! The acceptance (`sf-repository-acceptance/3`): a Slice's frozen checks and what each
//! expects. Process checks run one process in the sandbox: the runtime with an entry file,
//! of one stage's tree or of the Slice's harness (`"kind": "process"`), or a command
//! (`"kind": "command"`: an argv, a working directory, variables, a dependency environment,
//! a JUnit results file and per-test expectations); review checks are never run: a person
//! answers them (`sf review`), and the judge counts the answers; oats checks run an oats
//! capability's operation (`"kind": "oats"`, [`CheckOats`]) and are graded on its envelope.
//!
//! Version 2 added where the entry is (`{"from": "tree" | "harness", "path"}`) and
//! `entryInScope`, which says whether the Candidate may rewrite the entry (a check of stage
//! candidate whose entry is a tree file inside the Slice's scope): the freeze refuses a Slice
//! where it does not say so truthfully. Version 3 added command checks; version 4 counted
//! review checks (reviewers and the approvals needed; in versions 2 and 3 a review check is
//! reserved and never counted); version 5 added oats checks. An acceptance is written in the
//! lowest version that holds it
//! (so its digest is what it was before the later versions existed), and all three are read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::contracts::executor::{EntryPlace, MAX_ARG_BYTES, MAX_ARGS, RunEntry};
use crate::contracts::{ResultsRequest, RunCommand, RunEnvironment, RunResources};

use super::review::{ReviewRequirement, Reviewer};
use super::test_results::TestExpectation;
use crate::contracts::tree_path;
use crate::repository::{ID_RULE, is_valid_id};

use super::{AssuranceError, invalid_field, read_record, record_bytes, record_bytes_digest};

/// The protocol string of an acceptance record holding an oats check.
pub const ACCEPTANCE_PROTOCOL_V5: &str = "sf-repository-acceptance/5";
/// The protocol string of an acceptance record holding a counted review check.
pub const ACCEPTANCE_PROTOCOL_V4: &str = "sf-repository-acceptance/4";
/// The protocol string of an acceptance record holding a command check and no counted review
/// check.
pub const ACCEPTANCE_PROTOCOL: &str = "sf-repository-acceptance/3";
/// The protocol string of an acceptance record without command checks (written and read).
pub const ACCEPTANCE_PROTOCOL_V2: &str = "sf-repository-acceptance/2";
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
/// its stdout; for a command check with results, the tests that must fail on the base and
/// pass on the Candidate (`failToPass`) and those that must pass on both (`passToPass`), by
/// the runner's test ids. The expected stdout itself is never stored where a Candidate could
/// read it. The test lists are written only when they are not empty.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectation {
    /// The exit code the program must end with (0 to 255).
    pub exit_code: i32,
    /// The `sha256:` the stdout bytes must have, or `None` (null, or absent as authored) when
    /// stdout is not compared.
    #[serde(default, deserialize_with = "canonical::nullable")]
    pub stdout_digest: Option<Digest>,
    /// Tests that fail or error on the base and pass on the Candidate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_to_pass: Vec<String>,
    /// Tests that pass on both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_to_pass: Vec<String>,
}

impl Expectation {
    /// An expectation of an exit code and, optionally, a stdout digest; no test lists.
    pub fn exit(exit_code: i32, stdout_digest: Option<Digest>) -> Self {
        Self {
            exit_code,
            stdout_digest,
            fail_to_pass: Vec::new(),
            pass_to_pass: Vec::new(),
        }
    }

    /// The per-test part, for the grader.
    pub fn tests(&self) -> TestExpectation {
        TestExpectation {
            fail_to_pass: self.fail_to_pass.clone(),
            pass_to_pass: self.pass_to_pass.clone(),
        }
    }
}

/// A check that runs one process once in the sandbox: the runtime with an entry file
/// (`"kind": "process"` in records) or a command (`"kind": "command"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessCheck {
    /// The check's id, distinct within the acceptance; follows [`ID_RULE`].
    pub id: String,
    /// When the check runs and what it shows.
    pub phase: Phase,
    /// Which tree it runs: a before check runs on the base, an after check on the Candidate.
    pub stage: Stage,
    /// What runs.
    pub run: CheckRun,
    /// The snapshot digest of the one input the program reads.
    pub input: Digest,
    /// What the run must show for the check to pass.
    pub expectation: Expectation,
}

/// What a process check runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckRun {
    /// The runtime, given an entry file and arguments.
    Entry {
        /// The file given to the runtime first: a file of the stage's tree
        /// ([`EntryPlace::Program`], written `"tree"`) or of the Slice's harness.
        entry: RunEntry,
        /// Whether the Candidate may rewrite the entry: true exactly for a check of stage
        /// candidate whose entry is a tree file inside the Slice's scope.
        entry_in_scope: bool,
        /// The arguments passed after the entry: at most 256, 64 KiB together, none
        /// holding NUL.
        args: Vec<String>,
    },
    /// A command (boxed: it is most of a check's size, and most checks are read, not moved).
    Command(Box<CheckCommand>),
    /// An oats capability's operation.
    Oats(Box<CheckOats>),
}

/// The launcher an oats check's staged harness holds at its top: the run's entry.
pub const OATS_LAUNCHER: &str = "sf-oats-launch.mjs";
/// The launch request an oats check's staged harness holds at its top: the launcher's one
/// argument.
pub const OATS_REQUEST: &str = "request.json";
/// The longest capability id, operation name, argument name or error code of an oats check.
pub const MAX_OATS_NAME: usize = 128;

/// An oats capability's operation run as a check. The capability is registered with sf's
/// oats host, which stages the run: its harness is the capability's bytes (at the pinned
/// `integrity`), the launcher and the launch request (the operation, its arguments, and the
/// stage's tree as its working directory), whose snapshot digest the freeze pins
/// (`harness`). The run is the launcher, run by the Node runtime, with the stage's tree as
/// its program; it passes when the operation's one envelope is what `expect` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOats {
    /// The capability id.
    pub capability: String,
    /// The capability's integrity when frozen (`oats.tree-exec.v1:sha256-…`).
    pub integrity: String,
    /// The operation.
    pub operation: String,
    /// Its declared arguments, by name.
    pub args: BTreeMap<String, String>,
    /// The snapshot digest of the staged harness.
    pub harness: Digest,
    /// What the operation must answer.
    pub expect: OatsExpectation,
}

/// What an oats check's operation must answer: an `ok: true` envelope (and exit 0), or an
/// `ok: false` one, with this `code` when one is named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OatsExpectation {
    /// Whether the envelope says `ok`.
    pub ok: bool,
    /// The error code an `ok: false` envelope must carry (`E_…`); `None` for any.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub code: Option<String>,
}

impl OatsExpectation {
    /// The process expectation an oats check stands on: exit 0 for `ok: true`; for `ok:
    /// false` the exit code is not what decides (failed envelopes come with any non-zero
    /// code), so it is 1 and the judge grades the envelope instead ([`CheckRun::Oats`]).
    fn as_process(&self) -> Expectation {
        Expectation::exit(if self.ok { 0 } else { 1 }, None)
    }
}

crate::contracts::word_enum! {
    /// Which directory a command's working directory is in.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum CwdFrom {
        /// The stage's tree, `/sf/program`.
        "tree" Tree,
        /// The Slice's harness, `/sf/harness`.
        "harness" Harness,
        /// The check's input, `/sf/input`.
        "input" Input,
        /// The run's scratch space, `/sf/scratch` (its `path` is empty).
        "scratch" Scratch,
    }
}

/// A command's working directory: a directory of a place, `""` for the place itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckCwd {
    /// The place.
    pub from: CwdFrom,
    /// The directory below it, in the repository's path grammar, or `""`.
    pub path: String,
}

impl CheckCwd {
    /// The directory inside a run.
    pub fn inside(&self) -> String {
        let dir = match self.from {
            CwdFrom::Tree => crate::contracts::PROGRAM_DIR,
            CwdFrom::Harness => crate::contracts::HARNESS_DIR,
            CwdFrom::Input => crate::contracts::INPUT_DIR,
            CwdFrom::Scratch => crate::contracts::SCRATCH_DIR,
        };
        if self.path.is_empty() {
            dir.to_owned()
        } else {
            format!("{dir}/{}", self.path)
        }
    }
}

/// A dependency environment a command runs in: its name in the store when it was frozen, its
/// digest (what is pinned) and the absolute path it was built for, where runs see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckEnvironment {
    /// The store's name for it, for people; the digest is what counts.
    pub name: String,
    /// The environment's digest.
    pub digest: Digest,
    /// Where runs see it.
    pub at: String,
}

/// A JUnit XML file the command writes under its scratch space, and the most bytes kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckResults {
    /// The file's path relative to `/sf/scratch`.
    pub junit: String,
    /// The most bytes kept (1 to 8 MiB).
    pub max_bytes: u64,
}

/// A check's command: see [`crate::contracts::command`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckCommand {
    /// The program and its arguments; `argv[0]` a bare name or an absolute path.
    pub argv: Vec<String>,
    /// Where it runs.
    pub cwd: CheckCwd,
    /// Variables on top of the fixed base.
    pub env: BTreeMap<String, String>,
    /// The dependency environment, if any.
    pub environment: Option<CheckEnvironment>,
    /// The results file, if any.
    pub results: Option<CheckResults>,
    /// The bounds the check declares below the executor's own limits (none by default): a
    /// run that hits one did not fit what the check asks, and misses (its check is Failed
    /// with the bound named); a limit of the executor's the check does not declare stays the
    /// sandbox's (Inconclusive).
    pub resources: RunResources,
    /// The most time the check's run may take, in ms (at most the recipe's); a run stopped
    /// at it did not finish in the time the check allows, and misses. `None`: the recipe's
    /// timeout, which is the sandbox's.
    pub timeout_ms: Option<u64>,
    /// Whether the run may execute what it writes to its scratch space (a compiled test
    /// suite's test programs); see [`RunCommand::scratch_executable`].
    pub scratch_executable: bool,
}

impl CheckCommand {
    /// Whether a run given `timeout_ms` ran under the check's own timeout (not one the
    /// recipe or the collection's deadline cut shorter).
    pub fn own_timeout(&self, timeout_ms: u64) -> bool {
        self.timeout_ms == Some(timeout_ms)
    }
}

impl CheckCommand {
    /// The executor's command, with the environment's files at `tree` on this host.
    pub fn to_run(&self, tree: Option<PathBuf>) -> RunCommand {
        RunCommand {
            argv: self.argv.clone(),
            cwd: self.cwd.inside(),
            env: self.env.clone(),
            environment: self.environment.as_ref().map(|environment| RunEnvironment {
                digest: environment.digest.clone(),
                tree: tree.unwrap_or_default(),
                at: environment.at.clone(),
            }),
            results: self.results.as_ref().map(|results| ResultsRequest {
                path: results.junit.clone(),
                max_bytes: results.max_bytes,
            }),
            resources: self.resources,
            scratch_executable: self.scratch_executable,
            network: None,
            output: None,
        }
    }
}

/// A process check as its record holds it (`"kind": "process"`).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
struct EntryCheckRecord {
    id: String,
    phase: Phase,
    stage: Stage,
    #[serde(with = "entry_record")]
    entry: RunEntry,
    entry_in_scope: bool,
    args: Vec<String>,
    input: Digest,
    expectation: Expectation,
}
canonical::literal_fields!(EntryCheckRecord { "kind": "process" });

/// A command check as its record holds it (`"kind": "command"`).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
struct CommandCheckRecord {
    id: String,
    phase: Phase,
    stage: Stage,
    argv: Vec<String>,
    cwd: CheckCwd,
    env: BTreeMap<String, String>,
    #[serde(deserialize_with = "canonical::nullable")]
    environment: Option<CheckEnvironment>,
    #[serde(deserialize_with = "canonical::nullable")]
    results: Option<CheckResults>,
    /// Written only when the check declares a bound.
    #[serde(default, skip_serializing_if = "RunResources::is_empty")]
    resources: RunResources,
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    timeout_ms: Option<u64>,
    /// Written only when true, so that every record without it keeps its bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    scratch_executable: bool,
    input: Digest,
    expectation: Expectation,
}
canonical::literal_fields!(CommandCheckRecord { "kind": "command" });

/// An oats check as its record holds it (`"kind": "oats"`).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
struct OatsCheckRecord {
    id: String,
    phase: Phase,
    stage: Stage,
    capability: String,
    integrity: String,
    operation: String,
    args: BTreeMap<String, String>,
    harness: Digest,
    input: Digest,
    expectation: OatsExpectation,
}
canonical::literal_fields!(OatsCheckRecord { "kind": "oats" });

impl Serialize for ProcessCheck {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (id, phase, stage, input, expectation) = (
            self.id.clone(),
            self.phase,
            self.stage,
            self.input.clone(),
            self.expectation.clone(),
        );
        match &self.run {
            CheckRun::Entry {
                entry,
                entry_in_scope,
                args,
            } => EntryCheckRecord {
                id,
                phase,
                stage,
                entry: entry.clone(),
                entry_in_scope: *entry_in_scope,
                args: args.clone(),
                input,
                expectation,
            }
            .serialize(serializer),
            CheckRun::Command(command) => CommandCheckRecord {
                id,
                phase,
                stage,
                argv: command.argv.clone(),
                cwd: command.cwd.clone(),
                env: command.env.clone(),
                environment: command.environment.clone(),
                results: command.results.clone(),
                resources: command.resources,
                timeout_ms: command.timeout_ms,
                scratch_executable: command.scratch_executable,
                input,
                expectation,
            }
            .serialize(serializer),
            CheckRun::Oats(oats) => OatsCheckRecord {
                id,
                phase,
                stage,
                capability: oats.capability.clone(),
                integrity: oats.integrity.clone(),
                operation: oats.operation.clone(),
                args: oats.args.clone(),
                harness: oats.harness.clone(),
                input,
                expectation: oats.expect.clone(),
            }
            .serialize(serializer),
        }
    }
}

impl From<OatsCheckRecord> for ProcessCheck {
    fn from(record: OatsCheckRecord) -> Self {
        Self {
            id: record.id,
            phase: record.phase,
            stage: record.stage,
            expectation: record.expectation.as_process(),
            run: CheckRun::Oats(Box::new(CheckOats {
                capability: record.capability,
                integrity: record.integrity,
                operation: record.operation,
                args: record.args,
                harness: record.harness,
                expect: record.expectation,
            })),
            input: record.input,
        }
    }
}

impl From<EntryCheckRecord> for ProcessCheck {
    fn from(record: EntryCheckRecord) -> Self {
        Self {
            id: record.id,
            phase: record.phase,
            stage: record.stage,
            run: CheckRun::Entry {
                entry: record.entry,
                entry_in_scope: record.entry_in_scope,
                args: record.args,
            },
            input: record.input,
            expectation: record.expectation,
        }
    }
}

impl From<CommandCheckRecord> for ProcessCheck {
    fn from(record: CommandCheckRecord) -> Self {
        Self {
            id: record.id,
            phase: record.phase,
            stage: record.stage,
            run: CheckRun::Command(Box::new(CheckCommand {
                argv: record.argv,
                cwd: record.cwd,
                env: record.env,
                environment: record.environment,
                results: record.results,
                resources: record.resources,
                timeout_ms: record.timeout_ms,
                scratch_executable: record.scratch_executable,
            })),
            input: record.input,
            expectation: record.expectation,
        }
    }
}

impl ProcessCheck {
    /// The entry, whether it is in the scope, and the arguments, for a check of the entry
    /// kind.
    pub fn entry(&self) -> Option<(&RunEntry, bool, &[String])> {
        match &self.run {
            CheckRun::Entry {
                entry,
                entry_in_scope,
                args,
            } => Some((entry, *entry_in_scope, args)),
            CheckRun::Command(_) | CheckRun::Oats(_) => None,
        }
    }

    /// The command, for a command check.
    pub fn command(&self) -> Option<&CheckCommand> {
        match &self.run {
            CheckRun::Command(command) => Some(command.as_ref()),
            CheckRun::Entry { .. } | CheckRun::Oats(_) => None,
        }
    }

    /// The harness digest this check's run must report: the staged capability's for an oats
    /// check, else the Slice's (`slice`).
    pub fn harness_pin<'a>(&'a self, slice: &'a Digest) -> &'a Digest {
        self.oats().map_or(slice, |oats| &oats.harness)
    }

    /// The capability's operation, for an oats check.
    pub fn oats(&self) -> Option<&CheckOats> {
        match &self.run {
            CheckRun::Oats(oats) => Some(oats.as_ref()),
            CheckRun::Entry { .. } | CheckRun::Command(_) => None,
        }
    }
}

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

/// A check for a person to answer (`"kind": "review"` in records). In an acceptance of
/// version 4 it is counted: it lists its reviewers and how many must approve, and the judge
/// counts the reviews stored for the Candidate ([`super::review`]). In versions 2 and 3 it is
/// reserved: it holds only a prompt, and sf never counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewCheck {
    /// The check's id, distinct within the acceptance; follows [`ID_RULE`].
    pub id: String,
    /// The question for the reviewer: 1 to 4096 bytes.
    pub prompt: String,
    /// Who must approve, for a counted check; `None` for a reserved one.
    pub requirement: Option<ReviewRequirement>,
}

/// A reserved review check as its record holds it (versions 2 and 3).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct ReservedReviewRecord {
    id: String,
    prompt: String,
}
canonical::literal_fields!(ReservedReviewRecord { "kind": "review" });

/// A counted review check as its record holds it (version 4).
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct CountedReviewRecord {
    id: String,
    prompt: String,
    #[serde(deserialize_with = "canonical::positive")]
    approvals: u64,
    reviewers: Vec<Reviewer>,
}
canonical::literal_fields!(CountedReviewRecord { "kind": "review" });

impl Serialize for ReviewCheck {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (id, prompt) = (self.id.clone(), self.prompt.clone());
        match &self.requirement {
            None => ReservedReviewRecord { id, prompt }.serialize(serializer),
            Some(requirement) => CountedReviewRecord {
                id,
                prompt,
                approvals: requirement.approvals,
                reviewers: requirement.reviewers.clone(),
            }
            .serialize(serializer),
        }
    }
}

/// One check of an acceptance; its `kind` says which (see [`Acceptance::from_json`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Check {
    /// A program run once in the sandbox (`"kind": "process"`).
    Process(ProcessCheck),
    /// A question for a person, never run; counted in version 4 (`"kind": "review"`).
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
    /// 1 to 64 checks with distinct ids, the process checks in phase order.
    pub checks: Vec<Check>,
}

/// Written as version 3 when a check is a command, else as version 2.
impl Serialize for Acceptance {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut record = serializer.serialize_struct("Acceptance", 2)?;
        record.serialize_field("checks", &self.checks)?;
        record.serialize_field("protocol", self.protocol())?;
        record.end()
    }
}

/// The acceptance as it is read: its checks as JSON, each then read as the kind it names.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcceptanceRecord {
    checks: Vec<Value>,
    protocol: String,
}

impl Acceptance {
    /// The record's protocol: version 5 when a check is an oats check, else version 4 when a
    /// review check is counted, else version 3 when a check is a command, else version 2 (so
    /// that a record keeps the bytes and digest it had before the later versions existed).
    pub fn protocol(&self) -> &'static str {
        if self.process_checks().any(|check| check.oats().is_some()) {
            ACCEPTANCE_PROTOCOL_V5
        } else if self.counted_reviews().next().is_some() {
            ACCEPTANCE_PROTOCOL_V4
        } else if self.process_checks().any(|check| check.command().is_some()) {
            ACCEPTANCE_PROTOCOL
        } else {
            ACCEPTANCE_PROTOCOL_V2
        }
    }

    /// The process checks, in the order listed (which is phase order).
    pub fn process_checks(&self) -> impl Iterator<Item = &ProcessCheck> {
        self.checks.iter().filter_map(|check| match check {
            Check::Process(check) => Some(check),
            Check::Review(_) => None,
        })
    }

    /// The counted review checks (version 4), with what each asks, in the order listed.
    pub fn counted_reviews(&self) -> impl Iterator<Item = (&str, &ReviewRequirement)> {
        self.checks.iter().filter_map(|check| match check {
            Check::Review(ReviewCheck {
                id,
                requirement: Some(requirement),
                ..
            }) => Some((id.as_str(), requirement)),
            _ => None,
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
                    if let Some(requirement) = &review.requirement {
                        requirement.validate(&field)?;
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
                    match &process.run {
                        CheckRun::Entry {
                            entry,
                            entry_in_scope,
                            args,
                        } => validate_entry(&field, process.stage, entry, *entry_in_scope, args)?,
                        CheckRun::Command(command) => validate_command(&field, command)?,
                        CheckRun::Oats(oats) => validate_oats(&field, oats)?,
                    }
                    let tests = process.expectation.tests();
                    if !tests.is_empty() {
                        if process.command().and_then(|c| c.results.as_ref()).is_none() {
                            return Err(invalid(
                                format!("{field}.expectation"),
                                "failToPass and passToPass need the runner's results: a \
                                 command check with \"results\"",
                            ));
                        }
                        tests
                            .check()
                            .map_err(|rule| invalid(format!("{field}.expectation"), &rule))?;
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
    /// exactly the fields of the `kind` it names) and validates it. A version 2 record holds
    /// no command check; a version 3 record is written only when one does.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let record: AcceptanceRecord = read_record(bytes, "acceptance")?;
        let kinds: &[&str] = match record.protocol.as_str() {
            ACCEPTANCE_PROTOCOL_V5 => &["process", "command", "review", "oats"],
            ACCEPTANCE_PROTOCOL_V4 | ACCEPTANCE_PROTOCOL => &["process", "command", "review"],
            ACCEPTANCE_PROTOCOL_V2 => &["process", "review"],
            _ => {
                return Err(AssuranceError::invalid(
                    "acceptance.protocol",
                    format!(
                        "must be {ACCEPTANCE_PROTOCOL_V5:?}, {ACCEPTANCE_PROTOCOL_V4:?}, \
                         {ACCEPTANCE_PROTOCOL:?} or {ACCEPTANCE_PROTOCOL_V2:?}"
                    ),
                ));
            }
        };
        // Version 5 holds counted review checks as version 4 does.
        let counted = matches!(
            record.protocol.as_str(),
            ACCEPTANCE_PROTOCOL_V4 | ACCEPTANCE_PROTOCOL_V5
        );
        let mut checks = Vec::with_capacity(record.checks.len());
        for (at, check) in record.checks.iter().enumerate() {
            let path = format!("acceptance.checks[{at}]");
            let kind =
                canonical::variant_tag(check, &path, "kind", kinds).map_err(invalid_field)?;
            checks.push(match kind {
                "process" => Check::Process(
                    canonical::from_value::<EntryCheckRecord>(check, &path)
                        .map_err(invalid_field)?
                        .into(),
                ),
                "command" => Check::Process(
                    canonical::from_value::<CommandCheckRecord>(check, &path)
                        .map_err(invalid_field)?
                        .into(),
                ),
                "oats" => Check::Process(
                    canonical::from_value::<OatsCheckRecord>(check, &path)
                        .map_err(invalid_field)?
                        .into(),
                ),
                _ if counted => {
                    let record: CountedReviewRecord =
                        canonical::from_value(check, &path).map_err(invalid_field)?;
                    Check::Review(ReviewCheck {
                        id: record.id,
                        prompt: record.prompt,
                        requirement: Some(ReviewRequirement {
                            approvals: record.approvals,
                            reviewers: record.reviewers,
                        }),
                    })
                }
                _ => {
                    let record: ReservedReviewRecord =
                        canonical::from_value(check, &path).map_err(invalid_field)?;
                    Check::Review(ReviewCheck {
                        id: record.id,
                        prompt: record.prompt,
                        requirement: None,
                    })
                }
            });
        }
        let acceptance = Self { checks };
        if record.protocol != acceptance.protocol() {
            let why = if record.protocol == ACCEPTANCE_PROTOCOL_V5 {
                "no check is an oats check"
            } else if counted {
                "no review check is counted (lists reviewers)"
            } else {
                "no check is a command"
            };
            return Err(AssuranceError::invalid(
                "acceptance.protocol",
                format!(
                    "is {:?}, but {why}: such an acceptance is {:?}",
                    record.protocol,
                    acceptance.protocol()
                ),
            ));
        }
        acceptance.validate()?;
        Ok(acceptance)
    }

    /// The checks whose entry is a file of the harness.
    pub fn harness_entries(&self) -> impl Iterator<Item = &ProcessCheck> {
        self.process_checks().filter(|check| {
            check
                .entry()
                .is_some_and(|(entry, _, _)| entry.place == EntryPlace::Harness)
        })
    }

    /// The dependency environments the command checks name, each once.
    pub fn environments(&self) -> BTreeSet<&Digest> {
        self.process_checks()
            .filter_map(|check| check.command()?.environment.as_ref())
            .map(|environment| &environment.digest)
            .collect()
    }
}

fn validate_entry(
    field: &str,
    stage: Stage,
    entry: &RunEntry,
    entry_in_scope: bool,
    args: &[String],
) -> Result<(), AssuranceError> {
    let invalid = |input: String, rule: &str| AssuranceError::invalid(input, rule);
    tree_path::check_path(&entry.path, None)
        .map_err(|rule| invalid(format!("{field}.entry.path"), rule.describe()))?;
    if entry_in_scope && (stage != Stage::Candidate || entry.place != EntryPlace::Program) {
        return Err(invalid(
            format!("{field}.entryInScope"),
            "only a check of stage candidate with an entry of the tree can have its entry in \
             the scope",
        ));
    }
    if args.len() > MAX_ARGS
        || args.iter().map(String::len).sum::<usize>() > MAX_ARG_BYTES
        || args.iter().any(|arg| arg.contains('\0'))
    {
        return Err(invalid(
            format!("{field}.args"),
            "at most 256 arguments of at most 64 KiB together, none holding NUL",
        ));
    }
    Ok(())
}

fn validate_command(field: &str, command: &CheckCommand) -> Result<(), AssuranceError> {
    let invalid = |input: String, rule: &str| AssuranceError::invalid(input, rule);
    let cwd = &command.cwd;
    match (cwd.from, cwd.path.as_str()) {
        (_, "") => {}
        (CwdFrom::Scratch, _) => {
            return Err(invalid(
                format!("{field}.cwd.path"),
                "a working directory in scratch is scratch itself: the path is \"\"",
            ));
        }
        (_, path) => tree_path::check_path(path, None)
            .map_err(|rule| invalid(format!("{field}.cwd.path"), rule.describe()))?,
    }
    if let Some(environment) = &command.environment
        && let Err(error) = crate::environment_store::check_name(&environment.name)
    {
        return Err(invalid(
            format!("{field}.environment.name"),
            &error.to_string(),
        ));
    }
    if command.timeout_ms.is_some_and(|ms| {
        ms == 0 || ms > crate::contracts::executor::MAX_TIMEOUT.as_millis() as u64
    }) {
        return Err(invalid(
            format!("{field}.timeoutMs"),
            "a check's timeout is 1 to 3,600,000 ms",
        ));
    }
    if let Some(results) = &command.results {
        tree_path::check_path(&results.junit, Some(tree_path::EntryMode::Regular))
            .map_err(|rule| invalid(format!("{field}.results.junit"), rule.describe()))?;
        if results.max_bytes == 0 || results.max_bytes > crate::contracts::MAX_RESULTS_BYTES {
            return Err(invalid(
                format!("{field}.results.maxBytes"),
                "a results file is kept up to 1 byte to 8 MiB",
            ));
        }
    }
    // The executor's own rules, with a placeholder for where this host keeps the files.
    command
        .to_run(Some(PathBuf::from("/")))
        .check()
        .map_err(|error| invalid(format!("{field} command"), &error.to_string()))
}

/// The rules of an oats check the types do not carry: names within their grammar and
/// bounds, an integrity of the oats tree digest, and an expected code only for a failure.
fn validate_oats(field: &str, oats: &CheckOats) -> Result<(), AssuranceError> {
    let invalid = |input: String, rule: &str| AssuranceError::invalid(input, rule);
    let name = |text: &str| {
        !text.is_empty()
            && text.len() <= MAX_OATS_NAME
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    if !name(&oats.capability) {
        return Err(invalid(
            format!("{field}.capability"),
            "is a capability id: 1 to 128 letters, digits, '.', '_' or '-'",
        ));
    }
    if !name(&oats.operation) {
        return Err(invalid(
            format!("{field}.operation"),
            "is an operation name: 1 to 128 letters, digits, '.', '_' or '-'",
        ));
    }
    let hex = oats.integrity.strip_prefix("oats.tree-exec.v1:sha256-");
    if !hex.is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }) {
        return Err(invalid(
            format!("{field}.integrity"),
            "is the capability's oats.tree-exec.v1:sha256-<64 hex> integrity, as the freeze \
             writes it",
        ));
    }
    let values: usize = oats.args.iter().map(|(k, v)| k.len() + v.len()).sum();
    if oats.args.len() > MAX_ARGS
        || values > MAX_ARG_BYTES
        || oats.args.keys().any(|key| !name(key))
        || oats.args.values().any(|value| value.contains('\0'))
    {
        return Err(invalid(
            format!("{field}.args"),
            "at most 256 declared arguments of at most 64 KiB together, named as operations \
             are, no value holding NUL",
        ));
    }
    match (&oats.expect.code, oats.expect.ok) {
        (Some(_), true) => Err(invalid(
            format!("{field}.expectation.code"),
            "only an expected failure (\"ok\": false) names a code",
        )),
        (Some(code), false)
            if code.len() > MAX_OATS_NAME
                || !code.starts_with("E_")
                || code.len() < 3
                || !code[2..]
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') =>
        {
            Err(invalid(
                format!("{field}.expectation.code"),
                "is an oats error code: E_ then capital letters, digits and '_'",
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTEGRITY: &str =
        "oats.tree-exec.v1:sha256-6de86d1a787c851d72d9358cc5c3c4d7433b70cdeaa1bff8460de586da61ecce";

    fn record(protocol: &str, check: &str) -> Vec<u8> {
        format!(r#"{{"protocol":"{protocol}","checks":[{check}]}}"#).into_bytes()
    }

    fn oats_check(integrity: &str, expectation: &str) -> String {
        let digest = Digest::of(b"staged");
        let input = crate::snapshot::snapshot_digest(&[]).unwrap();
        format!(
            r#"{{"kind":"oats","id":"sizes","phase":"guardrail","stage":"candidate",
                "capability":"acme.size-policy","integrity":"{integrity}","operation":"limits",
                "args":{{"max-files":"3"}},"harness":"{digest}","input":"{input}",
                "expectation":{expectation}}}"#
        )
    }

    #[test]
    fn an_oats_check_is_read_in_version_5_and_keeps_its_bytes() {
        let bytes = record(
            ACCEPTANCE_PROTOCOL_V5,
            &oats_check(INTEGRITY, r#"{"ok":false,"code":"E_TOO_MANY_FILES"}"#),
        );
        let acceptance = Acceptance::from_json(&bytes).unwrap();
        let check = acceptance.process_checks().next().unwrap();
        let oats = check.oats().expect("an oats check");
        assert_eq!(oats.capability, "acme.size-policy");
        assert_eq!(oats.expect.code.as_deref(), Some("E_TOO_MANY_FILES"));
        assert_eq!(check.harness_pin(&Digest::of(b"slice")), &oats.harness);
        assert_eq!(acceptance.protocol(), ACCEPTANCE_PROTOCOL_V5);
        let again = Acceptance::from_json(&acceptance.to_bytes().unwrap()).unwrap();
        assert_eq!(again, acceptance);
    }

    #[test]
    fn an_oats_check_breaking_its_rules_is_refused() {
        let refused = |protocol: &str, check: String, field: &str| {
            let error = Acceptance::from_json(&record(protocol, &check)).unwrap_err();
            assert!(error.to_string().contains(field), "{field}: {error}");
        };
        let ok = r#"{"ok":true}"#;
        refused(ACCEPTANCE_PROTOCOL_V4, oats_check(INTEGRITY, ok), "kind");
        refused(
            ACCEPTANCE_PROTOCOL_V5,
            oats_check("sha256-00", ok),
            "integrity",
        );
        refused(
            ACCEPTANCE_PROTOCOL_V5,
            oats_check(INTEGRITY, r#"{"ok":true,"code":"E_X"}"#),
            "expectation.code",
        );
        refused(
            ACCEPTANCE_PROTOCOL_V5,
            oats_check(INTEGRITY, r#"{"ok":false,"code":"lower"}"#),
            "expectation.code",
        );
        refused(
            ACCEPTANCE_PROTOCOL_V5,
            oats_check(INTEGRITY, r#"{"ok":true,"exitCode":0}"#),
            "exitCode",
        );
        let process = r#"{"kind":"process","id":"p","phase":"guardrail","stage":"candidate",
            "entry":{"from":"tree","path":"a.sh"},"entryInScope":false,"args":[],
            "input":"sha256:5f666fe3a706ab41371251b330fcbe9cd0ba1abfa53d8c5cc78a4943342316ef",
            "expectation":{"exitCode":0,"stdoutDigest":null}}"#;
        refused(
            ACCEPTANCE_PROTOCOL_V5,
            process.to_owned(),
            "no check is an oats check",
        );
    }
}
