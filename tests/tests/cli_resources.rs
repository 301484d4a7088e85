//! A command check's own bounds, through the `sf` binary: a check that declares it needs at
//! most 16 processes and threads, over a program that starts 40 threads, is Failed with the
//! bound named (the program did not fit what the check asks); the same program under a check
//! that declares nothing fits the sandbox's defaults and is Verified; and a bound above the
//! executor's own limit starts nothing (the executor refuses it): Inconclusive, never run
//! under less than it asks.

mod land_support;

use land_support::{SUM_FIXED, Work, write};

const THREADS: &str = "import sys, threading\n\
n = int(sys.argv[1]); b = threading.Barrier(n + 1); ts = []\n\
try:\n\
\x20   for _ in range(n):\n\
\x20       t = threading.Thread(target=b.wait); t.start(); ts.append(t)\n\
except RuntimeError:\n\
\x20   print('refused after', len(ts)); b.abort(); sys.exit(3)\n\
b.wait()\n\
[t.join() for t in ts]\n";

/// A Slice `name` of the demo's repository with one command check running the harness's
/// thread program with 40 threads, declaring `resources`.
fn slice(work: &Work, name: &str, resources: serde_json::Value) -> serde_json::Value {
    let slice = work.author_slice(name, &[]);
    write(&slice.join("harness/threads.py"), THREADS);
    let mut check = serde_json::json!({
        "kind": "command", "id": "starts-threads", "phase": "guardrail", "stage": "candidate",
        "argv": ["python3", "/sf/harness/threads.py", "40"],
        "cwd": {"from": "scratch", "path": ""}, "env": {}, "environment": null,
        "results": null, "input": "numbers",
        "expectation": {"exitCode": 0, "stdoutDigest": null},
    });
    if !resources.is_null() {
        check["resources"] = resources;
    }
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({"protocol": "sf-repository-acceptance/3", "checks": [check]})
            .to_string(),
    );
    work.freeze(name).json.clone()
}

fn verdict(work: &Work, name: &str) -> serde_json::Value {
    work.collect_and_judge(&work.seal(name, SUM_FIXED), name)
}

#[test]
fn a_declared_bound_the_run_exceeds_fails_the_check_and_an_undeclared_one_is_the_sandboxs() {
    let work = Work::new();
    slice(&work, "bounded", serde_json::json!({"processes": 16}));
    let failed = verdict(&work, "bounded");
    assert_eq!(failed["outcome"], "failed", "{failed}");
    let problems = failed["checks"][0]["problems"].to_string();
    assert!(
        problems.contains("the run exceeded the check's own process limit (16"),
        "{problems}"
    );
    slice(&work, "unbounded", serde_json::Value::Null);
    let verified = verdict(&work, "unbounded");
    assert_eq!(verified["outcome"], "verified", "{verified}");

    slice(
        &work,
        "greedy",
        serde_json::json!({"processes": 1u64 << 40}),
    );
    let inconclusive = verdict(&work, "greedy");
    assert_eq!(inconclusive["outcome"], "inconclusive", "{inconclusive}");
    assert!(
        inconclusive["reasons"]
            .to_string()
            .contains("at most the profile's limit"),
        "{inconclusive}"
    );
}

/// A check's own timeout: a run that does not end within it misses (Failed, the timeout
/// named, even though a run cut short leaves no results to grade); a timeout above the
/// recipe's is refused at freeze, with nothing written.
#[test]
fn a_checks_own_timeout_the_run_exceeds_fails_the_check() {
    let work = Work::new();
    let authored = |name: &str, timeout_ms: u64| {
        let slice = work.author_slice(name, &[]);
        write(
            &slice.join("acceptance.json"),
            &serde_json::json!({"protocol": "sf-repository-acceptance/3", "checks": [{
                "kind": "command", "id": "sleeps", "phase": "guardrail", "stage": "candidate",
                "argv": ["sleep", "5"], "cwd": {"from": "scratch", "path": ""}, "env": {},
                "environment": null,
                "results": {"junit": "results.xml", "maxBytes": 65536}, "input": "numbers",
                "timeoutMs": timeout_ms,
                "expectation": {"exitCode": 0, "stdoutDigest": null},
            }]})
            .to_string(),
        );
        work.freeze(name)
    };
    authored("quick", 1500).result();
    let failed = verdict(&work, "quick");
    assert_eq!(failed["outcome"], "failed", "{failed}");
    assert!(
        failed["checks"][0]["problems"]
            .to_string()
            .contains("did not end within the check's own timeout (1500 ms)"),
        "{failed}"
    );
    // The recipe of these tests allows 3 s.
    let refused = authored("slow", 10_000);
    assert!(refused.error_message().contains("recipe"), "{:?}", refused);
    assert!(!work.dir.join("slow/frozen").exists());
}
