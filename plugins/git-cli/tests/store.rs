//! The git-cli ObjectStore against the real Git binary: round trips, budgets, refs, and the
//! ownership check refusing every tampered root.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sf_contracts::canonical::Digest;
use sf_contracts::git_object::{
    Commit, EntryMode, ObjectId, ObjectKind, TreeEntry, encode_commit, encode_tree,
};
use sf_contracts::{
    EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreFactory, READ_FRAMING_BYTES, RefName,
    RefUpdate, RefValue,
};
use sf_git_cli::{CONFIG, GitCliConfig, GitCliFactory, GitCliStore, HEAD, MARKER_NAME, TOP_LEVEL};

const MARKER: &[u8] = b"{\"protocol\":\"test\"}\n";

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

fn factory() -> GitCliFactory {
    GitCliFactory::new(GitCliConfig::default()).expect("the system git pins")
}

/// A private parent directory (mode 0700, canonical) and a root path inside it.
struct Place {
    dir: tempfile::TempDir,
    root: PathBuf,
}

fn place() -> Place {
    let (dir, parent) = sf_test_support::private_dir();
    Place {
        dir,
        root: parent.join("repo"),
    }
}

struct Fixture {
    place: Place,
    factory: GitCliFactory,
    store: GitCliStore,
}

impl Fixture {
    fn root(&self) -> &Path {
        &self.place.root
    }
}

fn unmarked() -> Fixture {
    let place = place();
    let factory = factory();
    let store = factory
        .create_store(&place.root, soon())
        .expect("a fresh root is created");
    Fixture {
        place,
        factory,
        store,
    }
}

fn marked() -> Fixture {
    let fixture = unmarked();
    fixture.store.mark(MARKER, soon()).expect("marks");
    fixture
}

fn name(text: &str) -> RefName {
    RefName::parse(text).expect("valid ref name")
}

/// A blob, a tree holding it and a commit of that tree: a closed set `--strict` accepts.
fn closure(text: &str) -> (EncodedObject, EncodedObject, EncodedObject) {
    let blob = EncodedObject::new(ObjectKind::Blob, text.as_bytes().to_vec());
    let tree = EncodedObject::new(
        ObjectKind::Tree,
        encode_tree(&[TreeEntry {
            mode: EntryMode::File,
            name: "file.txt".into(),
            id: blob.id,
        }]),
    );
    let commit = EncodedObject::new(
        ObjectKind::Commit,
        encode_commit(&Commit {
            tree: tree.id,
            parents: vec![],
            author: "sf <sf@invalid> 0 +0000".into(),
            committer: "sf <sf@invalid> 0 +0000".into(),
            message: format!("{text}\n"),
        }),
    );
    (blob, tree, commit)
}

/// Writes a closure and returns its commit id.
fn commit_in(store: &GitCliStore, text: &str) -> ObjectId {
    let (blob, tree, commit) = closure(text);
    store
        .write_objects(&[blob, tree, commit.clone()], soon())
        .expect("writes");
    commit.id
}

/// `git hash-object -t <kind> --stdin` outside any repository.
fn git_hash_object(kind: ObjectKind, body: &[u8]) -> String {
    let home = tempfile::tempdir().expect("home");
    let mut child = Command::new("/usr/bin/git")
        .args(["hash-object", "-t", kind.as_str(), "--stdin"])
        .env_clear()
        .env("HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body)
        .expect("writes");
    let output = child.wait_with_output().expect("git ends");
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .expect("text")
        .trim()
        .to_owned()
}

fn top_level(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root)
        .expect("lists")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .collect();
    names.sort();
    names
}

fn assert_code<T>(result: Result<T, ObjectStoreError>, code: &str) {
    match result {
        Err(error) => assert_eq!(error.code(), code, "{error}"),
        Ok(_) => panic!("expected {code}, got Ok"),
    }
}

/// Every kind of operation refuses with `unavailable`.
fn assert_all_unavailable(store: &GitCliStore) {
    let (blob, _, _) = closure("refused");
    let id = blob.id;
    assert_code(
        store.read_ref(&name("refs/heads/main"), soon()),
        "unavailable",
    );
    assert_code(store.list_refs("refs/", soon()), "unavailable");
    assert_code(store.read_objects(&[id], 1 << 20, soon()), "unavailable");
    assert_code(store.write_objects(&[blob], soon()), "unavailable");
    assert_code(
        store.create_ref(&name("refs/heads/x"), &id, soon()),
        "unavailable",
    );
}

#[test]
fn objects_round_trip_with_git_ids() {
    let fixture = marked();
    let (blob, tree, commit) = closure("hello\n");
    for object in [&blob, &tree, &commit] {
        assert_eq!(
            object.id.to_hex(),
            git_hash_object(object.kind, &object.body),
            "{object:?}"
        );
    }
    fixture
        .store
        .write_objects(
            &[commit.clone(), tree.clone(), blob.clone(), blob.clone()],
            soon(),
        )
        .expect("writes");
    let missing = ObjectId::from_bytes([9; 20]);
    let ids = [commit.id, tree.id, blob.id, missing, blob.id];
    let read = fixture
        .store
        .read_objects(&ids, 1 << 20, soon())
        .expect("reads");
    let expected = [Some(&commit), Some(&tree), Some(&blob), None, Some(&blob)];
    assert_eq!(read.len(), expected.len());
    for (got, want) in read.iter().zip(expected) {
        match (got, want) {
            (Some(got), Some(want)) => {
                assert_eq!(got.kind, want.kind);
                assert_eq!(got.body, want.body);
            }
            (None, None) => {}
            other => panic!("mismatch {other:?}"),
        }
    }
    // Writing the same objects again is a no-op that succeeds.
    fixture
        .store
        .write_objects(&[blob, tree, commit], soon())
        .expect("idempotent");
}

