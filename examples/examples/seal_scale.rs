//! What a seal costs as the tree grows: a benchmark program that prints medians and ratios
//! side by side, never a timed test.
//!
//! It generates deterministic repositories (a small base and a large one, `FILE_BYTES` of text
//! per file, under `src/dNNN/sN/`), then times, through git-cli loaded as a plugin the way `sf`
//! loads it, `open_repository` and `Repository::seal`:
//!
//! - 64 edited files on the small base, beside `git fast-import` of the same change (the same
//!   base tree, the same 64 new contents, one commit and one branch ref) into a plain bare
//!   repository, both with `core.fsync=all`;
//! - one edited file on the small base and on the large one.
//!
//! Every run seals new content (the run number is in it), so no seal is a replay. sf and
//! fast-import runs alternate, so that drift in the machine's load falls on both alike. It
//! also times a snapshot of each base alone: the whole-tree read an `sf-candidate/3` seal
//! still needs for the manifest's content digest (every blob's bytes). The bound on each
//! store operation is raised to 30 minutes, so that a slow store gives a number, not a
//! timeout (an sf that wrote one loose object per object could not create the 100,000-file
//! base within the default 30 s).
//!
//! ```text
//! cargo build --release -p sf-git-cli
//! cargo run --release -p sf-examples --example seal_scale -- \
//!     [--runs N] [--small FILES] [--large FILES] [--file-bytes BYTES] [--plugin-dir DIR]
//! ```
//!
//! Defaults: 11 runs, 1,000 and 100,000 files of 1,024 bytes (about 100 MiB for the large
//! base; `--file-bytes 21000` makes it 2 GiB, which takes several minutes and as many GiB of
//! disk to generate, and several copies of the whole tree in memory for each seal).
//! PLUGIN_DIR (where `libsf_git_cli.so` and its manifest are) defaults to the directory above
//! this program's (`target/<profile>`). The repositories go under `TMPDIR`: on a tmpfs every
//! `fsync` is free, for both sides, which shows what each costs besides its syncs. Needs a
//! root-owned git at /usr/bin/git.

use std::error::Error;
use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sf_examples::scale::{
    content_of, create_generated, edited, frozen, median, new_content, open, path_of,
    peak_resident_kib, proposal_of, run_child,
};
use sf_host::canonical::Digest;
use sf_host::contracts::ObjectStoreFactory;
use sf_host::git_object::ObjectId;
use sf_host::repository::{RepositoryIdentity, parse_repository_identity};

/// The Git every comparison runs.
const GIT: &str = "/usr/bin/git";

struct Options {
    runs: usize,
    small: usize,
    large: usize,
    file_bytes: usize,
    plugin_dir: PathBuf,
}

