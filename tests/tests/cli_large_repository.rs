//! A repository of more than ten thousand files through every command of the path, by the
//! `sf` binary: created from a Git repository served by `git daemon` on loopback, a Slice
//! frozen on it (before, any base over 4,096 files was refused at freeze), a fix sealed,
//! landed and delivered to the daemon, then shown, listed, exported and reported; and `--from` reading
//! a directory under the repository's own `--max-files`, not a fixed limit. The same
//! commands on 100,000 files are a benchmark program (`large_commands`), not a test.

mod deliver_support;
mod land_support;

use std::path::Path;

use land_support::{SUM_BUGGY, SUM_FIXED, Work, git, team_git, team_project, write};
use sf_host::canonical::Digest;
use sf_test_support::git_servers::{BareRemote, GitDaemon};

/// Files beside the sample project's own: more than twice the old 4,096-file bound.
const FILES: usize = 10_000;

/// Writes `count` small generated files under `dir/src/` (a hundred to a directory).
fn generate(dir: &Path, count: usize) {
    for i in 0..count {
        let path = dir.join(format!("src/d{:03}/f{i:05}.txt", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        }
        std::fs::write(&path, format!("generated file {i}\n")).unwrap();
    }
}

/// The team's project with [`FILES`] more files, committed on `main` in `dir/team-work`.
fn large_team_project(dir: &Path) -> std::path::PathBuf {
    let work = dir.join("team-work");
    write(&work.join("README"), "the team's large project\n");
    write(&work.join("sum.sh"), SUM_BUGGY);
    generate(&work, FILES);
    team_git(&work, &["init", "-q", "-b", "main"]);
    team_git(&work, &["add", "."]);
    team_git(&work, &["commit", "-q", "-m", "a large project"]);
    work
}

/// The objects the remote holds, loose and packed.
fn object_count(remote: &BareRemote) -> usize {
    remote
        .git(&["count-objects", "-v"])
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(": ")?;
            ["count", "in-pack"]
                .contains(&key)
                .then(|| value.parse::<usize>().unwrap())
        })
        .sum()
}

#[test]
fn a_ten_thousand_file_repository_is_frozen_sealed_landed_delivered_and_reported() {
    let (_tmp, dir) = sf_tests::private_dir();
    let remote = BareRemote::from_repository(&large_team_project(&dir));
    remote.count_pushes();
    let daemon = GitDaemon::start(remote.root());
    let url = daemon.url(remote.name());
    let source = remote.path().to_str().unwrap().to_owned();
    let work = Work::from_git_upstream_at(move |_| source, "main", Some(&url));
    let upstream = remote.read_ref("refs/heads/main").unwrap();
    assert_eq!(work.target(), upstream);

    // The freeze reads the base by path (the overlay's paths, the checks' entries).
    work.author_slice("slice", &[]);
    let frozen = work.freeze("slice").result().clone();
    assert_eq!(frozen["base"], upstream.as_str(), "{frozen}");

    let proposal = work.proposal(
        "fix",
        serde_json::json!({"edits": [{
            "path": "sum.sh",
            "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
            "text": SUM_FIXED,
        }]}),
    );
    let sealed = work.seal_file("slice", &proposal).result().clone();
    let candidate = sealed["digest"].as_str().unwrap().to_owned();

    let objects_before = object_count(&remote);
    let landed = work.land(&candidate, "slice", &["--deliver"]);
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated", "{result}");
    let observed = &result["delivery"]["observation"];
    assert_eq!(observed["invocation"], "confirmed", "{result}");
    let commit = observed["commit"].as_str().unwrap();
    assert_eq!(work.target(), commit);
    assert_eq!(remote.read_ref("refs/heads/main").unwrap(), commit);
    assert_eq!(remote.push_count(), 1);
    // The delivered commit is the base with the one edit: every generated file is there, and
    // the remote holds every object it names (the push sent only what changed).
    let listed = remote.git(&["ls-tree", "-r", "--name-only", commit]);
    assert_eq!(listed.lines().count(), FILES + 2);
    remote.git(&["fsck", "--connectivity-only", "--no-dangling"]);
    // M, its root tree, the new sum.sh and the marker tag: not ten thousand objects.
    let received = object_count(&remote) - objects_before;
    assert!(received <= 8, "the push sent {received} objects");
    assert_eq!(
        remote
            .git(&["show", &format!("{commit}:sum.sh")])
            .trim_end(),
        SUM_FIXED.trim_end()
    );

    let shown = work
        .sf(&[
            "show",
            &candidate,
            "--identity",
            "identity.json",
            "--slice",
            "slice",
        ])
        .result()
        .clone();
    assert_eq!(shown["verdict"]["outcome"], "verified", "{shown}");
    let list = work
        .sf(&["list", "--identity", "identity.json", "--slice", "slice"])
        .result()
        .clone();
    assert_eq!(list["candidates"].as_array().unwrap().len(), 1, "{list}");
    let report = work.dir.join("report.html");
    let reported = work
        .sf(&[
            "report",
            "--candidate",
            &candidate,
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--out",
            report.to_str().unwrap(),
        ])
        .result()
        .clone();
    assert_eq!(reported["outcome"], "verified", "{reported}");
    // sf export re-verifies the whole tree and writes it, streamed, past the 4,096 files a
    // snapshot holds.
    let out = work.dir.join("exported");
    let exported = work
        .sf(&[
            "export",
            "--identity",
            "identity.json",
            "--candidate",
            &candidate,
            "--out",
            out.to_str().unwrap(),
        ])
        .result()
        .clone();
    assert_eq!(exported["files"].as_array().unwrap().len(), FILES + 2);
    assert_eq!(
        std::fs::read_to_string(out.join("sum.sh")).unwrap(),
        SUM_FIXED
    );
    assert_eq!(
        std::fs::read_to_string(out.join("src/d042/f04200.txt")).unwrap(),
        "generated file 4200\n"
    );
    // The report shows the edited entry only, never the ten thousand others.
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(page.contains("sum.sh"), "the report names the edited file");
    assert!(
        !page.contains("f00042.txt"),
        "the report lists unedited files"
    );
}

