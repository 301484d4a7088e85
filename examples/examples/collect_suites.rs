//! What sf costs on a real test suite: psf/requests' pytest modules collected through the
//! `sf` binary with `--jobs 1` and `--jobs 2`, and the same commands run straight on the host,
//! all side by side in one process, with the median wall time of each and two ratios. A
//! benchmark program that prints numbers, never a timed test.
//!
//! The repository is the fixture bundle `requests.bundle` at the parent of a fix commit; the
//! Slice has one command check per test module that needs no network (`python3 -m pytest`
//! from a venv built from the package registry and added with `sf env add`, its JUnit results
//! kept), the modules laid over the tree as the overlay; the Candidate appends a comment to
//! `src/requests/utils.py`. Every collection is a new attempt, and must be judged Verified for
//! the benchmark to go on. The direct baseline runs each check's argv with the environment
//! variables the sandbox would give it (the check's own, such as `PYTHONPATH`, and the fixed
//! base with the venv first on `PATH`), from the same venv, in a checkout of the Candidate's
//! tree with the overlay laid in, one after another, each timed as a whole process. So
//! `--jobs 2 / --jobs 1` is the speed-up of the collector's jobs on real checks (target at most
//! 0.6 on two cores), and `--jobs 1 / direct` what the collector, the sandbox and the evidence
//! cost on top of the tests themselves (target at most 1.1).
//!
//! ```text
//! cargo build --release -p sf-cli -p sf-sandbox-exec -p sf-sandbox-exec-plugin -p sf-git-cli
//! cargo run --release -p sf-examples --example collect_suites -- [--rounds N] [--sf SF]
//!     [--compare OTHER]
//! ```
//!
//! N defaults to 3, SF (the `sf` binary) to the one beside this program's directory
//! (`target/<profile>/sf`). With `--compare`, OTHER (another build's `sf`, its plugins beside
//! it: a baseline) is measured in the same rounds, the two taking turns, and both are printed
//! against the same direct baseline: on a machine other work shares, numbers from two
//! separate runs compare the load as much as the builds. It needs `/usr/bin/python3` with `venv`, `git`, the fixture bundle
//! in `/work/shared/fixtures/repos/` and the package registry; everything it makes is in one
//! temporary directory, removed at the end.

use std::error::Error;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sf_test_support::bench::{load_average, median};

/// The fixture bundle the repository is imported from.
const BUNDLE: &str = "/work/shared/fixtures/repos/requests.bundle";
/// The base: the parent of a fix commit of requests (the first one tests/cli_environments.rs
/// uses), so that its test modules pass on it.
const BASE: &str = "a4f9a599^";
/// The test modules that need no network, one check each, laid over the tree as the overlay.
const MODULES: &[&str] = &[
    "tests/test_utils.py",
    "tests/test_structures.py",
    "tests/test_hooks.py",
    "tests/test_help.py",
];
/// The file the Candidate edits.
const SOURCE: &str = "src/requests/utils.py";
/// The packages pytest and requests' test modules need, pinned.
const PACKAGES: &[&str] = &[
    "pytest==9.2.0",
    "urllib3==2.8.0",
    "idna==3.20",
    "charset-normalizer==3.5.3",
    "certifi==2026.10.19.post1",
];
/// Where a run sees its program (the tree with the overlay) and its scratch directory.
const PROGRAM_DIR: &str = "/sf/program";
const SCRATCH_DIR: &str = "/sf/scratch";

