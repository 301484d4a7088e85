//! Later bases (`Repository::import_base`) over the real git binary: a later commit of
//! psf/requests (cloned from the fixture bundle) is imported into a repository created from
//! an older one with its commit id and tree id, and a Candidate is sealed on it; a replay
//! writes nothing; `advance` moves the target once and only forward, and a target that moved
//! meanwhile is a conflict; a tree the model or the repository's settings cannot hold is
//! refused whole with nothing written; a forged import record never makes a commit a factory
//! commit; an unconfirmed move is unknown and never retried.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sf_host::contracts::RefValue;
use sf_host::fault::FaultPoint;
use sf_host::git_object::{EntryMode, ObjectId, ObjectKind, TreeEntry, encode_tree, object_id};
use sf_host::git_source::{GitSourceError, import_git_base, read_git_commit};
use sf_host::repository::{
    IDENT, IMPORT_RECORD_NAME, ImportBase, ImportError, ImportRecord, InitialBase, Invocation,
    RepositoryError, RepositoryOptions, RepositorySettings, TargetMove, import_message, import_ref,
    open_repository,
};
use sf_tests::{TestRepo, clone_fixture, edit, frozen, payload, private_dir, proposal, tree_hash};

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    sf_tests::plain_git(dir, args, &[])
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap().trim().to_owned()
}

fn id(hex: &str) -> ObjectId {
    ObjectId::parse_hex(hex).unwrap()
}

/// An owned repository over git-cli whose first base is `rev` of `source`, with `settings`.
fn create_from(source: &Path, rev: &str, settings: RepositorySettings) -> TestRepo {
    let imported = read_git_commit(source, rev, &settings.limits(), settings.policy())
        .unwrap_or_else(|error| panic!("reading {rev}: {error}"));
    TestRepo::create_with(
        sf_tests::git_factory(),
        "requests",
        InitialBase::Imported(imported),
        settings,
    )
}

fn request(source: &Path, rev: &str, advance: bool) -> ImportBase {
    ImportBase {
        source: source.to_str().unwrap().to_owned(),
        rev: rev.to_owned(),
        advance,
    }
}

/// Every ref of the owned repository with what it names.
fn refs(test: &TestRepo) -> String {
    text(git(
        &test.path,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    ))
}

/// A work tree at `root/name` whose commits are `commits`, each a list of (path, bytes);
/// returns it and the commits' ids, oldest first.
fn make_source(
    root: &Path,
    name: &str,
    commits: &[&[(&str, &str)]],
) -> (std::path::PathBuf, Vec<String>) {
    let dir = root.join(name);
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    let mut ids = Vec::new();
    for (at, files) in commits.iter().enumerate() {
        for (path, bytes) in *files {
            let file = dir.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, bytes).unwrap();
        }
        git(&dir, &["add", "-A"]);
        git(
            &dir,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("commit {at}"),
            ],
        );
        ids.push(text(git(&dir, &["rev-parse", "HEAD"])));
    }
    (dir, ids)
}

