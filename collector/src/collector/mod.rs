//! The repository collector: runs each frozen process check of one sealed
//! Candidate once, in the confined executor, under the pins it was sealed for, and stores
//! exactly one observation Evidence record ([`OBSERVATION_FORMAT`]) per run. It observes and never
//! judges; it never runs Candidate or base code in its own process, never reads or writes Git,
//! and works only over `dyn Executor`, `dyn EvidenceStore` and `dyn Gate`.
//!
//! **Before anything starts** ([`CollectError::InvalidInput`], nothing started or stored): the
//! frozen Slice is whole ([`FrozenSlice::validate`]: its records, harness, overlay and inputs
//! give the digests its record names); the sealed Candidate's manifest bytes hash to its
//! digest and parse to the manifest it carries, which names exactly this Slice (its digest,
//! id, revision, scope, protected paths, base and records: so nothing runs under records the
//! Candidate was not sealed for) and touches no protected path; the Candidate's files build
//! its recorded tree; the base gives its recorded tree; the overlay lays over both
//! ([`programs::derive`], which also gives the pins); the hold is on the pinned Product's
//! fence, for the pinned Candidate, and active; the recipe pins this code's [`collector_closure`]; the deadline is a
//! timestamp records can hold. All bytes are copied then, so later changes to the caller's
//! values change nothing that runs.
//!
//! **Before each run, in this order**: the cancel token is not cancelled; the gate says
//! proceed (a refusal, an error, a malformed or late answer, or a read still unanswered at
//! the deadline or on cancellation makes this check and every later one not-started, and the
//! gate is not asked again); the hold is active (else the collection stops with
//! [`CollectError::Released`]); the executor's runtime executable is the recipe's and its
//! environment equals the pinned one; no protected path is readable under the runtime
//! ([`placement_problem`]); the entry is a file of the stage's program (or of the harness);
//! program, input and harness fit the snapshot bounds; at least 1 ms remains before the
//! deadline. Each failure is a not-started run with its reason.
//!
//! **One run**: the effective timeout is min(recipe timeout, time left); start and end times
//! come from the collector's clock around `Executor::run`. An executor `Err` is not-started
//! (the contract says it started nothing); a panic is unresolved. A run whose identities
//! differ from the pinned program, input, harness, runtime, profile or bounds, that was stopped
//! (timeout, output limit, abort), whose processes were not confirmed reaped, whose
//! enforcement facts do not state what the recipe pins, that enforced other bounds than
//! requested, for which the executor reported problems, that hit one of the executor's own
//! limits (processes, memory, file size, CPU time, open files, scratch: the sandbox's, which
//! no check declares), or that ended after the deadline, is recorded with those problems
//! and is not attributable: the judge can only find it Inconclusive. The limits hit are
//! recorded as the executor stated them (`process.limitsHit`), so that the judge decides
//! from the record, not from the collector's word.
//!
//! **One record per run**: every check, started or not, becomes one observation and one
//! `EvidenceStore::put`, after the hold is asserted again. A put that fails makes that run
//! storage-failed and stops the collection: later checks are not-started with no record, and
//! the caller must issue no Verdict for this attempt ([`CollectResult::may_judge`]).
//!
//! **Jobs** ([`RepositoryCollector::with_jobs`]): up to N checks run at a time, each taken in
//! acceptance order by the next free job, and every rule above holds for each launch: one job
//! reads the gate at a time (so once it closes no job launches again), the hold is asserted
//! before each run and each put (once it ends no job starts or stores anything), and once a
//! put fails no job starts or stores anything further (a run still in flight then ends
//! storage-failed without a record). Results and record ids are listed in acceptance order.

mod base;
mod closure;
mod placement;
pub mod programs;
mod recipe;
mod run;
mod trial;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant, SystemTime};

use crate::assurance::judge::check_records;
use crate::assurance::{
    EnvironmentRecord, FrozenSlice, OBSERVATION_FORMAT, Observation, ProcessCheck, ProcessFacts,
    RepositoryPins, time,
};
use crate::canonical::{self, Digest};
use crate::contracts::{
    AttemptId, CancelToken, Enforcement, EvidenceRecord, EvidenceStore, Executor, Gate, GateExt,
    LimitHit, NamespaceDisposition, RunAnswer, RunIdentities, RunStatus, RuntimeDescription,
    Withheld,
};
use crate::fence::Hold;
use crate::repository::{CandidateManifest, SealedCandidate};

