//! The dependency environment store over real directories: a tree of files, an executable, a
//! binary file, links (absolute and relative), a hard link and an empty directory stored
//! read-only under a digest recomputed here from the listing rules, the same in two stores;
//! replays; a name never re-pointed; corruption made from outside reported and left as it
//! is; refused sources, limits, and a source changed while it is read, each leaving nothing
//! in `tmp/`; the store's trust rule; and a real Python venv.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sf_host::canonical::{self, Digest, Value, object};
use sf_host::environment_store::{ENVIRONMENT_PROTOCOL, EnvironmentLimits, EnvironmentStore};

/// A private temporary directory whose read-only store trees are made writable again when
/// it is dropped, so that it can be removed by a user other than root.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        fn writable(dir: &Path) {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
            for item in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if item.file_type().is_ok_and(|kind| kind.is_dir()) {
                    writable(&item.path());
                }
            }
        }
        writable(self.0.path());
    }
}

/// A fresh [`Scratch`] directory and its canonical path.
fn private_dir() -> (Scratch, PathBuf) {
    let (dir, path) = sf_test_support::private_dir();
    (Scratch(dir), path)
}

fn write(path: &Path, bytes: &[u8], mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const BLOB: &[u8] = b"\x00\x01\xfe\xff binary \x00 bytes\r\n\x7f";

/// A source tree holding every kind of entry an environment keeps.
fn source_tree(root: &Path) -> PathBuf {
    let source = root.join("env");
    write(&source.join("README.txt"), b"hello\n", 0o644);
    write(&source.join("bin/tool"), b"#!/bin/sh\necho tool\n", 0o755);
    // Any execute bit makes an executable.
    write(&source.join("bin/group-run"), b"#!/bin/sh\n", 0o650);
    // Sorts between `bin` and `bin/…` by path bytes ('-' < '/').
    write(&source.join("bin-notes"), b"notes", 0o600);
    write(&source.join("data/blob.bin"), BLOB, 0o444);
    std::fs::hard_link(source.join("data/blob.bin"), source.join("data/again.bin")).unwrap();
    symlink("/usr/bin/python3.11", source.join("bin/python3")).unwrap();
    std::fs::create_dir_all(source.join("lib")).unwrap();
    symlink("../data/blob.bin", source.join("lib/current")).unwrap();
    std::fs::create_dir_all(source.join("empty")).unwrap();
    source
}

/// The listing document of the tree at `root` bound at `at`, computed here from the rules
/// (not by the store's code): every entry by relative path, sorted by path bytes.
fn expected_listing(root: &Path, at: &str) -> Value {
    let mut entries = Vec::new();
    collect(root, "", &mut entries);
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    object([
        ("protocol", Value::from(ENVIRONMENT_PROTOCOL)),
        ("at", Value::from(at)),
        (
            "entries",
            Value::Array(entries.into_iter().map(|(_, entry)| entry).collect()),
        ),
    ])
}

fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Value)>) {
    for item in std::fs::read_dir(dir).unwrap() {
        let item = item.unwrap();
        let name = item.file_name().into_string().unwrap();
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let meta = std::fs::symlink_metadata(item.path()).unwrap();
        let entry = if meta.file_type().is_symlink() {
            let target = std::fs::read_link(item.path()).unwrap();
            object([
                ("path", Value::from(path.as_str())),
                ("kind", Value::from("symlink")),
                ("target", Value::from(target.to_str().unwrap())),
            ])
        } else if meta.is_dir() {
            collect(&item.path(), &path, out);
            object([
                ("path", Value::from(path.as_str())),
                ("kind", Value::from("dir")),
            ])
        } else {
            let bytes = std::fs::read(item.path()).unwrap();
            let kind = if meta.mode() & 0o111 != 0 {
                "executable"
            } else {
                "file"
            };
            object([
                ("path", Value::from(path.as_str())),
                ("kind", Value::from(kind)),
                ("sha256", Value::from(Digest::of(&bytes).to_string())),
                ("size", Value::Integer(bytes.len() as i64)),
            ])
        };
        out.push((path, entry));
    }
}

