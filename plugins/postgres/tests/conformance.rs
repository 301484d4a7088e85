//! The EvidenceStore conformance suite against PostgreSQL, one test per case, twice: the store
//! linked statically, and the plugin library loaded through sf-host's loader and adapter. Each
//! test process starts a throwaway cluster; each store gets a database of its own, its schema
//! made by `schema.sql` as an administrator would, and a role with INSERT and SELECT only.

mod support;

use std::sync::Arc;

use sf_contracts::canonical::Digest;
use sf_host::plugin::{PluginEvidenceStore, load};
use sf_postgres::PostgresEvidenceStore;
use sf_sdk::conformance::evidence_store::Harness;
use sf_sdk::contracts::EvidenceStore;
use support::{Database, cluster, library};

/// Stores on one cluster, linked or loaded.
struct Pg {
    loaded: bool,
}

impl Harness for Pg {
    fn fresh_store(&self) -> Arc<dyn EvidenceStore> {
        let database = Database::create(cluster());
        let store: Arc<dyn EvidenceStore> = if self.loaded {
            let plugin = load(library()).unwrap_or_else(|error| panic!("{error}"));
            assert_eq!(plugin.name(), "postgres");
            Arc::new(
                PluginEvidenceStore::new(&plugin, "postgres", &database.section())
                    .unwrap_or_else(|error| panic!("{error}")),
            )
        } else {
            Arc::new(
                PostgresEvidenceStore::connect(&database.config())
                    .unwrap_or_else(|error| panic!("{error}")),
            )
        };
        support::remember(&store, database);
        store
    }

    fn corrupt(&self, store: &Arc<dyn EvidenceStore>, id: &Digest) -> bool {
        let database = support::database_of(store);
        // The superuser, with triggers off for its session: what only someone behind sf's
        // back can do.
        cluster().psql(
            &database,
            &format!(
                "SET session_replication_role = replica; \
                 UPDATE sf_evidence SET record = record || '\\x00'::bytea WHERE id = '{id}'"
            ),
        );
        true
    }
}

fn linked_harness() -> Pg {
    Pg { loaded: false }
}

fn loaded_harness() -> Pg {
    Pg { loaded: true }
}

mod linked {
    sf_sdk::evidence_store_conformance!(super::linked_harness);
}

mod loaded {
    sf_sdk::evidence_store_conformance!(super::loaded_harness);
}
