//! Runnable programs, one per contract: see examples/. What more than one of them needs to
//! set up lives here.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sf_host::contracts::ObjectStoreFactory;
use sf_host::plugin::{LoadedPlugin, PluginObjectStoreFactory, load};

pub mod scale;

/// `target/<profile>`, the directory above the running example's (`target/<profile>/examples`),
/// where `cargo build -p sf-git-cli` leaves the plugin.
pub fn default_plugin_dir() -> Result<PathBuf, Box<dyn Error>> {
    Ok(std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot find target/<profile> above this program")?
        .to_path_buf())
}

/// A loaded plugin and the object-store factory it serves.
pub type PluginStore = (Arc<LoadedPlugin>, Arc<dyn ObjectStoreFactory>);

/// The git-cli plugin in `dir`, loaded as `sf` loads it, and its object-store factory with
/// the default configuration. The error says how to build the plugin when it is missing.
pub fn git_cli_plugin(dir: &Path) -> Result<PluginStore, Box<dyn Error>> {
    let library = dir.join(format!(
        "{}sf_git_cli{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let plugin = load(&library).map_err(|error| {
        format!("{error}\n(build it first: cargo build --release -p sf-git-cli)")
    })?;
    let factory: Arc<dyn ObjectStoreFactory> = Arc::new(PluginObjectStoreFactory::new(
        &plugin,
        "git-cli",
        &Default::default(),
    )?);
    Ok((plugin, factory))
}
