//! Collection by reference on real components (the real git binary, the real tree store on
//! disk, real sandboxed runs): a repository of ten thousand files goes through create, seal,
//! collect and judge; a corrupted file of the store, a replaced materialised tree and a swapped
//! layer are each detected and never run; the store is never repaired. (The full size, a
//! hundred thousand files, is the benchmark `examples/examples/tree_scale.rs`.)

mod collector_support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use collector_support::*;
use sf_host::assurance::Outcome;
use sf_host::canonical::Digest;
use sf_host::collector::{CollectRequest, CollectTrees, RunState};
use sf_host::repository::{SealedCandidate, TreeContents};
use sf_host::tree_store::collect_trees;

/// The `sf-tree/1` digests a Candidate's manifest names: its base's and its own.
fn tree_digests(sealed: &SealedCandidate) -> (Digest, Digest) {
    match &sealed.manifest.contents {
        TreeContents::Trees { base, candidate } => (base.clone(), candidate.clone()),
        other => panic!("a Candidate sealed now names its trees: {other:?}"),
    }
}

/// A scenario on the real sandbox whose repository holds `count` files beside the demo's.
fn with_extra_files(count: usize) -> Scenario {
    Scenario::new(
        sandbox(),
        Options {
            extra_files: count,
            ..Options::default()
        },
    )
}

/// Where the store keeps the materialised tree `digest`.
fn tree_dir(scenario: &Scenario, digest: &Digest) -> PathBuf {
    scenario
        .trees
        .root()
        .join("trees")
        .join(digest.hex())
        .join("tree")
}

fn stored(request: &CollectRequest) -> &sf_host::collector::StoredTrees {
    match &request.trees {
        CollectTrees::Stored(stored) => stored,
        CollectTrees::Files { .. } => {
            panic!("an sf-candidate/4 Candidate is collected by reference")
        }
    }
}

/// Every file below `dir`, counted.
fn files_below(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                files_below(&entry.path())
            } else {
                1
            }
        })
        .sum()
}

/// Each process check is not-started, with a problem naming `reason`, and the verdict is
/// Inconclusive.
fn never_ran(scenario: &Scenario, request: &CollectRequest, reason: &str) {
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector()
        .collect(request, proceed(), &hold, &cancel())
        .unwrap();
    assert_eq!(result.runs.len(), 4);
    for run in &result.runs {
        assert_eq!(run.state, RunState::NotStarted, "{run:?}");
        assert!(
            run.problems.iter().any(|problem| problem.contains(reason)),
            "{reason}: {run:?}"
        );
    }
    let verdict = scenario.judge(request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Inconclusive, "{verdict:#?}");
    hold.release();
}

/// Ten thousand files (generated, deterministic) beside the scenario's program: the seal
/// names the trees, the base is materialised once (every file a hard link into the store),
/// a fix is Verified and a non-fix Failed, every run naming the program its pins name; the
/// second Candidate reuses the materialised base.
#[test]
fn a_ten_thousand_file_repository_is_created_sealed_collected_and_judged() {
    let scenario = with_extra_files(10_000);
    let fixed = scenario.request(SUM_FIXED);
    let (base, candidate) = tree_digests(&fixed.sealed);
    assert_ne!(base, candidate);
    let tree = stored(&fixed)
        .base
        .clone()
        .expect("the base is materialised");
    assert_eq!(tree.digest, base);
    assert_eq!(tree.dir, tree_dir(&scenario, &base));
    assert_eq!(files_below(&tree.dir), 10_002);
    // The edited entry is the only file the request carries.
    assert_eq!(stored(&fixed).edits.len(), 1);
    assert_eq!(stored(&fixed).edits[0].path, "sum.sh");

    let collector = scenario.collector();
    let hold = scenario.fence.acquire(&fixed.sealed.digest).unwrap();
    let result = collector
        .collect(&fixed, proceed(), &hold, &cancel())
        .unwrap();
    assert!(result.may_judge(), "{result:?}");
    let pins = pins(&fixed);
    assert!(pins.tree_identities, "the pins name sf-tree/1 digests");
    assert_eq!(pins.base.snapshot, base);
    assert_eq!(pins.candidate.snapshot, candidate);
    for run in &result.runs {
        assert_eq!(run.state, RunState::Observed, "{run:?}");
        assert!(run.problems.is_empty(), "{run:?}");
        let program = &run.identities.as_ref().unwrap().program;
        assert!(
            *program == pins.base.program || *program == pins.candidate.program,
            "{run:?}"
        );
    }
    let verdict = scenario.judge(&fixed, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Verified, "{verdict:#?}");
    hold.release();

    let unfixed = scenario.request(SUM_STILL_BUGGY);
    assert_eq!(
        stored(&unfixed).base,
        Some(tree.clone()),
        "the second Candidate binds the same materialised base"
    );
    let hold = scenario.fence.acquire(&unfixed.sealed.digest).unwrap();
    collector
        .collect(&unfixed, proceed(), &hold, &cancel())
        .unwrap();
    let verdict = scenario.judge(&unfixed, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Failed, "{verdict:#?}");
}

