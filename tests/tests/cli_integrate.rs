//! `sf integrate prepare|invoke|inspect` through the binary: a Verified Candidate is prepared
//! from its Verdict (the proof is the Verdict's digest), withheld behind a closed gate file,
//! then (as a new occurrence) moved behind an open one; replays and inspections report the
//! retained history; bad input is refused with `ok: false` and writes nothing.

mod land_support;

use std::path::Path;

use land_support::*;
use serde_json::json;
use sf_host::canonical::Digest;
use sf_tests::plugins::Envelope;
use sf_tests::tree_hash;

fn prepare(work: &Work, candidate: &str, occurrence: u64, out: &Path) -> Envelope {
    work.sf(&[
        "integrate",
        "prepare",
        "--identity",
        "identity.json",
        "--candidate",
        candidate,
        "--slice",
        "slice",
        "--action",
        "release",
        "--occurrence",
        &occurrence.to_string(),
        "--owner",
        "owner-1",
        "--generation",
        "1",
        "--prepared-out",
        out.to_str().unwrap(),
    ])
}

fn invoke(work: &Work, prepared: &Path, gate: &str) -> Envelope {
    work.sf(&[
        "integrate",
        "invoke",
        "--identity",
        "identity.json",
        "--prepared",
        prepared.to_str().unwrap(),
        "--slice",
        "slice",
        "--gate",
        gate,
    ])
}

#[test]
fn prepare_invoke_and_inspect_through_the_binary() {
    let work = Work::new();
    let candidate = work.seal("slice", SUM_FIXED);
    work.sf(&[
        "collect",
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--slice",
        "slice",
    ])
    .result();

    let first = work.dir.join("prepared-1.json");
    let prepared = prepare(&work, &candidate, 1, &first);
    assert_eq!(prepared.code, Some(0), "{:?}", prepared.json);
    let commit = prepared.result()["payload"]["commit"].clone();
    assert!(first.is_file());
    // An exact replay returns the same intent; the output file is never overwritten.
    let again = prepare(&work, &candidate, 1, &work.dir.join("prepared-1b.json"));
    assert_eq!(again.result(), prepared.result());
    let exists = prepare(&work, &candidate, 1, &first);
    assert_eq!(exists.error_code(), "exists");

    write(
        &work.dir.join("closed.json"),
        r#"{"proceed": false, "reason": "release freeze"}"#,
    );
    let withheld = invoke(&work, &first, "closed.json");
    assert_eq!(withheld.code, Some(0));
    assert_eq!(withheld.result()["invocation"], json!("withheld"));
    assert_eq!(
        withheld.result()["problem"],
        json!("withheld before submission: release freeze")
    );
    assert_eq!(work.target(), work.initial());
    // The occurrence is consumed: a later invocation reads unknown and starts nothing.
    let consumed = invoke(&work, &first, "gate.json");
    assert_eq!(consumed.result()["invocation"], json!("unknown"));
    assert_eq!(consumed.result()["dispatched"], json!(false));

    let second = work.dir.join("prepared-2.json");
    assert_eq!(prepare(&work, &candidate, 2, &second).code, Some(0));
    let moved = invoke(&work, &second, "gate.json");
    assert_eq!(
        moved.result()["invocation"],
        json!("confirmed"),
        "{:?}",
        moved.json
    );
    assert_eq!(moved.result()["dispatched"], json!(true));
    assert_eq!(json!(work.target()), commit);

    let inspected = work.sf(&[
        "integrate",
        "inspect",
        "--identity",
        "identity.json",
        "--prepared",
        second.to_str().unwrap(),
    ]);
    assert_eq!(inspected.result()["invocation"], json!("confirmed"));
    assert_eq!(inspected.result()["dispatched"], json!(false));
    assert_eq!(inspected.result()["receipt"], moved.result()["receipt"]);
}

#[test]
fn bad_integration_input_is_refused_and_writes_nothing() {
    let work = Work::new();
    let before = tree_hash(&work.dir.join("repo.git"));
    let out = work.dir.join("prepared.json");
    // An unknown Candidate, a malformed digest, a prepared file that is not one.
    let unknown = prepare(&work, &Digest::of(b"none").to_string(), 1, &out);
    assert_eq!(unknown.code, Some(1));
    assert_eq!(unknown.json["ok"], json!(false));
    let malformed = prepare(&work, "sha256:XYZ", 1, &out);
    assert_eq!(malformed.error_code(), "invalid-input");
    std::fs::write(&out, b"{\"protocol\":\"sf-integration/1\"}").unwrap();
    let bad_prepared = invoke(&work, &out, "gate.json");
    assert_eq!(bad_prepared.code, Some(1));
    assert_eq!(bad_prepared.error_code(), "invalid-input");
    let usage = work.sf(&["integrate", "prepare", "--identity", "identity.json"]);
    assert_eq!(usage.code, Some(2));
    // The old free-form proof is no flag any more.
    let proof = work.sf(&[
        "integrate",
        "prepare",
        "--identity",
        "identity.json",
        "--proof",
        &Digest::of(b"proof").to_string(),
    ]);
    assert_eq!(proof.code, Some(2));
    assert_eq!(
        tree_hash(&work.dir.join("repo.git")),
        before,
        "a refused integration wrote something"
    );
}
