//! The PostgreSQL tests' shared set-up: one throwaway cluster per test process, a database
//! per store with sf's schema and a writer role, and the plugin library.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use sf_postgres::PostgresConfig;
use sf_postgres::schema::SCHEMA_SQL;
use sf_sdk::contracts::EvidenceStore;
use sf_test_support::build::plugin_library;
use sf_test_support::postgres::{PgCluster, PgDatabase};

/// The cluster of this test process, started on first use. A static is never dropped: the
/// cluster's reaper stops it and removes its files when the process ends (see
/// `sf_test_support::postgres`), however it ends.
pub fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(PgCluster::start)
}

/// `libsf_postgres.so`, built once per test process.
pub fn library() -> &'static PathBuf {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| plugin_library(&["sf-postgres"], &[], "sf_postgres"))
}

/// A database with sf's schema made by the administrator (`schema.sql`), and a role sf
/// connects as with INSERT and SELECT only.
pub struct Database(pub PgDatabase);

impl std::ops::Deref for Database {
    type Target = PgDatabase;
    fn deref(&self) -> &PgDatabase {
        &self.0
    }
}

impl Database {
    pub fn create(cluster: &PgCluster) -> Self {
        Self(cluster.database_with(SCHEMA_SQL))
    }

    /// The store's configuration.
    pub fn config(&self) -> PostgresConfig {
        PostgresConfig {
            host: "127.0.0.1".into(),
            port: cluster().port(),
            database: self.name.clone(),
            user: self.role.clone(),
            password_file: Some(self.password_file.clone()),
            password_env: None,
            connect_timeout_seconds: 10,
            sslmode: Default::default(),
            sslrootcert: None,
        }
    }

    /// The same as a configuration section, as `sf.toml` gives it to a plugin.
    pub fn section(&self) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(self.config()).expect("a config encodes") {
            serde_json::Value::Object(map) => map,
            _ => unreachable!("a struct encodes as an object"),
        }
    }
}

type Registry = Mutex<HashMap<usize, Database>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

fn key(store: &Arc<dyn EvidenceStore>) -> usize {
    Arc::as_ptr(store) as *const () as usize
}

/// Keeps `database` for as long as the test process runs, found again by `store`.
pub fn remember(store: &Arc<dyn EvidenceStore>, database: Database) {
    registry().lock().unwrap().insert(key(store), database);
}

/// The database name of a store made by [`remember`]'s caller.
pub fn database_of(store: &Arc<dyn EvidenceStore>) -> String {
    registry().lock().unwrap()[&key(store)].name.clone()
}
