//! Runnable programs, one per contract: see examples/. What more than one of them needs to
//! set up lives here.

#![forbid(unsafe_code)]

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sf_host::contracts::ObjectStoreFactory;
use sf_host::plugin::{LoadedPlugin, PluginObjectStoreFactory, load};

pub mod scale;
pub mod sum;
pub mod work_slice;

/// The arguments of the benchmarks that time the `sf` binary: how many rounds, which `sf`
/// (default: the one in `target/<profile>`), and another build's `sf` to compare with.
pub struct SfBenchArgs {
    /// How many rounds (at least 1).
    pub rounds: usize,
    /// The `sf` binary measured.
    pub sf: PathBuf,
    /// A baseline build's `sf`, measured in the same rounds.
    pub compare: Option<PathBuf>,
}

impl SfBenchArgs {
    /// Reads `[--rounds N] [--sf SF] [--compare SF]` from the command line.
    pub fn parse(default_rounds: usize) -> Result<Self, Box<dyn Error>> {
        let mut rounds = default_rounds;
        let mut sf = None;
        let mut compare = None;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--rounds" => rounds = args.next().ok_or("--rounds needs N")?.parse()?,
                "--sf" => sf = Some(PathBuf::from(args.next().ok_or("--sf needs SF")?)),
                "--compare" => {
                    compare = Some(PathBuf::from(args.next().ok_or("--compare needs SF")?));
                }
                _ => {
                    return Err(format!(
                        "unknown argument {arg}; [--rounds N] [--sf SF] [--compare SF]"
                    )
                    .into());
                }
            }
        }
        if rounds == 0 {
            return Err("--rounds must be at least 1".into());
        }
        let sf = match sf {
            Some(path) => path,
            None => default_plugin_dir()?.join("sf"),
        };
        Ok(Self {
            rounds,
            sf,
            compare,
        })
    }
}

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
