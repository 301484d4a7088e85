//! What the fence per Candidate buys: four `sf collect` processes on four Candidates of one
//! repository, started at once, against one collection alone (the baseline), through the `sf`
//! binary, with the built-in SQLite store and with PostgreSQL (a throwaway cluster on this
//! machine, its store and its fence). Prints the median wall time of each and the ratio
//! four-at-once / one. A benchmark program that prints numbers, never a timed test.
//!
//! The Slice has one check that sleeps for CHECK_SECONDS (2 by default) in the real sandbox, so
//! the ratio is what the collections cost each other beyond their checks: 1.0 would be none
//! (every collection at once), 4.0 taking turns (one fence per Product, as before: the
//! collections pass `--wait`, so an older `sf` given as SF takes turns rather than failing). Every
//! collection is a new attempt with its own record; each result is checked (one run, stored,
//! `mayJudge`), and the epochs of each round are checked to be distinct.
//!
//! ```text
//! cargo build --release -p sf-cli -p sf-sandbox-exec -p sf-sandbox-exec-plugin -p sf-git-cli -p sf-postgres
//! cargo run --release -p sf-examples --example collect_parallel -- [RUNS] [CHECK_SECONDS] [SF]
//! ```
//!
//! RUNS defaults to 5, SF (the `sf` binary) to the one beside this program's directory
//! (`target/<profile>/sf`, where the PostgreSQL plugin must be too). It needs Debian's
//! PostgreSQL server binaries (`/usr/lib/postgresql/*/bin`).

use std::collections::BTreeSet;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sf_examples::work_slice::{self, harness_check};
use sf_test_support::bench::{load_average, median};
use sf_test_support::postgres::PgCluster;

/// The PostgreSQL schema an administrator runs (read here rather than from sf-postgres, whose
/// plugin entry would clash with sf-git-cli's in one program).
const SCHEMA_SQL: &str = include_str!("../../plugins/postgres/schema.sql");

/// How many Candidates collect at once.
const AT_ONCE: usize = 4;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(5);
    let seconds: u64 = args.next().map(|n| n.parse()).transpose()?.unwrap_or(2);
    let sf = match args.next() {
        Some(path) => PathBuf::from(path),
        None => sf_examples::default_plugin_dir()?.join("sf"),
    };
    let work = tempfile::Builder::new().prefix("sf-bench-").tempdir()?;
    let dir = work.path().canonicalize()?;
    set_up(&sf, &dir, seconds)?;
    let candidates: Vec<String> = (0..AT_ONCE)
        .map(|n| work_slice::seal(&sf, &dir, &n.to_string(), &format!("echo more work {n}\n")))
        .collect::<Result<_, _>>()?;

    let cluster = PgCluster::start();
    let database = cluster.database_with(SCHEMA_SQL);
    std::fs::write(
        dir.join("pg.toml"),
        format!(
            "[evidence_store]\ntype = \"postgres\"\nhost = \"127.0.0.1\"\nport = {}\n\
             database = \"{}\"\nuser = \"{}\"\npassword_file = \"{}\"\n",
            cluster.port(),
            database.name,
            database.role,
            database.password_file.display()
        ),
    )?;

    println!(
        "sf collect of a Slice with one {seconds} s check: {AT_ONCE} Candidates of one \
         repository at once vs one alone, {runs} runs each (load average {})",
        load_average()
    );
    for (store, config) in [("sqlite", None), ("postgres", Some("pg.toml"))] {
        let mut one = Vec::new();
        let mut four = Vec::new();
        for _ in 0..runs {
            one.push(at_once(&sf, &dir, config, &candidates[..1])?);
            four.push(at_once(&sf, &dir, config, &candidates)?);
        }
        let (one, four) = (median(one), median(four));
        println!(
            "  {store:<8}  one alone (baseline) median {:>7.3} s   {AT_ONCE} at once median \
             {:>7.3} s   ratio {:.2}",
            one.as_secs_f64(),
            four.as_secs_f64(),
            four.as_secs_f64() / one.as_secs_f64()
        );
    }
    Ok(())
}

/// Collects every one of `candidates` at once, each in its own `sf` process; the wall time
/// until the last one ended. Every collection must have run its check once and stored its
/// record, each under an epoch of its own.
fn at_once(
    sf: &Path,
    dir: &Path,
    config: Option<&str>,
    candidates: &[String],
) -> Result<Duration, Box<dyn Error>> {
    let started = Instant::now();
    let children = candidates
        .iter()
        .map(|candidate| {
            let mut command = Command::new(sf);
            command.current_dir(dir).arg("--json");
            if let Some(config) = config {
                command.args(["--config", config]);
            }
            command
                // `--wait`: an sf whose fence is one per Product takes turns instead of
                // failing `busy`, so the same program measures it.
                .args(["collect", "--wait", "--identity", "identity.json"])
                .args(["--slice", "slice"])
                .args(["--candidate", candidate])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = children
        .into_iter()
        .map(|child| child.wait_with_output())
        .collect::<Result<Vec<_>, _>>()?;
    let elapsed = started.elapsed();
    let mut epochs = BTreeSet::new();
    for output in outputs {
        let result = collected(&output)?;
        epochs.insert(result["attempt"]["epoch"].as_u64().ok_or("no epoch")?);
    }
    if epochs.len() != candidates.len() {
        return Err(format!("{} collections shared epochs: {epochs:?}", candidates.len()).into());
    }
    Ok(elapsed)
}

/// The result of one `sf collect`, checked: one run, stored, and the attempt may be judged.
fn collected(output: &std::process::Output) -> Result<serde_json::Value, Box<dyn Error>> {
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|error| {
        format!(
            "sf collect: {error}: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    let result = &envelope["result"];
    let stored = result["runs"]
        .as_array()
        .is_some_and(|runs| runs.len() == 1 && runs[0]["evidence"].is_string());
    if envelope["ok"] != true || result["mayJudge"] != true || !stored {
        return Err(format!("sf collect: {envelope}").into());
    }
    Ok(result.clone())
}

/// A repository of one script and a Slice whose one check sleeps `seconds`, frozen.
fn set_up(sf: &Path, dir: &Path, seconds: u64) -> Result<(), Box<dyn Error>> {
    let wait = format!("sleep {seconds}\necho waited\n");
    let checks = vec![harness_check("wait", "candidate", "wait.sh")];
    work_slice::set_up(sf, dir, &[("wait.sh", wait)], checks)
}
