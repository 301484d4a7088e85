//! sf-plugin-abi: what crosses the boundary between sf and a plugin library, and nothing
//! else: the exported symbol and its entry table ([`abi`]), the framing of every request and
//! reply ([`message`]), the messages every contract shares ([`protocol`]), each contract's
//! requests, answers and errors on the wire ([`object_store_protocol`],
//! [`executor_protocol`], [`evidence_store_protocol`], [`gate_protocol`],
//! [`fence_protocol`]), and the manifest
//! a library ships beside it ([`manifest`]).
//!
//! Both sides use this crate: the host (to call a plugin and check its answers) and the sdk
//! (to answer as a plugin). It depends on sf-contracts only; it loads nothing and starts
//! nothing.

#![deny(missing_docs)]

use sf_contracts as contracts;

pub mod abi;
pub mod evidence_store_protocol;
pub mod executor_protocol;
pub mod fence_protocol;
pub mod gate_protocol;
pub mod manifest;
pub mod message;
pub mod object_store_protocol;
pub mod protocol;

pub use manifest::PluginManifest;
