//! Collect evidence for two Candidates in the sandbox and judge it.
//!
//! The program makes a private temporary directory holding an owned repository of a tiny shell
//! program with a bug (`sum.sh` skips the first number) and a check script, freezes the Slice
//! (two fixture inputs in the snapshot store, the acceptance, the recipe and the environment
//! read from the sandbox-exec Executor), seals two Candidates (one fixes the bug, one does not),
//! and for each takes the fence, runs every process check once in the sandbox with the
//! repository collector, stores one record per run in a SQLite evidence file, and prints the
//! judge's Verdict: Verified, then Failed.
//!
//! Run it with `cargo build -p sf-sandbox-exec --bins && cargo run -p sf-examples --example
//! collect_and_judge` (the Executor starts `sf-sandbox-launcher`, which it looks for beside the
//! example's executable and one directory up). It needs a root-owned `git` at `/usr/bin/git` or
//! `/usr/local/bin/git`, and a kernel with user namespaces and Landlock. Everything it makes
//! lives in the temporary directory and is removed when it ends.

use std::collections::BTreeMap;
use std::error::Error;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use sf_git_cli::{GitCliConfig, GitCliFactory};
use sf_host::assurance::{
    Acceptance, Check, Expectation, JudgeRequest, Phase, ProcessCheck, Recipe, RepositoryPins,
    Stage, current_environment, judge,
};
use sf_host::canonical::{self, Digest};
use sf_host::collector::{
    CollectRequest, RepositoryCollector, collector_closure, materialise_base,
};
use sf_host::contracts::{CancelToken, Executor, Gate};
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::fence::Fence;
use sf_host::gate::FileGate;
use sf_host::repository::{
    CreateRepository, FileEdit, FrozenInputs, Proposal, RepositoryOptions, Slice, SourceText,
    create_repository, open_repository,
};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};
use sf_host::snapshot_store::SnapshotStore;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

const SUM_BUGGY: &str = "total=0\nfirst=1\nwhile read -r n; do\n  if [ \"$first\" = 1 ]; then first=0; continue; fi\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
const SUM_FIXED: &str =
    "total=0\nwhile read -r n; do\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
const SUM_NOT_FIXED: &str = "total=0\nfirst=1\nwhile read -r n; do\n  if [ \"$first\" = 1 ]; then first=0; continue; fi\n  total=$((total + n + 0))\ndone < \"$1\"\necho \"$total\"\n";
const CHECK: &str = "got=$(sh /sf/program/sum.sh /sf/input/numbers.txt)\nread -r want < /sf/input/expected.txt\nif [ \"$got\" = \"$want\" ]; then echo ok; exit 0; fi\necho \"wrong: $got\"\nexit 1\n";

