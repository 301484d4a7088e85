//! Nothing lands unless it is Verified under the Slice it was sealed for, through sf's own
//! commands: each way a bad change used to reach the target is tried through the built `sf`
//! binary (real git, the real sandbox, a real SQLite file) and is refused before anything
//! starts, or judged not Verified and never integrated. Where a refusal comes before an
//! attempt, the repository and the Slice directory are byte-identical before and after.

mod land_support;

use land_support::*;
use sf_host::canonical::Digest;

/// The happy path and its replay: a fix lands once; landing it again starts nothing; a
/// non-fix is judged Failed and never prepared.
#[test]
fn land_integrates_a_verified_candidate_once_and_never_a_failed_one() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    let landed = work.land(&fix, "slice", &[]);
    assert_eq!(landed.code, Some(0), "{:?}", landed);
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated");
    assert_eq!(result["replayed"], false);
    assert_eq!(result["verdict"]["verdict"]["outcome"], "verified");
    assert_eq!(result["observation"]["invocation"], "confirmed");
    assert_eq!(result["observation"]["dispatched"], true);
    let fix_commit = result["observation"]["target"].as_str().unwrap().to_owned();
    assert_eq!(work.target(), fix_commit);
    // The intent's proof is the Verdict's digest.
    assert_eq!(
        result["prepared"]["payload"]["proof"],
        result["verdict"]["digest"]
    );

    let again = work.land(&fix, "slice", &[]);
    assert_eq!(again.code, Some(0));
    let again = again.result();
    assert_eq!(again["replayed"], true);
    assert_eq!(again["observation"]["dispatched"], false);
    assert!(again["attempt"].is_null(), "nothing was collected again");
    assert_eq!(work.dispatches(), 1);

    // A second repository for the non-fix (the first one's target moved on).
    let other = Work::new();
    let no_fix = other.seal("slice", SUM_NOT_FIXED);
    let failed = other.land(&no_fix, "slice", &[]);
    assert_eq!(failed.code, Some(3), "{:?}", failed);
    let failed = failed.result();
    assert_eq!(failed["outcome"], "failed");
    assert!(failed["prepared"].is_null());
    assert_eq!(other.target(), other.initial());
    assert_eq!(other.dispatches(), 0);
}

/// `sf land --attempt N` lands an attempt `sf collect` made, judged again, collecting
/// nothing; an epoch without records is refused before anything is written, and a Failed
/// attempt is failed, never prepared.
#[test]
fn land_an_attempt_collected_earlier_without_collecting_again() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    assert_eq!(work.collect(&fix, "slice").result()["attempt"]["epoch"], 1);
    let none = work.land(&fix, "slice", &["--attempt", "2"]);
    assert_eq!(none.code, Some(2), "{none:?}");
    assert_eq!(none.error_code(), "invalid-input");
    assert_eq!(work.target(), work.initial());

    let landed = work.land(&fix, "slice", &["--attempt", "1"]);
    assert_eq!(landed.code, Some(0), "{landed:?}");
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated");
    // The attempt collected earlier: a new collection would have been epoch 2.
    assert_eq!(result["attempt"]["epoch"], 1, "{result}");
    assert_eq!(work.dispatches(), 1);

    let other = Work::new();
    let no_fix = other.seal("slice", SUM_NOT_FIXED);
    other.collect(&no_fix, "slice").result();
    let failed = other.land(&no_fix, "slice", &["--attempt", "1"]);
    assert_eq!(failed.code, Some(3), "{failed:?}");
    assert!(failed.result()["prepared"].is_null());
    assert_eq!(other.target(), other.initial());
}

