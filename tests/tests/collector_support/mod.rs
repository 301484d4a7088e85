//! Shared set-up of the collector and assurance tests: a repository over the real git binary
//! holding a small shell program with a bug, its fixture inputs frozen in a real snapshot
//! store, the frozen acceptance, recipe and environment, a real SQLite evidence store, a real
//! fence, and the real sandbox-exec Executor (`/bin/sh`).
//!
//! The program: `sum.sh FILE` prints the sum of the numbers in FILE, one per line. On the
//! base it skips the first line (the bug). `check.sh` runs it on `/sf/input/numbers.txt` and
//! compares with `/sf/input/expected.txt`, exiting 1 on a mismatch. The acceptance:
//!
//! | check | phase | stage | runs | expects |
//! |---|---|---|---|---|
//! | `bug-shown` | before | base | `check.sh` on numbers | exit 1 |
//! | `bug-fixed` | after | candidate | `check.sh` on numbers | exit 0, stdout `ok\n` (by digest) |
//! | `empty-base` | guardrail | base | `sum.sh` on an empty file | exit 0, stdout `0\n` |
//! | `empty-candidate` | guardrail | candidate | the same | the same |
//! | `reviewed` | review (reserved, never run) | | | |

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use sf_host::assurance::{
    Acceptance, Check, CheckRun, EnvironmentRecord, Expectation, FrozenSlice, JudgeRequest, Phase,
    ProcessCheck, Recipe, RepositoryPins, ReviewCheck, SliceRecord, Stage, Verdict,
    current_environment, judge,
};
use sf_host::canonical::{self, Digest, Value};
use sf_host::collector::{CollectRequest, RepositoryCollector, current_recipe, derive};
use sf_host::contracts::{
    AttemptId, CancelToken, EvidenceStore, Executor, Gate, GateAnswer, GateError, RunEntry,
};
use sf_host::environment_store::EnvironmentStore;
use sf_host::evidence::SqliteEvidenceStore;
use sf_host::fence::Fence;
use sf_host::repository::{FrozenInputs, SealedCandidate};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};
use sf_host::snapshot_store::SnapshotStore;
use sf_host::tree_store::collect_trees;
use sf_sandbox_exec::{Limits, RuntimeConfig, SandboxConfig, SandboxExecutor};
use sf_tests::{TestRepo, edit, private_dir, proposal};

/// The base's `sum.sh`: skips the first number (the bug).
pub const SUM_BUGGY: &str = "total=0\nfirst=1\nwhile read -r n; do\n  if [ \"$first\" = 1 ]; then first=0; continue; fi\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
/// The fix.
pub const SUM_FIXED: &str =
    "total=0\nwhile read -r n; do\n  total=$((total + n))\ndone < \"$1\"\necho \"$total\"\n";
/// A Candidate that does not fix the bug (it skips the last number instead).
pub const SUM_STILL_BUGGY: &str = "total=0\nprev=\nwhile read -r n; do\n  if [ -n \"$prev\" ]; then total=$((total + prev)); fi\n  prev=$n\ndone < \"$1\"\necho \"$total\"\n";
/// `check.sh`: runs `sum.sh` on the numbers and compares with the expected sum.
pub const CHECK: &str = "got=$(sh /sf/program/sum.sh /sf/input/numbers.txt)\nread -r want < /sf/input/expected.txt\nif [ \"$got\" = \"$want\" ]; then echo ok; exit 0; fi\necho \"wrong: $got\"\nexit 1\n";

/// The sandbox launcher, built with the plugin libraries once per test binary.
pub fn launcher() -> &'static Path {
    &sf_tests::plugins::built().launcher
}

/// The real sandbox-exec Executor with the `/bin/sh` runtime.
pub fn sandbox() -> Arc<SandboxExecutor> {
    sandbox_with(Limits::default())
}

/// The real sandbox-exec Executor with the `/bin/sh` runtime and `limits`.
pub fn sandbox_with(limits: Limits) -> Arc<SandboxExecutor> {
    let mut config = SandboxConfig::new(RuntimeConfig::shell());
    config.launcher = Some(launcher().to_path_buf());
    config.limits = limits;
    Arc::new(SandboxExecutor::new(config).expect("the sandbox configures"))
}

/// A gate answering from a closure.
pub struct FnGate<F>(pub F);

impl<F> Gate for FnGate<F>
where
    F: Fn(Instant) -> Result<GateAnswer, GateError> + Send + Sync,
{
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
        (self.0)(deadline)
    }
}

/// A gate that always proceeds.
pub fn proceed() -> Arc<dyn Gate> {
    Arc::new(FnGate(|_| Ok(GateAnswer::Proceed)))
}

