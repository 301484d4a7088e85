//! What running a Candidate by reference costs as the tree grows: a benchmark program that
//! prints medians and ratios side by side, never a timed test.
//!
//! It generates deterministic repositories (a large base, `--large` files of `--file-bytes`
//! each, and a ten-file one), seals one-file Candidates on them through git-cli loaded as a
//! plugin the way `sf` loads it, and times:
//!
//! - **the first Candidate, ready to run**: the base materialised into an empty tree store
//!   (every blob re-hashed, every file written and hard-linked into the store, the stamps
//!   recorded, one `syncfs`), the base's directories on the edited paths and the edited
//!   entries read, the program's `sf-tree/1` identity computed; beside `git archive | tar -x`
//!   of the same commit into a directory of the same file system, alternating;
//! - **a second Candidate, ready to run**, on the store that holds the base: the same steps
//!   with the base's stamp check (every entry's `fstatat`, each collection) in place of its
//!   materialisation, and each part alone;
//! - **the Executor's run** (sandbox-exec, `/bin/sh`) of a one-line program given by reference
//!   over the large base and over the ten-file base, alternating, and of the same program by
//!   value;
//! - the peak resident memory of a process that materialises the large base, seals a
//!   Candidate and makes it ready to run.
//!
//! Before this work a tree of more than 4,096 files (16 MiB) could not be run at all: the
//! Executor's only input was an in-memory snapshot of every file.
//!
//! ```text
//! cargo build --release -p sf-git-cli -p sf-sandbox-exec --bins --lib
//! cargo run --release -p sf-examples --example tree_scale -- \
//!     [--runs N] [--large FILES] [--file-bytes BYTES] [--dir DIR] [--plugin-dir DIR]
//! ```
//!
//! Defaults: 7 runs, 100,000 files of 1,024 bytes, DIR `/dev/shm` (a tmpfs: the stores and
//! the extracted trees are made and removed in every run, which the root file system of a
//! shared machine must not be made to churn; both sides write to the same file system).
//! PLUGIN_DIR (where `libsf_git_cli.so` and its manifest are) defaults to the directory above
//! this program's (`target/<profile>`), and `sf-sandbox-launcher` is looked for there too.
//! Needs a root-owned git at /usr/bin/git, user namespaces, Landlock and overlayfs.

use std::convert::Infallible;
use std::error::Error;
use std::ffi::OsStr;
use std::ops::ControlFlow;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sf_examples::scale::{
    create_generated, frozen, median, open, path_of, peak_resident_kib, proposal_of, run_child,
};
use sf_host::contracts::{
    CancelToken, Executor, ObjectStoreFactory, ProgramTree, RunBounds, RunRequest, RunStatus,
};
use sf_host::environment_store::EnvironmentStore;
use sf_host::repository::{
    Repository, RepositoryIdentity, SealedCandidate, TreeContents, parse_repository_identity,
};
use sf_host::snapshot::SnapshotFile;
use sf_host::tree_store::StoredTree;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

/// The Git the comparison runs.
const GIT: &str = "/usr/bin/git";
/// The program every run runs: it reads the base's first file, so that the base is there.
const RUN_SH: &str = "read -r line < /sf/program/src/d000/s0/f000000.txt && exit 0\nexit 9\n";

struct Options {
    runs: usize,
    large: usize,
    file_bytes: usize,
    dir: PathBuf,
    plugin_dir: PathBuf,
}

