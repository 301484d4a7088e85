//! Integrate a sealed Candidate: prepare an intent, invoke it behind a file gate, inspect it.
//!
//! The program creates a fresh owned repository, seals a one-line change, prepares the
//! integration of that Candidate into `refs/heads/main`, and invokes it twice behind a file
//! gate: first with the gate closed (the update is withheld and the occurrence is consumed),
//! then, for a second occurrence, with the gate open (the target moves from B to M once). It
//! then inspects both intents from a fresh handle and prints what each call reported.
//!
//! Run it with `cargo run -p sf-examples --example integrate`. It needs a root-owned `git` at
//! `/usr/bin/git` or `/usr/local/bin/git`. Everything lives in a temporary directory.

use std::error::Error;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use sf_git_cli::{GitCliConfig, GitCliFactory};
use sf_host::canonical::Digest;
use sf_host::gate::FileGate;
use sf_host::repository::{
    Action, CreateRepository, FileEdit, FrozenInputs, InitialBase, IntegrationObservation,
    IntegrationPayload, Owner, Proposal, ProposalBounds, RepositoryOptions, Slice, SliceBinding,
    SourceFile, create_repository, open_repository,
};

fn main() -> Result<(), Box<dyn Error>> {
    let workdir = tempfile::Builder::new().prefix("sf-integrate-").tempdir()?;
    fs::set_permissions(workdir.path(), fs::Permissions::from_mode(0o700))?;
    let root = workdir.path().canonicalize()?;
    let path = root
        .join("repository")
        .to_str()
        .ok_or("non-UTF-8 temporary path")?
        .to_owned();

    let factory = GitCliFactory::new(GitCliConfig::default())?;
    let identity = create_repository(
        &factory,
        &CreateRepository {
            path,
            product_id: "example-product".into(),
            target_ref: "refs/heads/main".into(),
            base: InitialBase::Files(vec![SourceFile::text("VERSION", "1\n")]),
            settings: Default::default(),
        },
        &RepositoryOptions::default(),
    )?;
    let repository = open_repository(&factory, &identity, RepositoryOptions::default())?;
    let sealed = repository.seal(
        &FrozenInputs {
            forbidden: Vec::new(),
            closed_paths: Default::default(),
            base: identity.initial,
            slice: Slice {
                id: "bump".into(),
                revision: 1,
            },
            scope: vec!["VERSION".into()],
            // Placeholders: this example shows the integration primitive alone. `sf land`
            // (sf_host::landing) composes it with a frozen Slice, the collector and the judge,
            // and integrates only a Verified Candidate.
            acceptance: Digest::of(b"placeholder acceptance"),
            recipe: Digest::of(b"placeholder recipe"),
            environment: Digest::of(b"placeholder environment"),
            binding: Some(SliceBinding {
                digest: Digest::of(b"placeholder slice"),
                protected: Vec::new(),
            }),
            bounds: ProposalBounds::DEFAULT,
        },
        &Proposal::new(vec![FileEdit::text(
            "VERSION",
            Some(Digest::of(b"1\n")),
            Some("2\n".into()),
        )]),
    )?;
    println!("candidate   {}", sealed.digest);
    println!("base B      {}", sealed.manifest.base_commit);
    println!("commit M    {}", sealed.manifest.commit);

    let payload = |occurrence| IntegrationPayload {
        action: Action {
            id: "release".into(),
            occurrence,
        },
        product: identity.product_id.clone(),
        slice: sealed.manifest.slice.clone(),
        repository: identity.clone(),
        target_ref: identity.target_ref.clone(),
        base: sealed.manifest.base_commit,
        commit: sealed.manifest.commit,
        candidate: sealed.digest.clone(),
        // Whatever admitted this integration (a Verdict, say) is named by its digest.
        proof: Digest::of(b"placeholder proof"),
        owner: Owner {
            id: "example-owner".into(),
            generation: 1,
        },
    };

    // The gate is one file an operator can edit; it is read on every call.
    let gate_file = root.join("gate.json");
    let gate = Arc::new(FileGate::new(&gate_file));

    fs::write(
        &gate_file,
        br#"{"proceed": false, "reason": "waiting for a human"}"#,
    )?;
    let first = repository.prepare_integration(&payload(1))?;
    print(
        "invoke #1 (gate closed)",
        &repository.invoke_once(&first, Some(gate.clone()))?,
    );

    fs::write(&gate_file, br#"{"proceed": true}"#)?;
    let second = repository.prepare_integration(&payload(2))?;
    print(
        "invoke #2 (gate open)",
        &repository.invoke_once(&second, Some(gate.clone()))?,
    );
    print(
        "invoke #2 again (replay)",
        &repository.invoke_once(&second, Some(gate))?,
    );

    let fresh = open_repository(&factory, &identity, RepositoryOptions::default())?;
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
