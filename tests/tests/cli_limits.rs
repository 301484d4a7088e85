//! `sf collect` and `sf judge` say which of the sandbox's limits a run hit, in their text
//! and their `--json` output, through the built `sf` and its loaded sandbox-exec plugin: a
//! Slice frozen with a process limit of 12 (`[executor.limits]` in the `sf.toml` it was
//! frozen with), and a correct fix that starts twenty background workers, is Inconclusive
//! with the process limit named; the same fix under the demo's Slice (default limits) is
//! Verified, so the limit is what made it Inconclusive.

mod land_support;

use land_support::*;

/// The demo's fix, starting twenty background workers first.
const SUM_FIXED_WITH_WORKERS: &str = "i=0\nwhile [ $i -lt 20 ]; do\n  sleep 1 </dev/null \
     >/dev/null 2>&1 &\n  i=$((i + 1))\ndone\ntotal=0\nwhile read -r n; do\n  total=$((total + \
     n))\ndone < \"$1\"\necho \"$total\"\n";

const REASON: &str = "the run hit the sandbox's process limit (12): ";

#[test]
fn collect_and_judge_name_the_limit_a_run_hit() {
    let work = Work::new();
    work.author_slice("tight", &[]);
    write(
        &work.dir.join("tight.toml"),
        "[executor]\ntype = \"sandbox-exec\"\n\n[executor.limits]\nprocesses = 12\n",
    );
    work.sf(&[
        "--config",
        "tight.toml",
        "slice",
        "freeze",
        "--dir",
        "tight",
        "--identity",
        "identity.json",
    ])
    .result();
    let target = |slice: &str, candidate: &str| {
        vec![
            "--identity".to_owned(),
            "identity.json".to_owned(),
            "--candidate".to_owned(),
            candidate.to_owned(),
            "--slice".to_owned(),
            slice.to_owned(),
        ]
    };
    let run = |command: &str, slice: &str, candidate: &str, json: bool| {
        let mut args = vec![command.to_owned()];
        args.extend(target(slice, candidate));
        let mut sf = work.command(&[]);
        if !json {
            sf = sf_tests::plugins::sf();
            sf.current_dir(&work.dir);
        }
        let output = sf.args(&args).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        output
    };

    let candidate = work.seal("tight", SUM_FIXED_WITH_WORKERS);
    // `sf collect --json`: the run's limitsHit, each with its reason.
    let collected = run("collect", "tight", &candidate, true);
    let collected: serde_json::Value = serde_json::from_slice(&collected.stdout).unwrap();
    let runs = collected["result"]["runs"].as_array().unwrap();
    let fixed = runs.iter().find(|run| run["check"] == "bug-fixed").unwrap();
    let hit = &fixed["limitsHit"][0];
    assert_eq!(hit["limit"], "processes", "{fixed}");
    assert_eq!(hit["value"], 12, "{fixed}");
    assert!(
        hit["reason"].as_str().unwrap().starts_with(REASON),
        "{fixed}"
    );
    assert!(
        hit["detail"].as_str().unwrap().contains("pids.events max"),
        "{fixed}"
    );
    let shown = runs.iter().find(|run| run["check"] == "bug-shown").unwrap();
    assert_eq!(shown["limitsHit"], serde_json::json!([]), "{shown}");
    // `sf evidence get` shows the record's limits, in text and in its facts.
    let id = fixed["evidence"].as_str().unwrap();
    let record = work.sf(&["evidence", "get", id, "--slice", "tight"]);
    let facts = &record.result()["observation"]["process"];
    assert_eq!(facts["limitsHit"][0]["limit"], "processes", "{facts}");
    let text = sf_tests::plugins::sf()
        .current_dir(&work.dir)
        .args(["evidence", "get", id, "--slice", "tight"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.lines()
            .any(|line| line.starts_with("  limit   ") && line.contains(REASON)),
        "{text}"
    );

    // `sf judge --json`: Inconclusive, the limit by check and in the check's problems.
    let judged = run("judge", "tight", &candidate, true);
    let judged: serde_json::Value = serde_json::from_slice(&judged.stdout).unwrap();
    let result = &judged["result"];
    assert_eq!(result["verdict"]["outcome"], "inconclusive", "{result}");
    assert_eq!(
        result["limitsHit"]["bug-fixed"][0]["limit"], "processes",
        "{result}"
    );
    let check = result["verdict"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["check"] == "bug-fixed")
        .unwrap();
    assert!(
        check["problems"][0].as_str().unwrap().starts_with(REASON),
        "{check}"
    );

    // The text outputs name it too.
    let text = run("judge", "tight", &candidate, false);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.starts_with("inconclusive"), "{text}");
    assert!(
        text.lines()
            .any(|line| line.contains("bug-fixed") && line.contains(REASON)),
        "{text}"
    );
    let text = run("collect", "tight", &candidate, false);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains(REASON), "{text}");

    // Control: the same fix under the demo's limits is Verified.
    let candidate = work.seal("slice", SUM_FIXED_WITH_WORKERS);
    run("collect", "slice", &candidate, true);
    let judged = run("judge", "slice", &candidate, true);
    let judged: serde_json::Value = serde_json::from_slice(&judged.stdout).unwrap();
    assert_eq!(
        judged["result"]["verdict"]["outcome"], "verified",
        "{judged}"
    );
    assert_eq!(judged["result"]["limitsHit"], serde_json::json!({}));
}

