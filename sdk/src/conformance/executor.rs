//! The Executor conformance suite.
//!
//! Programs are runtime-specific, so the suite asks the harness for a program that shows
//! each [`Behaviour`]; everything else (the identities, the bounds, cancellation, the
//! "Err only before anything started" rule) it checks the same way for every backend.
//!
//! ```no_run
//! # use sf_sdk::conformance::executor::{Behaviour, Harness, Program};
//! # use sf_sdk::contracts::Executor;
//! # use sf_sdk::testing::ScriptedExecutor;
//! struct Scripted(ScriptedExecutor);
//! impl Harness for Scripted {
//!     fn executor(&self) -> &dyn Executor { &self.0 }
//!     fn program(&self, behaviour: &Behaviour) -> Program {
//!         sf_sdk::conformance::executor::scripted_program(behaviour)
//!     }
//! }
//! // In a test crate: one #[test] per case.
//! sf_sdk::executor_conformance!(|| Scripted(ScriptedExecutor::new()));
//! ```

use std::time::{Duration, Instant};

use std::os::unix::ffi::OsStrExt as _;

use sf_contracts::snapshot::{MAX_SNAPSHOT_BYTES, SnapshotFile, snapshot_digest};
use sf_contracts::tree_digest::{self, Node};
use sf_contracts::tree_path::EntryMode;
use sf_contracts::{
    CancelToken, Executor, NamespaceDisposition, ProgramTree, RunBounds, RunEntry, RunRequest,
    RunStatus,
};

/// What a program must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Write `stdout` and then argument 0 and a newline to stdout, `stderr` to stderr, the
    /// bytes of input file `input` (if any) to stdout, and exit with `code`. The texts hold
    /// no newline, quote or backslash; the suite passes the argument.
    Print {
        /// The text written to stdout first.
        stdout: String,
        /// The text written to stderr.
        stderr: String,
        /// The input file whose bytes follow on stdout.
        input: Option<String>,
        /// The exit code.
        code: i32,
    },
    /// Do nothing for much longer than any timeout the suite uses (at least a minute).
    Sleep,
    /// Write to stdout without end.
    Flood,
}

/// A program for the harness's runtime: its files, the entry file and leading arguments
/// (the suite appends its own after them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// The program's files.
    pub files: Vec<SnapshotFile>,
    /// The entry file, one of `files`.
    pub entry: String,
    /// Leading arguments.
    pub args: Vec<String>,
}

/// What a backend's test supplies to run the suite against it.
pub trait Harness {
    /// The backend under test.
    fn executor(&self) -> &dyn Executor;

    /// A program that shows `behaviour` under the executor's runtime.
    fn program(&self, behaviour: &Behaviour) -> Program;

    /// Extra time a run may take beyond its timeout before the suite calls it late. The
    /// default suits a loaded two-core machine.
    fn margin(&self) -> Duration {
        Duration::from_secs(3)
    }
}

/// The program for [`crate::testing::ScriptedExecutor`]'s interpreter.
pub fn scripted_program(behaviour: &Behaviour) -> Program {
    let text = match behaviour {
        Behaviour::Print {
            stdout,
            stderr,
            input,
            code,
        } => {
            let mut text = format!("out {stdout}\narg 0\nerr {stderr}\n");
            if let Some(path) = input {
                text.push_str(&format!("cat-input {path}\n"));
            }
            text.push_str(&format!("exit {code}\n"));
            text
        }
        Behaviour::Sleep => "sleep\n".to_owned(),
        Behaviour::Flood => "flood\n".to_owned(),
    };
    Program {
        files: vec![SnapshotFile::regular("main.script", text.into_bytes())],
        entry: "main.script".into(),
        args: Vec::new(),
    }
}

/// One case of the suite: it panics, naming what went wrong, if the backend fails it.
pub type Case = fn(&dyn Harness);

super::suite! {
    [$]
    /// One `#[test]` per case of the Executor suite
    /// ([`conformance::executor`](crate::conformance::executor)), each named after its case
    /// and given a fresh harness from the argument: a closure or function returning an
    /// [`executor::Harness`](crate::conformance::executor::Harness). Takes
    /// `ignore: { case: "reason" }` after the harness, as
    /// [`object_store_conformance!`](crate::object_store_conformance) does.
    macro executor_conformance, helper __sf_executor_case, suite executor;
    cases: [
        descriptions_are_stable,
        exit_code_and_output,
        identities_name_what_ran,
        same_request_same_identities,
        harness_entry_runs,
        modes_are_part_of_the_identity,
        program_by_reference_runs_its_base_with_its_layer,
        a_changed_layer_or_base_is_another_program,
        a_replaced_base_is_never_run,
        invalid_input_is_refused,
        cancelled_before_start_starts_nothing,
        timeout_stops_the_run,
        output_limit_keeps_exactly_the_limit,
        cancel_during_run_aborts,
    ]
}