#[test]
fn a_later_commit_of_requests_is_imported_exactly_and_a_candidate_is_sealed_on_it() {
    let (_dir, root) = private_dir();
    let (clone, commits) = clone_fixture(&root, "requests.bundle");
    // Two commits of February and April 2011, 39 first-parent commits and several merges
    // apart.
    let (older, later) = (&commits[2620], &commits[2581]);
    let test = create_from(&clone, older, RepositorySettings::default());

    let imported = import_git_base(&test.repo, &request(&clone, later, false)).unwrap();
    let record = &imported.record;
    assert_eq!(record.commit.to_hex(), *later);
    assert_eq!(
        record.tree.to_hex(),
        text(git(&clone, &["rev-parse", &format!("{later}^{{tree}}")]))
    );
    assert_eq!(
        (
            record.product.as_str(),
            record.source.as_str(),
            record.rev.as_str()
        ),
        ("requests", clone.to_str().unwrap(), later.as_str())
    );
    assert!(!record.advance && !imported.replayed);
    assert_eq!(imported.target, TargetMove::NotAsked);
    assert_eq!(imported.record_ref, import_ref(&record.commit));
    assert_eq!(
        test.repo.target().unwrap().to_hex(),
        *older,
        "the target never moved"
    );

    // The owned copy is the source's commit, byte for byte, with the source's tree.
    assert_eq!(
        git(&test.path, &["cat-file", "commit", later]),
        git(&clone, &["cat-file", "commit", later])
    );
    assert_eq!(
        git(&test.path, &["ls-tree", "-r", later]),
        git(&clone, &["ls-tree", "-r", later])
    );
    // The record is what the ref names: sf's commit over {import.json}, parent the import.
    let record_commit = imported.record_commit.to_hex();
    assert_eq!(
        text(git(
            &test.path,
            &["rev-parse", imported.record_ref.as_str()]
        )),
        record_commit
    );
    assert_eq!(
        text(git(
            &test.path,
            &["rev-parse", &format!("{record_commit}^")]
        )),
        *later
    );
    assert_eq!(
        git(
            &test.path,
            &[
                "cat-file",
                "blob",
                &format!("{record_commit}:{IMPORT_RECORD_NAME}")
            ]
        ),
        record.to_bytes()
    );
    // Its parents stay in the team's repository: Git reads the history as beginning there.
    assert_eq!(
        text(git(&test.path, &["log", "--format=%H", later])),
        *later
    );
    git(&test.path, &["fsck", "--strict", "--no-dangling", later]);

    // A factory commit: its snapshot is its tree, and a Candidate is sealed on it.
    let base = test.repo.snapshot(&record.commit).unwrap();
    assert_eq!(base.tree, record.tree);
    assert_eq!(base.files.len(), 23);
    let core = base
        .files
        .iter()
        .find(|file| file.path == "requests/core.py")
        .unwrap();
    let prior = core.as_text().unwrap().to_owned();
    let changed = format!("{prior}# sealed on an imported base\n");
    let sealed = test
        .repo
        .seal(
            &frozen(record.commit, &["requests"]),
            &proposal(vec![edit("requests/core.py", Some(&prior), Some(&changed))]),
        )
        .unwrap();
    assert_eq!(sealed.manifest.base_commit, record.commit);
    let candidate = sealed.manifest.commit.to_hex();
    assert_eq!(
        text(git(&test.path, &["rev-parse", &format!("{candidate}^")])),
        *later,
        "M's parent is the imported commit"
    );
    assert_eq!(test.repo.export_candidate(&sealed.digest).unwrap(), sealed);

    // An exact replay returns the same record and writes nothing.
    let before = tree_hash(&test.path);
    let again = import_git_base(&test.repo, &request(&clone, later, false)).unwrap();
    assert!(again.replayed);
    assert_eq!(
        (&again.record, again.record_commit),
        (record, imported.record_commit)
    );
    assert_eq!(tree_hash(&test.path), before, "a replay wrote something");
    // Another handle reads it the same way.
    assert_eq!(test.reopen().snapshot(&record.commit).unwrap(), base);
}

