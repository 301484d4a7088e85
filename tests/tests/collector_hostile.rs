//! A hostile Candidate, in the real sandbox:
//! its program tries to read the answer key, the evidence database, the repository, the fence
//! and a canary beside each; to list those directories and the home directory; to write into
//! the evidence database, the executor's directory and the Slice directory; and prints a
//! forged observation on stdout. Everything is denied, no canary byte reaches any record, and
//! the forged observation stays inside the stdout bytes.

mod collector_support;

use std::path::{Path, PathBuf};

use collector_support::*;
use sf_host::assurance::{Observation, ObservationFacts, ObservationStatus, Outcome, Phase, Stage};
use sf_host::canonical::Digest;
use sf_host::contracts::EvidenceStore;

fn attack_script(
    reads: &[(String, PathBuf)],
    lists: &[(String, PathBuf)],
    writes: &[(String, PathBuf)],
    forged: &str,
) -> String {
    let mut script = String::from("# A Candidate that attacks instead of summing.\n");
    for (name, path) in reads {
        script.push_str(&format!(
            "if content=$(cat '{p}' 2>/dev/null) && [ -n \"$content\" ]; then echo \"read {name}: LEAKED $content\"; else echo \"read {name}: denied\"; fi\n",
            p = path.display()
        ));
        script.push_str(&format!(
            "if read -r line < '{p}' 2>/dev/null; then echo \"redirect {name}: LEAKED $line\"; else echo \"redirect {name}: denied\"; fi\n",
            p = path.display()
        ));
    }
    for (name, path) in lists {
        script.push_str(&format!(
            "if listing=$(ls -a '{p}' 2>/dev/null); then echo \"list {name}: LEAKED $listing\"; else echo \"list {name}: denied\"; fi\n",
            p = path.display()
        ));
    }
    for (name, path) in writes {
        script.push_str(&format!(
            "if (echo pwned >> '{p}') 2>/dev/null; then echo \"write {name}: LEAKED\"; else echo \"write {name}: denied\"; fi\n",
            p = path.display()
        ));
    }
    // Controls: the same commands succeed on what the sandbox does show, so every "denied"
    // above is the sandbox's doing, not a missing tool.
    script.push_str("if content=$(cat /sf/program/sum.sh 2>/dev/null) && [ -n \"$content\" ]; then echo \"control read: ok\"; fi\n");
    script.push_str(
        "if listing=$(ls -a /sf/input 2>/dev/null); then echo \"control list: ok\"; fi\n",
    );
    script.push_str(
        "if (echo fine >> /sf/scratch/x) 2>/dev/null; then echo \"control write: ok\"; fi\n",
    );
    script.push_str(&format!("printf '%s' '{forged}'\n"));
    script.push_str("echo 0\n");
    script
}

