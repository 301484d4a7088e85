//! `sf repo` through the binary: `sf repo import` of later commits of psf/requests (cloned
//! from the fixture bundle) with and without `--advance`, a Slice frozen and a Candidate
//! sealed on the imported base, a replay, a refusal that writes nothing; the settings flags
//! of `sf repo create`, each with an effect; and an object-store plugin of ABI 1.2, which
//! cannot hold a history boundary, refusing `--from-git` of a commit with parents before
//! anything is created.

use std::path::{Path, PathBuf};

use serde_json::json;
use sf_host::canonical::Digest;
use sf_tests::plugins::{Envelope, built, freeze_minimal_slice_with_result, run_json, sf};
use sf_tests::{clone_fixture, private_dir, tree_hash};

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    sf_tests::plain_git(dir, args, &[])
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap().trim().to_owned()
}

fn import(identity: &Path, source: &Path, rev: &str, advance: bool) -> std::process::Command {
    let mut command = sf();
    command
        .args(["repo", "import", "--identity"])
        .arg(identity)
        .arg("--from-git")
        .arg(source)
        .args(["--rev", rev]);
    if advance {
        command.arg("--advance");
    }
    command
}

#[test]
fn sf_repo_import_adds_a_later_base_that_slices_and_candidates_build_on() {
    let (_dir, root) = private_dir();
    let (clone, commits) = clone_fixture(&root, "requests.bundle");
    // Commits of 2011, with merges between them.
    let (older, middle, later) = (&commits[2620], &commits[2600], &commits[2581]);
    let identity = root.join("identity.json");
    let owned = root.join("owned");
    run_json(
        sf().args(["repo", "create", "--json", "--product", "requests"])
            .args(["--target", "refs/heads/main", "--rev", older])
            .arg("--path")
            .arg(&owned)
            .arg("--from-git")
            .arg(&clone)
            .arg("--identity-out")
            .arg(&identity),
    )
    .result();

    // Imported with --advance: the target moves from the first base to it, once.
    let moved = run_json(import(&identity, &clone, middle, true).arg("--json"));
    let result = moved.result();
    assert_eq!(result["commit"], middle.as_str());
    assert_eq!(
        result["tree"],
        text(git(&clone, &["rev-parse", &format!("{middle}^{{tree}}")]))
    );
    assert_eq!(result["recordRef"], format!("refs/sf/imports/{middle}"));
    assert_eq!(result["replayed"], false);
    assert_eq!(
        result["target"],
        json!({"ref": "refs/heads/main", "advance": true, "outcome": "moved", "moved": true,
               "from": older, "current": null, "reason": null})
    );
    assert_eq!(
        result["record"],
        json!({"protocol": "sf-import/1", "product": "requests", "commit": middle,
               "tree": result["tree"], "source": clone.to_str().unwrap(), "rev": middle,
               "advance": true})
    );
    assert_eq!(
        text(git(&owned, &["rev-parse", "refs/heads/main"])),
        *middle
    );

    // The same import again, as text: nothing written, nothing moved, exit 0.
    let before = tree_hash(&owned);
    let output = import(&identity, &clone, middle, true).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let shown = String::from_utf8(output.stdout).unwrap();
    assert!(
        shown.contains("already recorded: nothing written")
            && shown.contains(&format!("refs/heads/main names {middle} already")),
        "{shown}"
    );
    assert_eq!(tree_hash(&owned), before);

    // A Slice frozen now is frozen on the imported base, and a Candidate sealed for it is a
    // child of the team's commit.
    let (slice, frozen) = freeze_minimal_slice_with_result(&root, &identity, &["requests"]);
    assert_eq!(frozen["base"], middle.as_str());
    let listed = run_json(
        sf().args(["snapshot", "--json", "--identity"])
            .arg(&identity),
    );
    let core = listed.result()["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|file| file["path"] == "requests/core.py")
        .unwrap()
        .clone();
    let prior = git(
        &clone,
        &["cat-file", "blob", &format!("{middle}:requests/core.py")],
    );
    assert_eq!(core["sha256"], Digest::of(&prior).to_string());
    let proposal = root.join("proposal.json");
    std::fs::write(
        &proposal,
        json!({"edits": [{"path": "requests/core.py", "prior": core["sha256"],
                          "text": format!("{}# changed\n", String::from_utf8(prior).unwrap())}]})
        .to_string(),
    )
    .unwrap();
    let sealed = run_json(
        sf().args(["seal", "--json", "--identity"])
            .arg(&identity)
            .arg("--slice")
            .arg(&slice)
            .arg("--proposal")
            .arg(&proposal),
    );
    let candidate = sealed.result()["commit"].as_str().unwrap().to_owned();
    assert_eq!(
        text(git(&owned, &["rev-parse", &format!("{candidate}^")])),
        *middle
    );

    // A later commit without --advance: recorded, a factory commit, the target stays.
    let kept = run_json(import(&identity, &clone, later, false).arg("--json"));
    assert_eq!(kept.result()["target"]["outcome"], "not-asked");
    assert_eq!(kept.result()["target"]["moved"], false);
    assert_eq!(
        text(git(&owned, &["rev-parse", "refs/heads/main"])),
        *middle
    );
    let listed = run_json(
        sf().args(["snapshot", "--json", "--identity"])
            .arg(&identity)
            .args(["--commit", later]),
    );
    assert_eq!(listed.result()["tree"], kept.result()["tree"]);

    // Refusals are errors naming the input, with nothing written.
    let before = tree_hash(&owned);
    let refused = run_json(import(&identity, &clone, "no-such-branch", true).arg("--json"));
    assert_eq!(refused.error_code(), "bad-revision");
    assert!(refused.error_message().contains("no-such-branch"));
    let backwards = run_json(import(&identity, &clone, older, true).arg("--json"));
    assert_eq!(backwards.error_code(), "conflict");
    assert!(
        backwards.error_message().contains(older) && backwards.error_message().contains(middle),
        "{}",
        backwards.error_message()
    );
    assert_eq!(tree_hash(&owned), before);
    let output = sf()
        .args(["repo", "import", "--identity"])
        .arg(&identity)
        .arg("--from-git")
        .arg(&clone)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "--rev is required");
}

