//! The test lists of a suggested Slice, from K runs on the base and K with the fix: a test
//! whose runs on one tree disagree is flaky and in no list; FAIL_TO_PASS are the tests that
//! fail or error on every base run and pass on every run with the fix, PASS_TO_PASS those
//! that pass on every run of both. Without a fix, FAIL_TO_PASS are the tests that fail on
//! every base run and PASS_TO_PASS those that pass on every one. Every other test is left
//! out, with the reason.

use std::collections::{BTreeMap, BTreeSet};

use sf_host::assurance::test_results::TestOutcome;

/// One run's results: each test id's worst outcome.
pub(super) type RunResults = BTreeMap<String, TestOutcome>;

/// The lists, and what was left out of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lists {
    /// Fail or error on the base, pass with the fix.
    pub fail_to_pass: Vec<String>,
    /// Pass on both.
    pub pass_to_pass: Vec<String>,
    /// Runs on one tree disagree.
    pub flaky: Vec<String>,
    /// In no list for another reason: the id and the reason.
    pub left_out: Vec<(String, String)>,
    /// The tests the checks must not run: flaky, or not passing with the fix (they would
    /// make the exit code of the checks that expect every test to pass a matter of chance,
    /// or a certain miss).
    pub deselected: Vec<String>,
}

/// How one test ended on every run of a tree: `None` when the runs disagree (flaky);
/// `Some(None)` when no run reported it.
fn consistent(runs: &[RunResults], id: &str) -> Option<Option<TestOutcome>> {
    let mut outcomes = runs.iter().map(|run| run.get(id).copied());
    let first = outcomes.next()?;
    outcomes.all(|outcome| outcome == first).then_some(first)
}

fn fails(outcome: Option<TestOutcome>) -> bool {
    matches!(outcome, Some(TestOutcome::Failed | TestOutcome::Error))
}

/// The lists from `base` runs and, with a fix, `fixed` runs (each at least one run).
pub(super) fn classify(base: &[RunResults], fixed: Option<&[RunResults]>) -> Lists {
    let ids: BTreeSet<&String> = base
        .iter()
        .chain(fixed.unwrap_or_default())
        .flat_map(|run| run.keys())
        .collect();
    let mut lists = Lists::default();
    for id in ids {
        let on_base = consistent(base, id);
        let on_fix = fixed.map(|runs| consistent(runs, id));
        let (Some(b), Some(f)) = (on_base, on_fix.unwrap_or(Some(None))) else {
            lists.flaky.push(id.clone());
            lists.deselected.push(id.clone());
            continue;
        };
        let passed = Some(TestOutcome::Passed);
        let why = match fixed {
            None if fails(b) => {
                lists.fail_to_pass.push(id.clone());
                continue;
            }
            None if b == passed => {
                lists.pass_to_pass.push(id.clone());
                continue;
            }
            None => "skipped on the base",
            Some(_) if fails(b) && f == passed => {
                lists.fail_to_pass.push(id.clone());
                continue;
            }
            Some(_) if b == passed && f == passed => {
                lists.pass_to_pass.push(id.clone());
                continue;
            }
            Some(_) if f == passed && b.is_none() => {
                "not reported on the base (its file may not import there), so it cannot be a \
                 FAIL_TO_PASS test the base run shows failing"
            }
            Some(_) if fails(f) && b == passed => "passes on the base but not with the fix",
            Some(_) if fails(f) => "fails on the base and with the fix",
            Some(_) if f.is_none() => "not reported with the fix",
            Some(_) => "skipped",
        };
        if fixed.is_some() && (fails(f) || (f.is_none() && fails(b))) {
            lists.deselected.push(id.clone());
        }
        lists.left_out.push((id.clone(), why.to_owned()));
    }
    lists
}

/// The exit code a run of `runs`' tree gives once `deselected` are left out: 1 when a test
/// that still runs fails or errors on it, else 0 (every runner here exits so).
pub(super) fn exit_code(runs: &[RunResults], deselected: &[String]) -> i32 {
    let fails = runs.iter().any(|run| {
        run.iter()
            .any(|(id, outcome)| fails(Some(*outcome)) && !deselected.contains(id))
    });
    i32::from(fails)
}

#[cfg(test)]
mod tests {
    use super::*;
    use TestOutcome::{Error, Failed, Passed, Skipped};

    fn run(outcomes: &[(&str, TestOutcome)]) -> RunResults {
        outcomes
            .iter()
            .map(|(id, o)| ((*id).to_owned(), *o))
            .collect()
    }

    #[test]
    fn runs_are_classified_as_the_lists_say() {
        let base = vec![
            run(&[
                ("f2p", Failed),
                ("err", Error),
                ("p2p", Passed),
                ("flaky", Passed),
                ("both", Failed),
                ("broken", Passed),
                ("skip", Skipped),
            ]),
            run(&[
                ("f2p", Failed),
                ("err", Error),
                ("p2p", Passed),
                ("flaky", Failed),
                ("both", Failed),
                ("broken", Passed),
                ("skip", Skipped),
            ]),
        ];
        let fixed = vec![
            run(&[
                ("f2p", Passed),
                ("err", Passed),
                ("p2p", Passed),
                ("flaky", Passed),
                ("both", Failed),
                ("broken", Failed),
                ("skip", Skipped),
                ("new", Passed),
            ]),
            run(&[
                ("f2p", Passed),
                ("err", Passed),
                ("p2p", Passed),
                ("flaky", Passed),
                ("both", Failed),
                ("broken", Failed),
                ("skip", Skipped),
                ("new", Passed),
            ]),
        ];
        let lists = classify(&base, Some(&fixed));
        assert_eq!(lists.fail_to_pass, ["err", "f2p"]);
        assert_eq!(lists.pass_to_pass, ["p2p"]);
        assert_eq!(lists.flaky, ["flaky"]);
        let left: Vec<&str> = lists.left_out.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(left, ["both", "broken", "new", "skip"]);
        assert_eq!(lists.deselected, ["both", "broken", "flaky"]);
        // Without what was left out, the base still fails (the FAIL_TO_PASS tests) and the
        // fix passes.
        assert_eq!(exit_code(&base, &lists.deselected), 1);
        assert_eq!(exit_code(&fixed, &lists.deselected), 0);
    }

    #[test]
    fn a_test_seen_on_one_run_only_is_flaky() {
        let base = vec![run(&[("a", Failed)]), run(&[])];
        let lists = classify(&base, None);
        assert_eq!(lists.flaky, ["a"]);
        assert!(lists.fail_to_pass.is_empty());
    }

    #[test]
    fn without_a_fix_the_base_decides() {
        let base = vec![run(&[("a", Failed), ("b", Passed), ("c", Skipped)])];
        let lists = classify(&base, None);
        assert_eq!(lists.fail_to_pass, ["a"]);
        assert_eq!(lists.pass_to_pass, ["b"]);
        assert_eq!(lists.left_out.len(), 1);
        assert!(lists.deselected.is_empty());
    }
}
