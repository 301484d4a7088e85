//! The plugin host: the C ABI a plugin library exports, the framed messages that cross it, the
//! loader that checks and opens libraries, the adapters that implement the contracts over a
//! loaded plugin, the plugin path, and `sf.toml` configuration with typetag-registered
//! compiled-in backends.
//!
//! A plugin is found through its manifest file on the plugin path (the directory of the `sf`
//! executable, then `SF_PLUGIN_PATH`), checked before it is opened, opened once and never
//! unloaded, checked again through its entry table, and then used only through the adapters'
//! trait implementations ([`object_store_adapter`], [`executor_adapter`]). See
//! docs/plugins.md.
//!
//! Modules, one job each:
//! - [`abi`]: the exported symbol, the entry table, status codes and buffers;
//! - [`message`]: the framing (JSON header plus raw byte sections);
//! - [`protocol`]: messages every contract shares (plugin errors, panics, deadlines);
//! - [`object_store_protocol`]: the `object-store` contract's requests, answers and errors;
//! - [`executor_protocol`]: the `executor` contract's requests, answers and errors;
//! - [`manifest`]: the manifest record and its file beside the library;
//! - [`loader`]: checking and opening a library, instances and raw calls;
//! - [`object_store_adapter`]: `ObjectStoreFactory` and `ObjectStore` over a plugin;
//! - [`executor_adapter`]: `Executor` over a plugin, with cancellation across the boundary;
//! - [`search`]: the plugin path and discovery of manifests;
//! - [`config`]: `sf.toml`, typetag registration and tag resolution;
//! - [`error`]: the typed errors.

pub mod abi;
pub mod config;
pub mod error;
pub mod executor_adapter;
pub mod executor_protocol;
pub mod loader;
pub mod manifest;
pub mod message;
pub mod object_store_adapter;
pub mod object_store_protocol;
pub mod protocol;
pub mod search;

pub use config::{
    Config, ConfigError, ConfigOrigin, DEFAULT_CONFIG, ExecutorBackend, ObjectStoreBackend,
    compiled_executor_tags, compiled_object_store_tags,
};
pub use error::PluginError;
pub use executor_adapter::PluginExecutor;
pub use loader::{Instance, LoadedPlugin, load};
pub use manifest::PluginManifest;
pub use object_store_adapter::{PluginObjectStore, PluginObjectStoreFactory};
pub use search::{Discovered, PLUGIN_PATH_ENV, PluginPath};

/// The contracts this sf can instantiate from a plugin. A manifest may list others (from a
/// newer sf); they are reported, never instantiated.
pub const KNOWN_CONTRACTS: &[&str] =
    &[object_store_protocol::CONTRACT, executor_protocol::CONTRACT];