/// A directory `root/name` holding `files`.
fn source_dir(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(name);
    for (path, text) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    dir
}

fn create_from(root: &Path, repo: &str, source: &Path, flags: &[&str]) -> Envelope {
    run_json(
        sf().args(["repo", "create", "--json", "--product", "p"])
            .args(["--target", "refs/heads/main"])
            .arg("--path")
            .arg(root.join(repo))
            .arg("--from")
            .arg(source)
            .args(flags),
    )
}

#[test]
fn the_settings_flags_of_repo_create_each_have_their_effect() {
    let (_dir, root) = private_dir();
    // 3 files of 5, 6 and 7 bytes (18 in all), two of them differing only in case.
    let source = source_dir(
        &root,
        "source",
        &[
            ("README", "abcd\n"),
            ("readme", "abcde\n"),
            ("src/a", "abcdef\n"),
        ],
    );
    let refused = |repo: &str, flags: &[&str], code: &str| {
        let envelope = create_from(&root, repo, &source, flags);
        assert_eq!(envelope.error_code(), "invalid-input", "{flags:?}");
        assert!(
            envelope.error_message().contains(code),
            "{flags:?}: {}",
            envelope.error_message()
        );
        assert!(
            root.join(repo).symlink_metadata().is_err(),
            "{flags:?} created it"
        );
    };
    let allow = "--allow-case-collisions";
    // Without the flag, the pair is refused, naming both spellings.
    let envelope = create_from(&root, "r0", &source, &[]);
    assert!(
        envelope.error_message().contains("readme")
            && envelope.error_message().contains("case-collision"),
        "{}",
        envelope.error_message()
    );
    refused("r1", &[allow, "--max-files", "2"], "too-many-files");
    refused("r2", &[allow, "--max-file-bytes", "6"], "file-too-large");
    refused("r3", &[allow, "--max-tree-bytes", "17"], "source-too-large");
    // At exactly the limits it is created, and the identity records every setting.
    let created = create_from(
        &root,
        "r4",
        &source,
        &[
            allow,
            "--max-files",
            "3",
            "--max-file-bytes",
            "7",
            "--max-tree-bytes",
            "18",
        ],
    );
    assert_eq!(
        created.result()["settings"],
        json!({"maxFiles": 3, "maxFileBytes": 7, "maxTreeBytes": 18, "allowCaseCollisions": true})
    );
    // The recorded limits bind later trees too: an import of a fourth file is refused.
    let identity = root.join("r4-identity.json");
    std::fs::write(&identity, created.result().to_string()).unwrap();
    let team = root.join("team");
    std::fs::create_dir(&team).unwrap();
    git(&team, &["init", "-q"]);
    for (path, text) in [
        ("README", "abcd\n"),
        ("readme", "abcde\n"),
        ("src/a", "abcdef\n"),
        ("b", "b\n"),
    ] {
        let file = team.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    git(&team, &["add", "-A"]);
    git(&team, &["commit", "-q", "-m", "four files"]);
    let envelope = run_json(import(&identity, &team, "HEAD", false).arg("--json"));
    assert_eq!(envelope.error_code(), "unsupported-source");
    assert!(
        envelope.error_message().contains("too-many-files"),
        "{}",
        envelope.error_message()
    );
    // Zero is no limit.
    let envelope = create_from(&root, "r5", &source, &[allow, "--max-files", "0"]);
    assert_eq!(envelope.error_code(), "invalid-input");
    assert!(root.join("r5").symlink_metadata().is_err());
}

#[test]
fn a_store_plugin_of_abi_1_2_refuses_a_commit_with_parents_before_anything_is_created() {
    let (_dir, root) = private_dir();
    let team = root.join("team");
    std::fs::create_dir(&team).unwrap();
    git(&team, &["init", "-q"]);
    for at in 0..2 {
        std::fs::write(team.join("a.txt"), format!("{at}\n")).unwrap();
        git(&team, &["add", "-A"]);
        git(&team, &["commit", "-q", "-m", &format!("commit {at}")]);
    }
    let config = root.join("sf.toml");
    std::fs::write(&config, "[object_store]\ntype = \"memory-root\"\n").unwrap();
    let create = |repo: &str, rev: &str, entry: Option<&str>| {
        let mut command = sf();
        command
            .arg("--config")
            .arg(&config)
            .args(["repo", "create", "--json", "--product", "p"])
            .args(["--target", "refs/heads/main", "--rev", rev])
            .arg("--path")
            .arg(root.join(repo))
            .arg("--from-git")
            .arg(&team)
            .env("SF_PLUGIN_PATH", &built().test_plugins);
        if let Some(entry) = entry {
            command.env("SF_HOSTILE_ENTRY", entry);
        }
        run_json(&mut command)
    };
    // The plugin of ABI 1.2: the commit with a parent is refused naming the plugin, its ABI
    // and the fix, and the root was never created.
    let refused = create("old", "HEAD", Some("abi-minor-2"));
    assert_eq!(refused.error_code(), "unavailable");
    let message = refused.error_message();
    assert!(
        message.contains("plugin hostile speaks ABI 1.2")
            && message.contains("history boundary")
            && message.contains("rebuild it"),
        "{message}"
    );
    assert!(
        root.join("old").symlink_metadata().is_err(),
        "a root was created"
    );
    // The same plugin holds a root commit (no boundary needed): the refusal is the
    // boundary's, and the plugin does create roots.
    create("old-root", "HEAD~1", Some("abi-minor-2")).result();
    assert!(root.join("old-root").is_dir());
    // Built with today's sdk, the same store holds the boundary.
    create("new", "HEAD", None).result();
    assert!(root.join("new").is_dir());
}