fn main() -> Result<(), Box<dyn Error>> {
    if std::env::args().nth(1).as_deref() == Some("--child") {
        return child(std::env::args().skip(2).collect());
    }
    let options = parse_options()?;
    let (plugin, factory) = sf_examples::git_cli_plugin(&options.plugin_dir)?;

    let workdir = tempfile::Builder::new()
        .prefix("sf-seal-scale-")
        .tempdir()?;
    std::fs::set_permissions(workdir.path(), std::fs::Permissions::from_mode(0o700))?;
    let root = workdir.path().canonicalize()?;

    println!(
        "seal_scale: git-cli plugin {} (ABI 1.{}); files of {} bytes; {} runs each",
        plugin.library().display(),
        plugin.abi_minor(),
        options.file_bytes,
        options.runs
    );
    let started = Instant::now();
    let small = Base::generate(
        factory.as_ref(),
        &root.join("small"),
        options.small,
        options.file_bytes,
    )?;
    println!(
        "  generated the {}-file base in {:.1} s",
        options.small,
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let large = Base::generate(
        factory.as_ref(),
        &root.join("large"),
        options.large,
        options.file_bytes,
    )?;
    println!(
        "  generated the {}-file base in {:.1} s",
        options.large,
        started.elapsed().as_secs_f64()
    );

    let mut seal64 = Vec::new();
    let mut import64 = Vec::new();
    let mut seal1_small = Vec::new();
    let mut seal1_large = Vec::new();
    let mut snapshot_small = Vec::new();
    let mut snapshot_large = Vec::new();
    for run in 0..options.runs {
        seal64.push(small.seal(factory.as_ref(), 64, run)?);
        import64.push(small.fast_import(64, run)?);
        seal1_small.push(small.seal(factory.as_ref(), 1, run)?);
        seal1_large.push(large.seal(factory.as_ref(), 1, run)?);
        snapshot_small.push(small.snapshot(factory.as_ref())?);
        snapshot_large.push(large.snapshot(factory.as_ref())?);
    }

    // The large base's seal and export in processes of their own, for their peak resident
    // memory (each reads its own VmHWM before it exits).
    let mut child_seals = Vec::new();
    let mut child_exports = Vec::new();
    for run in 0..options.runs.min(5) {
        let (elapsed, hwm, digest) =
            large.in_child(&options, &["seal", &format!("{}", 1000 + run)])?;
        child_seals.push((elapsed, hwm));
        let (elapsed, hwm, _) = large.in_child(&options, &["export", &digest])?;
        child_exports.push((elapsed, hwm));
    }
    let export_small = {
        let digest = small.seal_digest(factory.as_ref(), 1, 2000)?;
        (0..options.runs)
            .map(|_| small.export(factory.as_ref(), &digest))
            .collect::<Result<Vec<_>, _>>()?
    };

    let ms = |values: &[Duration]| median(values).as_secs_f64() * 1e3;
    println!("medians:");
    println!(
        "  64 files on {:>7} files   sf seal {:>9.2} ms   git fast-import {:>8.2} ms   ratio {:>6.2}   (target <= 2)",
        options.small,
        ms(&seal64),
        ms(&import64),
        ms(&seal64) / ms(&import64)
    );
    println!(
        "  1 file on {:>7} files     sf seal {:>9.2} ms",
        options.small,
        ms(&seal1_small)
    );
    println!(
        "  1 file on {:>7} files     sf seal {:>9.2} ms   ratio to {} files {:>6.2}   (target <= 1.5)",
        options.large,
        ms(&seal1_large),
        options.small,
        ms(&seal1_large) / ms(&seal1_small)
    );
    println!(
        "  snapshot (whole-tree read) {:>7} files {:>9.2} ms   {:>7} files {:>9.2} ms",
        options.small,
        ms(&snapshot_small),
        options.large,
        ms(&snapshot_large)
    );
    let peak = |runs: &[(Duration, u64)]| runs.iter().map(|(_, hwm)| *hwm).max().unwrap_or(0);
    let times = |runs: &[(Duration, u64)]| runs.iter().map(|(t, _)| *t).collect::<Vec<_>>();
    println!(
        "  export {:>7} files {:>9.2} ms   {:>7} files (own process) {:>9.2} ms",
        options.small,
        ms(&export_small),
        options.large,
        ms(&times(&child_exports)),
    );
    println!(
        "  peak resident memory on {:>7} files: seal {:>7.1} MiB, export {:>7.1} MiB   (target <= 256 MiB; 1-file seal in its own process {:.2} ms)",
        options.large,
        peak(&child_seals) as f64 / 1024.0,
        peak(&child_exports) as f64 / 1024.0,
        ms(&times(&child_seals)),
    );
    Ok(())
}

/// `--child seal RUN` or `--child export DIGEST`, after the options `--plugin-dir DIR
/// --identity FILE --files N --file-bytes N` the parent passes: one seal of one file (run
/// `RUN`) or one export, in this process, printing `<microseconds> <VmHWM KiB> <digest>`.
fn child(args: Vec<String>) -> Result<(), Box<dyn Error>> {
    let [plugin_dir, identity, files, file_bytes, mode, value] = args.as_slice() else {
        return Err("--child PLUGIN_DIR IDENTITY FILES FILE_BYTES seal|export VALUE".into());
    };
    let (_plugin, factory) = sf_examples::git_cli_plugin(Path::new(plugin_dir))?;
    let identity = parse_repository_identity(&std::fs::read(identity)?)?;
    let (files, file_bytes): (usize, usize) = (files.parse()?, file_bytes.parse()?);
    let started = Instant::now();
    let repository = open(factory.as_ref(), &identity)?;
    let digest = match mode.as_str() {
        "seal" => {
            let proposal = proposal_of(files, file_bytes, 1, value.parse()?);
            repository
                .seal(&frozen(identity.initial), &proposal)?
                .digest
        }
        "export" => {
            let digest = Digest::parse(value).ok_or("a digest")?;
            repository.export_candidate(&digest)?.digest
        }
        _ => return Err(format!("unknown child mode {mode}").into()),
    };
    let elapsed = started.elapsed();
    let hwm = peak_resident_kib()?;
    println!("{} {hwm} {digest}", elapsed.as_micros());
    Ok(())
}

fn parse_options() -> Result<Options, Box<dyn Error>> {
    let mut options = Options {
        runs: 11,
        small: 1_000,
        large: 100_000,
        file_bytes: 1_024,
        plugin_dir: sf_examples::default_plugin_dir()?,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} takes a value"))?;
        match flag.as_str() {
            "--runs" => options.runs = value.parse()?,
            "--small" => options.small = value.parse()?,
            "--large" => options.large = value.parse()?,
            "--file-bytes" => options.file_bytes = value.parse()?,
            "--plugin-dir" => options.plugin_dir = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag}").into()),
        }
    }
    if options.runs == 0 || options.small < 64 || options.large < options.small {
        return Err("runs >= 1, --small >= 64 and --large >= --small".into());
    }
    Ok(options)
}