fn main() -> Result<(), Box<dyn Error>> {
    if std::env::args().nth(1).as_deref() == Some("--child") {
        return child(std::env::args().skip(2).collect());
    }
    let options = parse_options()?;
    let (plugin, factory) = sf_examples::git_cli_plugin(&options.plugin_dir)?;
    let workdir = tempfile::Builder::new()
        .prefix("sf-tree-scale-")
        .tempdir_in(&options.dir)?;
    std::fs::set_permissions(workdir.path(), std::fs::Permissions::from_mode(0o755))?;
    let root = workdir.path().canonicalize()?;
    println!(
        "tree_scale: git-cli plugin {} (ABI 1.{}); {} files of {} bytes under {}; {} runs each",
        plugin.library().display(),
        plugin.abi_minor(),
        options.large,
        options.file_bytes,
        root.display(),
        options.runs
    );
    let started = Instant::now();
    let large = Base::generate(factory.as_ref(), &root, "large", options.large, &options)?;
    let small = Base::generate(factory.as_ref(), &root, "small", 10, &options)?;
    println!(
        "  generated the bases in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The first Candidate on an empty store, beside git archive | tar -x.
    let mut first = Vec::new();
    let mut archive = Vec::new();
    let mut streamed = Vec::new();
    for run in 0..options.runs {
        let sealed = large.seal(factory.as_ref(), run)?;
        let store_dir = root.join(format!("first-{run}"));
        let store = open_store(&store_dir)?;
        let repository = open(factory.as_ref(), &large.identity)?;
        let started = Instant::now();
        ready(&repository, &store, &sealed)?;
        first.push(started.elapsed());
        remove(&store_dir)?;
        archive.push(large.archive(&root.join(format!("archive-{run}")))?);
        let repository = open(factory.as_ref(), &large.identity)?;
        let started = Instant::now();
        let ControlFlow::Continue(_) = repository
            .stream_files(&large.identity.initial, |_, _, _, _| {
                ControlFlow::<Infallible>::Continue(())
            })?;
        streamed.push(started.elapsed());
    }

    // A second Candidate on the store that holds the base.
    let store = open_store(&root.join("store"))?;
    let base_tree = ready(
        &open(factory.as_ref(), &large.identity)?,
        &store,
        &large.seal(factory.as_ref(), 1_000)?,
    )?;
    let small_tree = ready(
        &open(factory.as_ref(), &small.identity)?,
        &store,
        &small.seal(factory.as_ref(), 1_000)?,
    )?;
    let mut second = Vec::new();
    let mut stamps = Vec::new();
    let mut own = Vec::new();
    for run in 0..options.runs {
        let sealed = large.seal(factory.as_ref(), 2_000 + run)?;
        let repository = open(factory.as_ref(), &large.identity)?;
        let started = Instant::now();
        let stored = store.verify_tree(&base_tree.base)?;
        let checked = started.elapsed();
        program(&repository, &stored, &sealed)?;
        second.push(started.elapsed());
        stamps.push(checked);
        own.push(started.elapsed() - checked);
    }

    // The Executor's run over each base, and by value.
    let mut config = SandboxConfig::new(RuntimeConfig::shell());
    config.launcher = Some(options.plugin_dir.join("sf-sandbox-launcher"));
    let executor = SandboxExecutor::new(config)?;
    let mut run_large = Vec::new();
    let mut run_small = Vec::new();
    let mut run_value = Vec::new();
    for _ in 0..options.runs {
        run_large.push(timed_run(&executor, by_reference(&base_tree))?);
        run_small.push(timed_run(&executor, by_reference(&small_tree))?);
        run_value.push(timed_run(&executor, by_value(&small))?);
    }

    // The peak memory of one process making the large base ready, then a Candidate.
    let mut children = Vec::new();
    for run in 0..options.runs.min(3) {
        let store_dir = root.join(format!("child-{run}"));
        children.push(large.in_child(&options, &store_dir, 3_000 + run)?);
        remove(&store_dir)?;
    }

    let ms = |values: &[Duration]| median(values).as_secs_f64() * 1e3;
    println!("medians (uptime: {}):", uptime());
    println!(
        "  first Candidate ready to run   {:>9.2} ms   git archive | tar -x {:>9.2} ms   ratio {:>6.2}   (target <= 1.5)",
        ms(&first),
        ms(&archive),
        ms(&first) / ms(&archive)
    );
    println!(
        "    reading the base alone (every object re-hashed, its digest computed) {:>9.2} ms",
        ms(&streamed)
    );
    println!(
        "  second Candidate ready to run  {:>9.2} ms   (target <= 50 ms): the base's stamp check {:>9.2} ms, then the Candidate's own {:>9.2} ms",
        ms(&second),
        ms(&stamps),
        ms(&own)
    );
    println!(
        "  run by reference: {:>7}-file tree {:>9.2} ms   10-file tree {:>9.2} ms   ratio {:>6.2}   (target <= 1.5); 10 files by value {:>9.2} ms",
        options.large,
        ms(&run_large),
        ms(&run_small),
        ms(&run_large) / ms(&run_small),
        ms(&run_value)
    );
    let peak = children.iter().map(|(_, kib)| *kib).max().unwrap_or(0);
    let times: Vec<Duration> = children.iter().map(|(time, _)| *time).collect();
    println!(
        "  peak resident memory materialising {} files, sealing and making a Candidate ready: {:.1} MiB   (target <= 256 MiB; {:.2} ms in its own process)",
        options.large,
        peak as f64 / 1024.0,
        ms(&times)
    );
    Ok(())
}

/// `--child PLUGIN_DIR IDENTITY FILES FILE_BYTES STORE RUN`: materialises the base into a new
/// store at STORE, seals run RUN's Candidate, makes it ready to run, and prints `<microseconds>
/// <VmHWM KiB>`.
fn child(args: Vec<String>) -> Result<(), Box<dyn Error>> {
    let [plugin_dir, identity, files, file_bytes, store, run] = args.as_slice() else {
        return Err("--child PLUGIN_DIR IDENTITY FILES FILE_BYTES STORE RUN".into());
    };
    let (_plugin, factory) = sf_examples::git_cli_plugin(Path::new(plugin_dir))?;
    let identity = parse_repository_identity(&std::fs::read(identity)?)?;
    let started = Instant::now();
    let store = open_store(Path::new(store))?;
    let repository = open(factory.as_ref(), &identity)?;
    let sealed = repository.seal(
        &frozen(identity.initial),
        &proposal_of(files.parse()?, file_bytes.parse()?, 1, run.parse()?),
    )?;
    ready(&repository, &store, &sealed)?;
    let elapsed = started.elapsed();
    println!("{} {}", elapsed.as_micros(), peak_resident_kib()?);
    Ok(())
}

fn parse_options() -> Result<Options, Box<dyn Error>> {
    let mut options = Options {
        runs: 7,
        large: 100_000,
        file_bytes: 1_024,
        dir: PathBuf::from("/dev/shm"),
        plugin_dir: sf_examples::default_plugin_dir()?,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} takes a value"))?;
        match flag.as_str() {
            "--runs" => options.runs = value.parse()?,
            "--large" => options.large = value.parse()?,
            "--file-bytes" => options.file_bytes = value.parse()?,
            "--dir" => options.dir = PathBuf::from(value),
            "--plugin-dir" => options.plugin_dir = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    if options.runs == 0 || options.large < 10 {
        return Err("runs >= 1 and --large >= 10".into());
    }
    Ok(options)
}

/// A tree store at `dir` (made, 0755, when absent): the sandbox's user reads what it holds.
fn open_store(dir: &Path) -> Result<EnvironmentStore, Box<dyn Error>> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(EnvironmentStore::open(&dir.join("store"))?)
}

/// Removes a store or an extracted tree (read-only directories: root removes them as they are).
fn remove(dir: &Path) -> Result<(), Box<dyn Error>> {
    let status = Command::new("rm").arg("-rf").arg(dir).status()?;
    if !status.success() {
        return Err(format!("rm -rf {} failed", dir.display()).into());
    }
    Ok(())
}

/// The Candidate `sealed` made ready to run, as a collection makes it: its base materialised
/// (or verified, when the store holds it), then [`program`].
fn ready(
    repository: &Repository,
    store: &EnvironmentStore,
    sealed: &SealedCandidate,
) -> Result<ProgramTree, Box<dyn Error>> {
    let manifest = &sealed.manifest;
    let TreeContents::Trees { base, .. } = &manifest.contents else {
        return Err("a Candidate sealed now names its trees".into());
    };
    let stored = store.materialise_tree(repository, &manifest.base_commit, base)?;
    program(repository, &stored, sealed)
}

/// The Candidate `sealed`'s program over its materialised base `stored`: the base's
/// directories on the edited paths and the edited entries read, and the program named by its
/// tree's digest, which must be the one the manifest records.
fn program(
    repository: &Repository,
    stored: &StoredTree,
    sealed: &SealedCandidate,
) -> Result<ProgramTree, Box<dyn Error>> {
    let manifest = &sealed.manifest;
    let TreeContents::Trees { base, candidate } = &manifest.contents else {
        return Err("a Candidate sealed now names its trees".into());
    };
    let edits = repository.edited_entries(sealed)?;
    let paths: Vec<&str> = edits.iter().map(|entry| entry.path.as_str()).collect();
    let tree = ProgramTree {
        base: base.clone(),
        dir: stored.dir.clone(),
        dev: stored.dev,
        ino: stored.ino,
        directories: repository.tree_directories(&manifest.base_commit, paths)?,
        layer: edits.into_iter().filter_map(|entry| entry.next).collect(),
        deleted: Vec::new(),
    };
    if tree.check()?.digest != *candidate {
        return Err("the program's tree is not the Candidate's".into());
    }
    Ok(tree)
}

/// A run of [`RUN_SH`] laid over `tree`'s base.
fn by_reference(tree: &ProgramTree) -> RunRequest {
    let mut tree = tree.clone();
    tree.layer = vec![SnapshotFile::regular("run.sh", RUN_SH.as_bytes().to_vec())];
    RunRequest {
        program_tree: Some(tree),
        program: Vec::new(),
        ..by_value_of(Vec::new())
    }
}

/// A run of [`RUN_SH`] with `base`'s ten files given by value.
fn by_value(base: &Base) -> RunRequest {
    let mut program: Vec<SnapshotFile> = (0..base.files)
        .map(|i| {
            SnapshotFile::regular(
                path_of(i),
                sf_examples::scale::content_of(i, base.file_bytes),
            )
        })
        .collect();
    program.push(SnapshotFile::regular("run.sh", RUN_SH.as_bytes().to_vec()));
    by_value_of(program)
}

fn by_value_of(program: Vec<SnapshotFile>) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program,
        entry: "run.sh".into(),
        args: Vec::new(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(60), 64 * 1024),
    }
}

