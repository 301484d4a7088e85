//! The directory-swap race: while sf reads a directory someone else can write (`sf exec
//! --program`, `--input`, `sf repo create --from`, `sf slice freeze`, an oats capability, a
//! dependency environment added to the store), a second thread swaps one of its
//! subdirectories for a symbolic link to a root-only directory holding a secret, in a tight
//! loop (`renameat2(RENAME_EXCHANGE)`, so the name is always one or the other). Thousands of
//! walks in process (the functions those commands call) and tens of runs of the built `sf`:
//! not one byte of the secret, nor a name from its directory, appears anywhere (results,
//! errors, stdout, stderr, objects in the created repository). A control shows the race is
//! real: a path-based open of a file below the swapped name, with `O_NOFOLLOW` as the earlier
//! walk used, does reach the secret.

use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::fcntl::{RenameFlags, renameat2};
use sf_host::source_dir::{read_snapshot_dir, read_source_dir};
use sf_tests::plugins::{Envelope, run_json, sf};

/// Walks in process per directory kind.
const WALKS: usize = 3000;
/// Runs of the built `sf` per command.
const RUNS: usize = 25;

/// A secret in a root-only directory, and a symbolic link to it ready to be swapped in.
struct Secret {
    marker: String,
    link: PathBuf,
}

/// The name of a file in the secret directory that no honest tree holds.
const SECRET_NAME: &str = "only-in-secret.txt";

impl Secret {
    fn new(root: &Path) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let marker = format!("SF-SECRET-{:x}-{nanos:x}", std::process::id());
        let dir = root.join("secret");
        std::fs::create_dir(&dir).unwrap();
        // The same name as the honest file, so a walk that followed the link would find it.
        std::fs::write(dir.join("a.txt"), format!("{marker}\n")).unwrap();
        std::fs::write(dir.join(SECRET_NAME), format!("{marker}\n")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = root.join("bait");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        Self { marker, link }
    }

    /// Panics when `bytes` hold the secret or a name from its directory.
    fn assert_absent(&self, bytes: &[u8], what: &str) {
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains(&self.marker) && !text.contains(SECRET_NAME),
            "the secret reached {what}: {text}"
        );
    }
}

/// A thread exchanging `dir` and `link` in a tight loop until dropped.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    dir: PathBuf,
    link: PathBuf,
}

impl Swapper {
    fn start(dir: &Path, link: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, swaps) = (stop.clone(), swaps.clone());
            let (dir, link) = (dir.to_owned(), link.to_owned());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    renameat2(None, &dir, None, &link, RenameFlags::RENAME_EXCHANGE)
                        .expect("exchange the directory and the link");
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        Self {
            stop,
            swaps,
            thread: Some(thread),
            dir: dir.to_owned(),
            link: link.to_owned(),
        }
    }

    fn swaps(&self) -> u64 {
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // Leave the honest directory in place.
        if self
            .dir
            .symlink_metadata()
            .is_ok_and(|meta| meta.is_symlink())
        {
            let _ = renameat2(
                None,
                &self.dir,
                None,
                &self.link,
                RenameFlags::RENAME_EXCHANGE,
            );
        }
    }
}

/// A work directory: `tree/` with `main.sh` and `sub/a.txt`, a secret and its link.
struct Work {
    _dir: tempfile::TempDir,
    root: PathBuf,
    tree: PathBuf,
    secret: Secret,
}

impl Work {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("sf-walk-race-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().canonicalize().unwrap();
        let tree = root.join("tree");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("sub/a.txt"), "public\n").unwrap();
        std::fs::write(tree.join("main.sh"), PRINT_EVERYTHING).unwrap();
        let secret = Secret::new(&root);
        Self {
            _dir: dir,
            root,
            tree,
            secret,
        }
    }

    fn swapper(&self) -> Swapper {
        Swapper::start(&self.tree.join("sub"), &self.secret.link)
    }
}

