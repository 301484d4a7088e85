//! The sandbox's own limits are never the Candidate's failure, end to end through the
//! collector and the judge on real components (the real sandbox with `/bin/sh`, a real
//! SQLite file): a correct fix whose runs start more processes than the sandbox's process
//! limit allows is recorded with that limit named and judged Inconclusive, never Failed. The
//! controls: the same fix under limits it fits is Verified, and a Candidate that does not fix
//! the bug is still Failed under the tight limit (which it does not hit).

mod collector_support;

use collector_support::*;
use sf_host::assurance::{Observation, Outcome, Verdict};
use sf_host::collector::{CollectRequest, CollectResult, RunState};
use sf_host::contracts::{EvidenceStore, Limit};
use sf_sandbox_exec::Limits;

/// The fix, which first starts twenty background workers (as a test module starts its
/// threads): correct, and more processes than a limit of 12 allows.
const SUM_FIXED_WITH_WORKERS: &str = "i=0\nwhile [ $i -lt 20 ]; do\n  sleep 1 </dev/null \
     >/dev/null 2>&1 &\n  i=$((i + 1))\ndone\ntotal=0\nwhile read -r n; do\n  total=$((total + \
     n))\ndone < \"$1\"\necho \"$total\"\n";

fn tight() -> Limits {
    Limits {
        processes: 12,
        ..Limits::default()
    }
}

#[test]
fn a_fix_that_hits_the_process_limit_is_inconclusive_never_failed() {
    let scenario = Scenario::new(sandbox_with(tight()), Options::default());
    let request = scenario.request(SUM_FIXED_WITH_WORKERS);
    let (result, verdict) = collect_and_judge(&scenario, &request);
    let run = result
        .runs
        .iter()
        .find(|run| run.check == "bug-fixed")
        .unwrap();
    assert_eq!(run.state, RunState::Observed, "{run:?}");
    assert_eq!(run.limits_hit.len(), 1, "{run:?}");
    assert_eq!(run.limits_hit[0].limit(), Limit::Processes);
    assert_eq!(run.limits_hit[0].value(), 12);
    assert!(
        run.problems
            .iter()
            .any(|problem| problem.starts_with("the run hit the sandbox's process limit (12): ")),
        "{run:?}"
    );
    // The record says so, and shows that the program itself failed for it: the sum was
    // never printed, so the check exited 1 (which, attributed, would be Failed).
    let record = scenario
        .store
        .get(run.evidence.as_ref().unwrap(), deadline())
        .unwrap();
    let observation = Observation::decode(record.payload()).unwrap();
    let process = observation.facts.process.as_ref().unwrap();
    assert_eq!(process.exit_code, Some(1), "{observation:?}");
    assert!(!observation.facts.attributable);
    let recorded = process.limits_hit.as_ref().unwrap();
    assert_eq!(recorded, &run.limits_hit);
    assert!(
        recorded[0].detail().contains("pids.events max"),
        "{recorded:?}"
    );

    assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
    for name in ["bug-fixed", "empty-candidate"] {
        let check = verdict.checks.iter().find(|c| c.check == name).unwrap();
        assert!(!check.attributable && check.met.is_none(), "{check:?}");
        assert!(
            check.problems[0].starts_with("the run hit the sandbox's process limit (12): "),
            "{check:?}"
        );
        assert_eq!(check.limits_hit[0].limit(), Limit::Processes);
    }
    // The base's runs start nothing in the background and hit nothing.
    for name in ["bug-shown", "empty-base"] {
        let check = verdict.checks.iter().find(|c| c.check == name).unwrap();
        assert_eq!(check.met, Some(true), "{check:?}");
        assert!(check.limits_hit.is_empty());
    }

    // Control: a Candidate that does not fix the bug hits nothing under the same limit, and
    // is Failed as before.
    let (_, verdict) = collect_and_judge(&scenario, &scenario.request(SUM_STILL_BUGGY));
    assert_eq!(verdict.outcome, Outcome::Failed, "{verdict:#?}");
    assert!(
        verdict
            .checks
            .iter()
            .all(|check| check.limits_hit.is_empty())
    );
}

/// Control: under limits it fits, the same fix is Verified (it is a correct fix; only the
/// limit made it fail above).
#[test]
fn the_same_fix_within_the_limits_is_verified() {
    let scenario = Scenario::new(sandbox(), Options::default());
    let (result, verdict) = collect_and_judge(&scenario, &scenario.request(SUM_FIXED_WITH_WORKERS));
    assert!(
        result.runs.iter().all(|run| run.limits_hit.is_empty()),
        "{result:?}"
    );
    assert_eq!(verdict.outcome, Outcome::Verified, "{verdict:#?}");
}

/// A Slice frozen under other limits (here the limits that were the defaults before these:
/// 64 processes, 4 GiB of address space, a 16 MiB scratch) pins their profile; an executor
/// with the current defaults runs none of its checks, naming the profile, and the Verdict is
/// Inconclusive: a Slice is never run under limits it was not frozen with.
#[test]
fn a_slice_frozen_under_other_limits_is_never_run_under_these() {
    let earlier = Limits {
        processes: 64,
        address_space_bytes: 4 << 30,
        file_size_bytes: 16 << 20,
        open_files: 256,
        cpu_seconds: 300,
        scratch_bytes: 16 << 20,
        scratch_inodes: 4096,
        ..Limits::default()
    };
    let scenario = Scenario::new(sandbox_with(earlier), Options::default());
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector_over(sandbox())
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    for run in &result.runs {
        assert_eq!(run.state, RunState::NotStarted, "{run:?}");
        assert!(
            run.problems[0].contains("the environment record differs from the pinned one: profile"),
            "{run:?}"
        );
    }
    let verdict = scenario.judge(&request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
}

/// Collects `request` under a new attempt and judges it.
fn collect_and_judge(scenario: &Scenario, request: &CollectRequest) -> (CollectResult, Verdict) {
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector()
        .collect(request, proceed(), &hold, &cancel())
        .unwrap();
    assert!(result.may_judge(), "{result:?}");
    let verdict = scenario.judge(request, hold.attempt());
    (result, verdict)
}

fn deadline() -> std::time::Instant {
    std::time::Instant::now() + std::time::Duration::from_secs(60)
}