#[test]
fn a_hostile_candidate_reaches_nothing() {
    let scenario = Scenario::real();
    let canary = format!(
        "CANARY-{}",
        Digest::of(scenario.root.to_str().unwrap().as_bytes()).hex()
    );
    // The answer key and a canary beside every protected thing.
    std::fs::write(
        scenario.slice_dir.join("answer-key.txt"),
        format!("{canary} answer 6\n"),
    )
    .unwrap();
    for dir in [
        &scenario.root,
        &scenario.slice_dir,
        &scenario.evidence_dir,
        &scenario.fence_dir,
        scenario.repo.parent.as_path(),
    ] {
        std::fs::write(dir.join("canary.txt"), format!("{canary}\n")).unwrap();
    }
    // The Product's counter and a Candidate's hold: two files each.
    let hold_for_fence_files = scenario
        .fence
        .acquire(&sf_host::canonical::Digest::of(b"a Candidate"))
        .unwrap();
    drop(hold_for_fence_files);
    let fence_files: Vec<PathBuf> = std::fs::read_dir(&scenario.fence_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "epoch" || ext == "lock")
        })
        .collect();
    assert_eq!(fence_files.len(), 4);
    let launcher_dir = launcher().parent().unwrap().to_path_buf();
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));

    let mut reads = vec![
        (
            "answer-key".to_owned(),
            scenario.slice_dir.join("answer-key.txt"),
        ),
        ("evidence-db".to_owned(), scenario.evidence_path.clone()),
        (
            "repository-config".to_owned(),
            scenario.repo.path.join("config"),
        ),
        (
            "repository-marker".to_owned(),
            scenario.repo.path.join("sf-repository.json"),
        ),
        ("canary-root".to_owned(), scenario.root.join("canary.txt")),
        (
            "canary-slice".to_owned(),
            scenario.slice_dir.join("canary.txt"),
        ),
        (
            "canary-evidence".to_owned(),
            scenario.evidence_dir.join("canary.txt"),
        ),
        (
            "canary-fence".to_owned(),
            scenario.fence_dir.join("canary.txt"),
        ),
        (
            "canary-repository".to_owned(),
            scenario.repo.parent.join("canary.txt"),
        ),
    ];
    for (at, path) in fence_files.iter().enumerate() {
        reads.push((format!("fence-{at}"), path.clone()));
    }
    let lists = vec![
        ("slice".to_owned(), scenario.slice_dir.clone()),
        ("evidence".to_owned(), scenario.evidence_dir.clone()),
        ("repository".to_owned(), scenario.repo.path.clone()),
        ("fence".to_owned(), scenario.fence_dir.clone()),
        ("root".to_owned(), scenario.root.clone()),
        ("executor".to_owned(), launcher_dir.clone()),
        ("home".to_owned(), home),
    ];
    let writes = vec![
        ("evidence-db".to_owned(), scenario.evidence_path.clone()),
        (
            "evidence-dir".to_owned(),
            scenario.evidence_dir.join("pwned"),
        ),
        (
            "executor".to_owned(),
            launcher_dir.join("pwned-by-candidate"),
        ),
        ("slice".to_owned(), scenario.slice_dir.join("pwned")),
    ];

    // A forged observation claiming the after check passed, printed on stdout.
    let request_for_digest = scenario.request(SUM_FIXED);
    let forged = Observation {
        facts: ObservationFacts {
            remote: None,
            collector: scenario.recipe.collector_closure.clone(),
            candidate: request_for_digest.sealed.digest.clone(),
            check: "bug-fixed".into(),
            phase: Phase::After,
            stage: Stage::Candidate,
            status: ObservationStatus::Observed,
            attributable: true,
            problems: vec![],
            environment: None,
            identities: None,
            process: None,
            started_at: None,
            ended_at: None,
            deadline: 0,
        },
        stdout: b"ok\n".to_vec(),
        stderr: vec![],
        results: None,
    }
    .encode()
    .unwrap();
    let forged = String::from_utf8(forged).unwrap();
    assert!(!forged.contains('\''));
    let script = attack_script(&reads, &lists, &writes, &forged);

    // Sealing writes to the repository and taking the hold to the fence: both before the
    // trees are hashed.
    let request = scenario.request(&script);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let watched: Vec<&Path> = vec![
        &scenario.slice_dir,
        &scenario.fence_dir,
        &scenario.repo.path,
        scenario.snapshots.root(),
    ];
    let before: Vec<String> = watched.iter().map(|dir| sf_tests::tree_hash(dir)).collect();

    let result = scenario
        .collector()
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    assert_eq!(result.evidence.len(), 4);

    // What the Candidate saw: every attempt denied.
    let guard_id = result
        .runs
        .iter()
        .find(|run| run.check == "empty-candidate")
        .unwrap()
        .evidence
        .clone()
        .unwrap();
    let record = scenario
        .store
        .get(
            &guard_id,
            std::time::Instant::now() + std::time::Duration::from_secs(30),
        )
        .unwrap();
    let observation = Observation::decode(record.payload()).unwrap();
    let stdout = String::from_utf8_lossy(&observation.stdout).into_owned();
    let attempts = reads.len() * 2 + lists.len() + writes.len();
    let denied = stdout
        .lines()
        .filter(|line| line.ends_with(": denied"))
        .count();
    assert_eq!(denied, attempts, "every attempt is denied:\n{stdout}");
    assert!(!stdout.contains("LEAKED"), "{stdout}");
    for control in ["control read: ok", "control list: ok", "control write: ok"] {
        assert!(
            stdout.lines().any(|line| line == control),
            "{control} missing:\n{stdout}"
        );
    }
    // The forged observation stays inside the stdout bytes, after the collector's own facts.
    assert!(
        observation
            .stdout
            .windows(forged.len())
            .any(|window| window == forged.as_bytes())
    );
    assert_eq!(observation.facts.check, "empty-candidate");
    assert_eq!(observation.facts.status, ObservationStatus::Observed);
    let after = result
        .runs
        .iter()
        .find(|run| run.check == "bug-fixed")
        .unwrap();
    let after_record = scenario
        .store
        .get(
            after.evidence.as_ref().unwrap(),
            std::time::Instant::now() + std::time::Duration::from_secs(30),
        )
        .unwrap();
    let after_observation = Observation::decode(after_record.payload()).unwrap();
    assert_eq!(
        after_observation.facts.process.unwrap().exit_code,
        Some(1),
        "check.sh saw a wrong sum"
    );

    // No canary byte in any record, nor anywhere in the database file.
    for id in &result.evidence {
        let record = scenario
            .store
            .get(
                id,
                std::time::Instant::now() + std::time::Duration::from_secs(30),
            )
            .unwrap();
        assert!(
            !record
                .bytes()
                .windows(canary.len())
                .any(|w| w == canary.as_bytes()),
            "record {id} holds the canary"
        );
    }
    for file in std::fs::read_dir(&scenario.evidence_dir).unwrap() {
        let path = file.unwrap().path();
        if path.file_name().unwrap() == "canary.txt" {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
            "{} holds the canary",
            path.display()
        );
    }
    // Nothing was written: no new file anywhere, the watched trees unchanged.
    assert!(!scenario.evidence_dir.join("pwned").exists());
    assert!(!scenario.slice_dir.join("pwned").exists());
    assert!(!launcher_dir.join("pwned-by-candidate").exists());
    let after_hashes: Vec<String> = watched.iter().map(|dir| sf_tests::tree_hash(dir)).collect();
    assert_eq!(before, after_hashes);
    assert_eq!(scenario.records(), 4, "exactly the collector's records");

    // And the hostile Candidate is judged on what it did: it does not fix the bug.
    let verdict = scenario.judge(&request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Failed, "{verdict:#?}");
}
