//! Export: a published Candidate re-verified from its ref down to every blob, and its exact
//! bytes returned as fresh copies. Nothing is ever repaired.

use crate::canonical::{self, Digest};
use crate::contracts::{ObjectStore as _, ObjectStoreExt, RefValue};
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind};
use crate::snapshot::SnapshotFile;

use super::identity;
use super::proposal;
use super::seal;
use super::source::{self, SourceFile};
use super::{
    CandidateManifest, CandidateProtocol, FileEdit, IDENT, MANIFEST_NAME,
    MAX_CANDIDATE_COMMIT_BYTES, MAX_COMMIT_BYTES, MAX_PROPOSAL_DOCUMENT_BYTES, ManifestEntry,
    PROPOSAL_NAME, Proposal, Repository, RepositoryError, SealedCandidate, SourceSnapshot,
    candidate_ref, check_protected, contents_digest, legacy_candidate_message, validate_proposal,
};

impl Repository {
    /// Exports the Candidate `digest` names, re-verifying everything (the seal commit, the
    /// manifest's canonical bytes and repository, M and every tree and blob rebuilt and
    /// compared, the edits and proposal digest recomputed, and the base a factory commit with
    /// the recorded tree). Corruption is reported, never repaired. Files are fresh copies.
    pub fn export_candidate(&self, digest: &Digest) -> Result<SealedCandidate, RepositoryError> {
        self.export_candidate_and_base(digest)
            .map(|(sealed, _)| sealed)
    }

