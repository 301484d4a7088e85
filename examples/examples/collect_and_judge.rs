//! Collect evidence for two Candidates in the sandbox and judge it.
//!
//! The program makes a private temporary directory holding an owned repository of a tiny shell
//! program with a bug (`sum.sh` skips the first number), freezes a Slice (two fixture inputs,
//! a harness holding the check, the acceptance with the expected sums as digests only, the
//! recipe and the environment read from the sandbox-exec Executor, all bound by the Slice
//! record's digest), seals two Candidates for it (one fixes the bug, one does not), and for
//! each takes the fence, runs every process check once in the sandbox with the repository
//! collector, stores one record per run in a SQLite evidence file, and prints the judge's
//! Verdict: Verified, then Failed.
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
    Acceptance, Check, CheckRun, Expectation, FrozenSlice, JudgeRequest, Phase, ProcessCheck,
    SliceRecord, Stage, current_environment, judge,
};
use sf_host::canonical::{self, Digest, Value};
use sf_host::collector::{
    CollectEvent, CollectRequest, RepositoryCollector, current_recipe, derive,
};
use sf_host::contracts::{CancelToken, Executor, Gate, RunEntry};
use sf_host::environment_store::EnvironmentStore;
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::fence::Fence;
use sf_host::gate::FileGate;
use sf_host::repository::{
    CreateRepository, FileEdit, InitialBase, Proposal, RepositoryOptions, SourceFile,
    create_repository, open_repository,
};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};
use sf_host::tree_store::collect_trees;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

const SUM_BUGGY: &str = "total=0\nfirst=1\nwhile read -r n; do\n  if [ \"$first\" = 1 ]; then first=0; continue; fi\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
const SUM_FIXED: &str =
    "total=0\nwhile read -r n; do\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
const SUM_NOT_FIXED: &str = "total=0\nfirst=1\nwhile read -r n; do\n  if [ \"$first\" = 1 ]; then first=0; continue; fi\n  total=$((total + n + 0))\ndone < \"$1\"\necho \"$total\"\n";
/// The check, in the Slice's harness (the Candidate cannot change it): the sum of the numbers
/// as the tree's `sum.sh` computes it. The expected sums are on the host, as digests.
const SUM_OF: &str = "sh /sf/program/sum.sh /sf/input/numbers.txt\n";