#[test]
fn the_target_follows_the_source_forward_once_and_a_moved_target_is_a_conflict() {
    let (_dir, root) = private_dir();
    let (clone, commits) = clone_fixture(&root, "requests.bundle");
    // Today's requests (executables, symbolic links): the tip follows an older commit.
    let (older, tip) = (&commits[7], &commits[0]);
    let test = create_from(&clone, older, RepositorySettings::default());
    let moved = import_git_base(&test.repo, &request(&clone, "main", true)).unwrap();
    assert_eq!(moved.record.commit.to_hex(), *tip);
    assert!(moved.record.advance);
    assert_eq!(moved.target, TargetMove::Moved { from: id(older) });
    assert_eq!(test.repo.target().unwrap().to_hex(), *tip);
    assert_eq!(
        text(git(&test.path, &["rev-parse", "refs/heads/main^{tree}"])),
        text(git(&clone, &["rev-parse", "main^{tree}"]))
    );
    git(
        &test.path,
        &["fsck", "--strict", "--no-dangling", "refs/heads/main"],
    );
    // A Candidate is sealed on today's tree, its executable and links kept, as a child of it.
    let readme = String::from_utf8(git(&clone, &["show", "main:README.md"])).unwrap();
    let sealed = test
        .repo
        .seal(
            &frozen(id(tip), &["README.md"]),
            &proposal(vec![edit(
                "README.md",
                Some(&readme),
                Some(&format!("{readme}sealed on the imported tip\n")),
            )]),
        )
        .unwrap();
    let candidate = sealed.manifest.commit.to_hex();
    assert_eq!(
        text(git(&test.path, &["rev-parse", &format!("{candidate}^")])),
        *tip
    );
    let unlike_files = |rev: &str| {
        text(git(&test.path, &["ls-tree", "-r", rev]))
            .lines()
            .filter(|line| !line.starts_with("100644"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(unlike_files(&candidate), unlike_files(tip));
    assert!(
        unlike_files(tip)
            .iter()
            .any(|line| line.starts_with("120000"))
    );

    // Once: the same import again writes nothing and moves nothing.
    let before = tree_hash(&test.path);
    let again = import_git_base(&test.repo, &request(&clone, "main", true)).unwrap();
    assert!(again.replayed);
    assert_eq!(again.target, TargetMove::AlreadyThere);
    assert_eq!(tree_hash(&test.path), before);

    // Never backwards: an older commit does not descend from the target. Refused before
    // anything is written, naming both commits.
    let error = import_git_base(&test.repo, &request(&clone, &commits[3], true)).unwrap_err();
    assert_eq!(error.code(), "conflict");
    let message = error.to_string();
    assert!(
        message.contains(tip) && message.contains(&commits[3]),
        "{message}"
    );
    assert_eq!(
        tree_hash(&test.path),
        before,
        "a refused import wrote something"
    );
    // Without --advance the same commit is imported, and the target stays.
    let kept = import_git_base(&test.repo, &request(&clone, &commits[3], false)).unwrap();
    assert_eq!(kept.target, TargetMove::NotAsked);
    assert_eq!(test.repo.target().unwrap().to_hex(), *tip);
    // A record is written once: the same commit asked with --advance now is another record.
    let error = import_git_base(&test.repo, &request(&clone, &commits[3], true)).unwrap_err();
    assert_eq!(error.code(), "conflict");
    assert!(
        error.to_string().contains("advance false, not true"),
        "{error}"
    );
}

#[test]
fn a_target_that_moves_meanwhile_refuses_the_move_and_older_candidates_stay_stale() {
    let (_dir, root) = private_dir();
    let (source, ids) = make_source(
        &root,
        "source",
        &[
            &[("src/a.txt", "a0\n")],
            &[("src/a.txt", "a1\n")],
            &[("src/a.txt", "a2\n")],
        ],
    );
    let test = create_from(&source, &ids[0], RepositorySettings::default());
    // A Candidate sealed on the first base, prepared for integration before anything moves.
    let sealed = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("a0\n"), Some("mine\n"))]),
        )
        .unwrap();
    let prepared = test
        .repo
        .prepare_integration(&payload(&test.identity, &sealed, "deliver", 1))
        .unwrap();

    // While the import of ids[2] publishes its record, another import moves the target to
    // ids[1]: the compare-and-swap from ids[0] is refused and nothing moves.
    let raced = open_repository(
        test.factory.as_ref(),
        &test.identity,
        RepositoryOptions {
            faults: Arc::new({
                let other = test.reopen();
                let source_path = source.clone();
                let middle = ids[1].clone();
                let first = id(&ids[0]);
                let fired = AtomicBool::new(false);
                move |point: FaultPoint| {
                    if point == FaultPoint::Published && !fired.swap(true, Ordering::SeqCst) {
                        let moved =
                            import_git_base(&other, &request(&source_path, &middle, true)).unwrap();
                        assert_eq!(moved.target, TargetMove::Moved { from: first });
                    }
                }
            }),
            ..RepositoryOptions::default()
        },
    )
    .unwrap();
    let imported = import_git_base(&raced, &request(&source, &ids[2], true)).unwrap();
    assert!(!imported.replayed, "the record is published");
    assert_eq!(
        imported.target,
        TargetMove::Conflict {
            expected: id(&ids[0]),
            current: Some(RefValue::Direct(id(&ids[1]))),
        }
    );
    assert_eq!(test.repo.target().unwrap().to_hex(), ids[1]);
    // Importing it again (a replay, nothing written) moves the target on from where it is.
    let again = import_git_base(&test.repo, &request(&source, &ids[2], true)).unwrap();
    assert!(again.replayed);
    assert_eq!(again.target, TargetMove::Moved { from: id(&ids[1]) });

    // The Candidate sealed on the first base still exports, and integration refuses it: the
    // target no longer names its base.
    assert_eq!(test.repo.export_candidate(&sealed.digest).unwrap(), sealed);
    let observation = test
        .repo
        .invoke_once(&prepared, &sf_tests::assumed(&prepared), None)
        .unwrap();
    assert_eq!(observation.invocation, Invocation::NotDispatched);
    assert_eq!(test.repo.target().unwrap().to_hex(), ids[2]);
}

