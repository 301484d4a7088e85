//! What `sf collect --jobs 2` buys over `--jobs 1`: the same Candidate collected again and
//! again through the `sf` binary, alternating the two, with the median wall time of each and
//! their ratio. A benchmark program that prints numbers, never a timed test.
//!
//! The Slice has four checks, each a shell loop that keeps one core busy for a while (set by
//! ITERATIONS), run in the real sandbox with a real SQLite evidence file; every collection is
//! a new attempt with its own four records. On a machine with two or more cores the ratio is
//! the parallel speed-up the collector gets from its jobs (1.0 would be none, 0.5 perfect).
//!
//! ```text
//! cargo build --release -p sf-cli -p sf-sandbox-exec -p sf-sandbox-exec-plugin -p sf-git-cli
//! cargo run --release -p sf-examples --example collect_jobs -- [RUNS] [ITERATIONS] [SF]
//! ```
//!
//! RUNS defaults to 7, ITERATIONS to 300000, SF (the `sf` binary) to the one beside this
//! program's directory (`target/<profile>/sf`).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sf_examples::work_slice::{self, harness_check, sf_json};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(7);
    let iterations: u64 = args
        .next()
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(300_000);
    let sf = match args.next() {
        Some(path) => PathBuf::from(path),
        None => sf_examples::default_plugin_dir()?.join("sf"),
    };
    let work = tempfile::tempdir()?;
    let dir = work.path();
    set_up(&sf, dir, iterations)?;
    let candidate = seal(&sf, dir)?;
    let mut one = Vec::new();
    let mut two = Vec::new();
    for _ in 0..runs {
        one.push(collect(&sf, dir, &candidate, 1)?);
        two.push(collect(&sf, dir, &candidate, 2)?);
    }
    let (one, two) = (median(one), median(two));
    println!("sf collect, 4 checks of {iterations} shell iterations each, {runs} runs each");
    println!("  --jobs 1  median {:>8.3} s", one.as_secs_f64());
    println!("  --jobs 2  median {:>8.3} s", two.as_secs_f64());
    println!(
        "  ratio --jobs 2 / --jobs 1: {:.2}",
        two.as_secs_f64() / one.as_secs_f64()
    );
    Ok(())
}

/// A repository of one script and a Slice of four busy checks, frozen.
fn set_up(sf: &Path, dir: &Path, iterations: u64) -> Result<(), Box<dyn Error>> {
    let busy = format!("i=0\nwhile [ $i -lt {iterations} ]; do i=$((i+1)); done\necho $i\n");
    let checks = (0..4)
        .map(|at| {
            let stage = if at % 2 == 0 { "base" } else { "candidate" };
            harness_check(&format!("busy-{at}"), stage, "busy.sh")
        })
        .collect();
    work_slice::set_up(sf, dir, &[("busy.sh", busy)], checks)
}

fn seal(sf: &Path, dir: &Path) -> Result<String, Box<dyn Error>> {
    work_slice::seal(sf, dir, "more", "echo more work\n")
}

fn collect(
    sf: &Path,
    dir: &Path,
    candidate: &str,
    jobs: usize,
) -> Result<Duration, Box<dyn Error>> {
    let started = Instant::now();
    let result = sf_json(
        sf,
        dir,
        &[
            "collect",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
            "--jobs",
            &jobs.to_string(),
        ],
    )?;
    let elapsed = started.elapsed();
    if result["mayJudge"] != true {
        return Err(format!("the collection may not be judged: {result}").into());
    }
    Ok(elapsed)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
