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
