//! Creating an owned repository: every input checked and every object built in memory before
//! the root is created, exclusively; the ownership marker written last.

use std::io::Read as _;
use std::path::Path;
use std::time::Instant;

use crate::canonical;
use crate::contracts::{EncodedObject, ObjectStoreFactory, RefName, RefUpdate};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, ObjectKind};

use super::identity;
use super::source::{self, SourceFile};
use super::{
    CreateRepository, ID_RULE, IDENT, RepositoryError, RepositoryIdentity, RepositoryOptions,
    check_target_ref, is_valid_id,
};

fn validate_create(request: &CreateRepository) -> Result<Vec<source::SourceFile>, RepositoryError> {
    identity::check_root_path(&request.path)
        .map_err(|rule| RepositoryError::invalid("path", rule))?;
    if !is_valid_id(&request.product_id) {
        return Err(RepositoryError::invalid("productId", ID_RULE));
    }
    check_target_ref(&request.target_ref)
        .map_err(|rule| RepositoryError::invalid("targetRef", rule))?;
    let mut files: Vec<SourceFile> = request
        .files
        .iter()
        .map(|file| SourceFile::new(file.path.clone(), file.text.clone()))
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    source::check_source(&files).map_err(|(reason, path, rule)| {
        RepositoryError::invalid(
            format!("files: {path}"),
            format!("{rule} ({})", reason.code()),
        )
    })?;
    Ok(files)
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
    let files = validate_create(request)?;
    let nonce = random_nonce()?;
    let built = source::build_tree(&files);
    let initial = EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit {
            tree: built.tree,
            parents: Vec::new(),
            ident: IDENT.to_owned(),
            message: identity::initial_message(&request.product_id, &nonce),
        }),
    );
    let target = RefName::parse(&request.target_ref)?;
    let deadline = || Instant::now() + options.git_timeout;

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
    let mut objects = built.objects;
    objects.push(initial.clone());
    store.write_objects(&objects, deadline())?;
    options.faults.reached(FaultPoint::InitialObjectsWritten);
    match store.create_ref(&target, &initial.id, deadline())? {
        RefUpdate::Applied => {}
        other => {
            return Err(RepositoryError::GitFailed {
                detail: format!(
                    "creating {} in a fresh repository did not apply: {other:?}",
                    request.target_ref
                ),
            });
        }
    }
    let identity = RepositoryIdentity {
        product_id: request.product_id.clone(),
        path: request.path.clone(),
        dev: root.dev,
        ino: root.ino,
        nonce,
        target_ref: request.target_ref.clone(),
        initial: initial.id,
    };
    store.mark(&identity.to_canonical_bytes(), deadline())?;
    Ok(identity)
}
