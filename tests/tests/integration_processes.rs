//! Integration across processes: eight processes invoking one prepared intent at once
//! dispatch exactly once, round after round; a process killed with SIGKILL at each fault point
//! leaves history that a fresh process inspects truthfully, and nothing is ever retried.

use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sf_host::canonical::{self, Value};
use sf_host::repository::{PreparedIntegration, SealedCandidate};
use sf_tests::{TestRepo, edit, frozen, payload, proposal, write_json};

const FILES: &[(&str, &str)] = &[("src/a.txt", "alpha\n")];

fn child(work: &Path, command: &str, prepared: &Path, extra: &[&str]) -> Command {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sf-test-child"));
    child
        .arg(command)
        .arg(work.join("identity.json"))
        .arg(prepared)
        .arg("-")
        .args(extra);
    child.stdout(Stdio::piped()).stderr(Stdio::piped());
    child
}

fn field<'a>(observation: &'a Value, key: &str) -> &'a Value {
    let Value::Object(map) = observation else {
        panic!("not an object")
    };
    &map[key]
}

fn parse(output: &std::process::Output) -> Value {
    assert!(
        output.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    canonical::parse(String::from_utf8_lossy(&output.stdout).trim().as_bytes()).unwrap()
}

fn setup(test: &TestRepo) -> PathBuf {
    let work = test.parent.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join("identity.json"),
        test.identity.to_canonical_bytes(),
    )
    .unwrap();
    work
}

fn seal_on_target(test: &TestRepo, round: usize) -> SealedCandidate {
    let base = test.repo.target().unwrap();
    let prior = test.repo.snapshot(&base).unwrap().files[0]
        .as_text()
        .unwrap()
        .to_owned();
    test.repo
        .seal(
            &frozen(base, &["src"]),
            &proposal(vec![edit(
                "src/a.txt",
                Some(&prior),
                Some(&format!("round {round}\n")),
            )]),
        )
        .unwrap()
}

fn prepare_file(
    test: &TestRepo,
    work: &Path,
    sealed: &SealedCandidate,
    occurrence: u64,
) -> (PreparedIntegration, PathBuf) {
    let prepared = test
        .repo
        .prepare_integration(&payload(&test.identity, sealed, "deliver", occurrence))
        .unwrap();
    let path = work.join(format!("prepared-{occurrence}.json"));
    write_json(&path, &prepared.to_value());
    (prepared, path)
}

/// Eight processes per round, each invoking the same intent as soon as a start file appears.
/// `SF_TEST_INTEGRATION_ROUNDS` raises the round count (the stress form is 50).
#[test]
fn eight_processes_dispatch_one_intent_exactly_once() {
    let rounds: usize = std::env::var("SF_TEST_INTEGRATION_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(6);
    let test = TestRepo::git(FILES);
    let work = setup(&test);
    for round in 0..rounds {
        let sealed = seal_on_target(&test, round);
        let (_, prepared) = prepare_file(&test, &work, &sealed, round as u64 + 1);
        let go = work.join(format!("go-{round}"));
        let children: Vec<_> = (0..8)
            .map(|_| {
                child(
                    &work,
                    "invoke",
                    &prepared,
                    &["--wait-for", go.to_str().unwrap()],
                )
                .spawn()
                .unwrap()
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(150));
        std::fs::write(&go, b"").unwrap();
        // A claimant whose claim Git did not acknowledge (it met the winner's lock on the
        // dispatch ref) fails with git-failed and starts nothing (a claim not acknowledged moves nothing); every
        // other call returns an observation.
        let mut observations: Vec<Value> = Vec::new();
        for child in children {
            let output = child.wait_with_output().unwrap();
            if output.status.success() {
                observations.push(parse(&output));
            } else {
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(
                    stderr.starts_with("git-failed: "),
                    "round {round}: {stderr}"
                );
            }
        }
        let dispatched = observations
            .iter()
            .filter(|o| *field(o, "dispatched") == Value::Bool(true))
            .count();
        assert_eq!(dispatched, 1, "round {round}: {observations:?}");
        // Every call read one and the same claim, and the target moved once, to M.
        let claims: std::collections::BTreeSet<String> = observations
            .iter()
            .map(|o| format!("{:?}", field(o, "dispatch")))
            .collect();
        assert_eq!(claims.len(), 1, "round {round}: {claims:?}");
        assert_eq!(
            test.repo.target().unwrap(),
            sealed.manifest.commit,
            "round {round}"
        );
    }
}

fn inspect_fresh(work: &Path, prepared: &Path) -> Value {
    parse(&child(work, "inspect", prepared, &[]).output().unwrap())
}

#[test]
fn a_process_killed_at_each_fault_point_leaves_the_truth() {
    let cases = [
        ("integration-claimed", "unknown", false),
        ("integration-submitted", "unknown", false),
        ("integration-acknowledged", "confirmed", true),
    ];
    for (point, invocation, moved) in cases {
        let test = TestRepo::git(FILES);
        let work = setup(&test);
        let sealed = seal_on_target(&test, 0);
        let (_, prepared) = prepare_file(&test, &work, &sealed, 1);
        let output = child(&work, "invoke", &prepared, &["--kill-at", point])
            .output()
            .unwrap();
        assert_eq!(
            output.status.signal(),
            Some(9),
            "{point}: not killed: {output:?}"
        );
        let seen = inspect_fresh(&work, &prepared);
        assert_eq!(
            *field(&seen, "invocation"),
            Value::from(invocation),
            "{point}: {seen:?}"
        );
        assert_eq!(*field(&seen, "dispatched"), Value::Bool(false));
        let target = test.repo.target().unwrap();
        assert_eq!(target == sealed.manifest.commit, moved, "{point}");
        // Nothing is retried: a later invocation from a fresh process replays what it reads.
        let tree = test.tree_hash();
        let again = parse(&child(&work, "invoke", &prepared, &[]).output().unwrap());
        assert_eq!(
            *field(&again, "invocation"),
            Value::from(invocation),
            "{point}"
        );
        assert_eq!(
            *field(&again, "dispatched"),
            Value::Bool(false),
            "{point}: retried"
        );
        assert_eq!(test.repo.target().unwrap(), target);
        assert_eq!(
            test.tree_hash(),
            tree,
            "{point}: the replay wrote something"
        );
    }
}