#[test]
fn read_budget_is_exact() {
    let fixture = marked();
    let blob = EncodedObject::new(ObjectKind::Blob, vec![b'x'; 100]);
    fixture
        .store
        .write_objects(std::slice::from_ref(&blob), soon())
        .expect("writes");
    let exact = 100 + READ_FRAMING_BYTES;
    // A duplicate id is framed once.
    let read = fixture
        .store
        .read_objects(&[blob.id, blob.id], exact, soon())
        .expect("at budget");
    assert_eq!(read.len(), 2);
    assert_code(
        fixture.store.read_objects(&[blob.id], exact - 1, soon()),
        "limit",
    );
    // Far below: Git's own output passes the cap and it is killed.
    assert_code(fixture.store.read_objects(&[blob.id], 90, soon()), "limit");
    // A missing object still costs its framing.
    let missing = ObjectId::from_bytes([3; 20]);
    assert_code(
        fixture
            .store
            .read_objects(&[missing], READ_FRAMING_BYTES - 1, soon()),
        "limit",
    );
    assert_eq!(
        fixture
            .store
            .read_objects(&[missing], READ_FRAMING_BYTES, soon())
            .expect("fits"),
        vec![None]
    );
}

#[test]
fn forged_ids_are_refused_before_anything_starts() {
    let fixture = marked();
    let honest = EncodedObject::new(ObjectKind::Blob, b"honest".to_vec());
    let forged = EncodedObject {
        kind: ObjectKind::Blob,
        id: honest.id,
        body: b"forged".to_vec(),
    };
    assert_code(
        fixture
            .store
            .write_objects(&[honest.clone(), forged], soon()),
        "invalid-input",
    );
    let mut objects: Vec<String> = fs::read_dir(fixture.root().join("objects"))
        .expect("lists")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .collect();
    objects.sort();
    assert_eq!(objects, ["info", "pack"], "nothing was written");
    assert_eq!(
        fixture
            .store
            .read_objects(&[honest.id], 1 << 20, soon())
            .expect("reads"),
        vec![None]
    );
}

#[test]
fn strict_index_pack_refuses_an_open_closure() {
    let fixture = marked();
    let (_, tree, _) = closure("dangling");
    match fixture
        .store
        .write_objects(std::slice::from_ref(&tree), soon())
    {
        Err(ObjectStoreError::Failed { operation, .. }) => {
            assert!(operation.contains("index-pack --strict"), "{operation}");
        }
        other => panic!("expected failed, got {other:?}"),
    }
    // Nothing was kept: Git refused the pack before naming it.
    for extension in ["pack", "idx", "rev"] {
        assert!(!pack_file(fixture.root(), &[&tree], extension).exists());
    }
}

#[test]
fn a_write_is_one_pack_named_by_its_checksum() {
    let fixture = marked();
    let (blob, tree, commit) = closure("packed");
    let objects = [blob, tree, commit];
    fixture
        .store
        .write_objects(&objects, soon())
        .expect("writes");
    let refs: Vec<&EncodedObject> = objects.iter().collect();
    for extension in ["pack", "idx"] {
        let path = pack_file(fixture.root(), &refs, extension);
        let meta = fs::symlink_metadata(&path).expect("the pack file exists");
        assert!(meta.file_type().is_file() && meta.nlink() == 1, "{path:?}");
    }
    assert_eq!(
        fs::read(pack_file(fixture.root(), &refs, "pack")).expect("reads"),
        sf_git::pack::encode(&refs).expect("encodes"),
        "Git keeps the pack byte for byte"
    );
    // No loose object was written.
    let loose: Vec<String> = dir_names(&fixture.root().join("objects"))
        .into_iter()
        .filter(|name| name.len() == 2)
        .collect();
    assert!(loose.is_empty(), "{loose:?}");
    // The same write again keeps the one pack.
    fixture
        .store
        .write_objects(&objects, soon())
        .expect("writes again");
    assert_eq!(
        fs::read_dir(fixture.root().join("objects/pack"))
            .expect("lists")
            .count(),
        fs::read_dir(fixture.root().join("objects/pack"))
            .expect("lists")
            .filter(|entry| {
                entry
                    .as_ref()
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .starts_with("pack-")
            })
            .count()
    );
    let ids: Vec<ObjectId> = objects.iter().map(|object| object.id).collect();
    let read = fixture
        .store
        .read_objects(&ids, 1 << 20, soon())
        .expect("reads");
    assert!(read.iter().all(Option::is_some));
}

