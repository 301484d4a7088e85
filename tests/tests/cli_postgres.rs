//! The PostgreSQL evidence store through the `sf` binary, on a throwaway cluster: a Slice's
//! records collected into SQLite are migrated into PostgreSQL (each re-verified; a second run
//! copies nothing), and the Verdict judged from PostgreSQL is the one judged from SQLite;
//! collecting straight into PostgreSQL stores each record once (counted in the database).

mod land_support;

use land_support::{SUM_FIXED, Work, write};
use sf_test_support::postgres::{PgCluster, PgDatabase};

/// The store's schema, as an administrator runs it.
const SCHEMA: &str = include_str!("../../plugins/postgres/schema.sql");

fn config(work: &Work, name: &str, cluster: &PgCluster, database: &PgDatabase) -> String {
    let path = work.dir.join(name);
    write(
        &path,
        &format!(
            "[evidence_store]\ntype = \"postgres\"\nhost = \"127.0.0.1\"\nport = {}\n\
             database = \"{}\"\nuser = \"{}\"\npassword_file = \"{}\"\n",
            cluster.port(),
            database.name,
            database.role,
            database.password_file.display()
        ),
    );
    name.to_owned()
}

fn judge(work: &Work, candidate: &str, config: Option<&str>) -> serde_json::Value {
    let mut args = Vec::new();
    if let Some(config) = config {
        args.extend(["--config", config]);
    }
    args.extend([
        "judge",
        "--identity",
        "identity.json",
        "--candidate",
        candidate,
        "--slice",
        "slice",
    ]);
    work.sf(&args).result()["verdict"].clone()
}

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
    let collected = work.sf(&[
        "--config",
        &pg,
        "collect",
        "--identity",
        "identity.json",
        "--candidate",
        &second,
        "--slice",
        "slice",
    ]);
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