pub use base::{MaterialisedTree, materialise_base, materialise_candidate};
pub use closure::{COLLECTOR_NAME, collector_closure, collector_sources};
pub use placement::{MAX_PROTECTED_PATHS, placement_problem};
pub use programs::{
    CollectTrees, Programs, StageProgram, StoredTrees, derive, lay_over, slice_paths, tree_paths,
};
pub use recipe::current_recipe;
use run::Runner;
pub use trial::{Trial, TrialOutcome, TrialRequest, TrialRun, TrialTree};

/// How long one `put` may take.
pub const STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// The collector's clock: where a run's start and end times, and the time left before the
/// deadline, come from.
pub trait Clock: Send + Sync {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// What one collection runs.
#[derive(Clone, Debug)]
pub struct CollectRequest {
    /// The frozen Slice: its record, acceptance, recipe, environment, harness, overlay and
    /// inputs.
    pub slice: FrozenSlice,
    /// The sealed Candidate, as exported.
    pub sealed: SealedCandidate,
    /// The trees it runs: the base's and M's files by value (`sf-candidate/1` to `/3`), or
    /// the base as the tree store holds it with the Candidate's edits (`sf-candidate/4`).
    pub trees: CollectTrees,
    /// When the collection must be over.
    pub deadline: SystemTime,
    /// Where this host keeps the files of each dependency environment the command checks
    /// name, by digest, each verified against its digest by the caller (the environment
    /// store) before the collection; a check whose environment is missing here is not
    /// started.
    pub environments: BTreeMap<Digest, PathBuf>,
    /// The staged harness of each oats check, by check id (see [`StagedCapabilities`]); a
    /// check missing here is not started.
    pub capabilities: StagedCapabilities,
}

/// The staged harness of each oats check, by check id, as the host's oats capabilities
/// answered it: the files, or why they could not be staged (unknown, untrusted, drifted,
/// upgraded since the freeze). A run starts only when the files give the digest the check
/// pins.
pub type StagedCapabilities = BTreeMap<String, Result<Vec<crate::snapshot::SnapshotFile>, String>>;

/// How far one check's run got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunState {
    /// The executor answered; the record says whether it is attributable.
    Observed,
    /// The executor panicked: something may have started.
    Unresolved,
    /// Nothing was started.
    NotStarted,
    /// The run's record could not be stored; the collection stopped here.
    StorageFailed,
}

impl RunState {
    /// The state's stable kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Observed => "observed",
            Self::Unresolved => "unresolved",
            Self::NotStarted => "not-started",
            Self::StorageFailed => "storage-failed",
        }
    }
}

/// One process check's run, in acceptance order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectedRun {
    /// The id of the process check.
    pub check: String,
    /// The stored record's id; `None` when nothing was stored for the check.
    pub evidence: Option<Digest>,
    /// How far the run got.
    pub state: RunState,
    /// The identities the executor reported, for a run it answered.
    pub identities: Option<RunIdentities>,
    /// Why the run did not start or is not attributable, and why its record was not stored;
    /// empty for an attributable run.
    pub problems: Vec<String>,
    /// The executor's limits the run hit, as recorded (empty for a run that hit none or did
    /// not start).
    pub limits_hit: Vec<LimitHit>,
    /// How the run ended and what it used, as recorded, for a run the executor answered:
    /// what a person reads first (`timed-out`, `exited 1`), before the record's problems.
    pub process: Option<ProcessFacts>,
    /// For a run whose own put failed, the store's error code (`unavailable`, `corrupt`,
    /// …): the class of the failure that stopped the collection.
    pub storage_error: Option<&'static str>,
}

/// The outcome of a collection that ran to its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectResult {
    /// The attempt the hold is for; every record names it.
    pub attempt: AttemptId,
    /// The pins digest every record is filed under.
    pub pins: Digest,
    /// The pins themselves.
    pub pinned: RepositoryPins,
    /// One per process check, in acceptance order.
    pub runs: Vec<CollectedRun>,
    /// The ids of the records stored, in run order.
    pub evidence: Vec<Digest>,
    /// The environment before the first run (`None` when it could not be described).
    pub environment_before: Option<EnvironmentRecord>,
    /// The environment after the last run (`None` when it could not be described); a
    /// Verdict needs it equal to `environment_before`.
    pub environment_after: Option<EnvironmentRecord>,
}