fn private(path: &std::path::Path) -> Result<(), Box<dyn Error>> {
    fs::create_dir(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    Ok(())
}

fn file(path: &str, content: &str) -> SnapshotFile {
    SnapshotFile {
        path: path.into(),
        content: content.as_bytes().to_vec(),
    }
}

fn process(
    id: &str,
    phase: Phase,
    stage: Stage,
    entry: &str,
    args: &[&str],
    input: &Digest,
    (exit_code, stdout): (i32, Option<&str>),
) -> Check {
    Check::Process(ProcessCheck {
        id: id.into(),
        phase,
        stage,
        entry: entry.into(),
        args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        input: input.clone(),
        expectation: Expectation {
            exit_code,
            stdout_digest: stdout.map(|text| Digest::of(text.as_bytes())),
        },
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let workdir = tempfile::Builder::new().prefix("sf-example-").tempdir()?;
    fs::set_permissions(workdir.path(), fs::Permissions::from_mode(0o700))?;
    let root = workdir.path().canonicalize()?;

    // The repository.
    let factory = GitCliFactory::new(GitCliConfig::default())?;
    let identity = create_repository(
        &factory,
        &CreateRepository {
            path: root.join("repository").to_str().ok_or("UTF-8 path")?.into(),
            product_id: "example-product".into(),
            target_ref: "refs/heads/main".into(),
            files: vec![
                SourceText {
                    path: "sum.sh".into(),
                    text: SUM_BUGGY.into(),
                },
                SourceText {
                    path: "check.sh".into(),
                    text: CHECK.into(),
                },
            ],
        },
        &RepositoryOptions::default(),
    )?;
    let repository = open_repository(&factory, &identity, RepositoryOptions::default())?;
    println!("repository   {}", identity.path);

    // The Slice, frozen: inputs in the snapshot store, then the three records.
    let slice_dir = root.join("slice");
    private(&slice_dir)?;
    let snapshots = SnapshotStore::open(&slice_dir.join("snapshots"))?;
    let mut inputs = BTreeMap::new();
    let numbers = vec![
        file("numbers.txt", "1\n2\n3\n"),
        file("expected.txt", "6\n"),
    ];
    let empty = vec![file("numbers.txt", "")];
    let numbers_digest = snapshot_digest(&numbers)?;
    let empty_digest = snapshot_digest(&empty)?;
    for (files, digest) in [(numbers, &numbers_digest), (empty, &empty_digest)] {
        snapshots.put(&files, digest)?;
        inputs.insert(digest.clone(), snapshots.read(digest)?);
    }
    let acceptance = Acceptance {
        checks: vec![
            process(
                "bug-shown",
                Phase::Before,
                Stage::Base,
                "check.sh",
                &[],
                &numbers_digest,
                (1, None),
            ),
            process(
                "bug-fixed",
                Phase::After,
                Stage::Candidate,
                "check.sh",
                &[],
                &numbers_digest,
                (0, Some("ok\n")),
            ),
            process(
                "empty-base",
                Phase::Guardrail,
                Stage::Base,
                "sum.sh",
                &["/sf/input/numbers.txt"],
                &empty_digest,
                (0, Some("0\n")),
            ),
            process(
                "empty-candidate",
                Phase::Guardrail,
                Stage::Candidate,
                "sum.sh",
                &["/sf/input/numbers.txt"],
                &empty_digest,
                (0, Some("0\n")),
            ),
        ],
    };
    acceptance.validate()?;
    let executor: Arc<dyn Executor> = Arc::new(SandboxExecutor::new(SandboxConfig::new(
        RuntimeConfig::shell(),
    ))?);
    let recipe = Recipe {
        collector_closure: collector_closure(),
        timeout_ms: 20_000,
        output_limit: 64 * 1024,
        runtime: "/bin/sh".into(),
    };
    let environment = current_environment(executor.as_ref())?;
    let frozen = FrozenInputs {
        base: identity.initial,
        slice: Slice {
            id: "sum-fix".into(),
            revision: 1,
        },
        scope: vec!["sum.sh".into()],
        acceptance: acceptance.digest()?,
        recipe: recipe.digest()?,
        environment: environment.digest()?,
    };
    println!("acceptance   {}", frozen.acceptance);
    println!("recipe       {}", frozen.recipe);
    println!("environment  {}", frozen.environment);
    println!("collector    {}", recipe.collector_closure);

    // The evidence store, the fence, the gate and the collector.
    let evidence_dir = root.join("evidence");
    private(&evidence_dir)?;
    let store = Arc::new(SqliteEvidenceStore::open(
        &evidence_dir.join("evidence.db"),
    )?);
    let fence_dir = root.join("fence");
    let fence = Fence::open(&fence_dir, &identity.product_id)?;
    let gate_file = root.join("gate.json");
    fs::write(&gate_file, br#"{"proceed": true}"#)?;
    let gate: Arc<dyn Gate> = Arc::new(FileGate::new(&gate_file));
    let collector = RepositoryCollector::new(
        store.clone(),
        executor,
        vec![evidence_dir, root.join("repository"), fence_dir, slice_dir],
    )?;

    for (name, sum) in [("a fix", SUM_FIXED), ("not a fix", SUM_NOT_FIXED)] {
        let proposal = Proposal {
            edits: vec![FileEdit {
                path: "sum.sh".into(),
                prior: Some(Digest::of(SUM_BUGGY.as_bytes())),
                text: Some(sum.into()),
            }],
        };
        let sealed = repository.seal(&frozen, &proposal)?;
        let base = repository.snapshot(&sealed.manifest.base_commit)?;
        let base_files = materialise_base(
            &base,
            &sealed.manifest.base_commit,
            &sealed.manifest.base_tree,
        )?;
        let request = CollectRequest {
            pins: RepositoryPins::for_candidate(&sealed, base_files.digest),
            acceptance: acceptance.clone(),
            recipe: recipe.clone(),
            environment: environment.clone(),
            sealed,
            base,
            inputs: inputs.clone(),
            deadline: SystemTime::now() + Duration::from_secs(300),
        };
        println!("\nCandidate    {} ({name})", request.pins.candidate.digest);
        let hold = fence.acquire()?;
        println!("attempt      {}", hold.attempt());
        let result = collector.collect_with_progress(
            &request,
            gate.clone(),
            &hold,
            &CancelToken::new(),
            &mut |run| {
                println!(
                    "  {:<16} {:<12} {}",
                    run.check,
                    run.state.as_str(),
                    run.evidence
                        .as_ref()
                        .map_or("-".into(), ToString::to_string)
                );
            },
        )?;
        if !result.may_judge() {
            println!("no Verdict may be issued for this attempt");
            continue;
        }
        let verdict = judge(
            &JudgeRequest {
                pins: &request.pins,
                acceptance: &request.acceptance,
                recipe: &request.recipe,
                environment: &request.environment,
                attempt: hold.attempt(),
            },
            store.as_ref(),
            Instant::now() + Duration::from_secs(60),
        )?;
        println!("verdict      {}", verdict.outcome.as_str());
        println!(
            "{}",
            String::from_utf8(canonical::encode(&verdict.to_value())?)?
        );
    }
    println!("\nrecords      {}", store.count()?);
    Ok(())
}
