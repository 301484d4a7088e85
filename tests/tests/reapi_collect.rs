//! `sf collect --jobs 4` through a remote-execution cluster (BuildGrid on loopback, its
//! scheduler in a throwaway PostgreSQL cluster, two `sf worker` processes started with `sf
//! worker`), against the same Slice frozen for the local sandbox: the demo's sample and a real
//! suite (python/typing_extensions' unittest suite at a real fix) get the same Verdicts both
//! ways, and every check ran exactly once, counted in the workers' own logs.

mod land_support;
mod suite_support;

use std::sync::Arc;

use land_support::{SUM_FIXED, SUM_NOT_FIXED, Work, write};
use sf_test_support::buildgrid::{self, Cluster, Options};
use sf_tests::plugins::built;

/// The cluster of this test process: two workers with the shell runtime (whose readable
/// files include Python's, as the local sandbox's default does).
fn cluster() -> Arc<Cluster> {
    buildgrid::shared(|| {
        // The workers are started through `sf worker`, which runs sf-worker from sf's plugin
        // path: the subcommand is what is tested.
        let sf_worker = [built().sf.clone(), "worker".into()];
        Cluster::start(&sf_worker, &["sh", "sh"], Options::default())
    })
}

/// Held by each test while it counts runs on the shared cluster's workers, so that no other
/// test's runs are counted with its own.
static COUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The Verdict's outcome of `candidate` under `slice` after `sf collect --jobs 4` (with
/// `config` when given), how many runs the workers logged meanwhile, and the observation of
/// the collection's first record.
fn collected(
    work: &Work,
    cluster: &Cluster,
    slice: &str,
    candidate: &str,
    config: Option<&str>,
) -> (serde_json::Value, usize, serde_json::Value) {
    let before = cluster.runs().len();
    let on = [
        "--identity",
        "identity.json",
        "--candidate",
        candidate,
        "--slice",
        slice,
    ];
    let mut collect: Vec<&str> = config.map_or_else(Vec::new, |config| vec!["--config", config]);
    collect.extend(["collect", "--jobs", "4"]);
    collect.extend(on);
    let runs = work.sf(&collect).result()["runs"].clone();
    let record = runs[0]["evidence"].as_str().unwrap();
    let observation = work
        .sf(&["evidence", "get", record, "--slice", slice])
        .result()["observation"]
        .clone();
    let mut judge = vec!["judge"];
    judge.extend(on);
    let verdict = work.sf(&judge).result()["verdict"].clone();
    (verdict, cluster.runs().len() - before, observation)
}

/// Every file under `dir`, as text, concatenated.
fn frozen_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&frozen_text(&path));
        } else {
            text.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).unwrap_or_default(),
            ));
        }
    }
    text
}

/// The checks of a Verdict with their outcomes.
fn outcomes(verdict: &serde_json::Value) -> Vec<(String, String)> {
    verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|check| {
            (
                check["check"].as_str().unwrap().to_owned(),
                check["outcome"].to_string(),
            )
        })
        .collect()
}

#[test]
fn the_demo_through_the_cluster_gets_the_local_verdicts_each_check_run_once() {
    let _counting = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = cluster();
    let work = Work::unfrozen();
    write(&work.dir.join("reapi.toml"), &cluster.config("sh", 120));
    work.author_slice("local", &[]);
    work.freeze("local").result();
    work.author_slice("remote", &[]);
    work.freeze_configured("remote", "reapi.toml").result();
    // The Slice pins the facts the cluster's profile states, the remote confinement among
    // them: every run must report it, or none of its evidence is attributable.
    assert!(
        frozen_text(&work.dir.join("remote")).contains(r#""confinement":"remote""#),
        "the remote Slice pins confinement: remote"
    );
    for (sum, expected) in [(SUM_FIXED, "verified"), (SUM_NOT_FIXED, "failed")] {
        let local = work.seal("local", sum);
        let (local, ran, local_record) = collected(&work, &cluster, "local", &local, None);
        assert_eq!(ran, 0, "a local collection runs nothing on the cluster");
        let remote = work.seal("remote", sum);
        let (remote, ran, remote_record) =
            collected(&work, &cluster, "remote", &remote, Some("reapi.toml"));
        assert_eq!(
            local_record.get("remote"),
            None,
            "a local run names no Action"
        );
        let ran_as = &remote_record["remote"];
        assert!(
            cluster.runs().iter().any(|run| {
                let run: serde_json::Value = serde_json::from_str(run).unwrap();
                run["action"] == ran_as["action"] && run["worker"] == ran_as["worker"]
            }),
            "the record names the Action and the worker that ran it: {ran_as}"
        );
        // The worker's start and end lines name the check each Action ran (the cluster is
        // shared with the other test of this binary, whose checks appear too).
        let checks: std::collections::BTreeSet<String> = cluster
            .workers
            .iter()
            .flat_map(|worker| worker.events())
            .map(|line| serde_json::from_str::<serde_json::Value>(&line).unwrap())
            .filter(|line| line["event"] == "started" || line["event"] == "ended")
            .map(|line| line["run"].as_str().unwrap_or("").to_owned())
            .collect();
        assert!(
            checks.iter().all(|run| run.starts_with("check ")),
            "every worker line names its check: {checks:?}"
        );
        for check in [
            "check bug-fixed",
            "check bug-shown",
            "check empty-sums-to-zero",
        ] {
            assert!(checks.contains(check), "{check}: {checks:?}");
        }
        assert_eq!(local["outcome"], expected, "{local}");
        assert_eq!(remote["outcome"], expected, "{remote}");
        assert_eq!(outcomes(&remote), outcomes(&local));
        assert_eq!(
            ran, 3,
            "each of the demo's three checks ran once on the workers"
        );
    }
    let actions: std::collections::BTreeSet<String> = cluster
        .runs()
        .iter()
        .map(|run| serde_json::from_str::<serde_json::Value>(run).unwrap()["action"].to_string())
        .collect();
    assert_eq!(actions.len(), cluster.runs().len(), "no Action ran twice");
}

#[test]
fn a_real_suite_through_the_cluster_gets_the_local_verdicts_each_check_run_once() {
    let _counting = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = cluster();
    let fix = &suite_support::FIXES[0];
    let config = cluster.config("sh", 300);
    for config in [None, Some(config.as_str())] {
        let (work, parent) = suite_support::slice_configured(fix, &[], config);
        let fixed = std::fs::read_to_string(work.dir.join("fixed.py")).unwrap();
        let cosmetic = format!("{parent}\n# a cosmetic edit\n");
        for (text, expected) in [(&fixed, "verified"), (&cosmetic, "failed")] {
            let candidate = work.seal_text("slice", suite_support::SOURCE, &parent, expected, text);
            let (verdict, ran, _) = collected(
                &work,
                &cluster,
                "slice",
                &candidate,
                config.map(|_| "sf.toml"),
            );
            assert_eq!(verdict["outcome"], expected, "{verdict}");
            assert_eq!(
                ran,
                if config.is_some() { 2 } else { 0 },
                "each of the suite's two checks ran once on the workers"
            );
        }
    }
}
