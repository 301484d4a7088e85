//! `sf serve` with `[evidence_store] type = "postgres"` keeps its queue in PostgreSQL (the
//! tables of `serve/schema.sql`, reached as a role with only its grants), through the binary
//! against the team's remote on `git daemon`: two proposals are stored there (and no
//! `queue.sqlite` is made), the server is SIGKILLed in the middle of the first landing and
//! started again, and each is delivered exactly once. A database without the queue's tables
//! stops the server before it listens, naming the fix.

mod land_support;
mod pg_support;
mod serve_support;

use std::sync::OnceLock;
use std::time::Duration;

use land_support::git;
use serve_support::{Server, TOKENS, Team, note_proposal, wait_final};
use sf_test_support::postgres::{PgCluster, PgDatabase};

/// The queue's schema, as an administrator runs it.
const QUEUE_SCHEMA: &str = include_str!("../../serve/schema.sql");

/// The cluster of this test process (its reaper stops it when the process ends).
fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

/// `team`'s configuration naming `database`.
fn config(team: &Team, database: &PgDatabase) -> std::path::PathBuf {
    team.config_postgres(
        cluster().port(),
        &database.name,
        &database.role,
        &database.password_file,
    )
}

/// `query`'s rows on `database`, as psql prints them (`a|b` a line).
fn rows(database: &PgDatabase, query: &str) -> Vec<String> {
    let text = cluster().psql(&database.name, query);
    text.lines().map(str::to_owned).collect()
}

#[test]
fn two_proposals_queued_in_postgresql_land_once_each_across_a_kill() {
    let database = cluster().database_with(&format!("{}\n{QUEUE_SCHEMA}", pg_support::SCHEMA));
    let team = Team::new();
    let upstream = team.main();
    let config = config(&team, &database);
    let server = Server::start_faulty(&team.work, &config, "land-judged");
    let ids: Vec<String> = ["first", "second"]
        .iter()
        .map(|name| {
            let (status, answer) = server.json(
                "POST",
                "/v1/repositories/te/proposals",
                Some(TOKENS[0].1),
                &note_proposal(&format!("{name}.txt"), &format!("a note by {name}\n")),
            );
            assert_eq!(status, 202, "{answer}");
            answer["id"].as_str().unwrap().to_owned()
        })
        .collect();
    server.wait_killed(Duration::from_secs(120));
    assert_eq!(team.remote.push_count(), 0, "killed before its integration");
    // Both were stored in PostgreSQL before their 202, and nothing in SQLite.
    let queued = rows(&database, "SELECT id FROM sf_serve_proposals ORDER BY seq");
    assert_eq!(queued, ids);
    let state = team.work.dir.join("state");
    assert!(!state.join("queue.sqlite").exists());

    let server = Server::start(&team.work, &config);
    let entries = wait_final(&server, &ids, Duration::from_secs(300));
    for entry in &entries {
        assert_eq!(entry["state"], "delivered", "{entry}");
    }
    let (first, second) = (
        entries[0]["commit"].as_str().unwrap(),
        entries[1]["commit"].as_str().unwrap(),
    );
    assert_eq!(team.main(), second);
    let remote = team.remote.path();
    assert_eq!(git(remote, &["rev-parse", &format!("{second}^")]), first);
    assert_eq!(git(remote, &["rev-parse", &format!("{first}^")]), upstream);
    assert_eq!(team.remote.push_count(), 2, "each delivered exactly once");
    let ended = rows(
        &database,
        "SELECT id, state, commit_id FROM sf_serve_proposals ORDER BY seq",
    );
    assert_eq!(
        ended,
        [
            format!("{}|delivered|{first}", ids[0]),
            format!("{}|delivered|{second}", ids[1])
        ]
    );
    let sealed = rows(&database, "SELECT DISTINCT proposal FROM sf_serve_sealings");
    assert_eq!(sealed.len(), 2, "{sealed:?}");
    assert!(!state.join("queue.sqlite").exists());
    // The state directory still holds each proposal's Slice copies (one per base).
    for id in &ids {
        assert!(state.join("proposals").join(id).is_dir(), "{id}");
    }
}

#[test]
fn a_database_without_the_queue_tables_stops_the_server_with_the_fix() {
    let database = cluster().database_with(pg_support::SCHEMA);
    let team = Team::new();
    let config = config(&team, &database);
    let output = sf_tests::plugins::sf()
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .current_dir(&team.work.dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("lacks the table sf_serve_proposals, the table sf_serve_sealings"),
        "{stderr}"
    );
    assert!(stderr.contains("run serve/schema.sql"), "{stderr}");
    assert!(!team.work.dir.join("state/queue.sqlite").exists());
}
