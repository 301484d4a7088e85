//! `collect`: runs each frozen process check of a Candidate once in the sandbox, one record
//! per run, under the fence. Everything is checked first (the Slice, the Candidate sealed for
//! exactly it, the preflight, the dependency environments); a failure there starts nothing.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use sf_host::canonical::Digest;
use sf_host::collector::{
    CollectError, CollectRequest as Collection, CollectResult, DERIVE_INPUT, PreparedCollection,
    RepositoryCollector,
};
use sf_host::contracts::CancelToken;
use sf_host::fence::{Fence, Hold};

use crate::backends::Backends;
use crate::capabilities::staged_for_run;
use crate::env::verified_trees_in;
use crate::error::AppError;
use crate::input::{deadline, parse_digest};
use crate::landing::{land_error, stopped};
use crate::loaded::{Exported, Target, not_for_the_slice, protected_paths};
use crate::preflight::{check_gate_file, check_jobs, preflight};
use crate::progress::Progress;
use crate::slice_dir::SliceDir;

/// One collection, as asked for.
#[derive(Clone, Debug)]
pub struct CollectRequest {
    /// The Candidate and its Slice.
    pub target: Target,
    /// A gate file read before anything starts and before every run, in place of the
    /// configured gate.
    pub gate: Option<PathBuf>,
    /// When the collection must be over, as given (RFC 3339 UTC); `None` for an hour from
    /// now.
    pub deadline: Option<String>,
    /// How many checks run at a time.
    pub jobs: NonZeroUsize,
    /// How long to wait for the repository's fence when another attempt holds it: `None`
    /// refuses at once (`busy`); the wait never outlasts the collection's deadline.
    pub wait: Option<Duration>,
}

/// The longest pause between two tries for a busy fence.
const WAIT_STEP_MAX: Duration = Duration::from_secs(1);

/// The fence's hold, taken in turn: tried at once, then (with `wait`) again after a pause
/// that grows from 50 ms to [`WAIT_STEP_MAX`] while it is `busy`, until `wait` has passed or
/// the deadline comes. Answers the hold and how long was waited.
fn acquire_in_turn(
    fence: &Fence,
    candidate: &Digest,
    wait: Option<Duration>,
    deadline: SystemTime,
) -> Result<(Hold, Duration), AppError> {
    let started = Instant::now();
    let until = wait.map(|wait| {
        let left = deadline
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        started + wait.min(left)
    });
    let mut pause = Duration::from_millis(50);
    let mut tries = 0;
    loop {
        tries += 1;
        match fence.acquire(candidate) {
            // Taken at the first try: nothing was waited for.
            Ok(hold) if tries == 1 => return Ok((hold, Duration::ZERO)),
            Ok(hold) => return Ok((hold, started.elapsed())),
            Err(error)
                if error.code() == "busy"
                    && until.is_some_and(|until| Instant::now() + pause < until) =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(WAIT_STEP_MAX);
            }
            Err(error) => {
                let fix = match wait {
                    None => "; wait for the other attempt to end (--wait waits for it)".to_owned(),
                    Some(_) => format!(
                        "; waited {} ms for the other attempt to end",
                        started.elapsed().as_millis()
                    ),
                };
                return Err(AppError::coded(
                    error.code(),
                    "the fence",
                    format!("{error}{fix}"),
                ));
            }
        }
    }
}

/// The verification of the dependency environments, answered when it is taken.
type Verifying<'a> = Box<dyn FnOnce() -> Result<BTreeMap<Digest, PathBuf>, AppError> + 'a>;

