//! Owned repositories: create one from a directory of text files, open it by its identity,
//! seal proposals as immutable Candidates, and export a Candidate's exact bytes, every
//! identity recomputed and nothing adopted, repaired or guessed (seed 001).
//!
//! Everything here works over `dyn ObjectStore`; the core never names a backend. Stored
//! layout: `refs/sf/candidates/<manifest sha256 hex>` → seal commit S (tree
//! `{manifest.json}`, parent M); M's sole parent is the base B.

mod error;
mod identity;
mod integration;
mod manifest;
mod proposal;
pub(crate) mod record;
pub(crate) mod source;

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::canonical::{self, Digest};
use crate::contracts::{
    EncodedObject, ObjectStore, ObjectStoreFactory, RefName, RefUpdate, RefValue, StoreRoot,
};
use crate::fault::{FaultPoint, FaultPoints, NoFaults};
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};
use crate::snapshot::{SnapshotFile, snapshot_digest};

pub use error::{Rejection, RepositoryError};
pub use identity::{
    CANDIDATE_PROTOCOL, DEFAULT_GIT_TIMEOUT, IDENT, MAX_COMMIT_BYTES, MAX_REPOSITORY_PATH_BYTES,
    MAX_TARGET_REF_BYTES, MAX_TREE_LEVEL_BYTES, REPOSITORY_LIMITS, REPOSITORY_PROTOCOL,
    RepositoryIdentity, RepositoryLimits, SEAL_PROTOCOL, check_target_ref,
    parse_repository_identity,
};
pub use integration::{
    Action, INTEGRATION_PROTOCOL, INTEGRATION_REF_PREFIX, IntegrationObservation,
    IntegrationPayload, IntegrationReceipt, Invocation, MALFORMED_GUARD_ANSWER, MAX_PAYLOAD_BYTES,
    ObservationStamp, Owner, Postcondition, PreparedIntegration,
};
pub use manifest::{
    CandidateManifest, FrozenInputs, MAX_SCOPE_ENTRIES, ManifestEdit, ManifestFile,
    SealedCandidate, Slice, candidate_message,
};
pub use proposal::{FileEdit, Proposal, parse_proposal, validate_proposal};
pub use record::{ID_RULE, is_valid_id};
pub use source::{SourceFile, SourceSnapshot, SourceText};

/// The prefix of every Candidate ref.
pub const CANDIDATE_REF_PREFIX: &str = "refs/sf/candidates/";
/// How long a seal waits for a Candidate ref whose creation the store could not confirm to
/// settle (a concurrent identical seal holding Git's lock on it).
const CANDIDATE_REF_PATIENCE: Duration = Duration::from_secs(2);
/// The name of the manifest in a seal commit's tree.
pub const MANIFEST_NAME: &str = "manifest.json";

/// The ref that publishes the Candidate with `digest`.
pub fn candidate_ref(digest: &Digest) -> RefName {
    // 19 + 64 bytes of lowercase hex: always a valid name.
    RefName::parse(&format!("{CANDIDATE_REF_PREFIX}{}", digest.hex()))
        .expect("candidate ref names are valid")
}

/// How a repository handle behaves: the bound on each store operation and the fault hook
/// (tests only; production uses [`NoFaults`]).
#[derive(Clone)]
pub struct RepositoryOptions {
    pub git_timeout: Duration,
    pub faults: Arc<dyn FaultPoints>,
}

impl Default for RepositoryOptions {
    fn default() -> Self {
        Self {
            git_timeout: DEFAULT_GIT_TIMEOUT,
            faults: Arc::new(NoFaults),
        }
    }
}

impl std::fmt::Debug for RepositoryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepositoryOptions")
            .field("git_timeout", &self.git_timeout)
            .finish_non_exhaustive()
    }
}

/// What a new repository is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateRepository {
    /// Absolute, normalised and canonical; must not exist.
    pub path: String,
    pub product_id: String,
    pub target_ref: String,
    pub files: Vec<SourceText>,
}

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