/// A program printing every file under /sf/program and /sf/input with shell builtins only.
const PRINT_EVERYTHING: &str = "\
for f in /sf/program/* /sf/program/*/* /sf/input/* /sf/input/*/*; do
  if [ -f \"$f\" ]; then
    printf '%s\\n' \"$f\"
    while IFS= read -r line; do printf '%s\\n' \"$line\"; done < \"$f\"
  fi
done
";

/// Runs `walk` [`WALKS`] times while the swapper runs; every outcome must be free of the
/// secret, and some must have met the swap (so the race was run, not dodged).
fn race_in_process<T: std::fmt::Debug>(
    work: &Work,
    walk: impl Fn(&Path) -> Result<Vec<T>, sf_host::source_dir::SourceDirError>,
) {
    let swapper = work.swapper();
    let mut refused = 0usize;
    let mut read = 0usize;
    for _ in 0..WALKS {
        match walk(&work.tree) {
            Ok(files) => {
                read += 1;
                work.secret
                    .assert_absent(format!("{files:?}").as_bytes(), "a walk's files");
            }
            Err(error) => {
                refused += 1;
                assert!(
                    matches!(
                        error.code(),
                        "symlink" | "changed-while-read" | "not-a-directory"
                    ),
                    "{error}"
                );
                work.secret
                    .assert_absent(error.to_string().as_bytes(), "a walk's error");
            }
        }
    }
    let swaps = swapper.swaps();
    drop(swapper);
    assert!(swaps > 100, "the swapper ran only {swaps} times");
    assert!(
        refused > 0,
        "no walk of {WALKS} met a swap ({read} read, {swaps} swaps)"
    );
}

#[test]
fn the_race_can_reach_the_secret_through_a_path() {
    // The control: a path re-resolved from the top, opened with O_NOFOLLOW (which guards the
    // last component only), follows the swapped-in link in the middle and reads the secret.
    let work = Work::new();
    let swapper = work.swapper();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut reached = false;
    while !reached && Instant::now() < deadline {
        if let Ok(text) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(work.tree.join("sub").join(SECRET_NAME))
            .and_then(std::io::read_to_string)
        {
            reached = text.contains(&work.secret.marker);
        }
    }
    drop(swapper);
    assert!(reached, "a path-based open never reached the secret in 5 s");
}

#[test]
fn snapshot_walks_never_follow_a_swapped_link() {
    // `sf exec --program`, `--input` and Slice inputs read through read_snapshot_dir.
    race_in_process(&Work::new(), read_snapshot_dir);
}

#[test]
fn source_walks_never_follow_a_swapped_link() {
    // `sf repo create --from` reads through read_source_dir.
    race_in_process(&Work::new(), |root| {
        read_source_dir(root, &sf_host::repository::REPOSITORY_LIMITS)
    });
}

#[test]
fn oats_artifact_walks_never_follow_a_swapped_link() {
    // An oats capability's integrity walk records links rather than refusing them, so the
    // swapped name may be recorded as a link (its target a path), never read through.
    let work = Work::new();
    let swapper = work.swapper();
    // Walks that met the swap: refused mid-walk, or recorded the link in the directory's place.
    let mut drifted = 0;
    for _ in 0..WALKS {
        match sf_oats::artifact::walk(&work.tree) {
            Ok(artifact) => {
                if matches!(
                    artifact.entries.get("sub"),
                    Some(sf_oats::artifact::Entry::Link { .. })
                ) {
                    drifted += 1;
                }
                for (path, entry) in &artifact.entries {
                    work.secret
                        .assert_absent(path.as_bytes(), "an artifact's paths");
                    if let sf_oats::artifact::Entry::File { content, .. } = entry {
                        work.secret.assert_absent(content, "an artifact's files");
                    }
                }
            }
            Err(error) => {
                drifted += 1;
                work.secret
                    .assert_absent(error.to_string().as_bytes(), "an artifact walk's error");
            }
        }
    }
    let swaps = swapper.swaps();
    drop(swapper);
    assert!(swaps > 100, "the swapper ran only {swaps} times");
    assert!(drifted > 0, "no walk of {WALKS} met a swap");
}

/// Adds to the dependency environment store per race: each add copies and syncs.
const ADDS: usize = 300;

#[test]
fn environment_adds_never_copy_a_swapped_link() {
    // `sf env add` copies the tree into the store; a link is kept as a link (its target a
    // path), never followed, and a tree that changed while it was copied is refused.
    use sf_host::environment_store::{EnvironmentLimits, EnvironmentStore};
    let work = Work::new();
    let store = EnvironmentStore::open(&work.root.join("store")).unwrap();
    let swapper = work.swapper();
    let mut drifted = 0;
    for n in 0..ADDS {
        match store.add(
            &format!("race-{n}"),
            &work.tree,
            EnvironmentLimits::default(),
        ) {
            Ok(entry) => {
                let sub = entry.tree.join("sub");
                let mut stored = vec![entry.tree.join("main.sh")];
                if sub.symlink_metadata().unwrap().is_symlink() {
                    drifted += 1;
                } else {
                    for item in std::fs::read_dir(&sub).unwrap() {
                        let item = item.unwrap();
                        work.secret.assert_absent(
                            item.file_name().as_encoded_bytes(),
                            "a stored environment's names",
                        );
                        stored.push(item.path());
                    }
                }
                for file in stored {
                    work.secret
                        .assert_absent(&std::fs::read(file).unwrap(), "a stored environment");
                }
                let listing = entry.tree.parent().unwrap().join("listing.json");
                work.secret
                    .assert_absent(&std::fs::read(listing).unwrap(), "a listing document");
            }
            Err(error) => {
                drifted += 1;
                assert!(
                    matches!(
                        error.code(),
                        "symlink" | "changed-while-read" | "not-a-directory"
                    ),
                    "{error}"
                );
                work.secret
                    .assert_absent(error.to_string().as_bytes(), "an add's error");
            }
        }
    }
    let swaps = swapper.swaps();
    drop(swapper);
    assert!(swaps > 100, "the swapper ran only {swaps} times");
    assert!(drifted > 0, "no add of {ADDS} met a swap");
    let tmp = std::fs::read_dir(store.root().join("tmp")).unwrap().count();
    assert_eq!(tmp, 0, "a refused add left its copy");
}

/// Runs `command` [`RUNS`] times while the swapper runs; `check` sees each envelope.
fn race_runs(work: &Work, mut command: impl FnMut(usize) -> Command, check: impl Fn(&Envelope)) {
    let swapper = work.swapper();
    let mut refused = 0;
    for n in 0..RUNS {
        let output = command(n).output().expect("running sf");
        work.secret.assert_absent(&output.stdout, "sf's stdout");
        work.secret.assert_absent(&output.stderr, "sf's stderr");
        let envelope = Envelope::parse(output);
        if envelope.json["ok"] == false {
            refused += 1;
            // A source holds links, but never one leaving the tree: the swapped-in link is
            // refused by the tree rules, before anything is created.
            let link_refused = envelope.error_code() == "invalid-input"
                && envelope.error_message().contains("(absolute-link)");
            assert!(
                link_refused
                    || matches!(
                        envelope.error_code(),
                        "symlink" | "changed-while-read" | "not-a-directory"
                    ),
                "{}",
                envelope.json
            );
        }
        check(&envelope);
    }
    let swaps = swapper.swaps();
    drop(swapper);
    assert!(swaps > 100, "the swapper ran only {swaps} times");
    // Each run walks the tree once among many swaps; most runs meet one.
    assert!(refused > 0, "no run of {RUNS} met a swap");
}

fn exec(work: &Work, program: &Path, input: &Path) -> Command {
    let mut command = sf();
    command
        .current_dir(&work.root)
        .args(["exec", "--json", "--runtime", "/bin/sh", "--program"])
        .arg(program)
        .args(["--entry", "main.sh", "--input"])
        .arg(input);
    command
}

#[test]
fn sf_exec_program_never_carries_the_secret() {
    let work = Work::new();
    let input = work.root.join("input");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("data.txt"), "data\n").unwrap();
    // Control: without the race, the program prints the honest file.
    let calm = run_json(&mut exec(&work, &work.tree, &input));
    assert!(
        calm.result()["stdout"]
            .as_str()
            .unwrap()
            .contains("/sf/program/sub/a.txt\npublic\n"),
        "{}",
        calm.json
    );
    race_runs(
        &work,
        |_| exec(&work, &work.tree, &input),
        |envelope| {
            if envelope.json["ok"] == true {
                assert_eq!(envelope.result()["status"], "exited", "{}", envelope.json);
            }
        },
    );
}

