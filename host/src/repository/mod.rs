//! Owned repositories: create one from a directory of text files, open it by its identity,
//! seal proposals as immutable Candidates, and export a Candidate's exact bytes, every
//! identity recomputed and nothing adopted, repaired or guessed.
//!
//! Everything here works over `dyn ObjectStore`; the core never names a backend. Stored
//! layout: `refs/sf/candidates/<manifest sha256 hex>` → seal commit S (tree
//! `{manifest.json}`, and `proposal.json` from `sf-candidate/3` on; parent M); M's sole
//! parent is the base B. Later bases imported from the team's repository:
//! `refs/sf/imports/<commit hex>` → record commit R (tree `{import.json}`, parent the
//! imported commit).

mod at_most_once;
mod by_reference;
mod create;
mod delivery;
mod export;
mod import;
mod imported;
mod integration;
mod listing;
mod lookup;
mod record_commit;
mod resulting;
mod seal;
mod sparse;
mod streamed;
mod trees;

mod tree_surgery;
mod walk;

pub(crate) use sf_candidate::{error, identity, manifest, proposal, tree_record};

/// The source trees of sf-candidate, and walking them back from a store.
pub(crate) mod source {
    pub(crate) use super::walk::*;
    pub use sf_candidate::source::*;
}

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::canonical::Digest;
use crate::contracts::{
    ObjectStore, ObjectStoreExt, ObjectStoreFactory, RefName, RefValue, StoreRoot,
};
use crate::fault::{FaultPoints, NoFaults};
use crate::git_object::{self, ObjectId, ObjectKind};
use tree_surgery::TreeIndex;

pub use crate::contracts::grammar::{ID_RULE, is_valid_id};
pub use at_most_once::{
    Action, EffectPayload, IntentRefs, MALFORMED_GUARD_ANSWER, Observation, ObservationStamp,
    Owner, Postcondition, Prepared, View, Wording, consult as consult_gate,
};
pub use delivery::{
    ATTESTATION_REF_PREFIX, MAX_ATTESTATION_BYTES, StoredAttestation, attestation_ref,
};
pub use delivery::{
    DELIVERY_PROTOCOL, DELIVERY_REF_PREFIX, DeliveryInvocation, DeliveryMode, DeliveryObservation,
    DeliveryPayload, DeliveryRequest, LeasedUpdate, MARKER_REF_PREFIX, PreparedDelivery, Push,
    PushOutcome, ReceiptOutcome, Remote, RemoteError, RemoteReading, RemoteView, Transport,
    UPSTREAM_PROTOCOL, UPSTREAM_REF_PREFIX, Upstream, UpstreamRecord, check_url,
    delivery_dispatch_message, delivery_intent_message, delivery_receipt_message, delivery_refs,
    marker_ref, marker_tag, marker_tag_id, side_branch, upstream_ref,
};
pub use error::{Rejection, RepositoryError};
pub use identity::{
    CANDIDATE_PROTOCOL, CANDIDATE_PROTOCOL_V1, CANDIDATE_PROTOCOL_V2, CANDIDATE_PROTOCOL_V3,
    DEFAULT_GIT_TIMEOUT, IDENT, MAX_CANDIDATE_COMMIT_BYTES, MAX_COMMIT_BYTES,
    MAX_REPOSITORY_PATH_BYTES, MAX_TARGET_REF_BYTES, MAX_TREE_LEVEL_BYTES, REPOSITORY_LIMITS,
    REPOSITORY_PROTOCOL, REPOSITORY_PROTOCOL_V1, RepositoryIdentity, RepositoryLimits,
    RepositorySettings, SEAL_PROTOCOL, SF_NAME_EMAIL, check_target_ref, initial_message,
    parse_repository_identity, seal_message,
};
pub use import::{
    IMPORT_PROTOCOL, IMPORT_RECORD_NAME, IMPORT_REF_PREFIX, ImportBase, ImportError, ImportRecord,
    ImportSource, ImportedBase, MAX_IMPORT_RECORD_BYTES, SourceError, TargetMove, import_message,
    import_ref,
};
pub use imported::{CommitHeads, ImportedCommit, MAX_IMPORTED_COMMIT_BYTES, commit_heads};
pub use integration::{
    INTEGRATION_PROTOCOL, INTEGRATION_REF_PREFIX, IntegrationObservation, IntegrationPayload,
    IntegrationReceipt, Invocation, MAX_PAYLOAD_BYTES, PreparedIntegration, TargetView,
    dispatch_message, integration_refs, intent_message, receipt_message,
};
pub use lookup::TreeAt;
pub use manifest::{
    CandidateManifest, CandidateProtocol, FrozenInputs, MAX_PROTECTED_PATTERNS, MAX_SCOPE_ENTRIES,
    ManifestEdit, ManifestEntry, ManifestFile, SealedCandidate, Slice, SliceBinding, TreeContents,
    candidate_idents, candidate_message, contents_digest, legacy_candidate_message,
    parse_protected,
};
pub use proposal::{
    Author, Bytes, Change, FileEdit, FileMode, MAX_FORBIDDEN, MAX_FORBIDDEN_BYTES,
    MAX_PROPOSAL_DOCUMENT_BYTES, Proposal, ProposalBounds, ProposalMessage, check_forbidden,
    check_forbidden_list, check_protected, in_scope, parse_proposal, validate_proposal,
};
pub use sf_candidate::EditedEntry;
pub use sf_candidate::closed_paths::{
    Because, ClosedPath, ClosedPaths, MAX_CLOSED, MAX_OPEN, ParsedClosedPaths,
};
pub use source::{
    SourceFault, SourceFile, SourceSnapshot, SourceText, describe_faults, is_edit_text,
};
pub use streamed::{EachLeaf, ImportedHead, LeafBytes, StreamedBase};
pub use tree_record::{TREE_RECORD_REF_PREFIX, tree_digest_of, tree_record_ref};
pub use trees::{FileListing, ListedFile};
pub use walk::WalkedLeaf;

