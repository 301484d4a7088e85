//! Shared set-up of the oats tests: the fixture capabilities (copied into private temporary
//! directories, so tests can change them), a private state directory, and the real confined
//! Executor: sandbox-exec with the Node runtime.
//!
//! Cargo builds another package's binaries only for that package's own tests, so the first
//! test that needs the sandbox runs `cargo build -p sf-sandbox-exec --bins` (a no-op when
//! they are fresh) into the target directory this test binary lives in.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use sf_host::contracts::Executor;
use sf_oats::{Oats, OatsOptions};
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

/// The directory of the fixture capabilities.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/oats")
}

/// The sandbox launcher, built with the plugin libraries once per test binary.
pub fn launcher() -> &'static Path {
    &sf_tests::plugins::built().launcher
}

/// sandbox-exec with the Node runtime, shared by the tests of one binary.
pub fn sandbox() -> Arc<dyn Executor> {
    static SANDBOX: OnceLock<Arc<SandboxExecutor>> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let mut config = SandboxConfig::new(RuntimeConfig::node());
            config.launcher = Some(launcher().to_path_buf());
            Arc::new(
                SandboxExecutor::new(config)
                    .unwrap_or_else(|error| panic!("sandbox-exec with node configures: {error}")),
            )
        })
        .clone()
}

/// A private temporary directory (canonical, 0700).
pub fn private() -> (tempfile::TempDir, PathBuf) {
    sf_tests::private_dir()
}

/// Copies `from` into `to` (files, directories and links as they are).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let kind = entry.file_type().expect("file type");
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(
                std::fs::read_link(entry.path()).expect("readlink"),
                &target,
            )
            .expect("symlink");
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A workspace for one test: a private directory holding copies of fixtures and the state
/// directory.
pub struct Bench {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Bench {
    pub fn new() -> Self {
        let (dir, root) = private();
        Self { dir, root }
    }

    /// Copies fixture `name` to `<root>/<as_name>` and returns its path.
    pub fn fixture(&self, name: &str, as_name: &str) -> PathBuf {
        let path = self.root.join(as_name);
        copy_tree(&fixtures().join(name), &path);
        path
    }

    /// The state directory.
    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    /// Oats over the real sandbox.
    pub fn oats(&self) -> Oats {
        self.oats_with(sandbox(), OatsOptions::default())
    }

    /// Oats over `executor` with `options`.
    pub fn oats_with(&self, executor: Arc<dyn Executor>, options: OatsOptions) -> Oats {
        Oats::new(&self.state(), executor, options).expect("the state directory opens")
    }
}

/// Reads a capability's manifest as JSON.
pub fn manifest(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("oats.json")).expect("read oats.json"))
        .expect("oats.json is JSON")
}

/// Writes a capability's manifest.
pub fn write_manifest(dir: &Path, value: &Value) {
    std::fs::write(
        dir.join("oats.json"),
        serde_json::to_vec_pretty(value).expect("encode"),
    )
    .expect("write oats.json");
}
