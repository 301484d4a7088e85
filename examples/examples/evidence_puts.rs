//! Durable evidence puts per second, side by side in one run: the PostgreSQL store
//! (sf-postgres, over TCP on a throwaway cluster on this machine), the built-in SQLite store
//! (WAL, synchronous=FULL), and the baseline: the same rows as plain `INSERT`s through `psql`,
//! each its own transaction, into a table without sf's triggers. Every put is durable when it
//! returns (fsync on, synchronous_commit on). Prints the median of each over several rounds
//! and the ratios.
//!
//! Run it with `cargo run --release -p sf-examples --example evidence_puts`. It needs Debian's
//! PostgreSQL server binaries (`/usr/lib/postgresql/*/bin`).

use std::error::Error;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use sf_host::canonical::Digest;
use sf_host::contracts::{AttemptId, EvidenceRecord, EvidenceStore};
use sf_host::evidence::SqliteEvidenceStore;
use sf_postgres::schema::SCHEMA_SQL;
use sf_postgres::{PostgresConfig, PostgresEvidenceStore};
use sf_test_support::postgres::PgCluster;

/// Records per round, and rounds.
const RECORDS: usize = 300;
const ROUNDS: usize = 5;

fn records(round: usize) -> Vec<EvidenceRecord> {
    (0..RECORDS)
        .map(|n| {
            EvidenceRecord::new(
                Digest::of(format!("pins-{round}-{}", n % 10).as_bytes()),
                AttemptId {
                    product: "bench".into(),
                    epoch: round as u64 + 1,
                },
                "x-bench/1",
                format!("payload {round} {n} {}", "x".repeat(2000)).as_bytes(),
            )
            .expect("a record")
        })
        .collect()
}

fn per_second(elapsed: Duration) -> f64 {
    RECORDS as f64 / elapsed.as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn puts(store: &dyn EvidenceStore, round: usize) -> Result<f64, Box<dyn Error>> {
    let records = records(round);
    let started = Instant::now();
    for record in &records {
        store.put(record, Instant::now() + Duration::from_secs(60))?;
    }
    Ok(per_second(started.elapsed()))
}

fn main() -> Result<(), Box<dyn Error>> {
    let cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA_SQL);
    let pg = PostgresEvidenceStore::connect(&PostgresConfig {
        host: "127.0.0.1".into(),
        port: cluster.port(),
        database: database.name.clone(),
        user: database.role.clone(),
        password_file: Some(database.password_file.clone()),
        password_env: None,
        connect_timeout_seconds: 10,
        sslmode: Default::default(),
        sslrootcert: None,
    })?;
    let workdir = tempfile::Builder::new().prefix("sf-bench-").tempdir()?;
    fs::set_permissions(workdir.path(), fs::Permissions::from_mode(0o700))?;
    let dir = workdir.path().canonicalize()?.join("evidence");
    fs::create_dir(&dir)?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
    let sqlite = SqliteEvidenceStore::open(&dir.join("evidence.db"))?;
    cluster.psql(
        &database.name,
        "CREATE TABLE plain (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text NOT \
         NULL UNIQUE, pins text NOT NULL, record bytea NOT NULL)",
    );

    let (mut pg_rates, mut sqlite_rates, mut psql_rates) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        pg_rates.push(puts(&pg, round)?);
        sqlite_rates.push(puts(&sqlite, round)?);
        // The baseline: one psql process sending every INSERT, each its own transaction.
        let script: String = records(round + ROUNDS)
            .iter()
            .map(|record| {
                format!(
                    "INSERT INTO plain (id, pins, record) VALUES ('{}', '{}', '\\x{}');\n",
                    record.id(),
                    record.pins(),
                    hex::encode(record.bytes())
                )
            })
            .collect();
        let started = Instant::now();
        cluster.psql_script(&database.name, &script);
        psql_rates.push(per_second(started.elapsed()));
    }
    let (pg, sqlite, psql) = (median(pg_rates), median(sqlite_rates), median(psql_rates));
    println!("durable puts per second, median of {ROUNDS} rounds of {RECORDS} records (~2 KiB):");
    println!("  sf-postgres (TCP, 127.0.0.1)      {pg:>9.0}");
    println!("  sf SQLite (WAL, synchronous=FULL) {sqlite:>9.0}");
    println!("  baseline: psql INSERTs            {psql:>9.0}");
    println!("  sf-postgres / psql                {:>9.2}", pg / psql);
    println!("  sf-postgres / SQLite              {:>9.2}", pg / sqlite);
    Ok(())
}