/// The prefix of every Candidate ref.
pub const CANDIDATE_REF_PREFIX: &str = "refs/sf/candidates/";
/// How long a seal waits for a Candidate ref whose creation the store could not confirm to
/// settle (a concurrent identical seal holding Git's lock on it).
const CANDIDATE_REF_PATIENCE: Duration = Duration::from_secs(2);
/// The name of the manifest in a seal commit's tree.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The name of the proposal's canonical record in an `sf-candidate/3` seal commit's tree.
pub const PROPOSAL_NAME: &str = "proposal.json";

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
    /// The bound on each store operation: every call gets a deadline this far from its start.
    pub git_timeout: Duration,
    /// Where tests stop or fail the repository at named points; [`NoFaults`] otherwise.
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
    /// The Product the repository holds, recorded in its identity and its initial commit;
    /// follows [`ID_RULE`].
    pub product_id: String,
    /// The branch the initial commit is created on and Candidates are later integrated into;
    /// checked by [`check_target_ref`].
    pub target_ref: String,
    /// What the first base is.
    pub base: InitialBase,
    /// The repository's limits and case policy, recorded in its identity.
    pub settings: RepositorySettings,
}

/// The first base of a new repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitialBase {
    /// Files sf commits itself, in a pinned initial commit naming the Product and a nonce.
    Files(Vec<SourceFile>),
    /// A commit of the team's repository, held byte for byte: the owned repository's first
    /// base has the source's commit id and tree id.
    Imported(ImportedCommit),
    /// A base too large to hold, read twice: a directory's files or a commit of the team's
    /// repository, its leaves' identities given and their bytes read again as they are
    /// written.
    Streamed(StreamedBase),
}