#[test]
fn sf_exec_input_never_carries_the_secret() {
    let work = Work::new();
    let program = work.root.join("program");
    std::fs::create_dir(&program).unwrap();
    std::fs::write(program.join("main.sh"), PRINT_EVERYTHING).unwrap();
    let calm = run_json(&mut exec(&work, &program, &work.tree));
    assert!(
        calm.result()["stdout"]
            .as_str()
            .unwrap()
            .contains("/sf/input/sub/a.txt\npublic\n"),
        "{}",
        calm.json
    );
    race_runs(&work, |_| exec(&work, &program, &work.tree), |_| {});
}

#[test]
fn sf_repo_create_from_never_stores_the_secret() {
    let work = Work::new();
    let (_repos_dir, repos) = sf_tests::private_dir();
    let create = |n: usize| {
        let mut command = sf();
        command
            .args(["repo", "create", "--json", "--product", "p", "--target"])
            .args(["refs/heads/main", "--path"])
            .arg(repos.join(format!("r{n}")))
            .arg("--from")
            .arg(&work.tree);
        command
    };
    // The envelopes in run order: a run refused after its directory was made (the source
    // changed between the read that checked it and the read that stored it) leaves a
    // directory without an ownership marker, which the error names.
    let envelopes = std::cell::RefCell::new(Vec::new());
    race_runs(&work, create, |envelope| {
        envelopes.borrow_mut().push(envelope.json.clone())
    });
    let envelopes = envelopes.into_inner();
    // Every object of every directory made, decompressed by git itself.
    let mut created = 0;
    for (n, envelope) in envelopes.iter().enumerate() {
        let repo = repos.join(format!("r{n}"));
        if !repo.exists() {
            continue;
        }
        let ok = envelope["ok"] == true;
        if !ok {
            assert_eq!(
                envelope["error"]["code"], "changed-while-read",
                "{envelope}"
            );
            assert!(
                envelope["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("has no ownership marker"),
                "{envelope}"
            );
        }
        created += usize::from(ok);
        let objects = Command::new("git")
            .arg("--git-dir")
            .arg(&repo)
            .args(["cat-file", "--batch-all-objects", "--batch"])
            .output()
            .unwrap();
        assert!(objects.status.success(), "{objects:?}");
        work.secret
            .assert_absent(&objects.stdout, "the objects of a created repository");
        assert!(
            !ok || String::from_utf8_lossy(&objects.stdout).contains("public\n"),
            "a created repository holds the honest file"
        );
    }
    // Without the race, the repository is created from the honest tree.
    let calm = run_json(&mut create(RUNS));
    calm.result();
    let _ = created;
}

#[test]
fn sf_slice_freeze_never_stores_the_secret() {
    let work = Work::new();
    let (_repos_dir, repos) = sf_tests::private_dir();
    let identity = repos.join("identity.json");
    run_json(
        sf().args(["repo", "create", "--json", "--product", "p", "--target"])
            .args(["refs/heads/main", "--path"])
            .arg(repos.join("repo"))
            .arg("--from")
            .arg(&work.tree)
            .arg("--identity-out")
            .arg(&identity),
    )
    .result();
    // A Slice whose one input is a directory someone else can write, swapped during freezes.
    let slice = work.root.join("slice");
    let input = slice.join("inputs/numbers");
    std::fs::create_dir_all(input.join("sub")).unwrap();
    std::fs::write(input.join("sub/a.txt"), "public\n").unwrap();
    std::fs::create_dir_all(slice.join("harness")).unwrap();
    std::fs::write(slice.join("harness/t.sh"), "echo ok\n").unwrap();
    std::fs::write(
        slice.join("slice.json"),
        r#"{"id":"s","revision":1,"scope":["sub"]}"#,
    )
    .unwrap();
    std::fs::write(
        slice.join("recipe.json"),
        r#"{"timeoutMs":10000,"outputLimit":4096}"#,
    )
    .unwrap();
    std::fs::write(
        slice.join("acceptance.json"),
        r#"{"protocol":"sf-repository-acceptance/2","checks":[{"kind":"process","id":"runs","phase":"guardrail","stage":"base","entry":{"from":"harness","path":"t.sh"},"entryInScope":false,"args":[],"input":"numbers","expectation":{"exitCode":0,"stdoutDigest":null}}]}"#,
    )
    .unwrap();
    let freeze = || {
        let mut command = sf();
        command
            .args(["slice", "freeze", "--json", "--dir"])
            .arg(&slice)
            .arg("--identity")
            .arg(&identity);
        command
    };
    let swapper = Swapper::start(&input.join("sub"), &work.secret.link);
    let mut refused = 0;
    for _ in 0..RUNS {
        let output = freeze().output().expect("running sf");
        work.secret.assert_absent(&output.stdout, "sf's stdout");
        work.secret.assert_absent(&output.stderr, "sf's stderr");
        let envelope = Envelope::parse(output);
        if envelope.json["ok"] == false {
            refused += 1;
            // A link is read as a link and refused by the snapshot's tree rules.
            let link_refused = envelope.error_code() == "invalid-input"
                && envelope.error_message().contains("(absolute-link)");
            assert!(
                link_refused
                    || matches!(
                        envelope.error_code(),
                        "symlink" | "changed-while-read" | "not-a-directory"
                    ),
                "{}",
                envelope.json
            );
        }
    }
    let swaps = swapper.swaps();
    drop(swapper);
    assert!(swaps > 100, "the swapper ran only {swaps} times");
    assert!(refused > 0, "no freeze of {RUNS} met a swap");
    // Nothing the Slice keeps holds the secret.
    let kept = slice.join("state");
    if kept.exists() {
        let mut stack = vec![kept];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    work.secret
                        .assert_absent(&std::fs::read(&path).unwrap(), "the snapshot store");
                }
            }
        }
    }
    // Without the race, the Slice freezes from the honest input.
    run_json(&mut freeze()).result();
}
