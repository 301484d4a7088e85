//! Sealing: a proposal validated whole against its base in memory, built into Candidate commit
//! M and seal commit S, written, and published under its manifest digest, create-only.
//!
//! What a seal reads and writes is in proportion to the change. It reads the base's trees on
//! the edited paths, the base's tree record on the same paths ([`sparse`](super::sparse): each
//! directory's digests, bound to its Git tree) and the edited entries' bytes; it checks the
//! resulting tree where the change can break a rule ([`resulting`](super::resulting)); it
//! writes the edited blobs, the trees on the edited paths ([tree
//! surgery](super::tree_surgery)), M, the seal's four objects and M's tree record (the nodes
//! and shadows on the edited paths), as one pack; and it reads those back before returning. A
//! base without a record (written by an older sf) is read whole once, and its record is
//! written with the seal.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::canonical::{self, Digest};
use crate::contracts::tree_digest;
use crate::contracts::{
    EncodedObject, ObjectStoreError, ObjectStoreExt, RefName, RefUpdate, RefValue,
};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity;
use super::proposal::{self, Resolved};
use super::sparse::{RecordSource, SparseTree};
use super::tree_record::{self, DirectoryRecord, RecordObjects, record_objects};
use super::tree_surgery;
use super::{
    CANDIDATE_REF_PATIENCE, CandidateManifest, CandidateProtocol, FrozenInputs, IDENT,
    MANIFEST_NAME, ManifestEdit, ManifestEntry, PROPOSAL_NAME, Proposal, Repository,
    RepositoryError, SealedCandidate, TreeContents, candidate_idents, candidate_message,
    candidate_ref, check_protected,
};

/// A change applied to a sparse base: the resulting tree's Git objects and records.
pub(super) struct Applied {
    /// The resulting root tree.
    pub tree: ObjectId,
    /// The new blobs and trees, deepest first.
    pub objects: Vec<EncodedObject>,
    /// The resulting tree's directories on the changed paths.
    pub records: BTreeMap<String, DirectoryRecord>,
}

impl Applied {
    /// The resulting tree's `sf-tree/1` digest.
    pub fn digest(&self) -> Digest {
        self.records[""].directory.digest().hash
    }
}

