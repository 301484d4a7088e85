//! Export: a published Candidate re-verified from its ref down to every blob. Nothing is ever
//! repaired, and nothing but the Candidate's own objects is relied on (no tree record).
//!
//! The Candidate's tree is read whole and streamed (a bounded batch of blobs at a time, each
//! re-hashed and dropped), so an export holds its listing and its digests, never its bytes.
//! Its base is read along the edited paths only: M's tree must be exactly the base's with the
//! recorded edits applied (rebuilt by tree surgery and compared by id), and every other
//! object of the base is one of M's, verified in the walk.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::ops::ControlFlow;

use crate::canonical::{self, Digest};
use crate::contracts::tree_digest::{self, Directory};
use crate::contracts::{ObjectStoreExt as _, RefValue};
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity;
use super::proposal::{self, Resolved};
use super::seal;
use super::source::{self, SourceFile, WalkedLeaf};
use super::sparse::SparseTree;
use super::tree_record;
use super::tree_surgery;
use super::{
    CandidateManifest, FileEdit, FrozenInputs, IDENT, MANIFEST_NAME, MAX_CANDIDATE_COMMIT_BYTES,
    MAX_COMMIT_BYTES, MAX_PROPOSAL_DOCUMENT_BYTES, ManifestEntry, ManifestFile, PROPOSAL_NAME,
    Proposal, Repository, RepositoryError, SealedCandidate, TreeContents, candidate_ref,
    check_protected, legacy_candidate_message, validate_proposal,
};

/// What the walk of a Candidate's tree establishes.
struct VerifiedTree {
    /// Every leaf, sorted by path, without its bytes.
    leaves: Vec<WalkedLeaf>,
    /// The bytes of the leaves at the edited paths (for a version 1 or 2 Candidate, whose
    /// proposal is recovered from them).
    edited: BTreeMap<String, Vec<u8>>,
    /// The snapshot digest of every entry, for a version 3 manifest (which names it).
    snapshot: Option<Digest>,
}

/// A Candidate's seal commit, read and found in sf's seal form.
pub(super) struct SealCommit {
    id: ObjectId,
    /// Its one parent, which must be M.
    parent: ObjectId,
    tree: ObjectId,
    /// The entries of its tree: the manifest, and the proposal where the protocol keeps it.
    entries: Vec<TreeEntry>,
}

impl SealCommit {
    /// The blob the seal tree holds as a plain file under `name`.
    fn blob_named(&self, name: &str) -> Option<ObjectId> {
        self.entries
            .iter()
            .find(|entry| entry.mode == EntryMode::File && entry.name == name)
            .map(|entry| entry.id)
    }

    fn not_sealed(&self) -> RepositoryError {
        RepositoryError::corrupt(format!(
            "seal tree {} is not {{{MANIFEST_NAME}}} or {{{MANIFEST_NAME}, {PROPOSAL_NAME}}}",
            self.tree
        ))
    }
}

/// A manifest (of Candidate `digest`) found corrupt, and why.
pub(super) fn corrupt_manifest(digest: &Digest, why: impl std::fmt::Display) -> RepositoryError {
    RepositoryError::corrupt(format!("manifest {digest}: {why}"))
}

