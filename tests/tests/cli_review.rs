//! Review checks through sf's own commands, on the real git binary, the real sandbox and a
//! real SQLite file: a Slice whose acceptance requires one approval is Inconclusive (and `sf
//! land` integrates nothing) until `sf review approve`, Verified after (and `sf land` lands the
//! attempt the reviewer read); a rejection makes it Failed, whenever it was stored; an approval
//! of another Candidate, of another attempt, or naming another subject counts for nothing;
//! signed reviews are made with the real `ssh-keygen -Y sign` and checked against the key the
//! Slice lists; a rejection after the intent was prepared stops the move; reviews are stored
//! in, and counted from, PostgreSQL as from SQLite.

mod land_support;
mod pg_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use land_support::{SLICE, SUM_FIXED, SUM_NOT_FIXED, Work, on};
use pg_support::{SCHEMA, config};
use sf_host::assurance::{Decision, REVIEW_FORMAT, Review};
use sf_host::canonical::Digest;
use sf_host::contracts::{AttemptId, EvidenceRecord, EvidenceStore as _};
use sf_host::evidence::SqliteEvidenceStore;
use sf_test_support::postgres::PgCluster;
use sf_tests::plugins::Envelope;

/// The demo's acceptance with a review check `human` asking `approvals` of `reviewers`.
fn acceptance(reviewers: serde_json::Value, approvals: u64) -> String {
    let authored = SLICE
        .iter()
        .find(|(path, _)| *path == "acceptance.json")
        .unwrap()
        .1;
    let mut acceptance: serde_json::Value = serde_json::from_str(authored).unwrap();
    acceptance["protocol"] = "sf-repository-acceptance/4".into();
    acceptance["checks"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "kind": "review",
            "id": "human",
            "prompt": "Does the fix read right?",
            "approvals": approvals,
            "reviewers": reviewers,
        }));
    acceptance.to_string()
}

/// A repository and a frozen Slice whose acceptance asks one approval of alice or bob.
fn reviewed() -> Work {
    reviewed_by(
        serde_json::json!([{"name": "alice", "key": null}, {"name": "bob", "key": null}]),
        1,
    )
}

fn reviewed_by(reviewers: serde_json::Value, approvals: u64) -> Work {
    let work = Work::unfrozen();
    work.author_slice(
        "slice",
        &[("acceptance.json", &acceptance(reviewers, approvals))],
    );
    work.freeze("slice").result();
    work
}

/// Seals the fix and lands it: every process check met, the approval awaited (exit 4). The
/// Candidate and its review subject.
fn awaiting(work: &Work) -> (String, String) {
    let candidate = work.seal("slice", SUM_FIXED);
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.code, Some(4), "{}", landed.json);
    let subject = subject(work, &candidate);
    (candidate, subject)
}

/// `sf ARGS` without `--json`: its stdout.
fn text(work: &Work, args: &[&str]) -> String {
    let output = work.text_command(args).output().unwrap();
    String::from_utf8(output.stdout).unwrap()
}

/// `sf COMMAND` of `candidate` under the Slice, with `extra` flags, in JSON.
fn on_candidate(work: &Work, command: &[&str], candidate: &str, extra: &[&str]) -> Envelope {
    let mut args = command.to_vec();
    args.extend(on(candidate));
    args.extend_from_slice(extra);
    work.sf(&args)
}

/// `sf show --json` of `candidate` under the Slice: its `review` part.
fn shown_review(work: &Work, candidate: &str) -> serde_json::Value {
    work.sf(&[
        "show",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        candidate,
    ])
    .result()["review"]
        .clone()
}

