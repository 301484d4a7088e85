//! Why a constructor made no instance, as `instantiate` answers it: the contract's own error
//! (`unavailable`, `corrupt`, …), which the host reads as that error so that its class
//! reaches the command line (ABI minor 14), or words for anything else (`instantiate-failed`,
//! or `invalid-config` once [`PluginConfig::parse`](super::PluginConfig::parse) refused the
//! fields).

use sf_contracts::error_fields::ContractError;
use sf_plugin_abi::protocol;

/// Why a constructor of a contract whose error is `E` made no instance.
///
/// A constructor returns `Result<Backend, E>` for any `E` that converts into it: a `String`
/// or `&str` (words), or the contract's own error (`EvidenceStoreError::Unavailable {..}`),
/// so `config.parse()?` and `Store::connect(&config)?` both work with `?`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConstructorError<E> {
    /// The contract's own error: the host reads it as that error, with its code.
    Contract(E),
    /// Anything else, in words: answered `instantiate-failed`.
    Failed(String),
}

impl<E> From<String> for ConstructorError<E> {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl<E> From<&str> for ConstructorError<E> {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_owned())
    }
}

impl<E: ContractError> ConstructorError<E> {
    /// The refusal as it crosses the boundary.
    pub(crate) fn encoded(self) -> NotMade {
        match self {
            Self::Contract(error) => NotMade::Contract(protocol::encode_error(&error)),
            Self::Failed(message) => NotMade::Failed(message),
        }
    }
}

/// A constructor's refusal with the contract's error already encoded: what `instantiate`
/// answers, whatever the contract.
pub(crate) enum NotMade {
    /// The contract's error, encoded by its codec.
    Contract(Vec<u8>),
    /// Words: `instantiate-failed` (or `invalid-config`).
    Failed(String),
}
