//! Through the `sf` binary, over a base imported from a real Git repository: a proposal that
//! edits text, makes a file executable, replaces a binary file and adds a symbolic link, with
//! its own message and author, is sealed (`sf-candidate/3`), exported with every mode and link
//! exact, landed (collected in the real sandbox, judged Verified, integrated behind the gate),
//! and the target then names M, whose parent is the team's commit and whose author and message
//! are the proposal's.

mod land_support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use land_support::{SUM_BUGGY, SUM_FIXED, Work, git, write};
use sf_host::canonical::Digest;

const LOGO: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff";
const NEW_LOGO: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\x00\x01new";

/// The team's repository: the demo's project with a tool script, an image and a link, in two
/// commits.
fn team_repository(dir: &Path) -> String {
    let source = dir.join("team");
    std::fs::create_dir(&source).unwrap();
    let run = |args: &[&str]| sf_tests::plain_git(&source, args, &[]);
    run(&["init", "-q"]);
    write(&source.join("README.md"), "# sum\n");
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "start"]);
    write(&source.join("sum.sh"), SUM_BUGGY);
    write(&source.join("tests/tool.sh"), "#!/bin/sh\necho tool\n");
    std::fs::write(source.join("tests/logo.png"), LOGO).unwrap();
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "sum, its tool and its logo"]);
    "team".into()
}

#[test]
fn a_whole_tree_proposal_is_sealed_exported_and_landed_on_the_teams_commit() {
    let work = Work::from_git(team_repository, "HEAD");
    let team_head = git(&work.dir.join("team/.git"), &["rev-parse", "HEAD"]);
    assert_eq!(work.initial(), team_head, "the base is the team's commit");
    // The demo's Slice, scoped to sum.sh and tests/, protecting the overlay's test; tests/
    // holds trusted material, so the Slice opens the paths this proposal edits there.
    work.author_slice(
        "slice",
        &[(
            "slice.json",
            r#"{"id":"sum-fix","revision":1,"scope":["sum.sh","tests"],
                "protected":["tests/numbers.sh"],
                "open":["tests/tool.sh","tests/tool","tests/logo.png"]}"#,
        )],
    );
    work.freeze("slice").result();
    let proposal = work.proposal(
        "whole-tree",
        serde_json::json!({
            "message": {"title": "Sum every number", "body": "sum.sh skipped the first one."},
            "author": {"name": "Ada Lovelace", "email": "ada@example.org",
                       "time": 1_764_600_000u64, "offset": "+0100"},
            "edits": [
                {"path": "sum.sh", "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
                 "text": SUM_FIXED},
                {"path": "tests/tool.sh",
                 "prior": Digest::of(b"#!/bin/sh\necho tool\n").to_string(), "mode": "100755"},
                {"path": "tests/logo.png", "prior": Digest::of(LOGO).to_string(),
                 "bytes": base64_of(NEW_LOGO)},
                {"path": "tests/tool", "prior": null, "link": "tool.sh"},
            ],
        }),
    );
    let sealed = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--proposal",
        proposal.to_str().unwrap(),
    ]);
    let result = sealed.result();
    let candidate = result["digest"].as_str().unwrap().to_owned();
    let m = result["commit"].as_str().unwrap().to_owned();
    // The seal names each edit's entry before and after (never every file of the tree).
    let modes: Vec<(String, String)> = result["edits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edit| {
            (
                edit["path"].as_str().unwrap().to_owned(),
                edit["next"]["mode"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (path, mode) in [
        ("sum.sh", "100644"),
        ("tests/logo.png", "100644"),
        ("tests/tool", "120000"),
        ("tests/tool.sh", "100755"),
    ] {
        assert!(
            modes.contains(&(path.to_owned(), mode.to_owned())),
            "{path} is {mode}: {modes:?}"
        );
    }

    // Exported: every mode and link exact on disk.
    work.sf(&[
        "export",
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--out",
        "exported",
    ])
    .result();
    let out = work.dir.join("exported");
    let tool = std::fs::symlink_metadata(out.join("tests/tool.sh")).unwrap();
    assert_ne!(
        tool.permissions().mode() & 0o100,
        0,
        "tool.sh is executable"
    );
    assert_eq!(
        std::fs::read_link(out.join("tests/tool")).unwrap(),
        Path::new("tool.sh")
    );
    assert_eq!(std::fs::read(out.join("tests/logo.png")).unwrap(), NEW_LOGO);
    assert_eq!(
        std::fs::read_to_string(out.join("sum.sh")).unwrap(),
        SUM_FIXED
    );

    // Landed: Verified in the real sandbox, integrated once.
    let landed = work.land(&candidate, "slice", &[]);
    let landed = landed.result();
    assert_eq!(landed["outcome"], "integrated", "{landed}");
    assert_eq!(
        landed["verdict"]["verdict"]["outcome"], "verified",
        "{landed}"
    );
    assert_eq!(work.target(), m, "the target names M");
    let repo = work.dir.join("repo.git");
    assert_eq!(git(&repo, &["log", "-1", "--format=%P", &m]), team_head);
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%an <%ae> %at|%s", &m]),
        "Ada Lovelace <ada@example.org> 1764600000|Sum every number"
    );
    assert_eq!(
        git(&repo, &["log", "-1", "--format=%b", &m])
            .lines()
            .next()
            .unwrap(),
        "sum.sh skipped the first one."
    );
}

/// `bytes` as a proposal writes them: RFC 4648 base64, padded.
fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (at, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if at <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
