//! `RepositoryCollector::with_jobs`: checks run concurrently on the real sandbox, still one
//! run and one record per check, listed in acceptance order, with the same Verdict as one at
//! a time; a gate that closes stops every later launch; a record that cannot be stored stops
//! every later put; the hold ending stops everything.
//!
//! How many runs were inside the executor at once is counted by a wrapper around the real
//! executor that holds each run until a second one arrives (or a generous wait passes): with
//! two jobs both runs are inside together, with one job never.

mod collector_support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use collector_support::*;
use sf_host::assurance::Outcome;
use sf_host::collector::{CollectEvent, RunState};
use sf_host::contracts::{
    CancelToken, Executor, ExecutorError, ProfileDescription, RunAnswer, RunRequest,
    RuntimeDescription,
};

/// The real executor, counting the runs inside it at once; each run waits (up to `wait`)
/// for another to be inside too before it goes on.
struct Meeting {
    inner: Arc<dyn Executor>,
    wait: Duration,
    inside: Mutex<usize>,
    arrived: Condvar,
    most: AtomicUsize,
}

/// Long enough for a second job to arrive on a loaded machine.
const MEET_WAIT: Duration = Duration::from_secs(20);

impl Meeting {
    fn new(inner: Arc<dyn Executor>, wait: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner,
            wait,
            inside: Mutex::new(0),
            arrived: Condvar::new(),
            most: AtomicUsize::new(0),
        })
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

impl Executor for Meeting {
    fn describe_runtime(&self) -> Result<RuntimeDescription, ExecutorError> {
        self.inner.describe_runtime()
    }

    fn profile(&self) -> Result<ProfileDescription, ExecutorError> {
        self.inner.profile()
    }

    fn run(&self, request: &RunRequest, cancel: &CancelToken) -> Result<RunAnswer, ExecutorError> {
        {
            let mut inside = self.inside.lock().unwrap();
            *inside += 1;
            self.most.fetch_max(*inside, Ordering::SeqCst);
            self.arrived.notify_all();
            let _ = self
                .arrived
                .wait_timeout_while(inside, self.wait, |inside| *inside < 2)
                .unwrap();
        }
        let answer = self.inner.run(request, cancel);
        *self.inside.lock().unwrap() -= 1;
        answer
    }
}