fn main() -> Result<(), Box<dyn Error>> {
    let sf_examples::SfBenchArgs {
        rounds,
        sf,
        compare,
    } = sf_examples::SfBenchArgs::parse(3)?;
    // Each binary gets a setup of its own: a Slice pins the collector that froze it.
    let mut sides = vec![Side::new(Bench::set_up(sf.clone())?, sf)];
    if let Some(other) = compare {
        sides.push(Side::new(Bench::set_up(other.clone())?, other));
    }
    let load_before = load_average();
    // One untimed direct round, so that no side pays for a cold page cache.
    sides[0].bench.direct()?;
    let mut direct = Vec::new();
    // The sides take turns within each round, so that other work on the machine weighs on
    // both alike.
    for _ in 0..rounds {
        for side in &mut sides {
            side.one.push(side.bench.collect(1)?);
        }
        for side in &mut sides {
            side.two.push(side.bench.collect(2)?);
        }
        direct.push(sides[0].bench.direct()?);
    }
    let direct = median(direct);
    println!(
        "requests at {BASE}, {} pytest modules ({}), {rounds} rounds",
        MODULES.len(),
        MODULES.join(", ")
    );
    // Other work on the machine takes cores from `--jobs 2` first: say how busy it was.
    println!(
        "  {} cores, load average {load_before} before, {} after",
        std::thread::available_parallelism()?,
        load_average()
    );
    println!(
        "  direct               median {:>8.3} s",
        direct.as_secs_f64()
    );
    for side in sides {
        let (one, two) = (median(side.one), median(side.two));
        println!("  {}", side.sf.display());
        println!(
            "    sf collect --jobs 1  median {:>8.3} s",
            one.as_secs_f64()
        );
        println!(
            "    sf collect --jobs 2  median {:>8.3} s",
            two.as_secs_f64()
        );
        println!(
            "    ratio --jobs 2 / --jobs 1: {:.2} (target at most 0.60)",
            two.as_secs_f64() / one.as_secs_f64()
        );
        println!(
            "    ratio --jobs 1 / direct:   {:.2} (target at most 1.10)",
            one.as_secs_f64() / direct.as_secs_f64()
        );
    }
    println!(
        "  direct: each check's argv and environment variables, with the same venv, run on the \
         host one after another in a checkout of the Candidate's tree with the overlay laid in"
    );
    Ok(())
}

/// One `sf` binary's setup and its times.
struct Side {
    bench: Bench,
    sf: PathBuf,
    one: Vec<Duration>,
    two: Vec<Duration>,
}

impl Side {
    fn new(bench: Bench, sf: PathBuf) -> Self {
        Self {
            bench,
            sf,
            one: Vec::new(),
            two: Vec::new(),
        }
    }
}

/// One command check: a pytest module run from the venv, its JUnit results in scratch.
struct Check {
    module: &'static str,
}

impl Check {
    fn id(&self) -> String {
        let name = self
            .module
            .trim_start_matches("tests/")
            .trim_end_matches(".py");
        format!("pytest-{}", name.replace('_', "-"))
    }

    fn argv(&self) -> Vec<String> {
        let results = format!("--junitxml={SCRATCH_DIR}/results.xml");
        ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            .into_iter()
            .chain([self.module, &results])
            .map(str::to_owned)
            .collect()
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PYTHONPATH", format!("{PROGRAM_DIR}/src")),
            ("PYTHONDONTWRITEBYTECODE", "1".to_owned()),
        ]
    }

    fn acceptance(&self) -> serde_json::Value {
        let env: serde_json::Map<String, serde_json::Value> = self
            .env()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value.into()))
            .collect();
        serde_json::json!({
            "kind": "command", "id": self.id(), "phase": "guardrail", "stage": "candidate",
            "argv": self.argv(), "cwd": {"from": "tree", "path": ""}, "env": env,
            "environment": "pytest",
            "results": {"junit": "results.xml", "maxBytes": 4194304},
            "input": "none",
            "expectation": {"exitCode": 0, "stdoutDigest": null},
        })
    }

    /// The same command on the host: the sandbox's paths replaced by `program` and `scratch`,
    /// nothing inherited, the fixed base of a run with an environment (docs/executor.md).
    fn on_host(&self, venv: &Path, program: &Path, scratch: &Path) -> Command {
        let host = |text: &str| {
            text.replace(PROGRAM_DIR, &program.to_string_lossy())
                .replace(SCRATCH_DIR, &scratch.to_string_lossy())
        };
        let argv = self.argv();
        let mut command = Command::new(&argv[0]);
        command
            .args(argv[1..].iter().map(|arg| host(arg)))
            .current_dir(program)
            .env_clear()
            .env("HOME", scratch)
            .env("LANG", "C.UTF-8")
            .env("TMPDIR", scratch)
            .env("TZ", "UTC")
            .env("PATH", format!("{}/bin:/usr/bin:/bin", venv.display()))
            .envs(self.env().iter().map(|(name, value)| (name, host(value))));
        command
    }
}

/// Everything set up once: the repository, the environment, the frozen Slice, the sealed
/// Candidate and the checkout the direct baseline runs in.
struct Bench {
    sf: PathBuf,
    /// Removed when the benchmark ends.
    _root: tempfile::TempDir,
    /// Every user can search it (the sandbox's user reads the environment store below when sf
    /// runs as root): `HOME` of every sf command, the benchmark's own environment store and
    /// the `sf.toml` naming it (unset, the store as root is the machine's
    /// /var/lib/sf/environments, where a second run's venv could not take the name), and the
    /// venv.
    public: PathBuf,
    /// Private (0700): the repository, the Slice, its evidence and the checkout.
    work: PathBuf,
    candidate: String,
    checks: Vec<Check>,
}

