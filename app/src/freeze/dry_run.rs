//! The freeze's dry run: before anything is written, the Slice's checks run once on its
//! base (the overlay laid over it) in the configured sandbox, so that a mistake of the Slice
//! is refused at freeze and never becomes a Candidate's failure. Base-stage checks are graded
//! as the judge grades them (every Candidate's base runs would be the same); every test id a
//! check lists must be one the base run reports, and an id that is not is named with the
//! closest ids that are ("did you mean"). A candidate-stage check with test lists runs on the
//! base too when no base-stage check runs the same command, only to read the ids it reports.
//!
//! The runs are trials ([`Trial`]): nothing is stored, the Slice keeps no record of them, and
//! no Verdict counts them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use sf_host::assurance::test_results::{TestOutcome, TestResults};
use sf_host::assurance::{FrozenSlice, ProcessCheck, Stage, grade_trial};
use sf_host::collector::{Trial, TrialOutcome, TrialRequest, TrialRun, TrialTree};
use sf_host::contracts::{CancelToken, CapturedResults};
use sf_host::environment_store::EnvironmentStore;
use sf_host::repository::EditedEntry;
use sf_host::tree_store::trial_trees;

use super::Base;
use crate::backends::Backends;
use crate::env::verified_trees_in;
use crate::error::AppError;

/// How long the whole dry run may take.
const DRY_RUN_TIME: Duration = Duration::from_secs(3600);

/// At most this many "did you mean" ids are named for one unreported id.
const SUGGESTIONS: usize = 3;

/// One check's dry run on the base, as the freeze reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRunCheck {
    /// The check's id.
    pub check: String,
    /// Its stage.
    pub stage: Stage,
    /// The exit code of its run on the base (`None`: it did not exit).
    pub exit_code: Option<i32>,
    /// How many tests its results report (`None`: it asks for none, or wrote none).
    pub tests: Option<usize>,
    /// Its run's wall time, in milliseconds.
    pub wall_ms: u64,
    /// The check of the same run whose results it shares, when it did not run itself.
    pub shared_with: Option<String>,
}

/// What the dry run found: each check it ran on the base, in acceptance order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DryRun {
    /// The checks run (or whose run was shared).
    pub checks: Vec<DryRunCheck>,
    /// Test ids that could not be confirmed (the base run errored before reporting them)
    /// and are kept: a candidate-stage check's ids, which may belong to a module the base
    /// cannot import yet.
    pub unconfirmed: Vec<String>,
}

/// Runs the dry run of `frozen` on `base`; `Err` names every mistake found.
pub(super) fn dry_run(
    backends: &Backends,
    dir: &std::path::Path,
    frozen: &FrozenSlice,
    base: &Base,
) -> Result<DryRun, AppError> {
    let plan = Plan::of(frozen);
    if plan.runs.is_empty() {
        return Ok(DryRun::default());
    }
    let request = trial_request(backends, frozen, base, Vec::new())?;
    let config = backends.config()?;
    let executor = backends.executor_of(&config)?;
    let protected = vec![
        dir.to_path_buf(),
        PathBuf::from(&base.repository.identity().path),
    ];
    let trial = Trial::new(executor, protected)
        .map_err(|error| AppError::coded(error.code(), "the dry run", error))?;
    let runs: Vec<(&ProcessCheck, TrialTree)> = plan
        .runs
        .iter()
        .map(|check| (*check, TrialTree::Base))
        .collect();
    let ran = trial
        .run(&request, &runs, &CancelToken::new())
        .map_err(|error| AppError::coded(error.code(), "the dry run", error))?;
    plan.grade(dir, &ran)
}

