//! `sf propose` and `sf seal --commit/--tree/--diff` through the built binary: proposals made from
//! real commits of the requests fixture and from scratch repositories holding what Git's
//! tree model holds (modes, links, binary files, deletions), each sealed Candidate compared
//! with the commit's own tree; and what is refused, with nothing written.

use std::path::{Path, PathBuf};
use std::process::Command;

use sf_tests::plugins::{Envelope, freeze_minimal_slice, run_json, sf};
use sf_tests::{fixture_bundle, private_dir};

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Git's stdout exactly (a diff's last line may be a blank context line).
fn git_raw(dir: &Path, args: &[&str]) -> Vec<u8> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    output.stdout
}

/// An owned repository created from commit `rev` of `source`, and a Slice of `scope` frozen
/// for it, in `dir`.
fn repository_at(dir: &Path, source: &Path, rev: &str, scope: &[&str]) -> (PathBuf, PathBuf) {
    let identity = dir.join("identity.json");
    run_json(
        sf().args(["--json", "repo", "create", "--product", "p", "--target"])
            .args(["refs/heads/main", "--path"])
            .arg(dir.join("repo.git"))
            .arg("--from-git")
            .arg(source)
            .arg(format!("--rev={rev}"))
            .arg("--identity-out")
            .arg(&identity),
    )
    .result();
    let slice = freeze_minimal_slice(dir, &identity, scope);
    (identity, slice)
}

fn propose(identity: &Path, slice: &Path, source: &[&str]) -> Envelope {
    run_json(
        sf().args(["--json", "propose", "--identity"])
            .arg(identity)
            .arg("--slice")
            .arg(slice)
            .args(source),
    )
}

fn seal(identity: &Path, slice: &Path, source: &[&str]) -> Envelope {
    run_json(
        sf().args(["--json", "seal", "--identity"])
            .arg(identity)
            .arg("--slice")
            .arg(slice)
            .args(source),
    )
}

/// The tree of the sealed Candidate's M in the owned repository at `dir/repo.git`.
fn sealed_tree(dir: &Path, sealed: &Envelope) -> String {
    let commit = sealed.result()["commit"].as_str().unwrap();
    git(
        &dir.join("repo.git"),
        &["rev-parse", &format!("{commit}^{{tree}}")],
    )
}

