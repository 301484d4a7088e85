//! What a check costs through a remote-execution cluster over the local sandbox: the demo's
//! three checks (its harness running the Slice's test on the sample's `sum.sh`, and `sum.sh`
//! on an empty input), run again and again through sandbox-exec on this machine and through
//! the reapi Executor on a cluster on loopback (BuildGrid with its PostgreSQL scheduler, one
//! `sf-worker` running the same sandbox), alternating the two, with the median wall time of a
//! check each way, their difference (the cluster path's overhead per check) and their ratio.
//! A benchmark program that prints numbers, never a timed test.
//!
//! The cluster runs the configuration sf ships (`docs/examples/buildgrid/buildgrid.yml`, whose
//! assigner looks for work every 50 ms without jitter); a second cluster with BuildGrid's own
//! assigner timing (every 1 s, jitter factor 1) is timed in the same rounds, as the baseline
//! of those settings.
//!
//! ```text
//! cargo build --release -p sf-reapi-worker -p sf-sandbox-exec -p sf-examples
//! cargo run --release -p sf-examples --example remote_overhead -- [RUNS]
//! ```
//!
//! RUNS (each of the three checks, each way) defaults to 15. The cluster's workers and the
//! local sandbox run on the same cores, so the difference is what the cluster path adds:
//! uploading and downloading through the CAS, queueing, leasing, and the worker's fetches.
//! BuildGrid comes from the venv `.ci/buildgrid-venv` makes (under `target/`).

use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use sf_host::contracts::snapshot::SnapshotFile;
use sf_host::contracts::{CancelToken, Executor, RunBounds, RunEntry, RunRequest, RunStatus};
use sf_reapi::{ReapiBackend, ReapiExecutor};
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};
use sf_test_support::buildgrid::{Cluster, INSTANCE, Options};

const SUM: &str = include_str!("../../cli/src/demo/sample/fix/sum.sh");
const TEST: &str = include_str!("../../cli/src/demo/sample/slice/overlay/tests/numbers.sh");
const HARNESS: &str = include_str!("../../cli/src/demo/sample/slice/harness/run-test.sh");
const NUMBERS: &str = include_str!("../../cli/src/demo/sample/slice/inputs/numbers/numbers.txt");
const EMPTY: &str = include_str!("../../cli/src/demo/sample/slice/inputs/empty/numbers.txt");

/// The demo's checks as the collector asks for them: the tree with the Slice's test laid over
/// it, the harness, the input, the entry and its arguments.
fn checks() -> Vec<RunRequest> {
    let program = vec![
        SnapshotFile::regular("sum.sh", SUM.as_bytes().to_vec()),
        SnapshotFile::regular("tests/numbers.sh", TEST.as_bytes().to_vec()),
    ];
    let harness = vec![SnapshotFile::regular(
        "run-test.sh",
        HARNESS.as_bytes().to_vec(),
    )];
    let bounds = RunBounds::new(Duration::from_secs(20), 65536);
    let check = |entry: RunEntry, args: &[&str], input: &str| RunRequest {
        label: None,
        command: None,
        program: program.clone(),
        entry,
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        input: vec![SnapshotFile::regular(
            "numbers.txt",
            input.as_bytes().to_vec(),
        )],
        harness: harness.clone(),
        bounds,
        program_tree: None,
    };
    vec![
        check(RunEntry::harness("run-test.sh"), &["numbers.sh"], NUMBERS),
        check(RunEntry::harness("run-test.sh"), &["numbers.sh"], NUMBERS),
        check(
            RunEntry::program("sum.sh"),
            &["/sf/input/numbers.txt"],
            EMPTY,
        ),
    ]
}

/// The wall time of one run of `request` under `executor`, which must exit 0.
fn timed(executor: &dyn Executor, request: &RunRequest) -> Result<Duration, Box<dyn Error>> {
    let start = Instant::now();
    let answer = executor.run(request, &CancelToken::new())?;
    let took = start.elapsed();
    if answer.status != RunStatus::Exited || answer.exit_code != Some(0) {
        return Err(format!("a check did not pass: {answer:?}").into());
    }
    Ok(took)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn Error>> {
    let runs: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(15);
    let dir = std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .ok_or("no directory above the example")?
        .to_path_buf();
    let mut local = SandboxConfig::new(RuntimeConfig::shell());
    local.launcher = Some(dir.join("sf-sandbox-launcher"));
    let local = SandboxExecutor::new(local)?;
    let worker = [dir.join("sf-worker")];
    let shipped = Cluster::start(&worker, &["sh"], Options::default());
    let defaults = Cluster::start(
        &worker,
        &["sh"],
        Options {
            default_assigner: true,
            ..Options::default()
        },
    );
    let executor = |cluster: &Cluster| {
        ReapiExecutor::new(&ReapiBackend {
            endpoint: cluster.grid.endpoint(),
            instance: INSTANCE.to_owned(),
            worker: cluster.description("sh").to_owned(),
            wait_seconds: Some(60),
            reconnect_seconds: None,
            call_seconds: None,
        })
    };
    let (remote, baseline) = (executor(&shipped)?, executor(&defaults)?);
    let checks = checks();
    // One of each first: the worker's sandbox and the CAS warm up, as in any collection.
    for check in &checks {
        timed(&local, check)?;
        timed(&remote, check)?;
        timed(&baseline, check)?;
    }
    let (mut near, mut far, mut slow) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        for check in &checks {
            near.push(timed(&local, check)?);
            far.push(timed(&remote, check)?);
            slow.push(timed(&baseline, check)?);
        }
    }
    let (near, far, slow) = (median(near), median(far), median(slow));
    println!(
        "the demo's {} checks, {runs} runs each, each way, alternating",
        checks.len()
    );
    println!(
        "  local sandbox-exec      median {:>8.1} ms per check",
        near.as_secs_f64() * 1e3
    );
    println!(
        "  cluster (BuildGrid)     median {:>8.1} ms per check",
        far.as_secs_f64() * 1e3
    );
    println!(
        "  cluster, BuildGrid's own assigner timing (baseline) median {:>8.1} ms per check",
        slow.as_secs_f64() * 1e3
    );
    println!(
        "  overhead of the cluster path: {:.1} ms per check (ratio {:.1}); the shipped \
         assigner settings / BuildGrid's own: {:.2}",
        (far.as_secs_f64() - near.as_secs_f64()) * 1e3,
        far.as_secs_f64() / near.as_secs_f64(),
        far.as_secs_f64() / slow.as_secs_f64()
    );
    Ok(())
}
