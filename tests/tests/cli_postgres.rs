//! The PostgreSQL evidence store through the `sf` binary, on a throwaway cluster: a Slice's
//! records collected into SQLite are migrated into PostgreSQL (each re-verified; a second run
//! copies nothing), and the Verdict judged from PostgreSQL is the one judged from SQLite;
//! collecting straight into PostgreSQL stores each record once (counted in the database); a
//! collector killed mid-collection leaves only whole records; a server lost mid-collection
//! stops it (its fence hold lost with the server: `unavailable`) without a Verdict and loses
//! nothing stored.

mod land_support;
mod pg_support;

use land_support::{SUM_FIXED, Work, write};
use pg_support::{SCHEMA, collect_command, config, judge};
use sf_test_support::postgres::{PgCluster, PgDatabase};
use sf_tests::plugins::Envelope;

#[test]
fn records_migrate_from_sqlite_once_and_judge_the_same_from_postgresql() {
    let cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA);
    let work = Work::new();
    let candidate = work.seal("slice", SUM_FIXED);
    let sqlite = work.collect_and_judge(&candidate, "slice");
    assert_eq!(sqlite["outcome"], "verified", "{sqlite}");
    let pg = config(&work, "pg.toml", &cluster, &database);

    let migrated = work.sf(&["evidence", "migrate", "--from", "slice", "--to", &pg]);
    let migrated = migrated.result();
    let records = migrated["records"].as_u64().unwrap();
    assert!(records >= 3, "{migrated}");
    assert_eq!(migrated["copied"].as_u64(), Some(records));
    assert_eq!(migrated["alreadyThere"], 0);
    assert_eq!(
        cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence"),
        records.to_string()
    );
    let again = work.sf(&["evidence", "migrate", "--from", "slice", "--to", &pg]);
    assert_eq!(again.result()["copied"], 0);
    assert_eq!(again.result()["alreadyThere"].as_u64(), Some(records));

    // The same Verdict, byte for byte, judged from the other store.
    assert_eq!(judge(&work, &candidate, Some(&pg)), sqlite);

    // A second Candidate collected straight into PostgreSQL: one row per record.
    let second = work.seal("slice", &format!("{SUM_FIXED}# again\n"));
    let collected = Envelope::parse(collect_command(&work, &pg, &second).output().unwrap());
    let runs = collected.result()["runs"].as_array().unwrap().len();
    assert_eq!(judge(&work, &second, Some(&pg))["outcome"], "verified");
    assert_eq!(
        cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence"),
        (records as usize + runs).to_string()
    );
    assert_eq!(
        cluster.psql(
            &database.name,
            "SELECT count(*) - count(DISTINCT id) FROM sf_evidence"
        ),
        "0"
    );
}

/// A working directory whose Slice has three command checks: a quick one, one that sleeps four
/// seconds, and a quick one.
fn slow_slice() -> Work {
    let work = Work::unfrozen();
    let slice = work.author_slice("slice", &[]);
    let check = |id: &str, argv: &[&str]| {
        serde_json::json!({
            "kind": "command", "id": id, "phase": "guardrail", "stage": "candidate",
            "argv": argv, "cwd": {"from": "scratch", "path": ""}, "env": {},
            "environment": null, "results": null, "input": "numbers",
            "expectation": {"exitCode": 0, "stdoutDigest": null},
        })
    };
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({"protocol": "sf-repository-acceptance/3", "checks": [
            check("quick", &["true"]),
            check("slow", &["sleep", "4"]),
            check("after", &["true"]),
        ]})
        .to_string(),
    );
    work.freeze("slice").result();
    work
}

/// `sf --config CONFIG collect` of `candidate` under `slice/`, started and not waited for.
fn spawn_collect(work: &Work, config: &str, candidate: &str) -> std::process::Child {
    collect_command(work, config, candidate)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (at most a minute) until the database holds `count` records.
fn wait_for_records(cluster: &PgCluster, database: &PgDatabase, count: usize) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence") != count.to_string() {
        assert!(
            std::time::Instant::now() < until,
            "{count} records never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_collector_killed_mid_collection_leaves_only_whole_records() {
    let cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA);
    let work = slow_slice();
    let candidate = work.seal("slice", SUM_FIXED);
    let pg = config(&work, "pg.toml", &cluster, &database);
    let mut child = spawn_collect(&work, &pg, &candidate);
    wait_for_records(&cluster, &database, 1);
    child.kill().unwrap();
    child.wait().unwrap();
    // Every row is a whole record: it hashes to its id (checked in the database itself).
    assert_eq!(
        cluster.psql(
            &database.name,
            "SELECT count(*) FROM sf_evidence WHERE id <> 'sha256:' || encode(sha256(record), 'hex')"
        ),
        "0"
    );
    assert_eq!(
        cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence"),
        "1"
    );
    // And sf reads it back whole.
    let verdict = judge(&work, &candidate, Some(&pg));
    assert_eq!(verdict["outcome"], "inconclusive", "{verdict}");
}

#[test]
fn a_server_lost_mid_collection_stops_it_without_a_verdict_and_loses_nothing_stored() {
    let mut cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA);
    let work = slow_slice();
    let candidate = work.seal("slice", SUM_FIXED);
    let pg = config(&work, "pg.toml", &cluster, &database);
    let child = collect_command(&work, &pg, &candidate)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first record is stored (the slow check is running), the server goes away.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence") != "1" {
        assert!(
            std::time::Instant::now() < until,
            "the first record never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    cluster.stop();
    let output = child.wait_with_output().unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("not an envelope: {output:?}"));
    // The fence is on the same server: the hold's session is lost with it, so the
    // collection stops before the slow check's record is put (nothing runs or is stored
    // under a hold that cannot be confirmed), and no Verdict is issued. The fence cannot be
    // reached either, so the stop is `unavailable` (exit 9: retry later), not `released`.
    assert_eq!(envelope["ok"], false, "{envelope}");
    assert_eq!(envelope["error"]["code"], "unavailable", "{envelope}");
    assert_eq!(
        output.status.code(),
        Some(i32::from(sf_cli::EXIT_UNAVAILABLE)),
        "{envelope}"
    );
    let message = envelope["error"]["message"].as_str().unwrap();
    for needle in [
        "the session holding the fence was lost",
        "the fence cannot be reached now",
        "the 1 record(s) stored before it stand",
    ] {
        assert!(message.contains(needle), "{needle:?}: {envelope}");
    }

    // Back up (on another port): the record stored before is there, exactly once, and the
    // attempt judges Inconclusive, never Verified.
    cluster.restart();
    assert_eq!(
        cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence"),
        "1"
    );
    let pg = config(&work, "pg-again.toml", &cluster, &database);
    let verdict = judge(&work, &candidate, Some(&pg));
    assert_eq!(verdict["outcome"], "inconclusive", "{verdict}");
}
