//! The scenario the collector's examples share: an owned repository of a tiny shell program
//! with a bug (`sum.sh` skips the first number) and a frozen Slice for its fix (two fixture
//! inputs, a harness holding the check, the acceptance with the expected sums as digests
//! only, the recipe and the environment read from the sandbox-exec Executor, all bound by the
//! Slice record's digest); a SQLite evidence file, the fence, an open file gate and the
//! repository collector; and the store the base's tree is materialised in for the sandbox.

use std::collections::BTreeMap;
use std::error::Error;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sf_git_cli::{GitCliConfig, GitCliFactory};
use sf_host::assurance::{
    Acceptance, Check, CheckRun, Expectation, FrozenSlice, Phase, ProcessCheck, RepositoryPins,
    SliceRecord, Stage, current_environment,
};
use sf_host::canonical::{self, Digest, Value};
use sf_host::collector::{
    CollectEvent, CollectRequest, CollectResult, RepositoryCollector, current_recipe, derive,
};
use sf_host::contracts::{AttemptId, CancelToken, Executor, Gate, RunEntry};
use sf_host::environment_store::EnvironmentStore;
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::fence::Fence;
use sf_host::gate::FileGate;
use sf_host::repository::{
    CreateRepository, FileEdit, FrozenInputs, InitialBase, Proposal, Repository,
    RepositoryIdentity, RepositoryOptions, SealedCandidate, SourceFile, create_repository,
    open_repository,
};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};
use sf_host::tree_store::collect_trees;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

/// The program with the bug: it skips the first number.
pub const SUM_BUGGY: &str = "total=0\nfirst=1\nwhile read -r n; do\n  if [ \"$first\" = 1 ]; then first=0; continue; fi\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
/// The fix.
pub const SUM_FIXED: &str =
    "total=0\nwhile read -r n; do\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
/// A change that is not a fix.
pub const SUM_NOT_FIXED: &str = "total=0\nfirst=1\nwhile read -r n; do\n  if [ \"$first\" = 1 ]; then first=0; continue; fi\n  total=$((total + n + 0))\ndone < \"$1\"\necho \"$total\"\n";
/// The check, in the Slice's harness (the Candidate cannot change it): the sum of the numbers
/// as the tree's `sum.sh` computes it. The expected sums are on the host, as digests.
const SUM_OF: &str = "sh /sf/program/sum.sh /sf/input/numbers.txt\n";

/// Everything the scenario set up, in a private temporary directory removed when dropped.
pub struct SumWorld {
    /// The private directory everything lives in.
    pub root: PathBuf,
    /// The owned repository and its identity.
    pub repository: Repository,
    /// Its identity.
    pub identity: RepositoryIdentity,
    /// The frozen Slice, its digest, and what a Candidate of it is sealed for.
    pub slice: FrozenSlice,
    /// The Slice record's digest.
    pub slice_digest: Digest,
    /// What a Candidate is sealed for.
    pub frozen: FrozenInputs,
    /// The evidence store.
    pub store: Arc<SqliteEvidenceStore>,
    fence: Fence,
    gate: Arc<dyn Gate>,
    collector: RepositoryCollector,
    trees_store: EnvironmentStore,
    _workdir: tempfile::TempDir,
    _public: tempfile::TempDir,
}

