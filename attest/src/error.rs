//! Why an attestation cannot be made, read or trusted: one variant per refusal that `sf
//! verify` tells apart (each has its own code, and the command line its own exit status).

/// An attestation's refusal, with a message naming the input at fault and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttestError {
    /// The signing key cannot be used (unreadable, not Ed25519, encrypted, too open).
    #[error("{0}")]
    Key(String),
    /// The trusted keys file cannot be read as OpenSSH keys.
    #[error("{0}")]
    TrustedKeys(String),
    /// The envelope or its Statement is not what sf writes and reads.
    #[error("{0}")]
    Malformed(String),
    /// No signature verifies with the key its key id names.
    #[error("{0}")]
    BadSignature(String),
    /// The signatures verify, but no signer is a trusted key.
    #[error("{0}")]
    UntrustedKey(String),
    /// The Statement is about another commit (or tree).
    #[error("{0}")]
    AnotherCommit(String),
    /// The attestation does not say Verified.
    #[error("{0}")]
    NotVerified(String),
}

impl AttestError {
    /// The stable kebab-case code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Key(_) => "attest-key-invalid",
            Self::TrustedKeys(_) => "trusted-keys-invalid",
            Self::Malformed(_) => "malformed-envelope",
            Self::BadSignature(_) => "bad-signature",
            Self::UntrustedKey(_) => "untrusted-key",
            Self::AnotherCommit(_) => "another-commit",
            Self::NotVerified(_) => "not-verified",
        }
    }

    /// `malformed-envelope` with `message`.
    pub fn malformed(message: impl Into<String>) -> Self {
        Self::Malformed(message.into())
    }
}