/// One generated base: an owned repository holding it as its initial commit, and a plain bare
/// repository holding the same tree for fast-import.
struct Base {
    identity: RepositoryIdentity,
    /// Where the identity is written, for a child process.
    identity_file: PathBuf,
    file_bytes: usize,
    paths: Vec<String>,
    plain: PathBuf,
    home: PathBuf,
    plain_base: String,
}

impl Base {
    /// Generates a base of `files` files in the new directory `root`.
    fn generate(
        factory: &dyn ObjectStoreFactory,
        root: &Path,
        files: usize,
        file_bytes: usize,
    ) -> Result<Self, Box<dyn Error>> {
        std::fs::create_dir(root)?;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
        let paths: Vec<String> = (0..files).map(path_of).collect();
        let contents: Vec<Vec<u8>> = (0..files).map(|i| content_of(i, file_bytes)).collect();
        let identity = create_generated(factory, &root.join("owned"), files, file_bytes)?;
        let plain = root.join("plain.git");
        let home = root.join("home");
        std::fs::create_dir_all(&home)?;
        let status = git(&home, None)
            .args(["init", "--quiet", "--bare"])
            .arg(&plain)
            .status()?;
        if !status.success() {
            return Err("git init failed".into());
        }
        let mut stream = b"commit refs/heads/main\ncommitter bench <bench@example.com> 0 +0000\ndata 5\nbase\n\n".to_vec();
        for (path, content) in paths.iter().zip(&contents) {
            push_inline(&mut stream, path, content);
        }
        fast_import(&home, &plain, stream)?;
        let out = git(&home, Some(&plain))
            .args(["rev-parse", "refs/heads/main^{tree}", "refs/heads/main"])
            .output()?;
        let text = String::from_utf8(out.stdout)?;
        let mut lines = text.lines();
        let (plain_tree, plain_base) = (
            lines.next().ok_or("no tree")?.to_owned(),
            lines.next().ok_or("no commit")?.to_owned(),
        );
        let identity_file = root.join("identity.json");
        std::fs::write(&identity_file, identity.to_canonical_bytes())?;
        let repository = open(factory, &identity)?;
        let owned_tree = repository.snapshot(&identity.initial)?.tree;
        if ObjectId::parse_hex(&plain_tree) != Some(owned_tree) {
            return Err(format!(
                "the plain repository's tree {plain_tree} is not the owned one {owned_tree}"
            )
            .into());
        }
        Ok(Self {
            identity,
            identity_file,
            file_bytes,
            paths,
            plain,
            home,
            plain_base,
        })
    }

    /// Opens the owned repository and seals `edits` edits of run `run`: the timed region.
    fn seal(
        &self,
        factory: &dyn ObjectStoreFactory,
        edits: usize,
        run: usize,
    ) -> Result<Duration, Box<dyn Error>> {
        let proposal = proposal_of(self.paths.len(), self.file_bytes, edits, run);
        let frozen = frozen(self.identity.initial);
        let started = Instant::now();
        let repository = open(factory, &self.identity)?;
        let sealed = repository.seal(&frozen, &proposal)?;
        let elapsed = started.elapsed();
        if sealed.manifest.edits.len() != edits {
            return Err("the seal recorded another number of edits".into());
        }
        Ok(elapsed)
    }

