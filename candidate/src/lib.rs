//! sf-candidate: what a sealed Candidate is, as records: the repository identity, the
//! proposal and its rules (scope, protected and closed paths, forbidden constructs, bounds),
//! the Candidate manifest and the frozen inputs it is sealed for, the source trees and tree
//! records a seal writes, and the repository's typed errors.
//!
//! It reads and writes nothing but bytes given to it: the repository (sf-host) seals,
//! exports and integrates with these records, and the collector (sf-collector) reads a
//! sealed Candidate through them. Being its own crate, its sources are in the collector's
//! closure, and nothing of integration, delivery or import is.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// The paths the records are written against, as the host names them.
pub(crate) use sf_contracts as contracts;
pub(crate) use sf_contracts::{canonical, git_object, path_glob, snapshot};

pub mod closed_paths;
pub mod edited;
pub mod error;
pub mod identity;
pub mod manifest;
pub mod proposal;
pub mod source;
pub mod tree_record;

pub use closed_paths::{Because, ClosedPath, ClosedPaths, MAX_CLOSED, MAX_OPEN, ParsedClosedPaths};
pub use edited::EditedEntry;
pub use error::{Rejection, RepositoryError};
pub use identity::{
    CANDIDATE_PROTOCOL, CANDIDATE_PROTOCOL_V1, CANDIDATE_PROTOCOL_V2, CANDIDATE_PROTOCOL_V3,
    DEFAULT_GIT_TIMEOUT, IDENT, MAX_CANDIDATE_COMMIT_BYTES, MAX_COMMIT_BYTES,
    MAX_REPOSITORY_PATH_BYTES, MAX_TARGET_REF_BYTES, MAX_TREE_LEVEL_BYTES, REPOSITORY_LIMITS,
    REPOSITORY_PROTOCOL, REPOSITORY_PROTOCOL_V1, RepositoryIdentity, RepositoryLimits,
    RepositorySettings, SEAL_PROTOCOL, SF_NAME_EMAIL, check_target_ref, initial_message,
    parse_repository_identity, seal_message,
};
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
pub use sf_contracts::grammar::{ID_RULE, is_valid_id};
pub use source::{SourceFault, SourceFile, SourceSnapshot, SourceText, describe_faults};
pub use tree_record::{TREE_RECORD_REF_PREFIX, tree_digest_of, tree_record_ref};
