//! A throwaway BuildGrid server for tests: BuildGrid 0.4.4 (a Bazel Remote Execution API
//! server: CAS, ByteStream, Execution, Operations and the Remote Workers API's Bots) from a
//! Python venv under the target directory, with its scheduler in a database of a
//! [`PgCluster`] (BuildGrid refuses SQLite for it) and an in-memory CAS, listening on
//! 127.0.0.1 on a port the kernel chose. Dropping the guard stops the server.
//!
//! The venv is made from PyPI by `.ci/buildgrid-venv` (pinned requirements in
//! `tests/support/buildgrid/requirements.txt`) when it is missing: the README's test command
//! runs it first, and a test run alone runs it too. It never skips: when the venv cannot be
//! made or the server does not start, it panics with what failed.
//!
//! Two variables help a failing test tell what the cluster did: `SF_BUILDGRID_VERBOSE` runs
//! the server with its debug log, and `SF_BUILDGRID_KEEP_LOGS=DIR` copies the server's and the
//! workers' logs into DIR when they stop.
//!
//! The scheduler is configured the way docs/remote-execution.md asks of an operator: a job is
//! assigned at most once (`max-job-attempts: 1`, so a run whose worker was lost ends with a
//! non-OK status instead of running again elsewhere), and the platform properties sf names
//! (`sf-runtime`, `sf-profile`) must match a worker's.

use std::io::Read as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::postgres::{PgCluster, SUPERUSER, free_port};

/// The REAPI instance name the server serves.
pub const INSTANCE: &str = "main";

/// How long the server may take to listen (its CLI alone starts in about a second; a loaded
/// two-core machine is slower).
const START_WAIT: Duration = Duration::from_secs(90);

/// How a server is configured beyond the fixed parts.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How long the scheduler waits for a bot's next `UpdateBotSession` before it takes the
    /// bot for dead and ends its leases (`bot-session-keepalive-timeout`).
    pub bot_keepalive: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            bot_keepalive: Duration::from_secs(30),
        }
    }
}

/// The venv BuildGrid runs from (`<target>/buildgrid-venv`), made once per test process.
pub fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let profile = crate::build::profile_dir();
        let venv = profile
            .parent()
            .expect("<target>/<profile>")
            .join("buildgrid-venv");
        let script = crate::build::workspace_root().join(".ci/buildgrid-venv");
        let made = Command::new(&script)
            .arg(&venv)
            .output()
            .unwrap_or_else(|error| panic!("running {}: {error}", script.display()));
        assert!(
            made.status.success(),
            "{} could not make BuildGrid's venv (it installs from PyPI): {}\n{}",
            script.display(),
            String::from_utf8_lossy(&made.stdout),
            String::from_utf8_lossy(&made.stderr)
        );
        venv
    })
}

