//! The backends compiled into sf-host itself, registered with typetag under their tags: the
//! `sqlite` EvidenceStore (the default) and the `open` (the default) and `file` Gates.
//!
//! They live here rather than beside the backends so that the evidence and gate modules,
//! which the collector's source closure covers, do not depend on the plugin machinery.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::evidence_store_adapter::EvidenceStoreBackend;
use super::gate_adapter::GateBackend;
use crate::contracts::{EvidenceStore, EvidenceStoreError, Gate, GateError};
use crate::evidence::SqliteEvidenceStore;
use crate::gate::{FileGate, OpenGate};

/// The database file of the `sqlite` store inside sf's evidence directory.
pub const SQLITE_FILE_NAME: &str = "evidence.db";

/// `[evidence_store] type = "sqlite"`: one SQLite file, by default `evidence.db` in the
/// Slice's evidence directory (`SLICE/state/evidence/`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteBackend {
    /// The database file, an absolute path in a private directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

#[typetag::serde(name = "sqlite")]
impl EvidenceStoreBackend for SqliteBackend {
    fn evidence_store(
        &self,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, EvidenceStoreError> {
        Ok(Arc::new(SqliteEvidenceStore::open(&self.file(state_dir)?)?))
    }

    fn existing_evidence_store(
        &self,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, EvidenceStoreError> {
        Ok(Arc::new(SqliteEvidenceStore::open_existing(
            &self.file(state_dir)?,
        )?))
    }
}

impl SqliteBackend {
    /// The database file: the configured one, or `evidence.db` in `state_dir`.
    fn file(&self, state_dir: &Path) -> Result<PathBuf, EvidenceStoreError> {
        Ok(match &self.path {
            Some(path) if !path.is_absolute() => {
                return Err(EvidenceStoreError::InvalidInput {
                    input: format!("path {}", path.display()),
                    rule: "the database path is absolute, so that the store does not depend \
                           on the directory sf runs in"
                        .to_owned(),
                });
            }
            Some(path) => path.clone(),
            None => state_dir.join(SQLITE_FILE_NAME),
        })
    }
}

/// `[gate] type = "open"`: no fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenGateBackend {}

#[typetag::serde(name = "open")]
impl GateBackend for OpenGateBackend {
    fn gate(&self) -> Result<Arc<dyn Gate>, GateError> {
        Ok(Arc::new(OpenGate))
    }
}

/// `[gate] type = "file", path = "/abs/gate.json"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileGateBackend {
    /// The gate file, an absolute path (read on every call, so it need not exist yet).
    pub path: PathBuf,
}

impl FileGateBackend {
    /// The file gate this section describes.
    pub fn file_gate(&self) -> Result<FileGate, GateError> {
        if !self.path.is_absolute() {
            return Err(GateError::Unavailable {
                reason: format!(
                    "path {:?} must be absolute, so that the gate does not depend on the \
                     directory sf runs in",
                    self.path
                ),
            });
        }
        Ok(FileGate::new(&self.path))
    }
}

#[typetag::serde(name = "file")]
impl GateBackend for FileGateBackend {
    fn gate(&self) -> Result<Arc<dyn Gate>, GateError> {
        Ok(Arc::new(self.file_gate()?))
    }
}