/// The review subject `sf show` prints for `candidate`.
fn subject(work: &Work, candidate: &str) -> String {
    shown_review(work, candidate)["subject"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `sf review DECISION` of `candidate` as `reviewer`, with `extra` flags.
fn review(
    work: &Work,
    decision: &str,
    candidate: &str,
    reviewer: &str,
    extra: &[&str],
) -> Envelope {
    let mut flags = vec![
        "--reviewer",
        reviewer,
        "--reason",
        "read the diff and the checks",
    ];
    flags.extend_from_slice(extra);
    on_candidate(work, &["review", decision], candidate, &flags)
}

fn judge(work: &Work, candidate: &str) -> serde_json::Value {
    on_candidate(work, &["judge"], candidate, &[]).result()["verdict"].clone()
}

#[test]
fn one_approval_makes_it_verified_and_sf_land_lands_the_attempt_the_reviewer_read() {
    let work = reviewed();
    let candidate = work.seal("slice", SUM_FIXED);
    let initial = work.target();

    // Collected and judged: every process check met, the review awaited.
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.code, Some(4), "{}", landed.json);
    let result = landed.result();
    assert_eq!(result["outcome"], "inconclusive");
    assert!(result["prepared"].is_null(), "{result}");
    let record = &result["verdict"]["verdict"];
    assert_eq!(record["protocol"], "sf-repository-verdict/2");
    assert_eq!(record["reviews"]["process"], "verified");
    assert_eq!(
        record["reviews"]["checks"][0]["met"],
        serde_json::Value::Null
    );
    assert!(
        record["reasons"][0].as_str().unwrap().starts_with(
            "review check human: awaiting 1 more approval(s) (0 of 1) from alice, bob"
        ),
        "{record}"
    );
    assert_eq!(work.target(), initial);
    assert_eq!(work.dispatches(), 0);

    // The subject sf show prints is the one the Verdict names.
    let subject = subject(&work, &candidate);
    assert_eq!(record["reviews"]["subject"], subject.as_str());

    // An approval of a subject the reviewer did not read now is refused before anything is
    // written; so is an approval without a subject, and one by someone the check does not list.
    let before = work.hash("slice");
    let stale = review(
        &work,
        "approve",
        &candidate,
        "alice",
        &["--subject", &Digest::of(b"another report").to_string()],
    );
    assert_eq!(stale.error_code(), "conflict", "{}", stale.json);
    let no_subject = review(&work, "approve", &candidate, "alice", &[]);
    assert_eq!(no_subject.error_code(), "usage");
    assert_eq!(no_subject.code, Some(2));
    let mallory = review(
        &work,
        "approve",
        &candidate,
        "mallory",
        &["--subject", &subject],
    );
    assert_eq!(mallory.error_code(), "invalid-input");
    assert!(
        mallory.error_message().contains("it lists alice, bob"),
        "{}",
        mallory.json
    );
    assert_eq!(work.hash("slice"), before);

    // The approval: Verified.
    let approved = review(
        &work,
        "approve",
        &candidate,
        "alice",
        &["--subject", &subject],
    );
    let approved = approved.result();
    assert_eq!(
        approved["verdict"]["verdict"]["outcome"], "verified",
        "{approved}"
    );
    assert_eq!(approved["record"]["subject"], subject.as_str());
    assert_eq!(approved["record"]["reviewer"], "alice");
    let checks = &approved["verdict"]["verdict"]["reviews"]["checks"][0];
    assert_eq!(checks["approvedBy"], serde_json::json!(["alice"]));
    assert_eq!(checks["records"][0], approved["review"]);
    assert_eq!(judge(&work, &candidate)["outcome"], "verified");

    // sf land lands it, judging the reviewed attempt again: nothing collected.
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.code, Some(0), "{}", landed.json);
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated");
    assert_eq!(result["reviewedAttempt"], true);
    assert!(result["runs"].is_null(), "nothing collected: {result}");
    assert_eq!(result["attempt"]["epoch"], 1);
    let commit = work.sf(&["show", "--identity", "identity.json", &candidate]);
    assert_eq!(work.target(), commit.result()["commit"].as_str().unwrap());

    // The record reads back through sf evidence get, text and JSON.
    let id = approved["review"].as_str().unwrap();
    let got = work.sf(&["evidence", "get", id, "--slice", "slice"]);
    assert_eq!(got.result()["format"], REVIEW_FORMAT);
    assert_eq!(got.result()["review"]["decision"], "approve");
    let text = text(&work, &["evidence", "get", id, "--slice", "slice"]);
    assert!(
        text.contains("  decision approve\n  reviewer alice\n"),
        "{text}"
    );
    assert!(text.contains("| read the diff and the checks\n"), "{text}");
}

