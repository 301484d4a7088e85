//! git-cli and sandbox-exec compiled into the test programs: their configuration types
//! registered with sf-host's typetag machinery under the same tags their plugin libraries
//! export, so that a configuration resolves to the static backend without any plugin path.
//!
//! The backend crates depend on the contracts only and cannot name sf-host's registration
//! traits; this crate links both, as a program that wants them compiled in would. Naming
//! [`LinkedGitCli`] or [`LinkedSandboxExec`] keeps the registration linked into a test.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sf_git_cli::GitCliBackend;
use sf_host::contracts::{Executor, ExecutorError, ObjectStoreError, ObjectStoreFactory};
use sf_host::plugin::{ExecutorBackend, ObjectStoreBackend};
use sf_sandbox_exec::plugin::SandboxExecBackend;

/// `[object_store] type = "git-cli"`, compiled in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LinkedGitCli(pub GitCliBackend);

#[typetag::serde(name = "git-cli")]
impl ObjectStoreBackend for LinkedGitCli {
    fn factory(&self) -> Result<Arc<dyn ObjectStoreFactory>, ObjectStoreError> {
        Ok(Arc::new(self.0.factory()?))
    }
}

/// `[executor] type = "sandbox-exec"`, compiled in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LinkedSandboxExec(pub SandboxExecBackend);

#[typetag::serde(name = "sandbox-exec")]
impl ExecutorBackend for LinkedSandboxExec {
    fn executor(&self) -> Result<Arc<dyn Executor>, ExecutorError> {
        Ok(Arc::new(self.0.executor()?))
    }
}
