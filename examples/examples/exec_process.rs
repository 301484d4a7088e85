//! What one sandboxed run costs as a whole process: `sf exec` of `/bin/true` (the `sf` binary
//! started, its configuration read, the sandbox-exec plugin loaded, the Executor made, one run
//! with the whole confinement, the Executor dropped, the answer printed) against bubblewrap's
//! minimal profile around `/bin/true` and `/bin/true` bare, each a whole process started and
//! waited for. `sf --version` is shown too: the cost of starting the `sf` binary at all. A
//! benchmark program that prints numbers, never a timed test.
//!
//! ```text
//! cargo build --release -p sf-cli -p sf-sandbox-exec -p sf-sandbox-exec-plugin
//! cargo run --release -p sf-examples --example exec_process -- [--rounds N] [--sf SF]
//!     [--compare OTHER]
//! ```
//!
//! N defaults to 200 and SF (the `sf` binary, its plugins and launcher beside it) to the one
//! beside this program's directory (`target/<profile>/sf`). With `--compare`, OTHER (another
//! build's `sf`: a baseline) is measured in the same rounds. The variants are measured
//! interleaved, one of each per round and each after the same short pause, so that other work
//! on the machine weighs on all of them alike; the target is `sf exec` at most 1.0× bubblewrap.
//! Bubblewrap is installed with apt when it is missing and this runs as root (its row is
//! skipped otherwise).

use std::error::Error;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sf_test_support::bench::{BWRAP_MINIMAL, load_average, median};

/// The idle time before every measurement, the same for every variant.
const PAUSE: Duration = Duration::from_millis(4);

/// One measured process: its name, its command line, and its times.
struct Variant {
    name: String,
    argv: Vec<String>,
    samples: Vec<Duration>,
}

impl Variant {
    fn new(name: impl Into<String>, argv: Vec<String>) -> Self {
        Self {
            name: name.into(),
            argv,
            samples: Vec::new(),
        }
    }

    /// Runs the command once, from `dir`; its start-to-exit time, or why it failed.
    fn time(&self, dir: &Path) -> Result<Duration, Box<dyn Error>> {
        let started = Instant::now();
        let status = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let elapsed = started.elapsed();
        if !status.success() {
            return Err(format!("{}: {status}", self.argv.join(" ")).into());
        }
        Ok(elapsed)
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let sf_examples::SfBenchArgs {
        rounds,
        sf,
        compare,
    } = sf_examples::SfBenchArgs::parse(200)?;
    let bwrap = bubblewrap();
    // The program and input `sf exec` reads: one file each, in a directory of their own.
    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("program"))?;
    std::fs::write(dir.path().join("program/entry"), "unused\n")?;
    std::fs::create_dir(dir.path().join("input"))?;
    std::fs::write(dir.path().join("input/data"), "unused\n")?;

    let text = |parts: &[&str]| parts.iter().map(|part| (*part).to_owned()).collect();
    let mut variants = vec![Variant::new("bare /bin/true", text(&["/bin/true"]))];
    if let Some(bwrap) = &bwrap {
        let mut argv = vec![bwrap.clone()];
        argv.extend(text(BWRAP_MINIMAL));
        argv.push("/bin/true".to_owned());
        variants.push(Variant::new("bubblewrap, minimal profile", argv));
    }
    let mut binaries = vec![sf];
    binaries.extend(compare);
    for binary in &binaries {
        let shown = binary.display().to_string();
        check_answer(binary, dir.path())?;
        variants.push(Variant::new(
            format!("{shown} --version"),
            vec![shown.clone(), "--version".to_owned()],
        ));
        variants.push(Variant::new(
            format!("{shown} exec"),
            vec![
                shown,
                "exec".to_owned(),
                "--runtime".to_owned(),
                "/bin/true".to_owned(),
                "--program".to_owned(),
                "program".to_owned(),
                "--entry".to_owned(),
                "entry".to_owned(),
                "--input".to_owned(),
                "input".to_owned(),
            ],
        ));
    }

    let load_before = load_average();
    // Warm the page cache and the dynamic loader for every variant alike.
    for variant in &variants {
        for _ in 0..3 {
            variant.time(dir.path())?;
        }
    }
    for _ in 0..rounds {
        for variant in &mut variants {
            std::thread::sleep(PAUSE);
            let sample = variant.time(dir.path())?;
            variant.samples.push(sample);
        }
    }
    println!(
        "whole processes, median of {rounds} rounds (interleaved, each after a {} ms pause)",
        PAUSE.as_millis()
    );
    println!(
        "  {} cores, load average {load_before} before, {} after",
        std::thread::available_parallelism()?,
        load_average()
    );
    let medians: Vec<Duration> = variants
        .iter()
        .map(|variant| median(variant.samples.clone()))
        .collect();
    let bare = medians[0];
    let reference = bwrap.as_ref().map(|_| medians[1]);
    for (variant, value) in variants.iter().zip(&medians) {
        let mut line = format!(
            "  {:<52} {:>8.3} ms  {:>6.2}× bare",
            variant.name,
            value.as_secs_f64() * 1e3,
            value.as_secs_f64() / bare.as_secs_f64()
        );
        if let Some(reference) = reference {
            line.push_str(&format!(
                "  {:>5.2}× bubblewrap",
                value.as_secs_f64() / reference.as_secs_f64()
            ));
        }
        println!("{line}");
    }
    match bwrap {
        Some(_) => println!("  target: sf exec at most 1.00× bubblewrap"),
        None => println!(
            "  bubblewrap is not installed (apt-get install bubblewrap): its row is skipped"
        ),
    }
    Ok(())
}

/// `sf exec` of `/bin/true` answers that the program exited 0, confined as always: a faster
/// run that confined less would not be worth measuring.
fn check_answer(sf: &Path, dir: &Path) -> Result<(), Box<dyn Error>> {
    let output = Command::new(sf)
        .args(["--json", "exec", "--runtime", "/bin/true"])
        .args([
            "--program",
            "program",
            "--entry",
            "entry",
            "--input",
            "input",
        ])
        .current_dir(dir)
        .output()?;
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let result = &envelope["result"];
    let enforced = &result["identities"]["enforcement"]["landlock"];
    if envelope["ok"] != true || result["exitCode"] != 0 || enforced != "fully-enforced" {
        return Err(format!(
            "{} exec did not run /bin/true confined: {envelope}",
            sf.display()
        )
        .into());
    }
    Ok(())
}

/// The bubblewrap program: on the PATH, else installed with apt when this runs as root;
/// `None` when there is none.
fn bubblewrap() -> Option<String> {
    let found = || {
        Command::new("bwrap")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if found() {
        return Some("bwrap".to_owned());
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    eprintln!("installing bubblewrap with apt-get");
    let installed = Command::new("sh")
        .args([
            "-c",
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
             bubblewrap >/dev/null",
        ])
        .status()
        .is_ok_and(|status| status.success());
    (installed && found()).then(|| "bwrap".to_owned())
}