fn file(path: &str, content: &str) -> SnapshotFile {
    SnapshotFile::regular(path, content.as_bytes().to_vec())
}

/// How a scenario's recipe and acceptance differ from the defaults.
#[derive(Clone, Debug)]
pub struct Options {
    pub timeout_ms: u64,
    pub output_limit: u64,
    /// Files generated into the base beside the scenario's own (`gen/dNNN/fNNNNN.txt`, 100
    /// a directory, deterministic), for trees of real size.
    pub extra_files: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            timeout_ms: 20_000,
            output_limit: 64 * 1024,
            extra_files: 0,
        }
    }
}

/// Everything a collection needs, on real components, in one private directory.
pub struct Scenario {
    pub repo: TestRepo,
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    /// The Slice directory: the operator's answer key lives here.
    pub slice_dir: PathBuf,
    pub snapshots: SnapshotStore,
    pub evidence_dir: PathBuf,
    pub evidence_path: PathBuf,
    pub store: Arc<SqliteEvidenceStore>,
    pub fence_dir: PathBuf,
    pub fence: Fence,
    pub executor: Arc<dyn Executor>,
    /// Where the base's tree is materialised for the sandbox to bind (its user can read it).
    pub trees: EnvironmentStore,
    pub trees_dir: tempfile::TempDir,
    pub acceptance: Acceptance,
    pub recipe: Recipe,
    pub environment: EnvironmentRecord,
    pub inputs: BTreeMap<Digest, Vec<SnapshotFile>>,
}

impl Scenario {
    /// The scenario over the real sandbox.
    pub fn real() -> Self {
        Self::new(sandbox(), Options::default())
    }

