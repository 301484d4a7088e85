//! Sealing: a proposal validated whole against its base in memory, built into Candidate commit
//! M and seal commit S, written, and published under its manifest digest, create-only.
//!
//! What a seal writes is in proportion to the change: the edited blobs, the trees on the
//! edited paths ([tree surgery](super::tree_surgery)), M, and the seal's own four objects, as
//! one pack; what it reads back before returning is those objects. The base is read whole,
//! because the `sf-candidate/3` manifest digests every entry's bytes.

use std::time::{Duration, Instant};

use crate::canonical::{self, Digest};
use crate::contracts::{
    EncodedObject, ObjectStore as _, ObjectStoreError, ObjectStoreExt, RefName, RefUpdate, RefValue,
};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};
use crate::snapshot::SnapshotFile;

use super::identity;
use super::proposal;
use super::source::SourceFile;
use super::tree_surgery::{self, TreeIndex};
use super::{
    CANDIDATE_REF_PATIENCE, CandidateManifest, CandidateProtocol, FrozenInputs, IDENT,
    MANIFEST_NAME, ManifestEdit, ManifestEntry, PROPOSAL_NAME, Proposal, Repository,
    RepositoryError, SealedCandidate, TreeContents, candidate_idents, candidate_message,
    candidate_ref, check_protected, contents_digest,
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
        let proposal_bytes = proposal::validated_bytes(proposal, &frozen.scope, &frozen.bounds)?;
        let proposal_digest = Digest::of(&proposal_bytes);
        check_protected(
            proposal.edits.iter().map(|edit| edit.path.as_str()),
            &frozen.protected()?,
        )?;
        // One read scope for the whole seal: the base's levels and blobs, the replay check
        // and the read-back of what was written share one reader.
        let _reads = self.store.read_scope();
        let (base, base_trees) = self
            .indexed_snapshot(&frozen.base)
            .map_err(|error| not_a_base(frozen, error))?;
        let files = proposal::apply_edits(&base.files, proposal, &self.identity.settings())?;
        proposal::check_forbidden(
            proposal.edits.iter().map(|edit| {
                let path = edit.path.as_str();
                (
                    path,
                    proposal::content_of(&base.files, path),
                    proposal::content_of(&files, path),
                )
            }),
            &frozen.forbidden,
        )?;
        let changed = changed_objects(&base.files, proposal, &files, &base_trees);
        let commit = EncodedObject::new(
            ObjectKind::Commit,
            candidate_commit(
                &self.identity.product_id,
                frozen,
                proposal,
                &proposal_digest,
                changed.tree,
            ),
        );
        let snapshot_digest = contents_digest(&files);
        let manifest = CandidateManifest {
            protocol: CandidateProtocol::V3,
            repository: self.identity.clone(),
            slice: frozen.slice.clone(),
            binding: frozen.binding.clone(),
            bounds: frozen.bounds,
            scope: frozen.scope.clone(),
            acceptance: frozen.acceptance.clone(),
            recipe: frozen.recipe.clone(),
            environment: frozen.environment.clone(),
            base_commit: base.commit,
            base_tree: base.tree,
            commit: commit.id,
            tree: changed.tree,
            contents: TreeContents::Digest(snapshot_digest.clone()),
            proposal_digest,
            edits: edit_entries(&base.files, proposal, &files),
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
        let (seal_objects, seal_commit) =
            seal_objects(manifest_bytes.clone(), proposal_bytes.clone(), commit.id);
        let mut objects = changed.objects;
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
        self.confirm_written(&objects)?;
        sealed_candidate(
            digest,
            manifest_bytes,
            &proposal_bytes,
            files,
            snapshot_digest,
        )
    }

    /// Reads back every object a seal wrote, each re-hashed against its id: the store holds
    /// what the published ref names. The rest of the Candidate is its base, read whole and
    /// verified in this same seal; export verifies all of it again at every later use.
    fn confirm_written(&self, objects: &[EncodedObject]) -> Result<(), RepositoryError> {
        let ids: Vec<ObjectId> = objects.iter().map(|object| object.id).collect();
        let bytes: u64 = objects.iter().map(|object| object.body.len() as u64).sum();
        let read = self
            .store
            .read_verified(&ids, bytes, self.deadline())
            .map_err(|error| match error {
                ObjectStoreError::Corrupt { what } => RepositoryError::corrupt(format!(
                    "{what} while reading the sealed objects back"
                )),
                other => other.into(),
            })?;
        for (object, answer) in objects.iter().zip(read) {
            match answer {
                Some(stored) if stored.kind == object.kind => {}
                Some(_) => {
                    return Err(RepositoryError::corrupt(format!(
                        "sealed object {} reads back as another kind",
                        object.id
                    )));
                }
                None => {
                    return Err(RepositoryError::corrupt(format!(
                        "sealed object {} ({}) is missing after the write",
                        object.id,
                        object.kind.as_str()
                    )));
                }
            }
        }
        Ok(())
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

/// A base that is missing or not a factory commit is the caller's input; a corrupt one stays
/// corrupt.
fn not_a_base(frozen: &FrozenInputs, error: RepositoryError) -> RepositoryError {
    match error {
        RepositoryError::Missing { .. } | RepositoryError::InvalidInput { .. } => {
            RepositoryError::invalid(
                format!("frozen.base ({})", frozen.base),
                format!("must be a factory commit of this repository: {error}"),
            )
        }
        other => other,
    }
}

/// The bytes of an `sf-candidate/3` Candidate commit M on tree `tree`: its parent the frozen
/// base, its author the proposal's (sf committing at the author's time), its message the
/// proposal's text and the trailers. Seal builds it and export rebuilds it to compare.
pub(super) fn candidate_commit(
    product_id: &str,
    frozen: &FrozenInputs,
    proposal: &Proposal,
    proposal_digest: &Digest,
    tree: ObjectId,
) -> Vec<u8> {
    let (author, committer) = candidate_idents(proposal);
    git_object::encode_commit(&Commit {
        tree,
        parents: vec![frozen.base],
        author,
        committer,
        message: candidate_message(product_id, frozen, proposal, proposal_digest),
    })
}

/// The edits of `proposal` as the manifest records them: each path's entry in the base and
/// in the resulting `files` (both sorted by path), sorted by path.
pub(super) fn edit_entries(
    base: &[SourceFile],
    proposal: &Proposal,
    files: &[SourceFile],
) -> Vec<ManifestEdit> {
    let entry = |list: &[SourceFile], path: &str| {
        list.binary_search_by(|file| file.path.as_str().cmp(path))
            .ok()
            .map(|at| ManifestEntry::of(&list[at]))
    };
    let mut edits: Vec<ManifestEdit> = proposal
        .edits
        .iter()
        .map(|edit| ManifestEdit {
            path: edit.path.clone(),
            prior: entry(base, &edit.path),
            next: entry(files, &edit.path),
        })
        .collect();
    edits.sort_by(|a, b| a.path.cmp(&b.path));
    edits
}

/// The seal tree and seal commit S for a manifest (and, from `sf-candidate/3` on, the
/// proposal's canonical bytes), and S's id.
fn seal_objects(
    manifest_bytes: Vec<u8>,
    proposal_bytes: Vec<u8>,
    candidate_commit: ObjectId,
) -> (Vec<EncodedObject>, ObjectId) {
    let manifest = EncodedObject::new(ObjectKind::Blob, manifest_bytes);
    let proposal = EncodedObject::new(ObjectKind::Blob, proposal_bytes);
    let tree = EncodedObject::new(
        ObjectKind::Tree,
        git_object::encode_tree(&[
            TreeEntry {
                mode: EntryMode::File,
                name: MANIFEST_NAME.into(),
                id: manifest.id,
            },
            TreeEntry {
                mode: EntryMode::File,
                name: PROPOSAL_NAME.into(),
                id: proposal.id,
            },
        ]),
    );
    let commit = EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit::by(
            tree.id,
            vec![candidate_commit],
            IDENT,
            identity::seal_message(),
        )),
    );
    let id = commit.id;
    (vec![manifest, proposal, tree, commit], id)
}

