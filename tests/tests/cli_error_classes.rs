//! Errors keep their class from a plugin's constructor to `sf`'s exit status and `--json`
//! code: a PostgreSQL server that is down is `unavailable` (exit 9: retry later) and a schema
//! tampered with is `corrupt` (exit 10: stop), to `sf collect` and `sf judge` alike, through
//! the real binary and the real plugin on a throwaway cluster. The hostile test plugin shows
//! the ABI rule: a contract error from `instantiate` keeps its class only from a plugin of ABI
//! 1.14 or later, and words stay `plugin-refused` from a plugin of any minor.

mod land_support;
mod pg_support;

use land_support::{SUM_FIXED, Work, on, write};
use pg_support::{SCHEMA, collect_command, config};
use sf_cli::{EXIT_CORRUPT, EXIT_FAILURE, EXIT_UNAVAILABLE};
use sf_test_support::postgres::PgCluster;
use sf_tests::plugins::{Envelope, built};

/// `sf --json --config CONFIG judge` of `candidate` under `slice/`.
fn judge_with(work: &Work, config: &str, candidate: &str) -> Envelope {
    let mut args = vec!["--config", config, "judge"];
    args.extend(on(candidate));
    work.sf(&args)
}

/// Asserts that `envelope` failed with `code` and the exit status `exit`, its message
/// holding `needle`.
fn assert_failed(envelope: &Envelope, code: &str, exit: u8, needle: &str) {
    assert_eq!(envelope.error_code(), code, "{:?}", envelope.json);
    assert_eq!(envelope.code, Some(i32::from(exit)), "{:?}", envelope.json);
    assert!(
        envelope.error_message().contains(needle),
        "{needle:?} not in {:?}",
        envelope.json
    );
}

#[test]
fn a_server_that_is_down_is_unavailable_to_collect_and_judge() {
    let mut cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA);
    let work = Work::new();
    let candidate = work.seal("slice", SUM_FIXED);
    let pg = config(&work, "pg.toml", &cluster, &database);
    // Up, the same configuration works: what follows is the server, not the file.
    let collected = Envelope::parse(collect_command(&work, &pg, &candidate).output().unwrap());
    collected.result();
    cluster.stop();

    let collected = Envelope::parse(collect_command(&work, &pg, &candidate).output().unwrap());
    assert_failed(
        &collected,
        "unavailable",
        EXIT_UNAVAILABLE,
        "connecting to PostgreSQL",
    );
    let judged = judge_with(&work, &pg, &candidate);
    assert_failed(
        &judged,
        "unavailable",
        EXIT_UNAVAILABLE,
        "connecting to PostgreSQL",
    );
    // The text mode exits the same way.
    let text = work
        .text_command(&["--config", &pg, "judge", "--identity", "identity.json"])
        .args(["--candidate", &candidate, "--slice", "slice"])
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(i32::from(EXIT_UNAVAILABLE)));
}

#[test]
fn a_tampered_schema_is_corrupt_to_collect_and_judge() {
    let cluster = PgCluster::start();
    let work = Work::new();
    let candidate = work.seal("slice", SUM_FIXED);
    for (name, tamper) in [
        (
            "a write-once trigger dropped",
            "DROP TRIGGER sf_evidence_no_update ON sf_evidence",
        ),
        (
            "a column added",
            "ALTER TABLE sf_evidence ADD COLUMN note text",
        ),
    ] {
        let database = cluster.database_with(SCHEMA);
        cluster.psql(&database.name, tamper);
        let pg = config(&work, "pg.toml", &cluster, &database);
        let collected = Envelope::parse(collect_command(&work, &pg, &candidate).output().unwrap());
        assert_failed(&collected, "corrupt", EXIT_CORRUPT, "");
        assert_eq!(
            cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence"),
            "0",
            "{name}: nothing was stored"
        );
        let judged = judge_with(&work, &pg, &candidate);
        assert_failed(&judged, "corrupt", EXIT_CORRUPT, "");
    }
    // The fence's half of the schema: `sf collect` takes the fence, and refuses it so.
    let database = cluster.database_with(SCHEMA);
    cluster.psql(
        &database.name,
        "DROP TRIGGER sf_fence_no_truncate ON sf_fence",
    );
    let pg = config(&work, "pg.toml", &cluster, &database);
    let collected = Envelope::parse(collect_command(&work, &pg, &candidate).output().unwrap());
    assert_failed(&collected, "corrupt", EXIT_CORRUPT, "sf_fence_no_truncate");
}