#[test]
fn a_rejection_always_wins_and_sf_land_integrates_nothing() {
    let work = reviewed();
    let (candidate, subject) = awaiting(&work);
    review(
        &work,
        "approve",
        &candidate,
        "alice",
        &["--subject", &subject],
    )
    .result();
    // bob rejects after alice approved (a rejection needs no --subject: it is never less safe),
    // and then bob approves too: the rejection stands.
    let rejected = review(&work, "reject", &candidate, "bob", &[]);
    assert_eq!(rejected.result()["verdict"]["verdict"]["outcome"], "failed");
    review(
        &work,
        "approve",
        &candidate,
        "bob",
        &["--subject", &subject],
    )
    .result();
    let verdict = judge(&work, &candidate);
    assert_eq!(verdict["outcome"], "failed", "{verdict}");
    let check = &verdict["reviews"]["checks"][0];
    assert_eq!(check["met"], false);
    assert_eq!(check["rejectedBy"][0]["reviewer"], "bob");
    assert!(
        check["problems"][0]
            .as_str()
            .unwrap()
            .starts_with("rejected by bob")
    );

    let initial = work.target();
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.code, Some(3), "{}", landed.json);
    assert_eq!(landed.result()["outcome"], "failed");
    assert!(landed.result()["prepared"].is_null());
    assert_eq!(work.target(), initial);
    assert_eq!(work.dispatches(), 0);

    // The judge's text says why: the review check and its rejection.
    let mut judge_text = vec!["judge"];
    judge_text.extend(on(&candidate));
    let text = text(&work, &judge_text);
    assert!(text.starts_with("failed (attempt sum@1)\n"), "{text}");
    assert!(text.contains(&format!(
        "  review subject {subject} (process checks verified)\n"
    )));
    assert!(
        text.contains("  human                    rejected\n"),
        "{text}"
    );
    assert!(text.contains("rejected by bob (review sha256:"), "{text}");
}

#[test]
fn approvals_of_another_candidate_attempt_or_subject_count_for_nothing() {
    let work = reviewed();
    let first = work.seal("slice", SUM_FIXED);
    let second = work.seal(
        "slice",
        &format!("{SUM_FIXED}# the same fix, another Candidate\n"),
    );
    for candidate in [&first, &second] {
        work.land(candidate, "slice", &[]);
    }
    // Approving the second Candidate leaves the first awaiting.
    let second_subject = subject(&work, &second);
    review(
        &work,
        "approve",
        &second,
        "alice",
        &["--subject", &second_subject],
    )
    .result();
    assert_eq!(judge(&work, &second)["outcome"], "verified");
    assert_eq!(judge(&work, &first)["outcome"], "inconclusive");
    let wrong = review(
        &work,
        "approve",
        &first,
        "alice",
        &["--subject", &second_subject],
    );
    assert_eq!(wrong.error_code(), "conflict");

    // A review naming another subject, written into the store under the first Candidate's
    // pins and attempt (as anyone who can write the store could), counts for nothing, and
    // `sf show` says why.
    let pins = judge(&work, &first)["pins"].as_str().unwrap().to_owned();
    let forged = Review {
        at: "2026-01-01T00:00:00.000Z".into(),
        candidate: Digest::parse(&first).unwrap(),
        check: "human".into(),
        decision: Decision::Approve,
        reason: "looks fine".into(),
        reviewer: "alice".into(),
        signature: None,
        subject: Digest::parse(&second_subject).unwrap(),
    };
    let record = EvidenceRecord::new(
        Digest::parse(&pins).unwrap(),
        AttemptId {
            product: "sum".into(),
            epoch: 1,
        },
        REVIEW_FORMAT,
        &forged.to_bytes().unwrap(),
    )
    .unwrap();
    let store =
        SqliteEvidenceStore::open(&work.dir.join("slice/state/evidence/evidence.db")).unwrap();
    store
        .put(&record, Instant::now() + Duration::from_secs(10))
        .unwrap();
    let verdict = judge(&work, &first);
    assert_eq!(verdict["outcome"], "inconclusive", "{verdict}");
    let problems = verdict["reviews"]["checks"][0]["problems"].to_string();
    assert!(
        problems.contains("counts for nothing: it names subject"),
        "{problems}"
    );
    let shown = shown_review(&work, &first);
    assert_eq!(shown["records"][0]["counts"], false, "{shown}");
    assert!(
        shown["records"][0]["why"]
            .as_str()
            .unwrap()
            .contains("names subject")
    );

    // An approval of attempt 1 does not carry over to a later attempt of the same Candidate.
    let first_subject = subject(&work, &first);
    review(
        &work,
        "approve",
        &first,
        "bob",
        &["--subject", &first_subject],
    )
    .result();
    assert_eq!(judge(&work, &first)["outcome"], "verified");
    on_candidate(&work, &["collect"], &first, &[]).result();
    let later = judge(&work, &first);
    assert_eq!(later["attempt"]["epoch"], 3, "{later}");
    assert_eq!(later["outcome"], "inconclusive");
    assert_ne!(subject(&work, &first), first_subject);
}

