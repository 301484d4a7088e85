//! Guarded at-most-once integration over the real git binary: prepare, invoke, inspect;
//! replays, conflicts, stale bases, races, drift, the guard rows, bad input and forged
//! records.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sf_host::canonical::Digest;
use sf_host::contracts::{Gate, GateAnswer, GateError};
use sf_host::gate::FileGate;
use sf_host::repository::{
    IntegrationPayload, Invocation, Postcondition, PreparedIntegration, RepositoryOptions,
    SealedCandidate, open_repository,
};
use sf_tests::{TestRepo, edit, frozen, payload, proposal};

const FILES: &[(&str, &str)] = &[("src/a.txt", "alpha\n")];

fn seal(test: &TestRepo, base: sf_host::git_object::ObjectId, text: &str) -> SealedCandidate {
    let prior = test.repo.snapshot(&base).unwrap().files[0]
        .as_text()
        .unwrap()
        .to_owned();
    test.repo
        .seal(
            &frozen(base, &["src"]),
            &proposal(vec![edit("src/a.txt", Some(&prior), Some(text))]),
        )
        .unwrap()
}

fn prepare(test: &TestRepo, text: &str, action: &str) -> (SealedCandidate, PreparedIntegration) {
    let sealed = seal(test, test.identity.initial, text);
    let prepared = test
        .repo
        .prepare_integration(&payload(&test.identity, &sealed, action, 1))
        .unwrap();
    (sealed, prepared)
}

/// A gate that counts its consultations and answers as told.
struct Counting {
    calls: AtomicUsize,
    answer: Box<dyn Fn() -> Result<GateAnswer, GateError> + Send + Sync>,
}

impl Counting {
    fn new(
        answer: impl Fn() -> Result<GateAnswer, GateError> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            calls: AtomicUsize::new(0),
            answer: Box::new(answer),
        })
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Gate for Counting {
    fn current(&self, _deadline: Instant) -> Result<GateAnswer, GateError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.answer)()
    }
}

#[test]
fn invoke_moves_the_target_once_and_replays_report_what_they_read() {
    let test = TestRepo::git(FILES);
    let (sealed, prepared) = prepare(&test, "one\n", "deliver");
    assert_eq!(prepared.payload.commit, sealed.manifest.commit);
    let before = test.repo.inspect_integration(&prepared).unwrap();
    assert_eq!(before.invocation, Invocation::NotDispatched);
    assert_eq!(before.postcondition, Postcondition::NotObserved);

    let first = test
        .repo
        .invoke_once(&prepared, &sf_tests::assumed(&prepared), None)
        .unwrap();
    assert_eq!(first.invocation, Invocation::Confirmed, "{first:?}");
    assert!(first.dispatched);
    assert_eq!(first.postcondition, Postcondition::DesiredStateObserved);
    assert_eq!(first.target, Some(sealed.manifest.commit));
    assert_eq!(
        first.receipt.as_ref().unwrap().target,
        sealed.manifest.commit
    );
    assert_eq!(first.intent, prepared.digest);
    assert_eq!(test.repo.target().unwrap(), sealed.manifest.commit);

    // Replays start nothing and read the receipt.
    let tree_before = test.tree_hash();
    for repo in [&test.repo, &test.reopen()] {
        let again = repo
            .invoke_once(&prepared, &sf_tests::assumed(&prepared), None)
            .unwrap();
        assert_eq!(again.invocation, Invocation::Confirmed);
        assert!(!again.dispatched);
        assert_eq!(again.receipt, first.receipt);
        assert_eq!(again.dispatch, first.dispatch);
    }
    assert_eq!(test.tree_hash(), tree_before, "a replay wrote something");

    // Confirmed history survives later target drift.
    let next = seal(&test, sealed.manifest.commit, "two\n");
    let next_prepared = test
        .repo
        .prepare_integration(&payload(&test.identity, &next, "deliver", 2))
        .unwrap();
    assert_eq!(
        test.repo
            .invoke_once(&next_prepared, &sf_tests::assumed(&next_prepared), None)
            .unwrap()
            .invocation,
        Invocation::Confirmed
    );
    let drifted = test.repo.inspect_integration(&prepared).unwrap();
    assert_eq!(drifted.invocation, Invocation::Confirmed);
    assert_eq!(drifted.postcondition, Postcondition::NotObserved);
    assert_eq!(drifted.target, Some(next.manifest.commit));
    assert!(!drifted.dispatched);
}