/// The trial of `frozen` on `base` (and on the base with `edits`): the base materialised in
/// the tree store, the checks' environments verified.
pub(crate) fn trial_request(
    backends: &Backends,
    frozen: &FrozenSlice,
    base: &Base,
    edits: Vec<EditedEntry>,
) -> Result<TrialRequest, AppError> {
    let store = EnvironmentStore::open(&backends.tree_store_dir()?)
        .map_err(|error| AppError::coded(error.code(), "the tree store", error))?;
    let trees = trial_trees(&base.repository, &base.commit, frozen, edits, &store)
        .map_err(|error| AppError::coded(error.code(), &base.named, error))?;
    let environments = frozen.acceptance.environments();
    let environments = match environments.is_empty() {
        true => BTreeMap::new(),
        false => verified_trees_in(&backends.environment_store_dir()?, environments)?,
    };
    Ok(TrialRequest {
        slice: frozen.clone(),
        trees,
        deadline: SystemTime::now() + DRY_RUN_TIME,
        environments,
        capabilities: crate::capabilities::staged_for_run(backends, &frozen.acceptance),
    })
}

/// Which checks run on the base, and which share another's run.
struct Plan<'s> {
    /// Every check the dry run covers, in acceptance order, with the index of the run that
    /// answers for it.
    covered: Vec<(&'s ProcessCheck, usize)>,
    /// The runs to make.
    runs: Vec<&'s ProcessCheck>,
}

impl<'s> Plan<'s> {
    /// Base-stage checks each run; a candidate-stage check with test lists shares the run of
    /// a check that runs the same thing on the same input, or runs itself.
    fn of(frozen: &'s FrozenSlice) -> Self {
        let mut plan = Plan {
            covered: Vec::new(),
            runs: Vec::new(),
        };
        for check in frozen.acceptance.process_checks() {
            let listed = !check.expectation.tests().is_empty();
            if check.stage == Stage::Candidate && !listed {
                continue;
            }
            let same = plan
                .runs
                .iter()
                .position(|run| run.input == check.input && run.run == check.run);
            let at = same.unwrap_or_else(|| {
                plan.runs.push(check);
                plan.runs.len() - 1
            });
            plan.covered.push((check, at));
        }
        plan
    }

    /// Grades every covered check from its run; `Err` names every mistake.
    fn grade(&self, dir: &std::path::Path, ran: &[TrialRun]) -> Result<DryRun, AppError> {
        let mut mistakes = Vec::new();
        let mut found = DryRun::default();
        for (check, at) in &self.covered {
            let run = &ran[*at];
            let shared_with = (run.check != check.id).then(|| run.check.clone());
            let TrialOutcome::Ran {
                process,
                stdout,
                results,
                problems,
                ..
            } = &run.outcome
            else {
                mistakes.push(format!(
                    "check {} could not run on the base, so every Candidate would be \
                     Inconclusive: {}",
                    check.id,
                    not_run(&run.outcome)
                ));
                continue;
            };
            if !problems.is_empty() {
                mistakes.push(format!(
                    "check {}'s run on the base would not be attributable, so every Candidate \
                     would be Inconclusive: {}",
                    check.id,
                    problems.join("; ")
                ));
                continue;
            }
            let reported = reported(results.as_ref());
            if check.stage == Stage::Base {
                match grade_trial(check, process, stdout, results.as_ref()) {
                    Ok(misses) if misses.is_empty() => {}
                    Ok(misses) => mistakes.push(format!(
                        "check {} misses on the base, so every Candidate would be Failed: {}",
                        check.id,
                        misses.join("; ")
                    )),
                    Err(why) => mistakes.push(format!(
                        "check {} cannot be decided on the base, so every Candidate would be \
                         Inconclusive: {why}",
                        check.id
                    )),
                }
            }
            if let Some(reported) = &reported {
                self.unreported(check, reported, &mut mistakes, &mut found.unconfirmed);
            }
            found.checks.push(DryRunCheck {
                check: check.id.clone(),
                stage: check.stage,
                exit_code: process.exit_code,
                tests: reported.as_ref().map(|reported| reported.ids.len()),
                wall_ms: process.wall_ms,
                shared_with,
            });
        }
        if mistakes.is_empty() {
            return Ok(found);
        }
        Err(AppError::coded(
            "invalid-input",
            format!("the Slice in {}", dir.display()),
            format!(
                "its dry run on the base found {} mistake(s), and nothing was frozen: {}; fix \
                 the Slice (or freeze with --no-dry-run where the base cannot run here)",
                mistakes.len(),
                mistakes.join(" | ")
            ),
        ))
    }

