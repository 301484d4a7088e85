//! A Candidate read for a collection by reference: everything [export](super::export) checks
//! of its seal (the seal commit, the manifest's canonical bytes, the sealed proposal, M
//! rebuilt byte for byte, the edits recomputed from the base), but, instead of walking M's
//! whole tree, a Merkle path proof: the base's `sf-tree/1` directories along the edited paths
//! (from its tree record, each bound to its Git tree) must hash up to the base digest the
//! manifest names, and with the edits applied (their blobs read and re-hashed) to the
//! Candidate's, as a seal computes them; and M's own entries at the edited paths, read from
//! its Git trees and re-hashed, must be what the edits make. The cost is that of the change,
//! whatever the size of the tree.
//!
//! What this proves, and why it is enough for a collection: the base digest is the name of
//! the tree the collection runs (the tree store publishes a tree under a digest only when
//! the bytes it read give that digest, and checks its stamps at every use), so sibling
//! digests that hash up to it are the digests of what runs; the edited entries run from the
//! bytes read here. A record that lies about a sibling, a base object corrupted after the
//! materialisation, or a manifest naming another digest breaks the chain and is `corrupt`.
//! [`Repository::export_candidate`] keeps the whole re-verification for `sf export`.

use std::collections::{BTreeMap, BTreeSet};

use crate::canonical::Digest;
use crate::contracts::ObjectStoreExt as _;
use crate::contracts::tree_digest;
use crate::git_object::{ObjectId, TreeEntry};

use super::export::{check_edits, corrupt_manifest};
use super::proposal::Resolved;
use super::seal::apply_to;
use super::tree_record;
use super::{CandidateManifest, Repository, RepositoryError, SealedCandidate, TreeContents};

impl Repository {
    /// Reads Candidate `digest` for a collection by reference (module documentation). A
    /// Candidate whose manifest names no tree digests (before `sf-candidate/4`) is run by
    /// value, from its files: it is exported whole.
    pub fn read_by_reference(&self, digest: &Digest) -> Result<SealedCandidate, RepositoryError> {
        let _reads = self.store.read_scope();
        let seal = self.read_seal(digest)?;
        let (manifest, manifest_bytes) = self.read_manifest(digest, &seal)?;
        let TreeContents::Trees {
            base: base_digest,
            candidate: candidate_digest,
        } = &manifest.contents
        else {
            return self.export_candidate(digest);
        };
        self.check_seal_matches(digest, &seal, &manifest)?;
        let frozen = manifest.frozen();
        frozen
            .validate()
            .map_err(|error| corrupt_manifest(digest, error))?;
        let proposal = self
            .read_sealed_proposal(digest, &seal, &manifest)?
            .ok_or_else(|| corrupt_manifest(digest, "holds no proposal beside it"))?;
        self.check_candidate_commit(&manifest, &frozen, Some(&proposal))?;
        self.check_factory_base(digest, &manifest)?;
        let edited: BTreeSet<&str> = manifest.edits.iter().map(|e| e.path.as_str()).collect();
        let what = format!("base {}", manifest.base_commit);
        let touched = tree_digest::touched(edited.iter().copied());
        let base = self.sparse_tree(manifest.base_tree, &touched, &what)?;
        let current = self.leaves_at(&base, edited.iter().copied(), &what)?;
        let resolved = check_edits(&manifest, &current, &proposal, digest)?;
        // The base's directories along the edited paths, recomputed bottom up from the
        // record's nodes with the base's own leaves at those paths: the sibling digests
        // they hold must hash up to the base digest.
        let priors: Vec<_> = resolved
            .iter()
            .map(|edit| {
                (
                    edit.path.clone(),
                    edit.prior.as_ref().map(tree_record::leaf_node),
                )
            })
            .collect();
        let recorded = tree_digest::apply(&base.directories(), &priors)
            .map_err(|error| corrupt_manifest(digest, error))?
            .root
            .hash;
        if recorded != *base_digest {
            return Err(corrupt_manifest(
                digest,
                format!(
                    "the base's tree record gives {recorded} along the edited paths, not the \
                     recorded digest {base_digest}"
                ),
            ));
        }
        let applied = apply_to(&base, &resolved)?;
        if applied.tree != manifest.tree {
            return Err(corrupt_manifest(
                digest,
                "the Candidate files are not the base with the recorded edits applied",
            ));
        }
        if applied.digest() != *candidate_digest {
            return Err(corrupt_manifest(
                digest,
                format!(
                    "the base with the recorded edits applied gives {}, not the recorded \
                     Candidate digest {candidate_digest}",
                    applied.digest()
                ),
            ));
        }
        let directories: BTreeMap<String, (ObjectId, Vec<TreeEntry>)> = applied
            .records
            .iter()
            .map(|(path, record)| (path.clone(), (record.tree, record.entries())))
            .collect();
        let totals = applied.records[""].directory.totals();
        self.check_resulting(&base, &resolved, &directories, totals, &what)?;
        self.check_stored_edits(digest, &manifest, &touched, &resolved)?;
        Ok(SealedCandidate {
            digest: digest.clone(),
            manifest,
            manifest_bytes,
            proposal: Some(proposal),
        })
    }

    /// M's own entries at the edited paths, read from its Git trees and re-hashed, must be
    /// the edits' results: the edits were recomputed from the proposal, so without this a
    /// stored blob replaced or lost after the seal would go unseen until something read it
    /// (a replayed seal would adopt it).
    fn check_stored_edits(
        &self,
        digest: &Digest,
        manifest: &CandidateManifest,
        touched: &BTreeSet<String>,
        resolved: &[Resolved],
    ) -> Result<(), RepositoryError> {
        let what = format!("Candidate {digest}");
        let candidate = self.git_sparse(manifest.tree, touched, &what)?;
        let stored = self.leaves_at(
            &candidate,
            resolved.iter().map(|edit| edit.path.as_str()),
            &what,
        )?;
        for edit in resolved {
            let found = stored.get(&edit.path).map(|file| (file.mode, file.blob));
            if found != edit.next.as_ref().map(|file| (file.mode, file.blob)) {
                return Err(corrupt_manifest(
                    digest,
                    format!("M's entry at {} is not the one its edit makes", edit.path),
                ));
            }
        }
        Ok(())
    }
}