/// Runs every case in [`CASES`], then panics naming each case that failed (with its message)
/// if any did.
pub fn run_all(harness: &dyn Harness) {
    super::run_cases("executor", CASES, harness);
}

/// Runs the case called `name`; panics if there is none.
pub fn run_case(harness: &dyn Harness, name: &str) {
    super::run_named("executor", CASES, harness, name);
}

fn input() -> Vec<SnapshotFile> {
    vec![SnapshotFile::regular(
        "data/input.txt",
        b"input-bytes".to_vec(),
    )]
}

fn request(harness: &dyn Harness, behaviour: &Behaviour, bounds: RunBounds) -> RunRequest {
    let program = harness.program(behaviour);
    let mut args = program.args;
    args.push("argument-zero".into());
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: program.files,
        entry: program.entry.into(),
        args,
        input: input(),
        harness: Vec::new(),
        bounds,
    }
}

/// The request of `behaviour` with its program moved into the harness: the entry is a file
/// of the harness, and the program is one unrelated file.
fn harnessed(harness: &dyn Harness, behaviour: &Behaviour, bounds: RunBounds) -> RunRequest {
    let mut request = request(harness, behaviour, bounds);
    request.harness = std::mem::replace(
        &mut request.program,
        vec![SnapshotFile::regular(
            "tree/file.txt",
            b"the tree under test".to_vec(),
        )],
    );
    request.entry = RunEntry::harness(request.entry.path);
    request
}

fn printing() -> Behaviour {
    Behaviour::Print {
        stdout: "out-text".into(),
        stderr: "err-text".into(),
        input: Some("data/input.txt".into()),
        code: 3,
    }
}

/// Runs `request` of the [`printing`] behaviour and checks that it did what it prints.
fn run_printing(harness: &dyn Harness, request: &RunRequest) -> sf_contracts::RunAnswer {
    let answer = harness
        .executor()
        .run(request, &CancelToken::new())
        .expect("the run starts");
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(answer.exit_code, Some(3), "{answer:?}");
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "out-text\nargument-zero\ninput-bytes",
        "{answer:?}"
    );
    answer
}

/// Checks that `answer` names `request`'s program, input and harness by their digests.
#[track_caller]
fn assert_snapshots_named(answer: &sf_contracts::RunAnswer, request: &RunRequest) {
    let ids = &answer.identities;
    for (what, named, files) in [
        ("program", &ids.program, &request.program),
        ("input", &ids.input, &request.input),
        ("harness", &ids.harness, &request.harness),
    ] {
        assert_eq!(
            named,
            &snapshot_digest(files).unwrap(),
            "the answer names the {what}"
        );
    }
}

fn bounds() -> RunBounds {
    RunBounds::new(Duration::from_secs(30), 1 << 20)
}

/// `describe_runtime` and `profile` answer, and answer the same twice.
pub fn descriptions_are_stable(harness: &dyn Harness) {
    let executor = harness.executor();
    let runtime = executor
        .describe_runtime()
        .expect("describe_runtime answers");
    assert_eq!(
        runtime,
        executor.describe_runtime().unwrap(),
        "describe_runtime is stable"
    );
    let profile = executor.profile().expect("profile answers");
    assert_eq!(profile, executor.profile().unwrap(), "profile is stable");
    assert_eq!(
        profile.digest,
        sf_contracts::canonical::Digest::of(&profile.recipe),
        "the profile digest is the digest of its recipe"
    );
}

/// A program that prints and exits: status exited, its code, exactly its output, no limit hit.
pub fn exit_code_and_output(harness: &dyn Harness) {
    let answer = harness
        .executor()
        .run(
            &request(harness, &printing(), bounds()),
            &CancelToken::new(),
        )
        .expect("the run starts");
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(answer.exit_code, Some(3), "{answer:?}");
    assert_eq!(answer.signal, None);
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "out-text\nargument-zero\ninput-bytes",
        "{answer:?}"
    );
    assert_eq!(String::from_utf8_lossy(&answer.stderr), "err-text\n");
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);
    assert_eq!(
        answer.limits_hit,
        [],
        "a program that prints and exits hits none of the executor's limits"
    );
}

