//! Real repositories get in exactly: commits of psf/requests and python/typing_extensions
//! (cloned from the fixture bundles) imported at their tip and at older commits keep their
//! commit id and tree id, and the base's files are, byte for byte and mode for mode, what
//! `git archive` of the same commit holds; a tree the test builds with every entry kind is
//! imported exactly; and the dangerous names of Git's and gix-validate's own tests are
//! refused at import, naming the path and the rule, with nothing created.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sf_host::contracts::tree_path::EntryMode;
use sf_host::git_source::{GitSourceError, read_git_source};
use sf_host::repository::{
    CreateRepository, InitialBase, RepositoryOptions, RepositorySettings, create_repository,
    open_repository,
};
use sf_tests::private_dir;

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    sf_tests::plain_git(dir, args, &[])
}

fn git_with_input(dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    sf_tests::plain_git(dir, args, input)
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap().trim().to_owned()
}

/// Imports `rev` of `source` into a new owned repository and checks it is the same commit
/// and tree, holding exactly what `git archive` holds.
fn import_exactly(source: &Path, rev: &str, scratch: &Path) {
    let commit = text(git(source, &["rev-parse", &format!("{rev}^{{commit}}")]));
    let tree = text(git(source, &["rev-parse", &format!("{rev}^{{tree}}")]));
    let imported = read_git_source(source, &commit).unwrap_or_else(|e| panic!("{rev}: {e}"));
    let factory = sf_tests::git_factory();
    let path = scratch.join(format!("owned-{commit}"));
    let identity = create_repository(
        factory.as_ref(),
        &CreateRepository {
            path: path.to_str().unwrap().into(),
            product_id: "real".into(),
            target_ref: "refs/heads/main".into(),
            base: InitialBase::Imported(imported),
            settings: RepositorySettings::default(),
        },
        &RepositoryOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{rev}: {e}"));
    assert_eq!(identity.initial.to_hex(), commit, "{rev}: the commit id");
    let repo = open_repository(factory.as_ref(), &identity, RepositoryOptions::default()).unwrap();
    let base = repo.snapshot(&identity.initial).unwrap();
    assert_eq!(base.tree.to_hex(), tree, "{rev}: the tree id");
    assert_eq!(
        text(git(&path, &["rev-parse", "refs/heads/main^{tree}"])),
        tree
    );
    let held: BTreeMap<String, (EntryMode, Vec<u8>)> = base
        .files
        .into_iter()
        .map(|file| (file.path, (file.mode, file.content)))
        .collect();
    let expected = sf_tests::archived_leaves(source, &commit, scratch);
    assert_eq!(
        held.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{rev}: the paths"
    );
    for (path, leaf) in &expected {
        assert!(
            held[path] == *leaf,
            "{rev}: {path} differs from git archive"
        );
    }
    // Git reads the owned repository whole: the boundary is recorded, the objects connect.
    git(&path, &["log", "-1", "--format=%H", "refs/heads/main"]);
    git(&path, &["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn real_repositories_are_imported_exactly_at_their_tip_and_older_commits() {
    let (_dir, root) = private_dir();
    for (bundle, expect_links) in [
        ("requests.bundle", true),
        ("typing_extensions.bundle", false),
    ] {
        let clone = root.join(bundle.trim_end_matches(".bundle"));
        git(
            &root,
            &[
                "clone",
                "-q",
                "--bare",
                sf_tests::fixture_bundle(bundle).to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        let first_parent = text(git(
            &clone,
            &["rev-list", "--first-parent", "-n", "400", "main"],
        ));
        let commits: Vec<&str> = first_parent.lines().collect();
        let picks = [0, 7, 40, 120, 250, commits.len() - 1];
        for at in picks {
            import_exactly(&clone, commits[at], &root);
        }
        if expect_links {
            // The tip of requests holds symbolic links and an executable: both came through.
            let listing = text(git(&clone, &["ls-tree", "-r", "main"]));
            assert!(listing.contains("120000 blob") && listing.contains("100755 blob"));
        }
    }
}

/// A repository with every entry kind the model holds, built by the test.
#[test]
fn every_entry_kind_is_imported_exactly_and_no_filter_ever_runs() {
    let (_dir, root) = private_dir();
    let source = root.join("every-kind");
    std::fs::create_dir(&source).unwrap();
    git(&source, &["init", "-q"]);
    let write = |path: &str, bytes: &[u8]| {
        let file = source.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, bytes).unwrap();
    };
    write("bin/run.sh", b"#!/bin/sh\necho run\n");
    std::fs::set_permissions(
        source.join("bin/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write("img/logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\x00");
    write("data/nul.bin", b"a\0b\0c");
    write(".gitignore", b"*.pyc\n");
    write(".gitattributes", b"*.secret filter=marker\n");
    write("notes.secret", b"plain text the filter never sees\n");
    write(".github/workflows/ci.yml", b"on: push\n");
    write("node_modules/@scope/pkg/skills/a/SKILL.md", b"# skill\n");
    write("deep/a/b/c/d/e/f/g/h/leaf.txt", b"deep\n");
    std::os::unix::fs::symlink("bin/run.sh", source.join("run")).unwrap();
    std::os::unix::fs::symlink("../run", source.join("deep/up")).unwrap();
    std::os::unix::fs::symlink("up", source.join("deep/chained")).unwrap();
    git(&source, &["add", "-A"]);
    git(&source, &["commit", "-q", "-m", "every kind"]);
    import_exactly(&source, "HEAD", &root);

    // The source's own configuration now names a filter that leaves a mark when it runs
    // (plain `git archive` would run it too, so the exactness check above came first).
    let mark = root.join("filter-ran");
    let driver = format!("touch {} && cat", mark.display());
    git(&source, &["config", "filter.marker.smudge", &driver]);
    git(&source, &["config", "filter.marker.clean", &driver]);
    let imported = read_git_source(&source, "HEAD").unwrap();
    let secret = imported
        .files
        .iter()
        .find(|file| file.path == "notes.secret")
        .unwrap();
    assert_eq!(secret.content, b"plain text the filter never sees\n");
    assert!(!mark.exists(), "importing ran the repository's filter");

    // The negative control: plain Git checking the same commit out runs it.
    std::fs::remove_file(source.join("notes.secret")).unwrap();
    git(&source, &["checkout", "--", "notes.secret"]);
    assert!(
        mark.exists(),
        "the control did not run the filter, so it proves nothing"
    );
}

/// A tree whose one entry is `name` with `mode`, built with `git mktree` (which, unlike the
/// index, does not refuse dangerous names), committed; its commit id.
fn commit_of_entries(repo: &Path, entries: &[(&str, &str, &str)]) -> String {
    let mut listing = Vec::new();
    for (mode, name, content) in entries {
        let kind = if *mode == "040000" { "tree" } else { "blob" };
        let id = if kind == "tree" {
            text(git(repo, &["rev-parse", "HEAD^{tree}"]))
        } else {
            text(git_with_input(
                repo,
                &["hash-object", "-w", "--stdin"],
                content.as_bytes(),
            ))
        };
        listing.extend_from_slice(format!("{mode} {kind} {id}\t{name}\0").as_bytes());
    }
    let tree = text(git_with_input(
        repo,
        &["mktree", "-z", "--missing"],
        &listing,
    ));
    text(git(repo, &["commit-tree", &tree, "-m", "hostile"]))
}

#[test]
fn dangerous_names_are_refused_at_import_naming_path_and_rule() {
    let (_dir, root) = private_dir();
    let source = root.join("hostile");
    std::fs::create_dir(&source).unwrap();
    git(&source, &["init", "-q"]);
    std::fs::write(source.join("ok"), "ok\n").unwrap();
    git(&source, &["add", "-A"]);
    git(&source, &["commit", "-q", "-m", "ok"]);
    // (the tree's entries as (mode, name, content), the path named, the rule's code)
    type Case<'a> = (&'a [(&'a str, &'a str, &'a str)], &'a str, &'a str);
    let cases: &[Case] = &[
        (&[("100644", ".GIT", "x")], ".GIT", "git-segment"),
        (&[("100644", "git~1", "x")], "git~1", "git-segment"),
        (&[("100644", ".git.", "x")], ".git.", "git-segment"),
        (&[("100644", ".git ", "x")], ".git ", "git-segment"),
        (
            &[("100644", ".git::$INDEX_ALLOCATION", "x")],
            ".git::$INDEX_ALLOCATION",
            "git-segment",
        ),
        (
            &[("100644", ".g\u{200c}it", "x")],
            ".g\u{200c}it",
            "git-segment",
        ),
        (&[("040000", ".Git", "")], ".Git", "git-segment"),
        (
            &[("120000", ".gitmodules", "ok")],
            ".gitmodules",
            "symlinked-gitmodules",
        ),
        (&[("120000", "up", "..")], "up", "link-escapes"),
        (
            &[("120000", "a", "."), ("120000", "b", "a/..")],
            "b",
            "link-escapes",
        ),
        (&[("120000", "g", ".git/hooks")], "g", "link-into-git"),
        (&[("120000", "abs", "/etc/passwd")], "abs", "absolute-link"),
        (&[("100644", "a\rb", "x")], "a\rb", "control-character"),
        (&[("160000", "sub", "")], "sub", "unsupported-entry"),
    ];
    for (entries, path, code) in cases {
        let commit = if entries[0].0 == "160000" {
            // A gitlink names a commit: the source's own HEAD will do.
            let head = text(git(&source, &["rev-parse", "HEAD"]));
            let listing = format!("160000 commit {head}\tsub\0");
            let tree = text(git_with_input(
                &source,
                &["mktree", "-z", "--missing"],
                listing.as_bytes(),
            ));
            text(git(&source, &["commit-tree", &tree, "-m", "submodule"]))
        } else {
            commit_of_entries(&source, entries)
        };
        match read_git_source(&source, &commit) {
            Err(GitSourceError::Unsupported(faults)) => {
                assert!(
                    faults
                        .iter()
                        .any(|fault| fault.path == *path && fault.reason.code() == *code),
                    "{path:?} {code}: {faults:?}"
                );
            }
            other => panic!("{path:?}: expected a refusal naming it, got {other:?}"),
        }
    }
    // Through the command line, a refused tree creates nothing.
    let commit = commit_of_entries(&source, &[("120000", "up", "..")]);
    let owned = root.join("owned");
    let output = sf_tests::plugins::sf()
        .args(["repo", "create", "--json", "--product", "p"])
        .args(["--target", "refs/heads/main", "--rev", &commit, "--path"])
        .arg(&owned)
        .arg("--from-git")
        .arg(&source)
        .output()
        .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        envelope["error"]["code"], "unsupported-source",
        "{envelope}"
    );
    let message = envelope["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("up: ") && message.contains("(link-escapes)"),
        "{message}"
    );
    assert!(
        owned.symlink_metadata().is_err(),
        "a refused import created the root"
    );
}

/// A commit in sf's Candidate form whose tree holds a name Git refuses, planted in an owned
/// repository with plain Git, never reads back: the walker every read uses (snapshot, export,
/// the base of a seal) names the path and the rule, and nothing is repaired.
#[test]
fn a_planted_tree_with_a_dangerous_name_never_reads_back() {
    let test = sf_tests::TestRepo::git(&[("src/a.txt", "a\n")]);
    let sealed = test
        .repo
        .seal(
            &sf_tests::frozen(test.identity.initial, &["src"]),
            &sf_tests::proposal(vec![sf_tests::edit("src/a.txt", Some("a\n"), Some("b\n"))]),
        )
        .unwrap();
    let owned = &test.path;
    for (name, code) in [(".GIT", "git-segment"), ("a\rb", "control-character")] {
        let blob = text(git_with_input(
            owned,
            &["hash-object", "-w", "--stdin"],
            b"x",
        ));
        let inner = text(git_with_input(
            owned,
            &["mktree", "-z"],
            format!("100644 blob {blob}\tconfig\0").as_bytes(),
        ));
        let root = text(git_with_input(
            owned,
            &["mktree", "-z"],
            format!("040000 tree {inner}\t{name}\0").as_bytes(),
        ));
        // M's own bytes with the planted tree: the Candidate form, another tree.
        let m = String::from_utf8(git(
            owned,
            &["cat-file", "commit", &sealed.manifest.commit.to_hex()],
        ))
        .unwrap();
        let forged_body = m.replacen(&sealed.manifest.tree.to_hex(), &root, 1);
        let forged = text(git_with_input(
            owned,
            &["hash-object", "-t", "commit", "-w", "--stdin"],
            forged_body.as_bytes(),
        ));
        let id = sf_host::git_object::ObjectId::parse_hex(&forged).unwrap();
        let error = test.repo.snapshot(&id).unwrap_err();
        assert_eq!(error.code(), "corrupt", "{name:?}: {error}");
        let message = error.to_string();
        assert!(
            message.contains(&format!("{name}: ")) && message.contains(&format!("({code})")),
            "{name:?}: {message}"
        );
    }
}
