//! The Executor conformance suite against sandbox-exec with the shell runtime, one test per
//! case, twice: the backend linked statically, and its plugin library
//! (sf-sandbox-exec-plugin) loaded through sf-host's loader and executor adapter.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sf_host::plugin::{PluginExecutor, load};
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};
use sf_test_support::build::{plugin_library, strip_group_write};
use sf_test_support::executor::ShellHarness;

/// The launcher cargo built for this crate's tests; sf refuses one that others may write.
fn launcher() -> PathBuf {
    let launcher = PathBuf::from(env!("CARGO_BIN_EXE_sf-sandbox-launcher"));
    strip_group_write(&launcher);
    launcher
}

/// sandbox-exec linked into this test.
fn linked_harness() -> ShellHarness {
    let mut config = SandboxConfig::new(RuntimeConfig::shell());
    config.launcher = Some(launcher());
    let executor = SandboxExecutor::new(config).unwrap_or_else(|error| panic!("{error}"));
    ShellHarness(Arc::new(executor))
}

/// `libsf_sandbox_exec_plugin.so` and the launcher beside it, built once per test process.
fn library() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let library = plugin_library(
            &["sf-sandbox-exec-plugin", "sf-sandbox-exec"],
            &["--bin", "sf-sandbox-launcher"],
            "sf_sandbox_exec_plugin",
        );
        strip_group_write(&library.with_file_name("sf-sandbox-launcher"));
        library
    })
}

/// sandbox-exec loaded as a plugin with `runtime = "sh"` and no launcher configured: the
/// plugin finds the one beside its own library.
fn loaded_harness() -> ShellHarness {
    let plugin = load(library()).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "sandbox-exec");
    let mut section = sf_sdk::serde_json::Map::new();
    section.insert("runtime".into(), "sh".into());
    let executor = PluginExecutor::new(&plugin, "sandbox-exec", &section)
        .unwrap_or_else(|error| panic!("{error}"));
    ShellHarness(Arc::new(executor))
}

mod linked {
    sf_sdk::executor_conformance!(super::linked_harness);
}

mod loaded {
    sf_sdk::executor_conformance!(super::loaded_harness);
}