/// The identities are the request's digests and the executor's descriptions.
pub fn identities_name_what_ran(harness: &dyn Harness) {
    let executor = harness.executor();
    let request = request(harness, &printing(), bounds());
    let answer = executor.run(&request, &CancelToken::new()).unwrap();
    let identities = &answer.identities;
    assert_eq!(
        identities.program,
        snapshot_digest(&request.program).unwrap()
    );
    assert_eq!(identities.input, snapshot_digest(&request.input).unwrap());
    assert_eq!(
        identities.harness,
        snapshot_digest(&[]).unwrap(),
        "a run without a harness names the empty snapshot"
    );
    assert_eq!(
        identities.runtime,
        executor.describe_runtime().unwrap().digest
    );
    assert_eq!(identities.profile, executor.profile().unwrap().digest);
    assert_eq!(answer.bounds, request.bounds);
    assert_eq!(identities.bounds, request.bounds.digest());
}

/// The same request twice gives the same identities; one changed input byte changes only
/// the input digest.
pub fn same_request_same_identities(harness: &dyn Harness) {
    let executor = harness.executor();
    let request = request(harness, &printing(), bounds());
    let first = executor.run(&request, &CancelToken::new()).unwrap();
    let second = executor.run(&request, &CancelToken::new()).unwrap();
    assert_eq!(first.identities, second.identities);
    let mut changed = request.clone();
    changed.input[0].content[0] ^= 1;
    let third = executor.run(&changed, &CancelToken::new()).unwrap();
    assert_ne!(third.identities.input, first.identities.input);
    assert_eq!(third.identities.program, first.identities.program);
    assert_eq!(third.identities.runtime, first.identities.runtime);
    assert_eq!(third.identities.profile, first.identities.profile);
    assert_eq!(third.identities.bounds, first.identities.bounds);
}

/// An entry in the harness runs as an entry in the program would, and the identities name
/// the harness and the program apart.
pub fn harness_entry_runs(harness: &dyn Harness) {
    let request = harnessed(harness, &printing(), bounds());
    let answer = run_printing(harness, &request);
    assert_snapshots_named(&answer, &request);
    let mut changed = request.clone();
    changed.harness[0].content.push(b'\n');
    let other = harness
        .executor()
        .run(&changed, &CancelToken::new())
        .expect("the run starts");
    assert_ne!(other.identities.harness, answer.identities.harness);
    assert_eq!(other.identities.program, answer.identities.program);
}

/// A program whose entry is executable and which holds symbolic links runs as the same
/// program of regular files does, and its identity is the digest of the entries with their
/// modes (`sf-snapshot/2`), not that of the same bytes as regular files: a backend (or a wire)
/// that dropped the modes would name another program.
pub fn modes_are_part_of_the_identity(harness: &dyn Harness) {
    let regular = request(harness, &printing(), bounds());
    let mut moded = regular.clone();
    for file in &mut moded.program {
        if file.path == moded.entry.path {
            file.mode = EntryMode::Executable;
        }
    }
    moded.program.push(SnapshotFile::symlink(
        "sf-conformance/entry-link",
        format!("../{}", moded.entry.path).into_bytes(),
    ));
    moded.input.push(SnapshotFile::symlink(
        "data/input-link.txt",
        b"input.txt".to_vec(),
    ));
    let answer = run_printing(harness, &moded);
    assert_snapshots_named(&answer, &moded);
    let as_regular: Vec<SnapshotFile> = moded
        .program
        .iter()
        .map(|file| SnapshotFile::regular(file.path.clone(), file.content.clone()))
        .collect();
    assert_ne!(
        answer.identities.program,
        snapshot_digest(&as_regular).unwrap(),
        "the modes are part of the program's identity"
    );
}

/// A base tree written into a fresh directory (directories 0755, files 0444, executables
/// 0555: readable by a sandbox's user), as a store would hand it over, and the request of
/// `behaviour` taking its program by reference: the base holds the program's files with the
/// entry's bytes replaced by a program that prints something else and exits 1, and an extra
/// file; the layer puts the entry back and deletes the extra file. Only a run of the base
/// with its layer prints what the behaviour prints.
pub struct ReferencedProgram {
    /// Holds the base's directory for as long as the request is used.
    pub dir: tempfile_dir::TempDir,
    /// The request.
    pub request: RunRequest,
}

