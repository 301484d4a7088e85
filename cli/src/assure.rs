//! `sf collect`, `sf judge` and `sf evidence {get,find}`: Repository Assurance on the command
//! line (docs/assurance.md, "Command line"). Each reads a frozen Slice ([`SliceDir`]) and
//! checks that the Candidate was sealed for exactly it before anything else happens; only
//! `collect` writes (after its preflight), the others create nothing.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use super::common::{CliError, Context, Output, json_value, limits_hit_json, repository_error};
use super::slice_dir::{SliceDir, coded, invalid};
use sf_host::assurance::acceptance::{Acceptance, CheckRun};
use sf_host::assurance::test_results::TestResults;
use sf_host::assurance::{
    Observation, Outcome, ProcessCheck, ProcessFacts, REVIEW_FORMAT, Review, Verdict, time,
};
use sf_host::canonical::{Digest, Value, object};
use sf_host::collector::CollectTrees;
use sf_host::collector::{
    CollectError, CollectEvent, CollectRequest, CollectedRun, DERIVE_INPUT, Programs,
    RepositoryCollector, RunState, derive,
};
use sf_host::contracts::EvidenceStoreExt;
use sf_host::contracts::{CancelToken, CapturedResults, EvidenceStore};
use sf_host::environment_store::EnvironmentStore;
use sf_host::fence::Fence;
use sf_host::landing::{Judging, LandError, preflight};
use sf_host::repository::{CandidateProtocol, Repository, SealedCandidate};
use sf_host::text_escape;
use sf_host::tree_store::collect_trees;

/// How long the preflight waits for the gate's first answer.
pub const PREFLIGHT_GATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which Candidate, in which repository, under which frozen Slice.
#[derive(Debug, Args)]
pub struct CandidateInSlice {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The Candidate digest (from `sf seal`)
    #[arg(long, value_name = "DIGEST")]
    pub(super) candidate: String,
    /// The frozen Slice directory
    #[arg(long, value_name = "SLICE")]
    pub(super) slice: PathBuf,
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
    /// A gate file ({"proceed": true} or {"proceed": false, "reason": …}), read before
    /// anything starts and before every run, in place of the configured [gate] (default: open)
    #[arg(long, value_name = "FILE")]
    pub(super) gate: Option<PathBuf>,
    /// When the collection must be over (RFC 3339 UTC, e.g. 2026-01-01T12:00:00Z); default: in
    /// one hour
    #[arg(long, value_name = "ISO")]
    pub(super) deadline: Option<String>,
    /// How many checks run at a time (each still one sandboxed run and one record)
    #[arg(long, value_name = "N", default_value = "1")]
    pub(super) jobs: NonZeroUsize,
}

#[derive(Debug, Args)]
pub struct JudgeArgs {
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
    /// The attempt (fence epoch) to judge; default: the newest attempt of this Candidate under
    /// this Slice
    #[arg(long, value_name = "EPOCH")]
    pub(super) attempt: Option<u64>,
    /// Exit 0 only when Verified: 3 when Failed, 4 when Inconclusive (for CI scripts)
    #[arg(long)]
    pub(super) exit_code: bool,
}

/// `sf evidence …`.
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Print one Evidence record, re-hashed
    Get(GetArgs),
    /// List the records filed under a Candidate's pins
    Find(FindArgs),
    /// Copy every record of a Slice's SQLite store into the evidence store another
    /// configuration names (PostgreSQL, say), each re-verified; running it again copies
    /// nothing twice
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The Slice directory whose SQLite store is read
    #[arg(long, value_name = "SLICE")]
    from: PathBuf,
    /// The sf.toml whose [evidence_store] receives the records
    #[arg(long, value_name = "CONFIG")]
    to: PathBuf,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The record id (sha256:…)
    id: String,
    /// The Slice directory whose evidence store holds it
    #[arg(long, value_name = "SLICE")]
    slice: PathBuf,
}

#[derive(Debug, Args)]
pub struct FindArgs {
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
}

pub(super) fn parse_digest(text: &str, flag: &str) -> Result<Digest, CliError> {
    Digest::parse(text).ok_or_else(|| {
        invalid(
            format!("{flag} {text:?}"),
            "is not sha256: followed by 64 lowercase hex characters",
        )
    })
}

