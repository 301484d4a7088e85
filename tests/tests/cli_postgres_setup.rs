//! PostgreSQL from nothing, as docs/operations.md says: a fresh throwaway cluster (initdb,
//! started on 127.0.0.1), then `docs/examples/postgres/setup.sh` run as it ships (the roles
//! with SCRAM passwords, the database and its owner, `schema.sql` in it as that owner, the
//! grants, the `pg_hba.conf` lines), then `sf collect` and `sf judge` through the binary with
//! the `[evidence_store]` section the script printed: password authentication over TCP. The
//! cluster is stopped when the test ends.

mod land_support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;

use land_support::{SUM_FIXED, Work, on, write};
use sf_test_support::postgres::{PgCluster, SUPERUSER};

/// The script as the documentation ships it.
fn setup_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/postgres/setup.sh")
}

#[test]
fn the_documented_setup_lets_sf_collect_and_judge_with_a_password_over_tcp() {
    let cluster = PgCluster::start();
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("pg-password");
    std::fs::write(&password_file, "a long 'quoted' secret\n").unwrap();
    std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600)).unwrap();

    let output = Command::new("sh")
        .arg(setup_script())
        .arg(cluster.bin())
        .arg(cluster.port().to_string())
        .arg(cluster.data())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("PGHOST", "127.0.0.1")
        .env("PGUSER", SUPERUSER)
        .env("PGPASSWORD", cluster.superuser_password())
        .env("SF_PASSWORD_FILE", &password_file)
        .output()
        .unwrap();
    let section = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "setup.sh failed: {section}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // What the script made: a SCRAM verifier, never the password; the database and sf's
    // tables owned by the owner, not by sf's role; sf's pg_hba.conf line deciding first.
    assert_eq!(
        cluster.psql(
            "postgres",
            "SELECT rolpassword LIKE 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = 'sf_writer'"
        ),
        "t"
    );
    assert_eq!(
        cluster.psql(
            "postgres",
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'sf'"
        ),
        "sf_owner"
    );
    assert_eq!(
        cluster.psql(
            "sf",
            "SELECT string_agg(tableowner, ',' ORDER BY tablename) FROM pg_tables \
             WHERE tablename LIKE 'sf_%'"
        ),
        "sf_owner,sf_owner"
    );
    assert_eq!(
        cluster.psql(
            "postgres",
            "SELECT array_to_string(database, ',') || '|' || array_to_string(user_name, ',') \
             || '|' || address || '|' || auth_method FROM pg_hba_file_rules \
             WHERE type = 'host' ORDER BY line_number LIMIT 1"
        ),
        "sf|sf_writer|127.0.0.1|scram-sha-256"
    );
    // sf's role may not reach another database.
    let password = std::fs::read_to_string(&password_file).unwrap();
    let elsewhere = cluster.psql_as("sf_writer", password.trim(), "postgres", "SELECT 1");
    assert!(!elsewhere.status.success(), "{elsewhere:?}");

    // sf, configured by what the script printed: a Verified Candidate, its records there.
    let work = Work::new();
    let candidate = work.seal("slice", SUM_FIXED);
    write(&work.dir.join("pg.toml"), &section);
    let mut collect = vec!["--config", "pg.toml", "collect"];
    collect.extend(on(&candidate));
    let collected = work.sf(&collect);
    let stored = collected.result()["evidence"].as_array().unwrap().len();
    assert!(stored >= 3, "{:?}", collected.json);
    let mut judge = vec!["--config", "pg.toml", "judge"];
    judge.extend(on(&candidate));
    let judged = work.sf(&judge);
    assert_eq!(
        judged.result()["verdict"]["outcome"],
        "verified",
        "{:?}",
        judged.json
    );
    assert_eq!(
        cluster.psql("sf", "SELECT count(*) FROM sf_evidence"),
        stored.to_string()
    );
}
