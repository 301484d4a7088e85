//! The ObjectStore conformance suite against git-cli, one test per case, twice: the backend
//! linked statically, and the plugin library loaded through sf-host's loader and adapter.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use sf_git_cli::{GitCliConfig, GitCliFactory};
use sf_host::plugin::{PluginObjectStoreFactory, load};
use sf_test_support::build::plugin_library;
use sf_test_support::object_store::{PrivateDirHarness, SymbolicRefs};

/// git-cli linked into this test, with its default (pinned, root-owned) git binary.
fn linked_harness() -> PrivateDirHarness {
    let factory = GitCliFactory::new(GitCliConfig::default())
        .unwrap_or_else(|error| panic!("the git-cli backend failed to start: {error}"));
    PrivateDirHarness::new(Arc::new(factory), SymbolicRefs::LooseFiles)
}

/// `libsf_git_cli.so`, built once per test process.
fn library() -> &'static PathBuf {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| plugin_library(&["sf-git-cli"], &[], "sf_git_cli"))
}

/// git-cli loaded as a plugin, configured with an empty section (the defaults).
fn loaded_harness() -> PrivateDirHarness {
    let plugin = load(library()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "git-cli");
    let factory = PluginObjectStoreFactory::new(&plugin, "git-cli", &Default::default())
        .unwrap_or_else(|error| panic!("{error}"));
    PrivateDirHarness::new(Arc::new(factory), SymbolicRefs::LooseFiles)
}

mod linked {
    sf_sdk::object_store_conformance!(super::linked_harness);
}

mod loaded {
    sf_sdk::object_store_conformance!(super::loaded_harness);
}