#[test]
fn advance_refuses_a_target_outside_the_source_history_and_writes_nothing() {
    let (_dir, root) = private_dir();
    let (source, ids) = make_source(
        &root,
        "source",
        &[&[("src/a.txt", "a0\n")], &[("src/a.txt", "a1\n")]],
    );
    let test = create_from(&source, &ids[0], RepositorySettings::default());
    // A Candidate lands: the target names M, which the source does not hold.
    let sealed = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("a0\n"), Some("landed\n"))]),
        )
        .unwrap();
    let prepared = test
        .repo
        .prepare_integration(&payload(&test.identity, &sealed, "deliver", 1))
        .unwrap();
    assert_eq!(
        test.repo
            .invoke_once(&prepared, &sf_tests::assumed(&prepared), None)
            .unwrap()
            .invocation,
        Invocation::Confirmed
    );
    let landed = sealed.manifest.commit;
    let before = (tree_hash(&test.path), refs(&test));
    let error = import_git_base(&test.repo, &request(&source, &ids[1], true)).unwrap_err();
    assert!(
        matches!(
            error,
            ImportError::Repository(RepositoryError::Conflict { .. })
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&landed.to_hex()) && message.contains(&ids[1]),
        "the conflict names both commits: {message}"
    );
    assert_eq!((tree_hash(&test.path), refs(&test)), before);
    assert_eq!(test.repo.target().unwrap(), landed);
}

