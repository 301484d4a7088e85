//! Less to write: a check that reads no input names none (no empty `inputs/` directory),
//! and one graded on its exit code alone omits `stdoutDigest`; both still grade, through the
//! built `sf` on the sample project.

mod land_support;

use land_support::{SUM_FIXED, Work};

/// An acceptance of one after check running the tree's `sum.sh` over `/dev/null` (which sums
/// to 0), expecting exit code `exit`: no `input`, no `stdoutDigest`.
fn acceptance(exit: i32) -> String {
    serde_json::json!({
        "protocol": "sf-repository-acceptance/2",
        "checks": [{
            "kind": "process", "id": "sums-nothing", "phase": "guardrail", "stage": "candidate",
            "entry": {"from": "tree", "path": "sum.sh"}, "entryInScope": true,
            "args": ["/dev/null"], "expectation": {"exitCode": exit},
        }],
    })
    .to_string()
}

#[test]
fn a_check_without_input_or_stdout_digest_freezes_and_grades_on_its_exit_code() {
    let work = Work::unfrozen();
    for (name, exit, outcome) in [("meets", 0, "verified"), ("misses", 3, "failed")] {
        // The demo's inputs are gone: nothing names them.
        work.author_slice(
            name,
            &[
                ("acceptance.json", &acceptance(exit)),
                ("inputs/numbers/numbers.txt", ""),
                ("inputs/empty/numbers.txt", ""),
            ],
        );
        let frozen = work.freeze(name);
        frozen.result();
        let stored =
            std::fs::read_to_string(work.dir.join(name).join("frozen/acceptance.json")).unwrap();
        // The frozen record is explicit: the empty input pinned, stdout not compared.
        assert!(stored.contains(r#""stdoutDigest":null"#), "{stored}");
        assert!(stored.contains(r#""input":"sha256:"#), "{stored}");
        let candidate = work.seal(name, SUM_FIXED);
        let verdict = work.collect_and_judge(&candidate, name);
        assert_eq!(verdict["outcome"], outcome, "{name}: {verdict}");
    }
}
