//! Exporting contract implementations as an sf plugin library: the [`export_plugin!`](crate::export_plugin) macro
//! and the runtime it expands to.
//!
//! A plugin crate builds as a `cdylib`, keeps its manifest in a file (conventionally
//! `sf-plugin.json` beside its `Cargo.toml`), copies that file beside the built library in a
//! build script, and invokes the macro once at its crate root:
//!
//! ```text
//! sf_sdk::export_plugin! {
//!     manifest: "sf-plugin.json",
//!     object_store: {
//!         "example-memory" => make_store,
//!     },
//!     executor: {                      // each group optional, in this order; at least one
//!         "my-executor" => make_executor,
//!     },
//!     evidence_store: {
//!         "my-evidence" => make_evidence_store,
//!     },
//!     gate: {
//!         "my-gate" => make_gate,
//!     },
//!     fence: {                         // the attempt fence (ABI minor 9)
//!         "my-fence" => make_fence,
//!     },
//! }
//!
//! fn make_store(config: &sf_sdk::export::PluginConfig) -> Result<MyFactory, String> { … }
//! fn make_executor(config: &sf_sdk::export::PluginConfig) -> Result<MyExecutor, String> { … }
//! fn make_evidence_store(
//!     config: &sf_sdk::export::PluginConfig,
//! ) -> Result<MyStore, ConstructorError<EvidenceStoreError>> {
//!     let config: MyConfig = config.parse()?;      // words: invalid-config
//!     Ok(MyStore::connect(&config)?)                // EvidenceStoreError: its own code
//! }
//! fn make_gate(config: &sf_sdk::export::PluginConfig) -> Result<MyGate, String> { … }
//! fn make_fence(config: &sf_sdk::export::PluginConfig) -> Result<MyFence, String> { … }
//! ```
//!
//! A constructor's error is words (`String`, `&str`: the host reports `plugin-refused`) or,
//! through [`ConstructorError`], the contract's own error: a store whose server is down
//! answers `EvidenceStoreError::Unavailable`, one whose schema was tampered with
//! `EvidenceStoreError::Corrupt`, and the host reads it as that error (ABI minor 14), so a
//! script can tell "retry later" from "stop" by `sf`'s exit status.
//!
//! A fence's `acquire` hands the host a new instance, the hold (as an object store factory's
//! `open` hands it a store); the host's `drop_instance` of a hold drops it, which releases it.
//!
//! An executor instance also serves `cancel`: the host calls it from another thread while a
//! `run` of the same instance is in flight, naming the run by the id the `run` request
//! carried; the runtime here keeps one `CancelToken` per run in flight and cancels it.
//!
//! Modules, one job each: `entry` (the table's C functions), `served` (what every contract's
//! instances share: answering a call, making an instance, a constructor's product),
//! `not_made` (a constructor's refusal as `instantiate` answers it), and one
//! module per contract serving its trait (`object_store`, `executor`, `evidence_store`,
//! `gate`, `fence`). [`PluginDefinition`]'s `exports` is the list of contracts the sdk
//! exports.
//!
//! The macro generates the `sf_plugin_entry_v1` symbol and its static table (magic, ABI
//! version, sdk version, the manifest compiled in with `include_str!`, and the four C
//! functions). Every function runs the plugin's code under `catch_unwind`: a panic becomes a
//! `STATUS_PANIC` reply and the host keeps running. A plugin built with `panic = "abort"` could
//! not do that, so the macro refuses to compile under it. It also generates a unit test that
//! checks that the manifest lists exactly the exported contracts and tags.
//!
//! The functions here are public so that the macro can call them from the plugin crate; a
//! plugin never needs to call them itself.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use sf_contracts::{AttemptFence, EvidenceStore, Executor, Gate, ObjectStoreFactory};
use sf_plugin_abi::PluginManifest;
use sf_plugin_abi::evidence_store_protocol::EvidenceStoreContract;
use sf_plugin_abi::executor_protocol::ExecutorContract;
use sf_plugin_abi::fence_protocol::FenceContract;
use sf_plugin_abi::gate_protocol::GateContract;
use sf_plugin_abi::object_store_protocol::ObjectStoreContract;
use sf_plugin_abi::protocol;

mod entry;
mod evidence_store;
mod executor;
mod fence;
mod gate;
mod not_made;
mod object_store;
mod served;

pub use entry::{call, drop_instance, entry_table, free_buf, instantiate};
pub use not_made::ConstructorError;
pub use served::{Boxed, Made, constructed};
pub use sf_plugin_abi::abi::{
    ABI_MAJOR, ABI_MINOR, MAGIC, PluginEntryV1, SfBuffer, SfBytes, SfStr, StaticEntry,
};

use served::{Constructors, Exports, Outcome, plugin_error};

/// The version of this sdk, recorded in every plugin's table.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Makes a backend of a contract, whose trait object is `T`, from a configuration; refuses
/// with the contract's own error or with words ([`ConstructorError`]).
pub type Constructor<T> = fn(&PluginConfig) -> Result<Box<T>, ConstructorError<<T as Made>::Error>>;