    /// [`Repository::export_candidate`], and the snapshot of the Candidate's base it read and
    /// checked on the way (what [`Repository::snapshot`] of the base commit answers), so that
    /// a caller that needs both reads the base once.
    pub fn export_candidate_and_base(
        &self,
        digest: &Digest,
    ) -> Result<(SealedCandidate, SourceSnapshot), RepositoryError> {
        // The Candidate's tree and its base's share nearly every object: each is read from
        // the store once in this export (through one reader: the scope is also a read scope),
        // and checked wherever it is used.
        let _cache = self.store.scope();
        let name = candidate_ref(digest);
        let seal_commit = match self.store.read_ref(&name, self.deadline())? {
            None => {
                return Err(RepositoryError::Missing {
                    what: format!("Candidate {digest} ({name})"),
                });
            }
            Some(RefValue::Symbolic(to)) => {
                return Err(RepositoryError::corrupt(format!(
                    "{name} is a symbolic ref to {to}"
                )));
            }
            Some(RefValue::Direct(id)) => id,
        };
        let store = &self.store;
        let read_one = |id: ObjectId,
                        kind: ObjectKind,
                        budget: u64,
                        what: &str|
         -> Result<Vec<u8>, RepositoryError> {
            let mut bodies =
                source::read_verified(store, &[id], kind, budget, what, self.deadline())?;
            Ok(bodies.remove(0))
        };
        let seal_body = read_one(
            seal_commit,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "seal commit",
        )?;
        let seal = git_object::decode_commit(&seal_body)
            .filter(|seal| {
                seal.is_by(IDENT)
                    && seal.parents.len() == 1
                    && seal.message == identity::seal_message()
            })
            .ok_or_else(|| {
                RepositoryError::corrupt(format!(
                    "seal commit {seal_commit} is not in sf's seal form"
                ))
            })?;
        let seal_tree = read_one(seal.tree, ObjectKind::Tree, MAX_COMMIT_BYTES, "seal tree")?;
        let seal_entries = git_object::decode_tree(&seal_tree).unwrap_or_default();
        let blob_named = |name: &str| {
            seal_entries
                .iter()
                .find(|entry| entry.mode == EntryMode::File && entry.name == name)
                .map(|entry| entry.id)
        };
        let not_sealed = || {
            RepositoryError::corrupt(format!(
                "seal tree {} is not {{{MANIFEST_NAME}}} or {{{MANIFEST_NAME}, {PROPOSAL_NAME}}}",
                seal.tree
            ))
        };
        let manifest_blob = blob_named(MANIFEST_NAME).ok_or_else(not_sealed)?;
        // Both blobs of the seal tree in one read; each is read and checked below.
        let _ = store.read_verified(
            &[Some(manifest_blob), blob_named(PROPOSAL_NAME)]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>(),
            canonical::MAX_BYTES as u64 + MAX_PROPOSAL_DOCUMENT_BYTES as u64,
            self.deadline(),
        );
        let manifest_bytes = read_one(
            manifest_blob,
            ObjectKind::Blob,
            canonical::MAX_BYTES as u64,
            "manifest",
        )?;
        if Digest::of(&manifest_bytes) != *digest {
            return Err(RepositoryError::corrupt(format!(
                "the manifest under {name} does not hash to {digest}"
            )));
        }
        let value = canonical::parse_canonical(&manifest_bytes)
            .map_err(|error| RepositoryError::corrupt(format!("manifest {digest}: {error}")))?;
        let manifest = CandidateManifest::from_value(&value).map_err(|error| {
            RepositoryError::corrupt(format!(
                "manifest {digest}: {}: {}",
                error.field, error.rule
            ))
        })?;
        // The seal tree holds exactly what the manifest's protocol says.
        let proposal_blob = blob_named(PROPOSAL_NAME);
        let expected_entries = if manifest.protocol == CandidateProtocol::V3 {
            2
        } else {
            1
        };
        if seal_entries.len() != expected_entries
            || proposal_blob.is_some() != (manifest.protocol == CandidateProtocol::V3)
        {
            return Err(not_sealed());
        }
        if manifest.repository != self.identity {
            return Err(RepositoryError::corrupt(format!(
                "manifest {digest} belongs to another repository ({} at {})",
                manifest.repository.product_id, manifest.repository.path
            )));
        }
        if seal.parents[0] != manifest.commit {
            return Err(RepositoryError::corrupt(format!(
                "seal commit {seal_commit} is not the child of M {}",
                manifest.commit
            )));
        }
        let frozen = manifest.frozen();
        frozen
            .validate()
            .map_err(|error| RepositoryError::corrupt(format!("manifest {digest}: {error}")))?;
        let corrupt = |why: String| RepositoryError::corrupt(format!("manifest {digest}: {why}"));
        // The proposal the seal commit holds, whose digest the manifest and M name.
        let proposal = match proposal_blob {
            None => None,
            Some(blob) => {
                let bytes = read_one(
                    blob,
                    ObjectKind::Blob,
                    MAX_PROPOSAL_DOCUMENT_BYTES as u64,
                    "proposal",
                )?;
                if Digest::of(&bytes) != manifest.proposal_digest {
                    return Err(corrupt(format!(
                        "the {PROPOSAL_NAME} beside it does not hash to the proposal digest"
                    )));
                }
                let proposal = proposal::parse_proposal(&bytes)
                    .map_err(|error| corrupt(format!("{PROPOSAL_NAME}: {error}")))?;
                // Validation re-encodes: the digest matches only for canonical bytes.
                let recomputed = validate_proposal(&proposal, &manifest.scope, &manifest.bounds)
                    .map_err(|error| corrupt(format!("{PROPOSAL_NAME}: {error}")))?;
                if recomputed != manifest.proposal_digest {
                    return Err(corrupt(format!("{PROPOSAL_NAME} is not canonical")));
                }
                Some(proposal)
            }
        };

        // M and the base commit, and both trees level by level together; every object is
        // read and checked again below, from this export's cache.
        source::prefetch(
            store,
            &[manifest.commit, manifest.base_commit],
            &[manifest.tree, manifest.base_tree],
            MAX_CANDIDATE_COMMIT_BYTES.max(super::MAX_IMPORTED_COMMIT_BYTES),
            &self.identity.settings().limits(),
            self.deadline(),
        );
        // M, rebuilt from the manifest (and the proposal), byte for byte.
        let m_body = read_one(
            manifest.commit,
            ObjectKind::Commit,
            MAX_CANDIDATE_COMMIT_BYTES,
            "Candidate commit",
        )?;
        let expected_m = match &proposal {
            Some(proposal) => seal::candidate_commit(
                &self.identity.product_id,
                &frozen,
                proposal,
                &manifest.proposal_digest,
                manifest.tree,
            ),
            None => git_object::encode_commit(&Commit::by(
                manifest.tree,
                vec![manifest.base_commit],
                IDENT,
                legacy_candidate_message(
                    &self.identity.product_id,
                    &frozen,
                    &manifest.proposal_digest,
                ),
            )),
        };
        if m_body != expected_m {
            return Err(RepositoryError::corrupt(format!(
                "Candidate commit {} does not match its manifest",
                manifest.commit
            )));
        }
        // Every tree and blob, read back and re-checked, must be what the manifest names.
        let files = source::read_tree(
            store,
            manifest.tree,
            &self.identity.settings(),
            "Candidate tree",
            self.deadline(),
        )?;
        // One digest of the entries: checked against the manifest, and the executor's input.
        let snapshot_digest = contents_digest(&files);
        manifest
            .check_contents(&files, &snapshot_digest)
            .map_err(|why| {
                RepositoryError::corrupt(format!("Candidate tree {}: {why}", manifest.tree))
            })?;
        // The base: a factory commit with the recorded tree.
        let base = self.snapshot(&manifest.base_commit).map_err(|error| {
            RepositoryError::corrupt(format!(
                "base {} of Candidate {digest} is not a factory commit: {error}",
                manifest.base_commit
            ))
        })?;
        if base.tree != manifest.base_tree {
            return Err(RepositoryError::corrupt(format!(
                "base {} does not have the recorded tree",
                manifest.base_commit
            )));
        }
        let recovered;
        let applied_proposal = match &proposal {
            Some(proposal) => proposal,
            None => {
                recovered = self.recover_proposal(&manifest, &base, &files, digest)?;
                &recovered
            }
        };
        self.check_edits(&manifest, &base, applied_proposal, &files, digest)?;

        let files: Vec<SnapshotFile> = files
            .into_iter()
            .map(|file| SnapshotFile::new(file.path, file.mode, file.content))
            .collect();
        // The tree rules were checked when the tree was read; whether the files fit an
        // executor is the collector's question, not the export's.
        Ok((
            SealedCandidate {
                digest: digest.clone(),
                manifest,
                manifest_bytes,
                files,
                snapshot_digest,
                proposal,
            },
            base,
        ))
    }