/// Each check holds 1.5 GiB of memory for a few seconds (a pipe `tail` must buffer whole).
const HOG: &str = "(head -c 1610612736 /dev/zero; sleep 4) | tail -n 1 >/dev/null\necho held\n";

/// Four checks that each hold 1.5 GiB, collected with `--jobs 4` under an Executor whose runs
/// may use 3 GiB together: the collection's total stops the runs that do not fit (each below
/// its own 2 GiB bound), their records name the collection's limit (never the run's own), and
/// the Verdict is Inconclusive, never Failed: the total is the host's, not the Candidate's.
#[test]
fn a_collections_runs_are_bounded_together_and_the_total_is_never_the_candidates() {
    let work = Work::new();
    let checks: Vec<serde_json::Value> = (0..4)
        .map(|at| {
            serde_json::json!({
                "kind": "process", "id": format!("hog-{at}"), "phase": "guardrail",
                "stage": "candidate", "entry": {"from": "harness", "path": "hog.sh"},
                "entryInScope": false, "args": [], "input": "empty",
                "expectation": {"exitCode": 0, "stdoutDigest": null},
            })
        })
        .collect();
    let acceptance =
        serde_json::json!({"protocol": "sf-repository-acceptance/2", "checks": checks}).to_string();
    work.author_slice(
        "hogs",
        &[
            ("acceptance.json", &acceptance),
            ("harness/hog.sh", HOG),
            ("recipe.json", r#"{"timeoutMs":120000,"outputLimit":65536}"#),
        ],
    );
    write(
        &work.dir.join("total.toml"),
        "[executor]\ntype = \"sandbox-exec\"\ntotal_memory_bytes = 3221225472\n",
    );
    work.freeze_configured("hogs", "total.toml").result();
    let candidate = work.seal("hogs", SUM_FIXED);
    let on = [
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--slice",
        "hogs",
    ];
    let mut args = vec!["--config", "total.toml", "collect", "--jobs", "4"];
    args.extend(on);
    let collected = work.sf(&args).result().clone();
    let runs = collected["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{collected}");
    let stopped: Vec<&serde_json::Value> = runs
        .iter()
        .filter(|run| run["limitsHit"] != serde_json::json!([]))
        .collect();
    assert!(!stopped.is_empty(), "4 × 1.5 GiB fit in 3 GiB: {collected}");
    assert!(stopped.len() < 4, "one run at least fits: {collected}");
    for run in &stopped {
        let hits = run["limitsHit"].as_array().unwrap();
        assert_eq!(hits.len(), 1, "{run}");
        assert_eq!(hits[0]["limit"], "collection-memory", "{run}");
        assert_eq!(hits[0]["value"], 3_221_225_472_u64, "{run}");
        assert!(
            hits[0]["detail"]
                .as_str()
                .unwrap()
                .contains("total memory bound (3072 MiB)"),
            "{run}"
        );
        assert!(run["evidence"].is_string(), "the run is recorded: {run}");
    }
    // The record says it too, and the judge never counts it against the Candidate.
    let record = work
        .sf(&[
            "--config",
            "total.toml",
            "evidence",
            "get",
            stopped[0]["evidence"].as_str().unwrap(),
            "--slice",
            "hogs",
        ])
        .result()
        .to_string();
    assert!(record.contains("collection-memory"), "{record}");
    let mut judge = vec!["--config", "total.toml", "judge"];
    judge.extend(on);
    let verdict = work.sf(&judge).result()["verdict"].clone();
    assert_eq!(verdict["outcome"], "inconclusive", "{verdict}");
    assert!(
        verdict.to_string().contains("collection's total memory"),
        "{verdict}"
    );
}
