//! Real bug fixes from a real history, graded by per-test results, through the `sf` binary:
//! python/typing_extensions (its standard-library `unittest` suite, run by the trusted JUnit
//! runner in the Slice's harness as a command check) at three fix commits. The base is each
//! fix's parent, imported byte for byte; the fix's test changes are laid over both trees by
//! the Slice (and protected); the proposal is the fix's source change. Each fix is Verified;
//! the parent's source with a cosmetic edit is Failed with the FAIL_TO_PASS tests named; a
//! fix that breaks another test is Failed on PASS_TO_PASS; a Candidate that forces exit 0
//! from an exit handler while its tests fail is not Verified (the runner's results disagree
//! with the exit code), nor is one whose exit handler rewrites the results to claim every
//! test passed (the exit code is the authority); one that leaves no results is
//! Inconclusive.

mod land_support;
mod suite_support;

use land_support::Work;
use sf_host::canonical::Digest;
use suite_support::{FIXES, PASS_TO_PASS, SOURCE, slice_for, slice_forbidding};

/// Seals a proposal writing `text` over the parent's source; the Candidate's digest.
fn seal(work: &Work, parent: &str, name: &str, text: &str) -> String {
    work.seal_text("slice", SOURCE, parent, name, text)
}

/// Collects and judges `candidate`; the Verdict's JSON.
fn judged(work: &Work, candidate: &str) -> serde_json::Value {
    work.collect_and_judge(candidate, "slice")
}

fn problems(verdict: &serde_json::Value, check: &str) -> String {
    verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == check)
        .map(|c| c["problems"].to_string())
        .unwrap_or_default()
}

#[test]
fn real_fixes_are_verified_and_their_parents_failed_with_the_tests_named() {
    for fix in FIXES {
        let (work, parent) = slice_for(fix);
        let fixed = std::fs::read_to_string(work.dir.join("fixed.py")).unwrap();
        let verdict = judged(&work, &seal(&work, &parent, "fix", &fixed));
        assert_eq!(verdict["outcome"], "verified", "{}: {verdict}", fix.commit);

        // The parent's source with a cosmetic edit: the new tests still fail.
        let cosmetic = format!("{parent}\n# a cosmetic edit\n");
        let verdict = judged(&work, &seal(&work, &parent, "cosmetic", &cosmetic));
        assert_eq!(verdict["outcome"], "failed", "{}: {verdict}", fix.commit);
        let missed = problems(&verdict, "tests-pass-on-candidate");
        for test in fix.fail_to_pass {
            assert!(
                missed.contains(&format!("failToPass test {test}")),
                "{}: {missed}",
                fix.commit
            );
        }
    }
}

#[test]
fn a_fix_that_breaks_another_test_is_failed_on_pass_to_pass() {
    let fix = &FIXES[0];
    let (work, parent) = slice_for(fix);
    let fixed = std::fs::read_to_string(work.dir.join("fixed.py")).unwrap();
    let breaking = format!("{fixed}\n__all__.append('no_such_name_anywhere')\n");
    let candidate = seal(&work, &parent, "breaking", &breaking);
    let verdict = judged(&work, &candidate);
    assert_eq!(verdict["outcome"], "failed", "{verdict}");
    let missed = problems(&verdict, "tests-pass-on-candidate");
    assert!(
        missed
            .contains("passToPass test test_typing_extensions.AllTests::test_all_names_in___all__"),
        "{missed}"
    );
    // The report shows the per-test results of the run that broke it.
    let made = work.sf(&[
        "report",
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--slice",
        "slice",
        "--out",
        "report.html",
    ]);
    assert_eq!(made.result()["outcome"], "failed");
    let html = std::fs::read_to_string(work.dir.join("report.html")).unwrap();
    assert!(html.contains("<table class=\"tests\">"), "{html}");
    assert!(
        html.contains("<td class=\"mono\">test_typing_extensions.AllTests::test_all_names_in___all__</td><td>failed</td>")
            || html.contains("test_all_names_in___all__</td><td>error</td>"),
        "{html}"
    );
    // The broken passToPass test is marked among the check's expectations, and leads the
    // reasons at the top of the page.
    let broken = "test_typing_extensions.AllTests::test_all_names_in___all__";
    assert!(
        html.contains(&format!(
            "<tr class=\"unexpected\"><td class=\"mono\">{broken}</td><td>failed ✗</td>"
        )) || html.contains(&format!(
            "<tr class=\"unexpected\"><td class=\"mono\">{broken}</td><td>error ✗</td>"
        )),
        "{html}"
    );
    assert!(html.contains("</td><td>passed ✓</td>"), "{html}");
    let reasons = html
        .find("<p class=\"reason\">tests-pass-on-candidate missed")
        .unwrap();
    assert!(reasons < html.find("<section id=\"checks\">").unwrap());
}