/// Case 1: a Candidate sealed for a Slice of the contributor's own making (wider scope, no
/// protection, its own test in the tree) is never collected, judged or landed under the
/// operator's Slice; and the operator's Slice refuses the same rewrite at seal.
#[test]
fn a_candidate_sealed_for_another_slice_is_refused_before_anything_starts() {
    let work = Work::new();
    // The contributor's Slice: the test is a tree file in scope, declared, and unprotected.
    let acceptance = include_str!("../../cli/src/demo/sample/slice/acceptance.json").replacen(
        r#""entry": {"from": "harness", "path": "run-test.sh"}, "entryInScope": false,
     "args": ["numbers.sh"], "input": "numbers",
     "expectation": {"exitCode": 0,
                     "stdoutDigest": "sha256:06e9"#,
        r#""entry": {"from": "tree", "path": "tests/numbers.sh"}, "entryInScope": true,
     "args": [], "input": "numbers",
     "expectation": {"exitCode": 0,
                     "stdoutDigest": "sha256:06e9"#,
        1,
    );
    assert!(acceptance.contains("tests/numbers.sh"));
    work.author_slice(
        "wide",
        &[
            (
                "slice.json",
                r#"{"id":"sum-fix","revision":1,"scope":["sum.sh","tests"]}"#,
            ),
            ("acceptance.json", &acceptance),
            ("overlay/tests/numbers.sh", ""),
        ],
    );
    // The test is a tree file the base does not hold: the base cannot run the Slice, which
    // is not what this test is about.
    work.sf(&[
        "slice",
        "freeze",
        "--dir",
        "wide",
        "--identity",
        "identity.json",
        "--no-dry-run",
    ])
    .result();
    let rewrite = work.proposal(
        "rewrite",
        serde_json::json!({"edits": [{"path": "tests/numbers.sh", "prior": null,
                                      "text": "echo 6\n"}]}),
    );
    let sealed = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "wide",
        "--proposal",
        rewrite.to_str().unwrap(),
    ]);
    let candidate = sealed.result()["digest"].as_str().unwrap().to_owned();

    let before = work.hash("slice");
    for args in [
        vec![
            "collect",
            "--identity",
            "identity.json",
            "--candidate",
            &candidate,
            "--slice",
            "slice",
        ],
        vec![
            "judge",
            "--identity",
            "identity.json",
            "--candidate",
            &candidate,
            "--slice",
            "slice",
        ],
    ] {
        let refused = work.sf(&args);
        assert_eq!(refused.error_code(), "invalid-input", "{args:?}");
        assert!(
            refused.json["error"]["message"]
                .as_str()
                .unwrap()
                .contains("slice.digest"),
            "{}",
            refused.json
        );
    }
    let landed = work.land(&candidate, "slice", &[]);
    assert_eq!(landed.code, Some(2), "{:?}", landed);
    assert_eq!(landed.error_code(), "invalid-input");
    assert_eq!(work.hash("slice"), before, "nothing was written");
    assert_eq!(work.target(), work.initial());

    // The operator's Slice refuses the same rewrite when it is sealed for it.
    let refused = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--proposal",
        rewrite.to_str().unwrap(),
    ]);
    assert_eq!(refused.error_code(), "rejected");
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("protected-path"), "{message}");
    assert!(message.contains("tests/numbers.sh"), "{message}");
    assert_eq!(work.hash("slice"), before, "a rejected seal writes nothing");
    // A free-form frozen-inputs file is no way in any more.
    let mut usage = work.command(&[
        "seal",
        "--identity",
        "identity.json",
        "--frozen",
        "wide/frozen/slice.json",
        "--proposal",
        rewrite.to_str().unwrap(),
    ]);
    assert_eq!(
        sf_tests::plugins::Envelope::parse(usage.output().unwrap()).code,
        Some(2)
    );
}

/// Case 2: a Candidate sealed for revision 2 is refused under revision 1, and the other way
/// round.
#[test]
fn a_candidate_of_another_revision_is_refused() {
    let work = Work::new();
    work.author_slice(
        "slice-2",
        &[(
            "slice.json",
            r#"{"id":"sum-fix","revision":2,"scope":["sum.sh","tests"],"protected":["tests/numbers.sh"]}"#,
        )],
    );
    work.freeze("slice-2").result();
    let for_two = work.seal("slice-2", SUM_FIXED);
    let for_one = work.seal("slice", SUM_FIXED);
    assert_ne!(for_one, for_two);
    let before = work.hash("slice");
    let before_two = work.hash("slice-2");
    for (candidate, slice) in [(&for_two, "slice"), (&for_one, "slice-2")] {
        for command in ["collect", "judge"] {
            let refused = work.sf(&[
                command,
                "--identity",
                "identity.json",
                "--candidate",
                candidate,
                "--slice",
                slice,
            ]);
            assert_eq!(refused.error_code(), "invalid-input");
        }
        assert_eq!(work.land(candidate, slice, &[]).code, Some(2));
    }
    assert_eq!(work.hash("slice"), before);
    assert_eq!(work.hash("slice-2"), before_two);
}