fn random_nonce() -> Result<String, RepositoryError> {
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

/// Opens the repository `identity` names. The store checks the root's ownership (including
/// the marker, byte for byte) now and before every later operation; a moved, replaced,
/// unmarked or tampered root never opens.
pub fn open_repository(
    factory: &dyn ObjectStoreFactory,
    identity: &RepositoryIdentity,
    options: RepositoryOptions,
) -> Result<Repository, RepositoryError> {
    // Re-check the identity's own rules: a hand-built one is outside input too.
    parse_repository_identity(&identity.to_canonical_bytes())?;
    let root = StoreRoot {
        path: identity.path.clone().into(),
        dev: identity.dev,
        ino: identity.ino,
    };
    let store = factory.open(
        &root,
        &identity.to_canonical_bytes(),
        Instant::now() + options.git_timeout,
    )?;
    Ok(Repository {
        identity: identity.clone(),
        store,
        options,
    })
}

/// An open owned repository. The only way to get one is [`open_repository`].
pub struct Repository {
    identity: RepositoryIdentity,
    store: Box<dyn ObjectStore>,
    options: RepositoryOptions,
}

impl std::fmt::Debug for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repository")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Repository {
    pub fn identity(&self) -> &RepositoryIdentity {
        &self.identity
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.options.git_timeout
    }

    /// The commit the target ref names now.
    pub fn target(&self) -> Result<ObjectId, RepositoryError> {
        let name = RefName::parse(&self.identity.target_ref)?;
        match self.store.read_ref(&name, self.deadline())? {
            Some(RefValue::Direct(id)) => Ok(id),
            Some(RefValue::Symbolic(to)) => Err(RepositoryError::corrupt(format!(
                "target {name} is a symbolic ref to {to}"
            ))),
            None => Err(RepositoryError::corrupt(format!("target {name} is absent"))),
        }
    }

    /// The files of `commit`, which must be a factory commit of this repository: the pinned
    /// initial commit, or a stored commit in this Product's Candidate format. Whether a
    /// Candidate ref publishes it is not checked here (export does).
    pub fn snapshot(&self, commit: &ObjectId) -> Result<SourceSnapshot, RepositoryError> {
        let what = format!("commit {commit}");
        let answer = self
            .store
            .read_objects(
                &[*commit],
                MAX_COMMIT_BYTES + crate::contracts::READ_FRAMING_BYTES,
                self.deadline(),
            )
            .map_err(|error| match error {
                crate::contracts::ObjectStoreError::Limit { .. } => not_factory(commit),
                other => other.into(),
            })?;
        let object = answer.into_iter().next().flatten().ok_or_else(|| {
            if *commit == self.identity.initial {
                // The identity pins it: its absence can only be tampering.
                RepositoryError::corrupt(format!("the pinned initial commit {commit} is missing"))
            } else {
                RepositoryError::Missing { what: what.clone() }
            }
        })?;
        if git_object::object_id(object.kind, &object.body) != *commit {
            return Err(RepositoryError::corrupt(format!(
                "{what}: stored bytes do not hash to its id"
            )));
        }
        let decoded = (object.kind == ObjectKind::Commit)
            .then(|| git_object::decode_commit(&object.body))
            .flatten()
            .filter(|decoded| decoded.ident == IDENT)
            .ok_or_else(|| not_factory(commit))?;
        if *commit == self.identity.initial {
            let expected =
                identity::initial_message(&self.identity.product_id, &self.identity.nonce);
            if !decoded.parents.is_empty() || decoded.message != expected {
                return Err(RepositoryError::corrupt(format!(
                    "the pinned initial commit {commit} is not as created"
                )));
            }
        } else if decoded.parents.len() != 1
            || !manifest::is_candidate_message(&decoded.message, &self.identity.product_id)
        {
            return Err(not_factory(commit));
        }
        let files = source::read_tree(self.store.as_ref(), decoded.tree, &what, self.deadline())?;
        Ok(SourceSnapshot {
            commit: *commit,
            tree: decoded.tree,
            files,
        })
    }

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
        let proposal_digest = validate_proposal(proposal, &frozen.scope)?;
        let base = self.snapshot(&frozen.base).map_err(|error| match error {
            RepositoryError::Missing { .. } | RepositoryError::InvalidInput { .. } => {
                RepositoryError::invalid(
                    format!("frozen.base ({})", frozen.base),
                    format!("must be a factory commit of this repository: {error}"),
                )
            }
            other => other,
        })?;
        let files = proposal::apply_edits(&base.files, proposal)?;
        let built = source::build_tree(&files);
        let commit = EncodedObject::new(
            ObjectKind::Commit,
            git_object::encode_commit(&Commit {
                tree: built.tree,
                parents: vec![frozen.base],
                ident: IDENT.to_owned(),
                message: candidate_message(&self.identity.product_id, frozen, &proposal_digest),
            }),
        );
        let mut edits: Vec<ManifestEdit> = proposal
            .edits
            .iter()
            .map(|edit| ManifestEdit {
                path: edit.path.clone(),
                prior: edit.prior.clone(),
                next: edit.text.as_ref().map(|text| Digest::of(text.as_bytes())),
            })
            .collect();
        edits.sort_by(|a, b| a.path.cmp(&b.path));
        let manifest = CandidateManifest {
            repository: self.identity.clone(),
            slice: frozen.slice.clone(),
            scope: frozen.scope.clone(),
            acceptance: frozen.acceptance.clone(),
            recipe: frozen.recipe.clone(),
            environment: frozen.environment.clone(),
            base_commit: base.commit,
            base_tree: base.tree,
            commit: commit.id,
            tree: built.tree,
            files: files.iter().map(ManifestFile::from).collect(),
            proposal_digest,
            edits,
        };
        let manifest_bytes = canonical::encode(&manifest.to_value()).map_err(|error| {
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
        let (seal_objects, seal_commit) = seal_objects(manifest_bytes, commit.id);
        let mut objects = built.objects;
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
        self.export_candidate(&digest)
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

    /// Exports the Candidate `digest` names, re-verifying everything (the seal commit, the
    /// manifest's canonical bytes and repository, M and every tree and blob rebuilt and
    /// compared, the edits and proposal digest recomputed, and the base a factory commit with
    /// the recorded tree). Corruption is reported, never repaired. Files are fresh copies.
    pub fn export_candidate(&self, digest: &Digest) -> Result<SealedCandidate, RepositoryError> {
        let name = candidate_ref(digest);
        let seal_commit = match self.store.read_ref(&name, self.deadline())? {
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
        let store = self.store.as_ref();
        let read_one = |id: ObjectId,
                        kind: ObjectKind,
                        budget: u64,
                        what: &str|
         -> Result<Vec<u8>, RepositoryError> {
            let mut bodies =
                source::read_verified(store, &[id], kind, budget, what, self.deadline())?;
            Ok(bodies.remove(0))
        };
        let seal_body = read_one(
            seal_commit,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "seal commit",
        )?;
        let seal = git_object::decode_commit(&seal_body)
            .filter(|seal| {
                seal.ident == IDENT
                    && seal.parents.len() == 1
                    && seal.message == identity::seal_message()
            })
            .ok_or_else(|| {
                RepositoryError::corrupt(format!(
                    "seal commit {seal_commit} is not in sf's seal form"
                ))
            })?;
        let seal_tree = read_one(seal.tree, ObjectKind::Tree, MAX_COMMIT_BYTES, "seal tree")?;
        let manifest_blob = match git_object::decode_tree(&seal_tree).as_deref() {
            Some([entry]) if entry.mode == EntryMode::File && entry.name == MANIFEST_NAME => {
                entry.id
            }
            _ => {
                return Err(RepositoryError::corrupt(format!(
                    "seal tree {} is not exactly {{{MANIFEST_NAME}}}",
                    seal.tree
                )));
            }
        };
        let manifest_bytes = read_one(
            manifest_blob,
            ObjectKind::Blob,
            canonical::MAX_BYTES as u64,
            "manifest",
        )?;
        if Digest::of(&manifest_bytes) != *digest {
            return Err(RepositoryError::corrupt(format!(
                "the manifest under {name} does not hash to {digest}"
            )));
        }
        let value = canonical::parse_canonical(&manifest_bytes)
            .map_err(|error| RepositoryError::corrupt(format!("manifest {digest}: {error}")))?;
        let manifest = CandidateManifest::from_value(&value).map_err(|error| {
            RepositoryError::corrupt(format!(
                "manifest {digest}: {}: {}",
                error.field, error.rule
            ))
        })?;
        if manifest.repository != self.identity {
            return Err(RepositoryError::corrupt(format!(
                "manifest {digest} belongs to another repository ({} at {})",
                manifest.repository.product_id, manifest.repository.path
            )));
        }
        if seal.parents[0] != manifest.commit {
            return Err(RepositoryError::corrupt(format!(
                "seal commit {seal_commit} is not the child of M {}",
                manifest.commit
            )));
        }
        let frozen = manifest.frozen();
        frozen
            .validate()
            .map_err(|error| RepositoryError::corrupt(format!("manifest {digest}: {error}")))?;

        // M, rebuilt from the manifest, byte for byte.
        let m_body = read_one(
            manifest.commit,
            ObjectKind::Commit,
            MAX_COMMIT_BYTES,
            "Candidate commit",
        )?;
        let expected_m = git_object::encode_commit(&Commit {
            tree: manifest.tree,
            parents: vec![manifest.base_commit],
            ident: IDENT.to_owned(),
            message: candidate_message(
                &self.identity.product_id,
                &frozen,
                &manifest.proposal_digest,
            ),
        });
        if m_body != expected_m {
            return Err(RepositoryError::corrupt(format!(
                "Candidate commit {} does not match its manifest",
                manifest.commit
            )));
        }
        // Every tree and blob, read back and re-checked; the listing must equal the manifest's.
        let files = source::read_tree(store, manifest.tree, "Candidate tree", self.deadline())?;
        let listed: Vec<ManifestFile> = files.iter().map(ManifestFile::from).collect();
        if listed != manifest.files {
            return Err(RepositoryError::corrupt(format!(
                "Candidate tree {} does not match the manifest's files",
                manifest.tree
            )));
        }
        // The base: a factory commit with the recorded tree.
        let base = self.snapshot(&manifest.base_commit).map_err(|error| {
            RepositoryError::corrupt(format!(
                "base {} of Candidate {digest} is not a factory commit: {error}",
                manifest.base_commit
            ))
        })?;
        if base.tree != manifest.base_tree {
            return Err(RepositoryError::corrupt(format!(
                "base {} does not have the recorded tree",
                manifest.base_commit
            )));
        }
        self.check_edits(&manifest, &base, &files, digest)?;

        let files: Vec<SnapshotFile> = files
            .into_iter()
            .map(|file| SnapshotFile {
                path: file.path,
                content: file.text.into_bytes(),
            })
            .collect();
        let snapshot_digest = snapshot_digest(&files).map_err(|error| {
            RepositoryError::corrupt(format!("Candidate {digest} files: {error}"))
        })?;
        Ok(SealedCandidate {
            digest: digest.clone(),
            manifest,
            manifest_bytes,
            files,
            snapshot_digest,
        })
    }

    /// Recomputes the proposal from the base and the Candidate's files and checks that it is
    /// what the manifest records: the edits, their priors and nexts, and the proposal digest.
    fn check_edits(
        &self,
        manifest: &CandidateManifest,
        base: &SourceSnapshot,
        files: &[SourceFile],
        digest: &Digest,
    ) -> Result<(), RepositoryError> {
        let corrupt = |why: &str| RepositoryError::corrupt(format!("manifest {digest}: {why}"));
        let find =
            |list: &[SourceFile], path: &str| list.iter().find(|file| file.path == path).cloned();
        let mut edits = Vec::with_capacity(manifest.edits.len());
        for edit in &manifest.edits {
            let before = find(&base.files, &edit.path);
            let after = find(files, &edit.path);
            if before.as_ref().map(|file| &file.sha256) != edit.prior.as_ref()
                || after.as_ref().map(|file| &file.sha256) != edit.next.as_ref()
            {
                return Err(corrupt(&format!(
                    "edit of {} does not match the base and Candidate files",
                    edit.path
                )));
            }
            edits.push(FileEdit {
                path: edit.path.clone(),
                prior: edit.prior.clone(),
                text: after.map(|file| file.text),
            });
        }
        let proposal = Proposal { edits };
        let recomputed = validate_proposal(&proposal, &manifest.scope)
            .map_err(|error| corrupt(&error.to_string()))?;
        if recomputed != manifest.proposal_digest {
            return Err(corrupt(
                "the proposal digest does not match the recorded edits",
            ));
        }
        let applied = proposal::apply_edits(&base.files, &proposal)
            .map_err(|error| corrupt(&error.to_string()))?;
        if applied != files {
            return Err(corrupt(
                "the Candidate files are not the base with the recorded edits applied",
            ));
        }
        let mut sorted = manifest.edits.clone();
        sorted.sort_by(|a, b| a.path.cmp(&b.path));
        if sorted != manifest.edits {
            return Err(corrupt("the recorded edits are not in path order"));
        }
        Ok(())
    }
}

fn not_factory(commit: &ObjectId) -> RepositoryError {
    RepositoryError::invalid(
        format!("commit {commit}"),
        "is not a factory commit of this repository",
    )
}

/// The manifest blob, seal tree and seal commit S for a manifest, and S's id.
fn seal_objects(
    manifest_bytes: Vec<u8>,
    candidate_commit: ObjectId,
) -> (Vec<EncodedObject>, ObjectId) {
    let blob = EncodedObject::new(ObjectKind::Blob, manifest_bytes);
    let tree = EncodedObject::new(
        ObjectKind::Tree,
        git_object::encode_tree(&[TreeEntry {
            mode: EntryMode::File,
            name: MANIFEST_NAME.into(),
            id: blob.id,
        }]),
    );
    let commit = EncodedObject::new(
        ObjectKind::Commit,
        git_object::encode_commit(&Commit {
            tree: tree.id,
            parents: vec![candidate_commit],
            ident: IDENT.to_owned(),
            message: identity::seal_message(),
        }),
    );
    let id = commit.id;
    (vec![blob, tree, commit], id)
}