/// `sf COMMAND` of `candidate` under an `[evidence_store]` of the hostile plugin's
/// `refusing` tag, whose constructor refuses as `refuse` says, the plugin's table saying ABI
/// minor `entry`.
fn refusing(
    work: &Work,
    command: &str,
    candidate: &str,
    refuse: &str,
    entry: Option<&str>,
) -> std::process::Output {
    write(
        &work.dir.join("hostile.toml"),
        &format!("[evidence_store]\ntype = \"refusing\"\nrefuse = \"{refuse}\"\n"),
    );
    let mut args = vec!["--config", "hostile.toml", command];
    args.extend(on(candidate));
    let mut command = work.command(&args);
    command.env("SF_PLUGIN_PATH", &built().test_plugins);
    if let Some(entry) = entry {
        command.env("SF_HOSTILE_ENTRY", entry);
    }
    command.output().unwrap()
}

/// `sf judge` of `candidate` under the `refusing` store ([`refusing`]).
fn refused_judge(work: &Work, candidate: &str, refuse: &str, entry: Option<&str>) -> Envelope {
    Envelope::parse(refusing(work, "judge", candidate, refuse, entry))
}

#[test]
fn a_constructor_error_keeps_its_class_only_from_a_plugin_that_may_send_it() {
    let work = Work::new();
    let candidate = work.seal("slice", SUM_FIXED);
    let unavailable = refused_judge(&work, &candidate, "unavailable", None);
    assert_failed(
        &unavailable,
        "unavailable",
        EXIT_UNAVAILABLE,
        "the server cannot be reached",
    );
    let corrupt = refused_judge(&work, &candidate, "corrupt", None);
    assert_failed(&corrupt, "corrupt", EXIT_CORRUPT, "a trigger is missing");
    // Words are `plugin-refused`, from this sdk and from one of ABI 1.2 alike.
    for entry in [None, Some("abi-minor-2")] {
        let words = refused_judge(&work, &candidate, "words", entry);
        assert_failed(&words, "plugin-refused", EXIT_FAILURE, "refused in words");
    }
    // Made, and then unreachable: the search for the attempts keeps the class too.
    let later = refused_judge(&work, &candidate, "later", None);
    assert_failed(
        &later,
        "unavailable",
        EXIT_UNAVAILABLE,
        "the server went away",
    );
    // A put that fails so stops the collection, which says why with the class as its exit
    // status (its result, what was stored, is still the envelope's).
    let collected = refusing(&work, "collect", &candidate, "later", None);
    assert_eq!(collected.status.code(), Some(i32::from(EXIT_UNAVAILABLE)));
    let envelope: serde_json::Value = serde_json::from_slice(&collected.stdout).unwrap();
    let result = &envelope["result"];
    assert_eq!(result["mayJudge"], false, "{envelope}");
    assert_eq!(result["runs"][0]["state"], "storage-failed", "{envelope}");
    assert_eq!(
        result["runs"][0]["storageError"], "unavailable",
        "{envelope}"
    );
    assert_eq!(result["evidence"], serde_json::json!([]), "{envelope}");
    // A plugin of ABI 1.2 never answered a contract error to instantiate: one that does is
    // malformed, never read as a class it could not have meant.
    let old = refused_judge(&work, &candidate, "unavailable", Some("abi-minor-2"));
    assert_failed(&old, "malformed-message", EXIT_FAILURE, "only from 1.14 on");
}
