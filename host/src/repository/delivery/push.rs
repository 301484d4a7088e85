//! What one delivery push sends: every object of M and of its base U, read back from the owned
//! store and re-hashed, the marker tag, and the two leased updates (the marker, created; the
//! delivered ref, from what the intent expects to M).

use std::collections::BTreeSet;

use crate::contracts::{EncodedObject, RefName};
use crate::git_object::{ObjectId, ObjectKind};

use super::super::Repository;
use super::super::error::RepositoryError;
use super::super::identity::MAX_CANDIDATE_COMMIT_BYTES;
use super::super::imported::{MAX_IMPORTED_COMMIT_BYTES, commit_heads};
use super::super::source;
use super::records::{DeliveryPayload, marker_tag, marker_tag_id};
use super::remote::{LeasedUpdate, Push};

/// Everything one push of a delivery sends, read and checked before anything is claimed.
pub(super) struct Outgoing {
    objects: Vec<EncodedObject>,
    tag: Vec<u8>,
    tag_id: ObjectId,
    updates: [LeasedUpdate; 2],
}

impl Outgoing {
    /// What `payload` pushes, read from `repo`'s store.
    pub(super) fn of(
        repo: &Repository,
        payload: &DeliveryPayload,
    ) -> Result<Self, RepositoryError> {
        let objects = repo.delivered_objects(payload)?;
        let tag = marker_tag(payload);
        let tag_id = marker_tag_id(&tag);
        let updates = [
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
    /// Every object a push of M needs, read back from the store and re-hashed: M, its tree
    /// whole, and the base U with its tree (Git walks the base's tree to leave out what the
    /// remote has; U's own parents are a boundary).
    fn delivered_objects(
        &self,
        payload: &DeliveryPayload,
    ) -> Result<Vec<EncodedObject>, RepositoryError> {
        let mut objects = Vec::new();
        let mut seen = BTreeSet::new();
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
            let files = source::read_tree(
                self.store.as_ref(),
                heads.tree,
                &self.identity.settings(),
                what,
                self.deadline(),
            )?;
            let built = source::build_tree(&files);
            if built.tree != heads.tree {
                return Err(RepositoryError::corrupt(format!(
                    "{what} {commit}: its files build tree {}, not {}",
                    built.tree, heads.tree
                )));
            }
            for object in built
                .objects
                .into_iter()
                .chain([EncodedObject::new(ObjectKind::Commit, body)])
            {
                if seen.insert(object.id) {
                    objects.push(object);
                }
            }
        }
        Ok(objects)
    }
}
