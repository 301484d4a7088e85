//! The judge (Repository Assurance) on records that a real collection wrote (real sandbox,
//! real SQLite file), copied into in-memory stores and changed one way at a time: Verified
//! only when every process check has exactly one attributable record meeting its
//! expectation; Failed when every check has one attributable record and one misses;
//! Inconclusive otherwise, with reasons.

mod collector_support;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use collector_support::*;
use sf_host::assurance::{
    CheckVerdict, JudgeRequest, OBSERVATION_FORMAT, Observation, Outcome, Verdict, judge,
};
use sf_host::canonical::Digest;
use sf_host::collector::{CollectRequest, CollectResult};
use sf_host::contracts::{
    AttemptId, Enforcement, EvidenceRecord, EvidenceStore, EvidenceStoreError, RunStatus,
};
use sf_sdk::testing::InMemoryEvidenceStore;

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// One real collection of the fixing Candidate, shared by every case.
struct Collected {
    scenario: Scenario,
    request: CollectRequest,
    result: CollectResult,
    observations: Vec<Observation>,
}

fn collected() -> &'static Collected {
    static COLLECTED: OnceLock<Collected> = OnceLock::new();
    COLLECTED.get_or_init(|| {
        let scenario = Scenario::real();
        let request = scenario.request(SUM_FIXED);
        let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
        let result = scenario
            .collector()
            .collect(&request, proceed(), &hold, &cancel())
            .unwrap();
        let observations = result
            .evidence
            .iter()
            .map(|id| {
                let record = scenario.store.get(id, deadline()).unwrap();
                Observation::decode(record.payload()).unwrap()
            })
            .collect();
        Collected {
            scenario,
            request,
            result,
            observations,
        }
    })
}

fn attempt() -> AttemptId {
    collected().result.attempt.clone()
}

/// An in-memory store holding `observations` as records of `attempt` under the pins.
fn store_of(observations: &[Observation], attempt: &AttemptId) -> InMemoryEvidenceStore {
    let store = InMemoryEvidenceStore::new();
    put_all(&store, observations, attempt);
    store
}

/// Puts `observations` into `store` as records of `attempt` under the pins.
fn put_all(store: &InMemoryEvidenceStore, observations: &[Observation], attempt: &AttemptId) {
    for observation in observations {
        let record = EvidenceRecord::new(
            collected().result.pins.clone(),
            attempt.clone(),
            OBSERVATION_FORMAT,
            &observation.encode().unwrap(),
        )
        .unwrap();
        store.put(&record, deadline()).unwrap();
    }
}

fn verdict_of(store: &dyn EvidenceStore, attempt: &AttemptId) -> Verdict {
    let c = collected();
    c.scenario.judge_in(store, &c.request, attempt)
}

/// The observations with `change` applied to the one of `check`.
fn changed(check: &str, change: impl Fn(&mut Observation)) -> Vec<Observation> {
    let mut observations = collected().observations.clone();
    let observation = observations
        .iter_mut()
        .find(|o| o.facts.check == check)
        .unwrap();
    change(observation);
    observations
}

fn reasons(verdict: &Verdict) -> String {
    format!("{:?} {:?}", verdict.reasons, verdict.checks)
}

/// Asserts that `verdict` is Inconclusive and its check `name` not attributable (the case
/// being `what`); that check's verdict.
fn unattributed<'a>(verdict: &'a Verdict, name: &str, what: &str) -> &'a CheckVerdict {
    assert_eq!(
        verdict.outcome,
        Outcome::Inconclusive,
        "{what}: {}",
        reasons(verdict)
    );
    let check = verdict.checks.iter().find(|c| c.check == name).unwrap();
    assert!(
        !check.attributable && check.met.is_none(),
        "{what}: {check:?}"
    );
    check
}

#[test]
fn the_records_as_written_are_verified() {
    let c = collected();
    assert_eq!(
        c.scenario.judge(&c.request, &attempt()).outcome,
        Outcome::Verified
    );
    let copy = store_of(&c.observations, &attempt());
    let verdict = verdict_of(&copy, &attempt());
    assert_eq!(verdict.outcome, Outcome::Verified, "{verdict:#?}");
    assert!(verdict.reasons.is_empty());
    // The Verdict is a canonical record naming the pins and the attempt.
    let bytes = verdict.to_bytes().unwrap();
    assert_eq!(
        sf_host::canonical::parse_canonical(&bytes).unwrap(),
        verdict.to_value()
    );
    assert!(
        String::from_utf8(bytes)
            .unwrap()
            .contains("\"outcome\":\"verified\"")
    );
}