#[test]
fn approving_a_candidate_whose_checks_failed_is_refused_and_a_failed_one_stays_failed() {
    let work = reviewed();
    let candidate = work.seal("slice", SUM_NOT_FIXED);
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.code, Some(3), "{}", landed.json);
    let subject = subject(&work, &candidate);
    assert_eq!(shown_review(&work, &candidate)["process"], "failed");
    let refused = review(
        &work,
        "approve",
        &candidate,
        "alice",
        &["--subject", &subject],
    );
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(
        refused
            .error_message()
            .contains("an approval would count for nothing")
    );
    // A rejection is recorded, and the Candidate stays Failed.
    review(
        &work,
        "reject",
        &candidate,
        "alice",
        &["--subject", &subject],
    )
    .result();
    assert_eq!(judge(&work, &candidate)["outcome"], "failed");
    // A Slice without a review check has nothing to review.
    let plain = Work::new();
    let fixed = plain.seal("slice", SUM_FIXED);
    plain.land(&fixed, "slice", &[]);
    let nothing = review(&plain, "reject", &fixed, "alice", &[]);
    assert_eq!(nothing.error_code(), "invalid-input");
    assert!(
        nothing.error_message().contains("has no review check"),
        "{}",
        nothing.json
    );
}

#[test]
fn a_rejection_after_the_intent_was_prepared_stops_the_move() {
    let work = reviewed();
    let (candidate, subject) = awaiting(&work);
    review(
        &work,
        "approve",
        &candidate,
        "alice",
        &["--subject", &subject],
    )
    .result();
    let prepared = work.prepare(&candidate, "land-it", 1);
    review(&work, "reject", &candidate, "bob", &[]).result();
    let initial = work.target();
    let invoked = work.sf(&[
        "integrate",
        "invoke",
        "--identity",
        "identity.json",
        "--prepared",
        prepared.to_str().unwrap(),
        "--slice",
        "slice",
        "--gate",
        "gate.json",
    ]);
    assert_eq!(invoked.error_code(), "not-verified", "{}", invoked.json);
    assert_eq!(work.target(), initial);
    assert_eq!(work.dispatches(), 0);
}

