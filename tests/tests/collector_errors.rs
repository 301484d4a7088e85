//! Every collector error is Inconclusive, never Verified or Failed. Real components throughout (real git,
//! real sandboxed runs, a real SQLite file, a real fence); the executor is wrapped only to
//! inject a refusal, a panic or a relabelled answer, and the evidence store is a mockall fake
//! only for the put that fails.

mod collector_support;

use sf_host::collector::CollectTrees;

use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use collector_support::*;
use sf_host::assurance::Outcome;
use sf_host::collector::{CollectError, CollectResult, RunState};
use sf_host::contracts::{EvidenceStore, EvidenceStoreError, Gate, GateAnswer, GateError};
use sf_host::fence::Hold;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

/// Asserts every run is not-started with a problem containing `reason`, each with a record.
fn all_not_started(result: &CollectResult, reason: &str) {
    assert_eq!(result.runs.len(), 4);
    for run in &result.runs {
        assert_eq!(run.state, RunState::NotStarted, "{run:?}");
        assert!(
            run.evidence.is_some(),
            "a not-started run is recorded: {run:?}"
        );
        assert!(
            run.problems.iter().any(|problem| problem.contains(reason)),
            "{reason:?} not in {run:?}"
        );
    }
}

fn inconclusive(scenario: &Scenario, request: &sf_host::collector::CollectRequest, hold: &Hold) {
    let verdict = scenario.judge(request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
    assert!(!verdict.reasons.is_empty());
}

#[test]
fn gate_refuses() {
    let scenario = Scenario::real();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let gate: Arc<dyn Gate> = Arc::new(FnGate(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(GateAnswer::Refuse {
            reason: "release frozen".into(),
        })
    }));
    let executor = Faulty::new(scenario.executor.clone(), Fault::None);
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector_over(executor.clone())
        .collect(&request, gate, &hold, &cancel())
        .unwrap();
    all_not_started(&result, "the gate refused: release frozen");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the gate is not asked again"
    );
    assert_eq!(executor.runs(), 0);
    assert_eq!(scenario.records(), 4);
    inconclusive(&scenario, &request, &hold);
}

#[test]
fn gate_unreadable() {
    let scenario = Scenario::real();
    // The real file gate over a file that does not exist.
    let gate: Arc<dyn Gate> = Arc::new(sf_host::gate::FileGate::new(
        scenario.root.join("absent.json"),
    ));
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector()
        .collect(&request, gate, &hold, &cancel())
        .unwrap();
    all_not_started(&result, "the gate gave no answer (unavailable)");
    inconclusive(&scenario, &request, &hold);
}

#[test]
fn gate_answer_malformed_or_late() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    // A gate that says its deadline passed.
    let late: Arc<dyn Gate> = Arc::new(FnGate(|_| Err(GateError::Timeout)));
    let result = scenario
        .collector()
        .collect(&request, late, &hold, &cancel())
        .unwrap();
    all_not_started(&result, "the gate gave no answer (timeout)");
    inconclusive(&scenario, &request, &hold);
    drop(hold);

    // A gate still unanswered when the collection's deadline passes is abandoned.
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let stuck: Arc<dyn Gate> = Arc::new(FnGate(|deadline: std::time::Instant| {
        std::thread::sleep(
            deadline.saturating_duration_since(std::time::Instant::now())
                + Duration::from_millis(500),
        );
        Ok(GateAnswer::Proceed)
    }));
    let mut request = scenario.request(SUM_FIXED);
    request.deadline = SystemTime::now() + Duration::from_millis(800);
    let result = scenario
        .collector()
        .collect(&request, stuck, &hold, &cancel())
        .unwrap();
    all_not_started(&result, "the deadline passed while the gate was read");
    inconclusive(&scenario, &request, &hold);
}

#[test]
fn hold_released_before_a_run() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);
    let hold = Arc::new(scenario.fence.acquire(&request.sealed.digest).unwrap());
    let inside = hold.clone();
    // The hold ends while the gate is read: the assertion after the gate read stops it.
    let gate: Arc<dyn Gate> = Arc::new(FnGate(move |_| {
        inside.release();
        Ok(GateAnswer::Proceed)
    }));
    let executor = Faulty::new(scenario.executor.clone(), Fault::None);
    let error = scenario
        .collector_over(executor.clone())
        .collect(&request, gate, &hold, &cancel())
        .unwrap_err();
    assert_eq!(error.code(), "released", "{error}");
    assert!(matches!(&error, CollectError::Released { stored, .. } if stored.is_empty()));
    assert_eq!(executor.runs(), 0, "nothing started");
    assert_eq!(scenario.records(), 0, "nothing stored");
    inconclusive(&scenario, &request, &hold);
}

