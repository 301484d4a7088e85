//! A landed commit's attestation in the owned repository: `refs/sf/attestations/<commit id>`
//! names a blob holding the signed envelope's bytes. It is written once (create-only) and
//! never moved, so every delivery of the commit pushes the same attestation, and the remote's
//! ref is created in the delivery's own atomic push (`effect`, `push`).

use crate::contracts::{EncodedObject, RefName, RefUpdate};
use crate::git_object::{ObjectId, ObjectKind};

use super::super::Repository;
use super::super::error::RepositoryError;

/// Where a commit's attestation is kept, here and on the team's remote.
pub const ATTESTATION_REF_PREFIX: &str = "refs/sf/attestations/";
/// The most bytes an attestation may have (a DSSE envelope of a Statement within canonical
/// JSON's 1 MiB, in base64, with its signature).
pub const MAX_ATTESTATION_BYTES: u64 = 2 * 1024 * 1024;

/// The ref of `commit`'s attestation.
pub fn attestation_ref(commit: &ObjectId) -> RefName {
    RefName::parse(&format!("{ATTESTATION_REF_PREFIX}{commit}"))
        .expect("attestation ref names are valid")
}

/// A commit's attestation as the owned repository holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredAttestation {
    /// The blob's id (what the ref names, here and on the remote).
    pub id: ObjectId,
    /// The envelope's bytes.
    pub bytes: Vec<u8>,
    /// Whether this call wrote it; `false` when it was there already.
    pub created: bool,
}

impl Repository {
    /// The attestation kept for `commit`, its blob re-hashed, if there is one. A ref that
    /// names anything but a blob of at most [`MAX_ATTESTATION_BYTES`] is `corrupt`.
    pub fn attestation(
        &self,
        commit: &ObjectId,
    ) -> Result<Option<StoredAttestation>, RepositoryError> {
        let name = attestation_ref(commit);
        let Some(id) = self.read_direct(&name)? else {
            return Ok(None);
        };
        let bytes = self.read_one(
            id,
            ObjectKind::Blob,
            MAX_ATTESTATION_BYTES,
            &format!("the attestation {name}"),
        )?;
        Ok(Some(StoredAttestation {
            id,
            bytes,
            created: false,
        }))
    }

    /// Keeps `bytes` as `commit`'s attestation unless it has one already: the attestation a
    /// commit has is never replaced, so the answer is the one kept (`created` says whether it
    /// is `bytes`).
    pub fn record_attestation(
        &self,
        commit: &ObjectId,
        bytes: Vec<u8>,
    ) -> Result<StoredAttestation, RepositoryError> {
        if let Some(kept) = self.attestation(commit)? {
            return Ok(kept);
        }
        if bytes.len() as u64 > MAX_ATTESTATION_BYTES {
            return Err(RepositoryError::invalid(
                format!("the attestation of {commit}"),
                format!("it has more than {MAX_ATTESTATION_BYTES} bytes"),
            ));
        }
        let blob = EncodedObject::new(ObjectKind::Blob, bytes);
        self.store
            .write_objects(std::slice::from_ref(&blob), self.deadline())?;
        let name = attestation_ref(commit);
        match self.store.create_ref(&name, &blob.id, self.deadline())? {
            RefUpdate::Applied => Ok(StoredAttestation {
                id: blob.id,
                bytes: blob.body,
                created: true,
            }),
            // Another landing of the same commit kept its own first: that one stands.
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => self
                .attestation(commit)?
                .ok_or_else(|| RepositoryError::GitFailed {
                    detail: format!("creating {name} was not acknowledged and it is absent"),
                }),
        }
    }
}
