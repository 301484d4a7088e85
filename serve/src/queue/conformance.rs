//! What every [`QueueStore`] must do, as functions over an [`Opener`]: each store's tests
//! run them all through [`conformance_tests!`], SQLite in a temporary directory and PostgreSQL
//! on a throwaway cluster, so that the two answer alike.

use super::{End, Kind, Opener, Sealing};
use crate::state::State;

/// One `#[test]` per case, each given the `(guard, Opener)` that `$open` makes afresh (the
/// guard keeps what the opener points at, a directory or a database, until the test ends).
macro_rules! conformance_tests {
    ($open:expr) => {
        $crate::queue::conformance::conformance_tests!(
            $open;
            a_proposal_goes_through_its_states_and_survives_a_reopen,
            each_base_is_a_sealing_of_its_own_and_the_mirror_follows_the_one_stood_on,
            a_client_at_its_limit_queues_nothing_more_until_one_ends,
            two_threads_of_one_client_never_pass_its_limit,
            the_pages_read_every_proposal_newest_first,
        );
    };
    ($open:expr; $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                let (_keep, opener) = $open;
                $crate::queue::conformance::$case(&opener);
            }
        )+
    };
}
pub(crate) use conformance_tests;

fn sealing(candidate: &str) -> Sealing<'_> {
    Sealing {
        frozen_slice: "/s",
        candidate,
        commit: "m",
    }
}

fn ended(state: State) -> End {
    End {
        state,
        verdict: None,
        reasons: Vec::new(),
        error: None,
    }
}

pub(crate) fn a_proposal_goes_through_its_states_and_survives_a_reopen(opener: &Opener) {
    let mut queue = opener.open().unwrap();
    for id in ["a", "b"] {
        assert!(
            queue
                .insert_within(id, "te", "s", Kind::Diff, b"diff\0bytes", "agent", 10)
                .unwrap()
        );
    }
    assert_eq!(queue.next_open("te").unwrap().unwrap().id, "a");
    queue.set_state("a", State::Sealing).unwrap();
    let sealed = queue
        .add_sealing("a", "t", Ok(&sealing("sha256:c")))
        .unwrap();
    queue.stand_on("a", &sealed).unwrap();
    drop(queue);
    let mut queue = opener.open().unwrap();
    let a = queue.get("a").unwrap().unwrap();
    assert_eq!(
        (a.state, a.kind, a.body.as_slice()),
        (State::Collecting, Kind::Diff, &b"diff\0bytes"[..])
    );
    assert_eq!(
        (a.repository.as_str(), a.slice.as_str(), a.client.as_str()),
        ("te", "s", "agent")
    );
    assert_eq!(a.candidate.as_deref(), Some("sha256:c"));
    assert_eq!((a.generation, a.base.as_deref()), (1, Some("t")));
    assert_eq!(
        (a.frozen_slice.as_deref(), a.commit.as_deref()),
        (Some("/s"), Some("m"))
    );
    let end = End {
        state: State::Failed,
        verdict: Some(serde_json::json!({"outcome": "failed"})),
        reasons: vec!["check x missed".into()],
        error: Some(serde_json::json!({"code": "c", "message": "m"})),
    };
    queue.finish("a", &end).unwrap();
    let a = queue.get("a").unwrap().unwrap();
    assert_eq!(
        (a.state, a.reasons, a.error),
        (State::Failed, end.reasons, end.error)
    );
    assert_eq!(queue.next_open("te").unwrap().unwrap().id, "b");
    assert_eq!(queue.verdicts().unwrap(), vec![("failed".into(), 1)]);
    assert_eq!(queue.depths().unwrap(), vec![("te".into(), 1)]);
    assert_eq!(queue.times_in_queue().unwrap().len(), 1);
    assert!(queue.next_open("other").unwrap().is_none());
    assert!(queue.get("none").unwrap().is_none());
    assert!(
        queue.sealings_of("te").unwrap().is_empty(),
        "only open ones"
    );
}

