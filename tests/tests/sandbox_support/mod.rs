//! Shared set-up of the sandbox tests: the launcher and probe programs, a probe runtime every
//! user can read, and helpers to run probes and read their verdicts.
//!
//! Cargo builds another package's binaries only for that package's own tests, so the launcher
//! and the probe come from `sf_tests::plugins::built()`, which builds them (with the plugin
//! libraries) once per test binary into the target directory it lives in.

#![allow(dead_code)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use sf_host::contracts::{CancelToken, Executor, RunAnswer, RunBounds, RunRequest};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{Limits, RuntimeConfig, SandboxConfig, SandboxExecutor};

/// The programs built by sf-sandbox-exec.
pub struct Binaries {
    pub launcher: PathBuf,
    pub probe: PathBuf,
}

/// The launcher and the probe, built with the plugin libraries once per test binary.
pub fn binaries() -> Binaries {
    let built = sf_tests::plugins::built();
    Binaries {
        launcher: built.launcher.clone(),
        probe: built.probe.clone(),
    }
}

/// A directory every user can search, removed when dropped (the sandbox's host user must
/// reach what is placed here when the tests run as root).
pub fn public_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("sf-sandbox-test-")
        .tempdir()
        .expect("a temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod 0755");
    dir
}

/// The probe, copied into a directory every user can read (the build directory may not
/// be). The directory is named by the probe's digest, so runs share it and leave one copy.
pub fn probe_copy() -> &'static Path {
    static COPY: OnceLock<PathBuf> = OnceLock::new();
    COPY.get_or_init(|| {
        use sha2::Digest as _;
        let bytes = std::fs::read(&binaries().probe).expect("read the probe");
        let digest = hex::encode(sha2::Sha256::digest(&bytes));
        let dir = std::env::temp_dir().join(format!("sf-sandbox-probe-{}", &digest[..16]));
        let path = dir.join("sf-sandbox-probe");
        if std::fs::read(&path).is_ok_and(|existing| existing == bytes) {
            return path;
        }
        let staging = public_dir();
        let staged = staging.path().join("sf-sandbox-probe");
        write_file(&staged, &bytes, 0o755);
        // Another test binary may publish the same bytes first; either copy will do.
        if std::fs::rename(staging.path(), &dir).is_ok() {
            std::mem::forget(staging);
        }
        assert!(
            std::fs::read(&path).is_ok_and(|existing| existing == bytes),
            "{} holds other bytes; remove it",
            path.display()
        );
        path
    })
}

/// The probe runtime: the probe plus the library directories, and `extra` readable paths.
pub fn probe_runtime(extra: &[&Path]) -> RuntimeConfig {
    let mut runtime = RuntimeConfig::with_libraries(probe_copy(), &[]);
    runtime
        .readable
        .extend(extra.iter().map(|path| path.to_path_buf()));
    runtime
}

/// An executor over `runtime` with `limits`, using the freshly built launcher.
pub fn executor_with(runtime: RuntimeConfig, limits: Limits) -> SandboxExecutor {
    let mut config = SandboxConfig::new(runtime);
    config.limits = limits;
    config.launcher = Some(binaries().launcher.clone());
    SandboxExecutor::new(config).unwrap_or_else(|error| panic!("the executor configures: {error}"))
}

/// The probe executor with default limits.
pub fn probe_executor() -> SandboxExecutor {
    executor_with(probe_runtime(&[]), Limits::default())
}

/// The program every probe run gets (its entry is read first, proving it is readable).
pub fn probe_program() -> Vec<SnapshotFile> {
    vec![SnapshotFile::regular(
        "entry.txt",
        b"sf probe program".to_vec(),
    )]
}

/// The input every probe run gets.
pub fn probe_input() -> Vec<SnapshotFile> {
    vec![SnapshotFile::regular("data.txt", b"probe input".to_vec())]
}

/// The harness every probe run gets.
pub fn probe_harness() -> Vec<SnapshotFile> {
    vec![SnapshotFile::regular(
        "tests/check.txt",
        b"probe harness".to_vec(),
    )]
}

/// A request running `probes` with `timeout` and a 1 MiB output limit.
pub fn probe_request(probes: &[String], timeout: Duration) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: probe_program(),
        entry: "entry.txt".into(),
        args: probes.to_vec(),
        input: probe_input(),
        harness: probe_harness(),
        bounds: RunBounds::new(timeout, 1 << 20),
    }
}

/// A request running `script` (the program's `main.sh`) with `timeout` and `output_limit`.
pub fn shell_request(script: &str, timeout: Duration, output_limit: u64) -> RunRequest {
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular("main.sh", script.as_bytes().to_vec())],
        entry: "main.sh".into(),
        args: Vec::new(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: RunBounds::new(timeout, output_limit),
    }
}

/// Runs `probes` under `executor`.
pub fn run_probes(executor: &SandboxExecutor, probes: &[String]) -> RunAnswer {
    executor
        .run(
            &probe_request(probes, Duration::from_secs(20)),
            &CancelToken::new(),
        )
        .unwrap_or_else(|error| panic!("the run starts: {error}"))
}

/// The verdict after `probe <name> <argument>: `, panicking (with the whole output) when the
/// probe printed none, that is when it did not run.
pub fn verdict(answer: &RunAnswer, probe: &str) -> String {
    let (name, argument) = probe.split_once('=').unwrap_or((probe, ""));
    let prefix = format!("probe {name} {argument}: ");
    let stdout = String::from_utf8_lossy(&answer.stdout);
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("probe {probe:?} printed no verdict; the run: {answer:?}"))
}

/// Asserts the probe ran and was denied; returns the verdict.
pub fn denied(answer: &RunAnswer, probe: &str) -> String {
    let verdict = verdict(answer, probe);
    assert!(
        verdict.starts_with("denied "),
        "probe {probe:?} was not denied: {verdict}"
    );
    verdict
}

/// Asserts the probe ran and succeeded; returns the verdict.
pub fn allowed(answer: &RunAnswer, probe: &str) -> String {
    let verdict = verdict(answer, probe);
    assert!(
        verdict.starts_with("ok "),
        "probe {probe:?} did not succeed: {verdict}"
    );
    verdict
}

/// The host processes whose name (comm) or command line contains `marker`, besides this
/// test process.
pub fn host_processes_matching(marker: &str) -> Vec<String> {
    let own = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == own {
            continue;
        }
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if comm.contains(marker) || cmdline.contains(marker) {
            found.push(format!("{name}: {} {}", comm.trim(), cmdline.trim()));
        }
    }
    found
}

/// A marker unique to this process and call.
pub fn marker(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}{}x{n}", std::process::id() % 100_000)
}

/// Writes `content` to `path` with `mode`.
pub fn write_file(path: &Path, content: &[u8], mode: u32) {
    let mut file = std::fs::File::create(path).expect("create a test file");
    file.write_all(content).expect("write a test file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The host pid of the process whose command line holds `marker` (a probe run with
/// `mark=<marker>`), waiting for it up to 10 s.
pub fn wait_for_host_pid(marker: &str) -> u32 {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = host_processes_matching(marker)
            .iter()
            .find_map(|found| found.split(':').next()?.parse::<u32>().ok())
        {
            return pid;
        }
        assert!(
            std::time::Instant::now() < until,
            "no process with {marker} appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A line of `/proc/<pid>/status` (its value, whitespace collapsed).
pub fn status_field(pid: u32, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        line.strip_prefix(&format!("{field}:"))
            .map(|value| value.split_whitespace().collect::<Vec<_>>().join(" "))
    })
}

/// Whether the tests run as root (as CI does).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { nix::libc::geteuid() == 0 }
}
