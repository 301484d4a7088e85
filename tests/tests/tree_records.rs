//! Sealing in proportion to the change, over the real git binary: a seal reads the base's
//! trees and tree record on the edited paths only (an unrelated directory whose objects are
//! gone does not stop it, though export, which re-verifies everything, refuses); every sealed
//! tree gets its record; a base without one is read whole once and recorded exactly as create
//! records it; a record that is corrupt, or another tree's, is refused and nothing is
//! published; and the quick check of the resulting tree never lets through what a whole check
//! refuses (a deletion that makes a link escape, a file over a directory that keeps files).

use std::path::{Path, PathBuf};

use sf_host::contracts::tree_path::EntryMode;
use sf_host::git_object::{self, ObjectId, ObjectKind};
use sf_host::repository::{
    FileEdit, InitialBase, RepositorySettings, SourceFile, tree_digest_of, tree_record_ref,
};
use sf_tests::{TestRepo, edit, frozen, git_factory, loosen_objects, proposal};

/// A base of two directories of `n` files each, `a/` flat and `b/` two levels deep.
fn two_directories(n: usize) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for i in 0..n {
        files.push((format!("a/{i:03}.txt"), format!("a {i}\n")));
        files.push((format!("b/c/{i:03}.txt"), format!("b {i}\n")));
    }
    files
}

fn repo_of(files: &[(String, String)]) -> TestRepo {
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    TestRepo::git(&borrowed)
}

fn loose(test: &TestRepo, id: &ObjectId) -> PathBuf {
    let hex = id.to_hex();
    test.path.join("objects").join(&hex[..2]).join(&hex[2..])
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn candidate_refs(test: &TestRepo) -> String {
    git(&test.path, &["for-each-ref", "refs/sf/candidates/"])
}

fn initial_tree(test: &TestRepo) -> ObjectId {
    test.repo.snapshot(&test.identity.initial).unwrap().tree
}

/// Replaces the loose object `id` by another object's bytes: present to Git, corrupt to
/// anyone who re-hashes what they read.
fn corrupt(test: &TestRepo, id: &ObjectId) {
    use std::io::Write as _;
    let raw = git_object::object_header(ObjectKind::Blob, 3)
        .into_iter()
        .chain(*b"bad")
        .collect::<Vec<u8>>();
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&raw).unwrap();
    let path = loose(test, id);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, encoder.finish().unwrap()).unwrap();
}

#[test]
fn a_seal_reads_only_the_edited_paths() {
    let test = repo_of(&two_directories(40));
    loosen_objects(&test.path);
    // Everything below b/ is corrupt: b/c and every blob. (Git still finds each object, and
    // b itself stays a tree, so Git's own check of the new pack, which looks at the objects
    // the pack names, passes.)
    let b = git(
        &test.path,
        &["rev-parse", &format!("{}:b", test.identity.initial)],
    );
    let mut corrupted = 0;
    for line in git(&test.path, &["ls-tree", "-r", "-t", &b]).lines() {
        let id = ObjectId::parse_hex(line.split_whitespace().nth(2).unwrap()).unwrap();
        corrupt(&test, &id);
        corrupted += 1;
    }
    assert_eq!(corrupted, 41, "b/c and its 40 files");
    let sealed = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["a"]),
            &proposal(vec![edit("a/007.txt", Some("a 7\n"), Some("seven\n"))]),
        )
        .expect("a seal needs nothing below b/");
    // The Candidate's tree keeps b/ by its id.
    assert_eq!(
        git(
            &test.path,
            &["rev-parse", &format!("{}:b", sealed.manifest.commit)]
        ),
        b
    );
    // Export re-verifies everything, so it finds what is missing, and repairs nothing.
    let error = test.repo.export_candidate(&sealed.digest).unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
}

#[test]
fn every_sealed_tree_has_its_record_and_a_candidate_is_a_base() {
    let files = two_directories(5);
    let test = repo_of(&files);
    assert!(
        test.path
            .join(tree_record_ref(&initial_tree(&test)).as_str())
            .exists(),
        "create records the first base"
    );
    let first = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["a", "b"]),
            &proposal(vec![
                edit("a/001.txt", Some("a 1\n"), None),
                edit("b/c/d/new.txt", None, Some("new\n")),
            ]),
        )
        .unwrap();
    assert!(
        test.path
            .join(tree_record_ref(&first.manifest.tree).as_str())
            .exists()
    );
    // The digests the manifest names are the trees' own, computed from their bytes.
    let digest_of =
        |commit: &ObjectId| tree_digest_of(&test.repo.snapshot(commit).unwrap().files).unwrap();
    assert_eq!(
        first.content_digest(),
        Some(&digest_of(&first.manifest.commit))
    );
    let second = test
        .repo
        .seal(
            &frozen(first.manifest.commit, &["b"]),
            &proposal(vec![edit("b/c/d/new.txt", Some("new\n"), Some("newer\n"))]),
        )
        .unwrap();
    assert_eq!(
        second.content_digest(),
        Some(&digest_of(&second.manifest.commit))
    );
    for sealed in [&first, &second] {
        assert_eq!(test.repo.export_candidate(&sealed.digest).unwrap(), *sealed);
    }
    git(&test.path, &["fsck", "--strict", "--no-dangling"]);
}

