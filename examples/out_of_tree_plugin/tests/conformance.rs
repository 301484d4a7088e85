//! The ObjectStore conformance suite against the example plugin, one test per case: its
//! library loaded through sf-host's loader and adapter, as `sf` loads it.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use sf_host::plugin::{PluginObjectStoreFactory, load};
use sf_test_support::build::plugin_library;
use sf_test_support::object_store::{PrivateDirHarness, SymbolicRefs};

/// `libsf_example_out_of_tree_plugin.so`, built once per test process.
fn library() -> &'static PathBuf {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        plugin_library(
            &["sf-example-out-of-tree-plugin"],
            &[],
            "sf_example_out_of_tree_plugin",
        )
    })
}

fn loaded_harness() -> PrivateDirHarness {
    let plugin = load(library()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "example-memory");
    let factory = PluginObjectStoreFactory::new(&plugin, "example-memory", &Default::default())
        .unwrap_or_else(|error| panic!("{error}"));
    PrivateDirHarness::new(Arc::new(factory), SymbolicRefs::Unreachable)
}

mod loaded {
    sf_sdk::object_store_conformance!(super::loaded_harness, ignore: {
        compare_and_swap_refuses_a_symbolic_ref:
            "the example's roots live in the plugin's memory, out of the test's reach; the \
             in-memory store it serves passes this case linked statically (sdk/tests)",
    });
}
