//! A child process for the cross-process tests: seals a proposal in an existing repository,
//! optionally killing itself with SIGKILL at a named fault point, and prints the Candidate
//! digest. Arguments: `seal <identity.json> <frozen.json> <proposal.json> [--kill-at <point>]
//! [--wait-for <file>]` (`--wait-for` spins until the file exists, so racing children start
//! together).

use std::process::ExitCode;
use std::sync::Arc;

use sf_host::fault::FaultPoint;
use sf_host::repository::{
    FrozenInputs, RepositoryOptions, open_repository, parse_proposal, parse_repository_identity,
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
    let [command, identity, frozen, proposal, rest @ ..] = args.as_slice() else {
        return Err("usage: seal <identity.json> <frozen.json> <proposal.json> [--kill-at <point>] [--wait-for <file>]".into());
    };
    if command != "seal" {
        return Err(format!("unknown command {command}"));
    }
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
    let frozen = FrozenInputs::from_json(&read(frozen)?).map_err(|e| e.to_string())?;
    let proposal = parse_proposal(&read(proposal)?).map_err(|e| e.to_string())?;
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
    if let Some(file) = wait_for {
        while !std::path::Path::new(&file).exists() {
            std::thread::yield_now();
        }
    }
    let sealed = repo
        .seal(&frozen, &proposal)
        .map_err(|e| format!("{}: {e}", e.code()))?;
    Ok(sealed.digest.to_string())
}
