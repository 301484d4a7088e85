//! The ObjectStore conformance harness: any factory, fresh roots `repo-N` in one private,
//! canonical temporary directory, and the backend's own way to plant a symbolic ref.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sf_sdk::conformance::object_store::Harness;
use sf_sdk::contracts::{ObjectStore, ObjectStoreFactory, RefName};
use sf_sdk::testing::InMemoryObjectStoreFactory;

/// How a test plants a symbolic ref in a store's root from outside, as tampering would (sf
/// never writes one).
pub enum SymbolicRefs {
    /// The root keeps refs as loose files, as Git does: a file `<root>/<name>` holding
    /// `ref: <target>`, which is what `git symbolic-ref` writes.
    LooseFiles,
    /// Through the test hook of the in-memory factory that made the store.
    InMemory(InMemoryObjectStoreFactory),
    /// The roots are out of the test's reach (a plugin's memory): the symbolic-ref case
    /// cannot be run and fails if it is.
    Unreachable,
}

/// The ObjectStore conformance harness over `factory`.
pub struct PrivateDirHarness {
    factory: Arc<dyn ObjectStoreFactory>,
    symbolic_refs: SymbolicRefs,
    /// Kept so the directory lives as long as the harness.
    _dir: tempfile::TempDir,
    parent: PathBuf,
    next: AtomicU64,
}

impl PrivateDirHarness {
    /// A harness over `factory`, planting symbolic refs as `symbolic_refs` says.
    pub fn new(factory: Arc<dyn ObjectStoreFactory>, symbolic_refs: SymbolicRefs) -> Self {
        let (dir, parent) = crate::private_dir();
        Self {
            factory,
            symbolic_refs,
            _dir: dir,
            parent,
            next: AtomicU64::new(0),
        }
    }

    /// A harness over a new in-memory store factory ([`InMemoryObjectStoreFactory`]).
    pub fn in_memory() -> Self {
        let factory = InMemoryObjectStoreFactory::new();
        Self::new(Arc::new(factory.clone()), SymbolicRefs::InMemory(factory))
    }
}

impl Harness for PrivateDirHarness {
    fn factory(&self) -> &dyn ObjectStoreFactory {
        self.factory.as_ref()
    }

    fn fresh_path(&self) -> PathBuf {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.parent.join(format!("repo-{n}"))
    }

    fn make_symbolic_ref(&self, store: &dyn ObjectStore, name: &RefName, target: &str) -> bool {
        match &self.symbolic_refs {
            SymbolicRefs::LooseFiles => std::fs::write(
                store.root().path.join(name.as_str()),
                format!("ref: {target}\n"),
            )
            .is_ok(),
            SymbolicRefs::InMemory(factory) => factory
                .store_at(&store.root().path)
                .is_some_and(|store| store.set_symbolic_ref(name, target)),
            SymbolicRefs::Unreachable => false,
        }
    }
}
