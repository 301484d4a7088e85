//! The attempt fence on PostgreSQL through the `sf` binary: eight `sf collect` processes on
//! eight Candidates of one Product, all started at once against one database, race for the
//! Product's one fence. The server never sees two holders at a time (its lock table is
//! watched throughout), the losers are refused `busy` and try again, the eight holds get the
//! epochs 1 to 8, every record is stored exactly once (counted in the database), and each
//! Verdict judged from PostgreSQL is the one the SQLite store gives for the same Candidate.

mod land_support;
mod pg_support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use land_support::{SUM_BUGGY, SUM_FIXED, SUM_NOT_FIXED, Work};
use pg_support::{SCHEMA, collect_command, config, judge};
use sf_test_support::postgres::{PgCluster, PgDatabase};
use sf_tests::plugins::Envelope;

/// How many advisory locks (fence holds) sessions hold in `database` right now.
fn holders(cluster: &PgCluster, database: &PgDatabase) -> usize {
    cluster
        .psql(
            "postgres",
            &format!(
                "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
                 WHERE l.locktype = 'advisory' AND l.granted AND d.datname = '{}'",
                database.name
            ),
        )
        .parse()
        .expect("a count")
}

/// `sf collect` of `candidate` into the store `config` names, tried again while the fence is
/// `busy`: the collection's result, and how many times it was refused first.
fn collect_when_free(work: &Work, config: &str, candidate: &str) -> (serde_json::Value, usize) {
    let mut refused = 0;
    loop {
        let envelope = Envelope::parse(collect_command(work, config, candidate).output().unwrap());
        if envelope.json["ok"] == false && envelope.json["error"]["code"] == "busy" {
            refused += 1;
            assert!(refused < 2000, "never got the fence: {}", envelope.json);
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        return (envelope.result().clone(), refused);
    }
}

/// A Verdict without what differs between two stores' attempts at the same runs (the
/// attempt's epoch and the ids of the records, which name it).
fn comparable(verdict: &serde_json::Value) -> serde_json::Value {
    match verdict {
        serde_json::Value::Object(map) => map
            .iter()
            .filter(|(key, _)| !matches!(key.as_str(), "attempt" | "record"))
            .map(|(key, value)| (key.clone(), comparable(value)))
            .collect(),
        serde_json::Value::Array(items) => items.iter().map(comparable).collect(),
        other => other.clone(),
    }
}

#[test]
fn eight_collectors_of_one_product_take_its_fence_one_at_a_time_and_store_every_record_once() {
    let cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA);
    let work = Work::new();
    let pg = config(&work, "pg.toml", &cluster, &database);
    let sums = [SUM_FIXED, SUM_BUGGY, SUM_NOT_FIXED];
    let candidates: Vec<String> = (0..8)
        .map(|n| {
            work.seal(
                "slice",
                &format!("{}# candidate {n}\n", sums[n % sums.len()]),
            )
        })
        .collect();

    // The race, watched from the server.
    let done = AtomicBool::new(false);
    let most = AtomicUsize::new(0);
    let results: Vec<(serde_json::Value, usize)> = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                most.fetch_max(holders(&cluster, &database), Ordering::SeqCst);
            }
        });
        let collectors: Vec<_> = candidates
            .iter()
            .map(|candidate| {
                let (work, pg) = (&work, &pg);
                scope.spawn(move || collect_when_free(work, pg, candidate))
            })
            .collect();
        let results = collectors
            .into_iter()
            .map(|collector| collector.join().expect("a collector thread"))
            .collect();
        done.store(true, Ordering::SeqCst);
        watcher.join().expect("the watcher");
        results
    });
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "the server saw a holder, and never two"
    );
    let refused: usize = results.iter().map(|(_, refused)| refused).sum();
    assert!(refused > 0, "eight collectors started at once never met");
    let mut epochs: Vec<u64> = results
        .iter()
        .map(|(result, _)| result["attempt"]["epoch"].as_u64().expect("an epoch"))
        .collect();
    epochs.sort_unstable();
    assert_eq!(epochs, (1..=8).collect::<Vec<u64>>(), "one epoch per hold");
    // The lease: the last hold's epoch, ended and recorded so; nothing holds the fence now.
    assert_eq!(
        cluster.psql(
            &database.name,
            "SELECT epoch || ' ' || (released_at IS NOT NULL) FROM sf_fence"
        ),
        "8 true"
    );
    assert_eq!(holders(&cluster, &database), 0);

    // Every record stored once: one row per run, no id twice, each whole.
    let runs: usize = results
        .iter()
        .map(|(result, _)| result["runs"].as_array().expect("runs").len())
        .sum();
    assert!(runs >= 8, "{results:?}");
    assert_eq!(
        cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence"),
        runs.to_string()
    );
    assert_eq!(
        cluster.psql(
            &database.name,
            "SELECT count(*) - count(DISTINCT id) FROM sf_evidence"
        ),
        "0"
    );
    assert_eq!(
        cluster.psql(
            &database.name,
            "SELECT count(*) FROM sf_evidence \
             WHERE id <> 'sha256:' || encode(sha256(record), 'hex')"
        ),
        "0"
    );

    // Each Verdict from PostgreSQL is the one SQLite gives for the same Candidate's runs.
    let mut outcomes = Vec::new();
    for candidate in &candidates {
        let from_postgres = judge(&work, candidate, Some(&pg));
        let from_sqlite = work.collect_and_judge(candidate, "slice");
        assert_eq!(
            comparable(&from_postgres),
            comparable(&from_sqlite),
            "{candidate}: {from_postgres} {from_sqlite}"
        );
        outcomes.push(from_postgres["outcome"].as_str().unwrap_or("").to_owned());
    }
    assert!(
        outcomes.iter().any(|outcome| outcome == "verified"),
        "{outcomes:?}"
    );
    assert!(
        outcomes.iter().any(|outcome| outcome == "failed"),
        "{outcomes:?}"
    );
}
