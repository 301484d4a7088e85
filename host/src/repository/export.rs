//! Export: a published Candidate re-verified from its ref down to every blob, and its exact
//! bytes returned as fresh copies. Nothing is ever repaired.

use crate::canonical::{self, Digest};
use crate::contracts::RefValue;
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind};
use crate::snapshot::{SnapshotFile, digest_of_files};

use super::identity;
use super::proposal;
use super::source::{self, SourceFile};
use super::{
    CandidateManifest, FileEdit, IDENT, MANIFEST_NAME, MAX_COMMIT_BYTES, ManifestFile, Proposal,
    Repository, RepositoryError, SealedCandidate, SourceSnapshot, candidate_message, candidate_ref,
    check_protected, validate_proposal,
};

impl Repository {
    /// Exports the Candidate `digest` names, re-verifying everything (the seal commit, the
    /// manifest's canonical bytes and repository, M and every tree and blob rebuilt and
    /// compared, the edits and proposal digest recomputed, and the base a factory commit with
    /// the recorded tree). Corruption is reported, never repaired. Files are fresh copies.
    pub fn export_candidate(&self, digest: &Digest) -> Result<SealedCandidate, RepositoryError> {
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
        let store = self.store.as_ref();
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
                seal.ident == IDENT
                    && seal.parents.len() == 1
                    && seal.message == identity::seal_message()
            })
            .ok_or_else(|| {
                RepositoryError::corrupt(format!(
                    "seal commit {seal_commit} is not in sf's seal form"
                ))
            })?;
        let seal_tree = read_one(seal.tree, ObjectKind::Tree, MAX_COMMIT_BYTES, "seal tree")?;
        let manifest_blob = match git_object::decode_tree(&seal_tree).as_deref() {
            Some([entry]) if entry.mode == EntryMode::File && entry.name == MANIFEST_NAME => {
                entry.id
            }
            _ => {
                return Err(RepositoryError::corrupt(format!(
                    "seal tree {} is not exactly {{{MANIFEST_NAME}}}",
                    seal.tree
                )));
            }
        };
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

        // M, rebuilt from the manifest, byte for byte.
        let m_body = read_one(
            manifest.commit,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "Candidate commit",
        )?;
        let expected_m = git_object::encode_commit(&Commit {
            tree: manifest.tree,
            parents: vec![manifest.base_commit],
            ident: IDENT.to_owned(),
            message: candidate_message(
                &self.identity.product_id,
                &frozen,
                &manifest.proposal_digest,
            ),
        });
        if m_body != expected_m {
            return Err(RepositoryError::corrupt(format!(
                "Candidate commit {} does not match its manifest",
                manifest.commit
            )));
        }
        // Every tree and blob, read back and re-checked; the listing must equal the manifest's.
        let files = source::read_tree(
            store,
            manifest.tree,
            &self.identity.settings(),
            "Candidate tree",
            self.deadline(),
        )?;
        let listed = ManifestFile::listing(&files).map_err(|why| {
            RepositoryError::corrupt(format!("Candidate tree {}: {why}", manifest.tree))
        })?;
        if listed != manifest.files {
            return Err(RepositoryError::corrupt(format!(
                "Candidate tree {} does not match the manifest's files",
                manifest.tree
            )));
        }
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
        self.check_edits(&manifest, &base, &files, digest)?;

        let files: Vec<SnapshotFile> = files
            .into_iter()
            .map(|file| SnapshotFile::new(file.path, file.mode, file.content))
            .collect();
        // The tree rules were checked when the tree was read; whether the files fit an
        // executor is the collector's question, not the export's.
        let snapshot_digest = digest_of_files(&files);
        Ok(SealedCandidate {
            digest: digest.clone(),
            manifest,
            manifest_bytes,
            files,
            snapshot_digest,
        })
    }

    /// Recomputes the proposal from the base and the Candidate's files and checks that it is
    /// what the manifest records: the edits, their priors and nexts, and the proposal digest.
    fn check_edits(
        &self,
        manifest: &CandidateManifest,
        base: &SourceSnapshot,
        files: &[SourceFile],
        digest: &Digest,
    ) -> Result<(), RepositoryError> {
        let corrupt = |why: &str| RepositoryError::corrupt(format!("manifest {digest}: {why}"));
        let find =
            |list: &[SourceFile], path: &str| list.iter().find(|file| file.path == path).cloned();
        let mut edits = Vec::with_capacity(manifest.edits.len());
        for edit in &manifest.edits {
            let before = find(&base.files, &edit.path);
            let after = find(files, &edit.path);
            if before.as_ref().map(|file| &file.sha256) != edit.prior.as_ref()
                || after.as_ref().map(|file| &file.sha256) != edit.next.as_ref()
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
            edits.push(FileEdit {
                path: edit.path.clone(),
                prior: edit.prior.clone(),
                text,
            });
        }
        let proposal = Proposal { edits };
        let recomputed = validate_proposal(&proposal, &manifest.scope)
            .map_err(|error| corrupt(&error.to_string()))?;
        let protected = manifest
            .frozen()
            .protected()
            .map_err(|error| corrupt(&error.to_string()))?;
        check_protected(
            manifest.edits.iter().map(|edit| edit.path.as_str()),
            &protected,
        )
        .map_err(|error| corrupt(&error.to_string()))?;
        if recomputed != manifest.proposal_digest {
            return Err(corrupt(
                "the proposal digest does not match the recorded edits",
            ));
        }
        let applied = proposal::apply_edits(&base.files, &proposal, &self.identity.settings())
            .map_err(|error| corrupt(&error.to_string()))?;
        if applied != files {
            return Err(corrupt(
                "the Candidate files are not the base with the recorded edits applied",
            ));
        }
        let mut sorted = manifest.edits.clone();
        sorted.sort_by(|a, b| a.path.cmp(&b.path));
        if sorted != manifest.edits {
            return Err(corrupt("the recorded edits are not in path order"));
        }
        Ok(())
    }
}