impl CollectResult {
    /// Whether a record could not be stored (the collection stopped there).
    pub fn storage_failed(&self) -> bool {
        self.runs
            .iter()
            .any(|run| run.state == RunState::StorageFailed)
    }

    /// The code of the store error that stopped the collection (`unavailable`, `corrupt`,
    /// …), when a run's own put failed.
    pub fn storage_error(&self) -> Option<&'static str> {
        self.runs.iter().find_map(|run| run.storage_error)
    }

    /// Whether a Verdict may be issued for this attempt: every record was stored and the
    /// environment was described, and unchanged, at both ends.
    pub fn may_judge(&self) -> bool {
        !self.storage_failed()
            && self.environment_before.is_some()
            && self.environment_before == self.environment_after
    }
}

/// Why a collection started nothing, or stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CollectError {
    /// A request, an option or the pins break a rule; nothing was started or stored.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// The request part, option or pin at fault (`sealed.digest`, `hold`, ...).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// The hold ended (or could not be confirmed) before a run or a put: nothing further was
    /// started or stored. Records stored earlier (`stored`) stand and are inert.
    #[error(
        "the hold of attempt {attempt} ended: {reason}; {}",
        stored_before(stored)
    )]
    Released {
        /// The attempt whose hold ended.
        attempt: AttemptId,
        /// What the fence reported.
        reason: String,
        /// The ids of the records stored before the hold ended, in run order.
        stored: Vec<Digest>,
    },
}

/// What a `released` error says of the records stored before the hold ended.
fn stored_before(stored: &[Digest]) -> String {
    if stored.is_empty() {
        return "no record of the attempt was stored".to_owned();
    }
    let ids: Vec<String> = stored.iter().map(ToString::to_string).collect();
    format!(
        "the {} record(s) stored before it stand, inert (no Verdict may use the attempt): {}",
        stored.len(),
        ids.join(", ")
    )
}

impl CollectError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
            Self::Released { .. } => "released",
        }
    }

    fn invalid(input: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::InvalidInput {
            input: input.into(),
            rule: rule.into(),
        }
    }
}

/// The repository collector (see the module documentation).
pub struct RepositoryCollector {
    store: Arc<dyn EvidenceStore>,
    runner: Runner,
    jobs: NonZeroUsize,
}

impl std::fmt::Debug for RepositoryCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepositoryCollector")
            .field("protected", &self.runner.protected)
            .finish_non_exhaustive()
    }
}

/// Everything validated and copied before the first run.
struct Prepared {
    pins: Digest,
    programs: Programs,
    closure: Digest,
    deadline: u64,
    checks: Vec<ProcessCheck>,
}

/// The input a [`CollectError::InvalidInput`] names when the Candidate is not one the Slice
/// may run ([`programs::derive`] refused it): its rule is derive's reason.
pub const DERIVE_INPUT: &str = "the Slice and the Candidate";

/// A collection checked and its programs derived ([`RepositoryCollector::prepare`]), with
/// the collector's own copy of the request it was derived from.
pub struct PreparedCollection {
    request: CollectRequest,
    prepared: Prepared,
}

impl PreparedCollection {
    /// The same collection with `environments` as the request's: where this host keeps each
    /// dependency environment, verified by the caller against its digest just before the
    /// collection starts (nothing derived depends on them).
    pub fn with_environments(mut self, environments: BTreeMap<Digest, PathBuf>) -> Self {
        self.request.environments = environments;
        self
    }

    /// The same collection with `capabilities` as the request's: each oats check's harness,
    /// staged just before the collection starts (checked against its pin at each run).
    pub fn with_capabilities(mut self, capabilities: StagedCapabilities) -> Self {
        self.request.capabilities = capabilities;
        self
    }
}

/// What one check's run produced, before it is stored.
struct Ran {
    observation: Observation,
    state: RunState,
}

/// What the jobs of one collection share.
struct Shared {
    /// The index of the next check to take.
    next: AtomicUsize,
    /// Why the gate closed, once it did.
    gate_closed: Mutex<Option<String>>,
    /// A put failed: nothing further is started or stored.
    storage_failed: AtomicBool,
    /// Why the hold ended, once it did: nothing further is started or stored.
    released: Mutex<Option<String>>,
}

