//! Failure semantics of integration with mockall fakes, for faults that cannot be made for
//! real: every fake delegates to a real in-memory store except for the one fault under test.
//! `Err` only before anything started; unknown is never failed; a receipt that cannot be
//! written keeps "confirmed"; a gate that refuses, fails, answers malformed or late withholds;
//! the gate is never consulted by a replay, a losing claimant, a stale base, or twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sf_host::contracts::{
    GateAnswer, GateError, ObjectStore, ObjectStoreError, RefUpdate, StoreRoot,
};
use sf_host::repository::{
    CreateRepository, InitialBase, Invocation, PreparedIntegration, Repository, RepositoryIdentity,
    RepositoryOptions, create_repository, open_repository,
};
use sf_sdk::mocks::{MockGate, MockObjectStore, MockObjectStoreFactory};
use sf_sdk::testing::InMemoryObjectStoreFactory;
use sf_tests::{edit, frozen, payload, proposal, texts};

struct World {
    factory: InMemoryObjectStoreFactory,
    identity: RepositoryIdentity,
    repo: Repository,
    prepared: PreparedIntegration,
}

fn new_world() -> World {
    let factory = InMemoryObjectStoreFactory::new();
    let identity = create_repository(
        &factory,
        &CreateRepository {
            path: "/in-memory/repo".into(),
            product_id: "product-1".into(),
            target_ref: "refs/heads/main".into(),
            base: InitialBase::Files(texts(&[("src/a.txt", "alpha\n")])),
            settings: Default::default(),
        },
        &RepositoryOptions::default(),
    )
    .unwrap();
    let repo = open_repository(&factory, &identity, RepositoryOptions::default()).unwrap();
    let sealed = repo
        .seal(
            &frozen(identity.initial, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("one\n"))]),
        )
        .unwrap();
    let prepared = repo
        .prepare_integration(&payload(&identity, &sealed, "deliver", 1))
        .unwrap();
    World {
        factory,
        identity,
        repo,
        prepared,
    }
}

type Override<T> =
    Box<dyn Fn(&dyn ObjectStore, &str) -> Option<Result<T, ObjectStoreError>> + Send + Sync>;

/// A fault for the Nth `write_objects` call (counting from 0); `None` delegates.
type WriteFault = Box<dyn Fn(usize) -> Option<Result<(), ObjectStoreError>> + Send + Sync>;

/// Faults to inject; `None` from an override delegates to the real store.
#[derive(Default)]
struct Faults {
    create_ref: Option<Override<RefUpdate>>,
    compare_and_swap: Option<Override<RefUpdate>>,
    write_objects: Option<WriteFault>,
}

/// A mock store delegating every call to `inner` except where `faults` says otherwise; the
/// number of compare-and-swap calls is bounded by `max_cas`.
fn faulty(inner: Box<dyn ObjectStore>, faults: Faults, max_cas: usize) -> MockObjectStore {
    let inner: Arc<dyn ObjectStore> = Arc::from(inner);
    let mut mock = MockObjectStore::new();
    let root: StoreRoot = inner.root().clone();
    mock.expect_root().return_const(root);
    let i = inner.clone();
    mock.expect_mark().returning(move |m, d| i.mark(m, d));
    let i = inner.clone();
    let write_fault = faults.write_objects;
    let writes = std::sync::atomic::AtomicUsize::new(0);
    mock.expect_write_objects().returning(move |objects, d| {
        let n = writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(result) = write_fault.as_ref().and_then(|f| f(n)) {
            return result;
        }
        i.write_objects(objects, d)
    });
    let i = inner.clone();
    mock.expect_read_objects()
        .returning(move |ids, b, d| i.read_objects(ids, b, d));
    let i = inner.clone();
    mock.expect_read_ref()
        .returning(move |n, d| i.read_ref(n, d));
    let i = inner.clone();
    mock.expect_list_refs()
        .returning(move |p, d| i.list_refs(p, d));
    let i = inner.clone();
    let create_fault = faults.create_ref;
    mock.expect_create_ref().returning(move |name, value, d| {
        if let Some(result) = create_fault
            .as_ref()
            .and_then(|f| f(i.as_ref(), name.as_str()))
        {
            return result;
        }
        i.create_ref(name, value, d)
    });
    let i = inner.clone();
    let cas_fault = faults.compare_and_swap;
    mock.expect_compare_and_swap_ref()
        .times(0..=max_cas)
        .returning(move |name, expected, new, d| {
            if let Some(result) = cas_fault
                .as_ref()
                .and_then(|f| f(i.as_ref(), name.as_str()))
            {
                return result;
            }
            i.compare_and_swap_ref(name, expected, new, d)
        });
    mock
}