/// A directory the suite makes and removes (the suite depends on nothing but the contracts).
pub mod tempfile_dir {
    use std::path::{Path, PathBuf};

    /// A fresh directory under the system's temporary directory, removed on drop.
    pub struct TempDir(PathBuf);

    impl TempDir {
        /// Makes one, mode 0755.
        pub fn new() -> std::io::Result<Self> {
            use std::os::unix::fs::DirBuilderExt as _;
            let base = std::env::temp_dir();
            for attempt in 0..1000u32 {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |now| now.subsec_nanos());
                let path = base.join(format!(
                    "sf-conformance-{}-{nanos}-{attempt}",
                    std::process::id()
                ));
                match std::fs::DirBuilder::new().mode(0o755).create(&path) {
                    Ok(()) => {
                        std::fs::set_permissions(
                            &path,
                            std::os::unix::fs::PermissionsExt::from_mode(0o755),
                        )?;
                        return Ok(Self(path));
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(error) => return Err(error),
                }
            }
            Err(std::io::Error::other("no fresh temporary directory"))
        }

        /// Its path.
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            // The tree is read-only by design: make it writable to remove it.
            fn writable(path: &Path) {
                use std::os::unix::fs::PermissionsExt as _;
                if let Ok(metadata) = std::fs::symlink_metadata(path)
                    && metadata.is_dir()
                {
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
                    if let Ok(entries) = std::fs::read_dir(path) {
                        for entry in entries.flatten() {
                            writable(&entry.path());
                        }
                    }
                }
            }
            writable(&self.0);
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The [`ReferencedProgram`] of `behaviour`.
pub fn program_by_reference(harness: &dyn Harness, behaviour: &Behaviour) -> ReferencedProgram {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let mut request = request(harness, behaviour, bounds());
    let mut base = std::mem::take(&mut request.program);
    let entry = base
        .iter()
        .position(|file| file.path == request.entry.path)
        .expect("the entry is a file of the program");
    let genuine = base[entry].clone();
    let wrong = harness.program(&Behaviour::Print {
        stdout: "the-base-entry".into(),
        stderr: String::new(),
        input: None,
        code: 1,
    });
    base[entry].content = wrong
        .files
        .iter()
        .find(|file| file.path == wrong.entry)
        .expect("the entry is a file of the program")
        .content
        .clone();
    base.push(SnapshotFile::regular(
        "sf-conformance/extra.txt",
        b"extra".to_vec(),
    ));
    let dir = tempfile_dir::TempDir::new().expect("a temporary directory");
    for file in &base {
        let path = dir.path().join(&file.path);
        let parent = path.parent().expect("a file has a parent");
        std::fs::create_dir_all(parent).expect("the base's directories");
        let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755));
        match file.mode {
            EntryMode::Symlink => {
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&file.content), &path)
                    .expect("a link of the base")
            }
            mode => {
                std::fs::write(&path, &file.content).expect("a file of the base");
                let bits = if mode == EntryMode::Executable {
                    0o555
                } else {
                    0o444
                };
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bits))
                    .expect("the file's mode");
            }
        }
    }
    let built = tree_digest::build(base.iter().map(|file| (file.path.as_str(), node(file))))
        .expect("the base is a tree");
    let metadata = std::fs::metadata(dir.path()).expect("the base's directory");
    request.program_tree = Some(ProgramTree {
        base: built.root.hash,
        dir: dir.path().to_path_buf(),
        dev: metadata.dev(),
        ino: metadata.ino(),
        directories: built.directories,
        layer: vec![genuine],
        deleted: vec!["sf-conformance/extra.txt".into()],
    });
    ReferencedProgram { dir, request }
}

fn node(file: &SnapshotFile) -> Node {
    match file.mode {
        EntryMode::Symlink => Node::Symlink {
            target: String::from_utf8_lossy(&file.content).into_owned(),
        },
        mode => Node::file(mode == EntryMode::Executable, &file.content),
    }
}

/// A program given by reference runs its base with its layer laid over it (the layer's entry,
/// not the base's), and its identity is the `sf-tree/1` digest of that tree, which the request
/// names ([`ProgramTree::check`]).
pub fn program_by_reference_runs_its_base_with_its_layer(harness: &dyn Harness) {
    let referenced = program_by_reference(harness, &printing());
    let answer = run_printing(harness, &referenced.request);
    let tree = referenced.request.program_tree.as_ref().unwrap();
    let checked = tree.check().expect("the reference is valid");
    assert_eq!(
        answer.identities.program, checked.digest,
        "the answer names the tree that ran"
    );
    assert_ne!(answer.identities.program, tree.base, "not the base alone");
    assert_eq!(
        answer.identities.input,
        snapshot_digest(&referenced.request.input).unwrap()
    );
}

