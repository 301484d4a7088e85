//! What every use case is given besides its request: the configuration (`sf.toml`, or the
//! embedded defaults), resolved through the plugin path each time a backend is asked for, and
//! the fault hook tests use. Opening the repository, the executor, the evidence store, the
//! fence, the gate and the remote is done here once, for every use case.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sf_host::contracts::{AttemptFence, EvidenceStore, Executor, Gate, ObjectStoreFactory};
use sf_host::fault::{FaultPoints, NoFaults};
use sf_host::git_remote::{DEFAULT_PUSH_TIMEOUT, DEFAULT_READ_TIMEOUT, GitRemote};
use sf_host::plugin::{Config, ConfigError, PluginPath};
use sf_host::repository::{Repository, RepositoryOptions, open_repository};

use crate::capabilities::{CapabilityStager, NoCapabilities};
use crate::error::{AppError, repository_error};
use crate::input::read_identity;

/// The configured backends, opened on demand.
#[derive(Clone)]
pub struct Backends {
    /// The `sf.toml` naming each backend; `None` for the embedded defaults.
    pub config: Option<PathBuf>,
    /// The fault hook the repository and landing steps call (tests only; production never
    /// sets one).
    pub faults: Arc<dyn FaultPoints>,
    /// What stages the oats checks of a Slice (the command line's `sf-oats`); by default
    /// nothing, and every oats check is refused.
    pub capabilities: Arc<dyn CapabilityStager>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Backends {
    /// The backends `config` names (the embedded defaults when `None`), with no fault hook.
    pub fn new(config: Option<PathBuf>) -> Self {
        Self {
            config,
            faults: Arc::new(NoFaults),
            capabilities: Arc::new(NoCapabilities),
        }
    }

    /// The same backends with `capabilities` staging the oats checks.
    pub fn with_capabilities(mut self, capabilities: Arc<dyn CapabilityStager>) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// The configuration: the file, or the embedded defaults.
    pub fn config(&self) -> Result<Config, AppError> {
        Config::load(self.config.as_deref())
            .map_err(|error| AppError::new(error.code(), error.to_string()))
    }

    /// The directory of the dependency environment store: `[environments] store`, or its
    /// default (`/var/lib/sf/environments` as root, else `$HOME/.local/share/sf/environments`).
    pub fn environment_store_dir(&self) -> Result<PathBuf, AppError> {
        self.config()?.environment_store_dir().map_err(config_error)
    }

    /// The tree store's directory (`[environments] trees`, or its default).
    pub fn tree_store_dir(&self) -> Result<PathBuf, AppError> {
        self.config()?.tree_store_dir().map_err(config_error)
    }

    /// The configured ObjectStore factory, through the plugin path when the tag is a plugin's.
    pub fn object_store(&self) -> Result<Arc<dyn ObjectStoreFactory>, AppError> {
        self.config()?
            .object_store(&plugin_path()?)
            .map_err(config_error)
    }

    /// The configured Executor.
    pub fn executor(&self) -> Result<Arc<dyn Executor>, AppError> {
        self.executor_of(&self.config()?)
    }

    /// The Executor `config` names.
    pub fn executor_of(&self, config: &Config) -> Result<Arc<dyn Executor>, AppError> {
        config.executor(&plugin_path()?).map_err(config_error)
    }

    /// The configured EvidenceStore; `state_dir` is where a local store keeps its files by
    /// default (the Slice's evidence directory).
    pub fn evidence_store(&self, state_dir: &Path) -> Result<Arc<dyn EvidenceStore>, AppError> {
        self.config()?
            .evidence_store(&plugin_path()?, state_dir)
            .map_err(config_error)
    }

    /// The attempt fence that comes with the configured EvidenceStore; `fence_dir` is where
    /// the file fence keeps its files when the store brings no fence of its own.
    pub fn fence(&self, fence_dir: &Path) -> Result<Arc<dyn AttemptFence>, AppError> {
        self.config()?
            .fence(&plugin_path()?, fence_dir)
            .map_err(config_error)
    }

    /// The configured EvidenceStore, opened for reading only (nothing of sf's is created).
    pub fn existing_evidence_store(
        &self,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, AppError> {
        self.config()?
            .existing_evidence_store(&plugin_path()?, state_dir)
            .map_err(config_error)
    }

    /// The configured Gate, or the file gate reading `file` when a request's gate file
    /// (`--gate FILE`) overrides the configuration.
    pub fn gate(&self, file: Option<&Path>) -> Result<Arc<dyn Gate>, AppError> {
        let mut config = self.config()?;
        if let Some(file) = file {
            let file = std::path::absolute(file).map_err(|error| {
                AppError::new(
                    "invalid-input",
                    format!("--gate {}: {error}", file.display()),
                )
            })?;
            config.set_file_gate(&file);
        }
        config.gate(&plugin_path()?).map_err(config_error)
    }

    /// Opens the repository the identity file names, with the configured store.
    pub fn open_repository(&self, identity_file: &Path) -> Result<Repository, AppError> {
        let identity = read_identity(identity_file)?;
        let factory = self.object_store()?;
        let options = RepositoryOptions {
            faults: Arc::clone(&self.faults),
            ..RepositoryOptions::default()
        };
        open_repository(factory.as_ref(), &identity, options).map_err(|error| {
            repository_error(
                &format!(
                    "repository {} (identity {})",
                    identity.path,
                    identity_file.display()
                ),
                &error,
            )
        })
    }

    /// The team's remote as the configuration's `[delivery]` says to reach it.
    pub fn remote(&self) -> Result<GitRemote, AppError> {
        let config = self.config()?;
        let settings = config.delivery();
        let push = settings
            .push_timeout_seconds
            .map_or(DEFAULT_PUSH_TIMEOUT, Duration::from_secs);
        let read = settings
            .read_timeout_seconds
            .map_or(DEFAULT_READ_TIMEOUT, Duration::from_secs);
        Ok(GitRemote::new(None)
            .map_err(|reason| AppError::new("git-unavailable", reason))?
            .with_timeouts(read, push)
            .with_credential_helper(settings.credential_helper.clone())
            .with_ssh_command(settings.ssh_command.clone()))
    }
}

/// The plugin path from the environment.
fn plugin_path() -> Result<PluginPath, AppError> {
    PluginPath::from_env().map_err(|error| AppError::new(error.code(), error.to_string()))
}

fn config_error(error: ConfigError) -> AppError {
    AppError::new(error.code(), error.to_string())
}