impl Bench {
    fn set_up(sf: PathBuf) -> Result<Self, Box<dyn Error>> {
        let root = tempfile::Builder::new()
            .prefix("sf-collect-suites-")
            .tempdir()?;
        let public = root.path().canonicalize()?;
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o755))?;
        std::fs::create_dir(public.join("home"))?;
        std::fs::write(
            public.join("sf.toml"),
            format!(
                "[environments]\nstore = \"{}\"\n",
                public.join("environments").display()
            ),
        )?;
        let work = public.join("work");
        std::fs::create_dir(&work)?;
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o700))?;
        let mut bench = Self {
            sf,
            _root: root,
            public,
            work,
            candidate: String::new(),
            checks: MODULES.iter().map(|&module| Check { module }).collect(),
        };
        bench.venv()?;
        bench.repository()?;
        bench.slice()?;
        bench.candidate = bench.seal()?;
        bench.checkout()?;
        Ok(bench)
    }

    fn venv_dir(&self) -> PathBuf {
        self.public.join("venv")
    }

    fn clone_dir(&self) -> PathBuf {
        self.work.join("requests.git")
    }

    fn checkout_dir(&self) -> PathBuf {
        self.work.join("checkout")
    }

    /// `sf --json ARGS` in the work directory with the public `HOME` and `sf.toml`; its
    /// result.
    fn sf_json(&self, args: &[&str]) -> Result<serde_json::Value, Box<dyn Error>> {
        let output = Command::new(&self.sf)
            .arg("--json")
            .args(args)
            .current_dir(&self.work)
            .env("HOME", self.public.join("home"))
            .env("SF_CONFIG", self.public.join("sf.toml"))
            .output()?;
        let envelope: serde_json::Value =
            serde_json::from_slice(&output.stdout).map_err(|error| {
                format!(
                    "sf {args:?}: {error}: {}",
                    String::from_utf8_lossy(&output.stderr)
                )
            })?;
        if envelope["ok"] != true {
            return Err(format!("sf {args:?}: {envelope}").into());
        }
        Ok(envelope["result"].clone())
    }

    /// The text of `path` at the base.
    fn base_text(&self, path: &str) -> Result<String, Box<dyn Error>> {
        let shown = run(Command::new("git")
            .arg("--git-dir")
            .arg(self.clone_dir())
            .args(["show", &format!("{BASE}:{path}")]))?;
        Ok(String::from_utf8(shown)?)
    }

    /// pytest and requests' test dependencies from the package registry, added to the store.
    fn venv(&self) -> Result<(), Box<dyn Error>> {
        let venv = self.venv_dir();
        run(Command::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(&venv))?;
        run(Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PACKAGES))?;
        self.sf_json(&["env", "add", "pytest", path_str(&venv)?])?;
        Ok(())
    }

    /// A bare clone of the fixture bundle, imported at the base.
    fn repository(&self) -> Result<(), Box<dyn Error>> {
        run(Command::new("git")
            .args(["clone", "-q", "--bare", BUNDLE])
            .arg(self.clone_dir()))?;
        self.sf_json(&[
            "repo",
            "create",
            "--path",
            "repo.git",
            "--product",
            "requests",
            "--target",
            "refs/heads/main",
            "--from-git",
            path_str(&self.clone_dir())?,
            "--rev",
            BASE,
            "--identity-out",
            "identity.json",
        ])?;
        Ok(())
    }

    /// The Slice: the modules as overlay and protected, one check each; frozen.
    fn slice(&self) -> Result<(), Box<dyn Error>> {
        let slice = self.work.join("slice");
        let mut protected: Vec<&str> = MODULES.to_vec();
        protected.push("tests/conftest.py");
        write(
            &slice.join("slice.json"),
            &serde_json::json!({
                "id": "suites", "revision": 1, "scope": [SOURCE], "protected": protected,
            })
            .to_string(),
        )?;
        for module in MODULES {
            write(
                &slice.join("overlay").join(module),
                &self.base_text(module)?,
            )?;
        }
        write(&slice.join("inputs/none/README"), "no input\n")?;
        write(
            &slice.join("recipe.json"),
            r#"{"timeoutMs":300000,"outputLimit":1048576}"#,
        )?;
        let checks: Vec<serde_json::Value> = self.checks.iter().map(Check::acceptance).collect();
        write(
            &slice.join("acceptance.json"),
            &serde_json::json!({"protocol": "sf-repository-acceptance/3", "checks": checks})
                .to_string(),
        )?;
        self.sf_json(&[
            "slice",
            "freeze",
            "--dir",
            "slice",
            "--identity",
            "identity.json",
        ])?;
        Ok(())
    }

    /// The Candidate's text of [`SOURCE`]: the base's with a comment appended.
    fn proposed_text(&self) -> Result<String, Box<dyn Error>> {
        Ok(format!(
            "{}\n# collect_suites: a comment\n",
            self.base_text(SOURCE)?
        ))
    }

    fn seal(&self) -> Result<String, Box<dyn Error>> {
        let prior = {
            use sha2::Digest as _;
            let base = self.base_text(SOURCE)?;
            format!(
                "sha256:{}",
                hex::encode(sha2::Sha256::digest(base.as_bytes()))
            )
        };
        write(
            &self.work.join("proposal.json"),
            &serde_json::json!({"edits": [{
                "path": SOURCE, "prior": prior, "text": self.proposed_text()?,
            }]})
            .to_string(),
        )?;
        let sealed = self.sf_json(&[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--proposal",
            "proposal.json",
        ])?;
        Ok(sealed["digest"].as_str().ok_or("no digest")?.to_owned())
    }

    /// The Candidate's tree on the host: the base checked out, the proposal's edit and the
    /// overlay laid in.
    fn checkout(&self) -> Result<(), Box<dyn Error>> {
        let checkout = self.checkout_dir();
        run(Command::new("git")
            .args(["clone", "-q", "--no-checkout"])
            .arg(self.clone_dir())
            .arg(&checkout))?;
        run(Command::new("git")
            .arg("-C")
            .arg(&checkout)
            .args(["checkout", "-q", "--detach", BASE]))?;
        write(&checkout.join(SOURCE), &self.proposed_text()?)?;
        for module in MODULES {
            write(&checkout.join(module), &self.base_text(module)?)?;
        }
        Ok(())
    }

    /// `sf collect --jobs JOBS`, a new attempt, timed; judged Verified after.
    fn collect(&self, jobs: usize) -> Result<Duration, Box<dyn Error>> {
        let on = [
            "--identity",
            "identity.json",
            "--candidate",
            &self.candidate,
            "--slice",
            "slice",
        ];
        let jobs = jobs.to_string();
        let mut collect = vec!["collect"];
        collect.extend(on);
        collect.extend(["--jobs", &jobs]);
        let started = Instant::now();
        let result = self.sf_json(&collect)?;
        let elapsed = started.elapsed();
        if result["mayJudge"] != true {
            return Err(format!("the collection may not be judged: {result}").into());
        }
        let mut judge = vec!["judge"];
        judge.extend(on);
        let verdict = &self.sf_json(&judge)?["verdict"];
        if verdict["outcome"] != "verified" {
            return Err(format!("--jobs {jobs}: not Verified: {verdict}").into());
        }
        Ok(elapsed)
    }

    /// Each check's command on the host, one after another, each in a fresh scratch
    /// directory; the sum of their wall times.
    fn direct(&self) -> Result<Duration, Box<dyn Error>> {
        let mut total = Duration::ZERO;
        for check in &self.checks {
            let scratch = self.work.join("scratch");
            if scratch.exists() {
                std::fs::remove_dir_all(&scratch)?;
            }
            std::fs::create_dir(&scratch)?;
            let mut command = check.on_host(&self.venv_dir(), &self.checkout_dir(), &scratch);
            let started = Instant::now();
            let output = command.output()?;
            total += started.elapsed();
            if !output.status.success() || !scratch.join("results.xml").is_file() {
                return Err(format!(
                    "{} on the host: {}\n{}",
                    check.module,
                    output.status,
                    String::from_utf8_lossy(&output.stdout)
                )
                .into());
            }
        }
        Ok(total)
    }
}

/// Runs `command`; its stdout, or an error with its stderr.
fn run(command: &mut Command) -> Result<Vec<u8>, Box<dyn Error>> {
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "{command:?}: {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(output.stdout)
}

fn path_str(path: &Path) -> Result<&str, Box<dyn Error>> {
    Ok(path.to_str().ok_or("a path that is not UTF-8")?)
}

fn write(path: &Path, text: &str) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
    std::fs::write(path, text)?;
    Ok(())
}