/// A landing error as the command line reports it.
pub(super) fn land_error(what: &str, error: impl Into<LandError>) -> CliError {
    let error = error.into();
    match &error {
        LandError::Repository(inner) => repository_error(what, inner),
        _ => coded(error.code(), what, error),
    }
}

/// A Candidate and the frozen Slice it is checked against, read and verified: the Slice
/// whole, the Candidate re-exported and its base read (what [`Loaded`] holds but the programs
/// derived from them).
pub(super) struct Exported {
    pub slice: SliceDir,
    pub repository: Repository,
    pub sealed: SealedCandidate,
    pub trees: CollectTrees,
    pub digest: Digest,
}

impl Exported {
    pub(super) fn read(context: &Context, target: &CandidateInSlice) -> Result<Self, CliError> {
        let digest = parse_digest(&target.candidate, "--candidate")?;
        let slice = SliceDir::open(&target.slice)?;
        Self::read_in(context, target, digest, slice, false)
    }

    /// [`Exported::read`] of Candidate `digest` under the opened `slice`.
    /// With `materialise`, an `sf-candidate/4` Candidate's base is materialised in the
    /// environment store (once per base, verified at every use) for its programs to run by
    /// reference; without, they are only named.
    fn read_in(
        context: &Context,
        target: &CandidateInSlice,
        digest: Digest,
        slice: SliceDir,
        materialise: bool,
    ) -> Result<Self, CliError> {
        let repository = context.open_repository(&target.identity)?;
        let sealed = repository
            .export_candidate(&digest)
            .map_err(|error| repository_error(&format!("--candidate {digest}"), &error))?;
        let store = match materialise && sealed.manifest.protocol == CandidateProtocol::V4 {
            true => Some(trees_store(context)?),
            false => None,
        };
        let trees = collect_trees(&repository, &sealed, &slice.frozen, store.as_ref())
            .map_err(|error| coded(error.code(), format!("--candidate {digest}"), error))?;
        Ok(Self {
            slice,
            repository,
            sealed,
            trees,
            digest,
        })
    }
}

/// The tree store, where the bases of Candidates run by reference are materialised.
pub(super) fn trees_store(context: &Context) -> Result<EnvironmentStore, CliError> {
    EnvironmentStore::open(&context.tree_store_dir()?)
        .map_err(|error| coded(error.code(), "the tree store", error))
}

/// Why Candidate `digest` is not one Slice `slice` may run, in the words of `derive`'s refusal.
fn not_for_the_slice(digest: &Digest, slice: &SliceDir, why: impl std::fmt::Display) -> CliError {
    coded(
        "invalid-input",
        format!("--candidate {digest} under --slice {}", slice.dir.display()),
        format!("{why}; nothing was started"),
    )
}

fn protected_paths(slice: &SliceDir, repository: &Repository) -> Result<Vec<PathBuf>, CliError> {
    let mut protected = slice.protected()?;
    protected.push(PathBuf::from(&repository.identity().path));
    Ok(protected)
}

/// A Candidate and the frozen Slice it is checked against, everything verified: the Slice
/// whole, the Candidate re-exported, its base read, and the Candidate sealed for exactly this
/// Slice in this repository ([`derive`]).
pub(super) struct Loaded {
    pub slice: SliceDir,
    pub repository: Repository,
    pub sealed: SealedCandidate,
    pub programs: Programs,
}

impl Loaded {
    pub(super) fn read(context: &Context, target: &CandidateInSlice) -> Result<Self, CliError> {
        let Exported {
            slice,
            repository,
            sealed,
            trees,
            digest,
        } = Exported::read(context, target)?;
        let programs = derive(&slice.frozen, &sealed, &trees)
            .map_err(|why| not_for_the_slice(&digest, &slice, why))?;
        Ok(Self {
            slice,
            repository,
            sealed,
            programs,
        })
    }

    /// What no Candidate may read: the Slice, its state and the repository.
    pub(super) fn protected(&self) -> Result<Vec<PathBuf>, CliError> {
        protected_paths(&self.slice, &self.repository)
    }

    /// The judge's view of this Candidate's evidence, read-only.
    pub(super) fn judging(&self, context: &Context) -> Result<Judging, CliError> {
        Ok(Judging {
            slice: self.slice.frozen.clone(),
            pins: self.programs.pins.clone(),
            store: self.slice.existing_evidence_store(context)?,
        })
    }
}