impl Repository {
    /// Exports the Candidate `digest` names, re-verifying everything: the seal commit, the
    /// manifest's canonical bytes and repository, M rebuilt byte for byte, every tree and
    /// blob of M's tree re-hashed and checked against the tree rules and the manifest's
    /// digests, the edits and proposal digest recomputed, and the base a factory commit with
    /// the recorded tree, of which M's tree is exactly the edited version. Corruption is
    /// reported, never repaired.
    pub fn export_candidate(&self, digest: &Digest) -> Result<SealedCandidate, RepositoryError> {
        // One reader for the export; no cache, so that the bytes of a large tree pass
        // through it once and are dropped.
        let _reads = self.store.read_scope();
        let seal = self.read_seal(digest)?;
        let (manifest, manifest_bytes) = self.read_manifest(digest, &seal)?;
        self.check_seal_matches(digest, &seal, &manifest)?;
        let frozen = manifest.frozen();
        frozen
            .validate()
            .map_err(|error| corrupt_manifest(digest, error))?;
        let proposal = self.read_sealed_proposal(digest, &seal, &manifest)?;
        self.check_candidate_commit(&manifest, &frozen, proposal.as_ref())?;
        // Every tree and blob of M, re-hashed and checked, against what the manifest names.
        let edited: BTreeSet<&str> = manifest
            .edits
            .iter()
            .map(|edit| edit.path.as_str())
            .collect();
        let tree = self.verify_tree(&manifest, &edited)?;
        let directories = check_contents(&manifest, &tree).map_err(|why| {
            RepositoryError::corrupt(format!("Candidate tree {}: {why}", manifest.tree))
        })?;
        let (base, current) = self.read_base_at_edits(digest, &manifest, &edited)?;
        let recovered;
        let applied_proposal = match &proposal {
            Some(proposal) => proposal,
            None => {
                recovered = recover_proposal(&manifest, &current, &tree.edited, digest)?;
                &recovered
            }
        };
        let resolved = check_edits(&manifest, &current, applied_proposal, digest)?;
        check_edits_applied(digest, &manifest, &base, &resolved)?;
        check_base_digest(digest, &manifest, &directories, &resolved)?;
        Ok(SealedCandidate {
            digest: digest.clone(),
            manifest,
            manifest_bytes,
            proposal,
        })
    }