    /// Adds a mistake for each id `check` lists that `reported` does not hold, naming the
    /// closest reported ids; a candidate-stage check's id is only unconfirmed when the run
    /// reported an error (the base may fail to import the module that holds it).
    fn unreported(
        &self,
        check: &ProcessCheck,
        reported: &Reported,
        mistakes: &mut Vec<String>,
        unconfirmed: &mut Vec<String>,
    ) {
        let tests = check.expectation.tests();
        let listed = [
            ("failToPass", &tests.fail_to_pass),
            ("passToPass", &tests.pass_to_pass),
        ];
        for (list, ids) in listed {
            for id in ids.iter().filter(|id| !reported.ids.contains(id.as_str())) {
                if check.stage == Stage::Candidate && reported.errored {
                    unconfirmed.push(format!("{id} ({} {list})", check.id));
                    continue;
                }
                let closest = closest(id, &reported.ids);
                let hint = match closest.is_empty() {
                    true => "no reported id is close to it".to_owned(),
                    false => format!("did you mean {}?", closest.join(" or ")),
                };
                mistakes.push(format!(
                    "check {} lists {list} test {id}, which the base run does not report: \
                     {hint}",
                    check.id
                ));
            }
        }
    }
}

/// The test ids one run reported, and whether any test errored.
struct Reported {
    ids: BTreeSet<String>,
    errored: bool,
}

/// The ids `results` reports, when it holds results that parse.
fn reported(results: Option<&CapturedResults>) -> Option<Reported> {
    let Some(CapturedResults::Written(bytes)) = results else {
        return None;
    };
    let parsed: TestResults = TestResults::parse_junit(bytes).ok()?;
    Some(Reported {
        errored: parsed
            .cases
            .iter()
            .any(|case| case.outcome == TestOutcome::Error),
        ids: parsed.cases.into_iter().map(|case| case.id).collect(),
    })
}

/// Why a run did not run, in words.
fn not_run(outcome: &TrialOutcome) -> String {
    match outcome {
        TrialOutcome::NotStarted(why) => format!("it was not started: {why}"),
        TrialOutcome::Unresolved(why) => why.clone(),
        TrialOutcome::Ran { .. } => "it ran".to_owned(),
    }
}

/// The reported ids closest to `id` by edit distance: those at the least distance (at most
/// [`SUGGESTIONS`] of them), when it is within half of `id`'s length.
fn closest(id: &str, reported: &BTreeSet<String>) -> Vec<String> {
    let most = id.chars().count().div_ceil(2);
    let near: Vec<(usize, &String)> = reported
        .iter()
        .map(|other| (strsim::levenshtein(id, other), other))
        .filter(|(distance, _)| *distance <= most)
        .collect();
    let Some(least) = near.iter().map(|(distance, _)| *distance).min() else {
        return Vec::new();
    };
    near.into_iter()
        .filter(|(distance, _)| *distance == least)
        .take(SUGGESTIONS)
        .map(|(_, other)| other.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_closest_ids_are_named_and_far_ones_never() {
        let reported: BTreeSet<String> = [
            "tests.test_basic::test_choice_argument_optional_metavar",
            "tests.test_basic::test_choice_argument",
            "tests.test_other::test_unrelated_thing_entirely",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(
            closest(
                "tests.test_basic::test_choice_argument_optional_metavr",
                &reported
            ),
            vec!["tests.test_basic::test_choice_argument_optional_metavar".to_owned()]
        );
        // Ids as close as each other are all named.
        let twins: BTreeSet<String> = ["t::a1", "t::a2", "t::zz"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(
            closest("t::a", &twins),
            vec!["t::a1".to_owned(), "t::a2".to_owned()]
        );
        // A pytest node id in the path form is close to the JUnit id it names.
        assert_eq!(
            closest("tests/test_basic.py::test_choice_argument", &reported)[0],
            "tests.test_basic::test_choice_argument"
        );
        assert!(closest("zzz", &reported).is_empty());
    }
}