#[test]
fn a_signalled_run_is_an_outcome_that_misses() {
    let observations = changed("bug-fixed", |o| {
        let process = o.facts.process.as_mut().unwrap();
        process.status = RunStatus::Signalled;
        process.exit_code = None;
        process.signal = Some(9);
    });
    let verdict = verdict_of(&store_of(&observations, &attempt()), &attempt());
    assert_eq!(verdict.outcome, Outcome::Failed, "{}", reasons(&verdict));
}

/// A run that hit one of the sandbox's limits is not attributable, whatever its outcome:
/// the same signalled run that is Failed above (killed by the memory limit, say) is
/// Inconclusive once its record names the limit, with the limit as the first reason. The
/// judge decides from the record's limits: here the collector's own verdict says
/// attributable, and the record is still not counted.
#[test]
fn a_run_that_hit_a_limit_is_inconclusive_never_failed() {
    use sf_host::contracts::{Limit, LimitHit};
    let memory = LimitHit::new(
        Limit::Memory,
        2 << 30,
        "the run's control group ran out of memory (memory.oom_control oom_kill 1, under_oom 0)",
    )
    .unwrap();
    let observations = changed("bug-fixed", |o| {
        assert!(o.facts.attributable && o.facts.problems.is_empty());
        let process = o.facts.process.as_mut().unwrap();
        process.status = RunStatus::Signalled;
        process.exit_code = None;
        process.signal = Some(9);
        process.limits_hit = Some(vec![memory.clone()]);
    });
    let verdict = verdict_of(&store_of(&observations, &attempt()), &attempt());
    let check = unattributed(&verdict, "bug-fixed", "a limit hit");
    assert_eq!(
        check.problems,
        [
            "the run hit the sandbox's memory limit (2048 MiB): the run's control group ran out \
          of memory (memory.oom_control oom_kill 1, under_oom 0)"
        ]
    );
    assert_eq!(check.limits_hit, std::slice::from_ref(&memory));
    assert!(
        verdict.reasons[0].starts_with("check bug-fixed: the run hit the sandbox's memory limit"),
        "{}",
        reasons(&verdict)
    );
    // A run that met its expectation is not Verified either when it hit a limit.
    let passed = changed("bug-fixed", |o| {
        o.facts.process.as_mut().unwrap().limits_hit = Some(vec![memory.clone()]);
    });
    let verdict = verdict_of(&store_of(&passed, &attempt()), &attempt());
    assert_eq!(
        verdict.outcome,
        Outcome::Inconclusive,
        "{}",
        reasons(&verdict)
    );
}

#[test]
fn a_wrong_stdout_misses() {
    let observations = changed("empty-candidate", |o| o.stdout = b"1\n".to_vec());
    let verdict = verdict_of(&store_of(&observations, &attempt()), &attempt());
    assert_eq!(verdict.outcome, Outcome::Failed, "{}", reasons(&verdict));
    let check = verdict
        .checks
        .iter()
        .find(|c| c.check == "empty-candidate")
        .unwrap();
    assert!(check.problems[0].contains("stdout hashes to"));
}

#[test]
fn a_missing_record_is_inconclusive_even_when_another_check_failed() {
    let mut observations = changed("empty-candidate", |o| o.stdout = b"1\n".to_vec());
    observations.retain(|o| o.facts.check != "bug-shown");
    let verdict = verdict_of(&store_of(&observations, &attempt()), &attempt());
    assert_eq!(
        verdict.outcome,
        Outcome::Inconclusive,
        "{}",
        reasons(&verdict)
    );
    assert!(reasons(&verdict).contains("no record of this attempt"));
}

