//! What the database itself enforces, on a real cluster: the role sf connects as cannot
//! UPDATE, DELETE or TRUNCATE (each tried); a schema changed behind sf's back (a trigger
//! dropped or disabled, an extra grant or index, a superuser role, an owner role, a trigger
//! function that lets writes through) is refused as `corrupt` when sf connects, every difference named; a row the
//! superuser changed is `corrupt` on read and left as it is; the password is in no error; a
//! server that went away is `unavailable`, and the next call after it came back connects
//! again, with every record stored before it still there.

mod support;

use std::time::{Duration, Instant};

use sf_contracts::canonical::Digest;
use sf_contracts::{AttemptId, EvidenceRecord, EvidenceStore, EvidenceStoreError};
use sf_postgres::{PostgresConfig, PostgresEvidenceStore};
use sf_test_support::postgres::PgCluster;
use support::{Database, cluster};

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn record(n: u8) -> EvidenceRecord {
    EvidenceRecord::new(
        Digest::of(b"pins"),
        AttemptId {
            product: "p".into(),
            epoch: 1,
        },
        "x-test/1",
        &[n; 64],
    )
    .unwrap()
}

fn password(database: &Database) -> String {
    database.password()
}

#[test]
fn the_role_sf_connects_as_cannot_update_delete_or_truncate() {
    let database = Database::create(cluster());
    let store = PostgresEvidenceStore::connect(&database.config()).unwrap();
    let id = store.put(&record(1), deadline()).unwrap();
    for sql in [
        format!("UPDATE sf_evidence SET pins = 'x' WHERE id = '{id}'"),
        format!("DELETE FROM sf_evidence WHERE id = '{id}'"),
        "TRUNCATE sf_evidence".to_owned(),
        "ALTER TABLE sf_evidence DISABLE TRIGGER ALL".to_owned(),
        "DROP TRIGGER sf_evidence_no_update ON sf_evidence".to_owned(),
    ] {
        let output = cluster().psql_as(&database.role, &password(&database), &database.name, &sql);
        assert!(!output.status.success(), "{sql} was allowed");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("permission denied") || stderr.contains("must be owner"),
            "{sql}: {stderr}"
        );
    }
    // Even the superuser meets the triggers (unless it switches them off for its session).
    let output = cluster().psql_as(
        sf_test_support::postgres::SUPERUSER,
        cluster().superuser_password(),
        &database.name,
        &format!("DELETE FROM sf_evidence WHERE id = '{id}'"),
    );
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("write-once"));
    assert_eq!(store.get(&id, deadline()).unwrap(), record(1));
}

#[test]
fn a_role_that_asks_for_asynchronous_commits_still_gets_durable_puts() {
    let database = Database::create(cluster());
    cluster().psql(
        &database.name,
        &format!("ALTER ROLE {} SET synchronous_commit = off", database.role),
    );
    // The connection's check requires synchronous_commit = on for the session: had sf not
    // set it, this connect would be `corrupt` naming it.
    let store = PostgresEvidenceStore::connect(&database.config()).unwrap();
    let id = store.put(&record(5), deadline()).unwrap();
    assert_eq!(store.get(&id, deadline()).unwrap(), record(5));
    let output = cluster().psql_as(
        &database.role,
        &password(&database),
        &database.name,
        "SHOW synchronous_commit",
    );
    // A plain session of the role is asynchronous; sf's own sets it on when it connects
    // (and its check requires on).
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "off");
}

