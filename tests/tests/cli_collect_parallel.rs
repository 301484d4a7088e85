//! Four Candidates of one repository collected at once through the `sf` binary, with the
//! built-in SQLite store and the file fence (the PostgreSQL store and fence:
//! `cli_postgres_fence.rs`): no collection is refused or waits, the four attempts get four
//! epochs, every run is one stored record (the store holds exactly the runs' records), and
//! each Verdict is the one the Candidate gets when it is collected alone.

mod land_support;

use land_support::{SUM_FIXED, SUM_NOT_FIXED, Work, on};
use sf_tests::plugins::Envelope;

#[test]
fn four_candidates_of_one_repository_collect_at_once_each_judged_as_alone() {
    let work = Work::new();
    let sums = [SUM_FIXED, SUM_NOT_FIXED];
    let candidates: Vec<(String, &str)> = (0..4)
        .map(|n| {
            let sum = format!("{}# candidate {n}\n", sums[n % 2]);
            let expected = if n % 2 == 0 { "verified" } else { "failed" };
            (work.seal("slice", &sum), expected)
        })
        .collect();

    let children: Vec<_> = candidates
        .iter()
        .map(|(candidate, _)| {
            let mut args = vec!["collect"];
            args.extend(on(candidate));
            work.command(&args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let results: Vec<serde_json::Value> = children
        .into_iter()
        .map(|child| {
            Envelope::parse(child.wait_with_output().unwrap())
                .result()
                .clone()
        })
        .collect();

    let mut epochs: Vec<u64> = results
        .iter()
        .map(|result| {
            assert_eq!(result["waitedMs"], 0, "no collection waited: {result}");
            assert_eq!(result["mayJudge"], true, "{result}");
            result["attempt"]["epoch"].as_u64().unwrap()
        })
        .collect();
    epochs.sort_unstable();
    assert_eq!(epochs, [1, 2, 3, 4], "one epoch of the Product per attempt");

    // Every run is one stored record, and the store holds nothing else.
    let mut stored: Vec<String> = results
        .iter()
        .flat_map(|result| result["runs"].as_array().unwrap().clone())
        .map(|run| {
            run["evidence"]
                .as_str()
                .expect("each run stored")
                .to_owned()
        })
        .collect();
    let runs = stored.len();
    stored.sort();
    stored.dedup();
    assert_eq!(stored.len(), runs, "no record twice");
    let mut found = 0;
    for (candidate, expected) in &candidates {
        let mut args = vec!["evidence", "find"];
        args.extend(on(candidate));
        found += work.sf(&args).result()["ids"].as_array().unwrap().len();
        let mut judge = vec!["judge"];
        judge.extend(on(candidate));
        let verdict = work.sf(&judge).result()["verdict"].clone();
        assert_eq!(verdict["outcome"], *expected, "{candidate}: {verdict}");
    }
    assert_eq!(found, runs, "the store holds exactly the runs' records");
}