/// The hold ends after the second run: the first run's record stands, and the error lists
/// it; the second run's is never stored.
#[test]
fn a_released_error_lists_the_records_stored_before_it() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);
    let hold = Arc::new(scenario.fence.acquire(&request.sealed.digest).unwrap());
    let executor = Faulty::new(
        scenario.executor.clone(),
        Fault::ReleaseHoldOnRun(hold.clone(), 2),
    );
    let error = scenario
        .collector_over(executor.clone())
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap_err();
    assert_eq!(error.code(), "released", "{error}");
    let CollectError::Released { stored, .. } = &error else {
        unreachable!()
    };
    assert_eq!(stored.len(), 1, "{error}");
    assert_eq!(scenario.records(), 1);
    let shown = error.to_string();
    assert!(
        shown.contains("1 record(s) stored before it") && shown.contains(&stored[0].to_string()),
        "{shown}"
    );
    assert_eq!(executor.runs(), 2, "nothing started after the hold ended");
}

#[test]
fn hold_released_before_a_put() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);
    let hold = Arc::new(scenario.fence.acquire(&request.sealed.digest).unwrap());
    let executor = Faulty::new(scenario.executor.clone(), Fault::ReleaseHold(hold.clone()));
    let error = scenario
        .collector_over(executor.clone())
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap_err();
    assert_eq!(error.code(), "released");
    assert_eq!(
        executor.runs(),
        1,
        "the run completed; nothing further started"
    );
    assert_eq!(scenario.records(), 0, "its record was not stored");
    inconclusive(&scenario, &request, &hold);
    // The next attempt takes the fence with a higher epoch.
    assert_eq!(
        scenario
            .fence
            .acquire(&request.sealed.digest)
            .unwrap()
            .attempt()
            .epoch,
        2
    );
}

#[test]
fn deadline_passed() {
    let scenario = Scenario::real();
    let mut request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    request.deadline = SystemTime::now() - Duration::from_secs(1);
    let executor = Faulty::new(scenario.executor.clone(), Fault::None);
    let result = scenario
        .collector_over(executor.clone())
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    all_not_started(&result, "the deadline passed");
    assert_eq!(executor.runs(), 0);
    inconclusive(&scenario, &request, &hold);
}

#[test]
fn placement_problem_found_before_a_launch() {
    let scenario = Scenario::real();
    // A protected path that is not readable at construction…
    let later = scenario.root.join("later");
    let mut protected = scenario.protected();
    protected.push(later.join("secrets"));
    let executor = Faulty::new(scenario.executor.clone(), Fault::None);
    let collector = sf_host::collector::RepositoryCollector::new(
        scenario.store.clone(),
        executor.clone(),
        protected,
    )
    .unwrap();
    // …becomes readable before the collection: its parent is now a name of /usr/lib.
    std::os::unix::fs::symlink("/usr/lib", &later).unwrap();
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = collector
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    all_not_started(&result, "a protected path is readable under the runtime");
    assert_eq!(executor.runs(), 0);
    inconclusive(&scenario, &request, &hold);
}

#[test]
fn runtime_changed() {
    // A runtime whose executable is a copy of /bin/sh that can be changed for real.
    let public = tempfile::Builder::new()
        .prefix("sf-runtime-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(public.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let shell = public.path().canonicalize().unwrap().join("sh");
    std::fs::copy("/bin/sh", &shell).unwrap();
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config =
        SandboxConfig::new(RuntimeConfig::with_libraries(&shell, &["/usr/bin", "/bin"]));
    config.launcher = Some(launcher().to_path_buf());
    let executor = Arc::new(SandboxExecutor::new(config).unwrap());
    let scenario = Scenario::new(executor, Options::default());
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    // The runtime is upgraded after the environment was frozen.
    let mut bytes = std::fs::read(&shell).unwrap();
    bytes.push(0);
    std::fs::write(&shell, bytes).unwrap();
    let result = scenario
        .collector()
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    all_not_started(
        &result,
        "the environment record differs from the pinned one",
    );
    assert!(
        !result.may_judge() || result.environment_before != Some(request.slice.environment.clone())
    );
    inconclusive(&scenario, &request, &hold);
}

#[test]
fn executor_refuses_or_panics() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);

    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let refusing = Faulty::new(scenario.executor.clone(), Fault::Refuse);
    let result = scenario
        .collector_over(refusing.clone())
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    all_not_started(&result, "the executor refused (unavailable)");
    assert_eq!(
        refusing.runs(),
        4,
        "at most one process per check, no retry"
    );
    inconclusive(&scenario, &request, &hold);
    drop(hold);

    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let panicking = Faulty::new(scenario.executor.clone(), Fault::Panic);
    let result = scenario
        .collector_over(panicking.clone())
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    assert!(
        result
            .runs
            .iter()
            .all(|run| run.state == RunState::Unresolved
                && run.evidence.is_some()
                && run.problems[0].contains("the executor panicked"))
    );
    assert_eq!(panicking.runs(), 4);
    inconclusive(&scenario, &request, &hold);
}

