//! git-cli as a plugin: its configuration (`[object_store] type = "git-cli"`), exported
//! through the sdk's `export_plugin!` for programs (like `sf`) that load it as a library at
//! run time. A program that links this crate and registers the same type with its own
//! configuration machinery reads a section the same way.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sf_contracts::ObjectStoreError;

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