#[test]
fn create_from_a_directory_reads_it_under_the_repositorys_own_max_files() {
    let (_tmp, dir) = sf_tests::private_dir();
    let source = dir.join("project");
    generate(&source, FILES);
    let create = |path: &str, extra: &[&str]| {
        let mut command = sf_tests::plugins::sf();
        command.current_dir(&dir).args([
            "--json",
            "repo",
            "create",
            "--path",
            path,
            "--product",
            "large",
            "--target",
            "refs/heads/main",
            "--from",
            "project",
        ]);
        command.args(extra);
        sf_tests::plugins::run_json(&mut command)
    };
    let refused = create("small.git", &["--max-files", "5000"]);
    assert_eq!(refused.error_code(), "invalid-input");
    let message = refused.error_message();
    assert!(message.contains("more than 5000 files"), "{message}");
    assert!(message.contains("too-many-files"), "{message}");
    assert!(message.contains("--max-files"), "{message}");
    assert!(
        !dir.join("small.git").exists(),
        "a refused create wrote nothing"
    );

    let created = create("large.git", &["--max-files", "20000"]);
    assert_eq!(created.result()["settings"]["maxFiles"], 20_000);
    let listed = git(
        &dir.join("large.git"),
        &["ls-tree", "-r", "--name-only", "refs/heads/main"],
    );
    assert_eq!(listed.lines().count(), FILES);
}

#[test]
fn a_freeze_whose_base_cannot_be_read_is_refused_and_writes_nothing() {
    let work = Work::unfrozen();
    let owned = work.dir.join("repo.git");
    let root = git(&owned, &["rev-parse", "refs/heads/main^{tree}"]);
    sf_tests::loosen_objects(&owned);
    std::fs::remove_file(owned.join("objects").join(&root[..2]).join(&root[2..])).unwrap();
    work.author_slice("slice", &[]);
    let refused = work.freeze("slice");
    assert_eq!(
        refused.error_code(),
        "corrupt",
        "{}",
        refused.error_message()
    );
    assert!(
        refused.error_message().contains("the repository's target"),
        "{}",
        refused.error_message()
    );
    assert!(
        !work.dir.join("slice/frozen").exists(),
        "a refused freeze wrote"
    );
}

#[test]
fn an_overlay_file_that_cannot_lie_over_the_base_is_refused_at_freeze() {
    let work = Work::from_git(|dir| team_project(dir).to_str().unwrap().to_owned(), "main");
    // The base holds the file README, outside the scope: nothing can lie beneath it.
    work.author_slice("slice", &[("overlay/README/notes.sh", "echo notes\n")]);
    let refused = work.freeze("slice");
    assert_eq!(refused.error_code(), "invalid-input");
    let message = refused.error_message();
    assert!(message.contains("README/notes.sh"), "{message}");
    assert!(message.contains("file-directory-clash"), "{message}");
    assert!(
        !work.dir.join("slice/frozen").exists(),
        "a refused freeze wrote"
    );
}
