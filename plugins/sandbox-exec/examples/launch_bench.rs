//! Launch-to-exit time of `/bin/true`: bare, under `unshare`, under bubblewrap, and under
//! sandbox-exec with full confinement. Prints medians and ratios; asserts nothing.
//!
//! ```text
//! plugins/sandbox-exec/launch-bench.sh [ITERATIONS]     # installs bubblewrap, builds, runs
//! cargo build --release -p sf-sandbox-exec --bins --examples
//! target/release/examples/launch_bench [ITERATIONS]
//! ```
//!
//! The launcher is found beside the example's directory (`target/release/`). Bubblewrap is
//! optional: without `bwrap` on the PATH its row is skipped (`apt-get install bubblewrap`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::{CancelToken, Executor, RunBounds, RunRequest, RunStatus};
use sf_sandbox_exec::{NetworkMode, RuntimeConfig, SandboxConfig, SandboxExecutor};
use sf_test_support::bench::{BWRAP_MINIMAL, median};

/// The idle time before every interleaved measurement.
const GAP: Duration = Duration::from_millis(4);

/// Runs `program` once; its launch-to-exit time, `None` when it cannot run or fails.
fn time_command(program: &str, args: &[&str]) -> Option<Duration> {
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    let elapsed = start.elapsed();
    if !status.success() {
        eprintln!("{program} {args:?} failed: {status}");
        return None;
    }
    Some(elapsed)
}

fn sandbox(network: Option<NetworkMode>, prepare_ahead: bool) -> Result<SandboxExecutor, String> {
    let mut config = SandboxConfig::new(RuntimeConfig::with_libraries("/bin/true", &[]));
    config.network = network;
    config.prepare_ahead = prepare_ahead;
    SandboxExecutor::new(config).map_err(|error| error.to_string())
}

fn true_request() -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular("entry", b"unused".to_vec())],
        entry: "entry".into(),
        args: Vec::new(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(10), 1 << 16),
    }
}

/// An Executor configured, run once and dropped: what a single run such as `sf exec`'s costs
/// inside the process, without the process's own start and the plugin's load.
fn time_single_run(request: &RunRequest) -> Result<Duration, String> {
    let start = Instant::now();
    let executor = sandbox(None, true)?;
    time_sandbox(&executor, request)?;
    drop(executor);
    Ok(start.elapsed())
}

/// One `run()` of `/bin/true`: launch to exit, as the caller sees it.
fn time_sandbox(executor: &SandboxExecutor, request: &RunRequest) -> Result<Duration, String> {
    let start = Instant::now();
    let answer = executor
        .run(request, &CancelToken::new())
        .map_err(|error| error.to_string())?;
    let elapsed = start.elapsed();
    if answer.status != RunStatus::Exited || answer.exit_code != Some(0) {
        return Err(format!("unexpected answer: {answer:?}"));
    }
    Ok(elapsed)
}

fn show(name: &str, value: Option<Duration>, bare: Duration, bwrap: Option<Duration>) {
    let Some(value) = value else {
        return;
    };
    let mut line = format!(
        "{name:<40} {:>9.3} ms   {:>5.2}× bare",
        value.as_secs_f64() * 1e3,
        value.as_secs_f64() / bare.as_secs_f64()
    );
    if let Some(bwrap) = bwrap {
        line.push_str(&format!(
            "   {:>5.2}× bubblewrap",
            value.as_secs_f64() / bwrap.as_secs_f64()
        ));
    }
    println!("{line}");
}

const UNSHARE: &[&str] = &[
    "--user",
    "--map-root-user",
    "--mount",
    "--pid",
    "--net",
    "--fork",
    "/bin/true",
];

/// Bubblewrap's minimal profile around `/bin/true`.
fn bwrap_args() -> Vec<&'static str> {
    let mut args = BWRAP_MINIMAL.to_vec();
    args.push("/bin/true");
    args
}

/// One measured variant: its samples, or why it was skipped.
struct Variant {
    name: &'static str,
    samples: Vec<Duration>,
    skipped: Option<String>,
}

