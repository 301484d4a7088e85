//! The ObjectStore conformance suite against the git-cli store, statically linked.

use std::sync::Arc;

use sf_sdk::conformance::object_store::run_all;
use sf_test_support::object_store::{PrivateDirHarness, SymbolicRefs};

#[test]
fn git_cli_object_store_conforms() {
    let factory = sf_git_cli::GitCliFactory::new(sf_git_cli::GitCliConfig::default())
        .unwrap_or_else(|error| panic!("the git-cli backend failed to start: {error}"));
    run_all(&PrivateDirHarness::new(
        Arc::new(factory),
        SymbolicRefs::LooseFiles,
    ));
}
