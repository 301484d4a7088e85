//! The attempt fence on PostgreSQL through the `sf` binary: eight `sf collect` processes on
//! eight Candidates of one Product, all started at once against one database. Each takes its
//! own Candidate's fence, so none is refused and the server sees several holders at once (its
//! lock table is watched throughout); the eight holds get the Product's epochs 1 to 8, every
//! record is stored exactly once (counted in the database), and each Verdict judged from
//! PostgreSQL is the one the SQLite store gives for the same Candidate.

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

/// `sf collect` of `candidate` into the store `config` names: its result (a refusal fails
/// the test).
fn collect(work: &Work, config: &str, candidate: &str) -> serde_json::Value {
    Envelope::parse(collect_command(work, config, candidate).output().unwrap())
        .result()
        .clone()
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
fn eight_collectors_of_one_product_hold_their_candidates_fences_at_once_and_store_every_record_once()
 {
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
    let results: Vec<serde_json::Value> = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                most.fetch_max(holders(&cluster, &database), Ordering::SeqCst);
            }
        });
        let collectors: Vec<_> = candidates
            .iter()
            .map(|candidate| {
                let (work, pg) = (&work, &pg);
                scope.spawn(move || collect(work, pg, candidate))
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
    // Different Candidates never wait for each other: none was refused, and the server saw
    // holds side by side.
    assert!(
        most.load(Ordering::SeqCst) > 1,
        "eight collectors started at once never held together"
    );
    let mut epochs: Vec<u64> = results
        .iter()
        .map(|result| result["attempt"]["epoch"].as_u64().expect("an epoch"))
        .collect();
    epochs.sort_unstable();
    assert_eq!(epochs, (1..=8).collect::<Vec<u64>>(), "one epoch per hold");
    // The Product's row holds the last epoch; each Candidate's row its hold's, ended and
    // recorded so; nothing holds a fence now.
    let product: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.dir.join("identity.json")).unwrap()).unwrap();
    let product = product["productId"].as_str().unwrap();
    assert_eq!(
        cluster.psql(
            &database.name,
            &format!("SELECT epoch FROM sf_fence WHERE product = '{product}'")
        ),
        "8"
    );
    assert_eq!(
        cluster.psql(
            &database.name,
            &format!(
                "SELECT count(*) || ' ' || bool_and(released_at IS NOT NULL) || ' ' || \
                 string_agg(epoch::text, ',' ORDER BY epoch) FROM sf_fence \
                 WHERE product LIKE '{product}@sha256:%'"
            )
        ),
        "8 true 1,2,3,4,5,6,7,8"
    );
    assert_eq!(holders(&cluster, &database), 0);

    // Every record stored once: one row per run, no id twice, each whole.
    let runs: usize = results
        .iter()
        .map(|result| result["runs"].as_array().expect("runs").len())
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