#[test]
fn forcing_exit_zero_or_deleting_the_tests_is_never_verified() {
    let fix = &FIXES[1];
    let (work, parent) = slice_for(fix);
    // The bug left in, and the process's exit forced to 0 from an exit handler: the runner's
    // results (written before the handler ran) list the failures, and disagree.
    let forced = format!(
        "{parent}\nimport atexit as _atexit, os as _os\n_atexit.register(lambda: _os._exit(0))\n"
    );
    let verdict = judged(&work, &seal(&work, &parent, "forced", &forced));
    assert_eq!(verdict["outcome"], "failed", "{verdict}");
    let missed = problems(&verdict, "tests-pass-on-candidate");
    assert!(
        missed.contains("the run exited 0, but its results list"),
        "{missed}"
    );
    assert!(missed.contains("failToPass test"), "{missed}");

    // The bug left in, and an exit handler that rewrites the results file to claim every
    // test passed: the run still exits 1, and the exit code is the authority.
    let claimed = format!(
        "{parent}\nimport atexit as _atexit\n_atexit.register(lambda: open(\
         '/sf/scratch/results.xml', 'w').write('<testsuites><testsuite>' + ''.join(\
         '<testcase classname=\"test_typing_extensions.{{}}\" name=\"{{}}\"/>'.format(*t.split('::')) \
         for t in {tests:?}) + '</testsuite></testsuites>'))\n",
        tests = fix
            .fail_to_pass
            .iter()
            .chain(PASS_TO_PASS)
            .map(|t| t.trim_start_matches("test_typing_extensions."))
            .collect::<Vec<_>>()
    );
    let verdict = judged(&work, &seal(&work, &parent, "claimed", &claimed));
    assert_eq!(verdict["outcome"], "failed", "{verdict}");
    assert!(
        problems(&verdict, "tests-pass-on-candidate").contains("exit code 1, expected 0"),
        "{verdict}"
    );
    // The forgery did land in the record: every test it lists passed.
    let record = verdict["checks"][1]["record"].as_str().unwrap().to_owned();
    let shown = work.sf(&["evidence", "get", &record, "--slice", "slice"]);
    let tests = shown.result()["results"]["tests"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        tests.len(),
        fix.fail_to_pass.len() + PASS_TO_PASS.len(),
        "{tests:?}"
    );
    assert!(
        tests.iter().all(|test| test["outcome"] == "passed"),
        "{tests:?}"
    );

    // A Candidate whose import ends the process at once, before any test ran: no results.
    let silenced = format!("import os as _os\n_os._exit(0)\n{parent}");
    let verdict = judged(&work, &seal(&work, &parent, "silenced", &silenced));
    assert_eq!(verdict["outcome"], "inconclusive", "{verdict}");
    assert!(
        problems(&verdict, "tests-pass-on-candidate").contains("cannot decide"),
        "{verdict}"
    );
}

/// A Candidate that also rewrites the results file from an exit handler (so the results and
/// the exit code agree on a pass) is what an in-process run cannot tell from a fix: a Slice
/// that forbids the constructs refuses it at seal, before anything is written, naming the
/// edit and the construct; a proposal that keeps a construct the base already holds is not
/// refused.
#[test]
fn a_slice_refuses_a_proposal_adding_a_forbidden_construct_at_seal() {
    let fix = &FIXES[1];
    let (work, parent) = slice_forbidding(fix, &["atexit", "os._exit"]);
    let forging = format!(
        "{parent}\nimport atexit as _a, os as _o\n\
         _a.register(lambda: (open('/sf/scratch/results.xml', 'w').write('<testsuites/>'), \
         _o._exit(0)))\n"
    );
    let proposal = work.proposal(
        "forging",
        serde_json::json!({"edits": [{
            "path": SOURCE, "prior": Digest::of(parent.as_bytes()).to_string(), "text": forging,
        }]}),
    );
    let refs_before = std::fs::read_dir(work.dir.join("repo.git/refs"))
        .unwrap()
        .count();
    let refused = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--proposal",
        proposal.to_str().unwrap(),
    ]);
    assert_eq!(refused.error_code(), "rejected", "{refused:?}");
    let message = refused.error_message();
    assert!(message.contains("forbidden-construct"), "{message}");
    assert!(
        message.contains(SOURCE) && message.contains("atexit"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_dir(work.dir.join("repo.git/refs"))
            .unwrap()
            .count(),
        refs_before
    );
    // The fix adds none of them, and is sealed and Verified under the same Slice.
    let fixed = std::fs::read_to_string(work.dir.join("fixed.py")).unwrap();
    let verdict = judged(&work, &seal(&work, &parent, "fix", &fixed));
    assert_eq!(verdict["outcome"], "verified", "{verdict}");
}