#[test]
fn two_records_for_one_check_are_inconclusive() {
    let mut observations = collected().observations.clone();
    let mut twin = observations[1].clone();
    twin.facts.process.as_mut().unwrap().wall_ms += 1;
    observations.push(twin);
    let verdict = verdict_of(&store_of(&observations, &attempt()), &attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive);
    assert!(reasons(&verdict).contains("2 records of this attempt"));
}

#[test]
fn a_record_for_a_check_the_acceptance_lacks_is_inconclusive() {
    let mut observations = collected().observations.clone();
    let mut ghost = observations[0].clone();
    ghost.facts.check = "ghost".into();
    observations.push(ghost);
    let verdict = verdict_of(&store_of(&observations, &attempt()), &attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive);
    assert!(reasons(&verdict).contains("ghost"));
}

#[test]
fn a_corrupt_record_is_inconclusive() {
    let store = store_of(&collected().observations, &attempt());
    let id = store.ids()[2].clone();
    assert!(store.flip_last_byte(&id));
    let verdict = verdict_of(&store, &attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive);
    assert!(
        reasons(&verdict).contains("cannot be read"),
        "{}",
        reasons(&verdict)
    );
}

#[test]
fn a_corrupt_record_of_another_attempt_leaves_a_complete_attempt_judged_on_its_own() {
    let store = store_of(&collected().observations, &attempt());
    let damaged = store.ids()[1].clone();
    assert!(store.flip_last_byte(&damaged));
    let later = AttemptId {
        product: attempt().product,
        epoch: attempt().epoch + 1,
    };
    put_all(&store, &collected().observations, &later);
    // The later attempt has a readable record for every check: judged on those alone.
    let verdict = verdict_of(&store, &later);
    assert_eq!(verdict.outcome, Outcome::Verified, "{}", reasons(&verdict));
    // The damaged attempt lacks one: Inconclusive, the record named.
    let verdict = verdict_of(&store, &attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive);
    assert!(
        reasons(&verdict).contains(&format!("record {damaged} cannot be read")),
        "{}",
        reasons(&verdict)
    );
    let unreadable =
        sf_host::assurance::judge::unreadable_records(&collected().result.pins, &store, deadline());
    assert_eq!(unreadable.len(), 1);
    assert_eq!(unreadable[0].0, damaged);
}

#[test]
fn records_of_other_attempts_are_inert() {
    let other = AttemptId {
        product: attempt().product,
        epoch: attempt().epoch + 7,
    };
    // Only another attempt's records: nothing for this one.
    let verdict = verdict_of(&store_of(&collected().observations, &other), &attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive);
    // This attempt's records plus a failing one of another attempt: still Verified.
    let store = store_of(&collected().observations, &attempt());
    let failing = changed("bug-fixed", |o| {
        o.facts.process.as_mut().unwrap().exit_code = Some(1)
    });
    for observation in failing {
        let record = EvidenceRecord::new(
            collected().result.pins.clone(),
            other.clone(),
            OBSERVATION_FORMAT,
            &observation.encode().unwrap(),
        )
        .unwrap();
        store.put(&record, deadline()).unwrap();
    }
    assert_eq!(verdict_of(&store, &attempt()).outcome, Outcome::Verified);
}

#[test]
fn records_filed_under_other_pins_do_not_count() {
    let c = collected();
    let store = InMemoryEvidenceStore::new();
    for observation in &c.observations {
        let record = EvidenceRecord::new(
            Digest::of(b"other pins"),
            attempt(),
            OBSERVATION_FORMAT,
            &observation.encode().unwrap(),
        )
        .unwrap();
        store.put(&record, deadline()).unwrap();
    }
    assert_eq!(
        verdict_of(&store, &attempt()).outcome,
        Outcome::Inconclusive
    );
}

