//! Creating an owned repository: every input checked and every object built in memory before
//! the root is created, exclusively; the ownership marker written last.

use std::io::Read as _;
use std::path::Path;
use std::time::Instant;

use crate::canonical;
use crate::contracts::{EncodedObject, ObjectStoreError, ObjectStoreFactory, RefName, RefUpdate};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, ObjectId, ObjectKind};

use super::identity;
use super::source;
use super::tree_record::{self, tree_record_ref};
use super::{
    CreateRepository, ID_RULE, IDENT, InitialBase, RepositoryError, RepositoryIdentity,
    RepositoryOptions, check_target_ref, is_valid_id,
};

/// The objects of the first base and its commit id, every input checked.
struct FirstBase {
    commit: ObjectId,
    objects: Vec<EncodedObject>,
    /// The base's tree and its tree record's commit (the record's objects are among
    /// `objects`).
    record: (ObjectId, ObjectId),
    /// Whether the commit's parents stay outside the repository (an imported commit with
    /// history): the store records it as a history boundary before writing it.
    boundary: bool,
}

fn validate_create(request: &CreateRepository, nonce: &str) -> Result<FirstBase, RepositoryError> {
    identity::check_root_path(&request.path)
        .map_err(|rule| RepositoryError::invalid("path", rule))?;
    if !is_valid_id(&request.product_id) {
        return Err(RepositoryError::invalid("productId", ID_RULE));
    }
    check_target_ref(&request.target_ref)
        .map_err(|rule| RepositoryError::invalid("targetRef", rule))?;
    let (files, input) = match &request.base {
        InitialBase::Files(files) => (files.clone(), "files"),
        InitialBase::Imported(imported) => (imported.files.clone(), "imported tree"),
    };
    let mut files = files;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let faults = source::check_source(
        &files,
        &request.settings.limits(),
        request.settings.policy(),
    );
    if let Some(first) = faults.first() {
        return Err(RepositoryError::invalid(
            format!("{input}: {}", first.path),
            source::describe_faults(&faults),
        ));
    }
    let built = source::build_tree(&files);
    let mut objects = built.objects;
    // The base's tree record, from the bytes in hand: every later seal on it reads the
    // directories on its edited paths from the record instead of the whole tree.
    let records = tree_record::whole(&files)
        .map_err(|why| RepositoryError::invalid(input, format!("its tree record: {why}")))?;
    let record = tree_record::record_objects(&records, &Default::default())
        .map_err(|why| RepositoryError::invalid(input, format!("its tree record: {why}")))?;
    objects.extend(record.objects);
    let commit = match &request.base {
        InitialBase::Files(_) => EncodedObject::new(
            ObjectKind::Commit,
            git_object::encode_commit(&Commit {
                tree: built.tree,
                parents: Vec::new(),
                author: IDENT.to_owned(),
                committer: IDENT.to_owned(),
                message: identity::initial_message(&request.product_id, nonce),
            }),
        ),
        InitialBase::Imported(imported) => {
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
    let boundary =
        matches!(&request.base, InitialBase::Imported(imported) if !imported.parents.is_empty());
    Ok(FirstBase {
        commit: id,
        objects,
        record: (built.tree, record.commit),
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
/// checked and every object built in memory before the directory is created; the directory
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