/// Opens the world's repository through a mock factory handing out a faulty store.
fn open_faulty(world: &World, faults: Faults, max_cas: usize) -> Repository {
    let inner = world.factory.open_store(
        &StoreRoot {
            path: world.identity.path.clone().into(),
            dev: world.identity.dev,
            ino: world.identity.ino,
        },
        &world.identity.to_canonical_bytes(),
        Instant::now() + Duration::from_secs(5),
    );
    let store = faulty(Box::new(inner.unwrap()), faults, max_cas);
    let mut factory = MockObjectStoreFactory::new();
    factory
        .expect_open()
        .return_once(move |_, _, _| Ok(Box::new(store)));
    open_repository(&factory, &world.identity, RepositoryOptions::default()).unwrap()
}

fn gate(
    times: usize,
    answer: impl Fn() -> Result<GateAnswer, GateError> + Send + Sync + 'static,
) -> Arc<MockGate> {
    let mut gate = MockGate::new();
    gate.expect_current()
        .times(times)
        .returning(move |_| answer());
    Arc::new(gate)
}

fn allow(times: usize) -> Arc<MockGate> {
    gate(times, || Ok(GateAnswer::Proceed))
}

#[test]
fn an_unknown_compare_and_swap_is_unknown_and_dispatched() {
    let world = new_world();
    let repo = open_faulty(
        &world,
        Faults {
            compare_and_swap: Some(Box::new(|_, _| {
                Some(Ok(RefUpdate::Unknown {
                    reason: "git was killed".into(),
                }))
            })),
            ..Faults::default()
        },
        1,
    );
    let observed = repo
        .invoke_once(
            &world.prepared,
            &sf_tests::assumed(&world.prepared),
            Some(allow(1)),
        )
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Unknown);
    assert!(observed.dispatched);
    assert!(
        observed
            .problem
            .as_deref()
            .unwrap()
            .contains("git was killed")
    );
    assert!(observed.receipt.is_none());
    // Nothing resolves it later, and nothing retries.
    let later = world
        .repo
        .invoke_once(&world.prepared, &sf_tests::assumed(&world.prepared), None)
        .unwrap();
    assert_eq!(later.invocation, Invocation::Unknown);
    assert!(!later.dispatched);
}

#[test]
fn a_refused_compare_and_swap_is_unknown_not_failed() {
    let world = new_world();
    let repo = open_faulty(
        &world,
        Faults {
            compare_and_swap: Some(Box::new(|_, _| {
                Some(Ok(RefUpdate::Refused { current: None }))
            })),
            ..Faults::default()
        },
        1,
    );
    let observed = repo
        .invoke_once(&world.prepared, &sf_tests::assumed(&world.prepared), None)
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Unknown);
    assert!(observed.dispatched);
}

#[test]
fn a_compare_and_swap_error_before_spawn_is_err_and_the_claim_stays() {
    let world = new_world();
    let repo = open_faulty(
        &world,
        Faults {
            compare_and_swap: Some(Box::new(|_, _| {
                Some(Err(ObjectStoreError::Unavailable {
                    reason: "root replaced".into(),
                }))
            })),
            ..Faults::default()
        },
        1,
    );
    let error = repo
        .invoke_once(
            &world.prepared,
            &sf_tests::assumed(&world.prepared),
            Some(allow(1)),
        )
        .unwrap_err();
    assert_eq!(error.code(), "unavailable");
    let seen = world.repo.inspect_integration(&world.prepared).unwrap();
    assert_eq!(seen.invocation, Invocation::Unknown);
    assert!(seen.dispatch.is_some());
    assert_eq!(world.repo.target().unwrap(), world.identity.initial);
}