/// Every stored file a materialisation would link, corrupted: each writer stops at its first
/// such file, and the materialisation ends `corrupt`, publishing nothing, with thousands of
/// files still to read (more batches than the writers' queue holds: a reader left waiting
/// for writers that have all stopped would never end).
#[test]
fn a_materialisation_whose_every_writer_fails_ends_corrupt() {
    let scenario = with_extra_files(6_000);
    let fixed = scenario.request(SUM_FIXED);
    let (_, candidate) = tree_digests(&fixed.sealed);
    let mut corrupted = 0;
    for path in stored_files(&scenario) {
        let mode = std::fs::metadata(&path).unwrap().permissions();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&path, "corrupted\n").unwrap();
        std::fs::set_permissions(&path, mode).unwrap();
        corrupted += 1;
    }
    assert!(corrupted > 6_000, "{corrupted}");
    // On a thread of its own, left behind if it never ends (the test process then exits).
    let scenario: &'static Scenario = Box::leak(Box::new(scenario));
    let commit = fixed.sealed.manifest.commit;
    let candidate_digest = candidate.clone();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let materialised =
            scenario
                .trees
                .materialise_tree(&scenario.repo.repo, &commit, &candidate_digest);
        let _ = sender.send(materialised.map(|_| ()));
    });
    // A liveness bound, not a measure of speed: the materialisation takes about a second.
    let materialised = receiver
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the materialisation ends when every writer has stopped");
    let error = materialised.unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(
        !tree_dir(scenario, &candidate).exists(),
        "nothing is published from corrupt files"
    );
}

/// Where the store keeps the file of `digest`.
fn stored_file(scenario: &Scenario, digest: &Digest) -> PathBuf {
    let hex = digest.hex();
    scenario
        .trees
        .root()
        .join("files")
        .join(&hex[..2])
        .join(hex)
}

/// Every file of the store's `files/`, by path.
fn stored_files(scenario: &Scenario) -> Vec<PathBuf> {
    let files = scenario.trees.root().join("files");
    let shards = std::fs::read_dir(files)
        .unwrap()
        .map(|shard| shard.unwrap().path());
    shards
        .flat_map(|shard| std::fs::read_dir(shard).unwrap())
        .map(|entry| entry.unwrap().path())
        .collect()
}

/// The first file of a materialisation, its copy in the store corrupted, and every other
/// file gone from the store: the writer that meets it fails, and the others stop at their
/// next batch instead of writing (and storing) the rest of the ten thousand files.
#[test]
fn a_writer_that_fails_stops_the_others() {
    let scenario = with_extra_files(10_000);
    let fixed = scenario.request(SUM_FIXED);
    let (base, candidate) = tree_digests(&fixed.sealed);
    let stamps = std::fs::read_to_string(
        scenario
            .trees
            .root()
            .join("trees")
            .join(base.hex())
            .join("stamps"),
    )
    .unwrap();
    // The first file in walk order: the first file the candidate's tree makes too.
    let first = stamps
        .lines()
        .find_map(|line| line.strip_prefix("f "))
        .and_then(|line| line.splitn(7, ' ').nth(6))
        .unwrap();
    let bytes = std::fs::read(tree_dir(&scenario, &base).join(first)).unwrap();
    let corrupt = stored_file(&scenario, &Digest::of(&bytes));
    for path in stored_files(&scenario) {
        if path != corrupt {
            std::fs::remove_file(path).unwrap();
        }
    }
    std::fs::set_permissions(&corrupt, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&corrupt, "corrupted\n").unwrap();
    std::fs::set_permissions(&corrupt, std::fs::Permissions::from_mode(0o444)).unwrap();

    let error = scenario
        .trees
        .materialise_tree(
            &scenario.repo.repo,
            &fixed.sealed.manifest.commit,
            &candidate,
        )
        .unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(!tree_dir(&scenario, &candidate).exists());
    // At most what the other writers had taken (a batch of 1,024 files each) is stored.
    let stored = stored_files(&scenario).len();
    assert!(
        stored <= 1 + 3 * 1_024,
        "{stored} files stored after the failure"
    );
}