    /// The seal commit the Candidate's ref points at, which must be in sf's seal form (by
    /// sf, with one parent and the seal message), and its tree's entries.
    pub(super) fn read_seal(&self, digest: &Digest) -> Result<SealCommit, RepositoryError> {
        let name = candidate_ref(digest);
        let id = match self.store.read_ref(&name, self.deadline())? {
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
        let body = self.read_one(id, ObjectKind::Commit, MAX_COMMIT_BYTES, "seal commit")?;
        let seal = git_object::decode_commit(&body)
            .filter(|seal| {
                seal.is_by(IDENT)
                    && seal.parents.len() == 1
                    && seal.message == identity::seal_message()
            })
            .ok_or_else(|| {
                RepositoryError::corrupt(format!("seal commit {id} is not in sf's seal form"))
            })?;
        let tree = self.read_one(seal.tree, ObjectKind::Tree, MAX_COMMIT_BYTES, "seal tree")?;
        Ok(SealCommit {
            id,
            parent: seal.parents[0],
            tree: seal.tree,
            entries: git_object::decode_tree(&tree).unwrap_or_default(),
        })
    }

    /// The manifest the seal tree holds: bytes that hash to `digest` (so nothing but the
    /// sealed manifest can stand in for it), canonical, and a manifest.
    pub(super) fn read_manifest(
        &self,
        digest: &Digest,
        seal: &SealCommit,
    ) -> Result<(CandidateManifest, Vec<u8>), RepositoryError> {
        let blob = seal
            .blob_named(MANIFEST_NAME)
            .ok_or_else(|| seal.not_sealed())?;
        let bytes = self.read_one(
            blob,
            ObjectKind::Blob,
            canonical::MAX_BYTES as u64,
            "manifest",
        )?;
        if Digest::of(&bytes) != *digest {
            return Err(RepositoryError::corrupt(format!(
                "the manifest under {} does not hash to {digest}",
                candidate_ref(digest)
            )));
        }
        let value =
            canonical::parse_canonical(&bytes).map_err(|error| corrupt_manifest(digest, error))?;
        let manifest = CandidateManifest::from_value(&value).map_err(|error| {
            corrupt_manifest(digest, format!("{}: {}", error.field, error.rule))
        })?;
        Ok((manifest, bytes))
    }

    /// Checks the seal against its manifest: the seal tree holds exactly what the manifest's
    /// protocol says, the manifest is this repository's, and the seal commit is M's child.
    pub(super) fn check_seal_matches(
        &self,
        digest: &Digest,
        seal: &SealCommit,
        manifest: &CandidateManifest,
    ) -> Result<(), RepositoryError> {
        let holds_proposal = manifest.protocol.holds_proposal();
        let expected_entries = if holds_proposal { 2 } else { 1 };
        if seal.entries.len() != expected_entries
            || seal.blob_named(PROPOSAL_NAME).is_some() != holds_proposal
        {
            return Err(seal.not_sealed());
        }
        if manifest.repository != self.identity {
            return Err(RepositoryError::corrupt(format!(
                "manifest {digest} belongs to another repository ({} at {})",
                manifest.repository.product_id, manifest.repository.path
            )));
        }
        if seal.parent != manifest.commit {
            return Err(RepositoryError::corrupt(format!(
                "seal commit {} is not the child of M {}",
                seal.id, manifest.commit
            )));
        }
        Ok(())
    }

    /// The proposal the seal commit holds (`None` where the protocol keeps none), whose
    /// digest the manifest and M name: bytes that hash to that digest, and a valid proposal
    /// whose canonical encoding they are.
    pub(super) fn read_sealed_proposal(
        &self,
        digest: &Digest,
        seal: &SealCommit,
        manifest: &CandidateManifest,
    ) -> Result<Option<Proposal>, RepositoryError> {
        let Some(blob) = seal.blob_named(PROPOSAL_NAME) else {
            return Ok(None);
        };
        let bytes = self.read_one(
            blob,
            ObjectKind::Blob,
            MAX_PROPOSAL_DOCUMENT_BYTES as u64,
            "proposal",
        )?;
        if Digest::of(&bytes) != manifest.proposal_digest {
            return Err(corrupt_manifest(
                digest,
                format!("the {PROPOSAL_NAME} beside it does not hash to the proposal digest"),
            ));
        }
        let proposal = proposal::parse_proposal(&bytes)
            .map_err(|error| corrupt_manifest(digest, format!("{PROPOSAL_NAME}: {error}")))?;
        // Validation re-encodes: the digest matches only for canonical bytes.
        let recomputed = validate_proposal(&proposal, &manifest.scope, &manifest.bounds)
            .map_err(|error| corrupt_manifest(digest, format!("{PROPOSAL_NAME}: {error}")))?;
        if recomputed != manifest.proposal_digest {
            return Err(corrupt_manifest(
                digest,
                format!("{PROPOSAL_NAME} is not canonical"),
            ));
        }
        Ok(Some(proposal))
    }

    /// Checks M byte for byte against the commit rebuilt from the manifest (and the sealed
    /// proposal, where there is one), so that nothing in M is not what the manifest says.
    pub(super) fn check_candidate_commit(
        &self,
        manifest: &CandidateManifest,
        frozen: &FrozenInputs,
        proposal: Option<&Proposal>,
    ) -> Result<(), RepositoryError> {
        let body = self.read_one(
            manifest.commit,
            ObjectKind::Commit,
            MAX_CANDIDATE_COMMIT_BYTES,
            "Candidate commit",
        )?;
        let expected = match proposal {
            Some(proposal) => seal::candidate_commit(
                manifest.protocol,
                &self.identity.product_id,
                frozen,
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
                    frozen,
                    &manifest.proposal_digest,
                ),
            )),
        };
        if body != expected {
            return Err(RepositoryError::corrupt(format!(
                "Candidate commit {} does not match its manifest",
                manifest.commit
            )));
        }
        Ok(())
    }

    /// The Candidate's base is a factory commit with the recorded tree.
    pub(super) fn check_factory_base(
        &self,
        digest: &Digest,
        manifest: &CandidateManifest,
    ) -> Result<(), RepositoryError> {
        let base_tree = self.factory_tree(&manifest.base_commit).map_err(|error| {
            RepositoryError::corrupt(format!(
                "base {} of Candidate {digest} is not a factory commit: {error}",
                manifest.base_commit
            ))
        })?;
        if base_tree != manifest.base_tree {
            return Err(RepositoryError::corrupt(format!(
                "base {} does not have the recorded tree",
                manifest.base_commit
            )));
        }
        Ok(())
    }

    /// The base along the edited paths, and its leaves at them. The base must be a factory
    /// commit with the recorded tree; only the directories the edits touch are read (from
    /// its Git trees alone), since every other object of it is one of M's, verified in the
    /// walk.
    fn read_base_at_edits(
        &self,
        digest: &Digest,
        manifest: &CandidateManifest,
        edited: &BTreeSet<&str>,
    ) -> Result<(SparseTree, BTreeMap<String, SourceFile>), RepositoryError> {
        self.check_factory_base(digest, manifest)?;
        let what = format!("base {}", manifest.base_commit);
        let base = self.git_sparse(
            manifest.base_tree,
            &tree_digest::touched(edited.iter().copied()),
            &what,
        )?;
        let current = self.leaves_at(&base, edited.iter().copied(), &what)?;
        Ok((base, current))
    }

    /// The files of Candidate `sealed` (its tree M, read whole within the repository's
    /// limits, every object re-hashed), as snapshot entries.
    pub fn candidate_files(
        &self,
        sealed: &SealedCandidate,
    ) -> Result<Vec<crate::snapshot::SnapshotFile>, RepositoryError> {
        Ok(self
            .snapshot(&sealed.manifest.commit)?
            .files
            .into_iter()
            .map(|file| crate::snapshot::SnapshotFile::new(file.path, file.mode, file.content))
            .collect())
    }

    /// Walks M's tree whole, streaming ([`source::stream_tree`]): every object re-hashed and
    /// every rule checked, the snapshot digest of its entries taken on the way (what a
    /// version 3 manifest names), and the bytes of the `edited` paths kept.
    fn verify_tree(
        &self,
        manifest: &CandidateManifest,
        edited: &BTreeSet<&str>,
    ) -> Result<VerifiedTree, RepositoryError> {
        let mut snapshot = matches!(manifest.contents, TreeContents::Digest(_))
            .then(crate::snapshot::SnapshotHasher::new);
        let mut kept = BTreeMap::new();
        let ControlFlow::Continue(walked) = source::stream_tree(
            self.store.as_ref(),
            manifest.tree,
            &self.identity.settings(),
            "Candidate tree",
            self.deadline(),
            |leaf, bytes| {
                if let Some(snapshot) = &mut snapshot {
                    snapshot.add(&leaf.path, leaf.mode, bytes);
                }
                if edited.contains(leaf.path.as_str()) {
                    kept.insert(leaf.path.clone(), bytes.to_vec());
                }
                ControlFlow::<Infallible>::Continue(())
            },
        )?;
        Ok(VerifiedTree {
            leaves: walked.leaves,
            edited: kept,
            snapshot: snapshot.and_then(crate::snapshot::SnapshotHasher::finish),
        })
    }
}