fn private(path: &std::path::Path) -> Result<(), Box<dyn Error>> {
    fs::create_dir(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    Ok(())
}

fn file(path: &str, content: &str) -> SnapshotFile {
    SnapshotFile::regular(path, content.as_bytes().to_vec())
}

fn process(
    id: &str,
    phase: Phase,
    stage: Stage,
    entry: RunEntry,
    args: &[&str],
    input: &Digest,
    (exit_code, stdout): (i32, Option<&str>),
) -> Check {
    Check::Process(ProcessCheck {
        id: id.into(),
        phase,
        stage,
        run: CheckRun::Entry {
            // A tree entry of stage candidate inside the scope is one the Candidate may
            // rewrite.
            entry_in_scope: stage == Stage::Candidate && entry == RunEntry::program("sum.sh"),
            entry,
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
        },
        input: input.clone(),
        expectation: Expectation::exit(exit_code, stdout.map(|text| Digest::of(text.as_bytes()))),
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
            base: InitialBase::Files(vec![SourceFile::text("sum.sh", SUM_BUGGY)]),
            settings: Default::default(),
        },
        &RepositoryOptions::default(),
    )?;
    let repository = open_repository(&factory, &identity, RepositoryOptions::default())?;
    println!("repository   {}", identity.path);

    // The Slice: inputs, a harness, the three records, and the record binding them.
    let slice_dir = root.join("slice");
    private(&slice_dir)?;
    let numbers = vec![file("numbers.txt", "1\n2\n3\n")];
    let empty = vec![file("numbers.txt", "")];
    let harness = vec![file("sum-of.sh", SUM_OF)];
    let numbers_digest = snapshot_digest(&numbers)?;
    let empty_digest = snapshot_digest(&empty)?;
    let mut inputs = BTreeMap::new();
    inputs.insert(numbers_digest.clone(), numbers);
    inputs.insert(empty_digest.clone(), empty);
    let sum_of = RunEntry::harness("sum-of.sh");
    let acceptance = Acceptance {
        checks: vec![
            process(
                "bug-shown",
                Phase::Before,
                Stage::Base,
                sum_of.clone(),
                &[],
                &numbers_digest,
                (0, Some("5\n")),
            ),
            process(
                "bug-fixed",
                Phase::After,
                Stage::Candidate,
                sum_of,
                &[],
                &numbers_digest,
                (0, Some("6\n")),
            ),
            process(
                "empty-base",
                Phase::Guardrail,
                Stage::Base,
                RunEntry::program("sum.sh"),
                &["/sf/input/numbers.txt"],
                &empty_digest,
                (0, Some("0\n")),
            ),
            process(
                "empty-candidate",
                Phase::Guardrail,
                Stage::Candidate,
                RunEntry::program("sum.sh"),
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
    let recipe = current_recipe(executor.as_ref(), 20_000, 64 * 1024)?;
    let environment = current_environment(executor.as_ref())?;
    let slice = FrozenSlice {
        record: SliceRecord {
            id: "sum-fix".into(),
            revision: 1,
            repository: identity.clone(),
            base: identity.initial,
            scope: vec!["sum.sh".into()],
            protected: Vec::new(),
            acceptance: acceptance.digest()?,
            recipe: recipe.digest()?,
            environment: environment.digest()?,
            harness: snapshot_digest(&harness)?,
            overlay: snapshot_digest(&[])?,
            executor: canonical::object([("type", Value::from("sandbox-exec"))]),
            bounds: None,
            forbidden: Vec::new(),
            closed: Vec::new(),
            open: Vec::new(),
        },
        acceptance,
        recipe,
        environment,
        harness,
        overlay: Vec::new(),
        inputs,
    };
    let slice_digest = slice.validate()?;
    let frozen = slice.record.frozen_inputs(&slice_digest);
    println!("slice        {slice_digest}");
    println!("acceptance   {}", frozen.acceptance);
    println!("recipe       {}", frozen.recipe);
    println!("environment  {}", frozen.environment);
    println!("collector    {}", slice.recipe.collector_closure);

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

    // Where the base's tree is kept for the sandbox to bind: a directory its user can read.
    let public = tempfile::tempdir()?;
    fs::set_permissions(public.path(), fs::Permissions::from_mode(0o755))?;
    let trees_store = EnvironmentStore::open(&public.path().canonicalize()?.join("store"))?;

    for (name, sum) in [("a fix", SUM_FIXED), ("not a fix", SUM_NOT_FIXED)] {
        let proposal = Proposal::new(vec![FileEdit::text(
            "sum.sh",
            Some(Digest::of(SUM_BUGGY.as_bytes())),
            Some(sum.into()),
        )]);
        let sealed = repository.seal(&frozen, &proposal)?;
        // The base materialised in the store (once; verified at every later use), and the
        // Candidate's edits laid over it: its programs run by reference.
        let trees = collect_trees(&repository, &sealed, &slice, Some(&trees_store))?;
        // The pins the records are filed under, as the collector derives them.
        let pins = derive(&slice, &sealed, &trees)?.pins;
        let request = CollectRequest {
            slice: slice.clone(),
            sealed,
            trees,
            deadline: SystemTime::now() + Duration::from_secs(300),
            environments: Default::default(),
        };
        println!("\nCandidate    {} ({name})", pins.candidate.digest);
        let hold = fence.acquire()?;
        println!("attempt      {}", hold.attempt());
        let result = collector.collect_with_progress(
            &request,
            gate.clone(),
            &hold,
            &CancelToken::new(),
            &mut |event| {
                if let CollectEvent::Settled { run, .. } = event {
                    println!(
                        "  {:<16} {:<12} {}",
                        run.check,
                        run.state.as_str(),
                        run.evidence
                            .as_ref()
                            .map_or("-".into(), ToString::to_string)
                    );
                }
            },
        )?;
        if !result.may_judge() {
            println!("no Verdict may be issued for this attempt");
            continue;
        }
        let verdict = judge(
            &JudgeRequest {
                pins: &pins,
                acceptance: &slice.acceptance,
                recipe: &slice.recipe,
                environment: &slice.environment,
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
