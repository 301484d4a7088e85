//! A Candidate with one damaged evidence record, through the `sf` binary, on SQLite and on
//! PostgreSQL: the attempt that lacks the record judges Inconclusive naming it; a new
//! collection (a new attempt) is the way forward and judges Verified on its own records; the
//! damaged record is still reported by `sf judge`, never read as evidence, and left exactly
//! as it was.

mod land_support;
mod pg_support;

use land_support::{SUM_FIXED, Work, on};
use pg_support::{SCHEMA, collect_command, config};
use sf_test_support::postgres::{PgCluster, PgDatabase};
use sf_tests::plugins::Envelope;

/// `sf collect` of `candidate` (with `config` when given); the ids it stored.
fn collect(work: &Work, candidate: &str, config: Option<&str>) -> Vec<String> {
    let collected = match config {
        Some(config) => Envelope::parse(collect_command(work, config, candidate).output().unwrap()),
        None => {
            let mut args = vec!["collect"];
            args.extend(on(candidate));
            work.sf(&args)
        }
    };
    let ids = collected.result()["evidence"].as_array().unwrap().clone();
    ids.iter()
        .map(|id| id.as_str().unwrap().to_owned())
        .collect()
}

/// `sf judge` of `candidate` (with `config`, and `--attempt` when given): the whole result.
fn judge(
    work: &Work,
    candidate: &str,
    config: Option<&str>,
    attempt: Option<&str>,
) -> serde_json::Value {
    let mut args = Vec::new();
    if let Some(config) = config {
        args.extend(["--config", config]);
    }
    args.push("judge");
    args.extend(on(candidate));
    if let Some(attempt) = attempt {
        args.extend(["--attempt", attempt]);
    }
    work.sf(&args).result().clone()
}

/// What both stores must show, `damage` having damaged the record it is given (one of the
/// first attempt's) and `bytes` reading a record's stored bytes.
fn damaged_record_then_collect_again(
    work: &Work,
    config: Option<&str>,
    damage: impl FnOnce(&str),
    bytes: impl Fn(&str) -> Vec<u8>,
) {
    let candidate = work.seal("slice", SUM_FIXED);
    let first = collect(work, &candidate, config);
    assert!(first.len() >= 2, "{first:?}");
    let damaged = first[1].clone();
    damage(&damaged);
    let kept = bytes(&damaged);

    // The first attempt lacks that record: Inconclusive, the record named.
    let judged = judge(work, &candidate, config, None);
    let verdict = &judged["verdict"];
    assert_eq!(verdict["outcome"], "inconclusive", "{judged}");
    assert_eq!(verdict["attempt"]["epoch"], 1, "{judged}");
    let reasons = verdict["reasons"].to_string();
    assert!(
        reasons.contains(&format!("record {damaged} cannot be read")),
        "{judged}"
    );
    assert_eq!(judged["unreadable"][0]["id"], damaged.as_str(), "{judged}");

    // A new collection: a new attempt, judged on its own records.
    let second = collect(work, &candidate, config);
    assert!(second.iter().all(|id| !first.contains(id)), "{second:?}");
    let judged = judge(work, &candidate, config, None);
    let verdict = &judged["verdict"];
    assert_eq!(verdict["outcome"], "verified", "{judged}");
    assert_eq!(verdict["attempt"]["epoch"], 2, "{judged}");
    assert_eq!(verdict["reasons"], serde_json::json!([]), "{judged}");
    // Still reported, never evidence, never repaired.
    let unreadable = judged["unreadable"].as_array().unwrap();
    assert_eq!(unreadable.len(), 1, "{judged}");
    assert_eq!(unreadable[0]["id"], damaged.as_str());
    assert!(
        unreadable[0]["error"].as_str().unwrap().contains("corrupt"),
        "{judged}"
    );
    assert_eq!(
        bytes(&damaged),
        kept,
        "the damaged record was left as it was"
    );

    // The first attempt still judges as it did.
    let again = judge(work, &candidate, config, Some("1"));
    assert_eq!(again["verdict"]["outcome"], "inconclusive", "{again}");
}

/// The SQLite evidence database of the work's Slice.
fn sqlite(work: &Work) -> rusqlite::Connection {
    rusqlite::Connection::open(work.dir.join("slice/state/evidence/evidence.db")).unwrap()
}

/// Flips the last byte of the record `id` in the SQLite database behind sf's back: its
/// write-once triggers dropped and put back with the very text they had.
fn damage_sqlite(work: &Work, id: &str) {
    let connection = sqlite(work);
    let triggers: Vec<(String, String)> = connection
        .prepare(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'evidence'",
        )
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!triggers.is_empty());
    for (name, _) in &triggers {
        connection
            .execute_batch(&format!("DROP TRIGGER {name}"))
            .unwrap();
    }
    let mut bytes: Vec<u8> = connection
        .query_row("SELECT record FROM evidence WHERE id = ?1", [id], |row| {
            row.get(0)
        })
        .unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let changed = connection
        .execute(
            "UPDATE evidence SET record = ?1 WHERE id = ?2",
            rusqlite::params![bytes, id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    for (_, sql) in &triggers {
        connection.execute_batch(sql).unwrap();
    }
}

#[test]
fn sqlite_a_damaged_record_is_reported_and_a_new_collection_is_the_way_forward() {
    let work = Work::new();
    damaged_record_then_collect_again(
        &work,
        None,
        |id| damage_sqlite(&work, id),
        |id| {
            sqlite(&work)
                .query_row("SELECT record FROM evidence WHERE id = ?1", [id], |row| {
                    row.get(0)
                })
                .unwrap()
        },
    );
}

/// The stored bytes of record `id`, as hex.
fn pg_bytes(cluster: &PgCluster, database: &PgDatabase, id: &str) -> Vec<u8> {
    cluster
        .psql(
            &database.name,
            &format!("SELECT encode(record, 'hex') FROM sf_evidence WHERE id = '{id}'"),
        )
        .into_bytes()
}

#[test]
fn postgresql_a_damaged_record_is_reported_and_a_new_collection_is_the_way_forward() {
    let cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA);
    let work = Work::new();
    let pg = config(&work, "pg.toml", &cluster, &database);
    damaged_record_then_collect_again(
        &work,
        Some(&pg),
        |id| {
            // The superuser, with triggers off for the session: what no sf role can do.
            cluster.psql(
                &database.name,
                &format!(
                    "SET session_replication_role = replica; UPDATE sf_evidence SET record = \
                     set_byte(record, length(record) - 1, get_byte(record, length(record) - 1) \
                     # 1) WHERE id = '{id}'"
                ),
            );
        },
        |id| pg_bytes(&cluster, &database, id),
    );
}
