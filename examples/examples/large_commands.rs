//! Every command of sf's path on a large repository, through the `sf` binary: a benchmark
//! program that prints each command's median time and peak resident memory on a small and a
//! large generated repository side by side, and their ratio; never a timed test.
//!
//! Each repository is the demo's project (`sum.sh`) and generated files of `--file-bytes` each
//! under `src/`, `--small` / `--large` files in all, committed on `main` of a bare Git repository (made
//! with `git fast-import`). On each, in order: `repo create --from-git` (with the bare
//! repository as upstream) and `repo create --from` a work tree of the same files, `slice
//! freeze` of the demo's Slice, `seal` of a one-file fix, `collect` of the first Candidate
//! (the base materialised into an empty tree store) beside `git archive | tar -x` of the same
//! commit, `collect` of another one-file Candidate (the store holds the base), `judge`,
//! `show`, `list`, `snapshot`, `report`, `export`, `land --deliver` to the bare repository, and `repo
//! import --from-upstream` of the team's next commit. Repeatable commands run `--runs` times
//! (a new Candidate or a new repository each time); the landing and the import once.
//!
//! The peak is the largest resident set of the command's process and every process it
//! waited for (`getrusage(RUSAGE_CHILDREN)` in a wrapper that runs only that command).
//!
//! ```text
//! cargo build --release --bins --lib
//! cargo run --release -p sf-examples --example large_commands -- \
//!     [--runs N] [--small FILES] [--large FILES] [--file-bytes BYTES] [--dir DIR] [--sf PATH]
//! ```
//!
//! Defaults: 3 runs, 1,000 and 100,000 files of 2,048 bytes, DIR the system's temporary
//! directory, PATH `target/release/sf` beside this program's directory.

use std::error::Error;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sf_examples::scale::{content_of, median, path_of};
use sf_host::canonical::Digest;

const SUM_BUGGY: &str = include_str!("../../cli/src/demo/sample/project/sum.sh");
const SUM_FIXED: &str = include_str!("../../cli/src/demo/sample/fix/sum.sh");
const SLICE: &[(&str, &str)] = &[
    (
        "slice.json",
        include_str!("../../cli/src/demo/sample/slice/slice.json"),
    ),
    (
        "acceptance.json",
        include_str!("../../cli/src/demo/sample/slice/acceptance.json"),
    ),
    (
        "inputs/numbers/numbers.txt",
        include_str!("../../cli/src/demo/sample/slice/inputs/numbers/numbers.txt"),
    ),
    (
        "inputs/empty/numbers.txt",
        include_str!("../../cli/src/demo/sample/slice/inputs/empty/numbers.txt"),
    ),
    (
        "harness/run-test.sh",
        include_str!("../../cli/src/demo/sample/slice/harness/run-test.sh"),
    ),
    (
        "overlay/tests/numbers.sh",
        include_str!("../../cli/src/demo/sample/slice/overlay/tests/numbers.sh"),
    ),
    ("recipe.json", "{\"timeoutMs\":60000,\"outputLimit\":65536}"),
];

struct Options {
    runs: usize,
    small: usize,
    large: usize,
    file_bytes: usize,
    dir: PathBuf,
    sf: PathBuf,
}

/// One command's measurements on one repository: times and peaks (KiB).
#[derive(Default)]
struct Measured {
    times: Vec<Duration>,
    peaks: Vec<u64>,
}

impl Measured {
    fn add(&mut self, (time, peak): (Duration, u64)) {
        self.times.push(time);
        self.peaks.push(peak);
    }

    fn time(&self) -> Duration {
        median(&self.times)
    }