/// Collects `request.target`'s process checks once; `progress` hears the attempt claimed and
/// each run.
pub fn collect(
    backends: &Backends,
    request: &CollectRequest,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<CollectResult, AppError> {
    let deadline = deadline(request.deadline.as_deref())?;
    check_gate_file(request.gate.as_deref())?;
    let digest = parse_digest(&request.target.candidate, "--candidate")?;
    let slice = SliceDir::open(&request.target.slice)?;
    // The dependency environments are verified on a thread of their own while the Candidate is
    // exported and checked (neither needs the other, and each is a good part of the time before
    // the first check starts); their verdict is taken where it always was, after the preflight
    // and before the attempt is claimed.
    let environments: Vec<Digest> = slice
        .frozen
        .acceptance
        .environments()
        .into_iter()
        .cloned()
        .collect();
    let store_dir = (!environments.is_empty()).then(|| backends.environment_store_dir());
    std::thread::scope(|scope| {
        let verifying = scope.spawn(move || match store_dir {
            None => Ok(BTreeMap::new()),
            Some(dir) => dir.and_then(|dir| verified_trees_in(&dir, &environments)),
        });
        let verified: Verifying<'_> = Box::new(|| {
            verifying.join().unwrap_or_else(|_| {
                Err(AppError::new(
                    "unavailable",
                    "verifying the dependency environments failed; nothing was started",
                ))
            })
        });
        let exported = Exported::read_in(backends, &request.target, digest, slice, true)?;
        collect_exported(backends, request, deadline, exported, verified, progress)
    })
}

/// The rest of a collection once the Candidate is exported; `verified` answers the
/// verification of its dependency environments.
fn collect_exported(
    backends: &Backends,
    request: &CollectRequest,
    deadline: SystemTime,
    exported: Exported,
    verified: Verifying<'_>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<CollectResult, AppError> {
    let Exported {
        slice,
        repository,
        sealed,
        trees,
        digest,
    } = exported;
    let prepared = prepare(&slice, &digest, sealed, trees, deadline)?;
    let executor = slice.executor(backends)?;
    check_jobs(executor.as_ref(), request.jobs)?;
    let gate = backends.gate(request.gate.as_deref())?;
    preflight(executor.as_ref(), &slice.frozen, &gate, deadline)
        .map_err(|error| land_error("before the collection", error))?;
    // Verified before the attempt is claimed: an environment that changed starts nothing.
    // The oats checks are staged at their pinned integrity; one that cannot be is left
    // not started (undecided), as a missing environment would be if it were not refused.
    let prepared = prepared
        .with_environments(verified()?)
        .with_capabilities(staged_for_run(backends, &slice.frozen.acceptance));
    let protected = protected_paths(&slice, &repository)?;
    let store = slice.evidence_store(backends)?;
    let product = repository.identity().product_id.clone();
    let fence = slice.fence(backends, &product)?;
    let collector = RepositoryCollector::new(store, executor, protected)
        .map_err(|error| AppError::coded(error.code(), "the collector", error))?
        .with_jobs(request.jobs);
    let (hold, waited) = acquire_in_turn(&fence, &digest, request.wait, deadline)?;
    progress(Progress::Collecting {
        attempt: hold.attempt(),
        checks: slice.frozen.acceptance.process_checks().count(),
        waited,
    });
    collector
        .collect_prepared(&prepared, gate, &hold, &CancelToken::new(), &mut |event| {
            progress(Progress::Run(event))
        })
        .map_err(|error| land_error("the collection", stopped(&fence, error)))
}

/// The collection checked and derived before anything is claimed: a Candidate not sealed for
/// this Slice starts nothing.
fn prepare(
    slice: &SliceDir,
    digest: &Digest,
    sealed: sf_host::repository::SealedCandidate,
    trees: sf_host::collector::CollectTrees,
    deadline: SystemTime,
) -> Result<PreparedCollection, AppError> {
    RepositoryCollector::prepare(Collection {
        slice: slice.frozen.clone(),
        sealed,
        trees,
        deadline,
        environments: BTreeMap::new(),
        capabilities: BTreeMap::new(),
    })
    .map_err(|error| match error {
        CollectError::InvalidInput { input, rule } if input == DERIVE_INPUT => {
            not_for_the_slice(digest, slice, rule)
        }
        error => AppError::coded(error.code(), "the collection", error),
    })
}