#[test]
fn a_tree_the_model_or_the_settings_cannot_hold_is_refused_whole_and_nothing_is_written() {
    let (_dir, root) = private_dir();
    let (source, ids) = make_source(
        &root,
        "source",
        &[
            &[("README", "a\n")],
            &[("readme", "b\n"), ("big.txt", "more than sixteen bytes\n")],
        ],
    );
    std::os::unix::fs::symlink("../../outside", source.join("escape")).unwrap();
    git(&source, &["add", "-A"]);
    git(
        &source,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},sub", ids[0]),
        ],
    );
    git(&source, &["commit", "-q", "-m", "unholdable"]);
    let settings = RepositorySettings {
        max_file_bytes: 16,
        ..RepositorySettings::default()
    };
    let test = create_from(&source, &ids[0], settings);
    let before = (tree_hash(&test.path), refs(&test));
    let error = import_git_base(&test.repo, &request(&source, "HEAD", true)).unwrap_err();
    assert_eq!(error.code(), "unsupported-source");
    let ImportError::Source(GitSourceError::Unsupported(faults)) = &error else {
        panic!("{error:?}");
    };
    let listed: Vec<(&str, &str)> = faults
        .iter()
        .map(|fault| (fault.path.as_str(), fault.reason.code()))
        .collect();
    assert_eq!(
        listed,
        [
            ("big.txt", "file-too-large"),
            ("escape", "link-escapes"),
            ("readme", "case-collision"),
            ("sub", "unsupported-entry"),
        ],
        "every path at fault, an entry's and the tree rules', with the repository's own limit"
    );
    assert_eq!(
        (tree_hash(&test.path), refs(&test)),
        before,
        "nothing is written"
    );

    // The same names in a repository created to hold them (case collisions allowed, the
    // default file size) import.
    let (_dir2, root2) = private_dir();
    let (linux, linux_ids) = make_source(
        &root2,
        "linux-only",
        &[&[("README", "a\n")], &[("readme", "b\n")]],
    );
    let default = create_from(&linux, &linux_ids[0], RepositorySettings::default());
    let error = import_git_base(&default.repo, &request(&linux, "HEAD", false)).unwrap_err();
    assert_eq!(error.code(), "unsupported-source");
    let allowing = create_from(
        &linux,
        &linux_ids[0],
        RepositorySettings {
            allow_case_collisions: true,
            ..RepositorySettings::default()
        },
    );
    let imported = import_git_base(&allowing.repo, &request(&linux, "HEAD", false)).unwrap();
    let paths: Vec<String> = allowing
        .repo
        .snapshot(&imported.record.commit)
        .unwrap()
        .files
        .into_iter()
        .map(|file| file.path)
        .collect();
    assert_eq!(paths, ["README", "readme"]);
}

#[test]
fn concurrent_identical_imports_converge_and_move_the_target_once() {
    let (_dir, root) = private_dir();
    let (source, ids) = make_source(
        &root,
        "source",
        &[&[("src/a.txt", "a0\n")], &[("src/a.txt", "a1\n")]],
    );
    let test = create_from(&source, &ids[0], RepositorySettings::default());
    let barrier = std::sync::Barrier::new(4);
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let repo = test.reopen();
                let (barrier, source, rev) = (&barrier, &source, &ids[1]);
                scope.spawn(move || {
                    barrier.wait();
                    import_git_base(&repo, &request(source, rev, true)).unwrap()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    let record_commits: std::collections::BTreeSet<ObjectId> = outcomes
        .iter()
        .map(|outcome| outcome.record_commit)
        .collect();
    assert_eq!(record_commits.len(), 1, "one record");
    let moved = outcomes
        .iter()
        .filter(|outcome| matches!(outcome.target, TargetMove::Moved { .. }))
        .count();
    assert_eq!(moved, 1, "the target moved once: {outcomes:?}");
    assert!(
        outcomes.iter().all(|outcome| matches!(
            outcome.target,
            TargetMove::Moved { .. } | TargetMove::AlreadyThere
        )),
        "{outcomes:?}"
    );
    assert_eq!(test.repo.target().unwrap().to_hex(), ids[1]);
    assert_eq!(
        text(git(
            &test.path,
            &["for-each-ref", "--format=%(objectname)", "refs/sf/imports/"]
        )),
        record_commits.first().unwrap().to_hex()
    );
}

#[test]
fn an_import_stopped_before_its_record_is_published_publishes_nothing() {
    let (_dir, root) = private_dir();
    let (source, ids) = make_source(
        &root,
        "source",
        &[&[("src/a.txt", "a0\n")], &[("src/a.txt", "a1\n")]],
    );
    let test = create_from(&source, &ids[0], RepositorySettings::default());
    let stopping = open_repository(
        test.factory.as_ref(),
        &test.identity,
        RepositoryOptions {
            faults: Arc::new(|point: FaultPoint| {
                if point == FaultPoint::ObjectsWritten {
                    panic!("stopped at objects-written");
                }
            }),
            ..RepositoryOptions::default()
        },
    )
    .unwrap();
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        import_git_base(&stopping, &request(&source, &ids[1], true))
    }));
    assert!(stopped.is_err(), "the hook stops the import");
    // The objects are written; no record names them, so the commit is no factory commit and
    // the target did not move.
    let commit = id(&ids[1]);
    assert_eq!(
        text(git(&test.path, &["cat-file", "-t", &ids[1]])),
        "commit"
    );
    assert_eq!(
        test.repo.snapshot(&commit).unwrap_err().code(),
        "invalid-input"
    );
    assert_eq!(test.repo.target().unwrap().to_hex(), ids[0]);
    assert_eq!(
        text(git(&test.path, &["for-each-ref", "refs/sf/imports/"])),
        ""
    );
    // The same import again completes it.
    let completed = import_git_base(&test.repo, &request(&source, &ids[1], true)).unwrap();
    assert!(!completed.replayed);
    assert_eq!(completed.target, TargetMove::Moved { from: id(&ids[0]) });
    assert_eq!(
        test.repo.snapshot(&commit).unwrap().tree,
        completed.record.tree
    );
}