impl SumWorld {
    /// Sets the scenario up.
    pub fn new() -> Result<Self, Box<dyn Error>> {
        let workdir = tempfile::Builder::new().prefix("sf-example-").tempdir()?;
        fs::set_permissions(workdir.path(), fs::Permissions::from_mode(0o700))?;
        let root = workdir.path().canonicalize()?;
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
        let slice_dir = root.join("slice");
        private(&slice_dir)?;
        let executor: Arc<dyn Executor> = Arc::new(SandboxExecutor::new(SandboxConfig::new(
            RuntimeConfig::shell(),
        ))?);
        let slice = frozen_slice(&identity, executor.as_ref())?;
        let slice_digest = slice.validate()?;
        let frozen = slice.record.frozen_inputs(&slice_digest);
        let evidence_dir = root.join("evidence");
        private(&evidence_dir)?;
        let store = Arc::new(SqliteEvidenceStore::open(
            &evidence_dir.join("evidence.db"),
        )?);
        let fence_dir = root.join("fence");
        let fence = Fence::open(&fence_dir, &identity.product_id)?;
        let gate_file = root.join("collect-gate.json");
        fs::write(&gate_file, br#"{"proceed": true}"#)?;
        let collector = RepositoryCollector::new(
            store.clone(),
            executor,
            vec![evidence_dir, root.join("repository"), fence_dir, slice_dir],
        )?;
        // Where the base's tree is kept for the sandbox to bind: a directory its user can read.
        let public = tempfile::tempdir()?;
        fs::set_permissions(public.path(), fs::Permissions::from_mode(0o755))?;
        let trees_store = EnvironmentStore::open(&public.path().canonicalize()?.join("store"))?;
        Ok(Self {
            root,
            repository,
            identity,
            slice,
            slice_digest,
            frozen,
            store,
            fence,
            gate: Arc::new(FileGate::new(&gate_file)),
            collector,
            trees_store,
            _workdir: workdir,
            _public: public,
        })
    }

    /// Seals a Candidate replacing `sum.sh` with `sum`.
    pub fn seal(&self, sum: &str) -> Result<SealedCandidate, Box<dyn Error>> {
        let proposal = Proposal::new(vec![FileEdit::text(
            "sum.sh",
            Some(Digest::of(SUM_BUGGY.as_bytes())),
            Some(sum.into()),
        )]);
        Ok(self.repository.seal(&self.frozen, &proposal)?)
    }

    /// Runs every process check of `sealed` once in the sandbox under one hold on the fence
    /// (its programs by reference: the base materialised in the store, the edits laid over
    /// it), each run settled handed to `settled`; the pins the records are filed under, the
    /// attempt and what the collection did.
    pub fn collect(
        &self,
        sealed: SealedCandidate,
        settled: &mut dyn FnMut(&str, &str, Option<&Digest>),
    ) -> Result<(RepositoryPins, AttemptId, CollectResult), Box<dyn Error>> {
        let trees = collect_trees(
            &self.repository,
            &sealed,
            &self.slice,
            Some(&self.trees_store),
        )?;
        let pins = derive(&self.slice, &sealed, &trees)?.pins;
        let request = CollectRequest {
            slice: self.slice.clone(),
            sealed,
            trees,
            deadline: SystemTime::now() + Duration::from_secs(300),
            environments: Default::default(),
            capabilities: Default::default(),
        };
        let hold = self.fence.acquire(&request.sealed.digest)?;
        let attempt = hold.attempt().clone();
        let result = self.collector.collect_with_progress(
            &request,
            self.gate.clone(),
            &hold,
            &CancelToken::new(),
            &mut |event| {
                if let CollectEvent::Settled { run, .. } = event {
                    settled(&run.check, run.state.as_str(), run.evidence.as_ref());
                }
            },
        )?;
        Ok((pins, attempt, result))
    }
}

/// The Slice of the fix, frozen for `identity`'s initial commit with `executor`'s recipe and
/// environment.
fn frozen_slice(
    identity: &RepositoryIdentity,
    executor: &dyn Executor,
) -> Result<FrozenSlice, Box<dyn Error>> {
    let numbers = vec![file("numbers.txt", "1\n2\n3\n")];
    let empty = vec![file("numbers.txt", "")];
    let harness = vec![file("sum-of.sh", SUM_OF)];
    let numbers_digest = snapshot_digest(&numbers)?;
    let empty_digest = snapshot_digest(&empty)?;
    let mut inputs = BTreeMap::new();
    inputs.insert(numbers_digest.clone(), numbers);
    inputs.insert(empty_digest.clone(), empty);
    let sum_of = RunEntry::harness("sum-of.sh");
    let sum = RunEntry::program("sum.sh");
    let input = ["/sf/input/numbers.txt"];
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
                sum.clone(),
                &input,
                &empty_digest,
                (0, Some("0\n")),
            ),
            process(
                "empty-candidate",
                Phase::Guardrail,
                Stage::Candidate,
                sum,
                &input,
                &empty_digest,
                (0, Some("0\n")),
            ),
        ],
    };
    acceptance.validate()?;
    let recipe = current_recipe(executor, 20_000, 64 * 1024)?;
    let environment = current_environment(executor)?;
    Ok(FrozenSlice {
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
    })
}

fn private(path: &Path) -> Result<(), Box<dyn Error>> {
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
