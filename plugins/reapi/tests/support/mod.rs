//! What the cluster tests share: the `sf-worker` program (and the sandbox launcher beside it)
//! built once per test process, a throwaway cluster (a PostgreSQL cluster for the scheduler,
//! BuildGrid on loopback, `sf worker` processes), and the `[executor]` section that sends runs
//! to it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sf_reapi::ReapiBackend;
use sf_test_support::build::{cargo_build, strip_group_write};
use sf_test_support::buildgrid::{BuildGrid, INSTANCE, Options, WorkerProcess};
use sf_test_support::postgres::PgCluster;

/// `sf-worker`, with `sf-sandbox-launcher` beside it, built once per test process.
pub fn worker_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let dir = cargo_build(
            &["sf-reapi", "sf-reapi-worker", "sf-sandbox-exec"],
            &["--bin", "sf-worker", "--bin", "sf-sandbox-launcher"],
        );
        strip_group_write(&dir);
        strip_group_write(&dir.join("sf-sandbox-launcher"));
        dir.join("sf-worker")
    })
}

/// A cluster: the scheduler's database server, the REAPI server and its workers. Dropped in
/// that order reversed: the workers, the server, the database.
pub struct Cluster {
    pub workers: Vec<WorkerProcess>,
    pub grid: BuildGrid,
    pub pg: PgCluster,
    sandboxes: tempfile::TempDir,
}

impl Cluster {
    /// A cluster with `workers` workers, each with a sandbox of `runtime` (`sh`,
    /// `python3`): the same configuration, so the same description.
    pub fn start(workers: usize, runtime: &str, options: Options) -> Self {
        let pg = PgCluster::start();
        let grid = BuildGrid::start(&pg, options);
        let sandboxes = tempfile::tempdir().expect("a directory for the sandboxes' files");
        let mut cluster = Self {
            workers: Vec::new(),
            grid,
            pg,
            sandboxes,
        };
        for n in 0..workers {
            cluster.add_worker(&format!("worker-{n}"), runtime);
        }
        cluster
    }

    /// Starts one more worker named `id` with a sandbox of `runtime`.
    pub fn add_worker(&mut self, id: &str, runtime: &str) {
        let config = self.sandboxes.path().join(format!("{id}.toml"));
        std::fs::write(
            &config,
            format!("[executor]\ntype = \"sandbox-exec\"\nruntime = \"{runtime}\"\n"),
        )
        .expect("writing a worker's sandbox configuration");
        let config = config.to_str().expect("a UTF-8 path").to_owned();
        let worker = WorkerProcess::start(
            worker_program(),
            &self.grid.endpoint(),
            id,
            &["--sandbox", &config],
        );
        if let Some(first) = self.workers.first() {
            assert_eq!(
                worker.description(),
                first.description(),
                "workers configured alike describe themselves alike"
            );
        }
        self.workers.push(worker);
    }

    /// The `[executor]` section sending runs to the workers of `runtime` (the first worker's
    /// description), with `wait_seconds`.
    pub fn backend(&self, wait_seconds: u64) -> ReapiBackend {
        ReapiBackend {
            endpoint: self.grid.endpoint(),
            instance: INSTANCE.to_owned(),
            worker: self.workers[0].description().to_owned(),
            wait_seconds: Some(wait_seconds),
            reconnect_seconds: Some(10),
            call_seconds: Some(60),
        }
    }

    /// Every run the workers logged.
    pub fn runs(&self) -> Vec<String> {
        self.workers.iter().flat_map(WorkerProcess::runs).collect()
    }
}

/// The cluster this test process shares (two `sh` workers), started on first use and stopped
/// when the process exits.
pub fn shared() -> Arc<Cluster> {
    static SHARED: Mutex<Option<Arc<Cluster>>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cluster) = shared.as_ref() {
        return Arc::clone(cluster);
    }
    let cluster = Arc::new(Cluster::start(2, "sh", Options::default()));
    *shared = Some(Arc::clone(&cluster));
    // The last reference goes when the process exits, after every test has ended.
    sf_test_support::at_exit(|| drop(SHARED.lock().unwrap_or_else(|e| e.into_inner()).take()));
    cluster
}
