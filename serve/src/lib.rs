//! sf-serve: `sf serve`, one landing service for many agents. Proposals arrive over an HTTP
//! API ([`api`]), are stored in a durable queue ([`queue`]) before they are accepted, and each
//! repository's worker ([`worker`]) seals, collects, judges, integrates and delivers them one
//! after another through the application layer's use cases ([`steps`]); the pages
//! ([`pages`]) show the queue, a proposal's report and the metrics.
//!
//! The HTTP stack (axum over hyper and tokio) lives in this crate and its `sf-serve` program,
//! which `sf serve` runs in its place, so that the `sf` binary, sf-host and sf-app never link
//! an async runtime.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod api;
pub mod envelope;
pub mod listen;
pub mod pages;
pub mod private_file;
pub mod queue;
pub mod state;
pub mod steps;
pub mod tls;
pub mod tokens;
pub mod worker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use sf_app::Backends;
use sf_host::plugin::config::Config;
use sf_host::plugin::serve_config::ServeSettings;

/// Runs the server configured by the sf.toml at `config` until the process ends; an error
/// (of the configuration, the tokens, the TLS files, a Slice, the state directory, the
/// address) is printed before anything listens.
pub fn main(config: Option<PathBuf>) -> ExitCode {
    main_with_faults(config, Arc::new(sf_host::fault::NoFaults))
}

/// [`main`] with a fault hook: how tests kill the server at a named point of a landing.
pub fn main_with_faults(
    config: Option<PathBuf>,
    faults: Arc<dyn sf_host::fault::FaultPoints>,
) -> ExitCode {
    match start(config, faults) {
        Ok(never) => match never {},
        Err(error) => {
            eprintln!("sf serve: error: {error}");
            ExitCode::from(2)
        }
    }
}

/// What never returns.
enum Never {}

/// Checks everything, then serves.
fn start(
    config: Option<PathBuf>,
    faults: Arc<dyn sf_host::fault::FaultPoints>,
) -> Result<Never, String> {
    let Some(path) = config else {
        return Err(
            "--config FILE is required: sf serve is configured by the [serve] section \
                    of an sf.toml (see docs/serve.md)"
                .into(),
        );
    };
    let loaded = Config::load(Some(&path)).map_err(|error| error.to_string())?;
    let Some(settings) = loaded.serve().cloned() else {
        return Err(format!(
            "{}: has no [serve] section; add one (listen, state, tokens, [[serve.repository]]: \
             see docs/serve.md)",
            path.display()
        ));
    };
    let tokens = tokens::Tokens::load(&settings.tokens)?;
    let tls = settings.tls.as_ref().map(tls::acceptor).transpose()?;
    let slices = slices_of(&settings)?;
    state_dir(&settings.state)?;
    // SQLite in the state directory, or PostgreSQL with the postgres evidence store: opened
    // here so that a database that cannot be reached, or lacks the tables, stops the server
    // before it listens.
    let opener = queue::Opener::new(&loaded, &settings.state)?;
    let queue = opener.open()?;
    // A Slice's oats checks are staged by the sf-oats program beside this one, as `sf` does.
    let mut backends =
        Backends::new(Some(path.clone())).with_capabilities(Arc::new(sf_app::capabilities::SfOats));
    backends.faults = faults;
    let backends = Arc::new(backends);
    let activity = Arc::new(worker::Activity::default());
    for repository in &settings.repositories {
        let (backends, repository, state, activity, opener) = (
            Arc::clone(&backends),
            repository.clone(),
            settings.state.clone(),
            Arc::clone(&activity),
            opener.clone(),
        );
        std::thread::Builder::new()
            .name(format!("worker {}", repository.name))
            .spawn(move || worker::run(backends, repository, state, opener, activity))
            .map_err(|error| format!("cannot start a worker: {error}"))?;
    }
    let server = Arc::new(api::Server {
        settings: settings.clone(),
        tokens,
        queue: Mutex::new(queue),
        slices,
        activity,
        config: Some(path),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_io()
        .enable_time()
        .build()
        .map_err(|error| format!("cannot start the HTTP runtime: {error}"))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .map_err(|error| {
                format!(
                    "[serve] listen {}: cannot listen ({error})",
                    settings.listen
                )
            })?;
        let address = listener
            .local_addr()
            .map_err(|error| format!("the listening address: {error}"))?;
        // The one line a supervisor (or a test) reads to know where the API is.
        let scheme = if tls.is_some() { "https" } else { "http" };
        println!("sf serve: listening on {scheme}://{address}");
        listen::serve(listener, api::router(server), tls).await?;
        Err("the HTTP server stopped".into())
    })
}

/// Each repository's Slices by id, each opened as a frozen Slice: a Slice that is not frozen,
/// or two with one id, stop the server before it starts.
fn slices_of(
    settings: &ServeSettings,
) -> Result<BTreeMap<String, BTreeMap<String, PathBuf>>, String> {
    let mut all = BTreeMap::new();
    for repository in &settings.repositories {
        let mut slices = BTreeMap::new();
        for dir in &repository.slices {
            let slice = sf_app::slice_dir::SliceDir::open(dir).map_err(|error| {
                format!(
                    "[[serve.repository]] {:?} slices: {}: {} (freeze it with `sf slice freeze`)",
                    repository.name,
                    dir.display(),
                    error.message
                )
            })?;
            let id = slice.frozen.record.id.to_string();
            if slices.insert(id.clone(), dir.clone()).is_some() {
                return Err(format!(
                    "[[serve.repository]] {:?} slices: two Slices have the id {id:?}; a \
                     proposal names its Slice by id, so keep one",
                    repository.name
                ));
            }
        }
        all.insert(repository.name.clone(), slices);
    }
    Ok(all)
}

/// Creates the state directory (private), or checks that it is a directory no one else may
/// change: whoever can write the queue can land what they like.
fn state_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| {
                format!(
                    "[serve] state {}: cannot be created ({error})",
                    dir.display()
                )
            })?;
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|error| format!("[serve] state {}: cannot be read ({error})", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "[serve] state {}: not a directory; name a directory (it is created if missing)",
            dir.display()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "[serve] state {}: mode {:o} lets others change the queue; run `chmod 700 {}`",
            dir.display(),
            meta.mode() & 0o777,
            dir.display()
        ));
    }
    Ok(())
}
