//! The Executor conformance suite against the reapi Executor and a real cluster (BuildGrid on
//! loopback, its scheduler in a throwaway PostgreSQL cluster, two `sf worker` processes running
//! the leases in sandbox-exec with the shell runtime), one test per case, twice: the backend
//! linked statically, and its plugin library (sf-reapi-plugin) loaded through sf-host's loader
//! and executor adapter.

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sf_host::plugin::{PluginExecutor, load};
use sf_reapi::ReapiExecutor;
use sf_sdk::conformance::executor::{Behaviour, Harness, Program};
use sf_sdk::contracts::Executor;
use sf_test_support::build::plugin_library;
use sf_test_support::executor::ShellHarness;

/// The shell harness with room for the cluster's queueing and transfers.
struct ClusterHarness(ShellHarness);

impl Harness for ClusterHarness {
    fn executor(&self) -> &dyn Executor {
        self.0.executor()
    }

    fn program(&self, behaviour: &Behaviour) -> Program {
        self.0.program(behaviour)
    }

    fn margin(&self) -> Duration {
        Duration::from_secs(10)
    }
}

/// The reapi Executor linked into this test.
fn linked_harness() -> ClusterHarness {
    let cluster = support::shared();
    let executor = ReapiExecutor::new(&support::backend(&cluster, 60))
        .unwrap_or_else(|error| panic!("{error}"));
    ClusterHarness(ShellHarness(Arc::new(executor)))
}

/// `libsf_reapi_plugin.so`, built once per test process.
fn library() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| plugin_library(&["sf-reapi-plugin", "sf-reapi"], &[], "sf_reapi_plugin"))
}

/// The reapi Executor loaded as a plugin with the same section.
fn loaded_harness() -> ClusterHarness {
    let cluster = support::shared();
    let plugin = load(library()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "reapi");
    let section =
        match serde_json::to_value(support::backend(&cluster, 60)).expect("a section encodes") {
            serde_json::Value::Object(section) => section,
            _ => unreachable!("a struct encodes as an object"),
        };
    let executor =
        PluginExecutor::new(&plugin, "reapi", &section).unwrap_or_else(|error| panic!("{error}"));
    ClusterHarness(ShellHarness(Arc::new(executor)))
}

mod linked {
    sf_sdk::executor_conformance!(super::linked_harness);
}

mod loaded {
    sf_sdk::executor_conformance!(super::loaded_harness);
}