#[test]
fn an_intent_is_immutable_per_action_occurrence() {
    let test = TestRepo::git(FILES);
    let (sealed, prepared) = prepare(&test, "one\n", "deliver");
    let replay = test
        .reopen()
        .prepare_integration(&prepared.payload)
        .unwrap();
    assert_eq!(replay, prepared);
    let mut other = prepared.payload.clone();
    other.proof = Digest::of(b"another proof");
    let error = test.repo.prepare_integration(&other).unwrap_err();
    assert_eq!(error.code(), "conflict", "{error}");
    // Another occurrence is another intent.
    let mut next = prepared.payload.clone();
    next.action.occurrence = 2;
    let second = test.repo.prepare_integration(&next).unwrap();
    assert_ne!(second.intent, prepared.intent);
    // A persisted record round-trips, and a tampered one is refused.
    let bytes = sf_host::canonical::encode(&prepared.to_value()).unwrap();
    assert_eq!(PreparedIntegration::from_json(&bytes).unwrap(), prepared);
    let tampered = String::from_utf8(bytes)
        .unwrap()
        .replace(&sealed.manifest.commit.to_hex(), &"0".repeat(40));
    assert_eq!(
        PreparedIntegration::from_json(tampered.as_bytes())
            .unwrap_err()
            .code(),
        "invalid-input"
    );
}