impl Shared {
    fn is_released(&self) -> bool {
        self.released
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

/// What a job tells the calling thread.
enum Event {
    Started(usize),
    Settled {
        at: usize,
        run: Box<CollectedRun>,
        elapsed: Duration,
    },
}

/// What [`RepositoryCollector::collect_with_progress`] reports as it goes.
#[derive(Clone, Copy, Debug)]
pub enum CollectEvent<'a> {
    /// A check's run is about to be launched (its gate read and hold check come first).
    Started {
        /// The check's id.
        check: &'a str,
    },
    /// A check is settled: run and stored, or not started.
    Settled {
        /// How it settled.
        run: &'a CollectedRun,
        /// From its start to its record being stored (zero when it never started).
        elapsed: Duration,
    },
}

impl RepositoryCollector {
    /// A collector storing into `store` and running on `executor`. `protected_paths` (1 to
    /// 256 absolute paths, kept as given) are what a Candidate must never read: the evidence
    /// database, the repository, the fence, the snapshot store, the slice directory. Refused
    /// when the runtime cannot be described or a protected path is readable under it.
    pub fn new(
        store: Arc<dyn EvidenceStore>,
        executor: Arc<dyn Executor>,
        protected_paths: Vec<PathBuf>,
    ) -> Result<Self, CollectError> {
        Ok(Self {
            store,
            runner: Runner::new(executor, protected_paths)?,
            jobs: NonZeroUsize::MIN,
        })
    }

    /// The same collector running up to `jobs` checks at a time (one by default). Each check
    /// is still one run and one record; the gate and the hold are still checked before each
    /// launch.
    pub fn with_jobs(mut self, jobs: NonZeroUsize) -> Self {
        self.jobs = jobs;
        self
    }

    /// The same collector with another clock (tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.runner.clock = clock;
        self
    }

    /// The environment the executor provides now (`None` when it cannot be described).
    pub fn current_environment(&self) -> Option<EnvironmentRecord> {
        crate::assurance::current_environment(self.runner.executor.as_ref()).ok()
    }

    /// Runs every process check of `request` once (see the module documentation).
    pub fn collect(
        &self,
        request: &CollectRequest,
        gate: Arc<dyn Gate>,
        hold: &Hold,
        cancel: &CancelToken,
    ) -> Result<CollectResult, CollectError> {
        self.collect_with_progress(request, gate, hold, cancel, &mut |_| {})
    }