/// Writes `body` as an object of `kind` into the owned repository with plain Git (as someone
/// with write access to it could) and returns its id.
fn plant(test: &TestRepo, kind: ObjectKind, body: &[u8]) -> ObjectId {
    let planted = text(sf_tests::plain_git(
        &test.path,
        &["hash-object", "-t", kind.as_str(), "-w", "--stdin"],
        body,
    ));
    assert_eq!(planted, object_id(kind, body).to_hex());
    id(&planted)
}

/// A record commit for `commit` holding `record_bytes` as `import.json` (and `extra`, if
/// any), with `message`, in sf's form otherwise; planted, its id returned.
fn plant_record(
    test: &TestRepo,
    commit: ObjectId,
    record_bytes: &[u8],
    extra: Option<&str>,
    message: &str,
) -> ObjectId {
    let blob = plant(test, ObjectKind::Blob, record_bytes);
    let mut entries = vec![TreeEntry {
        mode: EntryMode::File,
        name: IMPORT_RECORD_NAME.into(),
        id: blob,
    }];
    if let Some(name) = extra {
        entries.push(TreeEntry {
            mode: EntryMode::File,
            name: name.into(),
            id: blob,
        });
    }
    let tree = plant(test, ObjectKind::Tree, &encode_tree(&entries));
    let body =
        format!("tree {tree}\nparent {commit}\nauthor {IDENT}\ncommitter {IDENT}\n\n{message}");
    plant(test, ObjectKind::Commit, body.as_bytes())
}