/// Makes an ObjectStore factory from a configuration.
pub type ObjectStoreConstructor = Constructor<dyn ObjectStoreFactory>;

/// Makes an Executor from a configuration.
pub type ExecutorConstructor = Constructor<dyn Executor>;

/// Makes an EvidenceStore from a configuration.
pub type EvidenceStoreConstructor = Constructor<dyn EvidenceStore>;

/// Makes a Gate from a configuration.
pub type GateConstructor = Constructor<dyn Gate>;

/// Makes an AttemptFence from a configuration.
pub type FenceConstructor = Constructor<dyn AttemptFence>;

/// What a plugin exports: its manifest and one constructor per tag of each contract.
pub struct PluginDefinition {
    /// The manifest, byte for byte as in the manifest file.
    pub manifest: &'static str,
    /// `(tag, constructor)` for the `object-store` contract.
    pub object_stores: &'static [(&'static str, ObjectStoreConstructor)],
    /// `(tag, constructor)` for the `executor` contract.
    pub executors: &'static [(&'static str, ExecutorConstructor)],
    /// `(tag, constructor)` for the `evidence-store` contract.
    pub evidence_stores: &'static [(&'static str, EvidenceStoreConstructor)],
    /// `(tag, constructor)` for the `gate` contract.
    pub gates: &'static [(&'static str, GateConstructor)],
    /// `(tag, constructor)` for the `fence` contract.
    pub fences: &'static [(&'static str, FenceConstructor)],
}

impl PluginDefinition {
    /// Every contract's constructors: the one list of the contracts the sdk exports.
    fn exports(&self) -> Vec<Box<dyn Exports>> {
        vec![
            Box::new(Constructors::<ObjectStoreContract>(self.object_stores)),
            Box::new(Constructors::<ExecutorContract>(self.executors)),
            Box::new(Constructors::<EvidenceStoreContract>(self.evidence_stores)),
            Box::new(Constructors::<GateContract>(self.gates)),
            Box::new(Constructors::<FenceContract>(self.fences)),
        ]
    }

    /// Checks that the manifest is valid, of this sdk's ABI, and lists exactly the contracts
    /// and tags that have constructors.
    pub fn check(&self) -> Result<PluginManifest, String> {
        let manifest = PluginManifest::parse(self.manifest.as_bytes())
            .map_err(|error| format!("the manifest is invalid: {error}"))?;
        if manifest.abi != ABI_MAJOR {
            return Err(format!(
                "the manifest says abi {}, and this sf-sdk builds ABI {ABI_MAJOR}",
                manifest.abi
            ));
        }
        let mut exported: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for exports in self.exports() {
            let mut tags: Vec<String> = exports.tags().into_iter().map(str::to_owned).collect();
            if !tags.is_empty() {
                tags.sort();
                exported.insert(exports.contract().to_owned(), tags);
            }
        }
        let mut listed = manifest.contracts.clone();
        for tags in listed.values_mut() {
            tags.sort();
        }
        if listed != exported {
            return Err(format!(
                "the manifest lists {listed:?}, and the plugin exports {exported:?}"
            ));
        }
        Ok(manifest)
    }
}

/// A plugin instance's configuration: its section of `sf.toml` as JSON.
#[derive(Clone, Debug)]
pub struct PluginConfig {
    tag: String,
    fields: serde_json::Map<String, serde_json::Value>,
    /// Set when [`PluginConfig::parse`] refused the fields: a constructor failing in words
    /// after that is answered `invalid-config` (the user's sf.toml is at fault), not
    /// `instantiate-failed`.
    refused: std::cell::Cell<bool>,
}

impl PluginConfig {
    /// The configuration `instantiate` was given: a JSON object with a string `type`.
    fn from_json(config: &[u8]) -> Result<Self, Outcome> {
        let mut fields: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(config)
            .map_err(|error| {
                plugin_error(
                    protocol::INVALID_CONFIG,
                    format!("the configuration is not a JSON object: {error}"),
                )
            })?;
        let Some(serde_json::Value::String(tag)) = fields.remove("type") else {
            return Err(plugin_error(
                protocol::INVALID_CONFIG,
                "the configuration has no type",
            ));
        };
        Ok(Self {
            tag,
            fields,
            refused: std::cell::Cell::new(false),
        })
    }

    /// The tag (`type`) the instance is made for.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The section's fields, without `type`.
    pub fn fields(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.fields
    }

    /// The fields (without `type`) as a `T`. Use `#[serde(deny_unknown_fields)]` on `T` so
    /// that a misspelt key is refused rather than ignored.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_value(serde_json::Value::Object(self.fields.clone())).map_err(|error| {
            self.refused.set(true);
            format!("invalid configuration for type {:?}: {error}", self.tag)
        })
    }

    /// Whether [`PluginConfig::parse`] refused the fields.
    fn was_refused(&self) -> bool {
        self.refused.get()
    }
}

