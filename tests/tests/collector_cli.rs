//! The command line of Repository Assurance, end to end through the built
//! `sf` binary and its dynamically loaded plugins (git-cli, sandbox-exec): `sf slice freeze`,
//! `sf seal`, `sf collect` (progress on stderr, one line per run), `sf judge`, `sf evidence
//! get|find`, all with `--json` envelopes.

mod collector_support;

use std::path::Path;

use collector_support::{CHECK, SUM_BUGGY, SUM_FIXED};
use sf_host::canonical::Digest;
use sf_tests::plugins::{Envelope, sf};

fn json(args: &[&str], dir: &Path) -> Envelope {
    Envelope::parse(
        sf().current_dir(dir)
            .arg("--json")
            .args(args)
            .output()
            .unwrap(),
    )
}

#[test]
fn freeze_seal_collect_judge_and_read_the_evidence() {
    let (_tmp, dir) = sf_tests::private_dir();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/sum.sh"), SUM_BUGGY).unwrap();
    std::fs::write(dir.join("src/check.sh"), CHECK).unwrap();
    let created = json(
        &[
            "repo",
            "create",
            "--path",
            dir.join("repo").to_str().unwrap(),
            "--product",
            "demo",
            "--target",
            "refs/heads/main",
            "--from",
            "src",
            "--identity-out",
            "identity.json",
        ],
        &dir,
    );
    assert_eq!(created.json["ok"], true, "{:?}", created);

    let slice = dir.join("slice");
    for (name, files) in [
        (
            "numbers",
            vec![("numbers.txt", "1\n2\n3\n"), ("expected.txt", "6\n")],
        ),
        ("empty", vec![("numbers.txt", "")]),
    ] {
        let input = slice.join("inputs").join(name);
        std::fs::create_dir_all(&input).unwrap();
        for (file, text) in files {
            std::fs::write(input.join(file), text).unwrap();
        }
    }
    std::fs::write(
        slice.join("slice.json"),
        // The check's entry, check.sh, is trusted and sits at the root beside sum.sh: the
        // root is closed around it, and the Slice opens the file a fix edits.
        r#"{"id":"sum-fix","revision":1,"scope":["sum.sh"],"open":["sum.sh"]}"#,
    )
    .unwrap();
    std::fs::write(
        slice.join("recipe.json"),
        r#"{"timeoutMs":20000,"outputLimit":65536}"#,
    )
    .unwrap();
    let ok = Digest::of(b"ok\n");
    let zero = Digest::of(b"0\n");
    std::fs::write(
        slice.join("acceptance.json"),
        format!(
            r#"{{"protocol":"sf-repository-acceptance/2","checks":[
 {{"kind":"process","id":"bug-shown","phase":"before","stage":"base","entry":{{"from":"tree","path":"check.sh"}},"entryInScope":false,"args":[],"input":"numbers","expectation":{{"exitCode":1,"stdoutDigest":null}}}},
 {{"kind":"process","id":"bug-fixed","phase":"after","stage":"candidate","entry":{{"from":"tree","path":"check.sh"}},"entryInScope":false,"args":[],"input":"numbers","expectation":{{"exitCode":0,"stdoutDigest":"{ok}"}}}},
 {{"kind":"process","id":"empty","phase":"guardrail","stage":"candidate","entry":{{"from":"tree","path":"sum.sh"}},"entryInScope":true,"args":["/sf/input/numbers.txt"],"input":"empty","expectation":{{"exitCode":0,"stdoutDigest":"{zero}"}}}}]}}"#
        ),
    )
    .unwrap();

    let frozen = json(
        &[
            "slice",
            "freeze",
            "--dir",
            "slice",
            "--identity",
            "identity.json",
        ],
        &dir,
    );
    assert_eq!(frozen.json["ok"], true, "{:?}", frozen);
    assert!(
        frozen.json["result"]["inputs"]["numbers"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // Freezing again replays: the same records.
    assert_eq!(
        json(
            &[
                "slice",
                "freeze",
                "--dir",
                "slice",
                "--identity",
                "identity.json"
            ],
            &dir
        )
        .json,
        frozen.json
    );

    let proposal = serde_json::json!({"edits": [{"path": "sum.sh", "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(), "text": SUM_FIXED}]});
    std::fs::write(dir.join("proposal.json"), proposal.to_string()).unwrap();
    let sealed = json(
        &[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--proposal",
            "proposal.json",
        ],
        &dir,
    );
    assert_eq!(sealed.json["ok"], true, "{:?}", sealed);
    let candidate = sealed.json["result"]["digest"].as_str().unwrap().to_owned();

    let collected = json(
        &[
            "collect",
            "--identity",
            "identity.json",
            "--candidate",
            &candidate,
            "--slice",
            "slice",
        ],
        &dir,
    );
    assert_eq!(collected.json["ok"], true, "{:?}", collected);
    let result = &collected.json["result"];
    assert_eq!(result["mayJudge"], true);
    assert_eq!(result["evidence"].as_array().unwrap().len(), 3);
    let progress: Vec<&str> = collected
        .stderr
        .lines()
        .filter(|line| line.starts_with("sf: [") && line.contains(" exited "))
        .collect();
    assert_eq!(
        progress.len(),
        3,
        "one progress line per run:\n{}",
        collected.stderr
    );

    let judged = json(
        &[
            "judge",
            "--identity",
            "identity.json",
            "--candidate",
            &candidate,
            "--slice",
            "slice",
        ],
        &dir,
    );
    let verdict = &judged.json["result"]["verdict"];
    assert_eq!(verdict["outcome"], "verified", "{:?}", judged);
    assert_eq!(verdict["protocol"], "sf-repository-verdict/1");
    assert!(
        judged.json["result"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );

    let found = json(
        &[
            "evidence",
            "find",
            "--candidate",
            &candidate,
            "--identity",
            "identity.json",
            "--slice",
            "slice",
        ],
        &dir,
    );
    assert_eq!(found.json["result"]["ids"], result["evidence"]);
    let id = result["evidence"][1].as_str().unwrap();
    let record = json(&["evidence", "get", id, "--slice", "slice"], &dir);
    assert_eq!(record.json["result"]["observation"]["check"], "bug-fixed");
    assert_eq!(record.json["result"]["stdout"], "ok\n");

    // Errors are envelopes naming the input at fault.
    let missing = json(
        &[
            "evidence",
            "get",
            &Digest::of(b"none").to_string(),
            "--slice",
            "slice",
        ],
        &dir,
    );
    assert_eq!(missing.json["error"]["code"], "missing");
    let bad = json(
        &[
            "judge",
            "--identity",
            "identity.json",
            "--candidate",
            "sha256:xyz",
            "--slice",
            "slice",
        ],
        &dir,
    );
    assert_eq!(bad.json["error"]["code"], "invalid-input");
    assert!(
        bad.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--candidate")
    );
}