#[test]
fn a_forged_import_record_never_makes_a_commit_a_factory_commit() {
    let (_dir, root) = private_dir();
    let (source, ids) = make_source(
        &root,
        "source",
        &[&[("src/a.txt", "a0\n")], &[("src/a.txt", "a1\n")]],
    );
    let test = create_from(&source, &ids[0], RepositorySettings::default());
    let genuine = import_git_base(&test.repo, &request(&source, &ids[1], false)).unwrap();
    // A commit someone wrote into the owned repository with plain Git: not a factory commit.
    let planted = id(&text(git(
        &test.path,
        &[
            "commit-tree",
            &genuine.record.tree.to_hex(),
            "-p",
            &ids[1],
            "-m",
            "planted",
        ],
    )));
    let seal_on = |base: ObjectId| {
        test.repo.seal(
            &frozen(base, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("a1\n"), Some("forged\n"))]),
        )
    };
    assert_eq!(
        test.repo.snapshot(&planted).unwrap_err().code(),
        "invalid-input"
    );

    let name = import_ref(&planted);
    let record = ImportRecord {
        commit: planted,
        ..genuine.record.clone()
    };
    let canonical = record.to_bytes();
    let spaced = String::from_utf8(canonical.clone())
        .unwrap()
        .replacen(':', ": ", 1);
    let other_product = ImportRecord {
        product: "another".into(),
        ..record.clone()
    };
    let other_tree = ImportRecord {
        tree: object_id(ObjectKind::Tree, &encode_tree(&[])),
        ..record.clone()
    };
    let message = import_message();
    let forgeries: Vec<(&str, ObjectId)> = vec![
        (
            "the genuine record of another commit",
            genuine.record_commit,
        ),
        ("the commit itself", planted),
        (
            "a record that is not canonical JSON",
            plant_record(&test, planted, spaced.as_bytes(), None, &message),
        ),
        (
            "a record of another Product",
            plant_record(&test, planted, &other_product.to_bytes(), None, &message),
        ),
        (
            "a record naming another tree",
            plant_record(&test, planted, &other_tree.to_bytes(), None, &message),
        ),
        (
            "a record commit with another message",
            plant_record(&test, planted, &canonical, None, "sf-import/1 forged\n"),
        ),
        (
            "a record tree holding another file",
            plant_record(&test, planted, &canonical, Some("more.json"), &message),
        ),
    ];
    for (what, forged) in &forgeries {
        git(&test.path, &["update-ref", name.as_str(), &forged.to_hex()]);
        let error = test.repo.snapshot(&planted).unwrap_err();
        assert_eq!(error.code(), "corrupt", "{what}: {error}");
        let error = seal_on(planted).unwrap_err();
        assert_eq!(error.code(), "corrupt", "{what}: sealing on it: {error}");
        git(&test.path, &["update-ref", "-d", name.as_str()]);
    }
    git(
        &test.path,
        &["symbolic-ref", name.as_str(), genuine.record_ref.as_str()],
    );
    assert_eq!(test.repo.snapshot(&planted).unwrap_err().code(), "corrupt");
    git(
        &test.path,
        &["update-ref", "--no-deref", "-d", name.as_str()],
    );

    // The control: the same record in exactly sf's form is read as sf's own, so each case
    // above fails for its own fault (only the ref, the form and the bytes are evidence).
    let exact = plant_record(&test, planted, &canonical, None, &message);
    assert_eq!(exact, record.objects().1);
    git(&test.path, &["update-ref", name.as_str(), &exact.to_hex()]);
    assert_eq!(test.repo.snapshot(&planted).unwrap().tree, record.tree);
    assert!(seal_on(planted).is_ok());
}

mod unknown {
    //! A compare-and-swap whose outcome the store cannot confirm, faked over the in-memory
    //! store (the fault cannot be made for real): the move is reported unknown, the record
    //! stays published, and the update is submitted exactly once.

    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use sf_host::contracts::tree_path::TreePolicy;
    use sf_host::contracts::{ObjectStore, RefUpdate, StoreRoot};
    use sf_host::git_object::{EntryMode, ObjectId, ObjectKind, TreeEntry, encode_tree, object_id};
    use sf_host::repository::{
        CreateRepository, EachLeaf, ImportBase, ImportSource, ImportedCommit, ImportedHead,
        InitialBase, RepositoryError, RepositoryLimits, RepositoryOptions, SourceError, SourceFile,
        TargetMove, WalkedLeaf, create_repository, open_repository,
    };
    use sf_sdk::mocks::MockObjectStore;
    use sf_sdk::testing::InMemoryObjectStoreFactory;
    use sf_tests::texts;

    #[derive(Debug)]
    struct Never;