#[test]
fn bad_payloads_are_refused_before_any_write() {
    let test = TestRepo::git(FILES);
    let sealed = seal(&test, test.identity.initial, "one\n");
    let good = payload(&test.identity, &sealed, "deliver", 1);
    let other = TestRepo::git(FILES);
    let mut cases: Vec<(&str, IntegrationPayload)> = Vec::new();
    let mut push = |name, change: &dyn Fn(&mut IntegrationPayload)| {
        let mut p = good.clone();
        change(&mut p);
        cases.push((name, p));
    };
    push("base equals commit", &|p| p.base = p.commit);
    push("action id grammar", &|p| p.action.id = "-x".into());
    push("action id too long", &|p| p.action.id = "a".repeat(129));
    push("occurrence zero", &|p| p.action.occurrence = 0);
    push("occurrence unsafe", &|p| p.action.occurrence = 1 << 53);
    push("owner generation zero", &|p| p.owner.generation = 0);
    push("product grammar", &|p| p.product = "a b".into());
    push("another product", &|p| p.product = "product-2".into());
    push("ref grammar", &|p| p.target_ref = "refs/tags/x".into());
    push("another ref", &|p| p.target_ref = "refs/heads/other".into());
    push("another repository", &|p| {
        p.repository = other.identity.clone()
    });
    push("commit not the Candidate's", &|p| {
        p.commit = sf_host::git_object::ObjectId::from_bytes([3; 20])
    });
    push("base not the Candidate's", &|p| {
        p.base = sf_host::git_object::ObjectId::from_bytes([4; 20])
    });
    push("slice not the Candidate's", &|p| p.slice.revision = 9);
    push("unknown Candidate", &|p| p.candidate = Digest::of(b"none"));
    let before = test.tree_hash();
    for (name, bad) in &cases {
        let error = test.repo.prepare_integration(bad).unwrap_err();
        assert_eq!(error.code(), "invalid-input", "{name}: {error}");
        assert_eq!(test.tree_hash(), before, "{name} wrote something");
    }
    // From JSON: oversized, extra fields, wrong types.
    let oversized = format!(r#"{{"padding":"{}"}}"#, "x".repeat(5000));
    assert_eq!(
        IntegrationPayload::from_json(oversized.as_bytes())
            .unwrap_err()
            .code(),
        "invalid-input"
    );
    let mut value = good.to_value();
    if let sf_host::canonical::Value::Object(map) = &mut value {
        map.insert("approved".into(), sf_host::canonical::Value::Bool(true));
    }
    let extra = sf_host::canonical::encode(&value).unwrap();
    assert_eq!(
        IntegrationPayload::from_json(&extra).unwrap_err().code(),
        "invalid-input"
    );
    let good_bytes = sf_host::canonical::encode(&good.to_value()).unwrap();
    assert_eq!(IntegrationPayload::from_json(&good_bytes).unwrap(), good);
}

#[test]
fn two_intents_on_one_base_move_the_target_once() {
    let test = TestRepo::git(FILES);
    let one = seal(&test, test.identity.initial, "one\n");
    let two = seal(&test, test.identity.initial, "two\n");
    let p1 = test
        .repo
        .prepare_integration(&payload(&test.identity, &one, "a", 1))
        .unwrap();
    let p2 = test
        .repo
        .prepare_integration(&payload(&test.identity, &two, "b", 1))
        .unwrap();
    let first = test
        .repo
        .invoke_once(&p1, &sf_tests::assumed(&p1), None)
        .unwrap();
    assert_eq!(first.invocation, Invocation::Confirmed);
    let second = test
        .repo
        .invoke_once(&p2, &sf_tests::assumed(&p2), None)
        .unwrap();
    assert_eq!(second.invocation, Invocation::NotDispatched, "{second:?}");
    assert!(!second.dispatched);
    assert!(second.dispatch.is_none(), "a stale base made a claim");
    assert!(
        second.problem.as_deref().unwrap().starts_with("stale base"),
        "{second:?}"
    );
    assert_eq!(
        test.repo.inspect_integration(&p2).unwrap().invocation,
        Invocation::NotDispatched
    );
    assert_eq!(test.repo.target().unwrap(), one.manifest.commit);
}

#[test]
fn racing_intents_on_one_base_move_the_target_once() {
    for round in 0..5 {
        let test = TestRepo::git(FILES);
        let one = seal(&test, test.identity.initial, "one\n");
        let two = seal(&test, test.identity.initial, "two\n");
        let p1 = test
            .repo
            .prepare_integration(&payload(&test.identity, &one, "a", 1))
            .unwrap();
        let p2 = test
            .repo
            .prepare_integration(&payload(&test.identity, &two, "b", 1))
            .unwrap();
        let (r1, r2) = (test.reopen(), test.reopen());
        let barrier = std::sync::Barrier::new(2);
        let (a, b) = std::thread::scope(|scope| {
            let a = scope.spawn(|| {
                barrier.wait();
                r1.invoke_once(&p1, &sf_tests::assumed(&p1), None).unwrap()
            });
            let b = scope.spawn(|| {
                barrier.wait();
                r2.invoke_once(&p2, &sf_tests::assumed(&p2), None).unwrap()
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        let confirmed = [&a, &b]
            .iter()
            .filter(|o| o.invocation == Invocation::Confirmed)
            .count();
        assert_eq!(confirmed, 1, "round {round}: {a:?} {b:?}");
        let winner = if a.invocation == Invocation::Confirmed {
            &one
        } else {
            &two
        };
        assert_eq!(test.repo.target().unwrap(), winner.manifest.commit);
        let loser = if a.invocation == Invocation::Confirmed {
            &b
        } else {
            &a
        };
        // The loser either saw the stale base (no claim) or claimed and then found the target
        // moved: unknown, never failed, never confirmed.
        assert!(
            matches!(
                loser.invocation,
                Invocation::NotDispatched | Invocation::Unknown
            ),
            "{loser:?}"
        );
    }
}

#[test]
fn a_symbolic_target_is_refused_before_any_claim() {
    let test = TestRepo::git(FILES);
    let (_, prepared) = prepare(&test, "one\n", "deliver");
    std::fs::write(
        test.path.join("refs/heads/main"),
        "ref: refs/heads/elsewhere\n",
    )
    .unwrap();
    let error = test
        .repo
        .invoke_once(&prepared, &sf_tests::assumed(&prepared), None)
        .unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    let claims = std::fs::read_dir(test.path.join("refs/sf/integrations"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(!claims.join("dispatch").exists(), "a claim was made");
}

#[test]
fn the_guard_decides_once_for_the_claim_holder() {
    // Allowed: confirmed, consulted once.
    let test = TestRepo::git(FILES);
    let (sealed, prepared) = prepare(&test, "one\n", "deliver");
    let allow = Counting::new(|| Ok(GateAnswer::Proceed));
    let observed = test
        .repo
        .invoke_once(
            &prepared,
            &sf_tests::assumed(&prepared),
            Some(allow.clone()),
        )
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Confirmed);
    assert_eq!(allow.calls(), 1);
    // A replay never consults it.
    test.repo
        .invoke_once(
            &prepared,
            &sf_tests::assumed(&prepared),
            Some(allow.clone()),
        )
        .unwrap();
    assert_eq!(allow.calls(), 1);
    // A stale base never consults it.
    let stale = seal(&test, test.identity.initial, "stale\n");
    let stale = test
        .repo
        .prepare_integration(&payload(&test.identity, &stale, "stale", 1))
        .unwrap();
    assert_eq!(
        test.repo
            .invoke_once(&stale, &sf_tests::assumed(&stale), Some(allow.clone()))
            .unwrap()
            .invocation,
        Invocation::NotDispatched
    );
    assert_eq!(allow.calls(), 1);
    let _ = sealed;

    let withheld_cases: Vec<(&str, Arc<Counting>, &str)> = vec![
        (
            "refusal",
            Counting::new(|| {
                Ok(GateAnswer::Refuse {
                    reason: "change freeze".into(),
                })
            }),
            "withheld before submission: change freeze",
        ),
        (
            "error",
            Counting::new(|| {
                Err(GateError::Unavailable {
                    reason: "policy service down".into(),
                })
            }),
            "withheld before submission: the guard failed: gate unavailable: policy service down",
        ),
        (
            "malformed refusal",
            Counting::new(|| {
                Ok(GateAnswer::Refuse {
                    reason: "\u{7}".into(),
                })
            }),
            "withheld before submission: the guard answered neither",
        ),
        (
            "panic",
            Counting::new(|| panic!("guard exploded")),
            "withheld before submission: the guard failed: guard exploded",
        ),
        (
            "late",
            Counting::new(|| {
                std::thread::sleep(Duration::from_millis(5000));
                Ok(GateAnswer::Proceed)
            }),
            "withheld before submission: the guard did not answer within 2000 ms",
        ),
    ];
    for (name, gate, problem) in withheld_cases {
        let test = TestRepo::git(FILES);
        let (_, prepared) = prepare(&test, "one\n", "deliver");
        // Only the late case gets a short bound, long enough for git on a loaded machine; the
        // others must answer in time however slow the machine is.
        let options = RepositoryOptions {
            git_timeout: if name == "late" {
                Duration::from_millis(2000)
            } else {
                Duration::from_secs(30)
            },
            ..RepositoryOptions::default()
        };
        let repo = open_repository(test.factory.as_ref(), &test.identity, options).unwrap();
        let observed = repo
            .invoke_once(&prepared, &sf_tests::assumed(&prepared), Some(gate.clone()))
            .unwrap();
        assert_eq!(
            observed.invocation,
            Invocation::Withheld,
            "{name}: {observed:?}"
        );
        assert!(!observed.dispatched, "{name}");
        assert!(
            observed.dispatch.is_some(),
            "{name}: the claim was not kept"
        );
        assert!(observed.receipt.is_none());
        assert_eq!(observed.target, Some(test.identity.initial));
        assert!(
            observed.problem.as_deref().unwrap().starts_with(problem),
            "{name}: {:?}",
            observed.problem
        );
        assert_eq!(gate.calls(), 1, "{name}");
        assert_eq!(
            test.repo.target().unwrap(),
            test.identity.initial,
            "{name}: the target moved"
        );
        // The occurrence is consumed: everywhere else it reads unknown, and nothing restarts.
        let later = test
            .reopen()
            .invoke_once(&prepared, &sf_tests::assumed(&prepared), Some(gate.clone()))
            .unwrap();
        assert_eq!(later.invocation, Invocation::Unknown, "{name}");
        assert!(!later.dispatched);
        assert_eq!(gate.calls(), 1, "{name}: consulted again");
        assert_eq!(
            test.repo.inspect_integration(&prepared).unwrap().invocation,
            Invocation::Unknown
        );
        assert_eq!(test.repo.target().unwrap(), test.identity.initial);
    }
}

#[test]
fn the_file_gate_guards_an_integration() {
    let test = TestRepo::git(FILES);
    let (sealed, prepared) = prepare(&test, "one\n", "deliver");
    let gate_file = test.parent.join("gate.json");
    std::fs::write(
        &gate_file,
        br#"{"proceed": false, "reason": "waiting for review"}"#,
    )
    .unwrap();
    let observed = test
        .repo
        .invoke_once(
            &prepared,
            &sf_tests::assumed(&prepared),
            Some(Arc::new(FileGate::new(&gate_file))),
        )
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Withheld);
    assert_eq!(
        observed.problem.as_deref(),
        Some("withheld before submission: waiting for review")
    );
    let mut next = prepared.payload.clone();
    next.action.occurrence = 2;
    let next = test.repo.prepare_integration(&next).unwrap();
    std::fs::write(&gate_file, br#"{"proceed": true}"#).unwrap();
    let observed = test
        .repo
        .invoke_once(
            &next,
            &sf_tests::assumed(&next),
            Some(Arc::new(FileGate::new(&gate_file))),
        )
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Confirmed);
    assert_eq!(test.repo.target().unwrap(), sealed.manifest.commit);
}

#[test]
fn forged_or_swapped_records_are_corrupt_and_never_move_the_target() {
    let test = TestRepo::git(FILES);
    let (_, p1) = prepare(&test, "one\n", "a");
    let other = seal(&test, test.identity.initial, "two\n");
    let p2 = test
        .repo
        .prepare_integration(&payload(&test.identity, &other, "b", 1))
        .unwrap();
    let key_dir = |p: &PreparedIntegration| {
        let key = sf_host::canonical::object([
            ("protocol", "sf-integration/1".into()),
            (
                "action",
                sf_host::canonical::object([
                    ("id", p.payload.action.id.as_str().into()),
                    (
                        "occurrence",
                        sf_host::canonical::Value::Integer(p.payload.action.occurrence as i64),
                    ),
                ]),
            ),
        ]);
        test.path
            .join("refs/sf/integrations")
            .join(Digest::of(&sf_host::canonical::encode(&key).unwrap()).hex())
    };
    // Swap the two intents' refs: each now names the other's record.
    let (d1, d2) = (key_dir(&p1), key_dir(&p2));
    assert!(d1.join("intent").exists() && d2.join("intent").exists());
    std::fs::write(d1.join("intent"), format!("{}\n", p2.intent)).unwrap();
    std::fs::write(d2.join("intent"), format!("{}\n", p1.intent)).unwrap();
    for p in [&p1, &p2] {
        assert_eq!(
            test.repo
                .invoke_once(p, &sf_tests::assumed(p), None)
                .unwrap_err()
                .code(),
            "corrupt"
        );
        assert_eq!(
            test.repo.inspect_integration(p).unwrap_err().code(),
            "corrupt"
        );
    }
    std::fs::write(d1.join("intent"), format!("{}\n", p1.intent)).unwrap();
    std::fs::write(d2.join("intent"), format!("{}\n", p2.intent)).unwrap();
    assert_eq!(test.repo.target().unwrap(), test.identity.initial);

    // A dispatch that names another intent's commit, and a receipt without its dispatch.
    let observed = test
        .repo
        .invoke_once(&p1, &sf_tests::assumed(&p1), None)
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Confirmed);
    std::fs::write(
        d2.join("dispatch"),
        format!("{}\n", observed.dispatch.unwrap()),
    )
    .unwrap();
    let error = test
        .repo
        .invoke_once(&p2, &sf_tests::assumed(&p2), None)
        .unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    std::fs::remove_file(d2.join("dispatch")).unwrap();
    std::fs::write(
        d2.join("receipt"),
        format!("{}\n", observed.receipt.unwrap().id),
    )
    .unwrap();
    assert_eq!(
        test.repo.inspect_integration(&p2).unwrap_err().code(),
        "corrupt"
    );
    assert_eq!(test.repo.target().unwrap(), p1.payload.commit);
}

/// Only the intent a proof admits moves: a proof of another Candidate (here, one naming
/// another commit, or another Verdict digest) is refused before anything is read or written,
/// with nothing claimed, and the target stays where it was.
#[test]
fn a_proof_moves_only_the_intent_it_admits() {
    let test = TestRepo::git(FILES);
    let (_, prepared) = prepare(&test, "one\n", "deliver");
    let (other, _) = prepare(&test, "two\n", "other");
    let target = test.repo.target().unwrap();
    let tree_before = test.tree_hash();
    let admits = |commit, proof: &str| sf_collector::judging::Admits {
        candidate: prepared.payload.candidate.clone(),
        base: prepared.payload.base,
        commit,
        slice: prepared.payload.slice.clone(),
        proof: Digest::of(proof.as_bytes()),
    };
    for (what, admits) in [
        ("another commit", admits(other.manifest.commit, "proof")),
        (
            "another Verdict",
            admits(prepared.payload.commit, "another proof"),
        ),
    ] {
        let proof = sf_collector::judging::Verified::assumed(admits);
        let refused = test.repo.invoke_once(&prepared, &proof, None).unwrap_err();
        assert_eq!(refused.code(), "invalid-input", "{what}: {refused}");
        assert!(
            refused.to_string().contains("not the one the proof admits"),
            "{what}: {refused}"
        );
    }
    assert_eq!(test.repo.target().unwrap(), target);
    assert_eq!(
        test.tree_hash(),
        tree_before,
        "a refused proof wrote something"
    );
    assert_eq!(
        test.repo.inspect_integration(&prepared).unwrap().invocation,
        Invocation::NotDispatched
    );
}
