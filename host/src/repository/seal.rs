//! Sealing: a proposal validated whole against its base in memory, built into Candidate commit
//! M and seal commit S, written, and published under its manifest digest, create-only.

use std::time::{Duration, Instant};

use crate::canonical::Digest;
use crate::contracts::{EncodedObject, RefName, RefUpdate, RefValue};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity;
use super::proposal;
use super::source;
use super::{
    CANDIDATE_REF_PATIENCE, CandidateManifest, FrozenInputs, IDENT, MANIFEST_NAME, ManifestEdit,
    ManifestFile, Proposal, Repository, RepositoryError, SealedCandidate, candidate_message,
    candidate_ref, check_protected, validate_proposal,
};

impl Repository {
    /// Seals `proposal` against `frozen` as a Candidate and returns it. The whole proposal is
    /// validated against the base in memory before anything is written; identical inputs
    /// return the same Candidate and write nothing; concurrent identical seals converge on one
    /// ref. The base need not be the current target, only a factory commit.
    pub fn seal(
        &self,
        frozen: &FrozenInputs,
        proposal: &Proposal,
    ) -> Result<SealedCandidate, RepositoryError> {
        frozen.validate()?;
        if frozen.binding.is_none() {
            return Err(RepositoryError::invalid(
                "frozen.binding",
                "a Candidate is sealed for a frozen Slice: its digest and protected paths are \
                 required",
            ));
        }
        let proposal_digest = validate_proposal(proposal, &frozen.scope)?;
        check_protected(
            proposal.edits.iter().map(|edit| edit.path.as_str()),
            &frozen.protected()?,
        )?;
        let base = self.snapshot(&frozen.base).map_err(|error| match error {
            RepositoryError::Missing { .. } | RepositoryError::InvalidInput { .. } => {
                RepositoryError::invalid(
                    format!("frozen.base ({})", frozen.base),
                    format!("must be a factory commit of this repository: {error}"),
                )
            }
            other => other,
        })?;
        let files = proposal::apply_edits(&base.files, proposal, &self.identity.settings())?;
        let built = source::build_tree(&files);
        let commit = EncodedObject::new(
            ObjectKind::Commit,
            git_object::encode_commit(&Commit {
                tree: built.tree,
                parents: vec![frozen.base],
                ident: IDENT.to_owned(),
                message: candidate_message(&self.identity.product_id, frozen, &proposal_digest),
            }),
        );
        let mut edits: Vec<ManifestEdit> = proposal
            .edits
            .iter()
            .map(|edit| ManifestEdit {
                path: edit.path.clone(),
                prior: edit.prior.clone(),
                next: edit.text.as_ref().map(|text| Digest::of(text.as_bytes())),
            })
            .collect();
        edits.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = CandidateManifest {
            repository: self.identity.clone(),
            slice: frozen.slice.clone(),
            binding: frozen.binding.clone(),
            scope: frozen.scope.clone(),
            acceptance: frozen.acceptance.clone(),
            recipe: frozen.recipe.clone(),
            environment: frozen.environment.clone(),
            base_commit: base.commit,
            base_tree: base.tree,
            commit: commit.id,
            tree: built.tree,
            files: ManifestFile::listing(&files).map_err(|why| {
                RepositoryError::rejected(
                    super::Rejection::UnsupportedEntry,
                    "resulting source",
                    why,
                )
            })?,
            proposal_digest,
            edits,
        };
        let manifest_bytes = manifest.to_bytes().map_err(|error| {
            RepositoryError::invalid(
                "proposal",
                format!("the Candidate manifest must fit the 1 MiB bound: {error}"),
            )
        })?;
        let digest = Digest::of(&manifest_bytes);
        let name = candidate_ref(&digest);
        if self.store.read_ref(&name, self.deadline())?.is_some() {
            // A replay: verify what is published and write nothing.
            return self.export_candidate(&digest);
        }
        let (seal_objects, seal_commit) = seal_objects(manifest_bytes, commit.id);
        let mut objects = built.objects;
        objects.push(commit);
        objects.extend(seal_objects);
        self.store.write_objects(&objects, self.deadline())?;
        self.options.faults.reached(FaultPoint::ObjectsWritten);
        let published = match self
            .store
            .create_ref(&name, &seal_commit, self.deadline())?
        {
            RefUpdate::Applied => Ok(()),
            // A concurrent identical seal published the same S first: converge on it.
            RefUpdate::Refused {
                current: Some(RefValue::Direct(current)),
            } if current == seal_commit => Ok(()),
            RefUpdate::Refused {
                current: Some(current),
            } => Err(RepositoryError::corrupt(format!(
                "{name} names {current:?}, not the seal commit {seal_commit}"
            ))),
            RefUpdate::Refused { current: None } => {
                self.settle_candidate_ref(&name, seal_commit, "the store refused an absent ref")
            }
            RefUpdate::Unknown { reason } => self.settle_candidate_ref(&name, seal_commit, &reason),
        };
        published?;
        self.options.faults.reached(FaultPoint::Published);
        self.export_candidate(&digest)
    }

    /// After a Candidate ref creation the store could not confirm: a concurrent identical seal
    /// may hold Git's lock on the ref and publish the same S a moment later (Git refuses the
    /// loser while the winner's lock exists). Publishing is idempotent, so this call waits, for
    /// a bounded time and reading only, until the ref names S; anything else is reported.
    fn settle_candidate_ref(
        &self,
        name: &RefName,
        seal_commit: ObjectId,
        reason: &str,
    ) -> Result<(), RepositoryError> {
        let patience = Instant::now() + CANDIDATE_REF_PATIENCE.min(self.options.git_timeout);
        loop {
            match self.store.read_ref(name, self.deadline())? {
                Some(RefValue::Direct(current)) if current == seal_commit => return Ok(()),
                Some(current) => {
                    return Err(RepositoryError::corrupt(format!(
                        "{name} names {current:?}, not the seal commit {seal_commit}"
                    )));
                }
                None if Instant::now() < patience => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                None => {
                    return Err(RepositoryError::GitFailed {
                        detail: format!("publishing {name}: {reason}"),
                    });
                }
            }
        }
    }
}

/// The manifest blob, seal tree and seal commit S for a manifest, and S's id.
fn seal_objects(
    manifest_bytes: Vec<u8>,
    candidate_commit: ObjectId,
) -> (Vec<EncodedObject>, ObjectId) {
    let blob = EncodedObject::new(ObjectKind::Blob, manifest_bytes);
    let tree = EncodedObject::new(
        ObjectKind::Tree,
        git_object::encode_tree(&[TreeEntry {
            mode: EntryMode::File,
            name: MANIFEST_NAME.into(),
            id: blob.id,
        }]),
    );
    let commit = EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit {
            tree: tree.id,
            parents: vec![candidate_commit],
            ident: IDENT.to_owned(),
            message: identity::seal_message(),
        }),
    );
    let id = commit.id;
    (vec![blob, tree, commit], id)
}