/// A fresh Ed25519 key pair made by the real ssh-keygen: (private key file, public key line
/// without its comment).
fn key_pair(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
    let key = dir.join(name);
    let output = Command::new("/usr/bin/ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(output.status.success(), "ssh-keygen: {output:?}");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let public = public.split(' ').take(2).collect::<Vec<_>>().join(" ");
    (key, public)
}

#[test]
fn signed_reviews_count_only_with_the_key_the_slice_lists() {
    let keys = tempfile::tempdir().unwrap();
    let (alice_key, alice_public) = key_pair(keys.path(), "alice");
    let (mallory_key, _) = key_pair(keys.path(), "mallory");
    let work = reviewed_by(
        serde_json::json!([{"name": "alice", "key": alice_public}, {"name": "bob", "key": null}]),
        2,
    );
    let (candidate, subject) = awaiting(&work);
    let before = work.hash("slice");
    let unsigned = review(
        &work,
        "approve",
        &candidate,
        "alice",
        &["--subject", &subject],
    );
    assert!(
        unsigned.error_message().contains("sign with --key FILE"),
        "{}",
        unsigned.json
    );
    let wrong = review(
        &work,
        "approve",
        &candidate,
        "alice",
        &[
            "--subject",
            &subject,
            "--key",
            mallory_key.to_str().unwrap(),
        ],
    );
    assert_eq!(wrong.error_code(), "invalid-input");
    assert!(
        wrong
            .error_message()
            .contains("is not the key check human lists for alice")
    );
    let needless = review(
        &work,
        "approve",
        &candidate,
        "bob",
        &["--subject", &subject, "--key", alice_key.to_str().unwrap()],
    );
    assert!(needless.error_message().contains("lists no key for bob"));
    assert_eq!(work.hash("slice"), before);

    let signed = review(
        &work,
        "approve",
        &candidate,
        "alice",
        &["--subject", &subject, "--key", alice_key.to_str().unwrap()],
    );
    let signed = signed.result();
    let signature = signed["record"]["signature"].as_str().unwrap();
    assert!(
        signature.starts_with("-----BEGIN SSH SIGNATURE-----"),
        "{signed}"
    );
    // Two approvals are asked: alice's counts, bob's is awaited.
    assert_eq!(signed["verdict"]["verdict"]["outcome"], "inconclusive");
    assert_eq!(
        signed["verdict"]["verdict"]["reviews"]["checks"][0]["approvedBy"],
        serde_json::json!(["alice"])
    );

    // The real ssh-keygen verifies the stored signature over the review with its signature
    // null, in the sf-review namespace: the format is OpenSSH's own.
    let review_record: Review =
        Review::from_payload(&sf_host::canonical::to_canonical_bytes(&signed["record"]).unwrap())
            .unwrap();
    let message = review_record.signed_message().unwrap();
    let allowed = keys.path().join("allowed_signers");
    std::fs::write(&allowed, format!("alice {alice_public}\n")).unwrap();
    let sig_file = keys.path().join("review.sig");
    std::fs::write(&sig_file, signature).unwrap();
    let mut verify = Command::new("/usr/bin/ssh-keygen")
        .args(["-Y", "verify", "-n", "sf-review", "-I", "alice", "-f"])
        .arg(&allowed)
        .arg("-s")
        .arg(&sig_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    verify.stdin.take().unwrap().write_all(&message).unwrap();
    assert!(verify.wait_with_output().unwrap().status.success());

    // The same review with its signature moved onto another reason counts for nothing.
    let tampered = Review {
        reason: "something else".into(),
        at: "2026-01-01T00:00:00.000Z".into(),
        ..review_record
    };
    let pins = judge(&work, &candidate)["pins"]
        .as_str()
        .unwrap()
        .to_owned();
    let record = EvidenceRecord::new(
        Digest::parse(&pins).unwrap(),
        AttemptId {
            product: "sum".into(),
            epoch: 1,
        },
        REVIEW_FORMAT,
        &tampered.to_bytes().unwrap(),
    )
    .unwrap();
    SqliteEvidenceStore::open(&work.dir.join("slice/state/evidence/evidence.db"))
        .unwrap()
        .put(&record, Instant::now() + Duration::from_secs(10))
        .unwrap();
    review(
        &work,
        "approve",
        &candidate,
        "bob",
        &["--subject", &subject],
    )
    .result();
    let verdict = judge(&work, &candidate);
    assert_eq!(verdict["outcome"], "verified", "{verdict}");
    let shown = shown_review(&work, &candidate);
    let tampered_row = shown["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["reason"] == "something else")
        .unwrap();
    assert_eq!(tampered_row["counts"], false);
    assert!(
        tampered_row["why"]
            .as_str()
            .unwrap()
            .contains("does not verify"),
        "{tampered_row}"
    );
}

#[test]
fn the_report_shows_the_subject_and_every_review_escaped() {
    let work = reviewed();
    let (candidate, subject) = awaiting(&work);
    let reason = "<script>alert(1)</script> breaks </pre><img src=x onerror=alert(2)>";
    on_candidate(
        &work,
        &["review", "reject"],
        &candidate,
        &["--reviewer", "bob", "--reason", reason],
    )
    .result();
    let out = work.dir.join("report.html");
    let made = on_candidate(
        &work,
        &["report"],
        &candidate,
        &["--out", out.to_str().unwrap()],
    );
    assert_eq!(made.result()["outcome"], "failed");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.contains(&format!("<code id=\"review-subject\">{subject}</code>")));
    assert!(html.contains("<h3>human: rejected</h3>"), "{html}");
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
        "{html}"
    );
    assert!(!html.contains("<script>"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    // And its text in sf show: the subject and each review with whether it counts.
    let text = text(
        &work,
        &[
            "show",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            &candidate,
        ],
    );
    assert!(text.contains(&format!(
        "review     subject {subject} (process checks verified)\n"
    )));
    assert!(
        text.contains("  check human: rejected (0 of 1 approvals)\n"),
        "{text}"
    );
    assert!(text.contains("  reject human by bob at "), "{text}");
    assert!(text.contains(" (counts)\n"), "{text}");
}

#[test]
fn reviews_are_stored_in_and_counted_from_postgresql() {
    let cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA);
    let work = reviewed();
    let pg = config(&work, "pg.toml", &cluster, &database);
    let candidate = work.seal("slice", SUM_FIXED);
    let land = |work: &Work| {
        let mut args = vec!["--config", pg.as_str(), "land", "--gate", "gate.json"];
        args.extend(on(&candidate));
        work.sf_decided(&args)
    };
    let landed = land(&work);
    assert_eq!(landed.code, Some(4), "{}", landed.json);
    let runs = landed.result()["runs"].as_array().unwrap().len();
    let shown = work.sf(&[
        "--config",
        &pg,
        "show",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        &candidate,
    ]);
    let subject = shown.result()["review"]["subject"]
        .as_str()
        .unwrap()
        .to_owned();
    let approved = on_candidate(
        &work,
        &["--config", &pg, "review", "approve"],
        &candidate,
        &[
            "--reviewer",
            "alice",
            "--reason",
            "fine",
            "--subject",
            &subject,
        ],
    );
    assert_eq!(
        approved.result()["verdict"]["verdict"]["outcome"],
        "verified"
    );
    // The review is one more row of the store, and nothing went to SQLite.
    assert_eq!(
        cluster.psql(&database.name, "SELECT count(*) FROM sf_evidence"),
        (runs + 1).to_string()
    );
    let id = approved.result()["review"].as_str().unwrap();
    assert_eq!(
        cluster.psql(
            &database.name,
            &format!("SELECT count(*) FROM sf_evidence WHERE id = '{id}'")
        ),
        "1"
    );
    assert!(!work.dir.join("slice/state/evidence/evidence.db").exists());
    let got = work.sf(&["--config", &pg, "evidence", "get", id, "--slice", "slice"]);
    assert_eq!(got.result()["review"]["reviewer"], "alice");
    let landed = land(&work);
    assert_eq!(landed.code, Some(0), "{}", landed.json);
    assert_eq!(landed.result()["outcome"], "integrated");
}
