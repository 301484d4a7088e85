//! Launch-to-exit time of `/bin/true`: bare, under `unshare`, under bubblewrap, and under
//! sandbox-exec with full confinement. Prints medians and ratios; asserts nothing.
//!
//! ```text
//! cargo build --release -p sf-sandbox-exec --bins --examples
//! target/release/examples/launch_bench [ITERATIONS]
//! ```
//!
//! The launcher is found beside the example's directory (`target/release/`). Bubblewrap is
//! optional: without `bwrap` on the PATH its row is skipped (`apt-get install bubblewrap`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sf_host::contracts::{CancelToken, Executor, RunBounds, RunRequest, RunStatus};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{NetworkMode, RuntimeConfig, SandboxConfig, SandboxExecutor};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time_command(iterations: usize, program: &str, args: &[&str]) -> Option<Duration> {
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let status = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        samples.push(start.elapsed());
        if !status.success() {
            eprintln!("{program} {args:?} failed: {status}");
            return None;
        }
    }
    Some(median(samples))
}

fn time_sandbox(iterations: usize, network: Option<NetworkMode>) -> Result<Duration, String> {
    let mut config = SandboxConfig::new(RuntimeConfig::with_libraries("/bin/true", &[]));
    config.network = network;
    let executor = SandboxExecutor::new(config).map_err(|error| error.to_string())?;
    let request = RunRequest {
        program: vec![SnapshotFile {
            path: "entry".into(),
            content: b"unused".to_vec(),
        }],
        entry: "entry".into(),
        args: Vec::new(),
        input: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(10), 1 << 16),
    };
    let cancel = CancelToken::new();
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let answer = executor
            .run(&request, &cancel)
            .map_err(|error| error.to_string())?;
        samples.push(start.elapsed());
        if answer.status != RunStatus::Exited || answer.exit_code != Some(0) {
            return Err(format!("unexpected answer: {answer:?}"));
        }
    }
    Ok(median(samples))
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

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    println!("median launch-to-exit of /bin/true over {iterations} runs each");
    // Warm up page caches and the dynamic loader.
    let _ = time_command(10, "/bin/true", &[]);
    let bare = time_command(iterations, "/bin/true", &[]).expect("/bin/true runs");
    let unshare = time_command(
        iterations,
        "unshare",
        &[
            "--user",
            "--map-root-user",
            "--mount",
            "--pid",
            "--net",
            "--fork",
            "/bin/true",
        ],
    );
    if unshare.is_none() {
        println!("unshare: skipped (not installed or refused)");
    }
    let bwrap = time_command(
        iterations,
        "bwrap",
        &[
            "--unshare-all",
            "--die-with-parent",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "/bin/true",
        ],
    );
    if bwrap.is_none() {
        println!("bubblewrap: skipped (bwrap is not installed: apt-get install bubblewrap)");
    }
    let sandbox = match time_sandbox(iterations, None) {
        Ok(value) => Some(value),
        Err(error) => {
            println!("sandbox-exec: failed: {error}");
            None
        }
    };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let sandbox_new_net = if root {
        time_sandbox(iterations, Some(NetworkMode::New)).ok()
    } else {
        None
    };
    println!();
    show("bare", Some(bare), bare, bwrap);
    show("unshare --user --mount --pid --net", unshare, bare, bwrap);
    show("bubblewrap --unshare-all", bwrap, bare, bwrap);
    show(
        if root {
            "sandbox-exec (shared empty netns)"
        } else {
            "sandbox-exec (new netns)"
        },
        sandbox,
        bare,
        bwrap,
    );
    show(
        "sandbox-exec (new netns per run)",
        sandbox_new_net,
        bare,
        bwrap,
    );
    println!();
    println!("targets: sandbox-exec at most 0.5× bubblewrap and at most 3× bare");
}
