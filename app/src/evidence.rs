//! Evidence records read back, each re-hashed: one record by id with what it holds (a run's
//! observation, or a review), the ids filed under a Candidate's pins, and a Slice's SQLite
//! store copied into another evidence store.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sf_host::assurance::{Observation, ProcessCheck, REVIEW_FORMAT, Review};
use sf_host::canonical::Digest;
use sf_host::contracts::{EvidenceRecord, EvidenceStore, EvidenceStoreError, EvidenceStoreExt};
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::plugin::builtin::SQLITE_FILE_NAME;

use crate::backends::Backends;
use crate::error::AppError;
use crate::input::parse_digest;
use crate::loaded::{Loaded, Target};
use crate::slice_dir::SliceDir;

/// How long one record's read (or put) may take.
pub const PER_RECORD: Duration = Duration::from_secs(60);

/// The observation the record `id` holds, re-hashed and decoded, or why it cannot be read.
pub fn observation(store: &dyn EvidenceStore, id: &Digest) -> Result<Observation, String> {
    store
        .get_verified(id, Instant::now() + PER_RECORD)
        .map_err(|error| error.to_string())
        .and_then(|record| {
            Observation::decode_format(record.format(), record.payload())
                .map_err(|why| why.to_string())
        })
}

/// Which record, in which Slice's evidence store.
#[derive(Clone, Debug)]
pub struct GetRequest {
    /// The record id as given (`ID`).
    pub id: String,
    /// The Slice directory whose store holds it.
    pub slice: PathBuf,
}

/// One record, re-hashed, and what it holds.
pub struct Record {
    /// Its id.
    pub id: Digest,
    /// The record.
    pub record: EvidenceRecord,
    /// The review it holds, for a review record.
    pub review: Option<Review>,
    /// The observation it holds, for a run's record.
    pub observation: Option<Observation>,
    /// The Slice's process check the observation is of, when the Slice has it.
    pub check: Option<ProcessCheck>,
    /// The Slice whose store holds it.
    pub slice: SliceDir,
}

/// Reads record `request.id`, creating nothing.
pub fn get(backends: &Backends, request: &GetRequest) -> Result<Record, AppError> {
    let id = parse_digest(&request.id, "ID")?;
    let slice = SliceDir::open(&request.slice)?;
    let store = slice.existing_evidence_store(backends)?;
    let record = store
        .get_verified(&id, Instant::now() + PER_RECORD)
        .map_err(|error| AppError::coded(error.code(), format!("record {id}"), error))?;
    let corrupt = |why: String| AppError::coded("corrupt", format!("record {id}"), why);
    let observation = Observation::is_format(record.format())
        .then(|| Observation::decode_format(record.format(), record.payload()))
        .transpose()
        .map_err(|why| corrupt(why.to_string()))?;
    let review = (record.format() == REVIEW_FORMAT)
        .then(|| Review::from_payload(record.payload()))
        .transpose()
        .map_err(|why| corrupt(why.to_string()))?;
    let check = observation.as_ref().and_then(|observation| {
        slice
            .frozen
            .acceptance
            .process_checks()
            .find(|check| check.id == observation.facts.check)
            .cloned()
    });
    Ok(Record {
        id,
        record,
        review,
        observation,
        check,
        slice,
    })
}

/// The records filed under a Candidate's pins.
#[derive(Clone, Debug)]
pub struct Found {
    /// The pins' digest.
    pub pins: Digest,
    /// The records' ids.
    pub ids: Vec<Digest>,
}

/// Lists the records filed under `target`'s pins, creating nothing.
pub fn find(backends: &Backends, target: &Target) -> Result<Found, AppError> {
    let loaded = Loaded::read(backends, target)?;
    let pins = loaded
        .programs
        .pins
        .digest()
        .map_err(|error| AppError::invalid("the pins", error))?;
    let store = loaded.slice.existing_evidence_store(backends)?;
    let ids = store
        .find(&pins, Instant::now() + PER_RECORD)
        .map_err(|error| AppError::coded(error.code(), "the evidence store", error))?;
    Ok(Found { pins, ids })
}

