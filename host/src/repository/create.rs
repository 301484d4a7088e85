//! Creating an owned repository: every input checked, and every object but the blobs built,
//! before the root is created, exclusively; the blobs then read a second time and written a
//! batch at a time; the ownership marker written last.

use std::borrow::Cow;
use std::io::Read as _;
use std::path::Path;
use std::sync::PoisonError;
use std::time::Instant;

use crate::canonical;
use crate::contracts::{EncodedObject, ObjectStoreError, ObjectStoreFactory, RefName, RefUpdate};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, ObjectId, ObjectKind};

use super::identity;
use super::source;
use super::source::WalkedLeaf;
use super::streamed::{self, ImportedHead, InHand, LeafBytes};
use super::tree_record::tree_record_ref;
use super::{
    CreateRepository, ID_RULE, IDENT, InitialBase, RepositoryError, RepositoryIdentity,
    RepositoryOptions, check_target_ref, is_valid_id,
};

/// The first base, every input checked: its commit id, its leaves, and the objects that are
/// not blobs.
struct FirstBase<'a> {
    commit: ObjectId,
    leaves: Cow<'a, [WalkedLeaf]>,
    /// The trees, the tree record's objects and the commit.
    objects: Vec<EncodedObject>,
    /// The base's tree and its tree record's commit (the record's objects are among
    /// `objects`).
    record: (ObjectId, ObjectId),
    /// Whether the commit's parents stay outside the repository (an imported commit with
    /// history): the store records it as a history boundary before writing it.
    boundary: bool,
}

/// What the first base is made of: its leaves, the commit it is imported as, and the name
/// of the input for messages.
fn parts(base: &InitialBase) -> (Cow<'_, [WalkedLeaf]>, Option<ImportedHead>, &'static str) {
    match base {
        InitialBase::Files(files) => (Cow::Owned(streamed::leaves_of(files)), None, "files"),
        InitialBase::Imported(imported) => {
            let (head, leaves) = imported.split();
            (Cow::Owned(leaves), Some(head), "imported tree")
        }
        InitialBase::Streamed(base) => {
            let input = match base.commit {
                Some(_) => "imported tree",
                None => "files",
            };
            (Cow::Borrowed(&base.leaves), base.commit.clone(), input)
        }
    }
}

/// Reads the bytes of `base` a second time through `read`: files in memory from there, a
/// streamed base from its own second read.
fn second_read<R>(base: &InitialBase, read: impl FnOnce(&mut dyn LeafBytes) -> R) -> R {
    match base {
        InitialBase::Files(files) => read(&mut InHand(files)),
        InitialBase::Imported(imported) => read(&mut InHand(&imported.files)),
        InitialBase::Streamed(base) => {
            read(&mut *base.bytes.lock().unwrap_or_else(PoisonError::into_inner))
        }
    }
}

fn validate_create<'a>(
    request: &'a CreateRepository,
    nonce: &str,
) -> Result<FirstBase<'a>, RepositoryError> {
    identity::check_root_path(&request.path)
        .map_err(|rule| RepositoryError::invalid("path", rule))?;
    if !is_valid_id(&request.product_id) {
        return Err(RepositoryError::invalid("productId", ID_RULE));
    }
    check_target_ref(&request.target_ref)
        .map_err(|rule| RepositoryError::invalid("targetRef", rule))?;
    let (leaves, head, input) = parts(&request.base);
    let faults = source::check_leaves(
        &leaves,
        &request.settings.limits(),
        request.settings.policy(),
    );
    if let Some(first) = faults.first() {
        return Err(RepositoryError::invalid(
            format!("{input}: {}", first.path),
            source::describe_faults(&faults),
        ));
    }
    // The base's trees and tree record, from the leaves' identities: every later seal on it
    // reads the directories on its edited paths from the record instead of the whole tree.
    let built = streamed::build_base(&leaves)
        .map_err(|why| RepositoryError::invalid(input, format!("its tree record: {why}")))?;
    let mut objects = built.objects;
    let commit = match &head {
        None => EncodedObject::new(
            ObjectKind::Commit,
            git_object::encode_commit(&Commit {
                tree: built.tree,
                parents: Vec::new(),
                author: IDENT.to_owned(),
                committer: IDENT.to_owned(),
                message: identity::initial_message(&request.product_id, nonce),
            }),
        ),
        Some(imported) => {
            imported
                .check()
                .map_err(|rule| RepositoryError::invalid("imported commit", rule))?;
            // The tree rebuilt from the files is the one the commit names: the owned copy is
            // the source's tree, not one sf made up.
            if built.tree != imported.tree {
                return Err(RepositoryError::invalid(
                    "imported commit",
                    format!(
                        "its files build tree {}, not the tree {} the commit names",
                        built.tree, imported.tree
                    ),
                ));
            }
            EncodedObject::new(ObjectKind::Commit, imported.body.clone())
        }
    };
    let id = commit.id;
    objects.push(commit);
    let boundary = head.is_some_and(|imported| !imported.parents.is_empty());
    Ok(FirstBase {
        commit: id,
        leaves,
        objects,
        record: (built.tree, built.record),
        boundary,
    })
}

