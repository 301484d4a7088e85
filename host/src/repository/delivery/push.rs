//! What one delivery push sends: M and its base U, and of their trees what differs, read back
//! from the owned store and re-hashed, the marker tag, and the leased updates (the marker,
//! created; the delivered ref, from what the intent expects to M; and M's attestation, when
//! one is kept and the remote lacks it, created).

use std::collections::{BTreeMap, BTreeSet};

use crate::contracts::{EncodedObject, RefName};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::super::Repository;
use super::super::error::RepositoryError;
use super::super::identity::{MAX_CANDIDATE_COMMIT_BYTES, MAX_TREE_LEVEL_BYTES};
use super::super::imported::{MAX_IMPORTED_COMMIT_BYTES, commit_heads};
use super::super::source;
use super::attestation::{StoredAttestation, attestation_ref};
use super::records::{DeliveryPayload, marker_tag, marker_tag_id};
use super::remote::{LeasedUpdate, Push};

/// Everything one push of a delivery sends, read and checked before anything is claimed.
pub(super) struct Outgoing {
    objects: Vec<EncodedObject>,
    tag: Vec<u8>,
    tag_id: ObjectId,
    updates: Vec<LeasedUpdate>,
}

impl Outgoing {
    /// What `payload` pushes, read from `repo`'s store, with `attestation` (M's, which the
    /// remote lacks) created beside it.
    pub(super) fn of(
        repo: &Repository,
        payload: &DeliveryPayload,
        attestation: Option<StoredAttestation>,
    ) -> Result<Self, RepositoryError> {
        let mut objects = repo.delivered_objects(payload)?;
        let tag = marker_tag(payload);
        let tag_id = marker_tag_id(&tag);
        let mut updates = vec![
            LeasedUpdate {
                name: RefName::parse(&payload.marker)?,
                expected: None,
                new: tag_id,
            },
            LeasedUpdate {
                name: RefName::parse(&payload.remote_ref)?,
                expected: payload.expected,
                new: payload.commit,
            },
        ];
        if let Some(attestation) = attestation {
            updates.push(LeasedUpdate {
                name: attestation_ref(&payload.commit),
                expected: None,
                new: attestation.id,
            });
            objects.push(EncodedObject::new(ObjectKind::Blob, attestation.bytes));
        }
        Ok(Self {
            objects,
            tag,
            tag_id,
            updates,
        })
    }

    /// The atomic push of it all, U being the boundary.
    pub(super) fn push<'a>(&'a self, payload: &'a DeliveryPayload) -> Push<'a> {
        Push {
            objects: &self.objects,
            boundary: std::slice::from_ref(&payload.base),
            tag: (&self.tag, self.tag_id),
            updates: &self.updates,
        }
    }
}

impl Repository {
    /// The objects a push of M needs, read back from the store and re-hashed: M and U (its
    /// parent, the base the remote has), and of their trees only what differs. Both trees are
    /// read level by level from the root, descending only where M's entry is not U's: every
    /// tree of M on a changed path and every blob it adds, and U's trees on those paths,
    /// which tell Git what the remote holds already (an unchanged subtree or blob is named by
    /// both and never read). U's own parents are a boundary. The cost is the change's,
    /// whatever the size of the tree.
    fn delivered_objects(
        &self,
        payload: &DeliveryPayload,
    ) -> Result<Vec<EncodedObject>, RepositoryError> {
        let mut objects = Vec::new();
        let mut trees = Vec::new();
        for (commit, budget, what) in [
            (
                payload.commit,
                MAX_CANDIDATE_COMMIT_BYTES,
                "the delivered commit",
            ),
            (
                payload.base,
                MAX_IMPORTED_COMMIT_BYTES,
                "the delivered commit's base",
            ),
        ] {
            let body = self.read_one(commit, ObjectKind::Commit, budget, what)?;
            let heads = commit_heads(&body)
                .map_err(|rule| RepositoryError::corrupt(format!("{what} {commit}: {rule}")))?;
            trees.push(heads.tree);
            objects.push(EncodedObject::new(ObjectKind::Commit, body));
        }
        objects.extend(self.changed_objects(trees[0], trees[1])?);
        Ok(objects)
    }

    /// Tree `tree` and, beside it, `base`: every tree of `tree` whose path leads to an entry
    /// that differs, the same paths' trees of `base`, and the blobs `tree` holds that `base`
    /// does not hold at the same path, each read and re-hashed once.
    fn changed_objects(
        &self,
        tree: ObjectId,
        base: ObjectId,
    ) -> Result<Vec<EncodedObject>, RepositoryError> {
        let what = "the delivered commit's changes";
        let mut objects = Vec::new();
        let mut seen = BTreeSet::new();
        let mut blobs = Vec::new();
        let mut read: BTreeMap<ObjectId, Vec<TreeEntry>> = BTreeMap::new();
        let mut level = vec![(tree, Some(base))];
        while !level.is_empty() {
            let ids: Vec<ObjectId> = level
                .iter()
                .flat_map(|(tree, base)| std::iter::once(*tree).chain(*base))
                .filter(|id| seen.insert(*id))
                .collect();
            let bodies = source::read_verified(
                self.store.as_ref(),
                &ids,
                ObjectKind::Tree,
                MAX_TREE_LEVEL_BYTES,
                what,
                self.deadline(),
            )?;
            for (id, body) in ids.into_iter().zip(bodies) {
                let entries = git_object::decode_tree(&body).ok_or_else(|| {
                    RepositoryError::corrupt(format!(
                        "{what}: tree {id} is not in Git's canonical form"
                    ))
                })?;
                read.insert(id, entries);
                objects.push(EncodedObject::new(ObjectKind::Tree, body));
            }
            let mut next = Vec::new();
            for (tree, base) in level {
                let empty = Vec::new();
                let base_entries = base.and_then(|id| read.get(&id)).unwrap_or(&empty);
                for entry in read.get(&tree).unwrap_or(&empty) {
                    let before = base_entries.iter().find(|old| old.name == entry.name);
                    if before.is_some_and(|old| old.id == entry.id && old.mode == entry.mode) {
                        continue;
                    }
                    let before_tree = before
                        .filter(|old| old.mode == EntryMode::Tree)
                        .map(|old| old.id);
                    match entry.mode {
                        EntryMode::Tree => next.push((entry.id, before_tree)),
                        _ if seen.insert(entry.id) => blobs.push(entry.id),
                        _ => {}
                    }
                }
            }
            level = next;
        }
        let limits = self.identity.settings().limits();
        let budget = (limits.max_file_bytes as u64)
            .saturating_mul(blobs.len() as u64)
            .min(limits.max_source_bytes as u64);
        let bodies = source::read_verified(
            self.store.as_ref(),
            &blobs,
            ObjectKind::Blob,
            budget,
            what,
            self.deadline(),
        )?;
        objects.extend(
            bodies
                .into_iter()
                .map(|body| EncodedObject::new(ObjectKind::Blob, body)),
        );
        Ok(objects)
    }
}