    /// Seals `edits` edits of run `run`, untimed, and gives the Candidate's digest.
    fn seal_digest(
        &self,
        factory: &dyn ObjectStoreFactory,
        edits: usize,
        run: usize,
    ) -> Result<Digest, Box<dyn Error>> {
        let proposal = proposal_of(self.paths.len(), self.file_bytes, edits, run);
        Ok(open(factory, &self.identity)?
            .seal(&frozen(self.identity.initial), &proposal)?
            .digest)
    }

    /// Opens the owned repository and exports Candidate `digest`: the timed region.
    fn export(
        &self,
        factory: &dyn ObjectStoreFactory,
        digest: &Digest,
    ) -> Result<Duration, Box<dyn Error>> {
        let started = Instant::now();
        open(factory, &self.identity)?.export_candidate(digest)?;
        Ok(started.elapsed())
    }

    /// Runs this program as `--child` on this base: `(elapsed, peak KiB, digest)`.
    fn in_child(
        &self,
        options: &Options,
        args: &[&str],
    ) -> Result<(Duration, u64, String), Box<dyn Error>> {
        let plugin_dir = options.plugin_dir.as_os_str();
        let files = self.paths.len().to_string();
        let file_bytes = self.file_bytes.to_string();
        let mut all = vec![
            plugin_dir,
            self.identity_file.as_os_str(),
            OsStr::new(&files),
            OsStr::new(&file_bytes),
        ];
        all.extend(args.iter().map(OsStr::new));
        let (elapsed, kib, rest) = run_child(all)?;
        let digest = rest.into_iter().next().ok_or("no digest")?;
        Ok((elapsed, kib, digest))
    }

    /// The same change as [`Self::seal`] through one `git fast-import`: a commit on the base
    /// with the new contents inline, and its branch ref.
    fn fast_import(&self, edits: usize, run: usize) -> Result<Duration, Box<dyn Error>> {
        let mut stream = format!(
            "commit refs/heads/run-{edits}-{run}\ncommitter bench <bench@example.com> {run} +0000\ndata 4\nrun\nfrom {}\n",
            self.plain_base
        )
        .into_bytes();
        for at in edited(self.paths.len(), edits) {
            push_inline(
                &mut stream,
                &self.paths[at],
                &new_content(at, self.file_bytes, run, edits),
            );
        }
        let started = Instant::now();
        fast_import(&self.home, &self.plain, stream)?;
        Ok(started.elapsed())
    }

    /// A snapshot of the base alone: opening and reading the whole tree back.
    fn snapshot(&self, factory: &dyn ObjectStoreFactory) -> Result<Duration, Box<dyn Error>> {
        let started = Instant::now();
        let repository = open(factory, &self.identity)?;
        let snapshot = repository.snapshot(&self.identity.initial)?;
        let elapsed = started.elapsed();
        if snapshot.files.len() != self.paths.len() {
            return Err("the snapshot holds another number of files".into());
        }
        Ok(elapsed)
    }
}

fn push_inline(stream: &mut Vec<u8>, path: &str, content: &[u8]) {
    stream
        .extend_from_slice(format!("M 100644 inline {path}\ndata {}\n", content.len()).as_bytes());
    stream.extend_from_slice(content);
    stream.push(b'\n');
}

/// Git with a cleared environment, an empty HOME and no system or global configuration.
fn git(home: &Path, git_dir: Option<&Path>) -> Command {
    let mut command = Command::new(GIT);
    command
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    if let Some(dir) = git_dir {
        command.env("GIT_DIR", dir);
    }
    command
}

/// Runs `git -c core.fsync=all fast-import --quiet` on `stream`.
fn fast_import(home: &Path, plain: &Path, stream: Vec<u8>) -> Result<(), Box<dyn Error>> {
    let mut child = git(home, Some(plain))
        .args(["-c", "core.fsync=all", "fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    child.stdin.take().ok_or("no stdin")?.write_all(&stream)?;
    if !child.wait()?.success() {
        return Err("git fast-import failed".into());
    }
    Ok(())
}