/// One byte of the layer, one deletion less, or another base is another program.
pub fn a_changed_layer_or_base_is_another_program(harness: &dyn Harness) {
    let referenced = program_by_reference(harness, &printing());
    let executor = harness.executor();
    let first = executor
        .run(&referenced.request, &CancelToken::new())
        .expect("the run starts");
    let mut changed = referenced.request.clone();
    let tree = changed.program_tree.as_mut().unwrap();
    tree.layer.push(SnapshotFile::regular(
        "sf-conformance/added.txt",
        b"added".to_vec(),
    ));
    let second = executor.run(&changed, &CancelToken::new()).unwrap();
    assert_ne!(second.identities.program, first.identities.program);
    let mut kept = referenced.request.clone();
    kept.program_tree.as_mut().unwrap().deleted.clear();
    let third = executor.run(&kept, &CancelToken::new()).unwrap();
    assert_ne!(third.identities.program, first.identities.program);
    assert_ne!(third.identities.program, second.identities.program);
    assert_eq!(third.identities.input, first.identities.input);
}

/// A base directory that is not the one the store verified (replaced since: another
/// directory at its path) starts nothing: `unavailable`, mechanism `program-tree`.
pub fn a_replaced_base_is_never_run(harness: &dyn Harness) {
    let referenced = program_by_reference(harness, &printing());
    let other = program_by_reference(harness, &printing());
    let mut swapped = referenced.request.clone();
    let tree = swapped.program_tree.as_mut().unwrap();
    // The reference names the first directory's identity at the second's path.
    tree.dir = other.dir.path().to_path_buf();
    match harness.executor().run(&swapped, &CancelToken::new()) {
        Err(sf_contracts::ExecutorError::Unavailable { mechanism, .. }) => {
            assert_eq!(mechanism, "program-tree")
        }
        other => panic!("a replaced base must start nothing: {other:?}"),
    }
}

/// Invalid requests are `invalid-input` errors.
pub fn invalid_input_is_refused(harness: &dyn Harness) {
    let executor = harness.executor();
    let good = request(harness, &printing(), bounds());
    let mut cases = Vec::new();
    let mut bad = good.clone();
    bad.entry = "not-a-file-of-the-program".into();
    cases.push(("missing entry", bad));
    let mut bad = good.clone();
    bad.entry = RunEntry::harness(good.entry.path.clone());
    cases.push(("an entry in an empty harness", bad));
    let mut bad = harnessed(harness, &printing(), bounds());
    bad.harness
        .push(SnapshotFile::regular("../escape", Vec::new()));
    cases.push(("bad harness path", bad));
    let mut bad = good.clone();
    bad.args.push("nul\0inside".into());
    cases.push(("NUL in an argument", bad));
    let mut bad = good.clone();
    bad.bounds.timeout = Duration::ZERO;
    cases.push(("zero timeout", bad));
    let mut bad = good.clone();
    bad.input
        .push(SnapshotFile::regular("../escape", Vec::new()));
    cases.push(("bad input path", bad));
    let mut bad = good.clone();
    bad.program
        .push(SnapshotFile::symlink("up", b"../escape".to_vec()));
    cases.push(("a link leaving the program", bad));
    let mut bad = good.clone();
    bad.input
        .push(SnapshotFile::symlink("data/link", b"..".to_vec()));
    bad.input
        .push(SnapshotFile::regular("data/link/under", b"x".to_vec()));
    cases.push(("a file beneath a link", bad));
    let mut bad = good.clone();
    bad.program.push(SnapshotFile::regular(
        "huge.bin",
        vec![0; MAX_SNAPSHOT_BYTES as usize + 1],
    ));
    cases.push(("oversized program", bad));
    let referenced = program_by_reference(harness, &printing());
    let mut bad = referenced.request.clone();
    bad.program = good.program.clone();
    cases.push(("files by value beside a reference", bad));
    let mut bad = referenced.request.clone();
    bad.program_tree.as_mut().unwrap().directories.remove("");
    cases.push(("a reference without its root directory", bad));
    let mut bad = referenced.request.clone();
    bad.program_tree.as_mut().unwrap().base = sf_contracts::canonical::Digest::of(b"other");
    cases.push(("a base whose root directory is another", bad));
    // A directory of the base altered since its parent named it (a store entry that
    // changed): it no longer binds to the base's digest.
    let mut bad = referenced.request.clone();
    bad.program_tree
        .as_mut()
        .unwrap()
        .directories
        .get_mut("sf-conformance")
        .expect("the layer's directory is given")
        .insert(
            "planted.txt",
            node(&SnapshotFile::regular("planted.txt", Vec::new())),
        );
    cases.push(("a directory its parent does not name", bad));
    let mut bad = referenced.request.clone();
    bad.program_tree
        .as_mut()
        .unwrap()
        .layer
        .push(SnapshotFile::regular("../escape", Vec::new()));
    cases.push(("a layer path outside the tree", bad));
    let mut bad = referenced.request.clone();
    bad.entry = "not-in-the-tree".into();
    cases.push(("an entry the tree does not hold", bad));
    for (what, bad) in cases {
        match executor.run(&bad, &CancelToken::new()) {
            Err(error) => assert_eq!(error.code(), "invalid-input", "{what}: {error}"),
            Ok(answer) => panic!("{what}: a run started: {answer:?}"),
        }
    }
}

