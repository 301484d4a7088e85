//! A child process for the cross-process tests, optionally killing itself with SIGKILL at a
//! named fault point:
//!
//! - `seal <identity.json> <frozen.json> <proposal.json> [flags]` seals a proposal in an
//!   existing repository and prints the Candidate digest;
//! - `invoke <identity.json> <prepared.json> <gate.json|-> [flags]` invokes a prepared
//!   integration (with the file gate, or none for `-`) and prints the observation as JSON;
//! - `inspect <identity.json> <prepared.json> -` prints the inspection as JSON.
//!
//! Flags: `--kill-at <point>`, `--wait-for <file>` (spins until the file exists, so racing
//! children start together).

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use sf_host::fault::FaultPoint;
use sf_host::gate::FileGate;
use sf_host::repository::{
    PreparedIntegration, RepositoryOptions, open_repository, parse_proposal,
    parse_repository_identity,
};

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [command, identity, first, second, rest @ ..] = args.as_slice() else {
        return Err("usage: seal|invoke|inspect <identity.json> <file> <file|-> [--kill-at <point>] [--wait-for <file>]".into());
    };
    let mut kill_at = None;
    let mut wait_for = None;
    let mut rest = rest.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--kill-at" => {
                kill_at = Some(
                    FaultPoint::from_name(value).ok_or(format!("unknown fault point {value}"))?,
                )
            }
            "--wait-for" => wait_for = Some(value.clone()),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    let read = |path: &str| std::fs::read(path).map_err(|error| format!("{path}: {error}"));
    let identity = parse_repository_identity(&read(identity)?).map_err(|e| e.to_string())?;
    let mut options = RepositoryOptions::default();
    if let Some(point) = kill_at {
        options.faults = Arc::new(move |reached: FaultPoint| {
            if reached == point {
                // The harshest interruption: no unwinding, no destructors, no flush.
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            }
        });
    }
    let factory = sf_git_cli::GitCliFactory::new(sf_git_cli::GitCliConfig::default())
        .map_err(|e| e.to_string())?;
    let repo =
        open_repository(&factory, &identity, options).map_err(|e| format!("{}: {e}", e.code()))?;
    let wait = || {
        if let Some(file) = &wait_for {
            while !std::path::Path::new(file).exists() {
                std::thread::yield_now();
            }
        }
    };
    let failed = |e: sf_host::repository::RepositoryError| format!("{}: {e}", e.code());
    match command.as_str() {
        "seal" => {
            let frozen = sf_tests::frozen_from_json(&read(first)?)?;
            let proposal = parse_proposal(&read(second)?).map_err(|e| e.to_string())?;
            wait();
            let sealed = repo.seal(&frozen, &proposal).map_err(failed)?;
            Ok(sealed.digest.to_string())
        }
        "invoke" | "inspect" => {
            let prepared =
                PreparedIntegration::from_json(&read(first)?).map_err(|e| e.to_string())?;
            let gate: Option<Arc<dyn sf_host::contracts::Gate>> = (second != "-")
                .then(|| Arc::new(FileGate::new(second)) as Arc<dyn sf_host::contracts::Gate>);
            wait();
            let observed = if command == "invoke" {
                repo.invoke_once(&prepared, &sf_tests::assumed(&prepared), gate)
                    .map_err(failed)?
            } else {
                repo.inspect_integration(&prepared).map_err(failed)?
            };
            let bytes =
                sf_host::canonical::encode(&observed.to_value()).map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
        other => Err(format!("unknown command {other}")),
    }
}