/// Case 3 and the table: the target moves only for this Candidate's Verified Verdict under
/// its own Slice, by `sf land` and by `sf integrate prepare` + `invoke`.
#[test]
fn only_this_candidates_verified_verdict_moves_the_target() {
    let work = Work::new();
    let collect = |candidate: &str| {
        let collected = work.sf(&[
            "collect",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
        ]);
        collected.result()["attempt"]["epoch"].as_u64().unwrap()
    };
    let prepare = |candidate: &str, attempt: Option<u64>, action: &str| {
        let attempt = attempt.map(|epoch| epoch.to_string());
        let mut args = vec![
            "integrate",
            "prepare",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
            "--action",
            action,
            "--occurrence",
            "1",
            "--owner",
            "tester",
            "--generation",
            "1",
        ];
        if let Some(attempt) = &attempt {
            args.extend(["--attempt", attempt]);
        }
        work.sf(&args)
    };
    let fix = work.seal("slice", SUM_FIXED);
    let no_fix = work.seal("slice", SUM_NOT_FIXED);
    let loops = work.seal("slice", SUM_LOOPS);
    let never = work.seal("slice", "echo never collected\n");
    let fix_attempt = collect(&fix);
    let no_fix_attempt = collect(&no_fix);
    collect(&loops);
    let judged = |candidate: &str| {
        work.sf(&[
            "judge",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
        ])
        .result()["verdict"]["outcome"]
            .clone()
    };
    assert_eq!(judged(&fix), "verified");
    assert_eq!(judged(&no_fix), "failed");
    assert_eq!(judged(&loops), "inconclusive");

    let before = work.hash("slice");
    for (what, candidate, attempt, code) in [
        ("failed", &no_fix, None, "not-verified"),
        ("inconclusive", &loops, None, "not-verified"),
        ("no Verdict", &never, None, "invalid-input"),
        (
            "another Candidate's attempt",
            &fix,
            Some(no_fix_attempt),
            "invalid-input",
        ),
    ] {
        let refused = prepare(candidate, attempt, "a1");
        assert_eq!(refused.error_code(), code, "{what}: {}", refused.json);
    }
    assert_eq!(work.hash("slice"), before, "nothing was prepared");
    assert_eq!(work.target(), work.initial());
    // Under another revision of the Slice the Candidate is not even read.
    work.author_slice(
        "slice-2",
        &[(
            "slice.json",
            r#"{"id":"sum-fix","revision":2,"scope":["sum.sh","tests"],"protected":["tests/numbers.sh"]}"#,
        )],
    );
    work.freeze("slice-2").result();
    let for_two = work.seal("slice-2", SUM_FIXED);
    assert_eq!(prepare(&for_two, None, "a1").error_code(), "invalid-input");

    // A forged intent for the Failed Candidate (made with the library, past the command line)
    // naming the fix's Verified Verdict as its proof: invoke judges again and refuses before
    // any claim.
    let fix_verdict = work.sf(&[
        "judge",
        "--identity",
        "identity.json",
        "--candidate",
        &fix,
        "--slice",
        "slice",
    ]);
    let fix_proof = fix_verdict.result()["digest"].as_str().unwrap().to_owned();
    let forged = forge_intent(&work, &no_fix, &fix_proof);
    let invoke = |prepared: &str| {
        work.sf(&[
            "integrate",
            "invoke",
            "--identity",
            "identity.json",
            "--prepared",
            prepared,
            "--slice",
            "slice",
            "--gate",
            "gate.json",
        ])
    };
    let refused = invoke(forged.to_str().unwrap());
    assert_eq!(refused.error_code(), "not-verified", "{}", refused.json);
    assert_eq!(work.dispatches(), 0, "no claim was made");
    let forged_zero = forge_intent(&work, &no_fix, &Digest::of(b"0").to_string());
    assert_eq!(
        invoke(forged_zero.to_str().unwrap()).error_code(),
        "not-verified"
    );
    assert_eq!(work.dispatches(), 0);

    // This Candidate's own Verified Verdict: prepared and invoked once.
    let prepared = prepare(&fix, Some(fix_attempt), "land-fix");
    let prepared_file = work.dir.join("prepared.json");
    std::fs::write(&prepared_file, prepared.result().to_string()).unwrap();
    assert_eq!(prepared.result()["payload"]["proof"], fix_proof.as_str());
    let invoked = invoke(prepared_file.to_str().unwrap());
    assert_eq!(invoked.result()["invocation"], "confirmed");
    assert_ne!(work.target(), work.initial());
    assert_eq!(work.dispatches(), 1);
}

/// Prepares an intent for `candidate` with `proof` through the library (the command line
/// cannot), and writes the prepared record; returns its path.
fn forge_intent(work: &Work, candidate: &str, proof: &str) -> std::path::PathBuf {
    use sf_host::repository::{
        Action, IntegrationPayload, Owner, RepositoryOptions, open_repository,
        parse_repository_identity,
    };
    let identity =
        parse_repository_identity(&std::fs::read(work.dir.join("identity.json")).unwrap()).unwrap();
    let factory = sf_git_cli::GitCliFactory::new(sf_git_cli::GitCliConfig::default()).unwrap();
    let repository = open_repository(&factory, &identity, RepositoryOptions::default()).unwrap();
    let candidate = Digest::parse(candidate).unwrap();
    let sealed = repository.export_candidate(&candidate).unwrap();
    let prepared = repository
        .prepare_integration(&IntegrationPayload {
            action: Action {
                id: format!("forged-{}", &Digest::of(proof.as_bytes()).hex()[..8]),
                occurrence: 1,
            },
            product: identity.product_id.clone(),
            slice: sealed.manifest.slice.clone(),
            repository: identity.clone(),
            target_ref: identity.target_ref.clone(),
            base: sealed.manifest.base_commit,
            commit: sealed.manifest.commit,
            candidate,
            proof: Digest::parse(proof).unwrap(),
            owner: Owner {
                id: "forger".into(),
                generation: 1,
            },
        })
        .unwrap();
    let path = work
        .dir
        .join(format!("forged-{}.json", &prepared.digest.hex()[..8]));
    std::fs::write(
        &path,
        sf_host::canonical::encode(&prepared.to_value()).unwrap(),
    )
    .unwrap();
    path
}