#[test]
fn a_base_without_a_record_is_read_whole_once_and_recorded_as_create_records_it() {
    let test = repo_of(&two_directories(5));
    let tree = initial_tree(&test);
    let ref_file = test.path.join(tree_record_ref(&tree).as_str());
    let created = std::fs::read(&ref_file).unwrap();
    // A repository written before records: the base has none.
    std::fs::remove_file(&ref_file).unwrap();
    let inputs = frozen(test.identity.initial, &["a"]);
    // A rejected proposal still writes nothing, the derived record included.
    let before = test.tree_hash();
    let rejected = test
        .repo
        .seal(
            &inputs,
            &proposal(vec![edit("a/000.txt", Some("not the text\n"), Some("x\n"))]),
        )
        .unwrap_err();
    assert_eq!(rejected.code(), "rejected");
    assert_eq!(
        test.tree_hash(),
        before,
        "a rejected proposal wrote something"
    );
    let sealed = test
        .repo
        .seal(
            &inputs,
            &proposal(vec![edit("a/000.txt", Some("a 0\n"), Some("zero\n"))]),
        )
        .unwrap();
    assert_eq!(
        std::fs::read(&ref_file).unwrap(),
        created,
        "the derived record is the one create wrote"
    );
    assert_eq!(test.repo.export_candidate(&sealed.digest).unwrap(), sealed);
}

/// The root node blob of the record of `tree`.
fn root_node(test: &TestRepo, tree: &ObjectId) -> ObjectId {
    let record = git(&test.path, &["rev-parse", tree_record_ref(tree).as_str()]);
    ObjectId::parse_hex(&git(&test.path, &["rev-parse", &format!("{record}:n")])).unwrap()
}

#[test]
fn a_corrupt_or_misplaced_record_is_refused_and_nothing_is_published() {
    let test = repo_of(&two_directories(5));
    let tree = initial_tree(&test);
    let inputs = frozen(test.identity.initial, &["a"]);
    let edits = proposal(vec![edit("a/000.txt", Some("a 0\n"), Some("zero\n"))]);
    // Another tree's record (a Candidate's), named as this tree's.
    let other = test
        .repo
        .seal(
            &inputs,
            &proposal(vec![edit("a/001.txt", Some("a 1\n"), Some("one\n"))]),
        )
        .unwrap();
    let ref_file = test.path.join(tree_record_ref(&tree).as_str());
    let genuine = std::fs::read(&ref_file).unwrap();
    let foreign = std::fs::read(
        test.path
            .join(tree_record_ref(&other.manifest.tree).as_str()),
    )
    .unwrap();
    std::fs::write(&ref_file, &foreign).unwrap();
    let before = candidate_refs(&test);
    let error = test.repo.seal(&inputs, &edits).unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(error.to_string().contains("refs/sf/trees/"), "{error}");
    assert_eq!(candidate_refs(&test), before);
    std::fs::write(&ref_file, &genuine).unwrap();

    // A node whose bytes were replaced (by an object of another id's bytes).
    loosen_objects(&test.path);
    corrupt(&test, &root_node(&test, &tree));
    let before = test.tree_hash();
    let error = test.repo.seal(&inputs, &edits).unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert_eq!(test.tree_hash(), before, "a refused seal wrote something");
    assert_eq!(candidate_refs(&test).lines().count(), 1, "only the first");
}

#[test]
fn the_quick_check_lets_through_nothing_a_whole_check_refuses() {
    let files: Vec<SourceFile> = vec![
        SourceFile::text("d/f", "f\n"),
        SourceFile::text("d/other", "o\n"),
        // Resolves by stopping at the file d/f; with d/f gone it would leave the tree.
        SourceFile::new("d/l".into(), EntryMode::Symlink, b"f/../../..".to_vec()),
        SourceFile::text("e/x", "x\n"),
        SourceFile::text("e/y", "y\n"),
    ];
    let test = TestRepo::create_with(
        git_factory(),
        "product-1",
        InitialBase::Files(files),
        RepositorySettings::default(),
    );
    let inputs = frozen(test.identity.initial, &["d", "e"]);
    let before = test.tree_hash();
    let refused = |edits: Vec<FileEdit>, code: &str| {
        let error = test.repo.seal(&inputs, &proposal(edits)).unwrap_err();
        assert_eq!(error.code(), "rejected", "{error}");
        assert!(error.to_string().contains(code), "{code}: {error}");
        assert_eq!(test.tree_hash(), before);
    };
    refused(vec![edit("d/f", Some("f\n"), None)], "link-escapes");
    // A file over a directory whose files are not all deleted.
    refused(
        vec![
            edit("e/x", Some("x\n"), None),
            edit("e", None, Some("file\n")),
        ],
        "file-directory-clash",
    );
    // A new name beside one that differs only in case.
    refused(vec![edit("d/F", None, Some("F\n"))], "case-collision");
    // And what keeps the rules is sealed: the directory wholly replaced by a file.
    let sealed = test
        .repo
        .seal(
            &inputs,
            &proposal(vec![
                edit("e/x", Some("x\n"), None),
                edit("e/y", Some("y\n"), None),
                edit("e", None, Some("file\n")),
            ]),
        )
        .unwrap();
    assert_eq!(test.repo.export_candidate(&sealed.digest).unwrap(), sealed);
}