    fn peak_mib(&self) -> f64 {
        self.peaks.iter().copied().max().unwrap_or(0) as f64 / 1024.0
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    if let Some("--measure") = args.next().as_deref() {
        return measure(args.collect());
    }
    let options = parse_options()?;
    let work = tempfile::Builder::new()
        .prefix("sf-large-commands-")
        .tempdir_in(&options.dir)?;
    println!(
        "large_commands: {} on {} and {} files of {} bytes; {} runs each",
        options.sf.display(),
        options.small,
        options.large,
        options.file_bytes,
        options.runs
    );
    let small = run_all(&options, &work.path().join("small"), options.small)?;
    let large = run_all(&options, &work.path().join("large"), options.large)?;
    println!();
    println!(
        "{:<34} {:>12} {:>12} {:>7} {:>10} {:>10}",
        "command",
        format!("{} files", options.small),
        format!("{} files", options.large),
        "ratio",
        "peak small",
        "peak large"
    );
    for ((name, small), (_, large)) in small.iter().zip(&large) {
        println!(
            "{name:<34} {:>10.0}ms {:>10.0}ms {:>6.2}x {:>7.1}MiB {:>7.1}MiB",
            small.time().as_secs_f64() * 1e3,
            large.time().as_secs_f64() * 1e3,
            large.time().as_secs_f64() / small.time().as_secs_f64(),
            small.peak_mib(),
            large.peak_mib()
        );
    }
    Ok(())
}

/// Every command on a generated repository of `files` files in `dir`.
fn run_all(
    options: &Options,
    dir: &Path,
    files: usize,
) -> Result<Vec<(&'static str, Measured)>, Box<dyn Error>> {
    std::fs::create_dir_all(dir)?;
    let started = Instant::now();
    let team = generate(dir, files, options.file_bytes)?;
    println!(
        "  {files} files: generated in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let sf = Sf::new(options, dir)?;
    let mut rows: Vec<(&'static str, Measured)> = Vec::new();
    let mut row = |name: &'static str| {
        rows.push((name, Measured::default()));
        rows.len() - 1
    };
    let (create_git, create_dir, freeze) = (
        row("repo create --from-git"),
        row("repo create --from"),
        row("slice freeze"),
    );
    let (seal, first, archive) = (
        row("seal (1 file)"),
        row("collect (first: materialise)"),
        row("  baseline: git archive | tar -x"),
    );
    let (second, judge, show, list) = (
        row("collect (another 1-file Candidate)"),
        row("judge"),
        row("show"),
        row("list"),
    );
    let snapshot = row("snapshot (the files' listing)");
    let (report, export, land, import) = (
        row("report"),
        row("export"),
        row("land --deliver (once)"),
        row("repo import --from-upstream (once)"),
    );
    let team_text = team.to_str().ok_or("a UTF-8 path")?;
    for run in 0..options.runs {
        let path = format!("repo-{run}.git");
        let identity = format!("identity-{run}.json");
        rows[create_git].1.add(sf.run(&[
            "repo",
            "create",
            "--path",
            &path,
            "--product",
            "large",
            "--target",
            "refs/heads/main",
            "--identity-out",
            &identity,
            "--from-git",
            team_text,
            "--rev=main",
            "--upstream-branch=main",
        ])?);
        let path = format!("from-dir-{run}.git");
        rows[create_dir].1.add(sf.run(&[
            "repo",
            "create",
            "--path",
            &path,
            "--product",
            "large",
            "--target",
            "refs/heads/main",
            "--from",
            "checkout",
        ])?);
    }
    std::fs::rename(dir.join("identity-0.json"), dir.join("identity.json"))?;
    for (path, text) in SLICE {
        write(&dir.join("slice").join(path), text)?;
    }
    for _ in 0..options.runs {
        rows[freeze].1.add(sf.run(&[
            "slice",
            "freeze",
            "--dir",
            "slice",
            "--identity",
            "identity.json",
        ])?);
    }
    let mut candidates = Vec::new();
    for run in 0..=options.runs {
        let proposal = dir.join(format!("fix-{run}.json"));
        let text = format!("{SUM_FIXED}# sealed in run {run}\n");
        write(
            &proposal,
            &serde_json::json!({"edits": [{
                "path": "sum.sh",
                "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
                "text": text,
            }]})
            .to_string(),
        )?;
        let (measured, output) = sf.run_json(&[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--proposal",
            proposal.to_str().ok_or("a UTF-8 path")?,
        ])?;
        rows[seal].1.add(measured);
        let digest = output["result"]["digest"]
            .as_str()
            .ok_or("a sealed digest")?;
        candidates.push(digest.to_owned());
    }
    for run in 0..options.runs {
        let store = dir.join(format!("trees-{run}"));
        let config = dir.join(format!("config-{run}.toml"));
        write(
            &config,
            &format!(
                "[environments]\ntrees = {:?}\n",
                store.to_str().ok_or("a UTF-8 path")?
            ),
        )?;
        let on = on(&candidates[0]);
        let mut args = vec![
            "--config",
            config.to_str().ok_or("a UTF-8 path")?,
            "collect",
        ];
        args.extend(on.iter().map(String::as_str));
        rows[first].1.add(sf.run(&args)?);
        rows[archive].1.add(archive_and_extract(
            &team,
            &dir.join(format!("archive-{run}")),
        )?);
        std::fs::remove_dir_all(&store)?;
        std::fs::remove_dir_all(dir.join(format!("archive-{run}")))?;
    }
    let config = dir.join("config.toml");
    write(
        &config,
        &format!(
            "[environments]\ntrees = {:?}\n",
            dir.join("trees").to_str().ok_or("a UTF-8 path")?
        ),
    )?;
    let config = config.to_str().ok_or("a UTF-8 path")?.to_owned();
    let with = |command: &str, candidate: &str| {
        let mut args = vec!["--config".to_owned(), config.clone(), command.to_owned()];
        args.extend(on(candidate));
        args
    };
    sf.run_strings(&with("collect", &candidates[0]))?;
    for candidate in &candidates[1..] {
        rows[second]
            .1
            .add(sf.run_strings(&with("collect", candidate))?);
        rows[judge]
            .1
            .add(sf.run_strings(&with("judge", candidate))?);
        rows[show].1.add(sf.run(&[
            "show",
            candidate,
            "--identity",
            "identity.json",
            "--slice",
            "slice",
        ])?);
        rows[list]
            .1
            .add(sf.run(&["list", "--identity", "identity.json", "--slice", "slice"])?);
        rows[snapshot]
            .1
            .add(sf.run(&["snapshot", "--identity", "identity.json"])?);
        let out = dir.join(format!("report-{}.html", &candidate[7..19]));
        rows[report].1.add(sf.run(&[
            "report",
            "--candidate",
            candidate,
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--out",
            out.to_str().ok_or("a UTF-8 path")?,
        ])?);
        let out = dir.join(format!("export-{}", &candidate[7..19]));
        rows[export].1.add(sf.run(&[
            "export",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--out",
            out.to_str().ok_or("a UTF-8 path")?,
        ])?);
    }
    let mut args = with("land", &candidates[1]);
    args.extend([
        "--gate".to_owned(),
        "gate.json".to_owned(),
        "--deliver".to_owned(),
    ]);
    write(&dir.join("gate.json"), "{\"proceed\": true}\n")?;
    rows[land].1.add(sf.run_strings(&args)?);
    team_commit(&team, files, options.file_bytes)?;
    rows[import].1.add(sf.run(&[
        "repo",
        "import",
        "--identity",
        "identity.json",
        "--from-upstream",
        "--advance",
    ])?);
    Ok(rows)
}

/// The flags naming `candidate` under the Slice of the repository `identity.json`.
fn on(candidate: &str) -> Vec<String> {
    [
        "--identity",
        "identity.json",
        "--candidate",
        candidate,
        "--slice",
        "slice",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `sf` in a working directory, each command measured by this program's `--measure`.
struct Sf {
    sf: PathBuf,
    dir: PathBuf,
}

impl Sf {
    fn new(options: &Options, dir: &Path) -> Result<Self, Box<dyn Error>> {
        Ok(Self {
            sf: options.sf.clone(),
            dir: dir.to_owned(),
        })
    }

    fn run(&self, args: &[&str]) -> Result<(Duration, u64), Box<dyn Error>> {
        Ok(self.run_json(args)?.0)
    }

    fn run_strings(&self, args: &[String]) -> Result<(Duration, u64), Box<dyn Error>> {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&args)
    }

    /// Runs `sf --json ARGS`; its time, peak and JSON answer. A command that fails (other
    /// than a decision's exit status) is an error: a benchmark of a refusal measures nothing.
    fn run_json(
        &self,
        args: &[&str],
    ) -> Result<((Duration, u64), serde_json::Value), Box<dyn Error>> {
        let output = Command::new(std::env::current_exe()?)
            .arg("--measure")
            .arg(&self.sf)
            .arg("--json")
            .args(args)
            .current_dir(&self.dir)
            .output()?;
        let text = String::from_utf8(output.stdout)?;
        let (line, answer) = text.split_once('\n').ok_or("no measurement")?;
        let (micros, peak) = line.split_once(' ').ok_or("a malformed measurement")?;
        let answer: serde_json::Value = serde_json::from_str(answer)
            .map_err(|error| format!("sf {args:?} answered no JSON ({error}): {answer}"))?;
        if answer["ok"] != true {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("sf {args:?} failed: {answer}\n{stderr}").into());
        }
        Ok((
            (Duration::from_micros(micros.parse()?), peak.parse()?),
            answer,
        ))
    }
}

/// The `--measure SF ARGS…` mode: runs `SF ARGS…`, then prints `<microseconds> <peak KiB>`
/// and the command's standard output.
fn measure(args: Vec<String>) -> Result<(), Box<dyn Error>> {
    let (program, args) = args.split_first().ok_or("--measure needs a program")?;
    let started = Instant::now();
    let output = Command::new(program)
        .args(args)
        .stderr(Stdio::inherit())
        .output()?;
    let elapsed = started.elapsed();
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{} {}", elapsed.as_micros(), usage.max_rss())?;
    stdout.write_all(&output.stdout)?;
    Ok(())
}

/// A bare repository `team.git` in `dir` holding the demo's project and `files` generated
/// files on `main`, and its work tree `checkout/`; the bare repository's path.
fn generate(dir: &Path, files: usize, file_bytes: usize) -> Result<PathBuf, Box<dyn Error>> {
    let team = dir.join("team.git");
    git(
        dir,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            team.to_str().ok_or("UTF-8")?,
        ],
    )?;
    let mut stream = Vec::new();
    let mut entries = vec![("sum.sh".to_owned(), SUM_BUGGY.as_bytes().to_vec())];
    // `files` in all, the project's one among them: a tree of exactly the default limit.
    entries.extend((0..files - 1).map(|i| (path_of(i), content_of(i, file_bytes))));
    stream.extend_from_slice(
        b"commit refs/heads/main\ncommitter Team <team@example.org> 1700000000 +0000\ndata 6\nlarge\n",
    );
    for (path, content) in &entries {
        stream.extend_from_slice(
            format!("M 100644 inline {path}\ndata {}\n", content.len()).as_bytes(),
        );
        stream.extend_from_slice(content);
        stream.push(b'\n');
    }
    fast_import(&team, &stream)?;
    let checkout = dir.join("checkout");
    for (path, content) in &entries {
        let file = checkout.join(path);
        std::fs::create_dir_all(file.parent().ok_or("a parent")?)?;
        std::fs::write(file, content)?;
    }
    Ok(team)
}

/// The team's next commit on `main`: one generated file changed.
fn team_commit(team: &Path, files: usize, file_bytes: usize) -> Result<(), Box<dyn Error>> {
    let path = path_of(files / 2);
    let mut content = content_of(files / 2, file_bytes);
    content.extend_from_slice(b"the team's next change\n");
    let mut stream = format!(
        "commit refs/heads/main\ncommitter Team <team@example.org> 1700000100 +0000\ndata 5\nnext\nfrom refs/heads/main^0\nM 100644 inline {path}\ndata {}\n",
        content.len()
    )
    .into_bytes();
    stream.extend_from_slice(&content);
    stream.push(b'\n');
    fast_import(team, &stream)
}

fn fast_import(repo: &Path, stream: &[u8]) -> Result<(), Box<dyn Error>> {
    let mut child = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()?;
    child.stdin.take().ok_or("stdin")?.write_all(stream)?;
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("git fast-import: {status}").into());
    }
    Ok(())
}