/// `--deadline` as a time; default: an hour from now.
pub(super) fn deadline(text: Option<&str>) -> Result<SystemTime, CliError> {
    match text {
        Some(text) => time::parse_loose(text)
            .map(time::from_millis)
            .ok_or_else(|| {
                invalid(
                    format!("--deadline {text:?}"),
                    "is an RFC 3339 UTC time such as 2026-01-01T12:00:00Z",
                )
            }),
        None => Ok(SystemTime::now() + Duration::from_secs(3600)),
    }
}

/// The verified trees of the dependency environments `acceptance` names, from the
/// environment store.
pub(super) fn environments(
    context: &Context,
    acceptance: &Acceptance,
) -> Result<BTreeMap<Digest, PathBuf>, CliError> {
    super::env::verified_trees(context, acceptance.environments())
}

/// The fence of the Slice's Product: the one that comes with the configured evidence store
/// (PostgreSQL's, shared by every machine), or the file fence in the Slice's state.
pub(super) fn fence(context: &Context, slice: &SliceDir, product: &str) -> Result<Fence, CliError> {
    let backend = context.fence(&slice.state("fence")?)?;
    Fence::new(backend, product).map_err(|error| coded(error.code(), "the fence", error))
}

pub(super) fn run_json_of(run: &CollectedRun) -> serde_json::Value {
    serde_json::json!({
        "check": run.check,
        "state": run.state.as_str(),
        "evidence": run.evidence.as_ref().map(ToString::to_string),
        "problems": run.problems,
        "limitsHit": limits_hit_json(&run.limits_hit),
    })
}

/// A collection's progress on stderr: a line when each check's run starts and one when it is
/// settled, with its time; on a terminal, also a live bar of the checks settled, drawn below
/// the lines and cleared at the end.
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    checks: usize,
    started: std::sync::atomic::AtomicUsize,
    settled: std::sync::atomic::AtomicUsize,
    began: Instant,
}

/// How a run ended, in a word a person reads first: the executor's status (`exited 0`,
/// `timed-out`, `output-limit`, `signalled 9`) for a run it answered, else the run's state
/// (`not-started`, `unresolved`, `storage-failed`).
pub(super) fn run_word(run: &CollectedRun) -> String {
    use sf_host::contracts::RunStatus;
    match (&run.process, run.state) {
        (Some(process), RunState::Observed) => {
            match (process.status, process.exit_code, process.signal) {
                (RunStatus::Exited, Some(code), _) => format!("exited {code}"),
                (RunStatus::Signalled, _, Some(signal)) => format!("signalled {signal}"),
                (status, _, _) => status.code().to_owned(),
            }
        }
        (_, state) => state.as_str().to_owned(),
    }
}