/// A file of the store written to after it was materialised: the next collection's stamp
/// check finds it (`corrupt`, nothing runs, nothing is repaired).
#[test]
fn a_corrupted_store_file_is_detected_and_never_run_or_repaired() {
    let scenario = Scenario::real();
    let sealed = scenario.seal_for(&scenario.frozen(), SUM_FIXED);
    let request = scenario.request_for(sealed.clone());
    let (base, _) = tree_digests(&sealed);
    let check = tree_dir(&scenario, &base).join("check.sh");
    let held = stored_file(&scenario, &Digest::of(CHECK.as_bytes()));
    assert_eq!(
        std::fs::read(&held).unwrap(),
        CHECK.as_bytes(),
        "the tree's file is the store's"
    );
    // One byte more: the stamp (its size, its modification time) differs.
    let corrupted = format!("{CHECK}#");
    std::fs::write(&check, &corrupted).unwrap();
    let collect = || {
        collect_trees(
            &scenario.repo.repo,
            &sealed,
            &request.slice,
            Some(&scenario.trees),
        )
    };
    let error = collect().unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(error.to_string().contains("check.sh"), "{error}");
    assert_eq!(
        std::fs::read(&held).unwrap(),
        corrupted.as_bytes(),
        "reported, never repaired"
    );
    assert_eq!(collect().unwrap_err().code(), "corrupt", "and never used");
}

/// A write that keeps the file's size and puts its modification time back passes the stamp
/// check (docs/security.md says so); the next materialisation that uses the file re-hashes it
/// first, finds it, and publishes nothing.
#[test]
fn a_write_that_restores_the_stamp_is_found_by_the_next_materialisation() {
    let scenario = Scenario::real();
    let sealed = scenario.seal_for(&scenario.frozen(), SUM_FIXED);
    let request = scenario.request_for(sealed.clone());
    let (base, candidate) = tree_digests(&sealed);
    let check = tree_dir(&scenario, &base).join("check.sh");
    let stamp = std::fs::metadata(&check).unwrap().modified().unwrap();
    let same_size = CHECK.replace("ok", "OK");
    assert_eq!(same_size.len(), CHECK.len());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&check)
        .unwrap();
    std::io::Write::write_all(&mut &file, same_size.as_bytes()).unwrap();
    file.set_times(std::fs::FileTimes::new().set_modified(stamp))
        .unwrap();
    drop(file);
    collect_trees(
        &scenario.repo.repo,
        &sealed,
        &request.slice,
        Some(&scenario.trees),
    )
    .expect("the stamp check passes such a write (docs/security.md)");
    // The Candidate's tree materialised (a later Slice's base) reads check.sh from the store.
    let error = scenario
        .trees
        .materialise_tree(&scenario.repo.repo, &sealed.manifest.commit, &candidate)
        .unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(
        !tree_dir(&scenario, &candidate).exists(),
        "nothing is published from a corrupt file"
    );
}

/// The materialised base replaced after the collection verified it (another directory of the
/// same files at its path): the Executor refuses every run (`program-tree`), and the store's
/// next check finds the tree is not the one it made.
#[test]
fn a_replaced_materialised_tree_is_never_run() {
    let scenario = Scenario::real();
    let request = scenario.request(SUM_FIXED);
    let (base, _) = tree_digests(&request.sealed);
    let dir = tree_dir(&scenario, &base);
    let moved = dir.with_file_name("tree.moved");
    std::fs::rename(&dir, &moved).unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&moved)
        .arg(&dir)
        .status()
        .unwrap();
    assert!(copied.success());
    never_ran(&scenario, &request, "program-tree");
    let error = scenario.trees.verify_tree(&base).unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
}