/// Checks that M's tree is exactly the base's with the `resolved` edits applied: rebuilt by
/// tree surgery from the base's directories along the edits, and compared by id.
fn check_edits_applied(
    digest: &Digest,
    manifest: &CandidateManifest,
    base: &SparseTree,
    resolved: &[Resolved],
) -> Result<(), RepositoryError> {
    let changes: Vec<_> = resolved
        .iter()
        .map(|edit| {
            (
                edit.path.clone(),
                edit.next
                    .as_ref()
                    .map(|next| (EntryMode::of_leaf(next.mode), next.blob)),
            )
        })
        .collect();
    if tree_surgery::rebuild(&base.index, &changes).tree != manifest.tree {
        return Err(corrupt_manifest(
            digest,
            "the Candidate files are not the base with the recorded edits applied",
        ));
    }
    Ok(())
}

/// For a manifest that names the base's tree digest: checks it against the digest of M's
/// verified directories with the `resolved` edits undone, so that the base is never hashed
/// whole.
fn check_base_digest(
    digest: &Digest,
    manifest: &CandidateManifest,
    directories: &BTreeMap<String, Directory>,
    resolved: &[Resolved],
) -> Result<(), RepositoryError> {
    let TreeContents::Trees { base: named, .. } = &manifest.contents else {
        return Ok(());
    };
    let undone: Vec<_> = resolved
        .iter()
        .map(|edit| {
            (
                edit.path.clone(),
                edit.prior.as_ref().map(tree_record::leaf_node),
            )
        })
        .collect();
    let base_digest = tree_digest::apply(directories, &undone)
        .map_err(|error| corrupt_manifest(digest, error))?
        .root
        .hash;
    if base_digest != *named {
        return Err(corrupt_manifest(
            digest,
            format!("the base's tree does not have the recorded digest {named}"),
        ));
    }
    Ok(())
}