#[test]
fn a_schema_changed_behind_sfs_back_is_corrupt_with_every_difference_named() {
    let cases: &[(&str, &str)] = &[
        (
            "DROP TRIGGER sf_evidence_no_delete ON sf_evidence",
            "sf_evidence_no_delete is missing",
        ),
        (
            "ALTER TABLE sf_evidence DISABLE TRIGGER sf_evidence_no_update",
            "disabled",
        ),
        (
            "CREATE INDEX extra ON sf_evidence (record)",
            "the index extra is not sf's",
        ),
        ("GRANT UPDATE ON sf_evidence TO {role}", "may UPDATE"),
        ("ALTER ROLE {role} SUPERUSER", "superuser"),
        ("ALTER TABLE sf_evidence OWNER TO {role}", "owns the table"),
        (
            "CREATE OR REPLACE FUNCTION sf_evidence_write_once() RETURNS trigger LANGUAGE plpgsql \
             AS $$ BEGIN RETURN NEW; END $$",
            "the function sf_evidence_write_once",
        ),
        (
            "DROP TRIGGER sf_fence_only_grows ON sf_fence",
            "sf_fence_only_grows is missing",
        ),
        ("GRANT DELETE ON sf_fence TO {role}", "may DELETE sf_fence"),
        (
            "REVOKE UPDATE ON sf_fence FROM {role}",
            "cannot UPDATE sf_fence",
        ),
        (
            "ALTER TABLE sf_fence ADD COLUMN extra text",
            "the columns of sf_fence",
        ),
    ];
    for (change, named) in cases {
        let database = Database::create(cluster());
        cluster().psql(&database.name, &change.replace("{role}", &database.role));
        let Err(error) = PostgresEvidenceStore::connect(&database.config()) else {
            panic!("{change}: the store connected");
        };
        match &error {
            EvidenceStoreError::Corrupt { id, what } => {
                assert_eq!(id, "database");
                assert!(what.contains(named), "{change}: {what}");
            }
            other => panic!("{change}: {other:?}"),
        }
    }
    // A database without the schema is told what to do; sf creates nothing.
    let empty = Database::create(cluster());
    cluster().psql(
        &empty.name,
        "DROP TABLE sf_evidence; DROP FUNCTION sf_evidence_write_once()",
    );
    let error = PostgresEvidenceStore::connect(&empty.config()).unwrap_err();
    assert!(error.to_string().contains("schema.sql"), "{error}");
    assert_eq!(
        cluster().psql(
            &empty.name,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'sf_evidence'"
        ),
        "0"
    );
}

#[test]
fn a_row_changed_by_the_superuser_is_corrupt_and_left_as_it_is() {
    let database = Database::create(cluster());
    let store = PostgresEvidenceStore::connect(&database.config()).unwrap();
    let id = store.put(&record(2), deadline()).unwrap();
    cluster().psql(
        &database.name,
        &format!(
            "SET session_replication_role = replica; \
             UPDATE sf_evidence SET record = '\\x00'::bytea WHERE id = '{id}'"
        ),
    );
    assert!(matches!(
        store.get(&id, deadline()),
        Err(EvidenceStoreError::Corrupt { .. })
    ));
    assert_eq!(
        cluster().psql(
            &database.name,
            &format!("SELECT encode(record, 'hex') FROM sf_evidence WHERE id = '{id}'")
        ),
        "00",
        "never repaired"
    );
}

#[test]
fn a_wrong_password_is_unavailable_and_no_error_holds_the_password() {
    let database = Database::create(cluster());
    let secret = password(&database);
    std::fs::write(&database.password_file, "not-the-password\n").unwrap();
    let error = PostgresEvidenceStore::connect(&database.config()).unwrap_err();
    assert!(
        matches!(error, EvidenceStoreError::Unavailable { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("password authentication failed"),
        "{error}"
    );
    assert!(!error.to_string().contains("not-the-password"));
    // From a variable, the right one works; a missing variable is invalid input.
    let mut config = database.config();
    config.password_file = None;
    config.password_env = Some("SF_TEST_PG_PASSWORD_UNSET".into());
    assert!(matches!(
        PostgresEvidenceStore::connect(&config),
        Err(EvidenceStoreError::InvalidInput { .. })
    ));
    // SAFETY: this test process sets the variable before any thread reads it.
    unsafe { std::env::set_var("SF_TEST_PG_PASSWORD", &secret) };
    config.password_env = Some("SF_TEST_PG_PASSWORD".into());
    let store = PostgresEvidenceStore::connect(&config).unwrap();
    assert!(!format!("{store:?}").contains(&secret));
    // A password file others can read is refused before anything connects.
    std::fs::write(&database.password_file, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(
        &database.password_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let error = PostgresEvidenceStore::connect(&database.config()).unwrap_err();
    assert!(
        error.to_string().contains("readable by no one else"),
        "{error}"
    );
}

#[test]
fn a_server_that_went_away_is_unavailable_and_what_was_stored_survives_its_restart() {
    // A cluster of this test's own, so that restarting it disturbs no other test.
    let mut own = PgCluster::start();
    let database = Database::create(&own);
    let config = |cluster: &PgCluster| PostgresConfig {
        port: cluster.port(),
        ..database.config()
    };
    let store = PostgresEvidenceStore::connect(&config(&own)).unwrap();
    let first = store.put(&record(3), deadline()).unwrap();
    own.stop();
    assert!(matches!(
        store.put(&record(4), deadline()),
        Err(EvidenceStoreError::Unavailable { .. })
    ));
    own.restart();
    let store = PostgresEvidenceStore::connect(&config(&own)).unwrap();
    assert_eq!(store.get(&first, deadline()).unwrap(), record(3));
    assert_eq!(
        store.find(&Digest::of(b"pins"), deadline()).unwrap(),
        [first]
    );
}
