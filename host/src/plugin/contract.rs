//! What the host does alike for every contract it reaches through plugins: one call on an
//! instance, whose answer, contract error or failure comes back as the contract's own value.
//!
//! A contract's adapter module implements [`HostContract`] for the contract's marker (the
//! [`WireContract`] its protocol module declares): what its adapter keeps, the ABI minor the
//! contract came with, and how a plugin's failure reads as the contract's error. Everything
//! else here, and in [`super::backend`], is written once.

use std::fmt;

use super::error::PluginError;
use super::loader::{CallReply, Instance};
use super::message::MessageError;
use super::protocol::{self, DecodedError, WireContract};

/// A contract the host reaches through plugins.
pub trait HostContract: WireContract + Sized {
    /// What an adapter keeps besides its instance (an Executor: the ids of its runs).
    type State: Default + fmt::Debug + Send + Sync;

    /// The lowest ABI minor of a plugin the host instantiates the contract from. For a
    /// contract added after ABI 1.1, the minor that brought it, so that an older plugin whose
    /// manifest lists it anyway is refused before it is asked; 0 for the contracts of ABI 1.0
    /// and 1.1, which the host has never checked.
    const REQUIRES_MINOR: u32;

    /// The contract's `unavailable` with `reason`: the backend cannot serve the call.
    fn unavailable(reason: String) -> Self::Error;

    /// A failure of the plugin rather than of its backend (a panic, an unsupported method, a
    /// refused request, a malformed status): `unavailable`, unless the contract says otherwise.
    fn failed(error: PluginError) -> Self::Error {
        Self::unavailable(error.to_string())
    }

    /// A reply that is neither the method's answer nor a contract error (`error` is a
    /// [`PluginError::MalformedMessage`]): as [`HostContract::failed`], unless the contract
    /// says otherwise.
    fn malformed(error: PluginError) -> Self::Error {
        Self::failed(error)
    }

    /// A contract error whose code this sf does not know (from a plugin of a newer minor): still
    /// an error, so still "nothing started", in the plugin's own words.
    fn unknown_code(plugin: &str, method: &str, code: &str, message: &str) -> Self::Error {
        Self::unavailable(format!(
            "plugin {plugin} refused {method} with an error this sf does not know ({code}): \
             {message}"
        ))
    }
}

/// Why a reply is not the answer of its method.
#[derive(Debug)]
pub enum BadReply {
    /// The answer's message does not decode.
    Message(MessageError),
    /// The call made an instance where the method makes none, or none where it makes one.
    Instance(&'static str),
}

impl fmt::Display for BadReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Message(error) => error.fmt(f),
            Self::Instance(what) => f.write_str(what),
        }
    }
}

impl From<MessageError> for BadReply {
    fn from(error: MessageError) -> Self {
        Self::Message(error)
    }
}

/// What most adapters say of an instance made by a method that makes none.
pub const UNEXPECTED_INSTANCE: &str = "the answer carries a new instance";

/// The reader of a method that makes no instance: `decode` reads the answer, and an instance
/// the call made anyway is refused with `refusal` (and dropped, which releases it).
pub fn answer_only<T>(
    refusal: &'static str,
    decode: impl FnOnce(&[u8]) -> Result<T, MessageError>,
) -> impl FnOnce(&[u8], Option<Instance>) -> Result<T, BadReply> {
    move |bytes, new_instance| match new_instance {
        Some(_) => Err(BadReply::Instance(refusal)),
        None => Ok(decode(bytes)?),
    }
}

/// Calls `method` of contract `C` on `instance` with `request`. `read` reads the answer and
/// the instance the call made, if any; a contract error comes back as itself, and any other
/// failure as `C` says ([`HostContract::failed`], [`HostContract::malformed`]).
pub fn call<C: HostContract, T>(
    instance: &Instance,
    method: &str,
    request: &[u8],
    read: impl FnOnce(&[u8], Option<Instance>) -> Result<T, BadReply>,
) -> Result<T, C::Error> {
    let plugin = instance.plugin().name();
    let malformed = |detail: String| C::malformed(malformed_message(plugin, method, detail));
    instance
        .call(method, request, |reply| match reply {
            CallReply::Answer {
                bytes,
                new_instance,
            } => read(bytes, new_instance).map_err(|bad| malformed(bad.to_string())),
            CallReply::ContractError { bytes } => Err(match protocol::decode_error(bytes) {
                Ok(decoded) => contract_error::<C>(plugin, method, decoded),
                Err(error) => malformed(error.to_string()),
            }),
        })
        .map_err(C::failed)?
}

/// A decoded contract error of `plugin`'s `method` as the contract's error.
pub fn contract_error<C: HostContract>(
    plugin: &str,
    method: &str,
    decoded: DecodedError<C::Error>,
) -> C::Error {
    match decoded {
        DecodedError::Known(error) => error,
        DecodedError::Unknown { code, message } => C::unknown_code(plugin, method, &code, &message),
    }
}

/// How the host reads the contract error an `instantiate` of contract `C` answered (from a
/// plugin of ABI minor [`protocol::INSTANTIATE_ERROR_SINCE_MINOR`] or later): a code this
/// host knows keeps its class ([`PluginError::Backend`]: `unavailable`, `corrupt`, …), a code
/// it does not know is the plugin's refusal (`plugin-refused`), and a reply that does not
/// decode is malformed.
pub fn instantiate_error<C: WireContract>(plugin: &str, during: &str, bytes: &[u8]) -> PluginError {
    use crate::contracts::error_fields::ContractError as _;
    match protocol::decode_error::<C::Error>(bytes) {
        Ok(DecodedError::Known(error)) => PluginError::Backend {
            plugin: plugin.to_owned(),
            during: during.to_owned(),
            code: error.code(),
            message: error.to_string(),
        },
        Ok(DecodedError::Unknown { code, message }) => PluginError::Refused {
            plugin: plugin.to_owned(),
            during: during.to_owned(),
            code,
            message,
        },
        Err(error) => malformed_message(plugin, during, error.to_string()),
    }
}

/// `plugin` answered `method` with something that is not its reply, as `detail` says.
pub fn malformed_message(plugin: &str, method: &str, detail: impl Into<String>) -> PluginError {
    PluginError::MalformedMessage {
        plugin: plugin.to_owned(),
        during: method.to_owned(),
        detail: detail.into(),
    }
}
