//! The ObjectStore conformance suite against every statically linked backend: the in-memory
//! store of `sf_sdk::testing` and the git-cli plugin.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use sf_sdk::conformance::object_store::{Harness, run_all};
use sf_sdk::contracts::{ObjectStore, ObjectStoreFactory, RefName};
use sf_sdk::testing::InMemoryObjectStoreFactory;

/// A harness whose fresh paths are `repo-N` inside one private, canonical temporary directory.
struct PrivateDirHarness<F> {
    factory: F,
    /// Kept so the directory lives as long as the harness.
    _dir: tempfile::TempDir,
    parent: PathBuf,
    next: AtomicU64,
}

impl<F> PrivateDirHarness<F> {
    fn new(factory: F) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod 0700 on the temporary directory");
        let parent = dir
            .path()
            .canonicalize()
            .expect("the temporary directory's canonical path");
        Self {
            factory,
            _dir: dir,
            parent,
            next: AtomicU64::new(0),
        }
    }
}

/// How a backend's root is tampered with to hold a symbolic ref.
trait Tamper {
    fn make_symbolic_ref(&self, store: &dyn ObjectStore, name: &RefName, target: &str) -> bool;
}

impl Tamper for InMemoryObjectStoreFactory {
    fn make_symbolic_ref(&self, store: &dyn ObjectStore, name: &RefName, target: &str) -> bool {
        self.store_at(&store.root().path)
            .is_some_and(|store| store.set_symbolic_ref(name, target))
    }
}

impl Tamper for sf_git_cli::GitCliFactory {
    fn make_symbolic_ref(&self, store: &dyn ObjectStore, name: &RefName, target: &str) -> bool {
        // A loose ref file holding `ref: <target>`, as `git symbolic-ref` would write it.
        let path = store.root().path.join(name.as_str());
        std::fs::write(path, format!("ref: {target}\n")).is_ok()
    }
}

impl<F: ObjectStoreFactory + Tamper> Harness for PrivateDirHarness<F> {
    fn factory(&self) -> &dyn ObjectStoreFactory {
        &self.factory
    }

    fn fresh_path(&self) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.parent.join(format!("repo-{n}"))
    }

    fn make_symbolic_ref(&self, store: &dyn ObjectStore, name: &RefName, target: &str) -> bool {
        self.factory.make_symbolic_ref(store, name, target)
    }
}

#[test]
fn in_memory_object_store_conforms() {
    run_all(&PrivateDirHarness::new(InMemoryObjectStoreFactory::new()));
}

#[test]
fn git_cli_object_store_conforms() {
    let factory = sf_git_cli::GitCliFactory::new(sf_git_cli::GitCliConfig::default())
        .unwrap_or_else(|error| panic!("the git-cli backend failed to start: {error}"));
    run_all(&PrivateDirHarness::new(factory));
}