/// A running BuildGrid server.
pub struct BuildGrid {
    dir: tempfile::TempDir,
    config: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl BuildGrid {
    /// Starts a server whose scheduler keeps its state in a new database of `cluster`.
    pub fn start(cluster: &PgCluster, options: Options) -> Self {
        let venv = venv();
        let dir = tempfile::Builder::new()
            .prefix("sf-buildgrid-")
            .tempdir()
            .expect("a directory for BuildGrid's files");
        let database = database_name();
        cluster.psql("postgres", &format!("CREATE DATABASE {database}"));
        let url = |driver: &str| {
            format!(
                "postgresql{driver}://{SUPERUSER}:{}@127.0.0.1:{}/{database}",
                cluster.superuser_password(),
                cluster.port()
            )
        };
        let migrated = Command::new(venv.join("bin/bgd"))
            .args(["migrate", "apply"])
            .arg(url(""))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("running bgd migrate");
        assert!(
            migrated.status.success(),
            "bgd migrate apply failed: {}\n{}",
            String::from_utf8_lossy(&migrated.stdout),
            String::from_utf8_lossy(&migrated.stderr)
        );
        let config = dir.path().join("config.yml");
        let mut server = Self {
            config,
            dir,
            port: 0,
            child: None,
        };
        // SQLAlchemy 2.1 would pick psycopg 3 for a plain postgresql:// URL, whose connection
        // BuildGrid's LISTEN/NOTIFY notifier cannot poll: the scheduler needs psycopg2.
        server.write_config(&url("+psycopg2"), options);
        server.launch();
        server
    }

    fn write_config(&self, connection: &str, options: Options) {
        let text = format!(
            r#"# Every Execute stream and every idle bot's long poll holds one of the server's threads.
thread-pool-size: 64
server:
  - !channel
    address: "127.0.0.1:PORT"
    insecure-mode: true
authorization:
  method: none
connections:
  - !sql-connection &sql
    connection-string: {connection}
storages:
  - !lru-storage &storage
    size: 1024MB
schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    storage: *storage
    max-job-attempts: 1
    bot-session-keepalive-timeout: {keepalive}
    session-expiry-timer-interval: 1
    poll-interval: 0.1
    bot-poll-interval: 0.1
    # Without an assigner no job is ever given to a bot.
    assigners:
      - !priority-age-assigner
        count: 1
        interval: 0.05
        jitter-factor: 0.05
        failure-backoff: 0.5
    property-set: !dynamic-property-set
      unique-property-keys: [sf-runtime, sf-profile]
      match-property-keys: [sf-runtime, sf-profile]
instances:
  - name: {INSTANCE}
    services:
      - !execution
        scheduler: *scheduler
        # An Execute stream whose client went away ends at its next keepalive.
        operation-stream-keepalive-timeout: 5
      - !cas
        storage: *storage
      - !bytestream
        storage: *storage
"#,
            keepalive = options.bot_keepalive.as_secs().max(1),
        );
        std::fs::write(self.dir.path().join("config.yml.in"), text)
            .expect("writing BuildGrid's configuration");
    }

    /// Starts the server process on a free port (another process may take a port between
    /// the check and the server's bind: a few are tried).
    fn launch(&mut self) {
        let template = std::fs::read_to_string(self.dir.path().join("config.yml.in"))
            .expect("BuildGrid's configuration");
        let mut last = String::new();
        for _ in 0..3 {
            let port = if self.port == 0 {
                free_port()
            } else {
                self.port
            };
            std::fs::write(&self.config, template.replace("PORT", &port.to_string()))
                .expect("writing BuildGrid's configuration");
            let log = std::fs::File::create(self.log_path()).expect("BuildGrid's log file");
            let mut child = Command::new(venv().join("bin/bgd"))
                .args(["server", "start"])
                .args(std::env::var_os("SF_BUILDGRID_VERBOSE").map(|_| "-vvv"))
                .arg(&self.config)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("the log file"))
                .stderr(log)
                .spawn()
                .expect("running bgd server start");
            let start = Instant::now();
            let mut exited = None;
            while start.elapsed() < START_WAIT {
                if let Ok(Some(status)) = child.try_wait() {
                    exited = Some(status);
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    self.port = port;
                    self.child = Some(child);
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
            last = match exited {
                Some(status) => format!("bgd server exited ({status}):\n{}", self.log()),
                None => format!("bgd server did not listen in time:\n{}", self.log()),
            };
        }
        panic!("BuildGrid did not start: {last}");
    }

    /// The server's address as a gRPC endpoint (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(self.log_path()) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// Stops the server at once (SIGKILL), as a crash would; the scheduler's database keeps
    /// its state, the in-memory CAS is lost.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the server process is running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }
}

impl Drop for BuildGrid {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = std::env::var_os("SF_BUILDGRID_KEEP_LOGS") {
            let _ = std::fs::copy(
                self.log_path(),
                Path::new(&dir).join(format!("buildgrid-{}.log", std::process::id())),
            );
        }
    }
}

fn database_name() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "bgd_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// A running `sf worker` (the `sf-worker` program): a bot of a cluster's Bots service. Dropping
/// it kills it.
pub struct WorkerProcess {
    child: Child,
    description: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl WorkerProcess {
    /// Starts `command` (`sf-worker`, or `sf worker`) for the cluster at `endpoint`,
    /// instance [`INSTANCE`], named `id`, with `extra` arguments (`--sandbox FILE`, say);
    /// waits until it has printed its description's digest.
    pub fn start(command: &[PathBuf], endpoint: &str, id: &str, extra: &[&str]) -> Self {
        let (program, leading) = command.split_first().expect("a program");
        let dir = tempfile::Builder::new()
            .prefix("sf-worker-")
            .tempdir()
            .expect("a directory for the worker's files");
        let (out, err, log) = (
            dir.path().join("stdout"),
            dir.path().join("stderr"),
            dir.path().join("runs.jsonl"),
        );
        let mut child = Command::new(program)
            .args(leading)
            .args(["--endpoint", endpoint, "--instance", INSTANCE, "--id", id])
            .arg("--log")
            .arg(&log)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("the worker's stdout"))
            .stderr(std::fs::File::create(&err).expect("the worker's stderr"))
            .spawn()
            .unwrap_or_else(|error| panic!("running {}: {error}", program.display()));
        let start = Instant::now();
        loop {
            let printed = std::fs::read_to_string(&out).unwrap_or_default();
            if let Some(line) = printed
                .lines()
                .find_map(|line| line.strip_prefix("worker description "))
            {
                return Self {
                    child,
                    description: line.trim().to_owned(),
                    log,
                    _dir: dir,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "sf-worker {id} exited ({status}): {}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < START_WAIT,
                "sf-worker {id} printed no description: {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The digest of the worker's description (`HASH/SIZE`).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The runs the worker logged so far, one JSON object each.
    pub fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// What the worker wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("stderr")).unwrap_or_default()
    }

    /// Kills the worker (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
        if let Some(dir) = std::env::var_os("SF_BUILDGRID_KEEP_LOGS") {
            let _ = std::fs::copy(
                self._dir.path().join("stderr"),
                Path::new(&dir).join(format!(
                    "worker-{}-{}.log",
                    std::process::id(),
                    self.child.id()
                )),
            );
        }
    }
}

/// A cluster: the scheduler's database server, the REAPI server and its workers (`sf-worker`
/// processes). Dropped in reverse: the workers, the server, the database.
pub struct Cluster {
    /// The workers, in the order they were started.
    pub workers: Vec<WorkerProcess>,
    /// The REAPI server.
    pub grid: BuildGrid,
    /// The scheduler's database server.
    pub pg: PgCluster,
    command: Vec<PathBuf>,
    sandboxes: tempfile::TempDir,
    runtimes: Vec<String>,
}

impl Cluster {
    /// A cluster whose workers are `command` (`sf-worker`, or `sf worker`), one per runtime
    /// of `workers` (`sh`, `python3`): workers of one runtime are configured alike, so they
    /// describe themselves alike and share its leases.
    pub fn start(command: &[PathBuf], workers: &[&str], options: Options) -> Self {
        let pg = PgCluster::start();
        let grid = BuildGrid::start(&pg, options);
        let mut cluster = Self {
            workers: Vec::new(),
            grid,
            pg,
            command: command.to_vec(),
            sandboxes: tempfile::tempdir().expect("a directory for the sandboxes' files"),
            runtimes: Vec::new(),
        };
        for runtime in workers {
            cluster.add_worker(runtime);
        }
        cluster
    }

    /// Starts one more worker with a sandbox of `runtime`, named `worker-<n>`: a runtime name
    /// (`sh`), or a TOML table as sandbox-exec's `runtime` key takes it (`{ executable = … }`).
    pub fn add_worker(&mut self, runtime: &str) {
        let n = self.workers.len();
        let id = format!("worker-{n}");
        let config = self.sandboxes.path().join(format!("{id}.toml"));
        let value = if runtime.starts_with('{') {
            runtime.to_owned()
        } else {
            format!("\"{runtime}\"")
        };
        std::fs::write(
            &config,
            format!("[executor]\ntype = \"sandbox-exec\"\nruntime = {value}\n"),
        )
        .expect("writing a worker's sandbox configuration");
        let config = config.to_str().expect("a UTF-8 path").to_owned();
        let worker = WorkerProcess::start(
            &self.command,
            &self.grid.endpoint(),
            &id,
            &["--sandbox", &config],
        );
        if let Some(alike) = self.description_of(runtime) {
            assert_eq!(
                worker.description(),
                alike,
                "workers configured alike describe themselves alike"
            );
        }
        self.workers.push(worker);
        self.runtimes.push(runtime.to_owned());
    }

    fn description_of(&self, runtime: &str) -> Option<&str> {
        self.runtimes
            .iter()
            .position(|known| known == runtime)
            .map(|index| self.workers[index].description())
    }

    /// The description of the workers of `runtime`.
    pub fn description(&self, runtime: &str) -> &str {
        self.description_of(runtime)
            .unwrap_or_else(|| panic!("no worker of runtime {runtime}"))
    }

    /// The `[executor]` section (an sf.toml) that sends runs to the workers of `runtime`,
    /// giving up on a run `wait_seconds` after its timeout.
    pub fn config(&self, runtime: &str, wait_seconds: u64) -> String {
        format!(
            "[executor]\ntype = \"reapi\"\nendpoint = \"{}\"\ninstance = \"{INSTANCE}\"\n\
             worker = \"{}\"\nwait_seconds = {wait_seconds}\nreconnect_seconds = 10\n\
             call_seconds = 60\n",
            self.grid.endpoint(),
            self.description(runtime)
        )
    }

    /// Every run the workers logged, one JSON object each.
    pub fn runs(&self) -> Vec<String> {
        self.workers.iter().flat_map(WorkerProcess::runs).collect()
    }
}

/// The cluster of this test process, started by `start` on first use and stopped when the
/// process exits (a static is never dropped, so [`crate::at_exit`] drops it). A process killed
/// runs no exit handler: its database server is stopped by the [`PgCluster`]'s reaper, and
/// the BuildGrid server and the workers, which stay in the test's process group, die with it
/// when a harness kills the group.
pub fn shared(start: impl FnOnce() -> Cluster) -> std::sync::Arc<Cluster> {
    use std::sync::{Arc, Mutex};
    static SHARED: Mutex<Option<Arc<Cluster>>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cluster) = shared.as_ref() {
        return Arc::clone(cluster);
    }
    let cluster = Arc::new(start());
    *shared = Some(Arc::clone(&cluster));
    // The last reference goes when the process exits, after every test has ended.
    crate::at_exit(|| drop(SHARED.lock().unwrap_or_else(|e| e.into_inner()).take()));
    cluster
}
