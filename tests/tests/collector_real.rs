//! The collector and the judge end to end on real components: the real git binary, real
//! sandboxed runs (sf-sandbox-exec, `/bin/sh`), a real SQLite evidence file, a real fence and
//! snapshot store.

mod collector_support;

use std::sync::Arc;

use collector_support::*;
use sf_host::assurance::{Observation, ObservationStatus, Outcome};
use sf_host::collector::RunState;
use sf_host::contracts::EvidenceStore;
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::gate::FileGate;

fn deadline() -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_secs(60)
}

/// A Candidate that fixes the bug: the before check fails on the base as expected, the after
/// check passes on the Candidate, the guardrail passes on both: Verified. Each process check
/// ran exactly once and left exactly one record, counted in the SQLite file (reopened).
#[test]
fn a_fix_is_verified_and_a_non_fix_is_failed() {
    let scenario = Scenario::real();
    let gate_file = scenario.root.join("gate.json");
    std::fs::write(&gate_file, br#"{"proceed":true}"#).unwrap();
    let gate: Arc<dyn sf_host::contracts::Gate> = Arc::new(FileGate::new(&gate_file));
    let collector = scenario.collector();

    let fixed = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&fixed.sealed.digest).unwrap();
    let result = collector
        .collect(&fixed, gate.clone(), &hold, &cancel())
        .unwrap();
    assert!(result.may_judge(), "{result:?}");
    assert_eq!(
        result
            .runs
            .iter()
            .map(|run| run.check.as_str())
            .collect::<Vec<_>>(),
        ["bug-shown", "bug-fixed", "empty-base", "empty-candidate"],
        "one run per process check, in acceptance order; the review check never runs"
    );
    for run in &result.runs {
        assert_eq!(run.state, RunState::Observed, "{run:?}");
        assert!(run.problems.is_empty(), "{run:?}");
        assert_eq!(
            run.identities
                .as_ref()
                .unwrap()
                .enforcement
                .status("landlock"),
            Some("fully-enforced")
        );
    }
    let verdict = scenario.judge(&fixed, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Verified, "{verdict:#?}");
    assert!(verdict.checks.iter().all(|check| check.met == Some(true)));
    // One record per run, counted in the store: four runs, four records.
    assert_eq!(result.evidence.len(), 4);
    assert_eq!(scenario.records(), 4);
    let reopened = SqliteEvidenceStore::open(&scenario.evidence_path).unwrap();
    assert_eq!(reopened.count().unwrap(), 4);
    assert_eq!(
        reopened.find(&result.pins, deadline()).unwrap(),
        result.evidence
    );
    // The before check's record shows the base's wrong sum; the after check's the fix.
    let observation = |index: usize| {
        let record = reopened.get(&result.evidence[index], deadline()).unwrap();
        Observation::decode(record.payload()).unwrap()
    };
    assert_eq!(observation(0).stdout, b"wrong: 5\n");
    assert_eq!(
        observation(0).facts.process.as_ref().unwrap().exit_code,
        Some(1)
    );
    assert_eq!(observation(1).stdout, b"ok\n");
    assert_eq!(observation(1).facts.status, ObservationStatus::Observed);
    let first_attempt = hold.attempt().clone();
    hold.release();

    // A Candidate that does not fix it: Failed, under a new attempt.
    let unfixed = scenario.request(SUM_STILL_BUGGY);
    let hold = scenario.fence.acquire(&unfixed.sealed.digest).unwrap();
    assert_eq!(hold.attempt().epoch, 2);
    let result = collector.collect(&unfixed, gate, &hold, &cancel()).unwrap();
    assert!(result.may_judge());
    let verdict = scenario.judge(&unfixed, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Failed, "{verdict:#?}");
    let after = verdict
        .checks
        .iter()
        .find(|c| c.check == "bug-fixed")
        .unwrap();
    assert_eq!(after.met, Some(false));
    assert!(
        after
            .problems
            .iter()
            .any(|p| p.contains("exit code 1, expected 0")),
        "{after:?}"
    );
    for guard in ["bug-shown", "empty-base", "empty-candidate"] {
        let check = verdict.checks.iter().find(|c| c.check == guard).unwrap();
        assert_eq!(check.met, Some(true), "{check:?}");
    }
    assert_eq!(scenario.records(), 8);
    // Records are judged per attempt: the first attempt's still judge Verified under their
    // own attempt, and count for nothing under the second.
    assert_eq!(
        scenario.judge(&fixed, &first_attempt).outcome,
        Outcome::Verified
    );
    assert_eq!(
        scenario.judge(&fixed, &result.attempt).outcome,
        Outcome::Inconclusive
    );
}