    /// [`RepositoryCollector::collect`], calling `progress` on the calling thread when each
    /// check's run starts and when it is settled (in the order they happen: with more than
    /// one job, not acceptance order).
    pub fn collect_with_progress(
        &self,
        request: &CollectRequest,
        gate: Arc<dyn Gate>,
        hold: &Hold,
        cancel: &CancelToken,
        progress: &mut dyn FnMut(CollectEvent<'_>),
    ) -> Result<CollectResult, CollectError> {
        let prepared = Self::prepare_parts(request)?;
        self.run_prepared(request, &prepared, gate, hold, cancel, progress)
    }

    /// Checks `request` and derives what it runs ([`programs::derive`]), everything
    /// [`RepositoryCollector::collect`] checks before anything starts but the hold, which
    /// need not exist yet: so that a caller can refuse a collection before it claims an
    /// attempt, and the collection then runs exactly what was derived here, from the
    /// collector's own copy of the request.
    pub fn prepare(request: CollectRequest) -> Result<PreparedCollection, CollectError> {
        let prepared = Self::prepare_parts(&request)?;
        Ok(PreparedCollection { request, prepared })
    }

    /// Runs a collection [`RepositoryCollector::prepare`] checked, as
    /// [`RepositoryCollector::collect_with_progress`] does.
    pub fn collect_prepared(
        &self,
        prepared: &PreparedCollection,
        gate: Arc<dyn Gate>,
        hold: &Hold,
        cancel: &CancelToken,
        progress: &mut dyn FnMut(CollectEvent<'_>),
    ) -> Result<CollectResult, CollectError> {
        self.run_prepared(
            &prepared.request,
            &prepared.prepared,
            gate,
            hold,
            cancel,
            progress,
        )
    }

    fn run_prepared(
        &self,
        request: &CollectRequest,
        prepared: &Prepared,
        gate: Arc<dyn Gate>,
        hold: &Hold,
        cancel: &CancelToken,
        progress: &mut dyn FnMut(CollectEvent<'_>),
    ) -> Result<CollectResult, CollectError> {
        Self::check_hold(prepared, hold)?;
        let environment_before = self.current_environment();
        let attempt = hold.attempt().clone();
        let shared = Shared {
            next: AtomicUsize::new(0),
            gate_closed: Mutex::new(None),
            storage_failed: AtomicBool::new(false),
            released: Mutex::new(None),
        };
        let (settled, mut stored) =
            self.run_jobs(request, prepared, &gate, hold, cancel, &shared, progress);
        // Records are listed in acceptance order, whatever order they were stored in.
        stored.sort_by_key(|(at, _)| *at);
        let stored: Vec<Digest> = stored.into_iter().map(|(_, id)| id).collect();
        if let Some(reason) = shared
            .released
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(CollectError::Released {
                attempt,
                reason,
                stored,
            });
        }
        Ok(CollectResult {
            attempt,
            pins: prepared.pins.clone(),
            pinned: prepared.programs.pins.clone(),
            runs: every_run_settled(settled, &prepared.checks),
            evidence: stored,
            environment_before,
            environment_after: self.current_environment(),
        })
    }

    /// The hold is on the pinned Product's fence, for the pinned Candidate, and still active.
    fn check_hold(prepared: &Prepared, hold: &Hold) -> Result<(), CollectError> {
        let pins = &prepared.programs.pins;
        if hold.attempt().product != pins.product() {
            return Err(CollectError::invalid(
                "hold",
                format!(
                    "is on the fence of {}, not of the pinned Product {}",
                    hold.attempt().product,
                    pins.product()
                ),
            ));
        }
        // A hold excludes other attempts on its own Candidate only: under another Candidate's
        // hold, two attempts on this one could run at once.
        if *hold.candidate() != pins.candidate.digest {
            return Err(CollectError::invalid(
                "hold",
                format!(
                    "is for Candidate {}, not the pinned {}",
                    hold.candidate(),
                    pins.candidate.digest
                ),
            ));
        }
        hold.assert_active()
            .map_err(|error| CollectError::Released {
                attempt: hold.attempt().clone(),
                reason: error.to_string(),
                stored: Vec::new(),
            })
    }

    /// Runs the checks on up to `jobs` workers, reporting progress on this thread as they send
    /// it; each check's settled run by position, and the records stored with their positions.
    #[allow(clippy::too_many_arguments)]
    fn run_jobs(
        &self,
        request: &CollectRequest,
        prepared: &Prepared,
        gate: &Arc<dyn Gate>,
        hold: &Hold,
        cancel: &CancelToken,
        shared: &Shared,
        progress: &mut dyn FnMut(CollectEvent<'_>),
    ) -> (Vec<Option<CollectedRun>>, Vec<(usize, Digest)>) {
        let checks = &prepared.checks;
        let attempt = hold.attempt().clone();
        let mut settled: Vec<Option<CollectedRun>> = vec![None; checks.len()];
        let mut stored: Vec<(usize, Digest)> = Vec::new();
        let jobs = self.jobs.get().min(checks.len()).max(1);
        std::thread::scope(|scope| {
            let (events, received) = mpsc::channel::<Event>();
            for _ in 0..jobs {
                let events = events.clone();
                let attempt = &attempt;
                scope.spawn(move || {
                    self.work(
                        request, prepared, attempt, gate, hold, cancel, shared, &events,
                    )
                });
            }
            drop(events);
            for event in received {
                match event {
                    Event::Started(at) => progress(CollectEvent::Started {
                        check: &checks[at].id,
                    }),
                    Event::Settled { at, run, elapsed } => {
                        progress(CollectEvent::Settled { run: &run, elapsed });
                        if let Some(id) = &run.evidence {
                            stored.push((at, id.clone()));
                        }
                        settled[at] = Some(*run);
                    }
                }
            }
        });
        (settled, stored)
    }

    /// One worker: takes the next check until none is left, the hold ended, or (after a
    /// record could not be stored) settles the rest as not started.
    #[allow(clippy::too_many_arguments)]
    fn work(
        &self,
        request: &CollectRequest,
        prepared: &Prepared,
        attempt: &AttemptId,
        gate: &Arc<dyn Gate>,
        hold: &Hold,
        cancel: &CancelToken,
        shared: &Shared,
        events: &mpsc::Sender<Event>,
    ) {
        let release = |error: crate::fence::FenceError| {
            let mut released = shared
                .released
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            released.get_or_insert_with(|| error.to_string());
        };
        loop {
            let at = shared.next.fetch_add(1, Ordering::SeqCst);
            let Some(check) = prepared.checks.get(at) else {
                return;
            };
            if shared.is_released() {
                return;
            }
            // The receiver lives until every worker is done: a send cannot fail.
            let settle = |run: CollectedRun, elapsed: Duration| {
                let _ = events.send(Event::Settled {
                    at,
                    run: Box::new(run),
                    elapsed,
                });
            };
            if shared.storage_failed.load(Ordering::SeqCst) {
                settle(
                    CollectedRun {
                        check: check.id.clone(),
                        evidence: None,
                        state: RunState::NotStarted,
                        identities: None,
                        problems: vec![
                            "an earlier record could not be stored; nothing further is started or stored"
                                .into(),
                        ],
                        limits_hit: Vec::new(),
                        process: None,
                        storage_error: None,
                    },
                    Duration::ZERO,
                );
                continue;
            }
            let _ = events.send(Event::Started(at));
            let started = Instant::now();
            let ran = match self.run_one(request, prepared, check, gate, shared, hold, cancel) {
                Ok(ran) => ran,
                Err(error) => return release(error),
            };
            if let Err(error) = hold.assert_active() {
                return release(error);
            }
            let run = self.store_run(prepared, attempt, check, ran, shared);
            settle(run, started.elapsed());
        }
    }

    /// Stores one run's record (unless an earlier put failed) and says how it settled.
    fn store_run(
        &self,
        prepared: &Prepared,
        attempt: &AttemptId,
        check: &ProcessCheck,
        ran: Ran,
        shared: &Shared,
    ) -> CollectedRun {
        let identities = ran.observation.facts.identities.clone();
        let mut problems = ran.observation.facts.problems.clone();
        let process = ran.observation.facts.process.clone();
        let limits_hit = process
            .as_ref()
            .and_then(|process| process.limits_hit.clone())
            .unwrap_or_default();
        if shared.storage_failed.load(Ordering::SeqCst) {
            // Another job's put failed while this run ran: nothing further is stored.
            problems.push(
                "an earlier record could not be stored; this run's record was not stored".into(),
            );
            return CollectedRun {
                check: check.id.clone(),
                evidence: None,
                state: RunState::StorageFailed,
                identities,
                problems,
                limits_hit,
                process,
                storage_error: None,
            };
        }
        // The store's error code, when the put itself failed: the class the caller reports.
        let mut class = None;
        let put = ran
            .observation
            .encode()
            .map_err(|error| error.to_string())
            .and_then(|payload| {
                EvidenceRecord::new(
                    prepared.pins.clone(),
                    attempt.clone(),
                    OBSERVATION_FORMAT,
                    &payload,
                )
                .map_err(|error| error.to_string())
            })
            .and_then(|record| {
                self.store
                    .put(&record, Instant::now() + STORE_TIMEOUT)
                    .map_err(|error| {
                        class = Some(error.code());
                        error.to_string()
                    })
                    .and_then(|id| {
                        // The store's id is checked, never trusted.
                        if id == record.id() {
                            Ok(id)
                        } else {
                            Err(format!(
                                "the store answered id {id} for record {}",
                                record.id()
                            ))
                        }
                    })
            });
        match put {
            Ok(id) => CollectedRun {
                check: check.id.clone(),
                evidence: Some(id),
                state: ran.state,
                identities,
                problems,
                limits_hit,
                process,
                storage_error: None,
            },
            Err(error) => {
                shared.storage_failed.store(true, Ordering::SeqCst);
                problems.push(format!("the record could not be stored: {error}"));
                CollectedRun {
                    check: check.id.clone(),
                    evidence: None,
                    state: RunState::StorageFailed,
                    identities,
                    problems,
                    limits_hit,
                    process,
                    storage_error: class,
                }
            }
        }
    }

    fn prepare_parts(request: &CollectRequest) -> Result<Prepared, CollectError> {
        let invalid = |input: &str, rule: String| CollectError::invalid(input, rule);
        Self::check_sealed(&request.sealed)?;
        let programs = derive(&request.slice, &request.sealed, &request.trees)
            .map_err(|why| invalid(DERIVE_INPUT, why))?;
        let slice = &request.slice;
        let pins = &programs.pins;
        let pins_digest = check_records(pins, &slice.acceptance, &slice.recipe, &slice.environment)
            .map_err(|error| match error {
                crate::assurance::AssuranceError::InvalidInput { input, rule } => {
                    CollectError::InvalidInput { input, rule }
                }
                other => invalid("pins", other.to_string()),
            })?;
        let closure = collector_closure();
        if slice.recipe.collector_closure != closure {
            return Err(invalid(
                "recipe.collector.closure",
                format!(
                    "pins collector {}, but this code is {closure}; records are never attributed to other code",
                    slice.recipe.collector_closure
                ),
            ));
        }
        let checks: Vec<ProcessCheck> = slice.acceptance.process_checks().cloned().collect();
        let deadline = time::to_millis(request.deadline)
            .ok_or_else(|| invalid("deadline", "is a time between 1970 and 9999".into()))?;
        Ok(Prepared {
            pins: pins_digest,
            programs,
            closure,
            deadline,
            checks,
        })
    }

    /// The sealed Candidate's manifest bytes are its digest's and the canonical form of the
    /// manifest it carries.
    fn check_sealed(sealed: &SealedCandidate) -> Result<(), CollectError> {
        if Digest::of(&sealed.manifest_bytes) != sealed.digest {
            return Err(CollectError::invalid(
                "sealed.digest",
                "the manifest bytes do not hash to the Candidate digest",
            ));
        }
        canonical::parse_canonical(&sealed.manifest_bytes)
            .ok()
            .and_then(|value| CandidateManifest::from_value(&value).ok())
            .filter(|manifest| *manifest == sealed.manifest)
            .map(|_| ())
            .ok_or_else(|| {
                CollectError::invalid(
                    "sealed.manifest",
                    "the manifest bytes are not the canonical manifest the Candidate carries",
                )
            })
    }

    /// Asks the gate once ([`GateExt::consult`]), so that a read still pending at the deadline
    /// or on cancellation is abandoned. `Err` with the reason for anything but a timely
    /// proceed.
    fn read_gate(
        &self,
        gate: &Arc<dyn Gate>,
        deadline: u64,
        cancel: &CancelToken,
    ) -> Result<(), String> {
        let now = time::to_millis(self.runner.clock.now()).unwrap_or(u64::MAX);
        if now >= deadline {
            return Err("the deadline passed before the gate was read".into());
        }
        let by = Instant::now() + Duration::from_millis(deadline - now);
        gate.consult(by, Some(cancel))
            .map_err(|withheld| match withheld {
                Withheld::Refused { reason } => format!("the gate refused: {reason}"),
                Withheld::MalformedRefusal => "the gate refused (with a malformed reason)".into(),
                Withheld::Failed(error) => {
                    format!("the gate gave no answer ({}): {error}", error.code())
                }
                Withheld::Panicked(message) => format!("the gate panicked: {message}"),
                Withheld::NoAnswer => "the deadline passed while the gate was read".into(),
                Withheld::Late => "the gate answered after the deadline".into(),
                Withheld::Cancelled => "aborted before the run (while the gate was read)".into(),
                Withheld::NotStarted(error) => format!("the gate could not be read: {error}"),
            })
    }
}

/// Every check's run: each is settled once the workers are done unless the hold ended (which
/// the caller reports), so one that is not is a defect, reported as one.
fn every_run_settled(
    settled: Vec<Option<CollectedRun>>,
    checks: &[ProcessCheck],
) -> Vec<CollectedRun> {
    settled
        .into_iter()
        .zip(checks)
        .map(|(run, check)| {
            run.unwrap_or_else(|| CollectedRun {
                check: check.id.clone(),
                evidence: None,
                state: RunState::NotStarted,
                identities: None,
                problems: vec!["the collection ended before this check was settled".into()],
                limits_hit: Vec::new(),
                process: None,
                storage_error: None,
            })
        })
        .collect()
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Why the executor's environment now is not the pinned one, or `None`.
pub fn environment_problem(
    runtime: &RuntimeDescription,
    environment: &EnvironmentRecord,
    slice: &FrozenSlice,
) -> Option<String> {
    if runtime.executable.as_os_str() != slice.recipe.runtime.as_str() {
        return Some(format!(
            "the runtime changed: the executor runs {}, the recipe pins {}",
            runtime.executable.display(),
            slice.recipe.runtime
        ));
    }
    let pinned = &slice.environment;
    let mut differences = Vec::new();
    if environment.runtime != pinned.runtime {
        differences.push(format!(
            "runtime {} (pinned {})",
            environment.runtime, pinned.runtime
        ));
    }
    if environment.profile != pinned.profile {
        differences.push(format!(
            "profile {} (pinned {})",
            environment.profile, pinned.profile
        ));
    }
    if environment.platform != pinned.platform {
        differences.push(format!(
            "platform {} (pinned {})",
            environment.platform, pinned.platform
        ));
    }
    if environment.sf != pinned.sf {
        differences.push(format!("sf {} (pinned {})", environment.sf, pinned.sf));
    }
    (!differences.is_empty()).then(|| {
        format!(
            "the runtime changed: the environment record differs from the pinned one: {}",
            differences.join(", ")
        )
    })
}

/// Why an executor's answer is not attributable to the pinned run, or nothing: its
/// identities against the pins, the environment record and the enforcement facts the recipe
/// pins, its bounds, status and times.
fn answer_problems(
    answer: &RunAnswer,
    pins: &RepositoryPins,
    check: &ProcessCheck,
    (environment, enforcement): (&EnvironmentRecord, &Enforcement),
    bounds: &crate::contracts::RunBounds,
    ended_at: Option<u64>,
    deadline: u64,
) -> Vec<String> {
    let mut problems = Vec::new();
    let ids = &answer.identities;
    let expected_program = pins.program(check.stage);
    for (what, actual, expected) in [
        ("program", &ids.program, expected_program),
        ("input", &ids.input, &check.input),
        ("harness", &ids.harness, check.harness_pin(&pins.harness)),
        ("runtime", &ids.runtime, &environment.runtime),
        ("profile", &ids.profile, &environment.profile),
        ("bounds", &ids.bounds, &bounds.digest()),
    ] {
        if actual != expected {
            problems.push(format!(
                "the executor reports {what} {actual}, not the pinned {expected}"
            ));
        }
    }
    if answer.bounds != *bounds {
        problems.push("the executor enforced other bounds than requested".into());
    }
    let command = check.command().map(|command| command.to_run(None).digest());
    if ids.command != command {
        problems.push(match (&ids.command, &command) {
            (Some(actual), Some(expected)) => {
                format!("the executor reports command {actual}, not the pinned {expected}")
            }
            (None, _) => "the executor reports no command for a command check".to_owned(),
            (Some(actual), None) => {
                format!("the executor reports command {actual} for a check of an entry")
            }
        });
    }
    for unmet in ids.enforcement.unmet(enforcement) {
        problems.push(format!("enforcement: {unmet}, as the recipe pins"));
    }
    // A run stopped at the check's own timeout did not finish in the time the check allows:
    // the judge grades it.
    let own_timeout = check
        .command()
        .is_some_and(|command| command.own_timeout(bounds.timeout_ms()));
    match answer.status {
        RunStatus::Exited | RunStatus::Signalled => {}
        RunStatus::TimedOut if own_timeout => {}
        stopped => problems.push(format!("the run was stopped ({})", stopped.code())),
    }
    if let NamespaceDisposition::Unconfirmed { reason } = &answer.namespace {
        problems.push(format!(
            "the executor could not confirm that every process ended: {reason}"
        ));
    }
    for problem in &answer.problems {
        problems.push(format!("executor: {problem}"));
    }
    // The sandbox's own limits are never the program's failure; a bound the check declares
    // is the program's to fit, and the judge grades it.
    let declared = check
        .command()
        .map(|command| command.resources)
        .unwrap_or_default();
    problems.extend(
        answer
            .limits_hit
            .iter()
            .filter(|hit| !declared.declares(hit.limit()))
            .map(ToString::to_string),
    );
    if ended_at.is_none_or(|ended| ended > deadline) {
        problems.push("the run ended after the deadline".into());
    }
    problems
}
