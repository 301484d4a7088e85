//! The AttemptFence conformance suite against PostgreSQL, one test per case, twice: the fence
//! linked statically, and the plugin library loaded through sf-host's loader and adapter.
//! Each case gets a database of its own on this test process's throwaway cluster; a hold is
//! lost by the superuser terminating its session, and a holder is killed by re-executing this
//! binary as one and sending it SIGKILL.

mod support;

use std::sync::{Arc, Mutex};

use sf_host::fence::{AttemptFence, FenceHold};
use sf_host::plugin::{PluginFence, load};
use sf_postgres::{PostgresConfig, PostgresFence};
use sf_sdk::conformance::fence::{CANDIDATE, Harness, candidate};
use sf_test_support::fence::{HOLDER_ENV, PRODUCT_ENV, announce_and_wait, kill_a_holder};
use support::{Database, cluster, library};

/// The fences of one case, linked or loaded, over one database.
struct Pg {
    loaded: bool,
    database: Mutex<Option<Database>>,
}

impl Pg {
    fn new(loaded: bool) -> Self {
        Self {
            loaded,
            database: Mutex::new(None),
        }
    }

    fn handle(&self) -> Arc<dyn AttemptFence> {
        let guard = self.database.lock().unwrap();
        let database = guard.as_ref().expect("a fresh fence");
        if self.loaded {
            let plugin = load(library()).unwrap_or_else(|error| panic!("{error}"));
            Arc::new(
                PluginFence::new(&plugin, "postgres", &database.section())
                    .unwrap_or_else(|error| panic!("{error}")),
            )
        } else {
            Arc::new(
                PostgresFence::connect(&database.config())
                    .unwrap_or_else(|error| panic!("{error}")),
            )
        }
    }

    fn database_name(&self) -> String {
        self.database.lock().unwrap().as_ref().unwrap().name.clone()
    }
}

impl Harness for Pg {
    fn fresh_fence(&self) -> Arc<dyn AttemptFence> {
        *self.database.lock().unwrap() = Some(Database::create(cluster()));
        self.handle()
    }

    fn another_handle(&self, _fence: &Arc<dyn AttemptFence>) -> Arc<dyn AttemptFence> {
        self.handle()
    }

    fn lose(&self, _fence: &Arc<dyn AttemptFence>, _hold: &dyn FenceHold) -> bool {
        // The superuser ends every session holding an advisory lock in the case's database:
        // what an administrator, a failover or a network partition does to a holder.
        let terminated = cluster().psql(
            "postgres",
            &format!(
                "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l \
                 JOIN pg_database d ON d.oid = l.database \
                 WHERE l.locktype = 'advisory' AND d.datname = '{}'",
                self.database_name()
            ),
        );
        terminated == "1"
    }

    fn kill_a_holder(&self, _fence: &Arc<dyn AttemptFence>, product: &str) -> u64 {
        let config = {
            let guard = self.database.lock().unwrap();
            serde_json::to_string(&guard.as_ref().unwrap().config()).unwrap()
        };
        kill_a_holder("postgres_fence_holder", &config, product)
    }
}

/// The holder process of `kill_a_holder` (this binary re-executed); a no-op otherwise.
#[test]
fn postgres_fence_holder() {
    let (Some(config), Some(product)) = (
        std::env::var(HOLDER_ENV).ok(),
        std::env::var(PRODUCT_ENV).ok(),
    ) else {
        return;
    };
    let config: PostgresConfig = serde_json::from_str(&config).unwrap();
    let fence = PostgresFence::connect(&config).unwrap();
    let hold = fence.acquire(&product, &candidate(CANDIDATE)).unwrap();
    announce_and_wait(hold.attempt().epoch);
}

fn linked_harness() -> Pg {
    Pg::new(false)
}

fn loaded_harness() -> Pg {
    Pg::new(true)
}

mod linked {
    sf_sdk::fence_conformance!(super::linked_harness);
}

mod loaded {
    sf_sdk::fence_conformance!(super::loaded_harness);
}
