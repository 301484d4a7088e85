//! A minimal third-party ObjectStore plugin for sf, built only against `sf-sdk`.
//!
//! It serves the `object-store` contract under the tag `example-memory` with the sdk's
//! in-memory store: every repository lives in the memory of the `sf` process that made it.
//! That makes it useless for real work and ideal as an example: everything a plugin needs is
//! here, and nothing else.
//!
//! 1. `Cargo.toml`: `crate-type = ["cdylib"]`, and `sf-sdk` as the only dependency.
//! 2. `sf-plugin.json`: the manifest (name, version, ABI major, contracts and tags).
//! 3. `build.rs`: copies the manifest beside the built library, where sf checks it before it
//!    opens the library.
//! 4. This file: a constructor per tag, and `export_plugin!`.
//!
//! Load it with an `sf.toml` such as
//!
//! ```toml
//! [object_store]
//! type = "example-memory"
//! ```
//!
//! and the directory holding `libsf_example_out_of_tree_plugin.so` on `SF_PLUGIN_PATH`.

#![forbid(unsafe_code)]

use sf_sdk::export::PluginConfig;
use sf_sdk::testing::InMemoryObjectStoreFactory;

/// The configuration of `example-memory`: no fields. `deny_unknown_fields` makes a misspelt
/// key in `sf.toml` an error instead of a silent default.
#[derive(sf_sdk::serde::Deserialize)]
#[serde(crate = "sf_sdk::serde", deny_unknown_fields)]
struct MemoryConfig {}

/// Makes the backend for one `[object_store]` section.
fn memory_store(config: &PluginConfig) -> Result<InMemoryObjectStoreFactory, String> {
    let MemoryConfig {} = config.parse()?;
    Ok(InMemoryObjectStoreFactory::new())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    object_store: {
        "example-memory" => memory_store,
    },
}
