//! Trials: a Slice's checks run on a tree before any Candidate exists: the freeze's dry run
//! of the base stage, and the runs a Slice's test lists are suggested from. Each run is laid
//! out, bounded and launched as a collection's run is (the same executor, the environment
//! the Slice pins, its inputs, harness and dependency environments, the overlay laid over
//! the tree, and the same paths no run may read), but nothing is stored and nothing judged:
//! a trial is not evidence, and no Verdict ever counts one.
//!
//! A trial runs on the base alone, or on the base with edits (a fix's changes) laid over
//! it, always by reference: the base as the tree store holds it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use crate::assurance::{FrozenSlice, ProcessCheck, ProcessFacts, time};
use crate::canonical::Digest;
use crate::contracts::{
    CancelToken, CapturedResults, Executor, NamespaceDisposition, check_limits_hit,
};

use super::programs::{StageProgram, StoredTrees, layered};
use super::run::{Runner, lay_out, process_facts};
use super::{CollectError, panic_text};

/// Which tree a trial run runs on, each with the Slice's overlay laid over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrialTree {
    /// The base.
    Base,
    /// The base with the request's edits.
    Changed,
}

/// What a trial runs.
#[derive(Clone, Debug)]
pub struct TrialRequest {
    /// The Slice whose checks run (frozen, or about to be: it need not be written yet).
    pub slice: FrozenSlice,
    /// The base, materialised (`base` must be `Some`), its directories on every path a
    /// layer, entry or working directory lies on, and the edits of the changed tree (none
    /// for a trial of the base alone).
    pub trees: StoredTrees,
    /// When every run must be over.
    pub deadline: SystemTime,
    /// Where this host keeps the files of each dependency environment the checks name, by
    /// digest, verified by the caller.
    pub environments: BTreeMap<Digest, PathBuf>,
    /// The staged harness of each oats check, by check id.
    pub capabilities: super::StagedCapabilities,
}

/// One trial run: which check ran on which tree, and how it went.
#[derive(Clone, Debug)]
pub struct TrialRun {
    /// The check's id.
    pub check: String,
    /// The tree it ran on.
    pub tree: TrialTree,
    /// How it went.
    pub outcome: TrialOutcome,
}

/// How one trial run went.
#[derive(Clone, Debug)]
pub enum TrialOutcome {
    /// It was not started, for this reason (a collection's run would not have started
    /// either).
    NotStarted(String),
    /// The executor panicked or refused: the run's outcome is unknown.
    Unresolved(String),
    /// It ran: its process facts and output, and what the executor reported wrong with it
    /// (a run with problems would not be attributable in a collection).
    Ran {
        /// Its ending, exit code, times and limits hit.
        process: ProcessFacts,
        /// Its stdout, as captured.
        stdout: Vec<u8>,
        /// Its stderr, as captured.
        stderr: Vec<u8>,
        /// The results file it left, for a command that asked for one.
        results: Option<CapturedResults>,
        /// What the executor reported wrong with the run.
        problems: Vec<String>,
    },
}

/// Runs a Slice's checks outside any collection (see the module documentation).
pub struct Trial {
    runner: Runner,
}

impl std::fmt::Debug for Trial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trial")
            .field("protected", &self.runner.protected)
            .finish_non_exhaustive()
    }
}

impl Trial {
    /// Trials on `executor` whose runs must never read `protected_paths`, as
    /// [`super::RepositoryCollector::new`] requires of a collection's.
    pub fn new(
        executor: Arc<dyn Executor>,
        protected_paths: Vec<PathBuf>,
    ) -> Result<Self, CollectError> {
        Ok(Self {
            runner: Runner::new(executor, protected_paths)?,
        })
    }

    /// Runs each of `runs` once, in order, and answers how each went. `Err` (nothing run)
    /// when the Slice is not whole or the trees cannot be laid out as programs.
    pub fn run(
        &self,
        request: &TrialRequest,
        runs: &[(&ProcessCheck, TrialTree)],
        cancel: &CancelToken,
    ) -> Result<Vec<TrialRun>, CollectError> {
        let slice = &request.slice;
        slice
            .validate()
            .map_err(|error| CollectError::invalid("the Slice", error.to_string()))?;
        let base = request.trees.base.as_ref().ok_or_else(|| {
            CollectError::invalid("the trial's trees", "the base is not materialised")
        })?;
        let (base, changed) = layered(&slice.overlay, &base.digest, &request.trees, None)
            .map_err(|why| CollectError::invalid("the trial's trees", why))?;
        let deadline = time::to_millis(request.deadline).ok_or_else(|| {
            CollectError::invalid("the deadline", "is not a time a record can hold")
        })?;
        Ok(runs
            .iter()
            .map(|(check, tree)| {
                let program = match tree {
                    TrialTree::Base => &base,
                    TrialTree::Changed => &changed,
                };
                TrialRun {
                    check: check.id.clone(),
                    tree: *tree,
                    outcome: self.run_one(request, program, check, deadline, cancel),
                }
            })
            .collect())
    }

    /// One run: refused where a collection's would be refused, else launched once.
    fn run_one(
        &self,
        request: &TrialRequest,
        program: &StageProgram,
        check: &ProcessCheck,
        deadline: u64,
        cancel: &CancelToken,
    ) -> TrialOutcome {
        if cancel.is_cancelled() {
            return TrialOutcome::NotStarted("aborted before the run".into());
        }
        let runner = &self.runner;
        let slice = &request.slice;
        let laid_out = runner
            .describe_environment()
            .and_then(|(runtime, environment)| {
                runner
                    .environment_refusal(&runtime, &environment, slice)
                    .map_or(Ok(()), Err)
            });
        let bounded = laid_out
            .and_then(|()| {
                let supplied = (&request.environments, &request.capabilities);
                lay_out(slice, supplied, program, check)
            })
            .and_then(|laid| runner.bound(laid, &slice.recipe, deadline, check));
        let (run, timeout_ms) = match bounded {
            Ok(bounded) => bounded,
            Err(reason) => return TrialOutcome::NotStarted(reason),
        };
        let answer = match runner.launch(&run, cancel).answer {
            Err(panic) => {
                return TrialOutcome::Unresolved(format!(
                    "the executor panicked: {}",
                    panic_text(panic.as_ref())
                ));
            }
            Ok(Err(error)) => {
                return TrialOutcome::Unresolved(format!(
                    "the executor refused ({}): {error}",
                    error.code()
                ));
            }
            Ok(Ok(answer)) => answer,
        };
        let mut problems: Vec<String> = answer
            .problems
            .iter()
            .map(|problem| format!("executor: {problem}"))
            .collect();
        if let NamespaceDisposition::Unconfirmed { reason } = &answer.namespace {
            problems.push(format!(
                "the executor could not confirm that every process ended: {reason}"
            ));
        }
        let limits_hit = match check_limits_hit(&answer.limits_hit) {
            Ok(()) => answer.limits_hit.clone(),
            Err(rule) => {
                problems.push(format!(
                    "the executor stated its limits hit malformed: {rule}"
                ));
                Vec::new()
            }
        };
        TrialOutcome::Ran {
            process: process_facts(&answer, timeout_ms, slice.recipe.output_limit, limits_hit),
            stdout: answer.stdout,
            stderr: answer.stderr,
            results: answer.results,
            problems,
        }
    }
}