/// A layer that is not the Candidate's (an edited entry's bytes swapped, or the base's
/// directories of another tree, or another materialised base) is refused before anything
/// runs or is stored.
#[test]
fn a_swapped_layer_or_base_is_refused_before_anything_runs() {
    let scenario = Scenario::real();
    let executor = Faulty::new(scenario.executor.clone(), Fault::None);
    let collector = scenario.collector_over(executor.clone());
    let good = scenario.request(SUM_FIXED);
    let other = scenario.request(SUM_STILL_BUGGY);
    let hold = scenario.fence.acquire(&good.sealed.digest).unwrap();
    let refused = |request: &CollectRequest, needle: &str| {
        let error = collector
            .collect(request, proceed(), &hold, &cancel())
            .unwrap_err();
        assert_eq!(error.code(), "invalid-input", "{error}");
        assert!(error.to_string().contains(needle), "{needle}: {error}");
    };
    let swap = |change: &dyn Fn(&mut sf_host::collector::StoredTrees)| {
        let mut request = good.clone();
        let CollectTrees::Stored(stored) = &mut request.trees else {
            unreachable!("collected by reference")
        };
        change(stored);
        request
    };
    // The other Candidate's layer under this Candidate's manifest.
    let theirs = stored(&other).edits.clone();
    refused(
        &swap(&|stored| stored.edits = theirs.clone()),
        "not the ones Candidate",
    );
    // A directory of the base planted with a file the base does not hold.
    refused(
        &swap(&|stored| {
            stored.directories.get_mut("").unwrap().insert(
                "planted.sh",
                sf_host::contracts::tree_digest::Node::file(false, b"echo ok\n"),
            );
        }),
        "the base's root directory given has the base's digest",
    );
    // Another tree materialised in the base's place.
    let mut moved = stored(&good).base.clone().unwrap();
    moved.digest = Digest::of(b"another tree");
    refused(
        &swap(&|stored| stored.base = Some(moved.clone())),
        "materialised base",
    );
    assert_eq!(executor.runs(), 0, "nothing started");
    assert_eq!(scenario.records(), 0, "nothing stored");
}

/// Runs plain git (the test's own tool) in the owned repository `repo`, `input` on stdin.
fn git_in(repo: &Path, args: &[&str], input: Option<&[u8]>) -> String {
    use std::io::Write as _;
    let mut child = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.unwrap_or_default())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Rewrites the tree record of the scenario's initial tree so that its root node says
/// `lie` of its subdirectory `gen`: a record as sf writes them (bound to the Git tree: the
/// same names, kinds and ids), whose one digest is not the one the bytes give.
fn forge_root_record(scenario: &Scenario, lie: Digest) {
    use sf_candidate::tree_record::{DirectoryRecord, tree_record_ref};
    use sf_host::contracts::tree_digest::{DirectoryDigest, Node};
    use sf_host::git_object::{self, ObjectId, ObjectKind};
    let repo = &scenario.repo.path;
    let initial = format!("{}^{{tree}}", scenario.repo.identity.initial);
    let tree = ObjectId::parse_hex(&git_in(repo, &["rev-parse", &initial], None)).unwrap();
    let name = tree_record_ref(&tree);
    let commit = ObjectId::parse_hex(&git_in(repo, &["rev-parse", name.as_str()], None)).unwrap();
    let read = |kind: &str, id: &str| {
        std::process::Command::new("git")
            .arg("--git-dir")
            .arg(repo)
            .args(["cat-file", kind, id])
            .output()
            .unwrap()
            .stdout
    };
    let record_commit = git_object::decode_commit(&read("commit", &commit.to_hex())).unwrap();
    let shadow = git_object::decode_tree(&read("tree", &record_commit.tree.to_hex())).unwrap();
    let node = shadow.iter().find(|entry| entry.name == "n").unwrap();
    let mut root = DirectoryRecord::decode(&read("blob", &node.id.to_hex())).unwrap();
    let Some(Node::Directory { totals, .. }) = root.directory.get("gen").cloned() else {
        panic!("the root lists gen/ as a directory");
    };
    root.directory.insert(
        "gen",
        Node::Directory {
            digest: DirectoryDigest { hash: lie, size: 1 },
            totals,
        },
    );
    let write = |kind: ObjectKind, body: Vec<u8>| {
        ObjectId::parse_hex(&git_in(
            repo,
            &[
                "hash-object",
                "-t",
                kind.as_str(),
                "-w",
                "--stdin",
                "--literally",
            ],
            Some(&body),
        ))
        .unwrap()
    };
    let blob = write(ObjectKind::Blob, root.encode());
    let entries: Vec<_> = shadow
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            if entry.name == "n" {
                entry.id = blob;
            }
            entry
        })
        .collect();
    let shadow_tree = write(ObjectKind::Tree, git_object::encode_tree(&entries));
    let mut forged = record_commit.clone();
    forged.tree = shadow_tree;
    let forged = write(ObjectKind::Commit, git_object::encode_commit(&forged));
    git_in(
        repo,
        &[
            "update-ref",
            name.as_str(),
            &forged.to_hex(),
            &commit.to_hex(),
        ],
        None,
    );
}