/// A migration: every record of a Slice's SQLite store into the store another configuration
/// names.
#[derive(Clone, Debug)]
pub struct MigrateRequest {
    /// The Slice directory whose SQLite store is read (`--from`).
    pub from: PathBuf,
    /// The `sf.toml` whose `[evidence_store]` receives the records (`--to`).
    pub to: PathBuf,
}

/// What a migration did.
#[derive(Clone, Debug)]
pub struct Migrated {
    /// The SQLite file read.
    pub file: PathBuf,
    /// How many records it holds.
    pub records: usize,
    /// How many were copied.
    pub copied: usize,
    /// How many the target held already.
    pub present: usize,
}

/// Copies every record of the Slice's SQLite store into the evidence store `request.to`
/// names, each read back verified. Idempotent: a record the target holds already (the same
/// bytes) is counted and not put again; one it holds with other bytes is `conflict`. A record
/// that fails verification in the source stops the migration before anything more is copied;
/// what was copied before stays, and running it again resumes.
pub fn migrate(backends: &Backends, request: &MigrateRequest) -> Result<Migrated, AppError> {
    let (from, to) = (&request.from, &request.to);
    let slice = SliceDir::open(from)?;
    let file = slice
        .dir
        .join("state")
        .join("evidence")
        .join(SQLITE_FILE_NAME);
    let source = SqliteEvidenceStore::open_existing(&file).map_err(|error| {
        AppError::new(error.code(), format!("--from {}: {error}", from.display()))
    })?;
    let target = migration_target(backends, &slice, to)?;
    let ids = source
        .ids(Instant::now() + PER_RECORD)
        .map_err(|error| AppError::new(error.code(), format!("--from: {error}")))?;
    let (mut copied, mut present) = (0usize, 0usize);
    for id in &ids {
        let deadline = Instant::now() + PER_RECORD;
        let record = source.get_verified(id, deadline).map_err(|error| {
            AppError::new(
                error.code(),
                format!(
                    "--from: record {id}: {error}; nothing after it was copied ({copied} copied, \
                     {present} already there)"
                ),
            )
        })?;
        let stop = |error: EvidenceStoreError| {
            AppError::new(
                error.code(),
                format!(
                    "--to: record {id}: {error} ({copied} copied, {present} already there \
                     before it); run the migration again to resume"
                ),
            )
        };
        match copy(target.as_ref(), id, &record, deadline).map_err(stop)? {
            true => copied += 1,
            false => present += 1,
        }
    }
    Ok(Migrated {
        file,
        records: ids.len(),
        copied,
        present,
    })
}

/// The store the configuration `to` names, refused when it is SQLite (a migration goes to
/// another kind of store).
fn migration_target(
    backends: &Backends,
    slice: &SliceDir,
    to: &Path,
) -> Result<std::sync::Arc<dyn EvidenceStore>, AppError> {
    let target = Backends {
        config: Some(to.to_path_buf()),
        ..backends.clone()
    };
    if target.config()?.evidence_store_section().tag() == "sqlite" {
        return Err(AppError::new(
            "invalid-input",
            format!(
                "--to {}: its [evidence_store] is SQLite; name the configuration of the store \
                 to migrate to (type = \"postgres\", say)",
                to.display()
            ),
        ));
    }
    target.evidence_store(&slice.dir.join("state").join("evidence"))
}

/// Puts `record` into `target` unless it holds it already, and reads it back as any reader
/// will; whether it was put.
fn copy(
    target: &dyn EvidenceStore,
    id: &Digest,
    record: &EvidenceRecord,
    deadline: Instant,
) -> Result<bool, EvidenceStoreError> {
    match target.get_verified(id, deadline) {
        Ok(held) if held == *record => Ok(false),
        Ok(_) => Err(EvidenceStoreError::Conflict { id: id.to_string() }),
        Err(EvidenceStoreError::Missing { .. }) => {
            target.put(record, deadline)?;
            if target.get_verified(id, deadline)? != *record {
                return Err(EvidenceStoreError::Corrupt {
                    id: id.to_string(),
                    what: "read back with other bytes".into(),
                });
            }
            Ok(true)
        }
        Err(error) => Err(error),
    }
}
