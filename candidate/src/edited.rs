//! What a Candidate changed at one path: its entry in the base and in M, as a collection by
//! reference lays it over the base.

use crate::snapshot::SnapshotFile;

/// One edited path of a Candidate: its entry in the base and in M (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditedEntry {
    /// The path.
    pub path: String,
    /// The base's entry.
    pub prior: Option<SnapshotFile>,
    /// M's entry.
    pub next: Option<SnapshotFile>,
}