fn jobs(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

#[test]
fn two_jobs_run_checks_together_and_record_what_one_job_records() {
    let scenario = Scenario::real();
    let meeting = Meeting::new(sandbox(), MEET_WAIT);
    let collector = scenario.collector_over(meeting.clone()).with_jobs(jobs(2));
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let mut events = Vec::new();
    let result = collector
        .collect_with_progress(&request, proceed(), &hold, &cancel(), &mut |event| {
            events.push(match event {
                CollectEvent::Started { check } => format!("start {check}"),
                CollectEvent::Settled { run, .. } => format!("end {}", run.check),
            })
        })
        .unwrap();
    assert_eq!(
        meeting.most(),
        2,
        "two runs were inside the executor at once"
    );
    assert!(result.may_judge(), "{result:?}");
    let checks: Vec<&str> = result.runs.iter().map(|run| run.check.as_str()).collect();
    assert_eq!(
        checks,
        ["bug-shown", "bug-fixed", "empty-base", "empty-candidate"],
        "listed in acceptance order"
    );
    assert!(
        result
            .runs
            .iter()
            .all(|run| run.state == RunState::Observed)
    );
    assert_eq!(result.evidence.len(), 4, "one record per check");
    assert_eq!(
        result.evidence,
        result
            .runs
            .iter()
            .map(|run| run.evidence.clone().unwrap())
            .collect::<Vec<_>>(),
        "the records in acceptance order"
    );
    assert_eq!(events.len(), 8, "{events:?}");
    for check in checks {
        let start = events.iter().position(|e| *e == format!("start {check}"));
        let end = events.iter().position(|e| *e == format!("end {check}"));
        assert!(start < end && start.is_some(), "{check}: {events:?}");
    }
    let verdict = scenario.judge(&request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Verified, "{verdict:#?}");
    hold.release();

    // The same Candidate, one job: never two runs at once (each run waits a second for a
    // second one that never comes), the same Verdict.
    let single = Meeting::new(sandbox(), Duration::from_secs(1));
    let collector = scenario.collector_over(single.clone());
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    collector
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    assert_eq!(single.most(), 1, "one job runs one check at a time");
    let again = scenario.judge(&request, hold.attempt());
    assert_eq!(again.outcome, Outcome::Verified);
    assert_eq!(
        again
            .checks
            .iter()
            .map(|check| (check.check.clone(), check.met))
            .collect::<Vec<_>>(),
        verdict
            .checks
            .iter()
            .map(|check| (check.check.clone(), check.met))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_gate_that_closes_stops_every_later_launch_of_every_job() {
    let scenario = Scenario::real();
    let reads = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&reads);
    // The gate proceeds twice, then refuses.
    let gate: Arc<dyn sf_host::contracts::Gate> = Arc::new(FnGate(move |_| {
        if counted.fetch_add(1, Ordering::SeqCst) < 2 {
            Ok(sf_host::contracts::GateAnswer::Proceed)
        } else {
            Ok(sf_host::contracts::GateAnswer::Refuse {
                reason: "closed for the night".into(),
            })
        }
    }));
    let collector = scenario
        .collector_over(Meeting::new(sandbox(), MEET_WAIT))
        .with_jobs(jobs(2));
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = collector.collect(&request, gate, &hold, &cancel()).unwrap();
    let states: Vec<RunState> = result.runs.iter().map(|run| run.state).collect();
    assert_eq!(
        states,
        [
            RunState::Observed,
            RunState::Observed,
            RunState::NotStarted,
            RunState::NotStarted
        ],
        "{result:?}"
    );
    assert!(result.runs[3].problems[0].contains("closed for the night"));
    assert_eq!(
        reads.load(Ordering::SeqCst),
        3,
        "the gate is not asked again once closed"
    );
    assert_eq!(
        result.evidence.len(),
        4,
        "a not-started check is still recorded"
    );
}

#[test]
fn a_hold_that_ends_stops_every_job() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);
    let hold = Arc::new(scenario.fence.acquire(&request.sealed.digest).unwrap());
    let faulty = Faulty::new(sandbox(), Fault::ReleaseHold(Arc::clone(&hold)));
    let collector = scenario.collector_over(faulty.clone()).with_jobs(jobs(3));
    let error = collector
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap_err();
    assert_eq!(error.code(), "released", "{error}");
    let sf_host::collector::CollectError::Released { stored, .. } = error else {
        unreachable!()
    };
    assert!(stored.is_empty(), "nothing is stored once the hold ended");
    assert!(faulty.runs() <= 3, "no job launches after the hold ended");
    assert_eq!(scenario.records(), 0);
}

#[test]
fn a_put_that_fails_stops_every_later_launch_and_put() {
    let scenario = Scenario::real();
    let mut mock = sf_sdk::mocks::MockEvidenceStore::new();
    mock.expect_put().returning(|_, _| {
        Err(sf_host::contracts::EvidenceStoreError::Unavailable {
            reason: "injected: the disk is full".into(),
        })
    });
    let store: Arc<dyn sf_host::contracts::EvidenceStore> = Arc::new(mock);
    let meeting = Meeting::new(sandbox(), MEET_WAIT);
    let collector =
        sf_host::collector::RepositoryCollector::new(store, meeting.clone(), scenario.protected())
            .unwrap()
            .with_jobs(jobs(2));
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = collector
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    let states: Vec<RunState> = result.runs.iter().map(|run| run.state).collect();
    // The two runs in flight together both end storage-failed (one put failed, the other
    // failed or was never tried); the checks after them never start.
    assert_eq!(
        states,
        [
            RunState::StorageFailed,
            RunState::StorageFailed,
            RunState::NotStarted,
            RunState::NotStarted
        ],
        "{result:?}"
    );
    assert_eq!(meeting.most(), 2);
    assert!(result.evidence.is_empty());
    assert!(!result.may_judge());
}