#[test]
fn real_commits_of_requests_seal_to_their_own_trees() {
    let (_keep, dir) = private_dir();
    let team = dir.join("requests.git");
    let bundle = fixture_bundle("requests.bundle");
    let cloned = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&bundle)
        .arg(&team)
        .status()
        .unwrap();
    assert!(cloned.success());
    // Commits that change the package (78 since it moved under src/; every sixth), sealed on their parent with the
    // package as the scope and `--only` keeping it: each Candidate's package is the commit's
    // own, and everything else is the parent's.
    let commits = git(
        &team,
        &[
            "log",
            "--no-merges",
            "--format=%H",
            "-n",
            "400",
            "main",
            "--",
            "src/requests",
        ],
    );
    let mut checked = 0;
    let mut left_out = 0;
    for commit in commits.lines().step_by(6) {
        let work = dir.join(format!("c{checked}"));
        std::fs::create_dir_all(&work).unwrap();
        let parent = format!("{commit}^");
        let (identity, slice) = repository_at(&work, &team, &parent, &["src/requests"]);
        let repo = team.to_str().unwrap();
        let source = ["--commit", commit, "--repo", repo, "--only", "src/requests"];
        let made = propose(&identity, &slice, &source);
        let changed = git(
            &team,
            &[
                "diff-tree",
                "--no-commit-id",
                "-r",
                "--name-only",
                commit,
                "--",
                "src/requests",
            ],
        );
        let proposal = &made.result()["proposal"];
        assert_eq!(
            proposal["edits"].as_array().unwrap().len(),
            changed.lines().count(),
            "{commit}: {proposal}"
        );
        left_out += made.result()["summary"]["leftOut"]
            .as_array()
            .unwrap()
            .len();
        let author = git(&team, &["log", "-1", "--format=%an <%ae>", commit]);
        let named = &proposal["author"];
        assert_eq!(
            format!(
                "{} <{}>",
                named["name"].as_str().unwrap(),
                named["email"].as_str().unwrap()
            ),
            author,
            "{commit}"
        );
        // The commit's diff, as an agent hands it over, proposes the same edits.
        let diff = work.join("change.diff");
        std::fs::write(
            &diff,
            git_raw(
                &team,
                &["diff", "--binary", "--full-index", &parent, commit],
            ),
        )
        .unwrap();
        let diff = diff.to_str().unwrap();
        let from_diff = propose(
            &identity,
            &slice,
            &["--diff", diff, "--only", "src/requests"],
        );
        assert_eq!(
            from_diff.result()["proposal"]["edits"],
            proposal["edits"],
            "{commit}"
        );
        let sealed = seal(&identity, &slice, &source);
        let m = sealed.result()["commit"].as_str().unwrap().to_owned();
        let owned = work.join("repo.git");
        assert_eq!(
            git(&owned, &["rev-parse", &format!("{m}:src/requests")]),
            git(&team, &["rev-parse", &format!("{commit}:src/requests")]),
            "{commit}"
        );
        for other in git(&team, &["ls-tree", "--name-only", &parent]).lines() {
            if other != "src" {
                assert_eq!(
                    git(&owned, &["rev-parse", &format!("{m}:{other}")]),
                    git(&team, &["rev-parse", &format!("{parent}:{other}")]),
                    "{commit}: {other}"
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} commits checked");
    assert!(
        left_out > 0,
        "no commit changed anything outside the package"
    );
}

/// A scratch Git repository whose second commit changes a file, a mode, a link's target and
/// a binary file, adds a file and a link, and removes a file.
fn scratch(dir: &Path) -> PathBuf {
    let work = dir.join("scratch");
    std::fs::create_dir_all(work.join("src")).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("src/a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(work.join("src/run.sh"), "#!/bin/sh\necho run\n").unwrap();
    std::fs::write(work.join("src/gone.txt"), "bye\n").unwrap();
    std::fs::write(work.join("src/data.bin"), [0u8, 1, 2, 255, 0, 7]).unwrap();
    std::os::unix::fs::symlink("a.txt", work.join("src/link")).unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "first"]);
    std::fs::write(work.join("src/a.txt"), "one\n2\n").unwrap();
    let mut mode = std::fs::metadata(work.join("src/run.sh"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(work.join("src/run.sh"), mode).unwrap();
    std::fs::remove_file(work.join("src/gone.txt")).unwrap();
    std::fs::write(work.join("src/data.bin"), [0u8, 1, 2, 254, 0, 7, 9]).unwrap();
    std::fs::remove_file(work.join("src/link")).unwrap();
    std::os::unix::fs::symlink("run.sh", work.join("src/link")).unwrap();
    std::os::unix::fs::symlink("a.txt", work.join("src/new-link")).unwrap();
    std::fs::write(work.join("src/new.txt"), "new\n").unwrap();
    git(&work, &["add", "-A"]);
    git(
        &work,
        &[
            "commit",
            "-q",
            "-m",
            "second: every kind of change",
            "-m",
            "with a body",
        ],
    );
    work
}

#[test]
fn every_kind_of_change_of_a_commit_or_a_directory_is_proposed_and_sealed_exactly() {
    let (_keep, dir) = private_dir();
    let team = scratch(&dir);
    let (identity, slice) = repository_at(&dir, &team, "main^", &["src"]);
    let repo = team.to_str().unwrap();
    let made = propose(&identity, &slice, &["--commit", "main", "--repo", repo]);
    let proposal = &made.result()["proposal"];
    let edits: Vec<(String, String)> = proposal["edits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edit| {
            let path = edit["path"].as_str().unwrap().to_owned();
            let form = ["text", "bytes", "link", "mode"]
                .into_iter()
                .find(|form| edit.get(*form).is_some())
                .unwrap();
            let form = match (form, &edit["text"]) {
                ("text", serde_json::Value::Null) => "delete",
                (form, _) => form,
            };
            (path, form.to_owned())
        })
        .collect();
    let expected = [
        ("src/a.txt", "text"),
        ("src/data.bin", "bytes"),
        ("src/gone.txt", "delete"),
        ("src/link", "link"),
        ("src/new-link", "link"),
        ("src/new.txt", "text"),
        ("src/run.sh", "mode"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(path, form)| ((*path).to_owned(), (*form).to_owned()))
        .collect();
    assert_eq!(edits, expected, "{proposal}");
    assert_eq!(proposal["message"]["title"], "second: every kind of change");
    assert_eq!(proposal["message"]["body"], "with a body");

    let main_tree = git(&team, &["rev-parse", "main^{tree}"]);
    let sealed = seal(&identity, &slice, &["--commit", "main", "--repo", repo]);
    assert_eq!(sealed_tree(&dir, &sealed), main_tree);

    // The work tree (without its .git) proposes the same edits, without message or author.
    let tree = dir.join("exported");
    std::fs::create_dir_all(&tree).unwrap();
    let archive = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "git -C {} archive main | tar -x -C {}",
            team.display(),
            tree.display()
        ))
        .status()
        .unwrap();
    assert!(archive.success());
    let from_tree = propose(&identity, &slice, &["--tree", tree.to_str().unwrap()]);
    let from_tree = &from_tree.result()["proposal"];
    assert_eq!(from_tree["edits"], proposal["edits"]);
    assert!(from_tree.get("message").is_none(), "{from_tree}");
    let sealed = seal(&identity, &slice, &["--tree", tree.to_str().unwrap()]);
    assert_eq!(sealed_tree(&dir, &sealed), main_tree);
    // So does the checkout itself: its root's .git is not part of the tree.
    let checkout = propose(&identity, &slice, &["--tree", repo]);
    assert_eq!(checkout.result()["proposal"]["edits"], proposal["edits"]);
    // And its diff, from a file or from standard input.
    let diff = String::from_utf8(git_raw(&team, &["diff", "--binary", "main^", "main"])).unwrap();
    let file = dir.join("change.diff");
    std::fs::write(&file, &diff).unwrap();
    let from_diff = propose(&identity, &slice, &["--diff", file.to_str().unwrap()]);
    assert_eq!(from_diff.result()["proposal"]["edits"], proposal["edits"]);
    let mut piped = sf()
        .args(["--json", "propose", "--identity"])
        .arg(&identity)
        .arg("--slice")
        .arg(&slice)
        .args(["--diff", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(diff.as_bytes())
        .unwrap();
    let piped = Envelope::parse(piped.wait_with_output().unwrap());
    assert_eq!(piped.result()["proposal"]["edits"], proposal["edits"]);
    let sealed = seal(&identity, &slice, &["--diff", file.to_str().unwrap()]);
    assert_eq!(sealed_tree(&dir, &sealed), main_tree);
}

#[test]
fn a_diff_that_does_not_apply_or_reaches_outside_is_refused_and_nothing_is_sealed() {
    let (_keep, dir) = private_dir();
    let team = scratch(&dir);
    let (identity, slice) = repository_at(&dir, &team, "main^", &["src"]);
    let write = |name: &str, text: &str| {
        let file = dir.join(name);
        std::fs::write(&file, text).unwrap();
        file.to_str().unwrap().to_owned()
    };
    // Made against another base: the hunk's context is not the base's.
    let stale = write(
        "stale.diff",
        "diff --git a/src/a.txt b/src/a.txt\n--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1,2 +1,2 @@\n one\n-three\n+3\n",
    );
    let refused = propose(&identity, &slice, &["--diff", &stale]);
    assert_eq!(refused.error_code(), "diff-refused", "{}", refused.json);
    let message = refused.error_message();
    assert!(
        message.contains("src/a.txt") && message.contains("hunk #1"),
        "{message}"
    );
    // A path climbing out of the tree, and one into .git.
    for (name, path) in [
        ("climb.diff", "../outside"),
        ("git.diff", ".git/hooks/post-commit"),
    ] {
        let hostile = write(
            name,
            &format!(
                "diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
            ),
        );
        let refused = seal(&identity, &slice, &["--diff", &hostile]);
        assert_eq!(
            refused.error_code(),
            "diff-refused",
            "{path}: {}",
            refused.json
        );
    }
    // A link made and then written through.
    let through = write(
        "through.diff",
        "diff --git a/src/d b/src/d\nnew file mode 120000\n--- /dev/null\n+++ b/src/d\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\ndiff --git a/src/d/passwd b/src/d/passwd\nnew file mode 100644\n--- /dev/null\n+++ b/src/d/passwd\n@@ -0,0 +1 @@\n+root::0:0::/:/bin/sh\n",
    );
    let refused = seal(&identity, &slice, &["--diff", &through]);
    assert_eq!(refused.error_code(), "diff-refused", "{}", refused.json);
    let listed = run_json(sf().args(["--json", "list", "--identity"]).arg(&identity));
    assert_eq!(listed.result()["candidates"].as_array().unwrap().len(), 0);
}

#[test]
fn only_keeps_the_paths_named_and_out_writes_a_new_file() {
    let (_keep, dir) = private_dir();
    let team = scratch(&dir);
    let (identity, slice) = repository_at(&dir, &team, "main^", &["src"]);
    let repo = team.to_str().unwrap();
    let out = dir.join("proposal.json");
    let made = run_json(
        sf().args(["--json", "propose", "--identity"])
            .arg(&identity)
            .arg("--slice")
            .arg(&slice)
            .args(["--commit", "main", "--repo", repo, "--only", "src/a.txt"])
            .arg("--only")
            .arg("src/new.txt")
            .arg("--out")
            .arg(&out),
    );
    let summary = &made.result()["summary"];
    assert_eq!(
        summary["edits"],
        serde_json::json!(["src/a.txt", "src/new.txt"])
    );
    assert_eq!(summary["leftOut"].as_array().unwrap().len(), 5, "{summary}");
    // The file written is a proposal `sf seal --proposal` takes.
    let sealed = seal(&identity, &slice, &["--proposal", out.to_str().unwrap()]);
    sealed.result();
    // An existing --out is never overwritten.
    let again = run_json(
        sf().args(["--json", "propose", "--identity"])
            .arg(&identity)
            .arg("--slice")
            .arg(&slice)
            .args(["--commit", "main", "--repo", repo, "--out"])
            .arg(&out),
    );
    assert_eq!(again.error_code(), "not-written", "{}", again.json);
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains("src/new.txt")
    );
}

#[test]
fn what_cannot_be_proposed_is_refused_and_nothing_is_written() {
    let (_keep, dir) = private_dir();
    let team = scratch(&dir);
    let (identity, slice) = repository_at(&dir, &team, "main^", &["src/a.txt"]);
    let repo = team.to_str().unwrap();
    // Outside the scope: refused, naming the path and the way out.
    let outside = propose(&identity, &slice, &["--commit", "main", "--repo", repo]);
    assert_eq!(outside.error_code(), "rejected", "{}", outside.json);
    assert!(
        outside.error_message().contains("--only"),
        "{}",
        outside.json
    );
    // An --only that is not a tree path.
    let absolute = propose(
        &identity,
        &slice,
        &["--commit", "main", "--repo", repo, "--only", "/src"],
    );
    assert_eq!(absolute.error_code(), "invalid-input", "{}", absolute.json);
    // A commit that changes nothing the base does not hold.
    let nothing = propose(&identity, &slice, &["--commit", "main^", "--repo", repo]);
    assert_eq!(nothing.error_code(), "no-edits", "{}", nothing.json);
    // A revision the repository does not have.
    let missing = propose(
        &identity,
        &slice,
        &["--commit", "no-such-rev", "--repo", repo],
    );
    assert_eq!(missing.error_code(), "bad-revision", "{}", missing.json);
    // A nested .git in a tree is refused (the root's own is not part of the tree).
    std::fs::create_dir_all(team.join("src/sub/.git")).unwrap();
    std::fs::write(team.join("src/sub/.git/config"), "x").unwrap();
    let nested = propose(&identity, &slice, &["--tree", repo]);
    assert_eq!(nested.error_code(), "git-segment", "{}", nested.json);
    // Nothing was sealed by any of them.
    let listed = run_json(sf().args(["--json", "list", "--identity"]).arg(&identity));
    assert_eq!(listed.result()["candidates"].as_array().unwrap().len(), 0);
}