/// The Candidate tree's id and the objects a seal writes for it: the blobs of the edited
/// entries that the base does not hold at that path, and the trees above them ([tree
/// surgery](super::tree_surgery): every untouched subtree keeps its id).
fn changed_objects(
    base: &[SourceFile],
    proposal: &Proposal,
    files: &[SourceFile],
    base_trees: &TreeIndex,
) -> tree_surgery::Rebuilt {
    let find = |list: &'_ [SourceFile], path: &str| {
        list.binary_search_by(|file| file.path.as_str().cmp(path))
            .ok()
            .map(|at| list[at].clone())
    };
    let mut blobs = Vec::new();
    let mut changes = Vec::with_capacity(proposal.edits.len());
    for edit in &proposal.edits {
        let next = find(files, &edit.path);
        if let Some(file) = &next
            && find(base, &edit.path).is_none_or(|prior| prior.blob != file.blob)
        {
            blobs.push(EncodedObject::new(ObjectKind::Blob, file.content.clone()));
        }
        changes.push((
            edit.path.clone(),
            next.map(|file| (EntryMode::of_leaf(file.mode), file.blob)),
        ));
    }
    let mut rebuilt = tree_surgery::rebuild(base_trees, &changes);
    blobs.append(&mut rebuilt.objects);
    rebuilt.objects = blobs;
    rebuilt
}

/// The Candidate a seal returns, in exactly the form export reads back: the manifest and the
/// proposal parsed from the bytes that were written, M's files as built.
fn sealed_candidate(
    digest: Digest,
    manifest_bytes: Vec<u8>,
    proposal_bytes: &[u8],
    files: Vec<SourceFile>,
    snapshot_digest: Digest,
) -> Result<SealedCandidate, RepositoryError> {
    let corrupt = |why: String| RepositoryError::corrupt(format!("manifest {digest}: {why}"));
    let value =
        canonical::parse_canonical(&manifest_bytes).map_err(|error| corrupt(error.to_string()))?;
    let manifest = CandidateManifest::from_value(&value)
        .map_err(|error| corrupt(format!("{}: {}", error.field, error.rule)))?;
    let proposal = proposal::parse_proposal(proposal_bytes)
        .map_err(|error| corrupt(format!("{PROPOSAL_NAME}: {error}")))?;
    Ok(SealedCandidate {
        digest,
        manifest,
        manifest_bytes,
        files: files
            .into_iter()
            .map(|file| SnapshotFile::new(file.path, file.mode, file.content))
            .collect(),
        snapshot_digest,
        proposal: Some(proposal),
    })
}
