//! sf-worker, the program `sf worker` runs: a Remote Workers API bot for a REAPI cluster
//! (BuildGrid serves the API; Buildbarn and others run their own workers, see
//! docs/remote-execution.md) that runs each leased Action sf made in sandbox-exec, with the
//! runtime and confinement profile it advertises, and attests what it enforced.
//!
//! At start it describes its runtime and profile, puts the description in the cluster's CAS
//! and prints its digest with the `[executor]` section that sends runs to it, then serves
//! leases until it is stopped. Modules: `bot` (the session), `claim` (a lease's claim to run
//! its Action once), `lease` (one lease), `program`
//! (a program by reference's base, placed for the sandbox), `store` (the local content
//! store).

#![forbid(unsafe_code)]

mod bot;
mod claim;
mod lease;
mod program;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use sf_contracts::Executor;
use sf_reapi::cas::Cas;
use sf_reapi::description::WorkerDescription;
use sf_reapi::digest;
use sf_sandbox_exec::plugin::SandboxExecBackend;
use tonic::transport::Endpoint;

/// A Remote Workers API bot that runs sf's Actions in sandbox-exec.
#[derive(Debug, Parser)]
#[command(name = "sf worker", version)]
struct Args {
    /// The cluster's gRPC endpoint, http://HOST:PORT
    #[arg(long)]
    endpoint: String,
    /// The REAPI instance name
    #[arg(long, default_value = "")]
    instance: String,
    /// An sf.toml whose [executor] section (type "sandbox-exec") configures the sandbox
    /// (default: sandbox-exec's defaults, runtime sh)
    #[arg(long, value_name = "FILE")]
    sandbox: Option<PathBuf>,
    /// This worker's name in the cluster (default: host name and process id)
    #[arg(long)]
    id: Option<String>,
    /// Append one JSON line per event of a run (started, ended, refused) to FILE
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The most bytes of recent blobs kept in memory
    #[arg(long, default_value_t = 512 * 1024 * 1024)]
    cache_bytes: u64,
    /// Put the description in the CAS, print it, and exit
    #[arg(long)]
    describe: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sf worker: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The sandbox the `--sandbox` file configures.
fn sandbox(file: Option<&PathBuf>) -> Result<sf_sandbox_exec::SandboxExecutor, String> {
    let backend = match file {
        None => SandboxExecBackend::default(),
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|error| format!("--sandbox {}: {error}", file.display()))?;
            let mut table: toml::Table = text
                .parse()
                .map_err(|error| format!("--sandbox {}: {error}", file.display()))?;
            let mut section = match table.remove("executor") {
                Some(toml::Value::Table(section)) if table.is_empty() => section,
                _ => {
                    return Err(format!(
                        "--sandbox {}: the file holds one [executor] section, of type \
                         \"sandbox-exec\", and nothing else",
                        file.display()
                    ));
                }
            };
            if section.remove("type") != Some(toml::Value::String("sandbox-exec".into())) {
                return Err(format!(
                    "--sandbox {}: the [executor] section's type is \"sandbox-exec\"",
                    file.display()
                ));
            }
            toml::Value::Table(section)
                .try_into()
                .map_err(|error| format!("--sandbox {}: {error}", file.display()))?
        }
    };
    backend
        .executor()
        .map_err(|error| format!("the sandbox: {error}"))
}

fn run(args: Args) -> Result<(), String> {
    let sandbox = sandbox(args.sandbox.as_ref())?;
    let description = WorkerDescription {
        runtime: sandbox
            .describe_runtime()
            .map_err(|error| format!("the sandbox's runtime: {error}"))?,
        profile: sandbox
            .profile()
            .map_err(|error| format!("the sandbox's profile: {error}"))?,
    };
    let id = args.id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_owned())
            .unwrap_or_else(|_| "worker".to_owned());
        format!("{host}-{}", std::process::id())
    });
    let log = match &args.log {
        Some(path) => Some(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| format!("--log {}: {error}", path.display()))?,
        )),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| format!("no async runtime: {error}"))?;
    runtime.block_on(async move {
        let channel = Endpoint::from_shared(args.endpoint.clone())
            .map_err(|error| format!("--endpoint {}: {error}", args.endpoint))?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .connect_lazy();
        let cas = Cas::new(channel.clone(), &args.instance, Duration::from_secs(120));
        let encoded = description.encode();
        let named = cas
            .upload_one(&encoded)
            .await
            .map_err(|error| format!("the description could not be put in the CAS: {error}"))?;
        println!("worker description {}", digest::text(&named));
        println!(
            "# sf.toml\n[executor]\ntype = \"reapi\"\nendpoint = \"{}\"\ninstance = \"{}\"\nworker = \"{}\"",
            args.endpoint,
            args.instance,
            digest::text(&named)
        );
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        if args.describe {
            return Ok(());
        }
        let worker = Arc::new(lease::Worker {
            id,
            cas: cas.clone(),
            store: Mutex::new(store::Store::new(args.cache_bytes)),
            sandbox: Arc::new(sandbox),
            target: description.target(),
            log,
        });
        // The description is kept in the CAS for as long as the worker serves: a cluster
        // whose CAS evicted it would leave sf unable to describe the Executor.
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                if let Ok(missing) = cas.find_missing(std::slice::from_ref(&named)).await
                    && !missing.is_empty()
                {
                    let _ = cas.upload_one(&encoded).await;
                }
            }
        });
        bot::serve(worker, channel, args.instance).await;
        Ok(())
    })
}