/// The same table through `sf land`: only a Verified Candidate moves the target, and a
/// landing cannot take another Candidate's occurrence.
#[test]
fn land_moves_the_target_only_for_a_verified_candidate() {
    let work = Work::new();
    let loops = work.seal("slice", SUM_LOOPS);
    let inconclusive = work.land(&loops, "slice", &[]);
    assert_eq!(inconclusive.code, Some(4), "{:?}", inconclusive);
    assert_eq!(inconclusive.result()["outcome"], "inconclusive");
    assert!(inconclusive.result()["prepared"].is_null());
    let no_fix = work.seal("slice", SUM_NOT_FIXED);
    assert_eq!(work.land(&no_fix, "slice", &[]).code, Some(3));
    assert_eq!(work.target(), work.initial());
    assert_eq!(work.dispatches(), 0);

    let fix = work.seal("slice", SUM_FIXED);
    let action = format!("land/{fix}");
    assert_eq!(work.land(&fix, "slice", &[]).code, Some(0));
    // Another Candidate cannot land under the fix's occurrence.
    let other = work.land(&no_fix, "slice", &["--action", &action]);
    assert_eq!(other.error_code(), "conflict", "{}", other.json);
    assert_eq!(work.dispatches(), 1);
}

/// Case 4: the answer key never reaches a Candidate. Freezing refuses an input, harness or
/// overlay file holding a check's expected stdout; the demo's Slice holds none, so a
/// Candidate that prints what it can read is judged Failed.
#[test]
fn the_answer_key_stays_on_the_host() {
    let work = Work::unfrozen();
    for (path, text) in [
        ("inputs/numbers/expected.txt", "6\n"),
        ("inputs/numbers/expected.txt", "6"),
        ("harness/answer.txt", "6\n"),
        ("overlay/tests/answer.txt", "5\n"),
    ] {
        let slice = work.author_slice("leaky", &[(path, text)]);
        let before = sf_tests::tree_hash(&slice);
        let refused = work.freeze("leaky");
        assert_eq!(refused.error_code(), "invalid-input", "{path}");
        let message = refused.json["error"]["message"].as_str().unwrap();
        assert!(message.contains("expected stdout"), "{message}");
        assert_eq!(
            sf_tests::tree_hash(&slice),
            before,
            "{path}: nothing written"
        );
        std::fs::remove_dir_all(&slice).unwrap();
    }
    work.author_slice("slice", &[]);
    work.freeze("slice").result();
    let snoop = work.seal(
        "slice",
        "cat /sf/input/* /sf/harness/* /sf/program/tests/* 2>/dev/null\n",
    );
    let landed = work.land(&snoop, "slice", &[]);
    assert_eq!(landed.code, Some(3), "{:?}", landed);
    assert_eq!(work.target(), work.initial());
}

/// Case 5: what is wrong before an attempt is an error with nothing written: a deadline in
/// the past, a gate file that is not there, a gate that refuses, an executor whose runtime
/// is no longer the Slice's. And `--config` cannot run a collection under another executor
/// than the Slice's.
#[test]
fn preflight_refuses_before_an_attempt_is_claimed() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    let before = work.hash("slice");
    let collect = |extra: &[&str]| {
        let mut args = vec![
            "collect",
            "--identity",
            "identity.json",
            "--candidate",
            &fix,
            "--slice",
            "slice",
        ];
        args.extend_from_slice(extra);
        work.sf(&args)
    };
    assert_eq!(
        collect(&["--deadline", "2020-01-01T00:00:00Z"]).error_code(),
        "invalid-input"
    );
    assert_eq!(
        work.land(&fix, "slice", &["--deadline", "2020-01-01T00:00:00Z"])
            .code,
        Some(2)
    );
    assert_eq!(
        collect(&["--gate", "no-such-gate.json"]).error_code(),
        "unreadable-input"
    );
    let typo = work.sf_decided(&[
        "land",
        "--identity",
        "identity.json",
        "--candidate",
        &fix,
        "--slice",
        "slice",
        "--gate",
        "gaet.json",
    ]);
    assert_eq!(typo.code, Some(2), "{:?}", typo);
    write(
        &work.dir.join("closed.json"),
        r#"{"proceed": false, "reason": "release freeze"}"#,
    );
    let closed = collect(&["--gate", "closed.json"]);
    assert_eq!(closed.error_code(), "withheld");
    assert!(
        closed.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("release freeze")
    );
    let closed = work.sf_decided(&[
        "land",
        "--identity",
        "identity.json",
        "--candidate",
        &fix,
        "--slice",
        "slice",
        "--gate",
        "closed.json",
    ]);
    assert_eq!(closed.code, Some(5), "{:?}", closed);
    assert_eq!(work.hash("slice"), before, "nothing was written or claimed");

    // --config naming another runtime: the collection runs under the Slice's own executor.
    write(
        &work.dir.join("python.toml"),
        "[executor]\ntype = \"sandbox-exec\"\nruntime = \"python3\"\n",
    );
    let collected = collect(&["--config", "python.toml"]);
    assert_eq!(collected.result()["mayJudge"], true);
    let verdict = work.sf(&[
        "judge",
        "--identity",
        "identity.json",
        "--candidate",
        &fix,
        "--slice",
        "slice",
    ]);
    assert_eq!(verdict.result()["verdict"]["outcome"], "verified");
}

