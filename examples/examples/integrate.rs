//! Integrate a Verified Candidate: collect and judge it, prepare the intent its proof admits,
//! invoke it behind a file gate, inspect it.
//!
//! The program sets up the collector's example scenario (an owned repository of `sum.sh`
//! with a bug, a frozen Slice of its fix; see `collect_and_judge`), seals the fix, runs its
//! checks once in the sandbox and judges the stored evidence: only that Verified Verdict, as
//! the proof the judge makes of it, can move the target. It then prepares the integration of
//! the Candidate into `refs/heads/main` and invokes it twice behind a file gate: first with
//! the gate closed (the update is withheld and the occurrence is consumed), then, for a
//! second occurrence, with the gate open (the target moves from B to M once; the proof's
//! guard judges the evidence again immediately before). It then inspects both intents from a
//! fresh handle and prints what each call reported.
//!
//! Run it with `cargo build -p sf-sandbox-exec --bins && cargo run -p sf-examples --example
//! integrate`. It needs a root-owned `git` at `/usr/bin/git` or `/usr/local/bin/git`, and a
//! kernel with user namespaces and Landlock. Everything lives in a temporary directory.

use std::error::Error;
use std::fs;
use std::sync::Arc;

use sf_examples::sum::{SUM_FIXED, SumWorld};
use sf_git_cli::{GitCliConfig, GitCliFactory};
use sf_host::gate::FileGate;
use sf_host::judging::Judging;
use sf_host::repository::{
    Action, IntegrationObservation, Owner, RepositoryOptions, open_repository,
};

fn main() -> Result<(), Box<dyn Error>> {
    let world = SumWorld::new()?;
    let sealed = world.seal(SUM_FIXED)?;
    println!("candidate   {}", sealed.digest);
    println!("base B      {}", sealed.manifest.base_commit);
    println!("commit M    {}", sealed.manifest.commit);
    let (pins, attempt, collected) = world.collect(sealed, &mut |_, _, _| {})?;
    if !collected.may_judge() {
        return Err("no Verdict may be issued for this attempt".into());
    }
    // The proof: made only by the judge, from the stored evidence, and only when Verified.
    let judging = Judging {
        slice: world.slice.clone(),
        pins,
        store: world.store.clone(),
    };
    let proof = judging.verified(&attempt)?;
    println!("verified    attempt {attempt}, Verdict {}", proof.digest());

    let repository = &world.repository;
    let payload = |occurrence| {
        repository.integration_payload(
            &proof,
            Action {
                id: "release".into(),
                occurrence,
            },
            Owner {
                id: "example-owner".into(),
                generation: 1,
            },
        )
    };

    // The gate is one file an operator can edit; it is read on every call.
    let gate_file = world.root.join("gate.json");
    let gate = Arc::new(FileGate::new(&gate_file));

    fs::write(
        &gate_file,
        br#"{"proceed": false, "reason": "waiting for a human"}"#,
    )?;
    let first = repository.prepare_integration(&payload(1))?;
    print(
        "invoke #1 (gate closed)",
        &repository.invoke_once(&first, &proof, Some(gate.clone()))?,
    );

    fs::write(&gate_file, br#"{"proceed": true}"#)?;
    let second = repository.prepare_integration(&payload(2))?;
    print(
        "invoke #2 (gate open)",
        &repository.invoke_once(&second, &proof, Some(gate.clone()))?,
    );
    print(
        "invoke #2 again (replay)",
        &repository.invoke_once(&second, &proof, Some(gate))?,
    );

    let factory = GitCliFactory::new(GitCliConfig::default())?;
    let fresh = open_repository(&factory, &world.identity, RepositoryOptions::default())?;
    print("inspect #1", &fresh.inspect_integration(&first)?);
    print("inspect #2", &fresh.inspect_integration(&second)?);
    println!("target now  {}", fresh.target()?);
    Ok(())
}

fn print(label: &str, observed: &IntegrationObservation) {
    println!(
        "{label:<26} invocation={:<14} dispatched={:<5} postcondition={:<22} problem={}",
        observed.invocation.as_str(),
        observed.dispatched,
        observed.postcondition.as_str(),
        observed.problem.as_deref().unwrap_or("-"),
    );
}
