//! One check's run, step by step: ask the gate, check the hold, describe the environment
//! the run would have and refuse one the Slice was not frozen for, lay out what runs (an
//! entry or a command, its program, input and harness), bound it by the time left, launch it
//! once, and record what the Executor answered as an observation. Every step that refuses
//! leaves the check not started, with the reason as the observation's one problem; nothing
//! after the launch is ever a reason not to record the run.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use crate::assurance::acceptance::{CheckOats, CheckRun, CwdFrom, OATS_LAUNCHER, OATS_REQUEST};
use crate::assurance::{
    EnvironmentRecord, FrozenSlice, Observation, ObservationFacts, ObservationStatus, ProcessCheck,
    ProcessFacts, Recipe, time,
};
use crate::canonical::Digest;
use crate::contracts::{
    CancelToken, EntryPlace, Executor, ExecutorError, Gate, LimitHit, NamespaceDisposition,
    ProgramTree, RunAnswer, RunBounds, RunCommand, RunEntry, RunRequest, RuntimeDescription,
    check_limits_hit,
};
use crate::fence::Hold;
use crate::snapshot::{MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SnapshotFile, holds_directory};

use super::{
    Clock, CollectError, CollectRequest, Prepared, Ran, RepositoryCollector, RunState, Shared,
    StageProgram, StagedCapabilities, SystemClock, answer_problems, environment_problem,
    panic_text, placement_problem,
};

/// Why a check was not started, as its observation's one problem.
type Refusal = String;

/// What a run executes besides its program: the entry and its arguments, or the command.
type WhatRuns = (RunEntry, Vec<String>, Option<RunCommand>);

/// What runs a check, in a collection or a trial: the executor, the paths no run may read,
/// and the clock its start, end and time left come from.
pub(super) struct Runner {
    pub(super) executor: Arc<dyn Executor>,
    pub(super) protected: Vec<PathBuf>,
    pub(super) clock: Arc<dyn Clock>,
}

/// One launch, as it ended: its answer (or the executor's panic) and when it started and
/// ended.
pub(super) struct Launched {
    pub(super) answer: std::thread::Result<Result<RunAnswer, ExecutorError>>,
    pub(super) started: SystemTime,
    pub(super) ended: SystemTime,
}

/// What a run executes, laid out; its bounds are set last, from the time left.
pub(super) struct LaidOut {
    what: WhatRuns,
    program: Vec<SnapshotFile>,
    program_tree: Option<ProgramTree>,
    input: Vec<SnapshotFile>,
    harness: Vec<SnapshotFile>,
}

impl RepositoryCollector {
    /// Runs `check` once (module documentation) and answers the observation to record; only
    /// a hold that ended stops it with an error.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_one(
        &self,
        request: &CollectRequest,
        prepared: &Prepared,
        check: &ProcessCheck,
        gate: &Arc<dyn Gate>,
        shared: &Shared,
        hold: &Hold,
        cancel: &CancelToken,
    ) -> Result<Ran, crate::fence::FenceError> {
        let mut facts = unstarted_facts(prepared, check);
        if let Some(reason) = self.gate_refusal(gate, prepared, shared, cancel) {
            return Ok(not_started(facts, reason));
        }
        hold.assert_active()?;
        let runner = &self.runner;
        let (runtime, environment) = match runner.describe_environment() {
            Ok(described) => described,
            Err(reason) => return Ok(not_started(facts, reason)),
        };
        facts.environment = environment.digest().ok();
        let program = prepared.programs.of(check.stage);
        let laid_out = runner
            .environment_refusal(&runtime, &environment, &request.slice)
            .map_or(Ok(()), Err)
            .and_then(|()| {
                let supplied = (&request.environments, &request.capabilities);
                lay_out(&request.slice, supplied, program, check)
            });
        let bounded = laid_out
            .and_then(|run| runner.bound(run, &request.slice.recipe, prepared.deadline, check));
        let (run, timeout_ms) = match bounded {
            Ok(bounded) => bounded,
            Err(reason) => return Ok(not_started(facts, reason)),
        };
        let answer = match answered(runner.launch(&run, cancel), &mut facts) {
            Ok(answer) => answer,
            Err(ran) => return Ok(*ran),
        };
        Ok(observed(
            facts,
            answer,
            prepared,
            check,
            (&environment, &request.slice.recipe),
            (&run.bounds, timeout_ms),
        ))
    }

    /// The gate's refusal, or why the run may not start now (the collection was cancelled);
    /// `None` to go on. One job reads the gate at a time, so that once it refuses no later
    /// run is launched and the gate is not asked again.
    fn gate_refusal(
        &self,
        gate: &Arc<dyn Gate>,
        prepared: &Prepared,
        shared: &Shared,
        cancel: &CancelToken,
    ) -> Option<Refusal> {
        let mut gate_closed = shared
            .gate_closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(reason) = &*gate_closed {
            return Some(reason.clone());
        }
        if cancel.is_cancelled() {
            return Some("aborted before the run".into());
        }
        if let Err(reason) = self.read_gate(gate, prepared.deadline, cancel) {
            *gate_closed = Some(reason.clone());
            return Some(reason);
        }
        None
    }
}