#[test]
fn create_writes_the_fixed_layout_and_never_adopts() {
    let fixture = unmarked();
    let root = fixture.root();
    let meta = fs::symlink_metadata(root).expect("root");
    assert_eq!(meta.mode() & 0o7777, 0o700);
    assert_eq!(fixture.store.root().ino, meta.ino());
    let mut expected: Vec<String> = TOP_LEVEL.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(top_level(root), expected);
    assert_eq!(fs::read(root.join("config")).expect("config"), CONFIG);
    assert_eq!(fs::read(root.join("HEAD")).expect("HEAD"), HEAD);
    assert!(!fixture.store.is_marked());

    fixture.store.mark(MARKER, soon()).expect("marks");
    assert_eq!(fs::read(root.join(MARKER_NAME)).expect("marker"), MARKER);
    assert_code(fixture.store.mark(MARKER, soon()), "invalid-input");

    // An existing directory or file is never adopted.
    assert_code(fixture.factory.create(root, soon()), "exists");
    let file = fixture
        .place
        .dir
        .path()
        .canonicalize()
        .expect("dir")
        .join("file");
    fs::write(&file, b"x").expect("writes");
    assert_code(fixture.factory.create(&file, soon()), "exists");
    assert_eq!(fs::read(&file).expect("file"), b"x");
}

#[test]
fn create_refuses_unsafe_paths() {
    let factory = factory();
    let place = place();
    let parent = place.dir.path().canonicalize().expect("canonical");
    assert_code(
        factory.create(Path::new("relative/repo"), soon()),
        "invalid-input",
    );
    assert_code(
        factory.create(&parent.join("a").join("..").join("repo"), soon()),
        "invalid-input",
    );
    // Through a symlinked parent the path is not canonical.
    let real = parent.join("real");
    fs::create_dir(&real).expect("mkdir");
    fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).expect("chmod");
    symlink(&real, parent.join("link")).expect("symlink");
    assert_code(
        factory.create(&parent.join("link").join("repo"), soon()),
        "invalid-input",
    );
    // A missing parent.
    assert_code(
        factory.create(&parent.join("absent").join("repo"), soon()),
        "unavailable",
    );
    // A group- or world-writable parent.
    let open = parent.join("open");
    fs::create_dir(&open).expect("mkdir");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_code(factory.create(&open.join("repo"), soon()), "unavailable");
    assert!(!open.join("repo").exists(), "nothing was created");
    // A parent owned by someone else.
    let foreign = parent.join("foreign");
    fs::create_dir(&foreign).expect("mkdir");
    fs::set_permissions(&foreign, fs::Permissions::from_mode(0o700)).expect("chmod");
    nix::unistd::chown(&foreign, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
    assert_code(factory.create(&foreign.join("repo"), soon()), "unavailable");
    // A past deadline starts nothing.
    assert_code(
        factory.create(
            &parent.join("late"),
            Instant::now() - Duration::from_secs(1),
        ),
        "timeout",
    );
    assert!(!parent.join("late").exists());
}

#[test]
fn open_checks_the_marker_byte_for_byte() {
    let fixture = marked();
    let root = fixture.store.root().clone();
    fixture
        .factory
        .open(&root, MARKER, soon())
        .expect("opens with its marker");
    let mut other = MARKER.to_vec();
    other[2] ^= 1;
    assert_code(fixture.factory.open(&root, &other, soon()), "unavailable");

    // An unmarked root never opens.
    let fresh = unmarked();
    let fresh_root = fresh.store.root().clone();
    assert_code(
        fresh.factory.open(&fresh_root, MARKER, soon()),
        "unavailable",
    );
}

