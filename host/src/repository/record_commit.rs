//! Record commits: how sf keeps a record in the owned repository (a commit by sf over a tree
//! of exactly one file, or over the empty tree), and how such a record is read back, every
//! object re-hashed and held to the form sf gives it.

use crate::contracts::{EncodedObject, RefName, RefValue};
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::error::RepositoryError;
use super::identity::{IDENT, MAX_COMMIT_BYTES};
use super::{Repository, source};

/// The empty tree, which claims and receipts are made over.
pub(in crate::repository) fn empty_tree() -> EncodedObject {
    EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&[]))
}

/// A commit by sf over `tree` with `parents` and `message`.
pub(in crate::repository) fn commit_object(
    tree: ObjectId,
    parents: Vec<ObjectId>,
    message: String,
) -> EncodedObject {
    EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit {
            tree,
            parents,
            author: IDENT.to_owned(),
            committer: IDENT.to_owned(),
            message,
        }),
    )
}

/// The objects of a record commit by sf whose tree holds one file, `name` with `bytes`: blob,
/// tree and commit (last), the commit with `parents` and `message`.
pub(in crate::repository) fn record_objects(
    name: &str,
    bytes: Vec<u8>,
    parents: Vec<ObjectId>,
    message: String,
) -> Vec<EncodedObject> {
    let blob = EncodedObject::new(ObjectKind::Blob, bytes);
    let tree = EncodedObject::new(
        ObjectKind::Tree,
        git_object::encode_tree(&[TreeEntry {
            mode: EntryMode::File,
            name: name.into(),
            id: blob.id,
        }]),
    );
    let commit = commit_object(tree.id, parents, message);
    vec![blob, tree, commit]
}

impl Repository {
    /// What the direct ref `name` names, if it exists; a symbolic ref is `corrupt`, since sf
    /// never writes one.
    pub(in crate::repository) fn read_direct(
        &self,
        name: &RefName,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        match self.store.read_ref(name, self.deadline())? {
            None => Ok(None),
            Some(RefValue::Direct(id)) => Ok(Some(id)),
            Some(RefValue::Symbolic(to)) => Err(RepositoryError::corrupt(format!(
                "{name} is a symbolic ref to {to}"
            ))),
        }
    }

    /// The body of object `id`, re-hashed, which must be a `kind` of at most `budget` bytes;
    /// `what` names it in errors.
    pub(in crate::repository) fn read_one(
        &self,
        id: ObjectId,
        kind: ObjectKind,
        budget: u64,
        what: &str,
    ) -> Result<Vec<u8>, RepositoryError> {
        let mut bodies = source::read_verified(
            self.store.as_ref(),
            &[id],
            kind,
            budget,
            what,
            self.deadline(),
        )?;
        Ok(bodies.remove(0))
    }

    /// The one file `name` of the record commit `commit` (its tree exactly `{name}`), within
    /// `budget` bytes; anything else is `corrupt`. `what` names the record in errors, and
    /// `parts` its commit, tree and file while each is read.
    pub(in crate::repository) fn read_record_file(
        &self,
        commit: ObjectId,
        name: &str,
        budget: u64,
        what: &str,
        parts: [&str; 3],
    ) -> Result<Vec<u8>, RepositoryError> {
        let [commit_part, tree_part, file_part] = parts;
        let body = self.read_one(commit, ObjectKind::Commit, MAX_COMMIT_BYTES, commit_part)?;
        let decoded = git_object::decode_commit(&body)
            .ok_or_else(|| RepositoryError::corrupt(format!("{what}: not in sf's commit form")))?;
        let tree = self.read_one(decoded.tree, ObjectKind::Tree, MAX_COMMIT_BYTES, tree_part)?;
        let blob = match git_object::decode_tree(&tree).as_deref() {
            Some([entry]) if entry.mode == EntryMode::File && entry.name == name => entry.id,
            _ => {
                return Err(RepositoryError::corrupt(format!(
                    "{what}: its tree is not exactly {{{name}}}"
                )));
            }
        };
        self.read_one(blob, ObjectKind::Blob, budget, file_part)
    }
}