/// `git archive main | tar -x` into `out`, measured as one command.
fn archive_and_extract(team: &Path, out: &Path) -> Result<(Duration, u64), Box<dyn Error>> {
    std::fs::create_dir_all(out)?;
    let script = format!(
        "git --git-dir {} archive main | tar -x -C {}",
        team.to_str().ok_or("UTF-8")?,
        out.to_str().ok_or("UTF-8")?
    );
    let output = Command::new(std::env::current_exe()?)
        .args(["--measure", "/bin/sh", "-c", &script])
        .output()?;
    let text = String::from_utf8(output.stdout)?;
    let line = text.lines().next().ok_or("no measurement")?;
    let (micros, peak) = line.split_once(' ').ok_or("a malformed measurement")?;
    Ok((Duration::from_micros(micros.parse()?), peak.parse()?))
}

fn git(dir: &Path, args: &[&str]) -> Result<(), Box<dyn Error>> {
    let status = Command::new("git").current_dir(dir).args(args).status()?;
    if !status.success() {
        return Err(format!("git {args:?}: {status}").into());
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(path.parent().ok_or("a parent")?)?;
    Ok(std::fs::write(path, text)?)
}

fn parse_options() -> Result<Options, Box<dyn Error>> {
    let here = std::env::current_exe()?;
    let profile = here
        .parent()
        .and_then(Path::parent)
        .ok_or("this program's directory")?;
    let mut options = Options {
        runs: 3,
        small: 1_000,
        large: 100_000,
        file_bytes: 2_048,
        dir: std::env::temp_dir(),
        sf: profile.join("sf"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--runs" => options.runs = value.parse()?,
            "--small" => options.small = value.parse()?,
            "--large" => options.large = value.parse()?,
            "--file-bytes" => options.file_bytes = value.parse()?,
            "--dir" => options.dir = PathBuf::from(value),
            "--sf" => options.sf = PathBuf::from(value),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    if options.runs == 0 || options.small < 2 || options.large < 2 {
        return Err("--runs is at least 1, --small and --large at least 2".into());
    }
    Ok(options)
}
