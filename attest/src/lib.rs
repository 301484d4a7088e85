//! sf-attest: evidence that travels with the commit. A landed Candidate's attestation is an
//! in-toto Statement (v1) about the delivered commit with sf's `sf-landing/1` predicate
//! ([`statement`]), signed with an Ed25519 key in a DSSE envelope ([`dsse`], [`keys`]), and
//! checked anywhere with only the signer's public key ([`check`]).
//!
//! Nothing here reads a repository or an evidence store: the use cases build the predicate
//! from what sf decided, and store and fetch the envelope's bytes.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod dsse;
pub mod error;
pub mod keys;
pub mod statement;

use sf_contracts::canonical::Digest;
use sf_contracts::git_object::ObjectId;

pub use dsse::{Envelope, IN_TOTO_PAYLOAD_TYPE};
pub use error::AttestError;
pub use keys::{SigningKey, TrustedKey, TrustedKeys};
pub use statement::{Landing, PREDICATE_TYPE, STATEMENT_TYPE, Statement};

/// The envelope of `statement` signed with `key`: its bytes.
pub fn sign(statement: &Statement, key: &SigningKey) -> Result<Vec<u8>, AttestError> {
    let mut envelope = Envelope {
        payload_type: IN_TOTO_PAYLOAD_TYPE.into(),
        payload: statement.to_bytes()?,
        signatures: Vec::new(),
    };
    key.sign(&mut envelope);
    envelope.to_bytes()
}

/// What a checked attestation says, and who signed it.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The Statement.
    pub statement: Statement,
    /// The trusted key whose signature verified.
    pub signer: TrustedKey,
}

/// The commit an attestation must be about: its id, its tree's id and `sf-tree/1` digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The commit.
    pub commit: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// Its tree's `sf-tree/1` digest.
    pub sf_tree: Digest,
}

/// Checks the envelope `bytes` in this order, each refusal its own error: the envelope's
/// shape and payload type (`malformed-envelope`), a signature by a trusted key
/// (`bad-signature`, `untrusted-key`) before anything of the payload is read, the Statement's
/// shape (`malformed-envelope`), its subject against `expected` (`another-commit`), and a
/// Verified outcome (`not-verified`).
pub fn check(
    bytes: &[u8],
    trusted: &TrustedKeys,
    expected: &Expected,
) -> Result<Checked, AttestError> {
    let envelope = Envelope::parse(bytes)?;
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(AttestError::malformed(format!(
            "the envelope's payloadType is {:?}, not {IN_TOTO_PAYLOAD_TYPE:?}",
            envelope.payload_type
        )));
    }
    let signer = trusted.signer(&envelope)?.clone();
    let statement = Statement::parse(&envelope.payload)?;
    let subject = statement.subject();
    if subject.git_commit != expected.commit {
        return Err(AttestError::AnotherCommit(format!(
            "the attestation is about commit {}, not {}: it was moved from another commit's ref",
            subject.git_commit, expected.commit
        )));
    }
    if subject.git_tree != expected.tree || subject.sf_tree != expected.sf_tree.hex() {
        return Err(AttestError::AnotherCommit(format!(
            "the attestation names tree {} (sf-tree/1 {}), but commit {} has tree {} (sf-tree/1 \
             {})",
            subject.git_tree,
            subject.sf_tree,
            expected.commit,
            expected.tree,
            expected.sf_tree.hex()
        )));
    }
    let verdict = &statement.predicate.verdict;
    if verdict.outcome != "verified" {
        return Err(AttestError::NotVerified(format!(
            "the attestation of commit {} says {} (Verdict {}), not verified",
            expected.commit, verdict.outcome, verdict.digest
        )));
    }
    Ok(Checked { statement, signer })
}

#[cfg(test)]
mod tests;