    impl std::fmt::Display for Never {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("never")
        }
    }

    impl std::error::Error for Never {}

    impl SourceError for Never {
        fn code(&self) -> &'static str {
            "never"
        }
    }

    /// A source holding one commit, a child of `parent`.
    struct OneCommit {
        commit: ImportedCommit,
        parent: ObjectId,
    }

    impl ImportSource for OneCommit {
        type Error = Never;

        fn read_leaves(
            &mut self,
            _: &str,
            _: &RepositoryLimits,
            _: TreePolicy,
        ) -> Result<(ImportedHead, Vec<WalkedLeaf>), Never> {
            Ok(self.commit.split())
        }

        fn read_again(
            &mut self,
            _: ObjectId,
            _: &RepositoryLimits,
            _: TreePolicy,
            each: &mut EachLeaf<'_>,
        ) -> Result<(), RepositoryError> {
            self.commit
                .files
                .iter()
                .try_for_each(|file| each(&file.path, file.mode, &file.content))
        }

        fn descends_from(&mut self, commit: ObjectId, ancestor: ObjectId) -> Result<bool, Never> {
            Ok(commit == self.commit.commit && ancestor == self.parent)
        }
    }

    #[test]
    fn an_unconfirmed_advance_is_unknown_and_never_retried() {
        let factory = InMemoryObjectStoreFactory::new();
        let identity = create_repository(
            &factory,
            &CreateRepository {
                path: "/in-memory/repo".into(),
                product_id: "p".into(),
                target_ref: "refs/heads/main".into(),
                base: InitialBase::Files(texts(&[("a.txt", "a\n")])),
                settings: Default::default(),
            },
            &RepositoryOptions::default(),
        )
        .unwrap();
        let file = SourceFile::text("a.txt", "b\n");
        let tree = object_id(
            ObjectKind::Tree,
            &encode_tree(&[TreeEntry {
                mode: EntryMode::File,
                name: "a.txt".into(),
                id: file.blob,
            }]),
        );
        let body = format!(
            "tree {tree}\nparent {}\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nnext\n",
            identity.initial
        );
        let mut source = OneCommit {
            commit: ImportedCommit {
                commit: object_id(ObjectKind::Commit, body.as_bytes()),
                body: body.into_bytes(),
                tree,
                parents: vec![identity.initial],
                files: vec![file],
            },
            parent: identity.initial,
        };

        let inner: Arc<dyn ObjectStore> = Arc::new(
            factory
                .open_store(
                    &StoreRoot {
                        path: identity.path.clone().into(),
                        dev: identity.dev,
                        ino: identity.ino,
                    },
                    &identity.to_canonical_bytes(),
                    Instant::now() + Duration::from_secs(5),
                )
                .unwrap(),
        );
        let mut mock = MockObjectStore::new();
        mock.expect_root().return_const(inner.root().clone());
        let i = inner.clone();
        mock.expect_write_objects()
            .returning(move |objects, d| i.write_objects(objects, d));
        let i = inner.clone();
        mock.expect_read_objects()
            .returning(move |ids, b, d| i.read_objects(ids, b, d));
        let i = inner.clone();
        mock.expect_read_ref()
            .returning(move |n, d| i.read_ref(n, d));
        let i = inner.clone();
        mock.expect_create_ref()
            .returning(move |n, v, d| i.create_ref(n, v, d));
        // Exactly one submission, whose outcome is not known.
        mock.expect_compare_and_swap_ref()
            .times(1)
            .returning(|_, _, _, _| {
                Ok(RefUpdate::Unknown {
                    reason: "the store's tool timed out after the update started".into(),
                })
            });
        let mut factory_mock = sf_sdk::mocks::MockObjectStoreFactory::new();
        let mut mock = Some(mock);
        factory_mock
            .expect_open()
            .times(1)
            .returning(move |_, _, _| Ok(Box::new(mock.take().unwrap()) as Box<dyn ObjectStore>));
        let repo = open_repository(&factory_mock, &identity, RepositoryOptions::default()).unwrap();

        let imported = repo
            .import_base(
                &mut source,
                &ImportBase {
                    source: "/team/repo".into(),
                    rev: "main".into(),
                    advance: true,
                },
            )
            .unwrap();
        // Read back once, the target still names the first base: the outcome stays unknown.
        assert_eq!(
            imported.target,
            TargetMove::Unknown {
                from: identity.initial,
                reason: format!(
                    "the store's tool timed out after the update started; the target names {} \
                     now",
                    identity.initial
                ),
            }
        );
        assert!(!imported.replayed);
        // The record is published and the commit is a factory commit, whatever the target.
        assert_eq!(repo.snapshot(&source.commit.commit).unwrap().tree, tree);
        assert_eq!(repo.target().unwrap(), identity.initial);
    }
}