/// Case 5, the runtime: a Slice frozen with a copy of the shell, which then changes, refuses
/// every collection before an attempt.
#[test]
fn a_changed_runtime_is_refused_before_an_attempt() {
    let work = Work::unfrozen();
    // The sandbox reads its runtime as an unprivileged user: a directory others can search.
    let runtime = tempfile::Builder::new()
        .prefix("sf-runtime-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    std::fs::set_permissions(
        runtime.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let shell = runtime.path().join("sh");
    std::fs::copy("/bin/sh", &shell).unwrap();
    write(
        &work.dir.join("copy.toml"),
        &format!(
            "[executor]\ntype = \"sandbox-exec\"\nruntime = {{ executable = \"{}\" }}\n",
            shell.display()
        ),
    );
    work.author_slice("slice", &[]);
    let frozen = work.sf(&[
        "--config",
        "copy.toml",
        "slice",
        "freeze",
        "--dir",
        "slice",
        "--identity",
        "identity.json",
        // The copied shell finds none of its libraries in the sandbox: the runtime is
        // what this test changes, not what it runs.
        "--no-dry-run",
    ]);
    frozen.result();
    let fix = work.seal("slice", SUM_FIXED);
    let mut bytes = std::fs::read(&shell).unwrap();
    bytes.push(0);
    std::fs::write(&shell, bytes).unwrap();
    let before = work.hash("slice");
    let refused = work.land(&fix, "slice", &[]);
    assert_eq!(refused.code, Some(2), "{:?}", refused);
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("the runtime changed"), "{message}");
    assert_eq!(work.hash("slice"), before);
}

