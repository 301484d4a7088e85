//! `sf repo create --from-git REPO --rev REV`: the commit becomes the owned repository's
//! first base byte for byte (the same commit id and tree id, its history's boundary
//! recorded so Git reads it); a tree holding a submodule is refused naming it, and nothing is
//! created; a bad revision is a clear error.

use std::path::Path;
use std::process::Command;

use sf_tests::plugins::{run_json, sf};
use sf_tests::private_dir;

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    sf_tests::plain_git(dir, args, &[])
}

/// A new work tree at `root/name` holding `files` (path, bytes) in one commit.
fn make_repo(root: &Path, name: &str, files: &[(&str, &[u8])]) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    for (path, bytes) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, bytes).unwrap();
    }
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "source"]);
    dir
}

fn create(root: &Path, repo: &Path, rev: &str) -> Command {
    let mut command = sf();
    command
        .args(["repo", "create", "--json", "--product", "p"])
        .args(["--target", "refs/heads/main"])
        .arg(format!("--rev={rev}"))
        .arg("--path")
        .arg(root.join("owned"))
        .arg("--from-git")
        .arg(repo);
    command
}

#[test]
fn a_commit_becomes_the_first_base_byte_for_byte() {
    let (_dir, root) = private_dir();
    let source = make_repo(
        &root,
        "source",
        &[
            ("README.md", b"# sample\n"),
            ("src/main.sh", b"#!/bin/sh\necho hi\n"),
            ("src/deep/x-y.txt", "caf\u{e9}\n".as_bytes()),
            ("a-b", b""),
        ],
    );
    // A later commit that the revision must not pick up.
    std::fs::write(source.join("later.txt"), "later\n").unwrap();
    git(&source, &["add", "-A"]);
    git(&source, &["commit", "-q", "-m", "later"]);

    let envelope = run_json(&mut create(&root, &source, "HEAD~1"));
    let result = envelope.result();
    let owned = root.join("owned");
    assert_eq!(result["path"], owned.to_str().unwrap());
    let initial = result["initial"].as_str().unwrap();
    let source_commit = String::from_utf8(git(&source, &["rev-parse", "HEAD~1"])).unwrap();
    assert_eq!(
        initial,
        source_commit.trim(),
        "the owned base is the source's commit"
    );
    assert_eq!(
        git(&owned, &["cat-file", "commit", initial]),
        git(&source, &["cat-file", "commit", initial]),
        "byte for byte"
    );
    // Git reads the owned history as a shallow one: the log of the base is the base.
    assert_eq!(
        String::from_utf8(git(&owned, &["log", "--format=%H %s", "refs/heads/main"])).unwrap(),
        format!("{initial} source\n")
    );

    let listing = |dir: &Path, rev: &str| {
        String::from_utf8(git(dir, &["ls-tree", "-r", "--full-tree", rev])).unwrap()
    };
    let expected = listing(&source, "HEAD~1");
    let got = listing(&owned, initial);
    assert_eq!(got, expected);
    assert!(!got.contains("later.txt"));
    assert_eq!(got.lines().count(), 4);
    assert_eq!(
        git(&owned, &["rev-parse", "refs/heads/main^{tree}"]),
        git(&source, &["rev-parse", "HEAD~1^{tree}"])
    );
    for line in got.lines() {
        let (head, path) = line.split_once('\t').unwrap();
        let id = head.split(' ').nth(2).unwrap();
        assert_eq!(
            git(&owned, &["cat-file", "blob", id]),
            git(&source, &["cat-file", "blob", &format!("HEAD~1:{path}")]),
            "{path}"
        );
    }

    // A bare repository and a branch name work the same way.
    let bare = root.join("bare.git");
    git(
        &root,
        &[
            "clone",
            "-q",
            "--bare",
            source.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let (_dir2, root2) = private_dir();
    let envelope = run_json(&mut create(&root2, &bare, "main"));
    let initial = envelope.result()["initial"].as_str().unwrap().to_owned();
    assert_eq!(
        listing(&root2.join("owned"), &initial),
        listing(&source, "main")
    );
}

#[test]
fn a_submodule_is_refused_by_name_and_nothing_is_created() {
    let (_dir, root) = private_dir();
    let source = make_repo(
        &root,
        "source",
        &[
            ("ok.txt", b"fine\n"),
            ("data/blob.bin", b"\x00\xff\xfe\x01"),
        ],
    );
    std::os::unix::fs::symlink("ok.txt", source.join("link")).unwrap();
    git(&source, &["add", "link"]);
    let head = String::from_utf8(git(&source, &["rev-parse", "HEAD"])).unwrap();
    git(
        &source,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},sub", head.trim()),
        ],
    );
    git(&source, &["commit", "-q", "-m", "unstorable"]);

    let envelope = run_json(&mut create(&root, &source, "HEAD"));
    assert_eq!(envelope.error_code(), "unsupported-source");
    let message = envelope.error_message();
    assert!(
        message.contains("\n  sub: is a submodule (mode 160000)")
            && message.contains("(unsupported-entry)"),
        "sub not listed in: {message}"
    );
    // A binary file and a link inside the tree are ordinary content.
    for held in ["ok.txt", "data/blob.bin", "link"] {
        assert!(!message.contains(&format!("  {held}:")), "{message}");
    }
    assert!(message.contains("nothing was created"), "{message}");
    assert!(root.join("owned").symlink_metadata().is_err());
}

#[test]
fn bad_revisions_and_repositories_are_clear_errors() {
    let (_dir, root) = private_dir();
    let source = make_repo(&root, "source", &[("a.txt", b"a\n")]);
    for (rev, code, needle) in [
        ("no-such-branch", "bad-revision", "no-such-branch"),
        ("--all", "bad-revision", "not starting with -"),
        ("HEAD~5", "bad-revision", "HEAD~5"),
    ] {
        let envelope = run_json(&mut create(&root, &source, rev));
        assert_eq!(envelope.error_code(), code, "{rev}");
        assert!(
            envelope.error_message().contains(needle),
            "{rev}: {}",
            envelope.error_message()
        );
        assert!(root.join("owned").symlink_metadata().is_err());
    }
    let not_repo = root.join("plain");
    std::fs::create_dir(&not_repo).unwrap();
    let envelope = run_json(&mut create(&root, &not_repo, "HEAD"));
    assert_eq!(envelope.error_code(), "not-a-repository");
    let envelope = run_json(&mut create(&root, &root.join("missing"), "HEAD"));
    assert_eq!(envelope.error_code(), "not-a-repository");

    // --rev without --from-git, and both sources at once, are usage errors.
    let output = sf()
        .args([
            "repo",
            "create",
            "--product",
            "p",
            "--target",
            "refs/heads/main",
        ])
        .arg("--path")
        .arg(root.join("owned"))
        .arg("--from")
        .arg(&source)
        .arg("--from-git")
        .arg(&source)
        .args(["--rev", "HEAD"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let output = sf()
        .args([
            "repo",
            "create",
            "--product",
            "p",
            "--target",
            "refs/heads/main",
        ])
        .arg("--path")
        .arg(root.join("owned"))
        .arg("--from-git")
        .arg(&source)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--rev"));
    assert!(root.join("owned").symlink_metadata().is_err());
}