#[test]
fn run_timed_out() {
    let scenario = Scenario::new(
        sandbox(),
        Options {
            timeout_ms: 1_500,
            ..Options::default()
        },
    );
    let request = scenario.request("while :; do :; done\n");
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector()
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    let after = result
        .runs
        .iter()
        .find(|run| run.check == "bug-fixed")
        .unwrap();
    assert_eq!(after.state, RunState::Observed);
    assert!(
        after
            .problems
            .iter()
            .any(|p| p.contains("the run was stopped (timed-out)")),
        "{after:?}"
    );
    let verdict = scenario.judge(&request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
    let check = verdict
        .checks
        .iter()
        .find(|c| c.check == "bug-fixed")
        .unwrap();
    assert!(!check.attributable && check.met.is_none());
}

#[test]
fn output_limit() {
    let scenario = Scenario::real();
    // 256 KiB on stdout against a 64 KiB limit.
    let flood = "s=xxxxxxxxxxxxxxxx\ni=0\nwhile [ $i -lt 14 ]; do s=\"$s$s\"; i=$((i + 1)); done\necho \"$s\"\n";
    let request = scenario.request(flood);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector()
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    let guard = result
        .runs
        .iter()
        .find(|run| run.check == "empty-candidate")
        .unwrap();
    assert!(
        guard
            .problems
            .iter()
            .any(|p| p.contains("the run was stopped (output-limit)")),
        "{guard:?}"
    );
    let verdict = scenario.judge(&request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
}

#[test]
fn identities_differ_from_the_pins() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let relabelling = Faulty::new(scenario.executor.clone(), Fault::Relabel);
    let result = scenario
        .collector_over(relabelling)
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    for run in &result.runs {
        assert_eq!(run.state, RunState::Observed);
        assert!(
            run.problems
                .iter()
                .any(|p| p.contains("the executor reports program")),
            "{run:?}"
        );
    }
    let verdict = scenario.judge(&request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
    assert!(
        verdict
            .checks
            .iter()
            .all(|c| c.problems.iter().any(|p| p.contains("program")))
    );
}

/// The second put fails: that run is storage-failed, nothing further is started or stored,
/// later checks are not-started without a record, and no Verdict may be issued.
#[test]
fn evidence_put_fails() {
    let scenario = Scenario::real();
    let real = scenario.store.clone();
    let puts = Arc::new(AtomicUsize::new(0));
    let mut mock = sf_sdk::mocks::MockEvidenceStore::new();
    let counter = puts.clone();
    mock.expect_put().returning(move |record, deadline| {
        if counter.fetch_add(1, Ordering::SeqCst) == 1 {
            Err(EvidenceStoreError::Unavailable {
                reason: "injected: the disk is full".into(),
            })
        } else {
            real.put(record, deadline)
        }
    });
    let store: Arc<dyn EvidenceStore> = Arc::new(mock);
    let executor = Faulty::new(scenario.executor.clone(), Fault::None);
    let collector =
        sf_host::collector::RepositoryCollector::new(store, executor.clone(), scenario.protected())
            .unwrap();
    let request = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = collector
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    let states: Vec<RunState> = result.runs.iter().map(|run| run.state).collect();
    assert_eq!(
        states,
        [
            RunState::Observed,
            RunState::StorageFailed,
            RunState::NotStarted,
            RunState::NotStarted
        ]
    );
    assert!(result.runs[2..].iter().all(|run| run.evidence.is_none()));
    assert!(
        result.runs[1]
            .problems
            .iter()
            .any(|p| p.contains("the disk is full"))
    );
    assert_eq!(executor.runs(), 2, "nothing started after the failed put");
    assert_eq!(
        puts.load(Ordering::SeqCst),
        2,
        "nothing stored after the failed put"
    );
    assert_eq!(result.evidence.len(), 1);
    assert_eq!(scenario.records(), 1);
    assert!(
        result.storage_failed() && !result.may_judge(),
        "no Verdict may be issued"
    );
    inconclusive(&scenario, &request, &hold);
}

/// A Candidate collected under any Slice but exactly the one it was sealed for (its digest,
/// scope, protected paths, records, repository) is refused before anything runs or is stored.
#[test]
fn a_candidate_not_sealed_for_the_slice_given() {
    let scenario = Scenario::real();
    let executor = Faulty::new(scenario.executor.clone(), Fault::None);
    let collector = scenario.collector_over(executor.clone());
    let good = scenario.request(SUM_FIXED);
    let hold = scenario.fence.acquire(&good.sealed.digest).unwrap();
    let refused = |request: &sf_host::collector::CollectRequest, needle: &str| {
        let error = collector
            .collect(request, proceed(), &hold, &cancel())
            .unwrap_err();
        assert_eq!(error.code(), "invalid-input", "{error}");
        assert!(error.to_string().contains(needle), "{needle}: {error}");
    };

    // Sealed for revision 2, collected under revision 1 (and the other way round).
    let revision_two = scenario.slice_at(2);
    let sealed_for_two = scenario.seal_for(&Scenario::frozen_for(&revision_two), SUM_FIXED);
    refused(
        &scenario.request_for(sealed_for_two.clone()),
        "slice.digest",
    );
    refused(
        &scenario.request_in(scenario.slice(), sealed_for_two),
        "slice.digest",
    );
    // Sealed for a Slice with another recipe (a longer timeout).
    let mut other = scenario.slice();
    other.recipe.timeout_ms += 1;
    other.record.recipe = other.recipe.digest().unwrap();
    refused(
        &scenario.request_for(scenario.seal_for(&Scenario::frozen_for(&other), SUM_FIXED)),
        "slice.digest",
    );
    // The Slice given does not hold what its record names.
    let mut request = good.clone();
    request.slice.recipe.timeout_ms += 1;
    refused(&request, "slice.recipe");
    let mut request = good.clone();
    request.slice.inputs.clear();
    refused(&request, "does not hold this input");
    // A Candidate whose manifest names this Slice's digest but a wider scope (sealed through
    // the API with frozen inputs of its own making): the scope is the Slice's, not its own.
    let mut widened = scenario.frozen();
    widened.scope.push("check.sh".into());
    let rewrote_check = scenario
        .repo
        .repo
        .seal(
            &widened,
            &sf_tests::proposal(vec![sf_tests::edit(
                "check.sh",
                Some(CHECK),
                Some("echo ok\n"),
            )]),
        )
        .unwrap();
    refused(&scenario.request_for(rewrote_check), "scope");
    // A Slice that protects a path the Candidate edits, even with the protection left out of
    // the frozen inputs it was sealed with.
    let mut protecting = scenario.slice();
    protecting.record.protected = vec!["sum.sh".into()];
    let mut unprotected = Scenario::frozen_for(&protecting);
    unprotected.binding.as_mut().unwrap().protected.clear();
    let edits_protected = scenario.seal_for(&unprotected, SUM_FIXED);
    refused(
        &scenario.request_in(protecting, edits_protected),
        "protected",
    );
    // A Slice of another repository.
    let mut request = good.clone();
    request.slice.record.repository.nonce = "0".repeat(32);
    refused(&request, "repository");
    // A recipe pinning another collector closure: records are never attributed to other code.
    let mut foreign = scenario.slice();
    foreign.recipe.collector_closure = sf_host::canonical::Digest::of(b"other code");
    foreign.record.recipe = foreign.recipe.digest().unwrap();
    let sealed_foreign = scenario.seal_for(&Scenario::frozen_for(&foreign), SUM_FIXED);
    refused(&scenario.request_in(foreign, sealed_foreign), "closure");
    // Candidate files changed after sealing.
    let mut request = good.clone();
    match &mut request.trees {
        CollectTrees::Stored(stored) => {
            let next = stored.edits[0].next.as_mut().expect("an edit that writes");
            next.content.push(b'\n');
        }
        CollectTrees::Files { candidate, .. } => candidate.files[0].content.push(b'\n'),
    }
    assert_eq!(
        collector
            .collect(&request, proceed(), &hold, &cancel())
            .unwrap_err()
            .code(),
        "invalid-input"
    );
    // A hold on another Product's fence.
    let other_fence = sf_host::fence::Fence::open(&scenario.fence_dir, "another-product").unwrap();
    let other_hold = other_fence.acquire(&good.sealed.digest).unwrap();
    assert!(
        collector
            .collect(&good, proceed(), &other_hold, &cancel())
            .unwrap_err()
            .to_string()
            .contains("hold")
    );
    // A hold on another Candidate of this Product: it excludes nothing this collection needs
    // excluded, so it is refused before anything runs.
    let beside = scenario
        .fence
        .acquire(&sf_host::canonical::Digest::of(b"another Candidate"))
        .unwrap();
    let refused = collector
        .collect(&good, proceed(), &beside, &cancel())
        .unwrap_err();
    assert_eq!(refused.code(), "invalid-input", "{refused}");
    assert!(refused.to_string().contains("not the pinned"), "{refused}");

    assert_eq!(executor.runs(), 0, "nothing started");
    assert_eq!(scenario.records(), 0, "nothing stored");
    // And the good request still runs.
    let result = collector
        .collect(&good, proceed(), &hold, &cancel())
        .unwrap();
    assert_eq!(result.evidence.len(), 4);
    assert_eq!(
        scenario.judge(&good, hold.attempt()).outcome,
        Outcome::Verified
    );
}
