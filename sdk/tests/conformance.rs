//! The sdk's own backends pass their contracts' conformance suites, one test per case: the
//! in-memory ObjectStore, the in-memory EvidenceStore and the scripted Executor.

use std::sync::{Arc, Mutex};

use sf_sdk::canonical::Digest;
use sf_sdk::conformance::evidence_store;
use sf_sdk::conformance::executor::{self, Behaviour, Program, scripted_program};
use sf_sdk::contracts::{EvidenceStore, Executor};
use sf_sdk::testing::{InMemoryEvidenceStore, ScriptedExecutor};
use sf_test_support::object_store::PrivateDirHarness;

mod in_memory_object_store {
    sf_sdk::object_store_conformance!(super::PrivateDirHarness::in_memory);
}

/// In-memory evidence stores, each of which the harness can corrupt through its test hook.
struct MemoryHarness(Mutex<Vec<Arc<InMemoryEvidenceStore>>>);

impl evidence_store::Harness for MemoryHarness {
    fn fresh_store(&self) -> Arc<dyn EvidenceStore> {
        let store = Arc::new(InMemoryEvidenceStore::new());
        self.0.lock().unwrap().push(store.clone());
        store
    }

    fn corrupt(&self, store: &Arc<dyn EvidenceStore>, id: &Digest) -> bool {
        let stores = self.0.lock().unwrap();
        stores
            .iter()
            .find(|made| std::ptr::addr_eq(Arc::as_ptr(made), Arc::as_ptr(store)))
            .is_some_and(|made| made.flip_last_byte(id))
    }
}

mod in_memory_evidence_store {
    sf_sdk::evidence_store_conformance!(|| super::MemoryHarness(Default::default()));
}

/// The scripted executor, running the programs of its own little interpreter.
struct Scripted(ScriptedExecutor);

impl executor::Harness for Scripted {
    fn executor(&self) -> &dyn Executor {
        &self.0
    }

    fn program(&self, behaviour: &Behaviour) -> Program {
        scripted_program(behaviour)
    }
}

mod scripted_executor {
    sf_sdk::executor_conformance!(|| super::Scripted(super::ScriptedExecutor::new()));
}