impl Runner {
    /// A runner on `executor` whose runs must never read `protected` (1 to 256 absolute
    /// paths, kept as given). Refused when the runtime cannot be described or a protected
    /// path is readable under it.
    pub(super) fn new(
        executor: Arc<dyn Executor>,
        protected: Vec<PathBuf>,
    ) -> Result<Self, CollectError> {
        let runtime = executor.describe_runtime().map_err(|error| {
            CollectError::invalid(
                "executor",
                format!("its runtime must be describable to place the protected paths: {error}"),
            )
        })?;
        if let Some(problem) = placement_problem(&protected, &runtime) {
            return Err(CollectError::invalid("protected paths", problem));
        }
        Ok(Self {
            executor,
            protected,
            clock: Arc::new(SystemClock),
        })
    }

    /// The Executor's runtime and the environment record a run would have.
    pub(super) fn describe_environment(
        &self,
    ) -> Result<(RuntimeDescription, EnvironmentRecord), Refusal> {
        let runtime = self
            .executor
            .describe_runtime()
            .map_err(|error| format!("the runtime cannot be described: {error}"))?;
        let profile = self
            .executor
            .profile()
            .map_err(|error| format!("the profile cannot be described: {error}"))?;
        let environment = EnvironmentRecord {
            runtime: runtime.digest.clone(),
            profile: profile.digest,
            platform: crate::assurance::platform(),
            sf: crate::SF_VERSION.to_owned(),
        };
        Ok((runtime, environment))
    }

    /// Why the run may not happen in this environment: it is not the one the Slice was frozen
    /// for, or a protected path is readable under its runtime.
    pub(super) fn environment_refusal(
        &self,
        runtime: &RuntimeDescription,
        environment: &EnvironmentRecord,
        slice: &FrozenSlice,
    ) -> Option<Refusal> {
        if let Some(problem) = environment_problem(runtime, environment, slice) {
            return Some(problem);
        }
        placement_problem(&self.protected, runtime)
            .map(|problem| format!("a protected path is readable under the runtime: {problem}"))
    }

    /// The run bounded by the recipe, the check's own timeout and the time left before the
    /// deadline (milliseconds since the epoch), with the timeout it was given.
    pub(super) fn bound(
        &self,
        laid: LaidOut,
        recipe: &Recipe,
        deadline: u64,
        check: &ProcessCheck,
    ) -> Result<(RunRequest, u64), Refusal> {
        let now = time::to_millis(self.clock.now()).unwrap_or(u64::MAX);
        let left = deadline.saturating_sub(now);
        if left < 1 {
            return Err("the deadline passed before the run".into());
        }
        let own = check.command().and_then(|command| command.timeout_ms);
        let timeout_ms = recipe.timeout_ms.min(own.unwrap_or(u64::MAX)).min(left);
        let (entry, args, command) = laid.what;
        let run = RunRequest {
            // The check's id, for the Executor's logs (a remote worker names it).
            label: Some(format!("check {}", check.id)),
            program_tree: laid.program_tree,
            command,
            program: laid.program,
            entry,
            args,
            input: laid.input,
            harness: laid.harness,
            bounds: recipe.bounds(timeout_ms),
        };
        Ok((run, timeout_ms))
    }