/// Runs `request`, which must exit 0, and gives the wall time of the whole call.
fn timed_run(executor: &SandboxExecutor, request: RunRequest) -> Result<Duration, Box<dyn Error>> {
    let started = Instant::now();
    let answer = executor.run(&request, &CancelToken::new())?;
    let elapsed = started.elapsed();
    if answer.status != RunStatus::Exited || answer.exit_code != Some(0) {
        return Err(format!(
            "the run ended {} {:?}: {}",
            answer.status.code(),
            answer.exit_code,
            String::from_utf8_lossy(&answer.stderr)
        )
        .into());
    }
    Ok(elapsed)
}

/// The machine's load averages, from `/proc/loadavg`.
fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

/// One generated base: an owned repository holding it as its initial commit.
struct Base {
    identity: RepositoryIdentity,
    /// Where the identity is written, for a child process.
    identity_file: PathBuf,
    path: PathBuf,
    files: usize,
    file_bytes: usize,
}

impl Base {
    fn generate(
        factory: &dyn ObjectStoreFactory,
        root: &Path,
        name: &str,
        files: usize,
        options: &Options,
    ) -> Result<Self, Box<dyn Error>> {
        let dir = root.join(name);
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let path = dir.join("owned");
        let identity = create_generated(factory, &path, files, options.file_bytes)?;
        let identity_file = dir.join("identity.json");
        std::fs::write(&identity_file, identity.to_canonical_bytes())?;
        Ok(Self {
            identity,
            identity_file,
            path,
            files,
            file_bytes: options.file_bytes,
        })
    }