/// Applies `resolved` to `base` twice over, as Git trees ([tree surgery](super::tree_surgery))
/// and as digests ([`tree_digest::apply`]), and joins the two directory by directory (each
/// the other's check). The blobs of written entries the base does not hold at that path are
/// among the objects.
pub(super) fn apply_to(
    base: &SparseTree,
    resolved: &[Resolved],
) -> Result<Applied, RepositoryError> {
    let internal = |why: String| RepositoryError::corrupt(format!("applying the edits: {why}"));
    let mut blobs = Vec::new();
    let mut changes = Vec::with_capacity(resolved.len());
    let mut digest_changes = Vec::with_capacity(resolved.len());
    for edit in resolved {
        if let Some(next) = &edit.next
            && edit
                .prior
                .as_ref()
                .is_none_or(|prior| prior.blob != next.blob)
        {
            blobs.push(EncodedObject::new(ObjectKind::Blob, next.content.clone()));
        }
        changes.push((
            edit.path.clone(),
            edit.next
                .as_ref()
                .map(|next| (EntryMode::of_leaf(next.mode), next.blob)),
        ));
        digest_changes.push((
            edit.path.clone(),
            edit.next.as_ref().map(tree_record::leaf_node),
        ));
    }
    let rebuilt = tree_surgery::rebuild(&base.index, &changes);
    let digested = tree_digest::apply(&base.directories(), &digest_changes)
        .map_err(|error| internal(error.to_string()))?;
    if !digested.directories.keys().eq(rebuilt.directories.keys()) {
        return Err(internal(
            "the trees and the digests differ in their directories".into(),
        ));
    }
    let mut records = BTreeMap::new();
    for (path, directory) in digested.directories {
        let (tree, entries) = &rebuilt.directories[&path];
        let record = DirectoryRecord::join(*tree, entries, directory).map_err(internal)?;
        records.insert(path, record);
    }
    blobs.extend(rebuilt.objects);
    Ok(Applied {
        tree: rebuilt.tree,
        objects: blobs,
        records,
    })
}

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
        frozen
            .closed_paths
            .parse()?
            .check(proposal.edits.iter().map(|edit| edit.path.as_str()))?;
        // One read scope for the whole seal: the base's trees, record and edited entries,
        // the replay check and the read-back of what was written share one reader.
        let _reads = self.store.read_scope();
        let what = format!("base {}", frozen.base);
        let base_tree = self
            .factory_tree(&frozen.base)
            .map_err(|error| not_a_base(frozen, error))?;
        let paths = proposal.edits.iter().map(|edit| edit.path.as_str());
        let base = self.sparse_tree(base_tree, &tree_digest::touched(paths.clone()), &what)?;
        let current = self.leaves_at(&base, paths, &what)?;
        let resolved = proposal::resolve_edits(|path| current.get(path), proposal)?;
        let applied = apply_to(&base, &resolved)?;
        let totals = applied.records[""].directory.totals();
        let directories: BTreeMap<String, (ObjectId, Vec<TreeEntry>)> = applied
            .records
            .iter()
            .map(|(path, record)| (path.clone(), (record.tree, record.entries())))
            .collect();
        self.check_resulting(&base, &resolved, &directories, totals, &what)?;
        proposal::check_forbidden(
            resolved.iter().map(|edit| {
                (
                    edit.path.as_str(),
                    content_of(&edit.prior),
                    content_of(&edit.next),
                )
            }),
            &frozen.forbidden,
        )?;
        let protocol = CandidateProtocol::V4;
        let commit = EncodedObject::new(
            ObjectKind::Commit,
            candidate_commit(
                protocol,
                &self.identity.product_id,
                frozen,
                proposal,
                &proposal_digest,
                applied.tree,
            ),
        );
        let manifest = CandidateManifest {
            protocol,
            repository: self.identity.clone(),
            slice: frozen.slice.clone(),
            binding: frozen.binding.clone(),
            bounds: frozen.bounds,
            scope: frozen.scope.clone(),
            acceptance: frozen.acceptance.clone(),
            recipe: frozen.recipe.clone(),
            environment: frozen.environment.clone(),
            base_commit: frozen.base,
            base_tree,
            commit: commit.id,
            tree: applied.tree,
            contents: TreeContents::Trees {
                base: base.records[""].directory.digest().hash,
                candidate: applied.digest(),
            },
            proposal_digest,
            edits: edit_entries(&resolved),
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
            return self.read_by_reference(&digest);
        }
        let (seal_objects, seal_commit) =
            seal_objects(manifest_bytes.clone(), proposal_bytes.clone(), commit.id);
        let record = record_objects(&applied.records, &base.shadows).map_err(|why| {
            RepositoryError::corrupt(format!("the Candidate's tree record: {why}"))
        })?;
        let mut objects = applied.objects;
        objects.push(commit);
        objects.extend(seal_objects);
        let base_record = match &base.record {
            RecordSource::Stored | RecordSource::Unread => None,
            RecordSource::Derived {
                commit,
                objects: derived,
            } => {
                objects.extend(derived.iter().cloned());
                Some(*commit)
            }
        };
        let RecordObjects {
            commit: candidate_record,
            objects: record_objects,
            ..
        } = record;
        objects.extend(record_objects);
        // Each object once: a tree record may share a node or shadow with its base's.
        let mut seen = std::collections::HashSet::new();
        objects.retain(|object| seen.insert(object.id));
        self.store.write_objects(&objects, self.deadline())?;
        self.options.faults.reached(FaultPoint::ObjectsWritten);
        // The records first: they are derived data, true whether or not a Candidate is
        // published; the Candidate ref last, so that only a whole seal publishes one.
        if let Some(base_record) = base_record {
            self.publish_tree_record(&base_tree, base_record)?;
        }
        self.publish_tree_record(&applied.tree, candidate_record)?;
        self.create_once(&name, seal_commit, "the seal commit")?;
        self.options.faults.reached(FaultPoint::Published);
        self.confirm_written(&objects)?;
        sealed_candidate(digest, manifest_bytes, &proposal_bytes)
    }

    /// Creates ref `name` naming `value` (`what` names it in errors), converging on a
    /// concurrent identical creation; any other value is `corrupt`, an unconfirmed creation
    /// is settled by reading back.
    pub(super) fn create_once(
        &self,
        name: &RefName,
        value: ObjectId,
        what: &str,
    ) -> Result<(), RepositoryError> {
        match self.store.create_ref(name, &value, self.deadline())? {
            RefUpdate::Applied => Ok(()),
            // A concurrent identical seal published the same value first: converge on it.
            RefUpdate::Refused {
                current: Some(RefValue::Direct(current)),
            } if current == value => Ok(()),
            RefUpdate::Refused {
                current: Some(current),
            } => Err(RepositoryError::corrupt(format!(
                "{name} names {current:?}, not {what} {value}"
            ))),
            RefUpdate::Refused { current: None } => {
                self.settle_created_ref(name, value, what, "the store refused an absent ref")
            }
            RefUpdate::Unknown { reason } => self.settle_created_ref(name, value, what, &reason),
        }
    }

    /// Publishes the record commit `record` of `tree` (create-only; an identical record
    /// published already is kept).
    pub(super) fn publish_tree_record(
        &self,
        tree: &ObjectId,
        record: ObjectId,
    ) -> Result<(), RepositoryError> {
        self.create_once(
            &tree_record::tree_record_ref(tree),
            record,
            &format!("the record of tree {tree}"),
        )
    }

    /// Reads back every object a seal wrote, each re-hashed against its id: the store holds
    /// what the published ref names. The rest of the Candidate is its base, read and bound to
    /// its record in this same seal; export verifies all of it again at every later use.
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

    /// After a ref creation the store could not confirm: a concurrent identical seal may hold
    /// Git's lock on the ref and publish the same value a moment later (Git refuses the
    /// loser while the winner's lock exists). Publishing is idempotent, so this call waits,
    /// for a bounded time and reading only, until the ref names `value`; anything else is
    /// reported.
    fn settle_created_ref(
        &self,
        name: &RefName,
        value: ObjectId,
        what: &str,
        reason: &str,
    ) -> Result<(), RepositoryError> {
        let patience = Instant::now() + CANDIDATE_REF_PATIENCE.min(self.options.git_timeout);
        loop {
            match self.store.read_ref(name, self.deadline())? {
                Some(RefValue::Direct(current)) if current == value => return Ok(()),
                Some(current) => {
                    return Err(RepositoryError::corrupt(format!(
                        "{name} names {current:?}, not {what} {value}"
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

/// An entry's bytes; none for an absent entry.
fn content_of(file: &Option<super::SourceFile>) -> &[u8] {
    file.as_ref().map_or(&[], |file| file.content.as_slice())
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

/// The bytes of a version 3 or 4 Candidate commit M on tree `tree`: its parent the frozen
/// base, its author the proposal's (sf committing at the author's time), its message the
/// proposal's text and the trailers. Seal builds it and export rebuilds it to compare.
pub(super) fn candidate_commit(
    protocol: CandidateProtocol,
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
        message: candidate_message(protocol, product_id, frozen, proposal, proposal_digest),
    })
}

/// The edits as the manifest records them: each path's entry in the base and after, sorted
/// by path.
pub(super) fn edit_entries(resolved: &[Resolved]) -> Vec<ManifestEdit> {
    let mut edits: Vec<ManifestEdit> = resolved
        .iter()
        .map(|edit| ManifestEdit {
            path: edit.path.clone(),
            prior: edit.prior.as_ref().map(ManifestEntry::of),
            next: edit.next.as_ref().map(ManifestEntry::of),
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

/// The Candidate a seal returns, in exactly the form export reads back: the manifest and the
/// proposal parsed from the bytes that were written.
fn sealed_candidate(
    digest: Digest,
    manifest_bytes: Vec<u8>,
    proposal_bytes: &[u8],
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
        proposal: Some(proposal),
    })
}
