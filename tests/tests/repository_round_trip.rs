//! Round trips over the real git binary: create → seal → export returns the proposal's bytes
//! exactly; identical inputs replay one Candidate and write nothing; the same edits in another
//! repository give another digest; concurrent identical seals (threads and processes)
//! converge on one ref.

use std::process::Command;

use sf_host::canonical::Digest;
use sf_host::contracts::RefName;
use sf_host::contracts::tree_digest::{self, Node};
use sf_host::contracts::tree_path::EntryMode;
use sf_host::repository::{CANDIDATE_REF_PREFIX, CandidateProtocol, RepositoryError};
use sf_tests::{TestRepo, edit, frozen, proposal, seal_command, write_seal_inputs};

const FILES: &[(&str, &str)] = &[
    ("src/a.txt", "alpha\n"),
    ("src/b.txt", "beta\n"),
    ("README.md", "readme\n"),
];

fn candidate_refs(test: &TestRepo) -> Vec<String> {
    let out = Command::new("git")
        .args([
            "--git-dir",
            test.path.to_str().unwrap(),
            "for-each-ref",
            "--format=%(refname)",
            CANDIDATE_REF_PREFIX,
        ])
        .output()
        .expect("git for-each-ref");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn round_trip_returns_the_exact_bytes() {
    let test = TestRepo::git(FILES);
    let base = test.repo.snapshot(&test.identity.initial).unwrap();
    assert_eq!(
        base.files
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        ["README.md", "src/a.txt", "src/b.txt"]
    );
    let edits = proposal(vec![
        edit("src/a.txt", Some("alpha\n"), Some("ALPHA\u{e9}\n")),
        edit("src/b.txt", Some("beta\n"), None),
        edit(
            "src/new/c.txt",
            None,
            Some("gamma\r\n\ttabs and \"quotes\"\n"),
        ),
    ]);
    let sealed = test
        .repo
        .seal(&frozen(test.identity.initial, &["src"]), &edits)
        .unwrap();
    let files = test.repo.candidate_files(&sealed).unwrap();
    let got: Vec<(&str, &[u8])> = files
        .iter()
        .map(|f| (f.path.as_str(), f.content.as_slice()))
        .collect();
    assert_eq!(
        got,
        [
            ("README.md", "readme\n".as_bytes()),
            ("src/a.txt", "ALPHA\u{e9}\n".as_bytes()),
            (
                "src/new/c.txt",
                "gamma\r\n\ttabs and \"quotes\"\n".as_bytes()
            ),
        ]
    );
    assert_eq!(sealed.digest, Digest::of(&sealed.manifest_bytes));
    assert_eq!(sealed.manifest.protocol, CandidateProtocol::V4);
    let tree = tree_digest::build(files.iter().map(|f| {
        let node = match f.mode {
            EntryMode::Symlink => Node::Symlink {
                target: String::from_utf8(f.content.clone()).unwrap(),
            },
            mode => Node::file(mode == EntryMode::Executable, &f.content),
        };
        (f.path.as_str(), node)
    }))
    .unwrap();
    assert_eq!(sealed.content_digest(), Some(&tree.root.hash));
    assert_eq!(sealed.manifest.repository, test.identity);
    assert_eq!(sealed.manifest.base_commit, test.identity.initial);

    // A fresh handle exports the same bytes.
    let exported = test.reopen().export_candidate(&sealed.digest).unwrap();
    assert_eq!(exported, sealed);

    // The Candidate's M is a factory commit: a snapshot of it gives the same files, and it
    // can be the base of a further seal without being the target.
    let m = test.repo.snapshot(&sealed.manifest.commit).unwrap();
    assert_eq!(m.files.len(), 3);
    assert_eq!(test.repo.target().unwrap(), test.identity.initial);
    let next = test
        .repo
        .seal(
            &frozen(sealed.manifest.commit, &["README.md"]),
            &proposal(vec![edit("README.md", Some("readme\n"), Some("changed\n"))]),
        )
        .unwrap();
    assert_eq!(next.manifest.base_commit, sealed.manifest.commit);
    assert_eq!(candidate_refs(&test).len(), 2);

    // The real git binary agrees with every identity sf computed.
    let show = Command::new("git")
        .args([
            "--git-dir",
            test.path.to_str().unwrap(),
            "cat-file",
            "-p",
            &format!("{}:src/a.txt", sealed.manifest.commit),
        ])
        .output()
        .unwrap();
    assert_eq!(show.stdout, "ALPHA\u{e9}\n".as_bytes());
}

#[test]
fn identical_inputs_replay_one_candidate_and_write_nothing() {
    let test = TestRepo::git(FILES);
    let inputs = frozen(test.identity.initial, &["src"]);
    let edits = proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("one\n"))]);
    let first = test.repo.seal(&inputs, &edits).unwrap();
    let before = test.tree_hash();
    let again = test.repo.seal(&inputs, &edits).unwrap();
    let other_handle = test.reopen().seal(&inputs, &edits).unwrap();
    assert_eq!(first, again);
    assert_eq!(first, other_handle);
    assert_eq!(test.tree_hash(), before, "a replayed seal wrote something");
    assert_eq!(candidate_refs(&test).len(), 1);

    // Any change to the inputs is another Candidate.
    let mut other_inputs = inputs.clone();
    other_inputs.slice.revision = 2;
    let other = test.repo.seal(&other_inputs, &edits).unwrap();
    assert_ne!(other.digest, first.digest);
}