pub(crate) fn each_base_is_a_sealing_of_its_own_and_the_mirror_follows_the_one_stood_on(
    opener: &Opener,
) {
    let mut queue = opener.open().unwrap();
    queue
        .insert_within("a", "te", "s", Kind::Diff, b"d", "agent", 10)
        .unwrap();
    let on_ahead = queue
        .add_sealing("a", "ahead", Ok(&sealing("sha256:c1")))
        .unwrap();
    let refusal = serde_json::json!({"code": "conflict", "message": "does not apply"});
    let refused = queue.add_sealing("a", "other", Err(&refusal)).unwrap();
    let on_target = queue
        .add_sealing("a", "t", Ok(&sealing("sha256:c2")))
        .unwrap();
    assert_eq!(
        (on_ahead.number, refused.number, on_target.number),
        (1, 2, 3)
    );
    assert_eq!(refused.refusal, Some(refusal));
    assert_eq!(queue.sealings_for("a").unwrap()[1], refused);
    assert!(
        queue.add_sealing("a", "t", Ok(&sealing("x"))).is_err(),
        "one per base"
    );
    // A refused insert left the handle usable.
    assert_eq!(queue.sealings_for("a").unwrap().len(), 3);
    queue.stand_on("a", &on_ahead).unwrap();
    // The sealing on the target is collected while the proposal stands on the other.
    let trial = serde_json::json!({"outcome": "verified"});
    queue.collected("a", 3, Some(7), &trial).unwrap();
    let a = queue.get("a").unwrap().unwrap();
    assert_eq!((a.generation, a.attempt, a.trial), (1, None, None));
    let rows = queue.sealings_of("te").unwrap();
    let row = rows.iter().find(|row| row.number == 3).unwrap().clone();
    assert_eq!(
        (row.attempt, row.trial.clone()),
        (Some(7), Some(trial.clone()))
    );
    // Standing on it takes its collection along.
    queue.stand_on("a", &row).unwrap();
    let a = queue.get("a").unwrap().unwrap();
    assert_eq!((a.generation, a.base.as_deref()), (3, Some("t")));
    assert_eq!((a.attempt, a.trial), (Some(7), Some(trial)));
    queue.leave("a").unwrap();
    let a = queue.get("a").unwrap().unwrap();
    assert_eq!(
        (a.state, a.candidate, a.trial),
        (State::Sealing, None, None)
    );
    // A collection that ended after the sealing was read is taken along all the same.
    let failed = serde_json::json!({"outcome": "failed"});
    queue.collected("a", 1, Some(5), &failed).unwrap();
    queue.stand_on("a", &on_ahead).unwrap();
    let a = queue.get("a").unwrap().unwrap();
    assert_eq!(
        (a.generation, a.attempt, a.trial),
        (1, Some(5), Some(failed))
    );
    queue.stand_on("a", &row).unwrap();
    // A landing that started never stands elsewhere.
    queue.set_state("a", State::Landing).unwrap();
    queue.stand_on("a", &on_ahead).unwrap();
    queue.leave("a").unwrap();
    let a = queue.get("a").unwrap().unwrap();
    assert_eq!((a.state, a.generation), (State::Landing, 3));
    // Nor one that ended.
    queue.finish("a", &ended(State::Refused)).unwrap();
    queue.stand_on("a", &on_ahead).unwrap();
    assert_eq!(queue.get("a").unwrap().unwrap().state, State::Refused);
}

pub(crate) fn a_client_at_its_limit_queues_nothing_more_until_one_ends(opener: &Opener) {
    let mut queue = opener.open().unwrap();
    let mut put = |id: &str, client: &str| {
        queue
            .insert_within(id, "te", "s", Kind::Diff, b"d", client, 2)
            .unwrap()
    };
    assert!(put("a", "one"));
    assert!(put("b", "one"));
    assert!(!put("c", "one"));
    assert!(put("d", "two"));
    assert!(queue.get("c").unwrap().is_none());
    queue.finish("a", &ended(State::Refused)).unwrap();
    assert!(
        queue
            .insert_within("c", "te", "s", Kind::Diff, b"d", "one", 2)
            .unwrap()
    );
}

/// Two threads, each with its own handle, queue for one client as fast as they can, starting
/// together, client after client: the count and the insert are one transaction, so together
/// they never pass the limit.
pub(crate) fn two_threads_of_one_client_never_pass_its_limit(opener: &Opener) {
    const LIMIT: usize = 3;
    const CLIENTS: usize = 20;
    // Made before the threads race: SQLite's first open sets the journal mode and creates
    // the tables, which two first opens at once may find busy.
    let mut queue = opener.open().unwrap();
    let barrier = std::sync::Barrier::new(2);
    let outcomes: Vec<(usize, Vec<String>)> = std::thread::scope(|scope| {
        let threads: Vec<_> =
            ["x", "y"]
                .into_iter()
                .map(|thread| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let mut queue = opener.open();
                        let (mut stored, mut errors) = (0, Vec::new());
                        for client in 0..CLIENTS {
                            // An error is kept, not raised: the other thread waits here.
                            barrier.wait();
                            for n in 0..2 * LIMIT {
                                let id = format!("{thread}{client}-{n}");
                                let put = queue.as_mut().map_err(|error| error.clone()).and_then(
                                    |queue| {
                                        let client = client.to_string();
                                        queue.insert_within(
                                            &id,
                                            "te",
                                            "s",
                                            Kind::Diff,
                                            b"d",
                                            &client,
                                            LIMIT,
                                        )
                                    },
                                );
                                match put {
                                    Ok(true) => stored += 1,
                                    Ok(false) => {}
                                    Err(error) => errors.push(error),
                                }
                            }
                        }
                        (stored, errors)
                    })
                })
                .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .collect()
    });
    let errors: Vec<&String> = outcomes.iter().flat_map(|(_, errors)| errors).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let stored: usize = outcomes.iter().map(|(stored, _)| stored).sum();
    assert_eq!(stored, LIMIT * CLIENTS);
    assert_eq!(
        queue.counts().unwrap(),
        vec![("queued".into(), (LIMIT * CLIENTS) as u64)]
    );
}

pub(crate) fn the_pages_read_every_proposal_newest_first(opener: &Opener) {
    let mut queue = opener.open().unwrap();
    for id in ["a", "b", "c"] {
        queue
            .insert_within(id, "te", "s", Kind::Proposal, b"{}", "agent", 10)
            .unwrap();
    }
    queue.set_state("b", State::Sealing).unwrap();
    let ids: Vec<String> = queue
        .list(2)
        .unwrap()
        .into_iter()
        .map(|entry| entry.id)
        .collect();
    assert_eq!(ids, ["c", "b"]);
    let mut counts = queue.counts().unwrap();
    counts.sort();
    assert_eq!(counts, vec![("queued".into(), 2), ("sealing".into(), 1)]);
    assert_eq!(queue.get("a").unwrap().unwrap().kind, Kind::Proposal);
    assert!(queue.verdicts().unwrap().is_empty());
    assert!(queue.times_in_queue().unwrap().is_empty());
}