#[test]
fn a_receipt_that_cannot_be_written_keeps_confirmed() {
    let world = new_world();
    let repo = open_faulty(
        &world,
        Faults {
            create_ref: Some(Box::new(|_, name| {
                name.ends_with("/receipt").then(|| {
                    Err(ObjectStoreError::Unavailable {
                        reason: "disk full".into(),
                    })
                })
            })),
            ..Faults::default()
        },
        1,
    );
    let observed = repo
        .invoke_once(&world.prepared, &sf_tests::assumed(&world.prepared), None)
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Confirmed);
    assert!(observed.dispatched);
    assert!(observed.receipt.is_none());
    assert!(
        observed.problem.as_deref().unwrap().contains("disk full"),
        "{observed:?}"
    );
    // Later inspection reports what it reads: a claim without a receipt is unknown.
    assert_eq!(
        world
            .repo
            .inspect_integration(&world.prepared)
            .unwrap()
            .invocation,
        Invocation::Unknown
    );
    assert_eq!(world.repo.target().unwrap(), world.prepared.payload.commit);
}

#[test]
fn a_receipt_object_write_failure_keeps_confirmed() {
    let world = new_world();
    // Writes: 0 = the claim's objects, 1 = the receipt's.
    let repo = open_faulty(
        &world,
        Faults {
            write_objects: Some(Box::new(|n| {
                (n == 1).then(|| {
                    Err(ObjectStoreError::Failed {
                        operation: "unpack-objects".into(),
                        detail: "EIO".into(),
                    })
                })
            })),
            ..Faults::default()
        },
        1,
    );
    let observed = repo
        .invoke_once(&world.prepared, &sf_tests::assumed(&world.prepared), None)
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Confirmed);
    assert!(observed.receipt.is_none() && observed.problem.is_some());
}

#[test]
fn a_claim_write_failure_is_err_and_starts_nothing() {
    let world = new_world();
    let repo = open_faulty(
        &world,
        Faults {
            write_objects: Some(Box::new(|_| {
                Some(Err(ObjectStoreError::Unavailable {
                    reason: "gone".into(),
                }))
            })),
            ..Faults::default()
        },
        0,
    );
    assert_eq!(
        repo.invoke_once(
            &world.prepared,
            &sf_tests::assumed(&world.prepared),
            Some(allow(0))
        )
        .unwrap_err()
        .code(),
        "unavailable"
    );
    assert_eq!(
        world
            .repo
            .inspect_integration(&world.prepared)
            .unwrap()
            .invocation,
        Invocation::NotDispatched
    );
}

#[test]
fn an_unacknowledged_claim_is_git_failed_and_starts_nothing() {
    let world = new_world();
    let repo = open_faulty(
        &world,
        Faults {
            create_ref: Some(Box::new(|_, name| {
                name.ends_with("/dispatch").then(|| {
                    Ok(RefUpdate::Unknown {
                        reason: "timed out".into(),
                    })
                })
            })),
            ..Faults::default()
        },
        0,
    );
    let error = repo
        .invoke_once(
            &world.prepared,
            &sf_tests::assumed(&world.prepared),
            Some(allow(0)),
        )
        .unwrap_err();
    assert_eq!(error.code(), "git-failed", "{error}");
    assert_eq!(world.repo.target().unwrap(), world.identity.initial);
}