    /// Runs `run` once: the Executor's answer (or its panic), and when it started and ended.
    pub(super) fn launch(&self, run: &RunRequest, cancel: &CancelToken) -> Launched {
        let started = self.clock.now();
        let answer = catch_unwind(AssertUnwindSafe(|| self.executor.run(run, cancel)));
        let ended = self.clock.now();
        Launched {
            answer,
            started,
            ended,
        }
    }
}

/// `launched`'s answer, its start and end noted in `facts`; or (in `Err`) what to record
/// when the executor panicked (unresolved) or refused (not started).
fn answered(launched: Launched, facts: &mut ObservationFacts) -> Result<RunAnswer, Box<Ran>> {
    facts.started_at = time::to_millis(launched.started);
    facts.ended_at = time::to_millis(launched.ended);
    match launched.answer {
        Err(panic) => {
            let mut facts = facts.clone();
            facts.status = ObservationStatus::Unresolved;
            facts.problems = vec![format!(
                "the executor panicked; the run's outcome is unknown: {}",
                panic_text(panic.as_ref())
            )];
            Err(Box::new(Ran {
                observation: empty_observation(facts),
                state: RunState::Unresolved,
            }))
        }
        Ok(Err(error)) => Err(Box::new(not_started(
            facts.clone(),
            format!("the executor refused ({}): {error}", error.code()),
        ))),
        Ok(Ok(answer)) => Ok(answer),
    }
}

/// The facts of `check`'s run before anything is known of it: not started.
fn unstarted_facts(prepared: &Prepared, check: &ProcessCheck) -> ObservationFacts {
    ObservationFacts {
        remote: None,
        collector: prepared.closure.clone(),
        candidate: prepared.programs.pins.candidate.digest.clone(),
        check: check.id.clone(),
        phase: check.phase,
        stage: check.stage,
        status: ObservationStatus::NotStarted,
        attributable: false,
        problems: Vec::new(),
        environment: None,
        identities: None,
        process: None,
        started_at: None,
        ended_at: None,
        deadline: prepared.deadline,
    }
}

/// The observation of a run that did not start, `problem` its one problem.
fn not_started(mut facts: ObservationFacts, problem: Refusal) -> Ran {
    facts.problems = vec![problem];
    Ran {
        observation: empty_observation(facts),
        state: RunState::NotStarted,
    }
}

/// An observation of `facts` with no output.
fn empty_observation(facts: ObservationFacts) -> Observation {
    Observation {
        facts,
        stdout: Vec::new(),
        stderr: Vec::new(),
        results: None,
    }
}