impl Progress {
    /// The progress of a collection of `checks` process checks.
    pub(super) fn new(checks: usize) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(checks as u64);
            if let Ok(style) =
                ProgressStyle::with_template("{spinner} {pos}/{len} checks settled, {elapsed}")
            {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            bar,
            checks,
            started: 0.into(),
            settled: 0.into(),
            began: Instant::now(),
        }
    }

    /// Reports one event: `sf: [started/checks] CHECK started` and `sf: [settled/checks]
    /// CHECK WORD in 1.2s (3.4s in all)`, with the run's first problem.
    pub(super) fn report(&self, event: CollectEvent<'_>) {
        use std::sync::atomic::Ordering;
        let checks = self.checks;
        let line = match event {
            CollectEvent::Started { check } => {
                let at = self.started.fetch_add(1, Ordering::SeqCst) + 1;
                // The start line comes with the first run, so a landing that runs nothing
                // (a replay) prints none.
                let start = if at == 1 {
                    format!("sf: running {checks} process check(s)\n")
                } else {
                    String::new()
                };
                format!("{start}sf: [{at}/{checks}] {check} started")
            }
            CollectEvent::Settled { run, elapsed } => {
                let at = self.settled.fetch_add(1, Ordering::SeqCst) + 1;
                let took = format!(
                    "{:.1}s ({:.1}s in all)",
                    elapsed.as_secs_f64(),
                    self.began.elapsed().as_secs_f64()
                );
                let word = run_word(run);
                match run.problems.first() {
                    Some(problem) => format!(
                        "sf: [{at}/{checks}] {} {word} in {took}: {}",
                        run.check,
                        text_escape::line(problem)
                    ),
                    None => format!("sf: [{at}/{checks}] {} {word} in {took}", run.check),
                }
            }
        };
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                if matches!(event, CollectEvent::Settled { .. }) {
                    bar.inc(1);
                }
            }
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `sf collect`.
pub fn run_collect(context: &Context, args: CollectArgs) -> Result<Output, CliError> {
    let deadline = deadline(args.deadline.as_deref())?;
    super::land::check_gate_file(args.gate.as_deref())?;
    let digest = parse_digest(&args.target.candidate, "--candidate")?;
    let slice = SliceDir::open(&args.target.slice)?;
    // The dependency environments are verified on a thread of their own while the Candidate is
    // exported and checked (neither needs the other, and each is a good part of the time before
    // the first check starts); their verdict is taken where it always was, after the preflight
    // and before the attempt is claimed.
    let environments: Vec<Digest> = slice
        .frozen
        .acceptance
        .environments()
        .into_iter()
        .cloned()
        .collect();
    let store_dir = (!environments.is_empty()).then(|| context.environment_store_dir());
    std::thread::scope(|scope| {
        let verifying = scope.spawn(move || match store_dir {
            None => Ok(BTreeMap::new()),
            Some(dir) => dir.and_then(|dir| super::env::verified_trees_in(&dir, &environments)),
        });
        let verified = || {
            verifying.join().unwrap_or_else(|_| {
                Err(CliError::new(
                    "unavailable",
                    "verifying the dependency environments failed; nothing was started",
                ))
            })
        };
        collect_exported(context, &args, deadline, digest, slice, verified)
    })
}

