//! What the tests of `sf` against a throwaway PostgreSQL cluster share: the schema as an
//! administrator runs it, an `sf.toml` naming the database, and `sf judge` under a config.

#![allow(dead_code)]

use crate::land_support::{Work, on, write};
use sf_test_support::postgres::{PgCluster, PgDatabase};

/// The store's schema, as an administrator runs it.
pub const SCHEMA: &str = include_str!("../../../plugins/postgres/schema.sql");

/// Writes `name` in the working directory: an `sf.toml` whose evidence store (and so fence)
/// is `database` on `cluster`; returns its name.
pub fn config(work: &Work, name: &str, cluster: &PgCluster, database: &PgDatabase) -> String {
    let path = work.dir.join(name);
    write(
        &path,
        &format!(
            "[evidence_store]\ntype = \"postgres\"\nhost = \"127.0.0.1\"\nport = {}\n\
             database = \"{}\"\nuser = \"{}\"\npassword_file = \"{}\"\n",
            cluster.port(),
            database.name,
            database.role,
            database.password_file.display()
        ),
    );
    name.to_owned()
}

/// The `sf --json --config CONFIG collect` of `candidate` under `slice/`, not yet run.
pub fn collect_command(work: &Work, config: &str, candidate: &str) -> std::process::Command {
    let mut args = vec!["--config", config, "collect"];
    args.extend(on(candidate));
    work.command(&args)
}

/// `sf judge` of `candidate` under `slice/`, with `config` when given; the Verdict's JSON.
pub fn judge(work: &Work, candidate: &str, config: Option<&str>) -> serde_json::Value {
    let mut args = Vec::new();
    if let Some(config) = config {
        args.extend(["--config", config]);
    }
    args.push("judge");
    args.extend(on(candidate));
    work.sf(&args).result()["verdict"].clone()
}