pub(super) fn random_nonce() -> Result<String, RepositoryError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut urandom| urandom.read_exact(&mut bytes))
        .map_err(|error| RepositoryError::Unavailable {
            reason: format!("cannot read /dev/urandom for a nonce: {error}"),
        })?;
    Ok(hex::encode(bytes))
}

/// Creates an owned repository at `request.path` holding `request.files` as its initial
/// commit on `request.target_ref`, and returns its identity (persist it). Every input is
/// checked, and every object but the blobs built, before the directory is created (the
/// blobs are read a second time as they are written, so a base of any size the settings
/// admit is never held whole); the directory
/// is created exclusively (an existing path is `exists`, never adopted), and the ownership
/// marker is written last. Not idempotent.
pub fn create_repository(
    factory: &dyn ObjectStoreFactory,
    request: &CreateRepository,
    options: &RepositoryOptions,
) -> Result<RepositoryIdentity, RepositoryError> {
    let nonce = random_nonce()?;
    let first = validate_create(request, &nonce)?;
    let target = RefName::parse(&request.target_ref)?;
    let deadline = || Instant::now() + options.git_timeout;
    if first.boundary {
        // Asked before the root exists: a store that cannot hold the boundary creates nothing.
        factory.supports_boundaries().map_err(|error| match error {
            ObjectStoreError::Unavailable { reason } => RepositoryError::Unavailable {
                reason: format!(
                    "commit {} has parents, which stay in the team's repository, so its store \
                     must hold a history boundary: {reason}",
                    first.commit
                ),
            },
            other => other.into(),
        })?;
    }

    let store = factory.create(Path::new(&request.path), deadline())?;
    let root = store.root().clone();
    if root.dev > canonical::MAX_SAFE_INTEGER as u64
        || root.ino > canonical::MAX_SAFE_INTEGER as u64
    {
        return Err(RepositoryError::Unavailable {
            reason: format!(
                "{}: device or inode number exceeds 2^53 - 1 and cannot be recorded",
                request.path
            ),
        });
    }
    if first.boundary {
        store.record_boundaries(&[first.commit], deadline())?;
    }
    // The blobs first, read a second time and a batch at a time; then the trees, the tree
    // record and the commit, which name them.
    second_read(&request.base, |bytes| {
        streamed::write_blobs(
            store.as_ref(),
            &first.leaves,
            bytes,
            "the first base",
            &deadline,
        )
    })
    .map_err(|error| match error {
        RepositoryError::Conflict { what } => RepositoryError::Conflict {
            what: format!(
                "{what} ({} was created but has no ownership marker, so it is no repository \
                 and never opens: remove it, then create again)",
                request.path
            ),
        },
        other => other,
    })?;
    store.write_objects(&first.objects, deadline())?;
    options.faults.reached(FaultPoint::InitialObjectsWritten);
    let (tree, record) = first.record;
    for (name, value) in [(target, first.commit), (tree_record_ref(&tree), record)] {
        match store.create_ref(&name, &value, deadline())? {
            RefUpdate::Applied => {}
            other => {
                return Err(RepositoryError::GitFailed {
                    detail: format!(
                        "creating {name} in a fresh repository did not apply: {other:?}"
                    ),
                });
            }
        }
    }
    let identity = RepositoryIdentity {
        product_id: request.product_id.clone(),
        path: request.path.clone(),
        dev: root.dev,
        ino: root.ino,
        nonce,
        target_ref: request.target_ref.clone(),
        initial: first.commit,
        settings: Some(request.settings),
    };
    store.mark(&identity.to_canonical_bytes(), deadline())?;
    Ok(identity)
}
