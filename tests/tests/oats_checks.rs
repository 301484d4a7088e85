//! An oats capability's operation as a Slice's check, through the `sf` binary and the
//! `sf-oats` program beside it: the capability of docs/examples/oats/size-policy registered
//! and trusted, a Slice frozen with the Node runtime and one oats check of it, and Candidates
//! landed under it, on the real git binary, the real sandbox and a real SQLite file.
//!
//! - a Candidate the policy passes lands; one it rejects is Failed with the capability's
//!   reason, and the target does not move;
//! - a capability whose bytes change after the freeze leaves its check undecided
//!   (Inconclusive), as does one whose trust is revoked;
//! - untrust, upgrade and unregister are refused while the frozen Slice pins the capability
//!   (naming the Slice), and allowed with --force;
//! - the freeze refuses an oats check on another runtime than Node, an untrusted capability,
//!   and an integrity the operator wrote;
//! - docs/oats.md's worked example: the same capability as the Gate (`[gate] type =
//!   "oats-binding"`) withholds the landing during a change freeze, and the landing goes
//!   through, checked by it, once the freeze is lifted.

mod land_support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use land_support::{SUM_BUGGY, SUM_FIXED, Work, write};
use serde_json::json;
use sf_host::canonical::Digest;

const CAPABILITY: &str = "acme.size-policy";

/// The example capability, copied so that a test may change it.
fn copy_capability(to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/oats/size-policy");
    for file in ["oats.json", "bin/policy.mjs", "bin/binding.mjs"] {
        write(
            &to.join(file),
            &std::fs::read_to_string(from.join(file)).unwrap(),
        );
    }
}

/// The Slice: one oats check of the policy on the Candidate (at most 3 files, none over 1000
/// bytes), with `runtime`.
fn author_slice(work: &Work, runtime: &str, extra: &str) -> PathBuf {
    let slice = work.dir.join("slice");
    write(
        &slice.join("slice.json"),
        r#"{"id":"size-policy","revision":1,"scope":["sum.sh","data"]}"#,
    );
    write(&slice.join("recipe.json"), land_support::RECIPE);
    let check = format!(
        r#"{{"kind": "oats", "id": "sizes", "phase": "guardrail", "stage": "candidate",
            "capability": "{CAPABILITY}", "operation": "limits",
            "args": {{"max-files": "3", "max-bytes": "1000"}}{extra},
            "expectation": {{"ok": true}}}}"#
    );
    write(
        &slice.join("acceptance.json"),
        &format!(r#"{{"protocol": "sf-repository-acceptance/5", "checks": [{check}]}}"#),
    );
    write(
        &work.dir.join("sf.toml"),
        &format!("[executor]\ntype = \"sandbox-exec\"\nruntime = \"{runtime}\"\n"),
    );
    slice
}

/// A work with the capability registered (and trusted when `trusted`) in its own state
/// directory, and the Slice authored with the Node runtime.
fn registered(trusted: bool) -> Work {
    let work = Work::unfrozen();
    let state = work.dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let work = work.with_env("SF_STATE_DIR", &state);
    copy_capability(&work.dir.join("capability"));
    work.sf(&["oats", "register", "capability"]).result();
    if trusted {
        work.sf(&["oats", "trust", CAPABILITY]).result();
    }
    author_slice(&work, "node", "");
    work
}

fn freeze(work: &Work) -> sf_tests::plugins::Envelope {
    work.freeze_configured("slice", "sf.toml")
}

