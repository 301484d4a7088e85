//! A throwaway BuildGrid server for tests: BuildGrid 0.4.4 (a Bazel Remote Execution API
//! server: CAS, ByteStream, Execution, Operations and the Remote Workers API's Bots) from a
//! Python venv under the target directory, with its scheduler in a database of a
//! [`PgCluster`] (BuildGrid refuses SQLite for it) and its CAS in a directory of its own,
//! listening on 127.0.0.1 on a port the kernel chose. Dropping the guard stops the server.
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
//! The server runs the configuration sf ships to operators,
//! `docs/examples/buildgrid/buildgrid.yml`, with only the lines a test must change replaced
//! (the port, the database, the CAS directory, and the bot keepalive a test may shorten): what
//! the tests run is what the docs give. It keeps BuildGrid's default of five attempts per job:
//! that a retried run is never executed twice is the workers' rule, not the server's.

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
    /// The assigner with BuildGrid's own timing (interval 1 s, jitter factor 1) instead of
    /// the shipped one: the baseline the shipped latency settings are measured against.
    pub default_assigner: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            bot_keepalive: Duration::from_secs(30),
            default_assigner: false,
        }
    }
}

/// The venv BuildGrid runs from (`<target>/buildgrid-venv`), made once per test process.
pub fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| crate::py_venv::made("buildgrid-venv", "buildgrid-venv"))
}

/// A running BuildGrid server.
pub struct BuildGrid {
    dir: tempfile::TempDir,
    database: String,
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
            database: database.clone(),
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
        let cas = self.dir.path().join("cas");
        std::fs::create_dir(&cas).expect("a directory for BuildGrid's CAS");
        let text = configuration(connection, &cas, options);
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

    /// The name of the scheduler's database in the cluster's PostgreSQL server.
    pub fn database(&self) -> &str {
        &self.database
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

    /// Stops the server at once (SIGKILL), as a crash would; the scheduler's database and the
    /// CAS on disk keep their state.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again after [`Self::stop`], on the same port, with the same
    /// database and CAS directory.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
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

/// The configuration sf ships (`docs/examples/buildgrid/buildgrid.yml`) for a test's server:
/// its database `connection`, its CAS directory `cas`, `options`, and `PORT` for the port.
/// Panics when a line it replaces is not in the shipped file exactly once.
pub fn configuration(connection: &str, cas: &Path, options: Options) -> String {
    let shipped = crate::build::workspace_root().join("docs/examples/buildgrid/buildgrid.yml");
    let mut text = std::fs::read_to_string(&shipped)
        .unwrap_or_else(|error| panic!("reading {}: {error}", shipped.display()));
    let replaced = [
        (
            "address: \"127.0.0.1:50051\"",
            "address: \"127.0.0.1:PORT\"".to_owned(),
        ),
        (
            "connection-string: postgresql+psycopg2://bgd:change-me@127.0.0.1:5432/bgd",
            format!("connection-string: {connection}"),
        ),
        (
            "path: /var/lib/buildgrid/cas",
            format!("path: {}", cas.display()),
        ),
        (
            "bot-session-keepalive-timeout: 30",
            format!(
                "bot-session-keepalive-timeout: {}",
                options.bot_keepalive.as_secs().max(1)
            ),
        ),
        ("- name: main", format!("- name: {INSTANCE}")),
    ];
    let assigner = [
        ("interval: 0.05", "interval: 1.0".to_owned()),
        ("jitter-factor: 0", "jitter-factor: 1.0".to_owned()),
    ];
    let replaced = replaced
        .into_iter()
        .chain(assigner.into_iter().filter(|_| options.default_assigner));
    for (line, by) in replaced {
        assert_eq!(
            text.matches(line).count(),
            1,
            "{} holds `{line}` once: the tests replace it",
            shipped.display()
        );
        text = text.replace(line, &by);
    }
    text
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

    /// The runs the worker logged as ended so far, one JSON object each.
    pub fn runs(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|line| line.contains(r#""event":"ended""#))
            .collect()
    }

    /// Every line of the worker's log so far (`started`, `ended`, `refused`), one JSON object
    /// each.
    pub fn events(&self) -> Vec<String> {
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

    /// Every run the workers logged as ended, one JSON object each.
    pub fn runs(&self) -> Vec<String> {
        self.workers.iter().flat_map(WorkerProcess::runs).collect()
    }

    /// Every line the workers logged (`started`, `ended`, `refused`), one JSON object each.
    pub fn events(&self) -> Vec<String> {
        self.workers
            .iter()
            .flat_map(WorkerProcess::events)
            .collect()
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