/// What `check` of `slice` runs on `program`, laid out (its bounds not yet set): the entry
/// or the command (with its dependency environment from `environments`), the program, its
/// input and the harness, each checked to be there and within what the Executor takes.
pub(super) fn lay_out(
    slice: &FrozenSlice,
    (environments, capabilities): (&BTreeMap<Digest, PathBuf>, &StagedCapabilities),
    program: &StageProgram,
    check: &ProcessCheck,
) -> Result<LaidOut, Refusal> {
    let mut harness = &slice.harness;
    let input = &slice.inputs[&check.input];
    let what = match &check.run {
        CheckRun::Entry { entry, args, .. } => entry_run(check, program, harness, entry, args)?,
        CheckRun::Command(command) => {
            command_run(environments, check, program, harness, input, command)?
        }
        CheckRun::Oats(oats) => {
            harness = staged_harness(capabilities, check, oats)?;
            let entry = RunEntry::harness(OATS_LAUNCHER);
            let request = format!("{}/{OATS_REQUEST}", crate::contracts::HARNESS_DIR);
            entry_run(check, program, harness, &entry, &[request])?
        }
    };
    let (program_files, program_tree) = match program {
        StageProgram::Files(tree) => (tree.files.clone(), None),
        StageProgram::Tree {
            runnable: false, ..
        } => {
            return Err(
                "the base's tree is not materialised on this host, so no program given by \
                 reference can run"
                    .into(),
            );
        }
        StageProgram::Tree { tree, .. } => (Vec::new(), Some(tree.clone())),
    };
    check_sizes(&[
        ("program", &program_files),
        ("input", input),
        ("harness", harness),
    ])?;
    Ok(LaidOut {
        what,
        program: program_files,
        program_tree,
        input: input.clone(),
        harness: harness.clone(),
    })
}

/// The staged harness of oats check `check`, when it gives the digest the check pins: else
/// why not (it could not be staged, or its bytes are not the frozen ones).
fn staged_harness<'a>(
    capabilities: &'a StagedCapabilities,
    check: &ProcessCheck,
    oats: &CheckOats,
) -> Result<&'a Vec<SnapshotFile>, Refusal> {
    let drifted = |why: String| {
        format!(
            "the capability {} cannot run as frozen (at {}): {why}; nothing of it ran, so the \
             check is undecided",
            oats.capability, oats.integrity
        )
    };
    let files = match capabilities.get(&check.id) {
        None => return Err(drifted("it was not staged for this run".into())),
        Some(Err(why)) => return Err(drifted(why.clone())),
        Some(Ok(files)) => files,
    };
    match crate::snapshot::snapshot_digest(files) {
        Ok(digest) if digest == oats.harness => Ok(files),
        Ok(digest) => Err(drifted(format!(
            "its staged run is {digest}, not the pinned {}",
            oats.harness
        ))),
        Err(error) => Err(drifted(format!(
            "its staged run is not a snapshot: {error}"
        ))),
    }
}

/// What an entry check runs: its entry, which must be a file of the stage's tree or of the
/// harness, and its arguments.
fn entry_run(
    check: &ProcessCheck,
    program: &StageProgram,
    harness: &[SnapshotFile],
    entry: &RunEntry,
    args: &[String],
) -> Result<WhatRuns, Refusal> {
    let (held, place_name) = match entry.place {
        EntryPlace::Program => (
            program.holds_file(&entry.path),
            format!("the {} tree", check.stage.as_str()),
        ),
        EntryPlace::Harness => (
            harness.iter().any(|file| file.path == entry.path),
            "the harness".to_owned(),
        ),
    };
    if !held {
        return Err(format!(
            "the entry {} is not a file of {place_name}",
            entry.path
        ));
    }
    Ok((entry.clone(), args.to_vec(), None))
}

/// What a command check runs: the command, with its dependency environment's files on this
/// host and a working directory that is a directory of its place.
fn command_run(
    environments: &BTreeMap<Digest, PathBuf>,
    check: &ProcessCheck,
    program: &StageProgram,
    harness: &[SnapshotFile],
    input: &[SnapshotFile],
    command: &crate::assurance::CheckCommand,
) -> Result<WhatRuns, Refusal> {
    let tree = match &command.environment {
        None => None,
        Some(environment) => Some(environments.get(&environment.digest).cloned().ok_or_else(
            || {
                format!(
                    "the dependency environment {} ({}) is not available on this host",
                    environment.name, environment.digest
                )
            },
        )?),
    };
    let cwd = &command.cwd.path;
    let place = match command.cwd.from {
        CwdFrom::Tree => Some((
            program.holds_directory(cwd),
            format!("the {} tree", check.stage.as_str()),
        )),
        CwdFrom::Harness => Some((holds_directory(harness, cwd), "the harness".to_owned())),
        CwdFrom::Input => Some((holds_directory(input, cwd), "the input".to_owned())),
        CwdFrom::Scratch => None,
    };
    if let Some((false, place_name)) = place
        && !cwd.is_empty()
    {
        return Err(format!(
            "the working directory {cwd} is not a directory of {place_name}"
        ));
    }
    // A command runs no entry: the request's is a placeholder it never reads.
    Ok((
        RunEntry::program(String::new()),
        Vec::new(),
        Some(command.to_run(tree)),
    ))
}