    /// The scenario over `executor`; the environment is frozen from it now.
    pub fn new(executor: Arc<dyn Executor>, options: Options) -> Self {
        let generated: Vec<(String, String)> = (0..options.extra_files)
            .map(|i| {
                (
                    format!("gen/d{:03}/f{i:05}.txt", i / 100),
                    format!("generated file {i}\n"),
                )
            })
            .collect();
        let mut files: Vec<(&str, &str)> = vec![("sum.sh", SUM_BUGGY), ("check.sh", CHECK)];
        files.extend(generated.iter().map(|(p, t)| (p.as_str(), t.as_str())));
        let repo = TestRepo::git(&files);
        let (dir, root) = private_dir();
        let slice_dir = root.join("slice");
        std::fs::create_dir(&slice_dir).unwrap();
        std::fs::write(slice_dir.join("answer-key.txt"), "ANSWER-KEY-CANARY-6\n").unwrap();
        let snapshots = SnapshotStore::open(&root.join("snapshots")).unwrap();
        let numbers = vec![
            file("numbers.txt", "1\n2\n3\n"),
            file("expected.txt", "6\n"),
        ];
        let empty = vec![file("numbers.txt", "")];
        let mut inputs = BTreeMap::new();
        for files in [numbers, empty] {
            let digest = snapshot_digest(&files).unwrap();
            snapshots.put(&files, &digest).unwrap();
            inputs.insert(
                digest,
                snapshots.read(&snapshot_digest(&files).unwrap()).unwrap(),
            );
        }
        let numbers = snapshot_digest(&[
            file("numbers.txt", "1\n2\n3\n"),
            file("expected.txt", "6\n"),
        ])
        .unwrap();
        let empty = snapshot_digest(&[file("numbers.txt", "")]).unwrap();
        let process = |id: &str,
                       phase,
                       stage,
                       entry: &str,
                       args: &[&str],
                       input: &Digest,
                       exit,
                       stdout: Option<&str>| {
            Check::Process(ProcessCheck {
                id: id.into(),
                phase,
                stage,
                run: CheckRun::Entry {
                    entry: entry.into(),
                    entry_in_scope: stage == Stage::Candidate && entry == "sum.sh",
                    args: args.iter().map(|arg| (*arg).to_owned()).collect(),
                },
                input: input.clone(),
                expectation: Expectation::exit(
                    exit,
                    stdout.map(|text| Digest::of(text.as_bytes())),
                ),
            })
        };
        let acceptance = Acceptance {
            checks: vec![
                process(
                    "bug-shown",
                    Phase::Before,
                    Stage::Base,
                    "check.sh",
                    &[],
                    &numbers,
                    1,
                    None,
                ),
                process(
                    "bug-fixed",
                    Phase::After,
                    Stage::Candidate,
                    "check.sh",
                    &[],
                    &numbers,
                    0,
                    Some("ok\n"),
                ),
                Check::Review(ReviewCheck {
                    id: "reviewed".into(),
                    prompt: "Is the fix the smallest change that makes the sum right?".into(),
                    requirement: None,
                }),
                process(
                    "empty-base",
                    Phase::Guardrail,
                    Stage::Base,
                    "sum.sh",
                    &["/sf/input/numbers.txt"],
                    &empty,
                    0,
                    Some("0\n"),
                ),
                process(
                    "empty-candidate",
                    Phase::Guardrail,
                    Stage::Candidate,
                    "sum.sh",
                    &["/sf/input/numbers.txt"],
                    &empty,
                    0,
                    Some("0\n"),
                ),
            ],
        };
        acceptance.validate().unwrap();
        let recipe =
            current_recipe(executor.as_ref(), options.timeout_ms, options.output_limit).unwrap();
        recipe.validate().unwrap();
        let environment = current_environment(executor.as_ref()).unwrap();
        let evidence_dir = root.join("evidence");
        std::fs::create_dir(&evidence_dir).unwrap();
        std::fs::set_permissions(
            &evidence_dir,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let evidence_path = evidence_dir.join("evidence.db");
        let store = Arc::new(SqliteEvidenceStore::open(&evidence_path).unwrap());
        let fence_dir = root.join("fence");
        let fence = Fence::open(&fence_dir, &repo.identity.product_id).unwrap();
        let trees_dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            trees_dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let trees = EnvironmentStore::open(&trees_dir.path().canonicalize().unwrap().join("store"))
            .expect("the tree store opens");
        Self {
            trees,
            trees_dir,
            repo,
            dir,
            root,
            slice_dir,
            snapshots,
            evidence_dir,
            evidence_path,
            store,
            fence_dir,
            fence,
            executor,
            acceptance,
            recipe,
            environment,
            inputs,
        }
    }

    /// The scenario's frozen Slice (revision `revision`): its record binds the acceptance,
    /// recipe, environment and inputs above, on the initial commit, scope `sum.sh`.
    pub fn slice_at(&self, revision: u64) -> FrozenSlice {
        let record = SliceRecord {
            id: "sum-fix".into(),
            revision,
            repository: self.repo.identity.clone(),
            base: self.repo.identity.initial,
            scope: vec!["sum.sh".into()],
            protected: Vec::new(),
            acceptance: self.acceptance.digest().unwrap(),
            recipe: self.recipe.digest().unwrap(),
            environment: self.environment.digest().unwrap(),
            harness: snapshot_digest(&[]).unwrap(),
            overlay: snapshot_digest(&[]).unwrap(),
            executor: canonical::object([("type", Value::from("sandbox-exec"))]),
            bounds: None,
            forbidden: Vec::new(),
            closed: Vec::new(),
            open: Vec::new(),
        };
        FrozenSlice {
            record,
            acceptance: self.acceptance.clone(),
            recipe: self.recipe.clone(),
            environment: self.environment.clone(),
            harness: Vec::new(),
            overlay: Vec::new(),
            inputs: self.inputs.clone(),
        }
    }

    /// The scenario's frozen Slice, revision 1.
    pub fn slice(&self) -> FrozenSlice {
        self.slice_at(1)
    }

    /// What a Candidate of `slice` is sealed for.
    pub fn frozen_for(slice: &FrozenSlice) -> FrozenInputs {
        let digest = slice.validate().expect("the scenario's Slice is whole");
        slice.record.frozen_inputs(&digest)
    }

    /// The frozen inputs a Candidate on the initial commit is sealed for.
    pub fn frozen(&self) -> FrozenInputs {
        Self::frozen_for(&self.slice())
    }

    /// Seals a Candidate replacing `sum.sh` with `sum` for `frozen`.
    pub fn seal_for(&self, frozen: &FrozenInputs, sum: &str) -> SealedCandidate {
        self.repo
            .repo
            .seal(
                frozen,
                &proposal(vec![edit("sum.sh", Some(SUM_BUGGY), Some(sum))]),
            )
            .expect("seal")
    }

    /// Seals a Candidate replacing `sum.sh` with `sum`, and the request to collect it.
    pub fn request(&self, sum: &str) -> CollectRequest {
        let sealed = self.seal_for(&self.frozen(), sum);
        self.request_for(sealed)
    }

    /// The request to collect `sealed` under this scenario's Slice.
    pub fn request_for(&self, sealed: SealedCandidate) -> CollectRequest {
        self.request_in(self.slice(), sealed)
    }

    /// The request to collect `sealed` under `slice`.
    pub fn request_in(&self, slice: FrozenSlice, sealed: SealedCandidate) -> CollectRequest {
        let trees = collect_trees(&self.repo.repo, &sealed, &slice, Some(&self.trees))
            .expect("the Candidate's trees");
        CollectRequest {
            slice,
            sealed,
            trees,
            deadline: SystemTime::now() + Duration::from_secs(600),
            environments: Default::default(),
            capabilities: Default::default(),
        }
    }

    /// The paths a Candidate must never read.
    pub fn protected(&self) -> Vec<PathBuf> {
        vec![
            self.evidence_dir.clone(),
            self.repo.path.clone(),
            self.fence_dir.clone(),
            self.snapshots.root().to_path_buf(),
            self.slice_dir.clone(),
        ]
    }

    /// A collector over this scenario's store and executor.
    pub fn collector(&self) -> RepositoryCollector {
        self.collector_over(self.executor.clone())
    }

    /// A collector over this scenario's store and `executor`.
    pub fn collector_over(&self, executor: Arc<dyn Executor>) -> RepositoryCollector {
        RepositoryCollector::new(self.store.clone(), executor, self.protected())
            .expect("the collector constructs")
    }

    /// Judges the evidence of `attempt` for `request`.
    pub fn judge(&self, request: &CollectRequest, attempt: &AttemptId) -> Verdict {
        self.judge_in(self.store.as_ref(), request, attempt)
    }

    /// Judges the evidence of `attempt` in `store`.
    pub fn judge_in(
        &self,
        store: &dyn EvidenceStore,
        request: &CollectRequest,
        attempt: &AttemptId,
    ) -> Verdict {
        let pins = pins(request);
        judge(
            &JudgeRequest {
                pins: &pins,
                acceptance: &request.slice.acceptance,
                recipe: &request.slice.recipe,
                environment: &request.slice.environment,
                attempt,
            },
            store,
            Instant::now() + Duration::from_secs(60),
        )
        .expect("a valid judge request")
    }

    /// How many records the store holds.
    pub fn records(&self) -> u64 {
        self.store.count().unwrap()
    }
}

/// The pins a collection of `request` files its records under.
pub fn pins(request: &CollectRequest) -> RepositoryPins {
    derive(&request.slice, &request.sealed, &request.trees)
        .expect("the request's Candidate was sealed for its Slice")
        .pins
}

/// A harness entry (for tests that move a check into the harness).
pub fn harness_entry(path: &str) -> RunEntry {
    RunEntry::harness(path)
}

/// A fresh cancel token.
pub fn cancel() -> CancelToken {
    CancelToken::new()
}

/// A fault a wrapped Executor injects, for faults that cannot be made for real.
pub enum Fault {
    /// Pass every call through.
    None,
    /// `run` refuses: nothing started.
    Refuse,
    /// `run` panics.
    Panic,
    /// `run` runs for real, then reports another program digest.
    Relabel,
    /// `run` runs for real, then ends the hold (before the collector's put).
    ReleaseHold(Arc<sf_host::fence::Hold>),
    /// `run` runs for real, and the run numbered here (from 1) then ends the hold.
    ReleaseHoldOnRun(Arc<sf_host::fence::Hold>, usize),
}

/// The real executor wrapped with a fault, counting the runs it was asked for.
pub struct Faulty {
    pub inner: Arc<dyn Executor>,
    pub fault: Fault,
    pub runs: std::sync::atomic::AtomicUsize,
}

impl Faulty {
    pub fn new(inner: Arc<dyn Executor>, fault: Fault) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fault,
            runs: 0.into(),
        })
    }

    pub fn runs(&self) -> usize {
        self.runs.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Executor for Faulty {
    fn describe_runtime(
        &self,
    ) -> Result<sf_host::contracts::RuntimeDescription, sf_host::contracts::ExecutorError> {
        self.inner.describe_runtime()
    }

    fn profile(
        &self,
    ) -> Result<sf_host::contracts::ProfileDescription, sf_host::contracts::ExecutorError> {
        self.inner.profile()
    }

    fn run(
        &self,
        request: &sf_host::contracts::RunRequest,
        cancel: &CancelToken,
    ) -> Result<sf_host::contracts::RunAnswer, sf_host::contracts::ExecutorError> {
        let run = self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        match &self.fault {
            Fault::None => self.inner.run(request, cancel),
            Fault::Refuse => Err(sf_host::contracts::ExecutorError::Unavailable {
                mechanism: "launcher".into(),
                reason: "injected refusal".into(),
            }),
            Fault::Panic => panic!("injected executor panic"),
            Fault::Relabel => {
                let mut answer = self.inner.run(request, cancel)?;
                answer.identities.program = Digest::of(b"another program");
                Ok(answer)
            }
            Fault::ReleaseHold(hold) => {
                let answer = self.inner.run(request, cancel);
                hold.release();
                answer
            }
            Fault::ReleaseHoldOnRun(hold, on) => {
                let answer = self.inner.run(request, cancel);
                if run == *on {
                    hold.release();
                }
                answer
            }
        }
    }
}