/// Case 6 and 7: a failing freeze writes nothing; the commands that read create nothing; a
/// Slice that was never frozen seals nothing.
#[test]
fn failures_and_reads_write_nothing() {
    let work = Work::unfrozen();
    let float = "[executor]\ntype = \"sandbox-exec\"\nshare = 0.5\n";
    write(&work.dir.join("float.toml"), float);
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("no recipe", &[("recipe.json", "")]),
        (
            "a bad recipe",
            &[("recipe.json", r#"{"timeoutMs":0,"outputLimit":1}"#)],
        ),
        (
            "an unknown field",
            &[(
                "slice.json",
                r#"{"id":"s","revision":1,"scope":["sum.sh"],"verified":true}"#,
            )],
        ),
        (
            "a bad pattern",
            &[(
                "slice.json",
                r#"{"id":"s","revision":1,"scope":["sum.sh"],"protected":["[ab]"]}"#,
            )],
        ),
        ("a missing input", &[("inputs/empty/numbers.txt", "")]),
        (
            "an undeclared entry in scope",
            &[
                (
                    "slice.json",
                    r#"{"id":"s","revision":1,"scope":["sum.sh"]}"#,
                ),
                (
                    "acceptance.json",
                    &include_str!("../../cli/src/demo/sample/slice/acceptance.json")
                        .replace("\"entryInScope\": true", "\"entryInScope\": false"),
                ),
            ],
        ),
        (
            "a harness entry that is not there",
            &[("harness/run-test.sh", "")],
        ),
        (
            "an overlay that clashes with the base",
            &[("overlay/sum.sh/x", "x")],
        ),
        (
            "a v1 acceptance",
            &[(
                "acceptance.json",
                &include_str!("../../cli/src/demo/sample/slice/acceptance.json")
                    .replace("acceptance/2", "acceptance/1"),
            )],
        ),
    ];
    for (what, changes) in cases {
        let slice = work.author_slice("bad", changes);
        let before = sf_tests::tree_hash(&slice);
        let refused = work.freeze("bad");
        assert!(refused.json["ok"] == false, "{what}: {}", refused.json);
        assert_eq!(
            sf_tests::tree_hash(&slice),
            before,
            "{what}: nothing written"
        );
        assert!(!slice.join("state").exists() && !slice.join("frozen").exists());
        std::fs::remove_dir_all(&slice).unwrap();
    }
    // Each refusal of an authored record names the field and the rule it broke.
    let named: &[(&str, &str, &str)] = &[
        (
            "slice.json",
            r#"{"id":"s","revision":1,"scope":["sum.sh"],"verified":true}"#,
            "slice.json.verified: is not a field",
        ),
        (
            "slice.json",
            r#"{"id":"no spaces","revision":1,"scope":["sum.sh"]}"#,
            "slice.json.id: ",
        ),
        (
            "slice.json",
            r#"{"id":"s","revision":0,"scope":["sum.sh"]}"#,
            "slice.json.revision: must be a positive integer",
        ),
        (
            "recipe.json",
            r#"{"timeoutMs":1000}"#,
            "recipe.json.outputLimit: ",
        ),
    ];
    for (file, bytes, expected) in named {
        let slice = work.author_slice("bad", &[(file, bytes)]);
        let refused = work.freeze("bad");
        let message = refused.json["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains(expected), "{bytes}: {}", refused.json);
        std::fs::remove_dir_all(&slice).unwrap();
    }
    let slice = work.author_slice("bad", &[]);
    let refused = work.sf(&[
        "--config",
        "float.toml",
        "slice",
        "freeze",
        "--dir",
        "bad",
        "--identity",
        "identity.json",
    ]);
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(!slice.join("state").exists());

    // Case 7: a Slice that was never frozen seals nothing.
    let repo_before = sf_tests::tree_hash(&work.dir.join("repo.git"));
    let proposal = work.sum_proposal("fix", SUM_FIXED);
    let refused = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "bad",
        "--proposal",
        proposal.to_str().unwrap(),
    ]);
    assert_eq!(refused.error_code(), "missing");
    assert_eq!(sf_tests::tree_hash(&work.dir.join("repo.git")), repo_before);

    // Reads create nothing: no evidence database, no fence, no state.
    work.freeze("bad").result();
    let fix = work.seal("bad", SUM_FIXED);
    let before = work.hash("bad");
    let target = [
        "--identity",
        "identity.json",
        "--candidate",
        &fix,
        "--slice",
        "bad",
    ];
    let judge = work.sf(&[&["judge"][..], &target].concat());
    assert_eq!(judge.error_code(), "missing", "{}", judge.json);
    let find = work.sf(&[&["evidence", "find"][..], &target].concat());
    assert_eq!(find.error_code(), "missing");
    let id = Digest::of(b"record").to_string();
    assert_eq!(
        work.sf(&["evidence", "get", &id, "--slice", "bad"])
            .error_code(),
        "missing"
    );
    assert_eq!(work.hash("bad"), before, "reads created nothing");
    assert!(!slice.join("state/evidence").exists() && !slice.join("state/fence").exists());
}

/// Judge usability: without `--attempt` the newest attempt of this Candidate (not another's);
/// an attempt that is not this Candidate's is an error; text says why each check missed;
/// `--exit-code` for CI.
#[test]
fn judge_picks_this_candidates_newest_attempt_and_says_why() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    let no_fix = work.seal("slice", SUM_NOT_FIXED);
    for candidate in [&fix, &no_fix] {
        work.sf(&[
            "collect",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
        ])
        .result();
    }
    let target = |candidate: &str| -> Vec<String> {
        [
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let args = |command: &[&str], candidate: &str| -> Vec<String> {
        command
            .iter()
            .map(|s| (*s).to_owned())
            .chain(target(candidate))
            .collect()
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        work.sf_decided(&args)
    };
    let fix_verdict = run(args(&["judge"], &fix));
    assert_eq!(fix_verdict.result()["verdict"]["outcome"], "verified");
    assert_eq!(fix_verdict.result()["verdict"]["attempt"]["epoch"], 1);
    let wrong = run(args(&["judge", "--attempt", "2"], &fix));
    assert_eq!(wrong.error_code(), "invalid-input");
    assert_eq!(run(args(&["judge", "--exit-code"], &fix)).code, Some(0));
    let failed = run(args(&["judge", "--exit-code"], &no_fix));
    assert_eq!(failed.code, Some(3));
    assert_eq!(failed.result()["verdict"]["outcome"], "failed");
    // The text says why the check missed.
    let text = sf_tests::plugins::sf()
        .current_dir(&work.dir)
        .args(args(&["judge"], &no_fix))
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("bug-fixed"), "{text}");
    assert!(text.contains("missed: stdout hashes to"), "{text}");
    assert!(text.contains("verdict sha256:"), "{text}");
}

/// Trusted test material: the check whose entry is in the harness runs it from the Slice,
/// with the Slice's test laid over the tree, and the records name the harness.
#[test]
fn harness_checks_run_the_slices_own_test() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    let collected = work.sf(&[
        "collect",
        "--identity",
        "identity.json",
        "--candidate",
        &fix,
        "--slice",
        "slice",
    ]);
    let runs = collected.result()["runs"].as_array().unwrap().clone();
    let bug_fixed = runs.iter().find(|run| run["check"] == "bug-fixed").unwrap();
    let record = bug_fixed["evidence"].as_str().unwrap();
    let got = work.sf(&["evidence", "get", record, "--slice", "slice"]);
    let facts = &got.result()["observation"];
    let frozen: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.dir.join("slice/frozen/slice.json")).unwrap())
            .unwrap();
    assert_eq!(facts["identities"]["harness"], frozen["harness"]);
    assert_ne!(
        frozen["harness"],
        sf_host::snapshot::snapshot_digest(&[]).unwrap().to_string()
    );
    assert_eq!(got.result()["stdout"], "6\n");
    assert_eq!(facts["attributable"], true);
}