/// Each change makes the record unattributable: Inconclusive, never Verified or Failed.
#[test]
fn unattributable_records_are_inconclusive() {
    type Change = Box<dyn Fn(&mut Observation)>;
    let cases: Vec<(&str, Change)> = vec![
        (
            "written by collector",
            Box::new(|o| o.facts.collector = Digest::of(b"other code")),
        ),
        (
            "names Candidate",
            Box::new(|o| o.facts.candidate = Digest::of(b"other")),
        ),
        (
            "the run was not-started",
            Box::new(|o| o.facts.status = sf_host::assurance::ObservationStatus::NotStarted),
        ),
        (
            "not attributable",
            Box::new(|o| o.facts.problems = vec!["a collector error".into()]),
        ),
        ("environment", Box::new(|o| o.facts.environment = None)),
        (
            "program",
            Box::new(|o| o.facts.identities.as_mut().unwrap().program = Digest::of(b"x")),
        ),
        (
            "input",
            Box::new(|o| o.facts.identities.as_mut().unwrap().input = Digest::of(b"x")),
        ),
        (
            "runtime",
            Box::new(|o| o.facts.identities.as_mut().unwrap().runtime = Digest::of(b"x")),
        ),
        (
            "profile",
            Box::new(|o| o.facts.identities.as_mut().unwrap().profile = Digest::of(b"x")),
        ),
        (
            "landlock was partially-enforced, not fully-enforced",
            Box::new(|o| {
                let ids = o.facts.identities.as_mut().unwrap();
                let facts = ids.enforcement.facts().map(|(mechanism, status)| {
                    let status = if mechanism == "landlock" {
                        "partially-enforced"
                    } else {
                        status
                    };
                    (mechanism.to_owned(), status.to_owned())
                });
                ids.enforcement = Enforcement::from_facts(facts).unwrap();
            }),
        ),
        (
            "bounds",
            Box::new(|o| o.facts.identities.as_mut().unwrap().bounds = Digest::of(b"x")),
        ),
        (
            "not within the recipe",
            Box::new(|o| o.facts.process.as_mut().unwrap().timeout_ms = 10_000_000),
        ),
        (
            "stopped (timed-out)",
            Box::new(|o| o.facts.process.as_mut().unwrap().status = RunStatus::TimedOut),
        ),
        (
            "every process ended",
            Box::new(|o| o.facts.process.as_mut().unwrap().reaped = false),
        ),
        (
            "after the deadline",
            Box::new(|o| o.facts.ended_at = Some(o.facts.deadline + 1)),
        ),
        (
            "phase or stage",
            Box::new(|o| o.facts.stage = sf_host::assurance::Stage::Base),
        ),
    ];
    for (expected, change) in cases {
        let observations = changed("bug-fixed", &change);
        let verdict = verdict_of(&store_of(&observations, &attempt()), &attempt());
        unattributed(&verdict, "bug-fixed", expected);
        assert!(
            reasons(&verdict).contains(expected),
            "{expected}: {}",
            reasons(&verdict)
        );
    }
}

#[test]
fn a_store_that_cannot_be_searched_is_inconclusive() {
    let mut store = sf_sdk::mocks::MockEvidenceStore::new();
    store.expect_find().returning(|_, _| {
        Err(EvidenceStoreError::Unavailable {
            reason: "injected".into(),
        })
    });
    let verdict = verdict_of(&store, &attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive);
    assert!(reasons(&verdict).contains("could not be searched"));
    // A store that answers a get with another record than asked for is caught too.
    let real = Arc::new(store_of(&collected().observations, &attempt()));
    let ids = real.ids();
    let mut lying = sf_sdk::mocks::MockEvidenceStore::new();
    let find_ids = ids.clone();
    lying
        .expect_find()
        .returning(move |_, _| Ok(find_ids.clone()));
    let first = ids[0].clone();
    let source = real.clone();
    lying
        .expect_get()
        .returning(move |_, deadline| source.get(&first, deadline));
    let verdict = verdict_of(&lying, &attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive);
    assert!(
        reasons(&verdict).contains("answered with record"),
        "{}",
        reasons(&verdict)
    );
}

#[test]
fn records_that_are_not_the_pinned_ones_are_refused() {
    let c = collected();
    let mut recipe = c.request.slice.recipe.clone();
    recipe.timeout_ms += 1;
    let error = judge(
        &JudgeRequest {
            pins: &pins(&c.request),
            acceptance: &c.request.slice.acceptance,
            recipe: &recipe,
            environment: &c.request.slice.environment,
            attempt: &attempt(),
        },
        c.scenario.store.as_ref(),
        deadline(),
    )
    .unwrap_err();
    assert_eq!(error.code(), "invalid-input");
    assert!(error.to_string().contains("recipe"));
}