/// The rest of `sf collect` once the Slice is open; `verified` answers the verification of
/// its dependency environments.
fn collect_exported(
    context: &Context,
    args: &CollectArgs,
    deadline: SystemTime,
    digest: Digest,
    slice: SliceDir,
    verified: impl FnOnce() -> Result<BTreeMap<Digest, PathBuf>, CliError>,
) -> Result<Output, CliError> {
    let Exported {
        slice,
        repository,
        sealed,
        trees,
        digest,
    } = Exported::read_in(context, &args.target, digest, slice, true)?;
    // The collector checks the Slice and the Candidate and derives what runs before anything
    // is claimed; a Candidate not sealed for this Slice starts nothing.
    let prepared = RepositoryCollector::prepare(CollectRequest {
        slice: slice.frozen.clone(),
        sealed,
        trees,
        deadline,
        environments: BTreeMap::new(),
    })
    .map_err(|error| match error {
        CollectError::InvalidInput { input, rule } if input == DERIVE_INPUT => {
            not_for_the_slice(&digest, &slice, rule)
        }
        error => coded(error.code(), "the collection", error),
    })?;
    let slice = &slice;
    let executor = slice.executor(context)?;
    let gate = context.gate(args.gate.as_deref())?;
    preflight(
        executor.as_ref(),
        &slice.frozen,
        &gate,
        deadline,
        PREFLIGHT_GATE_TIMEOUT,
    )
    .map_err(|error| land_error("before the collection", error))?;
    // Verified before the attempt is claimed: an environment that changed starts nothing.
    let prepared = prepared.with_environments(verified()?);
    let protected = protected_paths(slice, &repository)?;
    let store = slice.evidence_store(context)?;
    let product = repository.identity().product_id.clone();
    let fence = fence(context, slice, &product)?;
    let collector = RepositoryCollector::new(store, executor, protected)
        .map_err(|error| coded(error.code(), "the collector", error))?
        .with_jobs(args.jobs);
    let hold = fence.acquire().map_err(|error| {
        coded(
            error.code(),
            "the fence",
            format!("{error}; wait for the other attempt to end"),
        )
    })?;
    eprintln!("sf collect: attempt {}", hold.attempt());
    let progress = Progress::new(slice.frozen.acceptance.process_checks().count());
    let result = collector
        .collect_prepared(&prepared, gate, &hold, &CancelToken::new(), &mut |event| {
            progress.report(event)
        })
        .map_err(|error| coded(error.code(), "the collection", error))?;
    drop(progress);
    let json = serde_json::json!({
        "attempt": json_value(&result.attempt.to_value()),
        "pins": result.pins.to_string(),
        "mayJudge": result.may_judge(),
        "runs": result.runs.iter().map(run_json_of).collect::<Vec<_>>(),
        "evidence": result.evidence.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    let mut text = format!(
        "collected attempt {} ({} records)\n",
        result.attempt,
        result.evidence.len()
    );
    for run in &result.runs {
        text.push_str(&format!("  {:<24} {}\n", run.check, run_word(run)));
        for hit in &run.limits_hit {
            text.push_str(&format!(
                "  {:<24}   {}\n",
                "",
                text_escape::line(&hit.to_string())
            ));
        }
    }
    if !result.may_judge() {
        text.push_str("no Verdict may be issued for this attempt\n");
    }
    Ok(Output { json, text })
}

/// The exit status `sf judge --exit-code` and `sf land` give an outcome.
pub fn outcome_exit(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Verified => 0,
        Outcome::Failed => super::EXIT_FAILED,
        Outcome::Inconclusive => super::EXIT_INCONCLUSIVE,
    }
}

/// The text of a Verdict: the outcome, each check and why it missed, the reasons.
pub(super) fn verdict_text(verdict: &Verdict, digest: &Digest) -> String {
    let mut text = format!(
        "{} (attempt {})\n  verdict {digest}\n",
        verdict.outcome.as_str(),
        verdict.attempt
    );
    for check in &verdict.checks {
        let problems = text_escape::line(&check.problems.join("; ")).into_owned();
        let met = match check.met {
            Some(true) => "met".to_owned(),
            Some(false) => format!("missed: {problems}"),
            None => format!("not attributable: {problems}"),
        };
        text.push_str(&format!("  {:<24} {met}\n", check.check));
    }
    text.push_str(&review_lines(verdict));
    for reason in &verdict.reasons {
        // A check that is not attributable is the reason `check ID: PROBLEMS`, already shown
        // on its own line: each reason is printed once.
        let shown = verdict.checks.iter().any(|check| {
            check.met.is_none()
                && *reason == format!("check {}: {}", check.check, check.problems.join("; "))
        }) || reason.starts_with("review check ");
        if !shown {
            text.push_str(&format!("  reason: {}\n", text_escape::line(reason)));
        }
    }
    text
}

/// The review checks of a Verdict, a line each, after the subject they were counted for:
/// `approved by alice, bob (2 of 2)`, `rejected: …`, `awaiting …`. Empty for a Verdict of an
/// acceptance without counted review checks. A review check is never "not attributable", so
/// each of its problems is shown here and the Verdict's matching reason is not repeated.
pub(super) fn review_lines(verdict: &Verdict) -> String {
    let Some(reviews) = &verdict.reviews else {
        return String::new();
    };
    let mut text = format!(
        "  review subject {} (process checks {})\n",
        reviews.subject,
        reviews.process.as_str()
    );
    for check in &reviews.checks {
        let state = match check.met {
            Some(true) => format!(
                "approved by {} ({} of {})",
                check.approved_by.join(", "),
                check.approved_by.len(),
                check.approvals
            ),
            Some(false) => "rejected".to_owned(),
            None => "awaiting approval".to_owned(),
        };
        text.push_str(&format!("  {:<24} {state}\n", check.check));
        for problem in &check.problems {
            text.push_str(&format!("  {:<24}   {}\n", "", text_escape::line(problem)));
        }
    }
    text
}

/// A Verdict as JSON: its record, its digest, and the executor's limits each check's run hit
/// (by check; the record's problems name them too).
pub(super) fn verdict_json(verdict: &Verdict, digest: &Digest) -> serde_json::Value {
    let limits_hit: serde_json::Map<String, serde_json::Value> = verdict
        .checks
        .iter()
        .filter(|check| !check.limits_hit.is_empty())
        .map(|check| (check.check.clone(), limits_hit_json(&check.limits_hit)))
        .collect();
    serde_json::json!({
        "verdict": json_value(&verdict.to_value()),
        "digest": digest.to_string(),
        "limitsHit": limits_hit,
    })
}

/// `sf judge`: the Verdict, and with `--exit-code` an exit status CI can branch on.
pub fn run_judge(context: &Context, args: JudgeArgs) -> Result<(Output, u8), CliError> {
    let loaded = Loaded::read(context, &args.target)?;
    let judging = loaded.judging(context)?;
    let verdict = judging
        .verdict(args.attempt)
        .map_err(|error| land_error("judging", error))?;
    let digest = verdict
        .digest()
        .map_err(|error| invalid("the Verdict", error))?;
    let exit = if args.exit_code {
        outcome_exit(verdict.outcome)
    } else {
        0
    };
    Ok((
        Output {
            json: verdict_json(&verdict, &digest),
            text: verdict_text(&verdict, &digest) + &output_tails(judging.store.as_ref(), &verdict),
        },
        exit,
    ))
}

/// How many of the last lines of a run's stdout and stderr the text of a Verdict shows for
/// each check that was not met, and at most how many bytes of them.
const TAIL_LINES: usize = 20;
const TAIL_BYTES: usize = 4096;

/// The last lines of the stdout and stderr of every check that was not met (missed, or not
/// attributable), read from its record and escaped for the terminal: what a person needs to
/// see why without `sf evidence get`. A record that cannot be read is said in one line; it
/// never fails the command (the Verdict already stands).
pub(super) fn output_tails(store: &dyn EvidenceStore, verdict: &Verdict) -> String {
    let mut text = String::new();
    for check in &verdict.checks {
        let (Some(id), false) = (&check.record, check.met == Some(true)) else {
            continue;
        };
        let observation = store
            .get_verified(id, Instant::now() + Duration::from_secs(60))
            .map_err(|error| error.to_string())
            .and_then(|record| {
                Observation::decode_format(record.format(), record.payload())
                    .map_err(|why| why.to_string())
            });
        match observation {
            Ok(observation) => {
                text.push_str(&format!("check {} (record {id}):\n", check.check));
                for (name, bytes) in [
                    ("stdout", &observation.stdout),
                    ("stderr", &observation.stderr),
                ] {
                    let (shown, cut) = tail(bytes, TAIL_LINES, TAIL_BYTES);
                    let label = if cut {
                        format!("{name}, its end")
                    } else {
                        name.to_owned()
                    };
                    text.push_str(&text_escape::block(&label, shown));
                }
            }
            Err(why) => text.push_str(&format!(
                "check {}: its record {id} cannot be shown: {}\n",
                check.check,
                text_escape::line(&why)
            )),
        }
    }
    text
}

/// The end of `bytes`: at most `lines` lines and `max_bytes` bytes, and whether that cut
/// anything.
pub(super) fn tail(bytes: &[u8], lines: usize, max_bytes: usize) -> (&[u8], bool) {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut start = body
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, byte)| **byte == b'\n')
        .nth(lines.saturating_sub(1))
        .map_or(0, |(at, _)| at + 1);
    start = start.max(bytes.len().saturating_sub(max_bytes));
    // Never start inside a UTF-8 sequence the byte bound cut.
    while bytes.get(start).is_some_and(|byte| byte & 0xc0 == 0x80) {
        start += 1;
    }
    (&bytes[start..], start > 0)
}