/// kill -9 of `sf land` at each fault point between its steps: a rerun converges, inspection
/// is truthful, and there is never a second dispatch.
#[test]
fn a_killed_landing_converges_and_never_dispatches_twice() {
    for (point, settles) in [
        ("land-collected", "integrated"),
        ("land-judged", "integrated"),
        ("integration-claimed", "unknown"),
        ("integration-submitted", "unknown"),
    ] {
        let work = Work::new();
        let fix = work.seal("slice", SUM_FIXED);
        let killed = work
            .faulty(
                point,
                &[
                    "land",
                    "--identity",
                    "identity.json",
                    "--candidate",
                    &fix,
                    "--slice",
                    "slice",
                    "--gate",
                    "gate.json",
                ],
            )
            .output()
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&killed.status),
            Some(9),
            "{point}: {killed:?}"
        );
        let rerun = work.land(&fix, "slice", &[]);
        let result = rerun.result();
        assert_eq!(result["outcome"], settles, "{point}: {result}");
        match settles {
            "integrated" => {
                assert_eq!(rerun.code, Some(0));
                assert_ne!(work.target(), work.initial(), "{point}");
            }
            _ => {
                // A claim without a receipt: the move may or may not have happened, and
                // nothing is retried.
                assert_eq!(rerun.code, Some(6), "{point}");
                assert_eq!(result["replayed"], true);
                assert_eq!(result["observation"]["invocation"], "unknown");
                assert_eq!(result["observation"]["dispatched"], false);
                assert_eq!(
                    work.target(),
                    work.initial(),
                    "{point}: killed before the move"
                );
            }
        }
        assert_eq!(work.dispatches(), 1, "{point}: exactly one dispatch");
        // And a third landing starts nothing either.
        let third = work.land(&fix, "slice", &[]);
        assert_eq!(third.result()["outcome"], settles);
        assert_eq!(work.dispatches(), 1);
    }
}