#[test]
fn an_extra_top_level_entry_refuses() {
    let fixture = marked();
    fs::create_dir(fixture.root().join("hooks")).expect("mkdir");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn packed_refs_refuses() {
    let fixture = marked();
    fs::write(fixture.root().join("packed-refs"), b"").expect("writes");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn config_changed_by_one_byte_refuses() {
    let fixture = marked();
    let mut config = CONFIG.to_vec();
    let last = config.len() - 1;
    config[last] = b' ';
    fs::write(fixture.root().join("config"), config).expect("writes");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn a_changed_mode_refuses() {
    let fixture = marked();
    fs::set_permissions(fixture.root(), fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_all_unavailable(&fixture.store);
    fs::set_permissions(fixture.root(), fs::Permissions::from_mode(0o700)).expect("chmod");
    fixture
        .store
        .read_ref(&name("refs/heads/main"), soon())
        .expect("restored mode is accepted again");
}

#[test]
fn a_changed_marker_refuses() {
    let fixture = marked();
    fs::write(
        fixture.root().join(MARKER_NAME),
        b"{\"protocol\":\"tesT\"}\n",
    )
    .expect("writes");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn a_marker_on_an_unmarked_root_refuses() {
    let fixture = unmarked();
    fs::write(fixture.root().join(MARKER_NAME), MARKER).expect("writes");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn a_replaced_root_refuses() {
    let fixture = marked();
    let commit = commit_in(&fixture.store, "before");
    let root = fixture.root().to_path_buf();
    let moved = root.with_file_name("moved");
    fs::rename(&root, &moved).expect("rename");
    // An identical copy under the same name is another directory.
    let status = Command::new("cp")
        .arg("-a")
        .arg(&moved)
        .arg(&root)
        .status()
        .expect("cp");
    assert!(status.success());
    assert_eq!(fs::read(root.join(MARKER_NAME)).expect("marker"), MARKER);
    assert_all_unavailable(&fixture.store);
    assert_code(
        fixture
            .store
            .create_ref(&name("refs/heads/main"), &commit, soon()),
        "unavailable",
    );
    let identity = fixture.store.root().clone();
    assert_code(
        fixture.factory.open(&identity, MARKER, soon()),
        "unavailable",
    );
    // A missing root is refused, never recreated.
    fs::remove_dir_all(&root).expect("rm");
    assert_all_unavailable(&fixture.store);
    assert!(!root.exists());
}

#[test]
fn a_symlinked_root_refuses() {
    let fixture = marked();
    let root = fixture.root().to_path_buf();
    let real = root.with_file_name("real");
    fs::rename(&root, &real).expect("rename");
    symlink(&real, &root).expect("symlink");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn a_symlinked_internal_directory_refuses() {
    let fixture = marked();
    let elsewhere = fixture.place.dir.path().join("elsewhere");
    fs::rename(fixture.root().join("refs"), &elsewhere).expect("rename");
    symlink(&elsewhere, fixture.root().join("refs")).expect("symlink");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn only_an_empty_head_lock_is_tolerated() {
    let fixture = marked();
    let first = commit_in(&fixture.store, "first");
    let second = commit_in(&fixture.store, "second");
    let main = name("refs/heads/main");
    fixture
        .store
        .create_ref(&main, &first, soon())
        .expect("creates");
    let lock = fixture.root().join("HEAD.lock");
    fs::write(&lock, b"").expect("writes");
    // Tolerated: refs HEAD does not name are written as usual.
    assert_eq!(
        fixture
            .store
            .create_ref(&name("refs/sf/x"), &first, soon())
            .expect("starts"),
        RefUpdate::Applied
    );
    // Moving the ref HEAD names makes Git lock HEAD too; it fails inside its bounds, and the
    // ref still holding the expected value does not make that a refusal.
    let outcome = fixture
        .store
        .compare_and_swap_ref(&main, &first, &second, soon())
        .expect("starts");
    assert!(
        matches!(&outcome, RefUpdate::Unknown { reason } if reason.contains("HEAD.lock")),
        "{outcome:?}"
    );
    assert!(lock.exists(), "Git's lock is never removed");
    assert_eq!(
        fixture.store.read_ref(&main, soon()).expect("reads"),
        Some(RefValue::Direct(first))
    );
    fs::write(&lock, b"x").expect("writes");
    assert_all_unavailable(&fixture.store);
    // A second link to an empty lock is not Git's.
    fs::write(&lock, b"").expect("writes");
    fs::hard_link(&lock, fixture.place.dir.path().join("lock-link")).expect("link");
    assert_all_unavailable(&fixture.store);
    fs::remove_file(&lock).expect("rm");
    fixture
        .store
        .read_ref(&name("refs/heads/main"), soon())
        .expect("a gone lock is fine");
    // Another lock name is not tolerated.
    fs::write(fixture.root().join("config.lock"), b"").expect("writes");
    assert_all_unavailable(&fixture.store);
}

#[test]
fn create_ref_applies_once_and_then_refuses() {
    let fixture = marked();
    let first = commit_in(&fixture.store, "first");
    let second = commit_in(&fixture.store, "second");
    let main = name("refs/heads/main");
    assert_eq!(fixture.store.read_ref(&main, soon()).expect("reads"), None);
    assert_eq!(
        fixture
            .store
            .create_ref(&main, &first, soon())
            .expect("starts"),
        RefUpdate::Applied
    );
    assert_eq!(
        fixture.store.read_ref(&main, soon()).expect("reads"),
        Some(RefValue::Direct(first))
    );
    // An existing ref is refused even when it already names the value.
    assert_eq!(
        fixture
            .store
            .create_ref(&main, &first, soon())
            .expect("answers"),
        RefUpdate::Refused {
            current: Some(RefValue::Direct(first))
        }
    );
    assert_eq!(
        fixture
            .store
            .create_ref(&main, &second, soon())
            .expect("answers"),
        RefUpdate::Refused {
            current: Some(RefValue::Direct(first))
        }
    );
    // The zero id would mean "delete" to update-ref.
    assert_code(
        fixture
            .store
            .create_ref(&name("refs/heads/zero"), &ObjectId::ZERO, soon()),
        "invalid-input",
    );
    // A name below an existing ref cannot exist.
    assert_code(
        fixture
            .store
            .create_ref(&name("refs/heads/main/x"), &first, soon()),
        "invalid-input",
    );
}

#[test]
fn create_ref_of_a_missing_object_is_not_applied() {
    let fixture = marked();
    let missing = ObjectId::from_bytes([5; 20]);
    let outcome = fixture
        .store
        .create_ref(&name("refs/sf/x"), &missing, soon())
        .expect("starts");
    // Git refused and the ref is absent: the contract cannot call that refused (no current
    // value), so it is unknown, never "applied".
    assert!(
        matches!(&outcome, RefUpdate::Unknown { reason } if reason.contains("nonexistent")),
        "{outcome:?}"
    );
    assert_eq!(
        fixture
            .store
            .read_ref(&name("refs/sf/x"), soon())
            .expect("reads"),
        None
    );
}

#[test]
fn compare_and_swap_moves_only_from_the_expected_value() {
    let fixture = marked();
    let first = commit_in(&fixture.store, "first");
    let second = commit_in(&fixture.store, "second");
    let third = commit_in(&fixture.store, "third");
    let main = name("refs/heads/main");
    assert_eq!(
        fixture
            .store
            .compare_and_swap_ref(&main, &first, &second, soon())
            .expect("answers"),
        RefUpdate::Refused { current: None }
    );
    fixture
        .store
        .create_ref(&main, &first, soon())
        .expect("creates");
    assert_eq!(
        fixture
            .store
            .compare_and_swap_ref(&main, &first, &second, soon())
            .expect("starts"),
        RefUpdate::Applied
    );
    assert_eq!(
        fixture
            .store
            .compare_and_swap_ref(&main, &first, &third, soon())
            .expect("answers"),
        RefUpdate::Refused {
            current: Some(RefValue::Direct(second))
        }
    );
    assert_eq!(
        fixture.store.read_ref(&main, soon()).expect("reads"),
        Some(RefValue::Direct(second))
    );
}

#[test]
fn a_symbolic_ref_is_refused_before_anything_starts() {
    let fixture = marked();
    let first = commit_in(&fixture.store, "first");
    let second = commit_in(&fixture.store, "second");
    let target = name("refs/heads/target");
    fixture
        .store
        .create_ref(&target, &first, soon())
        .expect("creates");
    for (sym, points_to) in [
        ("refs/heads/sym", "refs/heads/target"),
        ("refs/heads/dangling", "refs/heads/x"),
    ] {
        let path = fixture.root().join(sym);
        fs::write(&path, format!("ref: {points_to}\n")).expect("writes");
        let sym = name(sym);
        assert_eq!(
            fixture.store.read_ref(&sym, soon()).expect("reads"),
            Some(RefValue::Symbolic(points_to.into()))
        );
        assert_code(
            fixture
                .store
                .compare_and_swap_ref(&sym, &first, &second, soon()),
            "symbolic-ref",
        );
        assert_eq!(
            fs::read(&path).expect("reads"),
            format!("ref: {points_to}\n").as_bytes()
        );
    }
    assert_eq!(
        fixture.store.read_ref(&target, soon()).expect("reads"),
        Some(RefValue::Direct(first))
    );
    // Listings report both, the dangling one too (Git alone would leave it out).
    let listed = fixture
        .store
        .list_refs("refs/heads/", soon())
        .expect("lists");
    assert_eq!(
        listed,
        vec![
            (
                name("refs/heads/dangling"),
                RefValue::Symbolic("refs/heads/x".into())
            ),
            (
                name("refs/heads/sym"),
                RefValue::Symbolic("refs/heads/target".into())
            ),
            (name("refs/heads/target"), RefValue::Direct(first)),
        ]
    );
}

#[test]
fn a_broken_ref_reads_corrupt() {
    let fixture = marked();
    fs::write(fixture.root().join("refs/heads/broken"), b"garbage\n").expect("writes");
    assert_code(
        fixture.store.read_ref(&name("refs/heads/broken"), soon()),
        "corrupt",
    );
    assert_code(fixture.store.list_refs("refs/", soon()), "corrupt");
    assert_eq!(
        fixture
            .store
            .read_ref(&name("refs/heads/other"), soon())
            .expect("other refs still read"),
        None
    );
}

#[test]
fn a_symlinked_or_linked_ref_refuses() {
    let fixture = marked();
    let commit = commit_in(&fixture.store, "c");
    fixture
        .store
        .create_ref(&name("refs/heads/main"), &commit, soon())
        .expect("creates");
    let main = fixture.root().join("refs/heads/main");
    symlink(&main, fixture.root().join("refs/heads/link")).expect("symlink");
    assert_code(
        fixture.store.read_ref(&name("refs/heads/link"), soon()),
        "unavailable",
    );
    assert_code(
        fixture.store.list_refs("refs/heads/", soon()),
        "unavailable",
    );
    fs::remove_file(fixture.root().join("refs/heads/link")).expect("rm");
    fs::hard_link(&main, fixture.place.dir.path().join("outside")).expect("link");
    assert_code(
        fixture.store.read_ref(&name("refs/heads/main"), soon()),
        "unavailable",
    );
}

#[test]
fn list_refs_is_sorted_and_scoped() {
    let fixture = marked();
    let commit = commit_in(&fixture.store, "c");
    for ref_name in ["refs/sf/b", "refs/sf/a/x", "refs/heads/main", "refs/sf/a/w"] {
        assert_eq!(
            fixture
                .store
                .create_ref(&name(ref_name), &commit, soon())
                .expect("starts"),
            RefUpdate::Applied
        );
    }
    let names = |prefix: &str| -> Vec<String> {
        fixture
            .store
            .list_refs(prefix, soon())
            .expect("lists")
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect()
    };
    assert_eq!(
        names("refs/sf/"),
        ["refs/sf/a/w", "refs/sf/a/x", "refs/sf/b"]
    );
    assert_eq!(names("refs/sf/a/"), ["refs/sf/a/w", "refs/sf/a/x"]);
    assert_eq!(
        names("refs/"),
        ["refs/heads/main", "refs/sf/a/w", "refs/sf/a/x", "refs/sf/b"]
    );
    assert!(names("refs/none/").is_empty());
    assert_code(fixture.store.list_refs("refs/sf", soon()), "invalid-input");
    assert_code(fixture.store.list_refs("refs/*/", soon()), "invalid-input");
}

/// The fan-out directory and the loose-object file of `object`.
fn loose_paths(root: &Path, object: &EncodedObject) -> (PathBuf, PathBuf) {
    let hex = object.id.to_hex();
    let dir = root.join("objects").join(&hex[..2]);
    let file = dir.join(&hex[2..]);
    (dir, file)
}

/// The file `pack-<checksum>.<extension>` a write of `objects` leaves.
fn pack_file(root: &Path, objects: &[&EncodedObject], extension: &str) -> PathBuf {
    let pack = sf_git::pack::encode(objects).expect("encodes");
    let name = hex::encode(&pack[pack.len() - 20..]);
    root.join("objects/pack")
        .join(format!("pack-{name}.{extension}"))
}

#[test]
fn a_read_larger_than_both_pipes_completes() {
    let fixture = marked();
    // More request bytes (50 per id) and more answer bytes than a pipe holds (64 KiB), so
    // that writing the request and reading the answers must interleave.
    let blobs: Vec<EncodedObject> = (0..3000)
        .map(|i| {
            EncodedObject::new(
                ObjectKind::Blob,
                format!("blob {i}\n").repeat(8).into_bytes(),
            )
        })
        .collect();
    fixture.store.write_objects(&blobs, soon()).expect("writes");
    let ids: Vec<ObjectId> = blobs.iter().map(|blob| blob.id).collect();
    fixture.store.begin_reads();
    for _ in 0..2 {
        let read = fixture
            .store
            .read_objects(&ids, 1 << 24, soon())
            .expect("reads");
        for (blob, answer) in blobs.iter().zip(&read) {
            assert_eq!(answer.as_ref().map(|object| &object.body), Some(&blob.body));
        }
    }
    fixture.store.end_reads();
}

#[test]
fn only_gits_own_finalisation_link_of_a_pack_is_tolerated() {
    let fixture = marked();
    let blob = EncodedObject::new(ObjectKind::Blob, b"finalising\n".to_vec());
    let write = || {
        fixture
            .store
            .write_objects(std::slice::from_ref(&blob), soon())
    };
    write().expect("writes");
    let pack = pack_file(fixture.root(), &[&blob], "pack");
    // A concurrent identical write between linking its temporary file to the name and
    // removing the temporary name.
    let temporary = fixture.root().join("objects/pack/tmp_pack_AbC123");
    fs::hard_link(&pack, &temporary).expect("link");
    write().expect("Git's own finalisation is tolerated");
    assert!(temporary.exists(), "the temporary name is never removed");

    // The same link under another name is not Git's.
    fs::remove_file(&temporary).expect("rm");
    let other = fixture.root().join("objects/pack/other");
    fs::hard_link(&pack, &other).expect("link");
    assert_code(write(), "unavailable");
    fs::remove_file(&other).expect("rm");
    write().expect("writes once the link is gone");

    // A pack file anyone may write.
    fs::set_permissions(&pack, fs::Permissions::from_mode(0o666)).expect("chmod");
    assert_code(write(), "unavailable");
}

#[test]
fn a_pack_name_holding_other_bytes_refuses_the_write() {
    let fixture = marked();
    let blob = EncodedObject::new(ObjectKind::Blob, b"named\n".to_vec());
    let pack = pack_file(fixture.root(), &[&blob], "pack");
    fs::write(&pack, b"PACK, but not this one").expect("writes");
    fs::set_permissions(&pack, fs::Permissions::from_mode(0o444)).expect("chmod");
    assert_code(
        fixture
            .store
            .write_objects(std::slice::from_ref(&blob), soon()),
        "unavailable",
    );
}

#[test]
fn a_symlinked_pack_file_refuses_the_write() {
    for extension in ["pack", "idx", "rev"] {
        let fixture = marked();
        let blob = EncodedObject::new(ObjectKind::Blob, b"target\n".to_vec());
        symlink(
            "/etc/passwd",
            pack_file(fixture.root(), &[&blob], extension),
        )
        .expect("symlink");
        assert_code(
            fixture
                .store
                .write_objects(std::slice::from_ref(&blob), soon()),
            "unavailable",
        );
    }
}

/// The `git cat-file --batch` processes of this test process reading `root`.
fn batch_readers(root: &Path) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return found;
    };
    for task in tasks.flatten() {
        let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children
            .split_whitespace()
            .filter_map(|pid| pid.parse::<u32>().ok())
        {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let git_dir = format!("GIT_DIR={}", root.display());
            let is_reader = cmdline.split(|&b| b == 0).any(|arg| arg == b"cat-file")
                && environ
                    .split(|&b| b == 0)
                    .any(|var| var == git_dir.as_bytes());
            if is_reader {
                found.push(pid);
            }
        }
    }
    found
}

#[test]
fn reads_in_a_scope_share_one_reader_that_ends_with_the_scope() {
    let fixture = marked();
    let (blob, tree, commit) = closure("scoped");
    fixture
        .store
        .write_objects(&[blob.clone(), tree.clone(), commit.clone()], soon())
        .expect("writes");
    let read = |id: ObjectId| {
        fixture
            .store
            .read_objects(&[id], 1 << 20, soon())
            .expect("reads")
    };
    // Outside a scope, a read ends its own reader.
    assert!(read(blob.id)[0].is_some());
    assert_eq!(batch_readers(fixture.root()), Vec::<u32>::new());

    fixture.store.begin_reads();
    assert!(read(commit.id)[0].is_some());
    let first = batch_readers(fixture.root());
    assert_eq!(first.len(), 1, "one reader serves the scope");
    // Scopes nest: the inner one ends, the reader stays.
    fixture.store.begin_reads();
    assert!(read(tree.id)[0].is_some());
    fixture.store.end_reads();
    assert!(read(blob.id)[0].is_some());
    assert_eq!(
        batch_readers(fixture.root()),
        first,
        "the same reader, every read"
    );
    // An object written inside the scope is found by the reader that started before it.
    let (later, _, _) = closure("written later");
    fixture
        .store
        .write_objects(std::slice::from_ref(&later), soon())
        .expect("writes");
    assert!(read(later.id)[0].is_some());
    fixture.store.end_reads();
    assert_eq!(batch_readers(fixture.root()), Vec::<u32>::new());

    // After the scope, a read sees the object database as it is now, not as a reader that
    // held it open saw it: the pack removed is missing.
    fixture.store.begin_reads();
    assert!(read(later.id)[0].is_some());
    fixture.store.end_reads();
    for extension in ["pack", "idx", "rev"] {
        let _ = fs::remove_file(pack_file(fixture.root(), &[&later], extension));
    }
    assert!(read(later.id)[0].is_none());
}

#[test]
fn a_read_that_hangs_times_out() {
    let fixture = marked();
    let blob = EncodedObject::new(ObjectKind::Blob, b"fifo\n".to_vec());
    let other = commit_in(&fixture.store, "beside the fifo");
    let (dir, file) = loose_paths(fixture.root(), &blob);
    fs::create_dir(&dir).expect("mkdir");
    nix::unistd::mkfifo(&file, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    fixture.store.begin_reads();
    let started = Instant::now();
    assert_code(
        fixture.store.read_objects(
            &[blob.id],
            1 << 20,
            Instant::now() + Duration::from_millis(500),
        ),
        "timeout",
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // The reader that hung was killed, and the scope's next read gets a fresh one.
    assert_eq!(batch_readers(fixture.root()), Vec::<u32>::new());
    assert!(
        fixture
            .store
            .read_objects(&[other], 1 << 20, soon())
            .expect("reads")[0]
            .is_some()
    );
    fixture.store.end_reads();
    assert_code(
        fixture
            .store
            .read_ref(&name("refs/heads/main"), Instant::now()),
        "timeout",
    );
}

#[test]
fn a_git_that_is_not_roots_is_refused() {
    let default = factory();
    let bytes = fs::read(default.git_path()).expect("reads git");
    assert_eq!(default.git_digest(), Digest::of(&bytes));

    let place = place();
    let copy = place.dir.path().join("git");
    fs::copy(default.git_path(), &copy).expect("copies");
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).expect("chmod");
    nix::unistd::chown(&copy, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
    match GitCliFactory::new(GitCliConfig {
        git: Some(copy.clone()),
    }) {
        Err(ObjectStoreError::Unavailable { reason }) => {
            assert!(reason.contains("owned by root"), "{reason}");
        }
        other => panic!("expected unavailable, got {other:?}"),
    }
    // Root's, but group-writable.
    nix::unistd::chown(&copy, Some(nix::unistd::Uid::from_raw(0)), None).expect("chown");
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o775)).expect("chmod");
    match GitCliFactory::new(GitCliConfig {
        git: Some(copy.clone()),
    }) {
        Err(ObjectStoreError::Unavailable { reason }) => {
            assert!(reason.contains("not be writable"), "{reason}");
        }
        other => panic!("expected unavailable, got {other:?}"),
    }
    // Root's and 0755, but in a directory tree someone else can write (/tmp).
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).expect("chmod");
    match GitCliFactory::new(GitCliConfig { git: Some(copy) }) {
        Err(ObjectStoreError::Unavailable { reason }) => {
            assert!(reason.contains("every directory above"), "{reason}");
        }
        other => panic!("expected unavailable, got {other:?}"),
    }
    assert_code(
        GitCliFactory::new(GitCliConfig {
            git: Some(place.dir.path().join("absent")),
        }),
        "unavailable",
    );
}

#[test]
fn stores_are_usable_through_the_trait_objects() {
    let place = place();
    let factory = factory();
    let store: Box<dyn ObjectStore> = factory.create(&place.root, soon()).expect("creates");
    let (blob, tree, commit) = closure("boxed");
    store
        .write_objects(&[blob, tree, commit.clone()], soon())
        .expect("writes");
    assert_eq!(
        store
            .create_ref(&name("refs/heads/main"), &commit.id, soon())
            .expect("starts"),
        RefUpdate::Applied
    );
    store.mark(MARKER, soon()).expect("marks");
    let identity = store.root().clone();
    drop(store);
    let reopened = factory.open(&identity, MARKER, soon()).expect("opens");
    assert_eq!(
        reopened
            .read_ref(&name("refs/heads/main"), soon())
            .expect("reads"),
        Some(RefValue::Direct(commit.id))
    );
    assert_code(reopened.mark(MARKER, soon()), "invalid-input");
}

/// The `pack-*.pack` files of `root`.
fn pack_count(root: &Path) -> usize {
    dir_names(&root.join("objects/pack"))
        .iter()
        .filter(|name| name.starts_with("pack-") && name.ends_with(".pack"))
        .count()
}

/// The names in the directory `dir`.
fn dir_names(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .expect("lists")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// Writes `count` blobs, one write (one pack) each, named by `tag`; no ref names any.
fn write_blobs(store: &GitCliStore, tag: &str, count: usize) -> Vec<EncodedObject> {
    (0..count)
        .map(|at| {
            let blob = EncodedObject::new(ObjectKind::Blob, format!("{tag} {at}\n").into_bytes());
            store
                .write_objects(std::slice::from_ref(&blob), soon())
                .expect("writes");
            blob
        })
        .collect()
}

fn assert_all_read(store: &GitCliStore, blobs: &[EncodedObject]) {
    let ids: Vec<ObjectId> = blobs.iter().map(|blob| blob.id).collect();
    let read = store.read_objects(&ids, 1 << 20, soon()).expect("reads");
    for (blob, answer) in blobs.iter().zip(read) {
        assert_eq!(
            answer.map(|object| object.body),
            Some(blob.body.clone()),
            "{}",
            blob.id
        );
    }
}

/// The pack lock, as a concurrent roll-up (exclusive) or write (shared) holds it.
fn hold_pack_lock(root: &Path, arg: nix::fcntl::FlockArg) -> nix::fcntl::Flock<fs::File> {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(root.join("objects/info/sf-packs.lock"))
        .expect("opens the lock");
    nix::fcntl::Flock::lock(file, arg).expect("locks")
}

#[test]
fn packs_past_the_bound_are_rolled_up_and_every_object_is_kept() {
    let fixture = marked();
    let before = top_level(fixture.root());
    let first = write_blobs(&fixture.store, "first", sf_git_cli::MAX_PACKS);
    assert_eq!(pack_count(fixture.root()), sf_git_cli::MAX_PACKS);
    // One more pack is past the bound: the write rolls the small packs up.
    let more = write_blobs(&fixture.store, "more", 1);
    let after = pack_count(fixture.root());
    assert!(after < sf_git_cli::MAX_PACKS / 2, "{after} packs");
    // Every object is still there, though no ref names any of them, and the root is still
    // exactly the one created (the reads check it).
    assert_all_read(&fixture.store, &first);
    assert_all_read(&fixture.store, &more);
    assert_eq!(top_level(fixture.root()), before);
    let leftovers: Vec<String> = dir_names(&fixture.root().join("objects/info"))
        .into_iter()
        .filter(|name| name != "sf-packs.lock")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn no_roll_up_while_a_write_holds_the_pack_lock_and_no_write_while_a_roll_up_does() {
    let fixture = marked();
    let writing = hold_pack_lock(fixture.root(), nix::fcntl::FlockArg::LockSharedNonblock);
    // Another write is under way: writes share the lock, and none rolls up.
    let blobs = write_blobs(&fixture.store, "shared", sf_git_cli::MAX_PACKS + 2);
    assert_eq!(pack_count(fixture.root()), sf_git_cli::MAX_PACKS + 2);
    drop(writing);
    let blobs = [blobs, write_blobs(&fixture.store, "alone", 1)].concat();
    assert!(pack_count(fixture.root()) < sf_git_cli::MAX_PACKS);
    assert_all_read(&fixture.store, &blobs);
    // A roll-up under way: a write waits for it, within its deadline.
    let rolling = hold_pack_lock(fixture.root(), nix::fcntl::FlockArg::LockExclusiveNonblock);
    let blob = EncodedObject::new(ObjectKind::Blob, b"waits\n".to_vec());
    let result = fixture.store.write_objects(
        std::slice::from_ref(&blob),
        Instant::now() + Duration::from_millis(200),
    );
    assert_code(result, "timeout");
    drop(rolling);
    fixture
        .store
        .write_objects(std::slice::from_ref(&blob), soon())
        .expect("writes once the roll-up ended");
    assert_all_read(&fixture.store, &[blob]);
}