/// A Candidate run by reference is proved along its edited paths up to its base's digest,
/// not walked whole: read that way it is the Candidate export gives; a base object
/// corrupted after the base was materialised goes unread (export, which re-verifies
/// everything, refuses it) and the collection runs the materialised copy, verified from the
/// bytes when it was made, so Verified; a tree record that lies about a sibling after the
/// seal breaks the chain (`corrupt`).
#[test]
fn a_candidate_run_by_reference_is_proved_along_its_edited_paths() {
    let scenario = with_extra_files(1_000);
    let fixed = scenario.request(SUM_FIXED);
    let digest = fixed.sealed.digest.clone();
    let repository = &scenario.repo.repo;
    assert_eq!(
        repository.read_by_reference(&digest).unwrap(),
        repository.export_candidate(&digest).unwrap()
    );

    // A base object off the edited path, lost after the base was materialised.
    sf_tests::loosen_objects(&scenario.repo.path);
    let off_path = repository
        .snapshot(&scenario.repo.identity.initial)
        .unwrap()
        .files
        .iter()
        .find(|file| file.path.starts_with("gen/"))
        .map(|file| file.blob)
        .unwrap();
    let hex = off_path.to_hex();
    let loose = scenario
        .repo
        .path
        .join("objects")
        .join(&hex[..2])
        .join(&hex[2..]);
    std::fs::remove_file(&loose).unwrap();
    assert_eq!(
        repository.export_candidate(&digest).unwrap_err().code(),
        "corrupt"
    );
    let read = repository.read_by_reference(&digest).unwrap();
    let request = scenario.request_for(read);
    let hold = scenario.fence.acquire(&request.sealed.digest).unwrap();
    let result = scenario
        .collector()
        .collect(&request, proceed(), &hold, &cancel())
        .unwrap();
    assert!(result.may_judge(), "{result:?}");
    let verdict = scenario.judge(&request, hold.attempt());
    assert_eq!(verdict.outcome, Outcome::Verified, "{verdict:#?}");
    hold.release();

    // A record that lies about a sibling's digest, after the seal.
    forge_root_record(&scenario, Digest::of(b"not the digest of gen/"));
    let refused = repository.read_by_reference(&digest).unwrap_err();
    assert_eq!(refused.code(), "corrupt", "{refused}");
    assert!(
        refused.to_string().contains("tree record gives"),
        "{refused}"
    );
}

/// A tree record that lies before a seal makes the seal compute the lie (the record is
/// trusted as sf wrote it): the Candidate's manifest names a base digest no bytes give, and
/// its chain, read by reference, is consistent. The lie ends where the base is
/// materialised: the store publishes a tree only under the digest its bytes give, so the
/// collection is refused (`corrupt`) and nothing runs.
#[test]
fn a_record_that_lied_before_the_seal_is_caught_where_the_base_is_materialised() {
    let scenario = with_extra_files(100);
    forge_root_record(&scenario, Digest::of(b"a lie the seal believes"));
    let sealed = scenario.seal_for(&scenario.frozen(), SUM_FIXED);
    let read = scenario
        .repo
        .repo
        .read_by_reference(&sealed.digest)
        .unwrap();
    let error = collect_trees(
        &scenario.repo.repo,
        &read,
        &scenario.slice(),
        Some(&scenario.trees),
    )
    .unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(
        error.to_string().contains("give the tree digest"),
        "{error}"
    );
    assert!(
        !scenario.trees.root().join("trees").exists()
            || std::fs::read_dir(scenario.trees.root().join("trees"))
                .unwrap()
                .next()
                .is_none(),
        "nothing was published"
    );
}
