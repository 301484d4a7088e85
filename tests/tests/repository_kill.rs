//! A seal killed with SIGKILL (in a child process) after its objects are written publishes
//! nothing; a later identical seal completes. Killed after publication, the Candidate is whole.

use std::os::unix::process::ExitStatusExt as _;
use std::process::Command;

use sf_host::repository::RepositoryError;
use sf_tests::{TestRepo, edit, frozen, proposal, seal_command, write_seal_inputs};

const FILES: &[(&str, &str)] = &[("src/a.txt", "alpha\n")];

fn seal_in_child(test: &TestRepo, kill_at: &str, tag: &str) -> std::process::Output {
    let work = test.parent.join(format!("work-{tag}"));
    std::fs::create_dir(&work).unwrap();
    let inputs = frozen(test.identity.initial, &["src"]);
    let edits = proposal(vec![edit(
        "src/a.txt",
        Some("alpha\n"),
        Some(&format!("{tag}\n")),
    )]);
    write_seal_inputs(&work, &test.identity, &inputs, &edits);
    seal_command(env!("CARGO_BIN_EXE_sf-test-child"), &work)
        .args(["--kill-at", kill_at])
        .output()
        .unwrap()
}

fn candidate_refs(test: &TestRepo) -> String {
    refs_under(test, "refs/sf/candidates/")
}

fn refs_under(test: &TestRepo, prefix: &str) -> String {
    let out = Command::new("git")
        .args([
            "--git-dir",
            test.path.to_str().unwrap(),
            "for-each-ref",
            prefix,
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_seal_killed_after_objects_are_written_publishes_nothing() {
    let test = TestRepo::git(FILES);
    let inputs = frozen(test.identity.initial, &["src"]);
    let edits = proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("killed\n"))]);
    let objects_before = count_objects(&test);
    let records_before = refs_under(&test, "refs/sf/trees/");
    let output = seal_in_child(&test, "objects-written", "killed");
    assert_eq!(
        output.status.signal(),
        Some(9),
        "child was not killed: {output:?}"
    );
    // Objects were written (the kill came after them) but no ref names them.
    assert!(
        count_objects(&test) > objects_before,
        "the child wrote no objects before it was killed"
    );
    assert_eq!(candidate_refs(&test), "");
    assert_eq!(
        refs_under(&test, "refs/sf/trees/"),
        records_before,
        "nor a tree record"
    );
    // The interrupted Candidate is not found, and a later identical seal completes it.
    let sealed = test.repo.seal(&inputs, &edits).unwrap();
    assert_eq!(
        test.repo.candidate_files(&sealed).unwrap()[0].content,
        b"killed\n"
    );
    assert_eq!(
        test.reopen().export_candidate(&sealed.digest).unwrap(),
        sealed
    );
    assert_eq!(candidate_refs(&test).lines().count(), 1);
}

#[test]
fn a_seal_killed_after_publication_left_a_whole_candidate() {
    let test = TestRepo::git(FILES);
    let output = seal_in_child(&test, "published", "published");
    assert_eq!(
        output.status.signal(),
        Some(9),
        "child was not killed: {output:?}"
    );
    let refs = candidate_refs(&test);
    assert_eq!(refs.lines().count(), 1);
    let hex = refs.trim().rsplit('/').next().unwrap();
    let digest = sf_host::canonical::Digest::parse(&format!("sha256:{hex}")).unwrap();
    let exported = test.repo.export_candidate(&digest).unwrap();
    assert_eq!(
        test.repo.candidate_files(&exported).unwrap()[0].content,
        b"published\n"
    );
}

#[test]
fn a_seal_that_never_started_leaves_the_candidate_missing() {
    let test = TestRepo::git(FILES);
    let error = test
        .repo
        .export_candidate(&sf_host::canonical::Digest::of(b"nothing"))
        .unwrap_err();
    assert!(matches!(error, RepositoryError::Missing { .. }), "{error}");
}

fn count_objects(test: &TestRepo) -> usize {
    sf_tests::stored_objects(&test.path)
}
