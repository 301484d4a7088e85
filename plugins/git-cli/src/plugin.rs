//! git-cli as a plugin: its configuration (`[object_store] type = "git-cli"`), registered
//! with typetag for programs that link this crate, and exported through the sdk's
//! `export_plugin!` for programs (like `sf`) that load it as a library at run time. Both
//! paths read the same configuration type, so a section means the same thing either way.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sf_host::contracts::{ObjectStoreError, ObjectStoreFactory};
use sf_host::plugin::ObjectStoreBackend;

use crate::{GitCliConfig, GitCliFactory};

/// The `[object_store]` section of type `git-cli`.
///
/// ```toml
/// [object_store]
/// type = "git-cli"
/// git = "/usr/bin/git"   # optional; default: the first of /usr/bin/git, /usr/local/bin/git
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitCliBackend {
    /// The Git binary to pin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<PathBuf>,
}

impl GitCliBackend {
    /// The factory this configuration describes.
    pub fn factory(&self) -> Result<GitCliFactory, ObjectStoreError> {
        GitCliFactory::new(GitCliConfig {
            git: self.git.clone(),
        })
    }
}

#[typetag::serde(name = "git-cli")]
impl ObjectStoreBackend for GitCliBackend {
    fn factory(&self) -> Result<Arc<dyn ObjectStoreFactory>, ObjectStoreError> {
        Ok(Arc::new(GitCliBackend::factory(self)?))
    }
}

fn instantiate(config: &sf_sdk::export::PluginConfig) -> Result<GitCliFactory, String> {
    let backend: GitCliBackend = config.parse()?;
    backend.factory().map_err(|error| error.to_string())
}

sf_sdk::export_plugin! {
    manifest: "sf-plugin.json",
    object_store: {
        "git-cli" => instantiate,
    },
}