impl Variant {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            samples: Vec::new(),
            skipped: None,
        }
    }

    fn record(&mut self, sample: Result<Duration, String>) {
        if self.skipped.is_some() {
            return;
        }
        match sample {
            Ok(sample) => self.samples.push(sample),
            Err(reason) => self.skipped = Some(reason),
        }
    }

    fn median(&self) -> Option<Duration> {
        (self.skipped.is_none() && !self.samples.is_empty()).then(|| median(self.samples.clone()))
    }
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    println!("median launch-to-exit of /bin/true over {iterations} runs each");
    println!(
        "(the variants are measured interleaved, one run of each per round, so that other load \
         on the machine falls on all of them alike, each after a {} ms pause)",
        GAP.as_millis()
    );
    let request = true_request();
    let shared = sandbox(None, true);
    let per_run = sandbox(None, false);
    let new_net = if root {
        Some(sandbox(Some(NetworkMode::New), true))
    } else {
        None
    };
    // The first run of an Executor also starts its fork server: shown apart, not in the medians.
    for (name, executor) in [
        ("sandbox-exec", &shared),
        ("sandbox-exec (built per run)", &per_run),
        (
            "sandbox-exec (new netns)",
            new_net.as_ref().unwrap_or(&shared),
        ),
    ] {
        if let Ok(executor) = executor {
            match time_sandbox(executor, &request) {
                Ok(first) => println!(
                    "{name}: first run, including the fork server's start: {:.3} ms",
                    first.as_secs_f64() * 1e3
                ),
                Err(error) => println!("{name}: first run failed: {error}"),
            }
        }
    }
    // Warm up page caches and the dynamic loader.
    for _ in 0..10 {
        let _ = time_command("/bin/true", &[]);
        let _ = time_command("unshare", UNSHARE);
        let _ = time_command("bwrap", &bwrap_args());
    }
    let mut bare = Variant::new("bare");
    let mut unshare = Variant::new("unshare --user --mount --pid --net");
    let mut bwrap = Variant::new("bubblewrap --unshare-all");
    let mut sandbox_shared = Variant::new(if root {
        "sandbox-exec (shared empty netns)"
    } else {
        "sandbox-exec (new netns)"
    });
    let mut sandbox_per_run = Variant::new("sandbox-exec, sandbox built per run");
    let mut sandbox_new = Variant::new("sandbox-exec (new netns per run)");
    let mut single = Variant::new("sandbox-exec, an Executor per run");
    if let Err(error) = &shared {
        sandbox_shared.skipped = Some(error.clone());
    }
    if let Err(error) = &per_run {
        sandbox_per_run.skipped = Some(error.clone());
    }
    let command = |program: &str, args: &[&str]| {
        time_command(program, args).ok_or_else(|| format!("{program} is not installed or failed"))
    };
    // A pause before every measurement, the same for every variant: sandbox-exec builds the
    // next sandbox after a run, and that work must not fall on the next variant's measurement
    // (it would slow the baselines and flatter the ratios).
    let pause = || std::thread::sleep(GAP);
    for _ in 0..iterations {
        pause();
        bare.record(command("/bin/true", &[]));
        pause();
        unshare.record(command("unshare", UNSHARE));
        pause();
        bwrap.record(command("bwrap", &bwrap_args()));
        if let Ok(executor) = &shared {
            pause();
            sandbox_shared.record(time_sandbox(executor, &request));
        }
        if let Ok(executor) = &per_run {
            pause();
            sandbox_per_run.record(time_sandbox(executor, &request));
        }
        pause();
        single.record(time_single_run(&request));
        pause();
        match &new_net {
            Some(Ok(executor)) => sandbox_new.record(time_sandbox(executor, &request)),
            Some(Err(error)) => sandbox_new.skipped = Some(error.clone()),
            None => sandbox_new.skipped = Some("needs root (the shared mode does)".into()),
        }
    }
    // The same Executor run back to back, with no pause for the next sandbox to be built.
    let mut back_to_back = Variant::new("sandbox-exec, runs back to back");
    match &shared {
        Ok(executor) => {
            for _ in 0..iterations {
                back_to_back.record(time_sandbox(executor, &request));
            }
        }
        Err(error) => back_to_back.skipped = Some(error.clone()),
    }
    let bare_median = bare.median().expect("/bin/true runs");
    let bwrap_median = bwrap.median();
    println!();
    for variant in [
        &bare,
        &unshare,
        &bwrap,
        &sandbox_shared,
        &sandbox_new,
        &sandbox_per_run,
        &single,
        &back_to_back,
    ] {
        match (&variant.skipped, variant.median()) {
            (Some(reason), _) => println!("{}: skipped: {reason}", variant.name),
            (None, value) => show(variant.name, value, bare_median, bwrap_median),
        }
    }
    println!();
    println!("targets: sandbox-exec at most 0.5× bubblewrap and at most 3× bare");
    println!(
        "(sandbox-exec builds the next run's sandbox after each run, ahead of the next; \
         \"built per run\" is prepare_ahead = false; \"an Executor per run\" configures an \
         Executor, runs it once and drops it, as `sf exec` does after loading the plugin; \
         \"back to back\" runs one Executor with no pause, so each run waits for its sandbox \
         to be built)"
    );
}
