//! What verifying a dependency environment costs before a run: the full re-hash
//! (`EnvironmentStore::verify`, what every collection paid before stamps, and what `sf env
//! show` still does) against the stamped verification (`verify_for_use`: the tree listed
//! through descriptors and its stamps compared with those a full re-hash recorded), side by
//! side, alternating, with the median of each and their ratio. A benchmark program that
//! prints numbers, never a timed test.
//!
//! ```text
//! cargo run --release -p sf-examples --example environment_verify -- [--rounds N] [DIR]
//! ```
//!
//! DIR (default `/usr/lib/python3.11`, Python's standard library: about 1,500 entries and
//! 50 MB on this machine kind) is copied once into a store in a temporary directory, removed
//! at the end. N defaults to 15.

use std::error::Error;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sf_host::environment_store::{EnvironmentLimits, EnvironmentStore};
use sf_test_support::bench::{load_average, median};

fn main() -> Result<(), Box<dyn Error>> {
    let mut rounds = 15;
    let mut source = PathBuf::from("/usr/lib/python3.11");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .ok_or("--rounds needs a number")?
                    .parse()
                    .map_err(|error| format!("--rounds: {error}"))?;
            }
            dir if !dir.starts_with('-') => source = PathBuf::from(dir),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    // The store is read by the sandbox's user in real use: a directory every user can search.
    let dir = tempfile::Builder::new()
        .prefix("sf-environment-verify-")
        .tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let store = EnvironmentStore::open(&dir.path().join("store"))?;
    let entry = store.add("bench", &source, EnvironmentLimits::default())?;
    // The first verification for a run re-hashes whole and records the stamps.
    store.verify_for_use(&entry.digest)?;

    let (mut whole, mut stamped) = (Vec::new(), Vec::new());
    let time = |verify: &dyn Fn() -> Result<(), Box<dyn Error>>| {
        let started = Instant::now();
        verify().map(|()| started.elapsed())
    };
    let load_before = load_average();
    for _ in 0..rounds {
        whole.push(time(&|| {
            store.verify(&entry.digest)?;
            Ok(())
        })?);
        stamped.push(time(&|| {
            store.verify_for_use(&entry.digest)?;
            Ok(())
        })?);
    }
    let ms = |value: Duration| value.as_secs_f64() * 1e3;
    let (whole, stamped) = (median(whole), median(stamped));
    println!(
        "{}: {} files, {} bytes; median of {rounds} rounds, alternating",
        source.display(),
        entry.files,
        entry.bytes
    );
    println!(
        "  {} cores, load average {load_before} before, {} after",
        std::thread::available_parallelism()?,
        load_average()
    );
    println!(
        "  full re-hash (verify, the baseline)   {:>9.2} ms",
        ms(whole)
    );
    println!(
        "  stamped (verify_for_use)              {:>9.2} ms  {:>5.2}× the full re-hash",
        ms(stamped),
        stamped.as_secs_f64() / whole.as_secs_f64()
    );
    Ok(())
}