/// Exports a plugin: see the [module documentation](self).
///
/// ```text
/// sf_sdk::export_plugin! {
///     manifest: "sf-plugin.json",            // relative to the crate's Cargo.toml
///     object_store: {                        // optional
///         "my-store" => my_store_constructor, // fn(&PluginConfig) -> Result<F, E>
///     },
///     executor: {                            // optional
///         "my-executor" => my_executor_constructor, // fn(&PluginConfig) -> Result<X, E>
///     },
///     evidence_store: {                      // optional
///         "my-evidence" => my_store_constructor, // fn(&PluginConfig) -> Result<S, E>
///     },
///     gate: {                                // optional
///         "my-gate" => my_gate_constructor,  // fn(&PluginConfig) -> Result<G, E>
///     },
///     fence: {                               // optional
///         "my-fence" => my_fence_constructor, // fn(&PluginConfig) -> Result<F, E>
///     },
/// }
/// ```
#[macro_export]
macro_rules! export_plugin {
    (
        manifest: $manifest:literal
        $(, object_store: { $($store_tag:literal => $store_constructor:expr),+ $(,)? })?
        $(, executor: { $($executor_tag:literal => $executor_constructor:expr),+ $(,)? })?
        $(, evidence_store: { $($evidence_tag:literal => $evidence_constructor:expr),+ $(,)? })?
        $(, gate: { $($gate_tag:literal => $gate_constructor:expr),+ $(,)? })?
        $(, fence: { $($fence_tag:literal => $fence_constructor:expr),+ $(,)? })?
        $(,)?
    ) => {
        #[cfg(panic = "abort")]
        ::core::compile_error!(
            "sf plugins must be built with panic = \"unwind\": export_plugin! catches every \
             panic so that the host keeps running, which panic = \"abort\" makes impossible. \
             Set panic = \"unwind\" in the [profile] sections of the workspace's Cargo.toml."
        );

        #[doc(hidden)]
        static __SF_PLUGIN_DEFINITION: $crate::export::PluginDefinition =
            $crate::export::PluginDefinition {
                manifest: ::core::include_str!(::core::concat!(
                    ::core::env!("CARGO_MANIFEST_DIR"),
                    "/",
                    $manifest
                )),
                object_stores: $crate::__sf_plugin_constructors!(
                    ObjectStoreConstructor $($(, $store_tag => $store_constructor)+)?
                ),
                executors: $crate::__sf_plugin_constructors!(
                    ExecutorConstructor $($(, $executor_tag => $executor_constructor)+)?
                ),
                evidence_stores: $crate::__sf_plugin_constructors!(
                    EvidenceStoreConstructor $($(, $evidence_tag => $evidence_constructor)+)?
                ),
                gates: $crate::__sf_plugin_constructors!(
                    GateConstructor $($(, $gate_tag => $gate_constructor)+)?
                ),
                fences: $crate::__sf_plugin_constructors!(
                    FenceConstructor $($(, $fence_tag => $fence_constructor)+)?
                ),
            };

        #[doc(hidden)]
        unsafe extern "C" fn __sf_plugin_instantiate(
            contract: $crate::export::SfBytes,
            config: $crate::export::SfBytes,
            instance: *mut *mut ::core::ffi::c_void,
            reply: *mut $crate::export::SfBuffer,
        ) -> i32 {
            // SAFETY: the host calls this through the ABI with valid arguments.
            unsafe {
                $crate::export::instantiate(
                    &__SF_PLUGIN_DEFINITION,
                    contract,
                    config,
                    instance,
                    reply,
                )
            }
        }

        #[doc(hidden)]
        static __SF_PLUGIN_ENTRY: $crate::export::StaticEntry =
            $crate::export::StaticEntry($crate::export::entry_table(
                ::core::include_str!(::core::concat!(
                    ::core::env!("CARGO_MANIFEST_DIR"),
                    "/",
                    $manifest
                )),
                __sf_plugin_instantiate,
            ));

        /// The sf plugin entry point: returns this library's static entry table.
        #[unsafe(no_mangle)]
        pub extern "C" fn sf_plugin_entry_v1() -> *const $crate::export::PluginEntryV1 {
            &__SF_PLUGIN_ENTRY.0
        }

        #[cfg(test)]
        #[test]
        fn sf_plugin_manifest_lists_exactly_the_exports() {
            if let Err(problem) = __SF_PLUGIN_DEFINITION.check() {
                panic!("export_plugin!: {problem}");
            }
        }
    };
}

/// One `export_plugin!` group as a `PluginDefinition` field: each tag with its constructor,
/// whose result [`constructed`] boxes as the contract's trait object (`$constructor` names
/// the field's constructor type).
#[doc(hidden)]
#[macro_export]
macro_rules! __sf_plugin_constructors {
    ($constructor:ident $(, $tag:literal => $make:expr)*) => {
        &[$((
            $tag,
            (|config: &$crate::export::PluginConfig| {
                $crate::export::constructed(($make)(config))
            }) as $crate::export::$constructor,
        )),*]
    };
}