/// What a process check runs, as a person would type it: the runtime, the entry (where it is
/// placed in the sandbox) and the arguments, or a command's argv with its working directory
/// and environment, each escaped for the terminal.
pub(super) fn command_line(slice: &SliceDir, check: &ProcessCheck) -> String {
    let words: Vec<String> = match &check.run {
        CheckRun::Entry { entry, args, .. } => std::iter::once(slice.frozen.recipe.runtime.clone())
            .chain(std::iter::once(entry.inside()))
            .chain(args.iter().cloned())
            .collect(),
        CheckRun::Command(command) => command.argv.clone(),
    };
    let line = words
        .iter()
        .map(|word| text_escape::line(word).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    match check.command() {
        Some(command) => {
            let mut line = format!("{line}  (in {}", text_escape::line(&command.cwd.inside()));
            if let Some(environment) = &command.environment {
                line.push_str(&format!(
                    ", environment {} at {}",
                    text_escape::line(&environment.name),
                    text_escape::line(&environment.at)
                ));
            }
            if command.scratch_executable {
                line.push_str(", scratch executable");
            }
            line.push(')');
            line
        }
        None => line,
    }
}

/// The per-test table of a command's results file, as text (a line per test, escaped) and
/// as JSON (`{state, reason?, error?, tests: [{id, outcome, durationMs}]}`).
pub(super) fn results_lines(results: &CapturedResults) -> (String, serde_json::Value) {
    match results {
        CapturedResults::Absent => (
            "  results none (the run left no results file)\n".to_owned(),
            serde_json::json!({"state": "absent"}),
        ),
        CapturedResults::Refused(reason) => (
            format!("  results refused: {}\n", text_escape::line(reason)),
            serde_json::json!({"state": "refused", "reason": reason}),
        ),
        CapturedResults::Written(bytes) => match TestResults::parse_junit(bytes) {
            Err(error) => (
                format!(
                    "  results {} bytes that are not JUnit XML sf reads: {}\n",
                    bytes.len(),
                    text_escape::line(&error.to_string())
                ),
                serde_json::json!({"state": "written", "error": error.to_string()}),
            ),
            Ok(parsed) => {
                let counts = parsed.counts();
                let mut text = format!(
                    "  results {} tests: {} passed, {} failed, {} errored, {} skipped\n",
                    parsed.cases.len(),
                    counts.passed,
                    counts.failed,
                    counts.error,
                    counts.skipped
                );
                for case in &parsed.cases {
                    text.push_str(&format!(
                        "    {:<7} {:>6} ms  {}\n",
                        case.outcome.as_str(),
                        case.duration_ms,
                        text_escape::line(&case.id)
                    ));
                }
                let tests: Vec<serde_json::Value> = parsed
                    .cases
                    .iter()
                    .map(|case| {
                        serde_json::json!({"id": case.id, "outcome": case.outcome.as_str(),
                                           "durationMs": case.duration_ms})
                    })
                    .collect();
                (
                    text,
                    serde_json::json!({"state": "written", "tests": tests}),
                )
            }
        },
    }
}

/// A review record as `sf evidence get` shows it: its fields a line each, and the reviewer's
/// reason as a block (the reviewer's words never pass for sf's lines).
fn review_record_text(review: &Review) -> String {
    let mut text = format!(
        "  check    {}\n  decision {}\n  reviewer {}{}\n  at       {}\n  subject  {}\n  candidate {}\n",
        review.check,
        review.decision.as_str(),
        review.reviewer,
        if review.signature.is_some() {
            " (signed)"
        } else {
            ""
        },
        review.at,
        review.subject,
        review.candidate
    );
    text.push_str(&text_escape::block(
        "reason",
        format!("{}\n", review.reason).as_bytes(),
    ));
    text
}

/// How a run ended and what it used, one line each.
fn process_lines(process: &ProcessFacts) -> String {
    let ended = match (process.exit_code, process.signal) {
        (Some(code), _) => format!("{} (exit code {code})", process.status.code()),
        (None, Some(signal)) => format!("{} (signal {signal})", process.status.code()),
        (None, None) => process.status.code().to_owned(),
    };
    let peak = process
        .memory_peak_bytes
        .map_or_else(String::new, |bytes| format!(", peak memory {bytes} bytes"));
    format!(
        "  ended   {ended}\n  time    {} ms wall, {} ms user, {} ms system (timeout {} ms)\n  memory  largest process {} KiB{peak}\n",
        process.wall_ms,
        process.user_ms,
        process.system_ms,
        process.timeout_ms,
        process.max_rss_kib
    )
}

/// `sf evidence …`.
pub fn run_evidence(context: &Context, command: EvidenceCommand) -> Result<Output, CliError> {
    match command {
        EvidenceCommand::Migrate(args) => super::migrate::run(context, &args.from, &args.to),
        EvidenceCommand::Get(args) => {
            let id = parse_digest(&args.id, "ID")?;
            let slice = SliceDir::open(&args.slice)?;
            let store = slice.existing_evidence_store(context)?;
            let record = store
                .get_verified(&id, Instant::now() + Duration::from_secs(60))
                .map_err(|error| coded(error.code(), format!("record {id}"), error))?;
            let observation = Observation::is_format(record.format())
                .then(|| Observation::decode_format(record.format(), record.payload()))
                .transpose()
                .map_err(|why| coded("corrupt", format!("record {id}"), why))?;
            let mut json = serde_json::json!({
                "id": id.to_string(),
                "pins": record.pins().to_string(),
                "attempt": json_value(&record.attempt().to_value()),
                "format": record.format(),
                "bytes": record.bytes().len(),
            });
            let mut text = format!(
                "record {id}\n  pins    {}\n  attempt {}\n  format  {}\n",
                record.pins(),
                record.attempt(),
                record.format()
            );
            if record.format() == REVIEW_FORMAT {
                let review = Review::from_payload(record.payload())
                    .map_err(|why| coded("corrupt", format!("record {id}"), why))?;
                json["review"] = json_value(&review.to_value());
                text.push_str(&review_record_text(&review));
            }
            if let Some(observation) = observation {
                json["observation"] = json_value(&observation.facts_value());
                json["stdout"] = String::from_utf8_lossy(&observation.stdout).into();
                json["stderr"] = String::from_utf8_lossy(&observation.stderr).into();
                text.push_str(&format!(
                    "  check   {} ({})\n  status  {}\n",
                    observation.facts.check,
                    observation.facts.stage.as_str(),
                    observation.facts.status.as_str()
                ));
                if let Some(check) = slice
                    .frozen
                    .acceptance
                    .process_checks()
                    .find(|check| check.id == observation.facts.check)
                {
                    text.push_str(&format!("  command {}\n", command_line(&slice, check)));
                }
                if let Some(process) = &observation.facts.process {
                    text.push_str(&process_lines(process));
                }
                for problem in &observation.facts.problems {
                    text.push_str(&format!("  problem {}\n", text_escape::line(problem)));
                }
                match observation
                    .facts
                    .process
                    .as_ref()
                    .map(|process| process.limits_hit.as_deref())
                {
                    Some(Some(hits)) => {
                        for hit in hits {
                            text.push_str(&format!(
                                "  limit   {}\n",
                                text_escape::line(&hit.to_string())
                            ));
                        }
                    }
                    Some(None) => text.push_str("  limits  not recorded (an older format)\n"),
                    None => {}
                }
                if let Some(results) = &observation.results {
                    let (summary, tests) = results_lines(results);
                    json["results"] = tests;
                    text.push_str(&summary);
                }
                text.push_str(&text_escape::block("stdout", &observation.stdout));
                text.push_str(&text_escape::block("stderr", &observation.stderr));
            }
            Ok(Output { json, text })
        }
        EvidenceCommand::Find(args) => {
            let loaded = Loaded::read(context, &args.target)?;
            let pins = loaded
                .programs
                .pins
                .digest()
                .map_err(|error| invalid("the pins", error))?;
            let store: Arc<_> = loaded.slice.existing_evidence_store(context)?;
            let ids = store
                .find(&pins, Instant::now() + Duration::from_secs(60))
                .map_err(|error| coded(error.code(), "the evidence store", error))?;
            let json = json_value(&object([
                ("pins", pins.to_string().into()),
                (
                    "ids",
                    Value::Array(ids.iter().map(|id| id.to_string().into()).collect()),
                ),
            ]));
            let mut text = format!("pins {pins}: {} records\n", ids.len());
            for id in &ids {
                text.push_str(&format!("  {id}\n"));
            }
            Ok(Output { json, text })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tail;

    #[test]
    fn a_tail_keeps_the_last_lines_within_the_byte_bound_on_a_character_boundary() {
        let text: String = (1..=30).map(|n| format!("line {n}\n")).collect();
        let (shown, cut) = tail(text.as_bytes(), 20, 4096);
        assert!(cut);
        assert!(shown.starts_with(b"line 11\n") && shown.ends_with(b"line 30\n"));
        let (all, cut) = tail(b"one\ntwo", 20, 4096);
        assert_eq!((all, cut), (&b"one\ntwo"[..], false));
        // 3 000 two-byte characters on one line: the byte bound cuts, never inside one.
        let wide = "é".repeat(3000);
        let (shown, cut) = tail(wide.as_bytes(), 20, 4095);
        assert!(cut);
        assert!(std::str::from_utf8(shown).is_ok());
        assert_eq!(shown.len(), 4094);
    }
}