/// The registry as `sf oats list` shows it: the capability's entry.
fn entry(work: &Work) -> serde_json::Value {
    let listed = work.sf(&["oats", "list"]);
    listed.result()["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["id"] == CAPABILITY)
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

/// A proposal fixing `sum.sh`, plus `extra` edits; the sealed Candidate's digest.
fn seal(work: &Work, name: &str, extra: serde_json::Value) -> String {
    let mut edits = vec![json!({
        "path": "sum.sh",
        "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
        "text": SUM_FIXED,
    })];
    edits.extend(extra.as_array().cloned().unwrap_or_default());
    work.seal_edits("slice", name, json!(edits)).result()["digest"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The frozen acceptance's oats check.
fn frozen_check(work: &Work) -> serde_json::Value {
    let bytes = std::fs::read(work.dir.join("slice/frozen/acceptance.json")).unwrap();
    let acceptance: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(acceptance["protocol"], "sf-repository-acceptance/5");
    acceptance["checks"][0].clone()
}

#[test]
fn a_slice_with_an_oats_check_lands_what_it_passes_and_fails_what_it_rejects() {
    let work = registered(true);
    freeze(&work).result();
    let check = frozen_check(&work);
    assert_eq!(check["kind"], "oats");
    assert_eq!(check["integrity"], entry(&work)["integrity"], "{check}");
    assert!(check["harness"].as_str().unwrap().starts_with("sha256:"));

    // 2,000 bytes in one file: the policy refuses it, so the check misses.
    let big = seal(
        &work,
        "big",
        json!([{"path": "data/big.txt", "prior": null, "text": "x".repeat(2000)}]),
    );
    let failed = work.land(&big, "slice", &[]);
    let result = failed.result();
    assert_eq!(result["outcome"], "failed", "{result}");
    let reasons = result.to_string();
    assert!(
        reasons.contains("E_FILE_TOO_LARGE") && reasons.contains("data/big.txt is 2000 bytes"),
        "{result}"
    );
    assert_eq!(work.target(), work.initial());

    let good = seal(&work, "good", json!([]));
    let landed = work.land(&good, "slice", &[]);
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated", "{result}");
    assert_eq!(
        result["verdict"]["verdict"]["outcome"], "verified",
        "{result}"
    );
    assert_ne!(work.target(), work.initial());
}

#[test]
fn a_capability_changed_after_the_freeze_leaves_its_check_inconclusive() {
    let work = registered(true);
    freeze(&work).result();
    let good = seal(&work, "good", json!([]));
    // The policy's bytes change: what the Slice pinned is no longer what is registered.
    let script = work.dir.join("capability/bin/policy.mjs");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("// changed after the freeze\n");
    std::fs::write(&script, text).unwrap();
    let landed = work.land(&good, "slice", &[]);
    let result = landed.result();
    assert_eq!(result["outcome"], "inconclusive", "{result}");
    let reasons = result.to_string();
    assert!(
        reasons.contains("cannot run as frozen") && reasons.contains("integrity-drift"),
        "{result}"
    );
    assert_eq!(work.target(), work.initial());

    // Registered again at its new bytes (and trusted), it is still not what the Slice pins.
    work.sf(&["oats", "register", "capability"]).result();
    work.sf(&["oats", "trust", CAPABILITY]).result();
    let again = work.land(&good, "slice", &[]);
    let result = again.result();
    assert_eq!(result["outcome"], "inconclusive", "{result}");
    assert!(
        result.to_string().contains("upgraded or registered again"),
        "{result}"
    );
    assert_eq!(work.target(), work.initial());
}

#[test]
fn a_pinned_capability_is_not_untrusted_upgraded_or_unregistered_unless_forced() {
    let work = registered(true);
    freeze(&work).result();
    let before = entry(&work);
    let slice = work.dir.join("slice").canonicalize().unwrap();
    copy_capability(&work.dir.join("capability-2"));
    for args in [
        vec!["oats", "untrust", CAPABILITY],
        vec!["oats", "unregister", CAPABILITY],
        vec!["oats", "upgrade", CAPABILITY, "capability-2"],
    ] {
        let refused = work.sf(&args);
        assert_eq!(refused.error_code(), "pinned", "{args:?}");
        let message = refused.error_message();
        assert!(
            message.contains(&slice.display().to_string()) && message.contains("check sizes"),
            "{message}"
        );
        assert_eq!(entry(&work), before, "{args:?} changed the registry");
    }

    // Forced, the revocation holds: the next use is blocked, so the check is undecided.
    work.sf(&["oats", "untrust", "--force", CAPABILITY])
        .result();
    assert_eq!(entry(&work)["trusted"], false);
    let good = seal(&work, "good", json!([]));
    let verdict = work.collect_and_judge(&good, "slice");
    assert_eq!(verdict["outcome"], "inconclusive", "{verdict}");
    assert!(
        verdict.to_string().contains("E_CAPABILITY_BLOCKED")
            || verdict.to_string().contains("not trusted"),
        "{verdict}"
    );
    work.sf(&["oats", "unregister", "--force", CAPABILITY])
        .result();
    assert_eq!(entry(&work), serde_json::Value::Null);
}

#[test]
fn the_freeze_refuses_what_an_oats_check_cannot_run() {
    // Another runtime than Node: the capability's scripts could not run.
    let work = registered(true);
    author_slice(&work, "sh", "");
    let refused = freeze(&work);
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(
        refused.error_message().contains("runtime = \"node\""),
        "{}",
        refused.error_message()
    );
    assert!(!work.dir.join("slice/frozen").exists());

    // An integrity the operator wrote: the freeze pins what is registered itself.
    author_slice(
        &work,
        "node",
        r#", "integrity": "oats.tree-exec.v1:sha256-00""#,
    );
    let refused = freeze(&work);
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(
        refused.error_message().contains("integrity"),
        "{}",
        refused.error_message()
    );

    // An untrusted capability runs nothing, so no Slice can pin it.
    let untrusted = registered(false);
    let refused = freeze(&untrusted);
    assert_eq!(
        refused.error_code(),
        "E_CAPABILITY_BLOCKED",
        "{}",
        refused.error_message()
    );
    assert!(!untrusted.dir.join("slice/frozen").exists());
}

#[test]
fn the_worked_example_lands_a_change_gated_and_checked_by_the_capability() {
    let work = registered(true);
    freeze(&work).result();
    let state = work.dir.join("state");
    let binding = work.dir.join("binding.json");
    // The operator's sf.toml of the worked example: the Node runtime, and the capability's
    // binding check as the Gate.
    write(
        &work.dir.join("sf.toml"),
        &format!(
            "[executor]\ntype = \"sandbox-exec\"\nruntime = \"node\"\n\n[gate]\ntype = \
             \"oats-binding\"\ncapability = \"{CAPABILITY}\"\nbinding_file = \"{}\"\n\
             state = \"{}\"\n",
            binding.display(),
            state.display()
        ),
    );
    let good = seal(&work, "good", json!([]));
    let land = || {
        work.sf_decided(&[
            "land",
            "--identity",
            "identity.json",
            "--candidate",
            &good,
            "--slice",
            "slice",
        ])
    };
    write(&binding, r#"{"freeze": true}"#);
    let withheld = land();
    let result = withheld.result();
    assert_eq!(result["outcome"], "withheld", "{result}");
    assert!(
        result
            .to_string()
            .contains("acme.size-policy binding check: unavailable (change-freeze)"),
        "{result}"
    );
    assert_eq!(withheld.code, Some(5));
    assert_eq!(work.target(), work.initial());

    write(&binding, r#"{"freeze": false}"#);
    let landed = land();
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated", "{result}");
    assert_eq!(
        result["verdict"]["verdict"]["checks"][0]["met"], true,
        "{result}"
    );
    assert_ne!(work.target(), work.initial());
}

/// `[oats] state` in sf.toml names the registry the oats checks are staged from, before
/// `$SF_STATE_DIR` (here an empty one): without it the capability is unknown to the freeze.
#[test]
fn the_registry_is_the_one_sf_toml_names() {
    let work = Work::unfrozen();
    let private = |name: &str| {
        let dir = work.dir.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    };
    let (registry, empty) = (private("registry"), private("empty"));
    let work = work.with_env("SF_STATE_DIR", &empty);
    copy_capability(&work.dir.join("capability"));
    let state = registry.to_str().unwrap();
    work.sf(&["oats", "--state", state, "register", "capability"])
        .result();
    work.sf(&["oats", "--state", state, "trust", CAPABILITY])
        .result();
    author_slice(&work, "node", "");
    let refused = freeze(&work);
    assert_eq!(
        refused.error_code(),
        "unknown-capability",
        "{}",
        refused.json
    );

    let config = work.dir.join("sf.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n[oats]\nstate = \"{state}\"\n"));
    std::fs::write(&config, text).unwrap();
    freeze(&work).result();
    let good = seal(&work, "good", json!([]));
    let verdict = work.collect_and_judge(&good, "slice");
    assert_eq!(verdict["outcome"], "verified", "{verdict}");
}