/// Checks M's walked tree against what the manifest names beyond the tree id: the listing
/// (versions 1 and 2), the content digest (version 3) or the tree digest (version 4).
/// Returns M's `sf-tree/1` directories.
fn check_contents(
    manifest: &CandidateManifest,
    tree: &VerifiedTree,
) -> Result<BTreeMap<String, Directory>, String> {
    let files: Vec<SourceFile> = tree.leaves.iter().map(WalkedLeaf::source_file).collect();
    let digested = tree_digest::build(
        files
            .iter()
            .map(|file| (file.path.as_str(), tree_record::leaf_node(file))),
    )
    .map_err(|error| error.to_string())?;
    match &manifest.contents {
        TreeContents::Files(listed) => {
            if ManifestFile::listing(&files)? != *listed {
                return Err("the files are not the ones the manifest lists".into());
            }
        }
        TreeContents::Digest(named) => {
            if tree.snapshot.as_ref() != Some(named) {
                return Err(format!(
                    "the entries do not have the content digest {named}"
                ));
            }
        }
        TreeContents::Trees { candidate, .. } => {
            if digested.root.hash != *candidate {
                return Err(format!(
                    "the entries do not have the tree digest {candidate}"
                ));
            }
        }
    }
    Ok(digested.directories)
}

/// The proposal of an `sf-candidate/1` or `/2` Candidate, whose seal commit holds only the
/// manifest: the edits' texts read from the Candidate's files, checked against the recorded
/// digests and the proposal digest.
fn recover_proposal(
    manifest: &CandidateManifest,
    base: &BTreeMap<String, SourceFile>,
    after: &BTreeMap<String, Vec<u8>>,
    digest: &Digest,
) -> Result<Proposal, RepositoryError> {
    let mut edits = Vec::with_capacity(manifest.edits.len());
    for edit in &manifest.edits {
        let digest_of = |entry: &Option<ManifestEntry>| entry.as_ref().map(|e| e.sha256.clone());
        let after = after.get(&edit.path);
        if base.get(&edit.path).map(|file| file.sha256.clone()) != digest_of(&edit.prior)
            || after.map(|bytes| Digest::of(bytes)) != digest_of(&edit.next)
        {
            return Err(corrupt_manifest(
                digest,
                format!(
                    "edit of {} does not match the base and Candidate files",
                    edit.path
                ),
            ));
        }
        let text = after
            .map(|bytes| String::from_utf8(bytes.clone()))
            .transpose()
            .map_err(|_| {
                corrupt_manifest(digest, format!("the edited {} is not text", edit.path))
            })?;
        edits.push(FileEdit::text(
            edit.path.clone(),
            digest_of(&edit.prior),
            text,
        ));
    }
    let proposal = Proposal::new(edits);
    let recomputed = validate_proposal(&proposal, &manifest.scope, &manifest.bounds)
        .map_err(|error| corrupt_manifest(digest, error))?;
    if recomputed != manifest.proposal_digest {
        return Err(corrupt_manifest(
            digest,
            "the proposal digest does not match the recorded edits",
        ));
    }
    Ok(proposal)
}

/// Resolves `proposal` against the base's entries at the edited paths (`current`), checking
/// that no edit touches a protected path and that the manifest records exactly these edits,
/// in path order.
pub(super) fn check_edits(
    manifest: &CandidateManifest,
    current: &BTreeMap<String, SourceFile>,
    proposal: &Proposal,
    digest: &Digest,
) -> Result<Vec<Resolved>, RepositoryError> {
    let protected = manifest
        .frozen()
        .protected()
        .map_err(|error| corrupt_manifest(digest, error))?;
    check_protected(
        proposal.edits.iter().map(|edit| edit.path.as_str()),
        &protected,
    )
    .map_err(|error| corrupt_manifest(digest, error))?;
    let resolved = proposal::resolve_edits(|path| current.get(path), proposal)
        .map_err(|error| corrupt_manifest(digest, error))?;
    if seal::edit_entries(&resolved) != manifest.edits {
        return Err(corrupt_manifest(
            digest,
            "the recorded edits are not the proposal's, entry for entry and in path order",
        ));
    }
    Ok(resolved)
}
