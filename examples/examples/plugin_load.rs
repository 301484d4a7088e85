//! What loading a plugin library costs: sf's loader (the library read once into a sealed
//! in-memory copy, checked there and mapped from there), the same with a pinned SHA-256 (the
//! copy hashed before it is mapped), beside the baseline of what the loader did before the
//! copy: the manifest file read and parsed, the library's path checked (metadata, canonical
//! path, owner and mode of it and of the directories above), and the file mapped by its path
//! (`dlopen`, the entry symbol's table), less its few header reads and the table's checks. Medians and ratios over side-by-side rounds; a benchmark program that prints
//! numbers, never a timed test.
//!
//! Every load is of a fresh copy of the library at a path of its own (made outside the timed
//! region, so every load maps a library not yet loaded: the loader opens each canonical path
//! once), and the three ways alternate within each round, so drift in the machine's load falls
//! on all three.
//!
//! ```text
//! cargo build --release -p sf-git-cli
//! cargo run --release -p sf-examples --example plugin_load -- [ROUNDS] [PLUGIN_DIR]
//! ```
//!
//! ROUNDS defaults to 15; PLUGIN_DIR (where `libsf_git_cli.so` and its manifest are) defaults to
//! the directory above this program's (`target/<profile>`).

use std::error::Error;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sf_host::canonical::Digest;
use sf_host::plugin::abi::{ENTRY_SYMBOL, EntryFn};
use sf_host::plugin::manifest::manifest_path;
use sf_host::plugin::{load, load_pinned, loader};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(15);
    let plugin_dir = match args.next() {
        Some(dir) => PathBuf::from(dir),
        None => sf_examples::default_plugin_dir()?,
    };
    let library = plugin_dir.join(format!(
        "{}sf_git_cli{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    let bytes = std::fs::read(&library).map_err(|error| {
        format!(
            "{}: {error}\n(build it first: cargo build --release -p sf-git-cli)",
            library.display()
        )
    })?;
    let pin = Digest::of(&bytes);
    let workdir = tempfile::Builder::new().prefix("sf-bench-").tempdir()?;
    std::fs::set_permissions(workdir.path(), std::fs::Permissions::from_mode(0o700))?;
    let root = workdir.path().canonicalize()?;

    // timings[way]: 0 by path (baseline), 1 sf's loader, 2 sf's loader with a pin.
    let mut timings: [Vec<Duration>; 3] = Default::default();
    for round in 0..rounds {
        for (way, times) in timings.iter_mut().enumerate() {
            let copy = fresh_copy(&root, &library, &format!("{round}-{way}"))?;
            let started = Instant::now();
            match way {
                0 => by_path(&copy)?,
                1 => drop(load(&copy)?),
                _ => drop(load_pinned(&copy, Some(&pin))?),
            }
            times.push(started.elapsed());
        }
    }
    let [path, sealed, pinned] = timings.map(|mut times| median(&mut times));
    println!(
        "{} ({} bytes); {rounds} loads each, medians:",
        library.display(),
        bytes.len()
    );
    println!(
        "  dlopen by path (baseline) {:>8.2} ms",
        path.as_secs_f64() * 1e3
    );
    for (label, time) in [("sealed copy", sealed), ("sealed copy, pinned", pinned)] {
        println!(
            "  {label:<25} {:>8.2} ms   ratio {:.2}",
            time.as_secs_f64() * 1e3,
            time.as_secs_f64() / path.as_secs_f64()
        );
    }
    Ok(())
}

/// A copy of the library and its manifest under a directory of its own (untimed).
fn fresh_copy(root: &Path, library: &Path, name: &str) -> Result<PathBuf, Box<dyn Error>> {
    let dir = root.join(name);
    std::fs::create_dir(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let copy = dir.join(library.file_name().ok_or("a library file name")?);
    std::fs::copy(library, &copy)?;
    std::fs::copy(manifest_path(library), manifest_path(&copy))?;
    Ok(copy)
}

/// The baseline: the loader's checks of the paths, then `dlopen` of the file by its path and
/// the entry symbol's table, never closed (as the loader keeps its libraries).
fn by_path(library: &Path) -> Result<(), Box<dyn Error>> {
    let (manifest, _) = loader::read_manifest_file(library)?;
    let meta = std::fs::metadata(library)?;
    let canonical = std::fs::canonicalize(library)?;
    loader::check_owner(&canonical, &meta, &manifest.name)?;
    let directory = canonical.parent().ok_or("a directory")?;
    loader::check_owner(directory, &std::fs::metadata(directory)?, &manifest.name)?;
    loader::check_directories_above(directory, &manifest.name)?;
    // SAFETY: the library is sf's own git-cli plugin, built by this workspace; opening it runs
    // its initialisers, as loading it does.
    let opened = unsafe {
        libloading::os::unix::Library::open(
            Some(canonical),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }?;
    // SAFETY: the symbol has the ABI's entry type; calling it returns a static table.
    let table = unsafe { (*opened.get::<EntryFn>(ENTRY_SYMBOL.as_bytes())?)() };
    if table.is_null() {
        return Err("the entry returned no table".into());
    }
    std::mem::forget(opened);
    Ok(())
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}