pub use create::create_repository;
use create::random_nonce;

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
    /// The identity this handle was opened with, checked against the store's ownership marker.
    pub fn identity(&self) -> &RepositoryIdentity {
        &self.identity
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &RepositoryOptions {
        &self.options
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
    /// initial commit, a commit an import record publishes, or a stored commit in this
    /// Product's Candidate form (any version). Whether a Candidate ref publishes it is not
    /// checked here (export does).
    pub fn snapshot(&self, commit: &ObjectId) -> Result<SourceSnapshot, RepositoryError> {
        let _reads = self.store.read_scope();
        self.indexed_snapshot(commit).map(|(snapshot, _)| snapshot)
    }

    /// [`Self::snapshot`], also giving the trees it read. The caller holds the read scope.
    fn indexed_snapshot(
        &self,
        commit: &ObjectId,
    ) -> Result<(SourceSnapshot, TreeIndex), RepositoryError> {
        let tree = self.factory_tree(commit)?;
        let (files, trees) = source::read_tree_indexed(
            self.store.as_ref(),
            tree,
            &self.identity.settings(),
            &format!("commit {commit}"),
            self.deadline(),
        )?;
        Ok((
            SourceSnapshot {
                commit: *commit,
                tree,
                files,
            },
            trees,
        ))
    }

    /// The tree of `commit`, which must be a factory commit of this repository (see
    /// [`Self::snapshot`]); nothing of the tree is read.
    pub(crate) fn factory_tree(&self, commit: &ObjectId) -> Result<ObjectId, RepositoryError> {
        if *commit != self.identity.initial
            && let Some(tree) = self.imported_tree(commit)?
        {
            return Ok(tree);
        }
        let what = format!("commit {commit}");
        // An imported initial commit may carry a signature; a Candidate commit its
        // proposal's message.
        let budget = if *commit == self.identity.initial {
            MAX_IMPORTED_COMMIT_BYTES
        } else {
            MAX_CANDIDATE_COMMIT_BYTES
        };
        let answer = self
            .store
            .read_verified(&[*commit], budget, self.deadline())
            .map_err(|error| match error {
                crate::contracts::ObjectStoreError::Limit { .. } => not_factory(commit),
                crate::contracts::ObjectStoreError::Corrupt { what: detail } => {
                    RepositoryError::corrupt(format!("{what}: {detail}"))
                }
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
        if object.kind != ObjectKind::Commit {
            return Err(not_factory(commit));
        }
        let decoded = git_object::decode_commit(&object.body);
        if *commit == self.identity.initial {
            self.initial_tree(
                commit,
                &object.body,
                decoded.as_ref().filter(|decoded| decoded.is_by(IDENT)),
            )
        } else {
            match decoded {
                Some(decoded)
                    if manifest::is_candidate_commit(&decoded, &self.identity.product_id) =>
                {
                    Ok(decoded.tree)
                }
                _ => Err(not_factory(commit)),
            }
        }
    }

    /// The tree of the initial commit, which the identity pins by id: either sf's own
    /// initial commit (no parent, the Product's initial message with this identity's nonce),
    /// or a commit imported byte for byte from the team's repository. Either way its bytes
    /// hash to the pinned id, so only its form is checked here.
    fn initial_tree(
        &self,
        commit: &ObjectId,
        body: &[u8],
        decoded: Option<&git_object::Commit>,
    ) -> Result<ObjectId, RepositoryError> {
        let expected = identity::initial_message(&self.identity.product_id, &self.identity.nonce);
        match decoded {
            Some(decoded) if decoded.parents.is_empty() && decoded.message == expected => {
                Ok(decoded.tree)
            }
            // sf's own form with anything else can only be a tampered initial commit.
            Some(_) => Err(RepositoryError::corrupt(format!(
                "the pinned initial commit {commit} is not as created"
            ))),
            None => commit_heads(body).map(|heads| heads.tree).map_err(|rule| {
                RepositoryError::corrupt(format!(
                    "the pinned initial commit {commit} is not a commit sf can hold: {rule}"
                ))
            }),
        }
    }
}

fn not_factory(commit: &ObjectId) -> RepositoryError {
    RepositoryError::invalid(
        format!("commit {commit}"),
        "is not a factory commit of this repository",
    )
}
