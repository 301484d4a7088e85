//! The text a panic carried, for reports: a plugin's panic reply and a conformance failure.

use std::any::Any;

/// The message of a panic `payload`: the `&str` or `String` that `panic!` was given, or a
/// fixed text for any other payload.
pub(crate) fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