    /// Seals run `run`'s one-file Candidate.
    fn seal(
        &self,
        factory: &dyn ObjectStoreFactory,
        run: usize,
    ) -> Result<SealedCandidate, Box<dyn Error>> {
        Ok(open(factory, &self.identity)?.seal(
            &frozen(self.identity.initial),
            &proposal_of(self.files, self.file_bytes, 1, run),
        )?)
    }

    /// `git archive | tar -x` of the base into the new directory `dir`, timed, then removed.
    fn archive(&self, dir: &Path) -> Result<Duration, Box<dyn Error>> {
        std::fs::create_dir(dir)?;
        let started = Instant::now();
        let status = Command::new("sh")
            .arg("-c")
            .arg("\"$0\" --git-dir \"$1\" archive --format=tar \"$2\" | tar -x -C \"$3\"")
            .arg(GIT)
            .arg(&self.path)
            .arg(self.identity.initial.to_string())
            .arg(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()?;
        let elapsed = started.elapsed();
        if !status.success() {
            return Err("git archive | tar -x failed".into());
        }
        let extracted = std::fs::metadata(dir.join(path_of(0)))?;
        if extracted.size() != self.file_bytes as u64 {
            return Err("git archive | tar -x extracted another tree".into());
        }
        remove(dir)?;
        Ok(elapsed)
    }

    /// Runs this program as `--child` on this base: `(elapsed, peak KiB)`.
    fn in_child(
        &self,
        options: &Options,
        store: &Path,
        run: usize,
    ) -> Result<(Duration, u64), Box<dyn Error>> {
        let (elapsed, kib, _) = run_child([
            options.plugin_dir.as_os_str(),
            self.identity_file.as_os_str(),
            OsStr::new(&self.files.to_string()),
            OsStr::new(&self.file_bytes.to_string()),
            store.as_os_str(),
            OsStr::new(&run.to_string()),
        ])?;
        Ok((elapsed, kib))
    }
}
