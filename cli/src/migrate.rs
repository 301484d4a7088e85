//! `sf evidence migrate --from SLICE --to CONFIG`: every record of a Slice's SQLite store,
//! read back verified (re-hashed and re-parsed), put into the evidence store `CONFIG` names.
//! Idempotent: a record the target holds already (the same bytes) is counted and not put
//! again; one it holds with other bytes is `conflict`. A record that fails verification in
//! the source is `corrupt` and stops the migration before anything more is copied; what was
//! copied before stays, and running the command again resumes.

use std::path::Path;
use std::time::{Duration, Instant};

use sf_host::contracts::{EvidenceStoreError, EvidenceStoreExt};
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::plugin::builtin::SQLITE_FILE_NAME;

use super::common::{CliError, Context, Output};
use super::slice_dir::SliceDir;

/// How long each record's read and put may take.
const PER_RECORD: Duration = Duration::from_secs(60);

pub fn run(context: &Context, from: &Path, to: &Path) -> Result<Output, CliError> {
    let slice = SliceDir::open(from)?;
    let file = slice
        .dir
        .join("state")
        .join("evidence")
        .join(SQLITE_FILE_NAME);
    let source = SqliteEvidenceStore::open_existing(&file).map_err(|error| {
        CliError::new(error.code(), format!("--from {}: {error}", from.display()))
    })?;
    let target_context = Context {
        config: Some(to.to_path_buf()),
        ..context.clone()
    };
    let config = target_context.config()?;
    if config.evidence_store_section().tag() == "sqlite" {
        return Err(CliError::new(
            "invalid-input",
            format!(
                "--to {}: its [evidence_store] is SQLite; name the configuration of the store \
                 to migrate to (type = \"postgres\", say)",
                to.display()
            ),
        ));
    }
    let target = target_context.evidence_store(&slice.dir.join("state").join("evidence"))?;
    let ids = source
        .ids(Instant::now() + PER_RECORD)
        .map_err(|error| CliError::new(error.code(), format!("--from: {error}")))?;
    let (mut copied, mut present) = (0usize, 0usize);
    for id in &ids {
        let deadline = Instant::now() + PER_RECORD;
        let record = source.get_verified(id, deadline).map_err(|error| {
            CliError::new(
                error.code(),
                format!(
                    "--from: record {id}: {error}; nothing after it was copied ({copied} copied, \
                     {present} already there)"
                ),
            )
        })?;
        let stop = |error: EvidenceStoreError| {
            CliError::new(
                error.code(),
                format!(
                    "--to: record {id}: {error} ({copied} copied, {present} already there \
                     before it); run the migration again to resume"
                ),
            )
        };
        match target.get_verified(id, deadline) {
            Ok(held) if held == record => present += 1,
            Ok(_) => return Err(stop(EvidenceStoreError::Conflict { id: id.to_string() })),
            Err(EvidenceStoreError::Missing { .. }) => {
                target.put(&record, deadline).map_err(stop)?;
                // Read back from the target, as any reader will.
                if target.get_verified(id, deadline).map_err(stop)? != record {
                    return Err(stop(EvidenceStoreError::Corrupt {
                        id: id.to_string(),
                        what: "read back with other bytes".into(),
                    }));
                }
                copied += 1;
            }
            Err(error) => return Err(stop(error)),
        }
    }
    Ok(Output {
        json: serde_json::json!({
            "records": ids.len(),
            "copied": copied,
            "alreadyThere": present,
        }),
        text: format!(
            "{} records in {}: {copied} copied, {present} already there\n",
            ids.len(),
            file.display()
        ),
    })
}