fn entries_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|item| item.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Asserts that nothing of a refused add is left: `tmp/`, `objects/` and `names/` empty.
fn assert_nothing_kept(store: &EnvironmentStore) {
    for part in ["tmp", "objects", "names"] {
        assert_eq!(
            entries_in(&store.root().join(part)),
            Vec::<String>::new(),
            "{part}/"
        );
    }
}

fn open_store(root: &Path, name: &str) -> EnvironmentStore {
    EnvironmentStore::open(&root.join(name)).unwrap()
}

fn limits() -> EnvironmentLimits {
    EnvironmentLimits::default()
}

#[test]
fn a_tree_is_stored_read_only_under_the_digest_of_its_listing() {
    let (_dir, root) = private_dir();
    let source = source_tree(&root);
    let at = source.to_str().unwrap();
    let listing = canonical::encode(&expected_listing(&source, at)).unwrap();
    let digest = Digest::of(&listing);

    let first = open_store(&root, "store-1");
    let entry = first.add("demo", &source, limits()).unwrap();
    assert_eq!(entry.digest, digest);
    assert_eq!(entry.name.as_deref(), Some("demo"));
    assert_eq!(entry.at, source);
    assert_eq!(
        entry.tree,
        first.root().join("objects").join(digest.hex()).join("tree")
    );
    // README, bin, bin/group-run, bin/python3, bin/tool, bin-notes, data, data/again.bin,
    // data/blob.bin, empty, lib, lib/current.
    assert_eq!(entry.files, 12);
    assert_eq!(
        entry.bytes,
        (6 + 20 + 10 + 5 + 2 * BLOB.len()) as u64,
        "file contents only"
    );
    // The same tree in another store gives the same digest.
    let second = open_store(&root, "store-2");
    assert_eq!(
        second.add("other", &source, limits()).unwrap().digest,
        digest
    );

    // The object: the listing document (whose own sha256 is the digest) and the tree.
    let object = first.root().join("objects").join(digest.hex());
    assert_eq!(entries_in(&object), ["listing.json", "tree"]);
    assert_eq!(std::fs::read(object.join("listing.json")).unwrap(), listing);
    let text = String::from_utf8(listing.clone()).unwrap();
    assert!(
        text.starts_with(&format!(
            r#"{{"at":"{at}","entries":[{{"kind":"file","path":"README.txt","#
        )),
        "{text}"
    );
    assert!(
        text.contains(r#"{"kind":"symlink","path":"bin/python3","target":"/usr/bin/python3.11"}"#),
        "{text}"
    );
    assert!(text.contains(r#"{"kind":"dir","path":"empty"}"#), "{text}");
    assert!(
        text.ends_with(r#"],"protocol":"sf-environment/1"}"#),
        "{text}"
    );
    let mode = |path: &Path| std::fs::symlink_metadata(path).unwrap().mode() & 0o7777;
    assert_eq!(mode(&object.join("listing.json")), 0o444);
    assert_eq!(mode(&object), 0o555);
    let tree = &entry.tree;
    for dir in ["", "bin", "data", "empty", "lib"] {
        assert_eq!(mode(&tree.join(dir)), 0o555, "{dir}/");
    }
    for (file, expected) in [
        ("README.txt", 0o444),
        ("bin-notes", 0o444),
        ("bin/tool", 0o555),
        ("bin/group-run", 0o555),
        ("data/blob.bin", 0o444),
    ] {
        assert_eq!(mode(&tree.join(file)), expected, "{file}");
    }
    assert_eq!(std::fs::read(tree.join("data/blob.bin")).unwrap(), BLOB);
    // The hard link is two files in the store.
    let blob = std::fs::metadata(tree.join("data/blob.bin")).unwrap();
    let again = std::fs::metadata(tree.join("data/again.bin")).unwrap();
    assert_ne!(blob.ino(), again.ino());
    assert_eq!(blob.nlink(), 1);
    for (link, target) in [
        ("bin/python3", "/usr/bin/python3.11"),
        ("lib/current", "../data/blob.bin"),
    ] {
        let meta = std::fs::symlink_metadata(tree.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link}");
        assert_eq!(
            std::fs::read_link(tree.join(link)).unwrap(),
            Path::new(target)
        );
    }
    let euid = nix::unistd::geteuid().as_raw();
    assert_eq!(
        std::fs::metadata(tree.join("README.txt")).unwrap().uid(),
        euid
    );
    let name = first.root().join("names/demo");
    assert_eq!(
        std::fs::read_to_string(&name).unwrap(),
        format!("{digest}\n")
    );
    assert_eq!(mode(&name), 0o444);
    assert_eq!(entries_in(&first.root().join("tmp")), Vec::<String>::new());

    // Replays: the same name and tree, and another name for the same tree.
    assert_eq!(first.add("demo", &source, limits()).unwrap(), entry);
    let renamed = first.add("demo-2", &source, limits()).unwrap();
    assert_eq!(renamed.digest, digest);
    assert_eq!(renamed.name.as_deref(), Some("demo-2"));
    assert_eq!(entries_in(&first.root().join("objects")), [digest.hex()]);
    assert_eq!(entries_in(&first.root().join("tmp")), Vec::<String>::new());
    assert_eq!(
        first.names().unwrap(),
        [
            ("demo".to_owned(), digest.clone()),
            ("demo-2".to_owned(), digest.clone())
        ]
    );
    assert_eq!(first.resolve("demo").unwrap(), entry);
    let verified = first.verify(&digest).unwrap();
    assert_eq!(verified.name, None);
    assert_eq!((verified.at, verified.files), (entry.at, entry.files));
    // A reopened store reads the same.
    let reopened = EnvironmentStore::open_existing(first.root()).unwrap();
    assert_eq!(reopened.resolve("demo-2").unwrap(), renamed);
}

#[test]
fn a_name_is_never_re_pointed() {
    let (_dir, root) = private_dir();
    let source = source_tree(&root);
    let store = open_store(&root, "store");
    let first = store.add("env", &source, limits()).unwrap();
    write(&source.join("added.txt"), b"new", 0o644);
    let error = store.add("env", &source, limits()).unwrap_err();
    assert_eq!(error.code(), "conflict", "{error}");
    assert!(error.to_string().contains("new name"), "{error}");
    // Found before the object was published: nothing new is kept.
    assert_eq!(
        entries_in(&store.root().join("objects")),
        [first.digest.hex()]
    );
    assert_eq!(entries_in(&store.root().join("tmp")), Vec::<String>::new());
    assert_eq!(store.resolve("env").unwrap(), first);
    let second = store.add("env-2", &source, limits()).unwrap();
    assert_ne!(second.digest, first.digest);
    assert_eq!(store.names().unwrap().len(), 2);
}

/// A fresh store holding the source tree under `env`, with the stored tree's path.
fn stored() -> (Scratch, EnvironmentStore, Digest, PathBuf, PathBuf) {
    let (dir, root) = private_dir();
    let source = source_tree(&root);
    let store = open_store(&root, "store");
    let entry = store.add("env", &source, limits()).unwrap();
    // Verified once for a run, so that its stamps are recorded and every change below is
    // looked for through them as well as by a full re-hash.
    store.verify_for_use(&entry.digest).unwrap();
    assert!(stamps_of(&store, &entry.digest).is_some());
    (dir, store, entry.digest, entry.tree, source)
}

/// The stamp document recorded for `digest`, if any.
fn stamps_of(store: &EnvironmentStore, digest: &Digest) -> Option<String> {
    std::fs::read_to_string(store.root().join("stamps").join(digest.hex())).ok()
}

fn assert_corrupt(store: &EnvironmentStore, digest: &Digest, needle: &str) {
    for error in [
        store.verify_for_use(digest).unwrap_err(),
        store.verify(digest).unwrap_err(),
        store.resolve("env").unwrap_err(),
    ] {
        assert_eq!(error.code(), "corrupt", "{error}");
        assert!(error.to_string().contains(needle), "{needle}: {error}");
    }
}

#[test]
fn a_changed_byte_or_mode_is_corrupt_and_left_as_it_is() {
    let (_dir, store, digest, tree, source) = stored();
    let file = tree.join("data/blob.bin");
    chmod(&file, 0o644);
    assert_corrupt(&store, &digest, "mode 644");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[3] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    chmod(&file, 0o444);
    assert_corrupt(&store, &digest, "data/blob.bin: listed as a file of");
    // Left as it is, and never repaired by adding the same tree again.
    let error = store.add("env", &source, limits()).unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    assert_corrupt(&store, &digest, "data/blob.bin");
    assert_eq!(entries_in(&store.root().join("tmp")), Vec::<String>::new());
    // An executable bit taken away is a change of the tree too.
    let (_dir, store, digest, tree, _) = stored();
    chmod(&tree.join("bin/tool"), 0o444);
    assert_corrupt(&store, &digest, "bin/tool: listed as an executable");
}

/// A verification before a run skips the re-hash only for a tree whose every entry is as the
/// last full re-hash found it: a file written with its size and modification time put back
/// still moved its change time, and is found; a file only touched is re-hashed, found
/// unchanged, and its new stamps recorded; a stamp document that is not this user's is not
/// believed.
#[test]
fn a_verification_before_a_run_trusts_only_stamps_of_an_unchanged_tree() {
    let (_dir, store, digest, tree, _) = stored();
    let recorded = stamps_of(&store, &digest).unwrap();
    assert!(
        recorded.starts_with("sf-environment-stamps/1\n"),
        "{recorded}"
    );
    assert!(recorded.contains(" data/blob.bin\n"), "{recorded}");
    assert_eq!(store.verify_for_use(&digest).unwrap().digest, digest);
    assert_eq!(stamps_of(&store, &digest).unwrap(), recorded);

    // Touched: the same bytes, new times. Re-hashed, verified, stamped again.
    let file = tree.join("data/blob.bin");
    let set_modified = |when: std::time::SystemTime| {
        chmod(&file, 0o644);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(when)
            .unwrap();
        chmod(&file, 0o444);
    };
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    set_modified(modified + std::time::Duration::from_secs(60));
    assert_eq!(store.verify_for_use(&digest).unwrap().digest, digest);
    let touched = stamps_of(&store, &digest).unwrap();
    assert_ne!(touched, recorded);

    // A stamp document writable by others is not believed: the tree is re-hashed and the
    // document written again as this user's own.
    let document = store.root().join("stamps").join(digest.hex());
    chmod(&document, 0o666);
    assert_eq!(store.verify_for_use(&digest).unwrap().digest, digest);
    assert_eq!(
        std::fs::metadata(&document).unwrap().permissions().mode() & 0o777,
        0o444
    );

    // Written, the size and the modification time put back: corrupt.
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[0] ^= 1;
    chmod(&file, 0o644);
    std::fs::write(&file, &bytes).unwrap();
    chmod(&file, 0o444);
    set_modified(modified);
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        modified
    );
    assert_corrupt(&store, &digest, "data/blob.bin");
}

#[test]
fn an_added_entry_or_a_replaced_directory_is_corrupt() {
    let (_dir, store, digest, tree, _) = stored();
    chmod(&tree.join("empty"), 0o755);
    write(&tree.join("empty/planted"), b"x", 0o444);
    chmod(&tree.join("empty"), 0o555);
    assert_corrupt(&store, &digest, "one entry more than its listing names");
    assert!(tree.join("empty/planted").exists(), "left as it is");

    let (_dir, store, digest, tree, _) = stored();
    chmod(&tree, 0o755);
    std::fs::remove_file(tree.join("README.txt")).unwrap();
    write(&tree.join("READ.txt"), b"hello\n", 0o444);
    chmod(&tree, 0o555);
    assert_corrupt(&store, &digest, "READ.txt: in the tree, but not listed");

    // A directory replaced by a link to a copy of itself.
    let (dir, store, digest, tree, _) = stored();
    chmod(&tree, 0o755);
    let elsewhere = dir.path().join("moved-lib");
    // Moving a directory rewrites its `..`, so it must be writable for a moment.
    chmod(&tree.join("lib"), 0o755);
    std::fs::rename(tree.join("lib"), &elsewhere).unwrap();
    chmod(&elsewhere, 0o555);
    symlink(&elsewhere, tree.join("lib")).unwrap();
    chmod(&tree, 0o555);
    assert_corrupt(
        &store,
        &digest,
        "lib: listed as a directory, but the tree holds a symbolic link",
    );
    assert!(
        std::fs::symlink_metadata(tree.join("lib"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A name file that no longer holds a digest.
    let (_dir, store, _, _, _) = stored();
    let name = store.root().join("names/env");
    chmod(&name, 0o644);
    std::fs::write(&name, "sha256:nope\n").unwrap();
    chmod(&name, 0o444);
    let error = store.resolve("env").unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(error.to_string().contains("names/env"), "{error}");
}

/// The files of a stored tree are hashed on several threads, a bounded queue of them at a
/// time: in a tree of more files than the queue holds, spread over many directories, the
/// tree whole verifies, a changed byte is found and named, and of two changes the earlier in
/// path order is the one named.
#[test]
fn a_change_in_a_tree_of_many_files_is_found_whichever_thread_hashes_it() {
    let (_dir, root) = private_dir();
    let source = root.join("wide");
    for dir in 0..40 {
        for file in 0..25 {
            write(
                &source.join(format!("d{dir:02}/f{file:02}")),
                format!("{dir} {file}\n").repeat(dir + file + 1).as_bytes(),
                0o644,
            );
        }
    }
    write(&source.join("big.bin"), &vec![7u8; 3 << 20], 0o644);
    let store = open_store(&root, "store");
    let entry = store.add("wide", &source, limits()).unwrap();
    assert_eq!(store.verify(&entry.digest).unwrap().digest, entry.digest);
    let changed = entry.tree.join("d31/f17");
    let mut bytes = std::fs::read(&changed).unwrap();
    bytes[0] ^= 1;
    chmod(&changed, 0o644);
    std::fs::write(&changed, &bytes).unwrap();
    chmod(&changed, 0o444);
    let error = store.verify(&entry.digest).unwrap_err();
    assert_eq!(error.code(), "corrupt", "{error}");
    assert!(error.to_string().contains("d31/f17"), "{error}");
    let earlier = entry.tree.join("d05/f03");
    chmod(&earlier, 0o644);
    std::fs::write(&earlier, b"other\n").unwrap();
    chmod(&earlier, 0o444);
    let error = store.verify(&entry.digest).unwrap_err();
    assert!(error.to_string().contains("d05/f03"), "{error}");
}

#[test]
fn unknown_names_and_digests_are_missing() {
    let (_dir, store, _, _, _) = stored();
    assert_eq!(store.resolve("nothing").unwrap_err().code(), "missing");
    let error = store.verify(&Digest::of(b"no such listing")).unwrap_err();
    assert_eq!(error.code(), "missing", "{error}");
    assert!(error.to_string().contains("sha256:"), "{error}");
    let (_dir, root) = private_dir();
    let error = EnvironmentStore::open_existing(&root.join("none")).unwrap_err();
    assert_eq!(error.code(), "missing", "{error}");
    assert!(!root.join("none").exists(), "nothing created");
}

#[test]
fn refused_sources_name_the_path_and_leave_nothing() {
    let (_dir, root) = private_dir();
    let store = open_store(&root, "store");
    let refuse = |source: &Path, code: &str, needle: &str| {
        let error = store.add("env", source, limits()).unwrap_err();
        assert_eq!(error.code(), code, "{}: {error}", source.display());
        assert!(error.to_string().contains(needle), "{needle}: {error}");
        assert_nothing_kept(&store);
    };

    let fifo = source_tree(&root.join("fifo"));
    nix::unistd::mkfifo(
        &fifo.join("lib/pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    refuse(
        &fifo,
        "not-regular",
        "lib/pipe: is a device, socket or pipe",
    );

    let setuid = source_tree(&root.join("setuid"));
    chmod(&setuid.join("bin/tool"), 0o4755);
    refuse(&setuid, "invalid-input", "bin/tool");

    let odd = source_tree(&root.join("odd"));
    std::fs::write(odd.join(OsStr::from_bytes(b"bad\xffname")), "x").unwrap();
    refuse(&odd, "invalid-input", "not UTF-8");

    let linked = root.join("linked");
    std::fs::create_dir(&linked).unwrap();
    let real = source_tree(&root.join("real"));
    symlink(&real, linked.join("env")).unwrap();
    refuse(
        &linked.join("env"),
        "symlink",
        &linked.join("env").display().to_string(),
    );
    symlink(root.join("real"), root.join("through")).unwrap();
    refuse(&root.join("through/env"), "symlink", "through");

    refuse(Path::new("relative/env"), "invalid-input", "absolute");
    refuse(&real.join("../env"), "invalid-input", "`..`");
    refuse(&real.join("./bin"), "invalid-input", "`.`");
    refuse(&root.join("absent"), "not-a-directory", "absent");

    for name in [
        "",
        "Upper",
        "-dash",
        ".dot",
        "a/b",
        "sp ace",
        &"x".repeat(65),
    ] {
        let error = store.add(name, &real, limits()).unwrap_err();
        assert_eq!(error.code(), "invalid-input", "{name:?}");
        assert!(error.to_string().contains("a name is 1 to 64"), "{error}");
        assert_eq!(store.resolve(name).unwrap_err().code(), "invalid-input");
    }
    assert_nothing_kept(&store);
    assert!(store.add(&"x".repeat(64), &real, limits()).is_ok());
    assert!(store.add("0.py_env-1", &real, limits()).is_ok());
}

#[test]
fn limits_are_counted_while_walking() {
    let (_dir, root) = private_dir();
    let store = open_store(&root, "store");
    let source = source_tree(&root);
    let whole = EnvironmentLimits {
        files: 12,
        bytes: (41 + 2 * BLOB.len()) as u64,
    };
    for (limits, needle) in [
        (
            EnvironmentLimits {
                files: whole.files - 1,
                ..whole
            },
            "more than 11 entries",
        ),
        (
            EnvironmentLimits {
                bytes: whole.bytes - 1,
                ..whole
            },
            "bytes of files, the limit",
        ),
        (
            EnvironmentLimits { files: 0, ..whole },
            "more than 0 entries",
        ),
    ] {
        let error = store.add("env", &source, limits).unwrap_err();
        assert_eq!(error.code(), "too-large", "{error}");
        assert!(error.to_string().contains(needle), "{error}");
        assert!(
            error.to_string().contains(source.to_str().unwrap()),
            "{error}"
        );
        assert_nothing_kept(&store);
    }
    let entry = store.add("env", &source, whole).unwrap();
    assert_eq!((entry.files, entry.bytes), (whole.files, whole.bytes));
    assert_eq!(
        EnvironmentLimits::default(),
        EnvironmentLimits {
            files: 200_000,
            bytes: 8 << 30
        }
    );
}

#[test]
fn a_source_changed_while_it_is_read_is_refused() {
    let (_dir, root) = private_dir();
    let store = open_store(&root, "store");
    let source = source_tree(&root);
    // Enough bytes that the copy takes a while.
    let big: Vec<u8> = (0..8 << 20).map(|n: u32| (n % 253) as u8).collect();
    write(&source.join("data/large.bin"), &big, 0o644);
    let log = source.join("data/growing.log");
    write(&log, b"", 0o644);
    let stop = Arc::new(AtomicBool::new(false));
    let appended = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, appended, log) = (Arc::clone(&stop), Arc::clone(&appended), log.clone());
        std::thread::spawn(move || {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            while !stop.load(Ordering::Relaxed) {
                file.write_all(b"line\n").unwrap();
                appended.store(true, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    while !appended.load(Ordering::Relaxed) {
        std::thread::yield_now();
    }
    let outcome = store.add("env", &source, limits());
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let error = outcome.unwrap_err();
    assert_eq!(error.code(), "changed-while-read", "{error}");
    assert!(error.to_string().contains("growing.log"), "{error}");
    assert_nothing_kept(&store);
    // Once quiet, the same tree is stored.
    assert!(store.add("env", &source, limits()).is_ok());
}

#[test]
fn the_store_keeps_its_trust_rule() {
    let (_dir, root) = private_dir();
    let store = open_store(&root, "store");
    let source = source_tree(&root);
    for (part, mode) in [
        ("", 0o755),
        ("objects", 0o755),
        ("names", 0o755),
        ("tmp", 0o700),
    ] {
        assert_eq!(
            std::fs::metadata(store.root().join(part)).unwrap().mode() & 0o7777,
            mode,
            "{part}"
        );
    }
    // The root writable by group.
    chmod(store.root(), 0o775);
    let error = store.add("env", &source, limits()).unwrap_err();
    assert_eq!(error.code(), "unsafe-store", "{error}");
    assert!(EnvironmentStore::open(store.root()).is_err());
    chmod(store.root(), 0o755);
    // tmp readable by others.
    chmod(&store.root().join("tmp"), 0o755);
    assert_eq!(
        store.add("env", &source, limits()).unwrap_err().code(),
        "unsafe-store"
    );
    chmod(&store.root().join("tmp"), 0o700);
    // A directory above writable by others (not sticky).
    let open = root.join("open");
    std::fs::create_dir(&open).unwrap();
    chmod(&open, 0o777);
    let error = EnvironmentStore::open(&open.join("store")).unwrap_err();
    assert_eq!(error.code(), "unsafe-store", "{error}");
    assert!(
        error.to_string().contains(open.to_str().unwrap()),
        "{error}"
    );
    assert!(!open.join("store").exists(), "nothing created below it");
    // ... but a sticky one, like /tmp, is allowed.
    chmod(&open, 0o1777);
    assert!(EnvironmentStore::open(&open.join("store")).is_ok());
    // The store reached through a link.
    symlink(store.root(), root.join("link")).unwrap();
    let error = EnvironmentStore::open(&root.join("link")).unwrap_err();
    assert_eq!(error.code(), "unsafe-store", "{error}");
    assert_eq!(
        EnvironmentStore::open(Path::new("relative"))
            .unwrap_err()
            .code(),
        "invalid-input"
    );
    // The root replaced after it was opened (the old one kept, so the inode is not reused).
    std::fs::rename(store.root(), root.join("old-store")).unwrap();
    EnvironmentStore::open(store.root()).unwrap();
    let error = store.add("env", &source, limits()).unwrap_err();
    assert_eq!(error.code(), "unavailable", "{error}");
    assert!(error.to_string().contains("replaced"), "{error}");
    assert_eq!(store.names().unwrap_err().code(), "unavailable");
}

#[test]
fn a_real_venv_keeps_its_links_and_its_configuration() {
    let (_dir, root) = private_dir();
    let venv = root.join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .expect("python3 runs");
    assert!(
        made.status.success(),
        "python3 -m venv: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let store = open_store(&root, "store");
    let entry = store.add("venv", &venv, limits()).unwrap();
    assert_eq!(entry.at, venv);
    let link = entry.tree.join("bin/python3");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        std::fs::read_link(venv.join("bin/python3")).unwrap()
    );
    assert_eq!(
        std::fs::read(entry.tree.join("pyvenv.cfg")).unwrap(),
        std::fs::read(venv.join("pyvenv.cfg")).unwrap()
    );
    let config = std::fs::read_to_string(venv.join("pyvenv.cfg")).unwrap();
    assert!(config.contains("home = "), "{config}");
    let listing = canonical::encode(&expected_listing(&venv, venv.to_str().unwrap())).unwrap();
    assert_eq!(entry.digest, Digest::of(&listing));
    assert_eq!(store.verify(&entry.digest).unwrap().files, entry.files);
    // Each file keeps its modification time (Python compares a `.pyc` with it).
    let modified = |path: &Path| std::fs::metadata(path).unwrap().modified().unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::new(1_000_000_000, 5);
    let touched = root.join("touched");
    std::fs::create_dir(&touched).unwrap();
    write(&touched.join("mod.py"), b"x = 1\n", 0o644);
    std::fs::File::options()
        .write(true)
        .open(touched.join("mod.py"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let kept = store.add("touched", &touched, limits()).unwrap();
    assert_eq!(modified(&kept.tree.join("mod.py")), old);
    assert_eq!(
        modified(&entry.tree.join("pyvenv.cfg")),
        modified(&venv.join("pyvenv.cfg"))
    );
}

/// Two trees built for one path, and a tree built for another: the first path at which two
/// stored environments differ is named (a changed file, an added one, a mode), `""` when only
/// the path they are bound at differs, and nothing for the same environment. Builds are
/// added this way (`add_built`), bound at a path other than their source's.
#[test]
fn the_first_difference_between_two_environments_is_named() {
    let (_dir, root) = private_dir();
    let store = open_store(&root, "store");
    let built = |name: &str, files: &[(&str, &[u8], u32)], at: &str| {
        let source = root.join(name);
        for (path, bytes, mode) in files {
            write(&source.join(path), bytes, *mode);
        }
        let (entry, _) = store
            .add_built(name, &source, Path::new(at), false, limits())
            .unwrap();
        assert_eq!(entry.at, Path::new(at));
        entry.digest
    };
    let base: &[(&str, &[u8], u32)] = &[
        ("bin/tool", b"#!/bin/sh\n", 0o755),
        ("lib/a.py", b"a = 1\n", 0o644),
        ("lib/z.py", b"z = 1\n", 0o644),
    ];
    let first = built("first", base, "/opt/sf-env/pip-1");
    let same = built("same", base, "/opt/sf-env/pip-1");
    assert_eq!(first, same);
    assert_eq!(store.first_difference(&first, &same).unwrap(), None);
    let changed = built(
        "changed",
        &[base[0], ("lib/a.py", b"a = 2\n", 0o644), base[2]],
        "/opt/sf-env/pip-1",
    );
    assert_eq!(
        store.first_difference(&first, &changed).unwrap().as_deref(),
        Some("lib/a.py")
    );
    let added = built(
        "added",
        &[base[0], base[1], ("lib/m.py", b"m\n", 0o644), base[2]],
        "/opt/sf-env/pip-1",
    );
    assert_eq!(
        store.first_difference(&first, &added).unwrap().as_deref(),
        Some("lib/m.py")
    );
    let moded = built(
        "moded",
        &[("bin/tool", b"#!/bin/sh\n", 0o644), base[1], base[2]],
        "/opt/sf-env/pip-1",
    );
    assert_eq!(
        store.first_difference(&first, &moded).unwrap().as_deref(),
        Some("bin/tool")
    );
    let elsewhere = built("elsewhere", base, "/opt/sf-env/pip-2");
    assert_eq!(
        store
            .first_difference(&first, &elsewhere)
            .unwrap()
            .as_deref(),
        Some("")
    );
}
