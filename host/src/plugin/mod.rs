//! The plugin host: the C ABI a plugin library exports, the framed messages that cross it, the
//! loader that checks and opens libraries, the adapters that implement the contracts over a
//! loaded plugin, the plugin path, and `sf.toml` configuration with typetag-registered
//! compiled-in backends.
//!
//! A plugin is found through its manifest file on the plugin path (the directory of the `sf`
//! executable, then `SF_PLUGIN_PATH`), checked before it is opened, opened once and never
//! unloaded, checked again through its entry table, and then used only through the adapters'
//! trait implementations ([`object_store_adapter`], [`executor_adapter`],
//! [`evidence_store_adapter`], [`gate_adapter`], [`fence_adapter`]). See
//! docs/plugins.md, whose "Adding a contract" lists what a new contract touches.
//!
//! Modules, one job each:
//! - [`abi`], [`message`], [`protocol`], [`manifest`] and one `*_protocol` module per
//!   contract: the wire, re-exported from sf-plugin-abi;
//! - [`library_file`]: a library's bytes read once into a sealed in-memory copy (whole as its
//!   ELF headers say, unchangeable), which is what is checked, pinned and mapped;
//! - [`loader`]: checking and opening a library, instances and raw calls;
//! - [`registry`]: every contract this host knows, registered once;
//! - [`contract`]: what every contract's calls share: a reply, a contract error or a failure
//!   as the contract's own value ([`HostContract`]);
//! - [`backend`]: [`PluginBackend`], a backend of one contract in a plugin, which every
//!   adapter is;
//! - [`object_store_adapter`]: `ObjectStoreFactory` and `ObjectStore` over a plugin;
//! - [`executor_adapter`]: `Executor` over a plugin, with cancellation across the boundary;
//! - [`evidence_store_adapter`]: `EvidenceStore` over a plugin, its answers re-verified;
//! - [`gate_adapter`]: `Gate` over a plugin, every failure a refusal;
//! - [`fence_adapter`]: `AttemptFence` over a plugin, each hold an instance of its own;
//! - [`search`]: the plugin path and discovery of manifests;
//! - [`config`]: `sf.toml`, typetag registration and tag resolution ([`Configured`]);
//! - [`builtin`]: sf-host's own compiled-in backends (`sqlite`, `open`, `file`);
//! - [`error`]: the typed errors.
//!
//! Each adapter module is the whole host side of its contract: its [`HostContract`], its
//! trait over [`PluginBackend`], and for a contract configured by a section of its own, its
//! [`Configured`] with the typetag trait its compiled-in backends register with.

// The wire modules as sf-plugin-abi declares them, a new contract's among them.
pub use sf_plugin_abi::*;

pub mod backend;
pub mod builtin;
pub mod config;
pub mod contract;
pub mod error;
pub mod evidence_store_adapter;
pub mod executor_adapter;
pub mod fence_adapter;
pub mod gate_adapter;
pub mod library_file;
pub mod loader;
pub mod object_store_adapter;
pub mod registry;
pub mod search;
pub mod serve_config;

pub use backend::PluginBackend;
pub use config::{
    Config, ConfigError, ConfigOrigin, Configured, DeliverySettings, EvidenceStoreBackend,
    ExecutorBackend, GateBackend, ObjectStoreBackend, compiled_evidence_store_tags,
    compiled_executor_tags, compiled_gate_tags, compiled_object_store_tags, compiled_tags_of,
    default_config,
};
pub use contract::HostContract;
pub use error::PluginError;
pub use evidence_store_adapter::PluginEvidenceStore;
pub use executor_adapter::PluginExecutor;
pub use fence_adapter::PluginFence;
pub use gate_adapter::PluginGate;
pub use loader::{Instance, LoadedPlugin, load, load_pinned};
pub use object_store_adapter::{PluginObjectStore, PluginObjectStoreFactory};
pub use registry::KNOWN_CONTRACTS;
pub use search::{Discovered, PLUGIN_PATH_ENV, PluginPath};