/// Refuses a snapshot larger than the Executor takes.
fn check_sizes(snapshots: &[(&str, &Vec<SnapshotFile>)]) -> Result<(), Refusal> {
    for (what, files) in snapshots {
        let bytes: u64 = files.iter().map(|file| file.content.len() as u64).sum();
        if bytes > MAX_SNAPSHOT_BYTES || files.len() > MAX_SNAPSHOT_FILES {
            return Err(format!(
                "the {what} is oversized for the executor ({bytes} bytes)"
            ));
        }
    }
    Ok(())
}

/// The observation of a run the Executor answered: its problems (what the answer does not
/// show as the recipe requires), its limits hit, identities and process facts, and its
/// output.
fn observed(
    mut facts: ObservationFacts,
    answer: RunAnswer,
    prepared: &Prepared,
    check: &ProcessCheck,
    (environment, recipe): (&EnvironmentRecord, &Recipe),
    (bounds, timeout_ms): (&RunBounds, u64),
) -> Ran {
    facts.status = ObservationStatus::Observed;
    facts.problems = answer_problems(
        &answer,
        &prepared.programs.pins,
        check,
        (environment, &recipe.enforcement),
        bounds,
        facts.ended_at,
        prepared.deadline,
    );
    let limits_hit = match check_limits_hit(&answer.limits_hit) {
        Ok(()) => answer.limits_hit.clone(),
        // A list the record cannot hold is kept as the problems above (one per hit), so
        // that no hit is dropped.
        Err(rule) => {
            facts.problems.push(format!(
                "the executor stated its limits hit malformed: {rule}"
            ));
            Vec::new()
        }
    };
    facts.remote = match answer
        .remote
        .clone()
        .map(|remote| remote.check().map(|()| remote))
    {
        None => None,
        Some(Ok(remote)) => Some(remote),
        Some(Err(rule)) => {
            facts.problems.push(format!(
                "the executor named where its run was executed malformed: {rule}"
            ));
            None
        }
    };
    facts.attributable = facts.problems.is_empty();
    facts.identities = Some(answer.identities.clone());
    facts.process = Some(process_facts(
        &answer,
        timeout_ms,
        recipe.output_limit,
        limits_hit,
    ));
    Ran {
        observation: Observation {
            facts,
            stdout: answer.stdout,
            stderr: answer.stderr,
            results: answer.results,
        },
        state: RunState::Observed,
    }
}

/// The process facts of `answer`, a run given `timeout_ms` and `output_limit` that hit
/// `limits_hit`.
pub(super) fn process_facts(
    answer: &RunAnswer,
    timeout_ms: u64,
    output_limit: u64,
    limits_hit: Vec<LimitHit>,
) -> ProcessFacts {
    ProcessFacts {
        status: answer.status,
        exit_code: answer.exit_code,
        signal: answer.signal,
        timeout_ms,
        output_limit,
        wall_ms: answer.times.wall.as_millis() as u64,
        user_ms: answer.times.user.as_millis() as u64,
        system_ms: answer.times.system.as_millis() as u64,
        max_rss_kib: answer.times.max_rss_kib,
        memory_peak_bytes: answer.times.memory_peak_bytes,
        limits_hit: Some(limits_hit),
        reaped: answer.namespace == NamespaceDisposition::Reaped,
    }
}
