//! What the sdk does alike for every contract it exports: an instance handed to the host is a
//! [`Served`], which answers the host's calls on it; a contract's constructors make one
//! ([`Exported`]); and a call's outcome is the answer, the contract's error or a plugin-level
//! refusal. Each contract's module implements these for its trait objects and nothing else.

use std::ffi::c_void;

use sf_plugin_abi::message::MessageError;
use sf_plugin_abi::protocol::{self, PluginErrorReply, WireContract};

use super::not_made::{ConstructorError, NotMade};
use super::{Constructor, PluginConfig};

/// How a call ended, before it is written to the reply.
pub(crate) enum Outcome {
    /// The answer.
    Ok(Vec<u8>),
    /// The contract's error.
    ContractError(Vec<u8>),
    /// The plugin could not serve the call.
    PluginError(PluginErrorReply),
}

/// A refusal of the plugin itself (`code` is one of [`protocol`]'s).
pub(crate) fn plugin_error(code: &str, message: impl Into<String>) -> Outcome {
    Outcome::PluginError(PluginErrorReply::new(code, message))
}

/// A contract method's result as a call's outcome: the encoded answer, or the error of
/// contract `C`.
pub(crate) fn answered<C: WireContract>(result: Result<Vec<u8>, C::Error>) -> Outcome {
    match result {
        Ok(bytes) => Outcome::Ok(bytes),
        Err(error) => Outcome::ContractError(protocol::encode_error(&error)),
    }
}

/// Serves a call of contract `C` whose request `decoded` holds: `answer` answers it, and one
/// the contract does not know (`unsupported-method`) or that does not decode
/// (`malformed-request`) is refused.
pub(crate) fn serve<C: WireContract, R>(
    method: &str,
    decoded: Result<Option<R>, MessageError>,
    answer: impl FnOnce(R) -> Outcome,
) -> Outcome {
    match decoded {
        Ok(Some(request)) => answer(request),
        Ok(None) => plugin_error(
            protocol::UNSUPPORTED_METHOD,
            format!("{method:?} is not a method of the {} contract", C::NAME),
        ),
        Err(error) => plugin_error(protocol::MALFORMED_REQUEST, format!("{method}: {error}")),
    }
}

/// An instance handed to the host (a factory, a store, an Executor, a gate, a hold, ...): it
/// answers the calls the host makes on it.
pub(crate) trait Served: Send + Sync {
    /// Answers `method` with `request`; a method that makes an instance hands it to `place`.
    fn serve(&self, method: &str, request: &[u8], place: Place) -> Outcome;
}

/// An instance as the entry table's functions hold it, behind a thin pointer.
pub(crate) type Handle = Box<dyn Served>;

/// Hands `instance` to the host as a raw handle, which `drop_instance` takes back.
pub(crate) fn into_raw(instance: Handle) -> *mut c_void {
    Box::into_raw(Box::new(instance)).cast()
}

/// Where a call that makes an instance (a factory's store, a fence's hold) hands it to the
/// host: the call's out-pointer.
pub(crate) struct Place(*mut *mut c_void);

impl Place {
    /// The place behind `new_instance`, the `call` argument.
    pub(crate) fn new(new_instance: *mut *mut c_void) -> Self {
        Self(new_instance)
    }

    /// Whether the host gave no place (it always gives one; a null is a malformed request).
    pub(crate) fn is_missing(&self) -> bool {
        self.0.is_null()
    }

    /// Hands `instance` to the host; without a place, drops it.
    pub(crate) fn put(self, instance: Handle) {
        if !self.0.is_null() {
            // SAFETY: the host passes a valid out-pointer for the call (checked non-null).
            unsafe { self.0.write(into_raw(instance)) };
        }
    }
}

/// A contract the sdk exports: the trait object its constructors make, and the instance that
/// serves it. Declared with `exported!`.
pub(crate) trait Exported: WireContract<Error: 'static> {
    /// The contract's trait object (`dyn Gate`).
    type Object: ?Sized + Made<Error = Self::Error> + 'static;

    /// The instance serving what a constructor made.
    fn instance(made: Box<Self::Object>) -> Handle;
}

/// A contract's trait object, made by its constructors: names the contract's error, which a
/// constructor may answer with ([`ConstructorError::Contract`]).
pub trait Made {
    /// The contract's error (`EvidenceStoreError` for `dyn EvidenceStore`).
    type Error;
}

/// A value boxed as the trait object `T` of a contract: what lets one generic
/// [`constructed`] serve every `export_plugin!` group.
pub trait Boxed<T: ?Sized> {
    /// `self` as a `Box<T>`.
    fn boxed(self) -> Box<T>;
}

/// Declares what the constructors of contract `$contract` make: `dyn $trait`, [`Boxed`] from
/// every implementation of it, and served as it is (or by the instance `$instance` makes of
/// it); and that they may refuse with its error `$error` ([`Made`]).
macro_rules! exported {
    ($contract:ty: $trait:path, $error:ty) => {
        exported!($contract: $trait, $error, |made| Box::new(made));
    };
    ($contract:ty: $trait:path, $error:ty, $instance:expr) => {
        impl $crate::export::served::Made for dyn $trait {
            type Error = $error;
        }

        impl From<$error> for $crate::export::ConstructorError<$error> {
            fn from(error: $error) -> Self {
                Self::Contract(error)
            }
        }

        impl $crate::export::served::Exported for $contract {
            type Object = dyn $trait;

            fn instance(made: Box<dyn $trait>) -> $crate::export::served::Handle {
                ($instance)(made)
            }
        }

        impl<X: $trait + 'static> $crate::export::served::Boxed<dyn $trait> for X {
            fn boxed(self) -> Box<dyn $trait> {
                Box::new(self)
            }
        }
    };
}
pub(crate) use exported;

/// A constructor's result as the contract's trait object, its error as the contract's own
/// or as words: what `export_plugin!` wraps every constructor in.
pub fn constructed<T: ?Sized + Made, X: Boxed<T>, E: Into<ConstructorError<T::Error>>>(
    made: Result<X, E>,
) -> Result<Box<T>, ConstructorError<T::Error>> {
    made.map(X::boxed).map_err(Into::into)
}

/// One contract's constructors, by tag, as `instantiate` finds them and the manifest check
/// lists them.
pub(crate) trait Exports {
    /// The contract's name.
    fn contract(&self) -> &'static str;
    /// The tags that have a constructor.
    fn tags(&self) -> Vec<&'static str>;
    /// The instance the constructor of `tag` makes from `config`; `None` without one.
    fn make(&self, tag: &str, config: &PluginConfig) -> Option<Result<Handle, NotMade>>;
}

/// The constructors of contract `C`, one `PluginDefinition` field.
pub(crate) struct Constructors<C: Exported>(pub &'static [(&'static str, Constructor<C::Object>)]);

impl<C: Exported> Exports for Constructors<C> {
    fn contract(&self) -> &'static str {
        C::NAME
    }

    fn tags(&self) -> Vec<&'static str> {
        self.0.iter().map(|(tag, _)| *tag).collect()
    }

    fn make(&self, tag: &str, config: &PluginConfig) -> Option<Result<Handle, NotMade>> {
        let (_, make) = self.0.iter().find(|(registered, _)| *registered == tag)?;
        Some(
            make(config)
                .map(C::instance)
                .map_err(ConstructorError::encoded),
        )
    }
}
