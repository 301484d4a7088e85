//! What the cluster tests share: the `sf-worker` program (and the sandbox launcher beside it)
//! built once per test process, the cluster this process shares (two `sh` workers), and the
//! `[executor]` section that sends runs to a cluster's workers.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sf_reapi::ReapiBackend;
use sf_test_support::build::{cargo_build, strip_group_write};
use sf_test_support::buildgrid::{Cluster, INSTANCE, Options};

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

/// The cluster this test process shares: two `sh` workers.
pub fn shared() -> Arc<Cluster> {
    sf_test_support::buildgrid::shared(|| {
        Cluster::start(
            &[worker_program().to_owned()],
            &["sh", "sh"],
            Options::default(),
        )
    })
}

/// The section sending runs to `cluster`'s `sh` workers, giving up `wait_seconds` after a
/// run's timeout.
pub fn backend(cluster: &Cluster, wait_seconds: u64) -> ReapiBackend {
    ReapiBackend {
        endpoint: cluster.grid.endpoint(),
        instance: INSTANCE.to_owned(),
        worker: cluster.description("sh").to_owned(),
        wait_seconds: Some(wait_seconds),
        reconnect_seconds: Some(10),
        call_seconds: Some(60),
    }
}
