//! `sf integrate prepare|invoke|inspect` through the binary: a sealed Candidate is prepared
//! from flags, withheld behind a closed gate file, then (as a new occurrence) moved behind an
//! open one; replays and inspections report the retained history; bad input is refused with
//! `ok: false` and writes nothing.

use std::path::{Path, PathBuf};

use serde_json::json;
use sf_host::canonical::Digest;
use sf_tests::plugins::{Envelope, run_json, sf};
use sf_tests::{TestRepo, edit, frozen, proposal, tree_hash};

fn prepare(
    test: &TestRepo,
    identity: &PathBuf,
    candidate: &str,
    occurrence: u64,
    out: &PathBuf,
) -> Envelope {
    run_json(
        sf().args(["integrate", "prepare", "--json", "--identity"])
            .arg(identity)
            .args(["--candidate", candidate, "--action", "release"])
            .args(["--occurrence", &occurrence.to_string()])
            .args(["--proof", &Digest::of(b"proof").to_string()])
            .args(["--owner", "owner-1", "--generation", "1", "--prepared-out"])
            .arg(out)
            .current_dir(&test.parent),
    )
}

fn invoke(identity: &Path, prepared: &Path, gate: Option<&PathBuf>) -> Envelope {
    let mut command = sf();
    command
        .args(["integrate", "invoke", "--json", "--identity"])
        .arg(identity)
        .arg("--prepared")
        .arg(prepared);
    if let Some(gate) = gate {
        command.arg("--gate").arg(gate);
    }
    run_json(&mut command)
}

#[test]
fn prepare_invoke_and_inspect_through_the_binary() {
    let test = TestRepo::git(&[("src/a.txt", "alpha\n")]);
    let sealed = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("one\n"))]),
        )
        .unwrap();
    let identity = test.parent.join("identity.json");
    std::fs::write(&identity, test.identity.to_canonical_bytes()).unwrap();
    let candidate = sealed.digest.to_string();

    let first = test.parent.join("prepared-1.json");
    let prepared = prepare(&test, &identity, &candidate, 1, &first);
    assert_eq!(prepared.code, Some(0), "{:?}", prepared.json);
    assert_eq!(
        prepared.result()["payload"]["commit"],
        json!(sealed.manifest.commit.to_hex())
    );
    assert!(first.is_file());
    // An exact replay returns the same intent; the output file is never overwritten.
    let again = prepare(
        &test,
        &identity,
        &candidate,
        1,
        &test.parent.join("prepared-1b.json"),
    );
    assert_eq!(again.result(), prepared.result());
    let exists = prepare(&test, &identity, &candidate, 1, &first);
    assert_eq!(exists.error_code(), "exists");

    let gate = test.parent.join("gate.json");
    std::fs::write(&gate, br#"{"proceed": false, "reason": "release freeze"}"#).unwrap();
    let withheld = invoke(&identity, &first, Some(&gate));
    assert_eq!(withheld.code, Some(0));
    assert_eq!(withheld.result()["invocation"], json!("withheld"));
    assert_eq!(
        withheld.result()["problem"],
        json!("withheld before submission: release freeze")
    );
    assert_eq!(test.repo.target().unwrap(), test.identity.initial);
    // The occurrence is consumed: a later invocation reads unknown and starts nothing.
    std::fs::write(&gate, br#"{"proceed": true}"#).unwrap();
    let consumed = invoke(&identity, &first, Some(&gate));
    assert_eq!(consumed.result()["invocation"], json!("unknown"));
    assert_eq!(consumed.result()["dispatched"], json!(false));

    let second = test.parent.join("prepared-2.json");
    assert_eq!(
        prepare(&test, &identity, &candidate, 2, &second).code,
        Some(0)
    );
    let moved = invoke(&identity, &second, Some(&gate));
    assert_eq!(
        moved.result()["invocation"],
        json!("confirmed"),
        "{:?}",
        moved.json
    );
    assert_eq!(moved.result()["dispatched"], json!(true));
    assert_eq!(test.repo.target().unwrap(), sealed.manifest.commit);

    let inspected = run_json(
        sf().args(["integrate", "inspect", "--json", "--identity"])
            .arg(&identity)
            .arg("--prepared")
            .arg(&second),
    );
    assert_eq!(inspected.result()["invocation"], json!("confirmed"));
    assert_eq!(inspected.result()["dispatched"], json!(false));
    assert_eq!(inspected.result()["receipt"], moved.result()["receipt"]);
}

#[test]
fn bad_integration_input_is_refused_and_writes_nothing() {
    let test = TestRepo::git(&[("src/a.txt", "alpha\n")]);
    let identity = test.parent.join("identity.json");
    std::fs::write(&identity, test.identity.to_canonical_bytes()).unwrap();
    let before = tree_hash(&test.path);
    let out = test.parent.join("prepared.json");
    // An unknown Candidate, a malformed digest, a prepared file that is not one.
    let unknown = prepare(&test, &identity, &Digest::of(b"none").to_string(), 1, &out);
    assert_eq!(unknown.code, Some(1));
    assert_eq!(unknown.json["ok"], json!(false));
    let malformed = prepare(&test, &identity, "sha256:XYZ", 1, &out);
    assert_eq!(malformed.error_code(), "invalid-input");
    std::fs::write(&out, b"{\"protocol\":\"sf-integration/1\"}").unwrap();
    let bad_prepared = invoke(&identity, &out, None);
    assert_eq!(bad_prepared.code, Some(1));
    assert_eq!(bad_prepared.error_code(), "invalid-input");
    let usage = run_json(
        sf().args(["integrate", "prepare", "--json", "--identity"])
            .arg(&identity),
    );
    assert_eq!(usage.code, Some(2));
    assert_eq!(
        tree_hash(&test.path),
        before,
        "a refused integration wrote something"
    );
}