/// A token cancelled before the call starts nothing: `aborted` error.
pub fn cancelled_before_start_starts_nothing(harness: &dyn Harness) {
    let cancel = CancelToken::new();
    cancel.cancel();
    let error = harness
        .executor()
        .run(&request(harness, &printing(), bounds()), &cancel)
        .expect_err("nothing starts");
    assert_eq!(error.code(), "aborted");
}

/// A program that outlives its timeout is stopped: timed-out, in time.
pub fn timeout_stops_the_run(harness: &dyn Harness) {
    let timeout = Duration::from_millis(300);
    let start = Instant::now();
    let answer = harness
        .executor()
        .run(
            &request(harness, &Behaviour::Sleep, RunBounds::new(timeout, 1 << 16)),
            &CancelToken::new(),
        )
        .expect("the run starts");
    let took = start.elapsed();
    assert_eq!(answer.status, RunStatus::TimedOut, "{answer:?}");
    assert_eq!(answer.exit_code, None);
    assert!(took >= timeout, "stopped early: {took:?}");
    assert!(took < timeout + harness.margin(), "stopped late: {took:?}");
    assert_eq!(answer.namespace, NamespaceDisposition::Reaped);
}

/// A flood stops at the limit, keeping exactly the limit's bytes.
pub fn output_limit_keeps_exactly_the_limit(harness: &dyn Harness) {
    let limit = 64 * 1024;
    let answer = harness
        .executor()
        .run(
            &request(
                harness,
                &Behaviour::Flood,
                RunBounds::new(Duration::from_secs(30), limit),
            ),
            &CancelToken::new(),
        )
        .expect("the run starts");
    assert_eq!(answer.status, RunStatus::OutputLimit, "{answer:?}");
    assert_eq!(answer.stdout.len() as u64, limit);
}

/// Cancelling while the program runs aborts it promptly.
pub fn cancel_during_run_aborts(harness: &dyn Harness) {
    let cancel = CancelToken::new();
    let trigger = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        trigger.cancel();
    });
    let start = Instant::now();
    let answer = harness
        .executor()
        .run(
            &request(
                harness,
                &Behaviour::Sleep,
                RunBounds::new(Duration::from_secs(60), 1 << 16),
            ),
            &cancel,
        )
        .expect("the run starts");
    canceller.join().unwrap();
    assert_eq!(answer.status, RunStatus::Aborted, "{answer:?}");
    assert!(
        start.elapsed() < Duration::from_millis(200) + harness.margin(),
        "aborted late: {:?}",
        start.elapsed()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ScriptedExecutor;

    struct Scripted(ScriptedExecutor);

    impl Harness for Scripted {
        fn executor(&self) -> &dyn Executor {
            &self.0
        }

        fn program(&self, behaviour: &Behaviour) -> Program {
            scripted_program(behaviour)
        }
    }

    #[test]
    fn scripted_results_are_answered_and_requests_recorded() {
        let executor = ScriptedExecutor::new();
        executor.push(Ok(crate::testing::ScriptedRun::exited(7, b"scripted")));
        let harness = Scripted(executor);
        let request = request(&harness, &printing(), bounds());
        let answer = harness.0.run(&request, &CancelToken::new()).unwrap();
        assert_eq!(answer.exit_code, Some(7));
        assert_eq!(answer.stdout, b"scripted");
        assert_eq!(harness.0.requests(), vec![request]);
    }
}
