//! The cost of the plugin boundary: the same proposal sealed through git-cli linked statically
//! and through git-cli loaded as a dynamic library by the real loader, with the median of each
//! and their ratio. A benchmark program that prints numbers, never a timed test.
//!
//! Each run seals into a fresh repository (created outside the timed region), so every timed
//! seal does the same work: validate, build, write the objects, publish the ref and export the
//! Candidate again, re-verified. Static and dynamic runs alternate, so that drift in the
//! machine's load falls on both alike. A replayed seal (the same inputs again, which only
//! reads and verifies) is timed too, because it makes the most calls per unit of work.
//!
//! ```text
//! cargo build --release -p sf-git-cli
//! cargo run --release -p sf-examples --example plugin_overhead -- [RUNS] [PLUGIN_DIR]
//! ```
//!
//! RUNS defaults to 21; PLUGIN_DIR (where `libsf_git_cli.so` and its manifest are) defaults to
//! the directory above this program's (`target/<profile>`). Needs a root-owned git.

use std::error::Error;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sf_examples::scale::median;
use sf_git_cli::{GitCliConfig, GitCliFactory};
use sf_host::canonical::Digest;
use sf_host::contracts::ObjectStoreFactory;
use sf_host::repository::{
    CreateRepository, FileEdit, FrozenInputs, InitialBase, Proposal, ProposalBounds,
    RepositoryOptions, Slice, SliceBinding, SourceText, create_repository, open_repository,
};

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(21);
    let plugin_dir = match args.next() {
        Some(dir) => PathBuf::from(dir),
        None => sf_examples::default_plugin_dir()?,
    };
    let (plugin, dynamic) = sf_examples::git_cli_plugin(&plugin_dir)?;
    let linked: Arc<dyn ObjectStoreFactory> =
        Arc::new(GitCliFactory::new(GitCliConfig::default())?);

    let workdir = tempfile::Builder::new().prefix("sf-bench-").tempdir()?;
    std::fs::set_permissions(workdir.path(), std::fs::Permissions::from_mode(0o700))?;
    let root = workdir.path().canonicalize()?;

    // timings[backend][kind]: backend 0 static, 1 dynamic; kind 0 fresh seal, 1 replay.
    let mut timings: [[Vec<Duration>; 2]; 2] = Default::default();
    let mut n = 0;
    for _ in 0..runs {
        for (backend, factory) in [&linked, &dynamic].into_iter().enumerate() {
            n += 1;
            let (seal, replay) = seal_once(factory.as_ref(), &root.join(format!("repo-{n}")))?;
            timings[backend][0].push(seal);
            timings[backend][1].push(replay);
        }
    }
    println!(
        "git-cli plugin: {} (sf-sdk {}, ABI 1.{}); {runs} runs each, medians:",
        plugin.library().display(),
        plugin.sdk_version(),
        plugin.abi_minor()
    );
    for (kind, label) in ["seal (fresh)", "seal (replay)"].into_iter().enumerate() {
        let linked = median(&timings[0][kind]);
        let dynamic = median(&timings[1][kind]);
        println!(
            "  {label:<14} static {:>8.2} ms   dynamic {:>8.2} ms   ratio {:.3}",
            linked.as_secs_f64() * 1e3,
            dynamic.as_secs_f64() * 1e3,
            dynamic.as_secs_f64() / linked.as_secs_f64()
        );
    }
    Ok(())
}

/// Creates a repository at `path` (untimed), then times a first seal and a replayed seal.
fn seal_once(
    factory: &dyn ObjectStoreFactory,
    path: &Path,
) -> Result<(Duration, Duration), Box<dyn Error>> {
    let files: Vec<SourceText> = (0..40)
        .map(|i| SourceText {
            path: format!("src/module-{i:02}/file.txt"),
            text: format!("line one of file {i}\n").repeat(50),
        })
        .collect();
    let identity = create_repository(
        factory,
        &CreateRepository {
            path: path.to_str().ok_or("a UTF-8 path")?.to_owned(),
            product_id: "bench".into(),
            target_ref: "refs/heads/main".into(),
            base: InitialBase::Files(files.iter().cloned().map(Into::into).collect()),
            settings: Default::default(),
        },
        &RepositoryOptions::default(),
    )?;
    let repository = open_repository(factory, &identity, RepositoryOptions::default())?;
    let frozen = FrozenInputs {
        forbidden: Vec::new(),
        closed_paths: Default::default(),
        base: identity.initial,
        slice: Slice {
            id: "slice-1".into(),
            revision: 1,
        },
        scope: vec!["src".into()],
        acceptance: Digest::of(b"acceptance"),
        recipe: Digest::of(b"recipe"),
        environment: Digest::of(b"environment"),
        binding: Some(SliceBinding {
            digest: Digest::of(b"slice"),
            protected: Vec::new(),
        }),
        bounds: ProposalBounds::DEFAULT,
    };
    let proposal = Proposal::new(
        files
            .iter()
            .take(5)
            .map(|file| {
                FileEdit::text(
                    file.path.clone(),
                    Some(Digest::of(file.text.as_bytes())),
                    Some(format!("{}changed\n", file.text)),
                )
            })
            .collect(),
    );
    let started = Instant::now();
    let sealed = repository.seal(&frozen, &proposal)?;
    let seal = started.elapsed();
    let started = Instant::now();
    let replayed = repository.seal(&frozen, &proposal)?;
    let replay = started.elapsed();
    assert_eq!(sealed.digest, replayed.digest);
    Ok((seal, replay))
}