    /// The proposal of an `sf-candidate/1` or `/2` Candidate, whose seal commit holds only the
    /// manifest: the edits' texts read from the Candidate's files, checked against the
    /// recorded digests and the proposal digest.
    fn recover_proposal(
        &self,
        manifest: &CandidateManifest,
        base: &SourceSnapshot,
        files: &[SourceFile],
        digest: &Digest,
    ) -> Result<Proposal, RepositoryError> {
        let corrupt = |why: &str| RepositoryError::corrupt(format!("manifest {digest}: {why}"));
        let find =
            |list: &[SourceFile], path: &str| list.iter().find(|file| file.path == path).cloned();
        let mut edits = Vec::with_capacity(manifest.edits.len());
        for edit in &manifest.edits {
            let digest_of =
                |entry: &Option<ManifestEntry>| entry.as_ref().map(|e| e.sha256.clone());
            let after = find(files, &edit.path);
            if find(&base.files, &edit.path).map(|file| file.sha256) != digest_of(&edit.prior)
                || after.as_ref().map(|file| file.sha256.clone()) != digest_of(&edit.next)
            {
                return Err(corrupt(&format!(
                    "edit of {} does not match the base and Candidate files",
                    edit.path
                )));
            }
            let text = after
                .map(|file| String::from_utf8(file.content))
                .transpose()
                .map_err(|_| corrupt(&format!("the edited {} is not text", edit.path)))?;
            edits.push(FileEdit::text(
                edit.path.clone(),
                digest_of(&edit.prior),
                text,
            ));
        }
        let proposal = Proposal::new(edits);
        let recomputed = validate_proposal(&proposal, &manifest.scope, &manifest.bounds)
            .map_err(|error| corrupt(&error.to_string()))?;
        if recomputed != manifest.proposal_digest {
            return Err(corrupt(
                "the proposal digest does not match the recorded edits",
            ));
        }
        Ok(proposal)
    }

    /// Checks that the Candidate's files are the base with `proposal` applied, that no edit
    /// touches a protected path, and that the manifest records exactly these edits, in path
    /// order.
    fn check_edits(
        &self,
        manifest: &CandidateManifest,
        base: &SourceSnapshot,
        proposal: &Proposal,
        files: &[SourceFile],
        digest: &Digest,
    ) -> Result<(), RepositoryError> {
        let corrupt = |why: &str| RepositoryError::corrupt(format!("manifest {digest}: {why}"));
        let protected = manifest
            .frozen()
            .protected()
            .map_err(|error| corrupt(&error.to_string()))?;
        check_protected(
            proposal.edits.iter().map(|edit| edit.path.as_str()),
            &protected,
        )
        .map_err(|error| corrupt(&error.to_string()))?;
        let applied = proposal::apply_edits(&base.files, proposal, &self.identity.settings())
            .map_err(|error| corrupt(&error.to_string()))?;
        if applied != files {
            return Err(corrupt(
                "the Candidate files are not the base with the recorded edits applied",
            ));
        }
        if seal::edit_entries(&base.files, proposal, files) != manifest.edits {
            return Err(corrupt(
                "the recorded edits are not the proposal's, entry for entry and in path order",
            ));
        }
        Ok(())
    }
}
