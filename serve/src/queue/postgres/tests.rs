//! The PostgreSQL queue on a throwaway cluster: the conformance suite, with the schema made
//! by the cluster's superuser (the tables' owner) and the queue connecting as a role that has
//! only the schema's grants; the check of the tables; a lost session.

use std::sync::{Arc, OnceLock};

use sf_test_support::postgres::{PgCluster, PgDatabase};

use super::PostgresQueue;
use crate::queue::conformance::conformance_tests;
use crate::queue::{Opener, QueueStore as _};

/// The schema, as an administrator runs it.
const SCHEMA: &str = include_str!("../../../schema.sql");

/// The cluster of this test process (its reaper stops it when the process ends).
fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

/// The opener of `database` on the cluster, as its role.
fn opener(database: &PgDatabase) -> Opener {
    let settings = sf_postgres_config::PostgresConfig {
        host: "127.0.0.1".into(),
        port: cluster().port(),
        database: database.name.clone(),
        user: database.role.clone(),
        password_file: Some(database.password_file.clone()),
        password_env: None,
        connect_timeout_seconds: 10,
        sslmode: Default::default(),
        sslrootcert: None,
    };
    Opener::Postgres(Arc::new(settings.connector().unwrap()))
}

/// A new database made with `schema`, and its opener.
fn database(schema: &str) -> (PgDatabase, Opener) {
    let database = cluster().database_with(schema);
    let opener = opener(&database);
    (database, opener)
}

conformance_tests!(database(SCHEMA));

/// The error of opening the queue in `database`.
fn refusal(opener: &Opener) -> String {
    match opener.open() {
        Ok(_) => panic!("the queue opened"),
        Err(error) => error,
    }
}

#[test]
fn a_database_without_the_tables_is_refused_with_the_fix() {
    let (_database, opener) = database("SELECT 1");
    let error = refusal(&opener);
    assert!(
        error.contains("lacks the table sf_serve_proposals, the table sf_serve_sealings"),
        "{error}"
    );
    assert!(error.contains("run serve/schema.sql"), "{error}");
}

#[test]
fn a_missing_column_or_grant_is_named() {
    let (database, opener) = database(SCHEMA);
    cluster().psql(
        &database.name,
        "ALTER TABLE sf_serve_sealings DROP COLUMN trial",
    );
    cluster().psql(
        &database.name,
        &format!("REVOKE UPDATE ON sf_serve_proposals FROM {}", database.role),
    );
    let error = refusal(&opener);
    assert!(
        error.contains("the column sf_serve_sealings.trial (text)"),
        "{error}"
    );
    assert!(error.contains("UPDATE on sf_serve_proposals"), "{error}");
    assert!(!error.contains("sf_serve_proposals."), "{error}");
}

#[test]
fn the_role_may_not_delete_what_the_queue_stores() {
    let (database, opener) = database(SCHEMA);
    let mut queue = opener.open().unwrap();
    queue
        .insert_within("a", "te", "s", crate::queue::Kind::Diff, b"d", "c", 1)
        .unwrap();
    let output = cluster().psql_as(
        &database.role,
        &database.password(),
        &database.name,
        "DELETE FROM sf_serve_proposals",
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("permission denied"));
}

#[test]
fn a_lost_session_is_an_error_and_the_next_call_connects_again() {
    let (database, opener) = database(SCHEMA);
    let mut queue = PostgresQueue::connect(match &opener {
        Opener::Postgres(connector) => Arc::clone(connector),
        Opener::Sqlite(_) => unreachable!(),
    })
    .unwrap();
    queue
        .insert_within("a", "te", "s", crate::queue::Kind::Diff, b"d", "c", 1)
        .unwrap();
    cluster().psql(
        "postgres",
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{}'",
            database.role
        ),
    );
    let error = queue.get("a").unwrap_err();
    assert!(
        error.starts_with("the queue's database: cannot read a proposal"),
        "{error}"
    );
    assert_eq!(queue.get("a").unwrap().unwrap().id, "a");
}