#[test]
fn the_same_edits_in_another_repository_give_another_digest() {
    let one = TestRepo::git(FILES);
    let two = TestRepo::git(FILES);
    let edits = proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("one\n"))]);
    let a = one
        .repo
        .seal(&frozen(one.identity.initial, &["src"]), &edits)
        .unwrap();
    let b = two
        .repo
        .seal(&frozen(two.identity.initial, &["src"]), &edits)
        .unwrap();
    assert_ne!(a.digest, b.digest);
    assert_eq!(
        one.repo.candidate_files(&a).unwrap(),
        two.repo.candidate_files(&b).unwrap()
    );
    assert_eq!(a.content_digest(), b.content_digest());
    // And a digest of one repository is not found in the other.
    let error = two.repo.export_candidate(&a.digest).unwrap_err();
    assert!(matches!(error, RepositoryError::Missing { .. }), "{error}");
}

#[test]
fn concurrent_identical_seals_in_threads_converge_on_one_ref() {
    let test = TestRepo::git(FILES);
    let inputs = frozen(test.identity.initial, &["src"]);
    let edits = proposal(vec![edit("src/x.txt", None, Some("x\n"))]);
    let handles: Vec<_> = (0..6).map(|_| test.reopen()).collect();
    let barrier = std::sync::Barrier::new(handles.len());
    let digests: Vec<Digest> = std::thread::scope(|scope| {
        let joins: Vec<_> = handles
            .iter()
            .map(|repo| {
                let (inputs, edits, barrier) = (&inputs, &edits, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    repo.seal(inputs, edits).map(|sealed| sealed.digest)
                })
            })
            .collect();
        joins
            .into_iter()
            .map(|join| join.join().unwrap().unwrap())
            .collect()
    });
    assert!(
        digests.windows(2).all(|pair| pair[0] == pair[1]),
        "{digests:?}"
    );
    assert_eq!(
        candidate_refs(&test),
        [
            RefName::parse(&format!("{CANDIDATE_REF_PREFIX}{}", digests[0].hex()))
                .unwrap()
                .to_string()
        ]
    );
}

#[test]
fn concurrent_identical_seals_in_processes_converge_on_one_ref() {
    let test = TestRepo::git(FILES);
    let work = test.parent.join("work");
    std::fs::create_dir(&work).unwrap();
    let inputs = frozen(test.identity.initial, &["src"]);
    let edits = proposal(vec![edit("src/y.txt", None, Some("y\n"))]);
    let go = work.join("go");
    let child = env!("CARGO_BIN_EXE_sf-test-child");
    write_seal_inputs(&work, &test.identity, &inputs, &edits);
    let children: Vec<_> = (0..4)
        .map(|_| {
            seal_command(child, &work)
                .arg("--wait-for")
                .arg(&go)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(&go, b"").unwrap();
    let outputs: Vec<String> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        })
        .collect();
    let expected = test.repo.seal(&inputs, &edits).unwrap().digest.to_string();
    assert!(
        outputs.iter().all(|digest| *digest == expected),
        "{outputs:?} vs {expected}"
    );
    assert_eq!(candidate_refs(&test).len(), 1);
}