#[test]
fn a_gate_that_refuses_fails_or_answers_late_withholds() {
    let late_bound = Duration::from_millis(1000);
    let cases: Vec<(&str, Arc<MockGate>, &str)> = vec![
        (
            "refuses",
            gate(1, || {
                Ok(GateAnswer::Refuse {
                    reason: "closed".into(),
                })
            }),
            "withheld before submission: closed",
        ),
        (
            "fails",
            gate(1, || Err(GateError::Timeout)),
            "withheld before submission: the guard failed",
        ),
        (
            "malformed",
            gate(1, || {
                Ok(GateAnswer::Refuse {
                    reason: "x".repeat(sf_host::contracts::MAX_REASON_CHARS + 1),
                })
            }),
            "withheld before submission: the guard answered neither",
        ),
        (
            "late",
            gate(1, move || {
                std::thread::sleep(Duration::from_millis(2500));
                Ok(GateAnswer::Proceed)
            }),
            "withheld before submission: the guard did not answer within 1000 ms",
        ),
    ];
    for (name, gate, problem) in cases {
        let world = new_world();
        let options = RepositoryOptions {
            git_timeout: if name == "late" {
                late_bound
            } else {
                Duration::from_secs(30)
            },
            ..RepositoryOptions::default()
        };
        let repo = open_repository(&world.factory, &world.identity, options).unwrap();
        let observed = repo
            .invoke_once(
                &world.prepared,
                &sf_tests::assumed(&world.prepared),
                Some(gate.clone()),
            )
            .unwrap();
        assert_eq!(observed.invocation, Invocation::Withheld, "{name}");
        assert!(
            !observed.dispatched && observed.dispatch.is_some(),
            "{name}"
        );
        assert!(
            observed.problem.as_deref().unwrap().starts_with(problem),
            "{name}: {:?}",
            observed.problem
        );
        assert_eq!(
            world.repo.target().unwrap(),
            world.identity.initial,
            "{name}: moved"
        );
        // Consulted exactly once: the mock's `times(1)` is checked at its checkpoint, once the
        // guard thread (abandoned, for the late case) has let go of its clone.
        drop(repo);
        let waited = Instant::now();
        while Arc::strong_count(&gate) > 1 && waited.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        Arc::try_unwrap(gate).ok().unwrap().checkpoint();
    }
}

#[test]
fn the_gate_is_never_consulted_by_a_replay_a_stale_base_or_a_losing_claimant() {
    // Replay.
    let world = new_world();
    world
        .repo
        .invoke_once(&world.prepared, &sf_tests::assumed(&world.prepared), None)
        .unwrap();
    let replay = world
        .repo
        .invoke_once(
            &world.prepared,
            &sf_tests::assumed(&world.prepared),
            Some(allow(0)),
        )
        .unwrap();
    assert!(!replay.dispatched);
    // Stale base: another intent moved the target.
    let world = world_with_stale_base();
    let stale = world
        .repo
        .invoke_once(
            &world.prepared,
            &sf_tests::assumed(&world.prepared),
            Some(allow(0)),
        )
        .unwrap();
    assert_eq!(stale.invocation, Invocation::NotDispatched);
    // Losing claimant: between this call's read and its claim, another call claims and
    // moves the target.
    let world = new_world();
    let rival = open_repository(
        &world.factory,
        &world.identity,
        RepositoryOptions::default(),
    )
    .unwrap();
    let prepared = world.prepared.clone();
    let rival_done = std::sync::Mutex::new(false);
    let repo = open_faulty(
        &world,
        Faults {
            create_ref: Some(Box::new(move |_, name| {
                if name.ends_with("/dispatch")
                    && !std::mem::replace(&mut *rival_done.lock().unwrap(), true)
                {
                    let won = rival
                        .invoke_once(&prepared, &sf_tests::assumed(&prepared), None)
                        .unwrap();
                    assert_eq!(won.invocation, Invocation::Confirmed);
                }
                None
            })),
            ..Faults::default()
        },
        0,
    );
    let lost = repo
        .invoke_once(
            &world.prepared,
            &sf_tests::assumed(&world.prepared),
            Some(allow(0)),
        )
        .unwrap();
    assert!(!lost.dispatched, "{lost:?}");
    assert_eq!(
        lost.invocation,
        Invocation::Confirmed,
        "it reports the winner's receipt"
    );
}

fn world_with_stale_base() -> World {
    let world = new_world();
    let other = world
        .repo
        .seal(
            &frozen(world.identity.initial, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("other\n"))]),
        )
        .unwrap();
    let other = world
        .repo
        .prepare_integration(&payload(&world.identity, &other, "other", 1))
        .unwrap();
    assert_eq!(
        world
            .repo
            .invoke_once(&other, &sf_tests::assumed(&other), None)
            .unwrap()
            .invocation,
        Invocation::Confirmed
    );
    world
}
