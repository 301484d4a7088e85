//! TLS to PostgreSQL: a throwaway cluster that refuses every TCP connection without TLS,
//! with a self-signed certificate for 127.0.0.1. `sslmode = "verify-full"` with that
//! certificate as `sslrootcert` connects (the store and the fence, the server confirming each
//! session is TLS); a plain connection, the system's roots (which do not hold it) and bad
//! settings are each refused.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sf_postgres::config::SslMode;
use sf_postgres::schema::SCHEMA_SQL;
use sf_postgres::{PostgresConfig, PostgresEvidenceStore, PostgresFence};
use sf_sdk::canonical::Digest;
use sf_sdk::contracts::{AttemptFence, AttemptId, EvidenceRecord, EvidenceStore};
use sf_test_support::postgres::{PgCluster, PgDatabase};

fn config(
    cluster: &PgCluster,
    database: &PgDatabase,
    sslmode: SslMode,
    sslrootcert: Option<&Path>,
) -> PostgresConfig {
    PostgresConfig {
        host: "127.0.0.1".into(),
        port: cluster.port(),
        database: database.name.clone(),
        user: database.role.clone(),
        password_file: Some(database.password_file.clone()),
        password_env: None,
        connect_timeout_seconds: 10,
        sslmode,
        sslrootcert: sslrootcert.map(PathBuf::from),
    }
}

/// How many of `role`'s sessions the server says are TLS.
fn tls_sessions(cluster: &PgCluster, database: &PgDatabase) -> String {
    cluster.psql(
        "postgres",
        &format!(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a ON a.pid = s.pid \
             WHERE a.usename = '{}' AND s.ssl",
            database.role
        ),
    )
}

#[test]
fn verify_full_with_the_servers_root_connects_over_tls_and_everything_else_is_refused() {
    let mut cluster = PgCluster::start();
    let root = cluster.require_tls();
    let database = cluster.database_with(SCHEMA_SQL);
    let deadline = || Instant::now() + Duration::from_secs(60);

    // verify-full, the server's own certificate as the root: the store and the fence work.
    let tls = config(&cluster, &database, SslMode::VerifyFull, Some(&root));
    let store = PostgresEvidenceStore::connect(&tls).unwrap_or_else(|error| panic!("{error}"));
    let record = EvidenceRecord::new(
        Digest::of(b"pins"),
        AttemptId {
            product: "p".into(),
            epoch: 1,
        },
        "sf-test/1",
        b"over tls",
    )
    .unwrap();
    let id = store.put(&record, deadline()).unwrap();
    assert_eq!(store.get(&id, deadline()).unwrap(), record);
    assert_eq!(tls_sessions(&cluster, &database), "1");
    let fence = PostgresFence::connect(&tls).unwrap_or_else(|error| panic!("{error}"));
    let hold = fence
        .acquire("p", &sf_sdk::contracts::canonical::Digest::of(b"c"))
        .unwrap();
    hold.assert_active().unwrap();
    // The store's session, the fence's reader and the hold's own: all TLS.
    assert_eq!(tls_sessions(&cluster, &database), "3");
    drop(hold);

    // Plain TCP: the server refuses it.
    let plain = config(&cluster, &database, SslMode::Disable, None);
    let error = PostgresEvidenceStore::connect(&plain).unwrap_err();
    assert_eq!(error.code(), "unavailable", "{error}");
    assert!(error.to_string().contains("no encryption"), "{error}");

    // The system's roots do not hold the self-signed certificate: refused by sf.
    let system = config(&cluster, &database, SslMode::VerifyFull, None);
    let error = PostgresEvidenceStore::connect(&system).unwrap_err();
    assert_eq!(error.code(), "unavailable", "{error}");
    assert!(
        error.to_string().contains("certificate verify failed"),
        "{error}"
    );
    let error = PostgresFence::connect(&system).unwrap_err();
    assert_eq!(error.code(), "unavailable", "{error}");

    // Bad settings are refused before any connection, naming the setting.
    let contradictory = config(&cluster, &database, SslMode::Disable, Some(&root));
    let error = PostgresEvidenceStore::connect(&contradictory).unwrap_err();
    assert_eq!(error.code(), "invalid-input", "{error}");
    assert!(error.to_string().contains("sslrootcert"), "{error}");
    let missing = Path::new("/nonexistent/root.pem");
    let error = PostgresEvidenceStore::connect(&config(
        &cluster,
        &database,
        SslMode::VerifyFull,
        Some(missing),
    ))
    .unwrap_err();
    assert_eq!(error.code(), "invalid-input", "{error}");
    assert!(
        error.to_string().contains("/nonexistent/root.pem"),
        "{error}"
    );

    // The setting as sf.toml writes it.
    let parsed: PostgresConfig = serde_json::from_value(serde_json::json!({
        "host": "127.0.0.1", "database": "d", "user": "u",
        "sslmode": "verify-full", "sslrootcert": "/etc/sf/root.pem",
    }))
    .unwrap();
    assert_eq!(parsed.sslmode, SslMode::VerifyFull);
    assert!(
        serde_json::from_value::<PostgresConfig>(serde_json::json!({
            "host": "h", "database": "d", "user": "u", "sslmode": "require",
        }))
        .is_err(),
        "only disable and verify-full are modes"
    );
}