/// A check that missed shows, in the text of `sf land` and `sf judge`, the end of what its
/// run printed, escaped: what a person needs to see why, without `sf evidence get`.
#[test]
fn a_missed_check_shows_the_end_of_its_output() {
    let work = Work::new();
    let no_fix = work.seal("slice", SUM_NOT_FIXED);
    let args = [
        "land",
        "--identity",
        "identity.json",
        "--candidate",
        &no_fix,
        "--slice",
        "slice",
        "--gate",
        "gate.json",
    ];
    let landed = work.text_command(&args).output().unwrap();
    let text = String::from_utf8(landed.stdout).unwrap();
    assert_eq!(landed.status.code(), Some(3), "Failed: {text}");
    let start = text
        .find("check bug-fixed (record sha256:")
        .unwrap_or_else(|| panic!("the missed check is shown: {text}"));
    let shown = &text[start..];
    assert!(shown.contains("--- stdout (2 bytes) ---"), "{shown}");
    assert!(shown.contains("--- stderr (0 bytes) ---"), "{shown}");
    assert!(
        !text.contains("check bug-shown (record"),
        "a met check shows nothing: {text}"
    );
    let judged = work
        .text_command(&[
            "judge",
            "--identity",
            "identity.json",
            "--candidate",
            &no_fix,
            "--slice",
            "slice",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(judged.stdout).unwrap();
    assert!(text.contains("check bug-fixed (record sha256:"), "{text}");

    // The record itself says what ran, how it ended and what it used.
    let id = shown["check bug-fixed (record ".len()..]
        .split(')')
        .next()
        .unwrap()
        .to_owned();
    let got = work
        .text_command(&["evidence", "get", &id, "--slice", "slice"])
        .output()
        .unwrap();
    let text = String::from_utf8(got.stdout).unwrap();
    assert!(
        text.contains("  command /bin/sh /sf/harness/run-test.sh numbers.sh\n"),
        "{text}"
    );
    assert!(text.contains("  ended   exited (exit code 0)\n"), "{text}");
    assert!(text.contains(" ms wall, "), "{text}");
    assert!(text.contains("  memory  largest process "), "{text}");
}

/// A Slice that protects a test runner's start-up hooks (pytest's `conftest.py`, Python's
/// `sitecustomize.py`, `usercustomize.py` and `.pth` files) refuses, at seal, a proposal that
/// adds any of them inside its scope, and writes nothing.
#[test]
fn start_up_hooks_a_slice_protects_are_refused_at_seal() {
    let work = Work::new();
    work.author_slice(
        "hooks",
        &[(
            "slice.json",
            r#"{"id":"sum-fix","revision":2,"scope":["sum.sh","tests","lib"],
                "protected":["tests/numbers.sh","**/conftest.py","**/sitecustomize.py",
                             "**/usercustomize.py","**/*.pth"]}"#,
        )],
    );
    work.freeze("hooks").result();
    for path in [
        "tests/conftest.py",
        "lib/sitecustomize.py",
        "lib/usercustomize.py",
        "lib/site-packages/evil.pth",
        "conftest.py",
    ] {
        let before = work.hash("hooks");
        let proposal = work.proposal(
            "hook",
            serde_json::json!({"edits": [
                {"path": "sum.sh", "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
                 "text": SUM_FIXED},
                {"path": path, "prior": null, "text": "import os\nos._exit(0)\n"},
            ]}),
        );
        let sealed = work.sf(&[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "hooks",
            "--proposal",
            proposal.to_str().unwrap(),
        ]);
        assert_eq!(sealed.error_code(), "rejected", "{path}");
        let message = sealed.json["error"]["message"].as_str().unwrap();
        // A root conftest.py is outside this scope, refused for that before anything else.
        let rule = if path == "conftest.py" {
            "outside-scope"
        } else {
            "protected-path"
        };
        assert!(message.contains(rule), "{path}: {message}");
        assert!(message.contains(path), "{path}: {message}");
        assert_eq!(work.hash("hooks"), before, "{path}: nothing written");
    }
}

/// On a terminal, `sf collect` draws a live bar of the checks settled beside its lines; off
/// one (every other test) it writes the lines only. The terminal is a real pseudo-terminal
/// (`script`).
#[test]
fn on_a_terminal_collect_draws_a_live_bar() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    let sf = sf_tests::plugins::built().sf.clone();
    let command = format!(
        "{} collect --identity identity.json --candidate {fix} --slice slice",
        sf.display()
    );
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(&work.dir)
        .env("TERM", "xterm")
        .env_remove("SF_PLUGIN_PATH")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(shown.contains("checks settled"), "the bar: {shown}");
    assert!(shown.contains("] bug-fixed started"), "the lines: {shown}");
    // Off a terminal, the same command writes no bar.
    let output = work
        .text_command(&[
            "collect",
            "--identity",
            "identity.json",
            "--candidate",
            &fix,
            "--slice",
            "slice",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("] bug-fixed started"), "{stderr}");
    assert!(!stderr.contains("checks settled"), "{stderr}");
}

/// The gate's withholding is one decided shape wherever it happens: at the preflight (nothing
/// written, the occurrence not consumed) and after the claim (a retained intent invoked behind
/// the closed gate: the occurrence consumed), both `ok: true`, `outcome: withheld`, exit 5,
/// with the gate's reason in `withheld`.
#[test]
fn withheld_is_one_decided_shape_at_the_preflight_and_after_the_claim() {
    let work = Work::new();
    let fix = work.seal("slice", SUM_FIXED);
    write(
        &work.dir.join("closed.json"),
        r#"{"proceed": false, "reason": "release freeze"}"#,
    );
    let land = |action: &str| {
        work.sf_decided(&[
            "land",
            "--identity",
            "identity.json",
            "--candidate",
            &fix,
            "--slice",
            "slice",
            "--action",
            action,
            "--gate",
            "closed.json",
        ])
    };
    let shape = |landed: &sf_tests::plugins::Envelope, consumed: bool| {
        assert_eq!(landed.code, Some(5), "{:?}", landed.json);
        assert_eq!(landed.json["ok"], true, "{:?}", landed.json);
        let result = &landed.json["result"];
        assert_eq!(result["outcome"], "withheld", "{result}");
        assert_eq!(
            result["withheld"]["occurrenceConsumed"], consumed,
            "{result}"
        );
        let reason = result["withheld"]["reason"].as_str().unwrap();
        assert!(reason.contains("release freeze"), "{reason}");
    };

    let before = work.hash("slice");
    shape(&land("release"), false);
    assert_eq!(work.hash("slice"), before, "nothing was written or claimed");

    // An intent retained for the occurrence: the landing invokes it behind the gate, which
    // withholds after the claim.
    let mut collect = vec!["collect"];
    collect.extend(on(&fix));
    work.sf(&collect).result();
    let prepared = work.dir.join("prepared.json");
    work.sf(&[
        "integrate",
        "prepare",
        "--identity",
        "identity.json",
        "--candidate",
        &fix,
        "--slice",
        "slice",
        "--action",
        "retained",
        "--occurrence",
        "1",
        "--owner",
        "sf-land",
        "--generation",
        "1",
        "--prepared-out",
        prepared.to_str().unwrap(),
    ])
    .result();
    shape(&land("retained"), true);
}
