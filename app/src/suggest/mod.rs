//! `suggest`: a Slice directory written from a fix, ready to freeze. The fix's test files
//! (the changed paths the test globs match) become the overlay, its other changed files the
//! scope; the runner runs the overlay's test files K times on the base and K times on the
//! base with the fix, in the sandbox with the Slice's environment (trials: nothing stored),
//! and the lists are read from the runs ([`lists::classify`]): FAIL_TO_PASS, PASS_TO_PASS,
//! the flaky tests named and left out. The checks it writes: `before` on the base (both
//! lists), `after` on the Candidate (FAIL_TO_PASS), `guardrail` on the Candidate
//! (PASS_TO_PASS), each running the runner on the overlay's test files with the tests left
//! out of the lists deselected.
//!
//! Without a fix, the overlay is the test files of a directory that differ from the base (a
//! reproduction written before the fix), FAIL_TO_PASS the tests that fail on the base.

mod lists;
mod runner;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use sf_host::assurance::test_results::TestResults;
use sf_host::assurance::{FrozenSlice, ProcessCheck};
use sf_host::collector::{Trial, TrialOutcome, TrialRun, TrialTree};
use sf_host::contracts::{CancelToken, CapturedResults};
use sf_host::path_glob::PathGlob;
use sf_host::repository::{EditedEntry, is_valid_id};
use sf_host::snapshot::SnapshotFile;

pub use lists::Lists;
use lists::{RunResults, classify, exit_code};
pub use runner::Runner;
use runner::{UNITTEST_HARNESS, UNITTEST_HARNESS_TEXT};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::freeze::{Base, base_of, checked_unwritten, trial_request};
use crate::propose::{After, Change, commit_changes, tree_changes};
use crate::slice_dir::canonical_dir;

/// The most runs of each tree.
pub const MAX_RUNS: usize = 20;

/// The recipe a suggested Slice is written with.
const RECIPE: &str = r#"{"timeoutMs": 600000, "outputLimit": 4194304}"#;

/// The most bytes of a run's output an error quotes.
const QUOTED_OUTPUT: usize = 600;

/// A Slice to suggest.
#[derive(Clone, Debug)]
pub struct SuggestRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The Slice directory to write: absent, or an empty directory.
    pub dir: PathBuf,
    /// The Slice's id.
    pub id: String,
    /// The dependency environment the runner runs in (a name in the store), if any.
    pub environment: Option<String>,
    /// The test runner.
    pub runner: Runner,
    /// The fix: a commit of `repo`; `None` to take the test files of `repo`'s directory.
    pub fix: Option<String>,
    /// The Git repository of the fix, or the directory of the tests.
    pub repo: PathBuf,
    /// Which changed paths are tests (path globs); the runner's usual layouts when empty.
    pub tests: Vec<String>,
    /// Environment variables of the checks' runs.
    pub env: Vec<(String, String)>,
    /// How many times each tree runs.
    pub runs: NonZeroUsize,
    /// The Slice's scope; the fix's other changed files when empty.
    pub scope: Vec<String>,
    /// Arguments given to the runner before the test files.
    pub extra_args: Vec<String>,
    /// Another base than the target: a factory commit of the repository.
    pub base: Option<String>,
}

/// A Slice suggested and written.
#[derive(Clone, Debug)]
pub struct Suggested {
    /// The Slice directory written.
    pub dir: PathBuf,
    /// The overlay's files (the fix's test files).
    pub overlay: Vec<String>,
    /// The test files the runner runs.
    pub files: Vec<String>,
    /// The scope written.
    pub scope: Vec<String>,
    /// What the runs found.
    pub lists: Lists,
    /// How many times each tree ran.
    pub runs: usize,
    /// Whether a fix ran.
    pub fixed: bool,
}

/// Suggests the Slice `request` names and writes it to `request.dir`; on error, nothing is
/// left there.
pub fn suggest(backends: &Backends, request: &SuggestRequest) -> Result<Suggested, AppError> {
    check_request(request)?;
    let created = claim_dir(&request.dir)?;
    let suggested = canonical_dir(&request.dir, "--dir").and_then(|dir| {
        let request = SuggestRequest {
            dir,
            ..request.clone()
        };
        suggest_in(backends, &request)
    });
    if suggested.is_err() && created {
        // The directory is sf's own, made just now; what it holds is a draft.
        let _ = std::fs::remove_dir_all(&request.dir);
    }
    suggested
}

/// The checks of `request` made before anything is read or written.
fn check_request(request: &SuggestRequest) -> Result<(), AppError> {
    if !is_valid_id(&request.id) {
        return Err(AppError::coded(
            "invalid-input",
            format!("--id {:?}", request.id),
            sf_host::repository::ID_RULE,
        ));
    }
    if request.runs.get() > MAX_RUNS {
        return Err(AppError::coded(
            "invalid-input",
            format!("--runs {}", request.runs),
            format!("is 1 to {MAX_RUNS}"),
        ));
    }
    if request.fix.is_none() && request.scope.is_empty() {
        return Err(AppError::coded(
            "invalid-input",
            "--scope",
            "is needed without --fix: there are no changed files to take the scope from",
        ));
    }
    for glob in &request.tests {
        PathGlob::parse(glob)
            .map_err(|error| AppError::invalid(format!("--tests {glob:?}"), error))?;
    }
    Ok(())
}

/// Makes `dir` (or takes it when it is an empty directory); whether it was made.
fn claim_dir(dir: &Path) -> Result<bool, AppError> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_none()) {
        Ok(true) => Ok(false),
        Ok(false) => Err(AppError::coded(
            "invalid-input",
            format!("--dir {}", dir.display()),
            "is not empty; a suggested Slice is written to a new or empty directory",
        )),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(dir).map_err(|error| {
                AppError::coded("io", format!("--dir {}", dir.display()), error)
            })?;
            Ok(true)
        }
        Err(error) => Err(AppError::coded(
            "io",
            format!("--dir {}", dir.display()),
            error,
        )),
    }
}

/// The suggestion, with `request.dir` claimed.
fn suggest_in(backends: &Backends, request: &SuggestRequest) -> Result<Suggested, AppError> {
    let changes = {
        let base = base_of(backends, &request.identity, request.base.as_deref())?;
        match &request.fix {
            Some(rev) => commit_changes(&base.repository, &request.repo, rev)?,
            None => tree_changes(&base.repository, &base.commit, &request.repo)?,
        }
    };
    let split = Split::of(request, changes)?;
    let argv = request
        .runner
        .argv(&split.files, &[], &request.extra_args)?;
    write_draft(request, &split, &argv)?;
    let (frozen, base) = checked_unwritten(
        backends,
        &request.dir,
        &request.identity,
        request.base.as_deref(),
    )?;
    let edits = edits_over(&base, &split.code)?;
    let (base_runs, fixed_runs) = run_trials(backends, request, &frozen, &base, edits)?;
    let lists = classify(&base_runs, fixed_runs.as_deref());
    if lists.fail_to_pass.is_empty() {
        return Err(no_fail_to_pass(&lists, request.fix.is_some()));
    }
    let argv = request
        .runner
        .argv(&split.files, &lists.deselected, &request.extra_args)?;
    let exits = (
        exit_code(&base_runs, &lists.deselected),
        fixed_runs
            .as_deref()
            .map_or(0, |runs| exit_code(runs, &lists.deselected)),
    );
    write_acceptance(request, &argv, &lists, exits)?;
    Ok(Suggested {
        dir: request.dir.clone(),
        overlay: split.overlay.iter().map(|file| file.path.clone()).collect(),
        files: split.files,
        scope: split.scope,
        lists,
        runs: request.runs.get(),
        fixed: request.fix.is_some(),
    })
}

/// The changes of a fix split into its tests and its code.
struct Split {
    /// The test files, as the overlay holds them.
    overlay: Vec<SnapshotFile>,
    /// The overlay's files the runner runs.
    files: Vec<String>,
    /// The other changes.
    code: Vec<Change>,
    /// The scope: as given, or the code's paths.
    scope: Vec<String>,
}

impl Split {
    fn of(request: &SuggestRequest, changes: Vec<Change>) -> Result<Self, AppError> {
        let globs: Vec<PathGlob> = match request.tests.is_empty() {
            true => request
                .runner
                .default_tests()
                .iter()
                .map(|g| (*g).to_owned())
                .collect(),
            false => request.tests.clone(),
        }
        .iter()
        .map(|glob| PathGlob::parse(glob).map_err(|error| AppError::invalid(glob, error)))
        .collect::<Result<_, _>>()?;
        let mut split = Split {
            overlay: Vec::new(),
            files: Vec::new(),
            code: Vec::new(),
            scope: request.scope.clone(),
        };
        for change in changes {
            let test = globs.iter().any(|glob| glob.matches(&change.path));
            match (&change.after, test) {
                (After::Entry(mode, bytes), true) => {
                    if request.runner.runs_file(&change.path) {
                        split.files.push(change.path.clone());
                    }
                    split
                        .overlay
                        .push(SnapshotFile::new(change.path, *mode, bytes.clone()));
                }
                // A test file the fix removes is neither a test to run nor code.
                (After::Absent, true) => {}
                (_, false) => split.code.push(change),
            }
        }
        if split.files.is_empty() {
            return Err(AppError::coded(
                "invalid-input",
                "--tests",
                format!(
                    "no changed file is a {} test file under the test globs ({}); name the fix's \
                     test files with --tests GLOB",
                    request.runner.as_str(),
                    globs
                        .iter()
                        .map(PathGlob::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if split.scope.is_empty() {
            split.scope = split
                .code
                .iter()
                .map(|change| change.path.clone())
                .collect();
        }
        if split.scope.is_empty() {
            return Err(AppError::coded(
                "invalid-input",
                "--scope",
                "is needed: the fix changes no file but its tests, so there is no scope to take \
                 from it",
            ));
        }
        Ok(split)
    }
}

/// The fix's code changes as entries over the base.
fn edits_over(base: &Base, code: &[Change]) -> Result<Vec<EditedEntry>, AppError> {
    let tree = base
        .repository
        .tree_at(&base.commit)
        .map_err(|error| repository_error(&base.named, &error))?;
    code.iter()
        .map(|change| {
            let prior = tree
                .read(&change.path)
                .map_err(|error| repository_error(&base.named, &error))?
                .map(|(mode, bytes)| SnapshotFile::new(change.path.clone(), mode, bytes));
            let next = match &change.after {
                After::Entry(mode, bytes) => {
                    Some(SnapshotFile::new(change.path.clone(), *mode, bytes.clone()))
                }
                After::Absent => None,
            };
            Ok(EditedEntry {
                path: change.path.clone(),
                prior,
                next,
            })
        })
        .collect()
}

/// Runs the draft's check K times on the base and, with a fix, K times with it; each run's
/// results.
fn run_trials(
    backends: &Backends,
    request: &SuggestRequest,
    frozen: &FrozenSlice,
    base: &Base,
    edits: Vec<EditedEntry>,
) -> Result<(Vec<RunResults>, Option<Vec<RunResults>>), AppError> {
    let trial_req = trial_request(backends, frozen, base, edits)?;
    let config = backends.config()?;
    let executor = backends.executor_of(&config)?;
    let protected = vec![
        request.dir.clone(),
        PathBuf::from(&base.repository.identity().path),
    ];
    let trial = Trial::new(executor, protected)
        .map_err(|error| AppError::coded(error.code(), "the trial runs", error))?;
    let check: &ProcessCheck = frozen
        .acceptance
        .process_checks()
        .next()
        .ok_or_else(|| AppError::new("internal", "the draft Slice has no check"))?;
    let k = request.runs.get();
    let mut runs: Vec<(&ProcessCheck, TrialTree)> = vec![(check, TrialTree::Base); k];
    if request.fix.is_some() {
        runs.extend(vec![(check, TrialTree::Changed); k]);
    }
    let ran = trial
        .run(&trial_req, &runs, &CancelToken::new())
        .map_err(|error| AppError::coded(error.code(), "the trial runs", error))?;
    let results = ran
        .iter()
        .enumerate()
        .map(|(at, run)| results_of(run, at % k + 1))
        .collect::<Result<Vec<_>, _>>()?;
    let (base_runs, fixed_runs) = results.split_at(k);
    Ok((
        base_runs.to_vec(),
        request.fix.is_some().then(|| fixed_runs.to_vec()),
    ))
}

/// The results of trial run `run` (the `nth` of its tree), or why it gave none.
fn results_of(run: &TrialRun, nth: usize) -> Result<RunResults, AppError> {
    let tree = match run.tree {
        TrialTree::Base => "the base",
        TrialTree::Changed => "the fix",
    };
    let what = format!("run {nth} on {tree}");
    let (stdout, stderr, results) = match &run.outcome {
        TrialOutcome::NotStarted(why) | TrialOutcome::Unresolved(why) => {
            return Err(AppError::coded(
                "unavailable",
                what,
                format!("did not run: {why}"),
            ));
        }
        TrialOutcome::Ran { problems, .. } if !problems.is_empty() => {
            return Err(AppError::coded("unavailable", what, problems.join("; ")));
        }
        TrialOutcome::Ran {
            stdout,
            stderr,
            results,
            ..
        } => (stdout, stderr, results),
    };
    let parsed = match results {
        Some(CapturedResults::Written(bytes)) => TestResults::parse_junit(bytes)
            .map_err(|error| format!("its results are not JUnit sf reads: {error}")),
        Some(CapturedResults::Refused(why)) => Err(format!("its results were not read: {why}")),
        Some(CapturedResults::Absent) | None => Err("it wrote no results".to_owned()),
    };
    let parsed = parsed.and_then(|parsed| match parsed.cases.is_empty() {
        true => Err("it reported no test".to_owned()),
        false => Ok(parsed),
    });
    let parsed = parsed.map_err(|why| {
        AppError::coded(
            "invalid-input",
            what,
            format!(
                "{why}; the end of its output: {} | {}",
                tail(stdout),
                tail(stderr)
            ),
        )
    })?;
    let mut worst = RunResults::new();
    for case in parsed.cases {
        let outcome = worst.entry(case.id).or_insert(case.outcome);
        *outcome = (*outcome).max(case.outcome);
    }
    Ok(worst)
}

/// The last bytes of `output`, as text on one line.
fn tail(output: &[u8]) -> String {
    let start = output.len().saturating_sub(QUOTED_OUTPUT);
    String::from_utf8_lossy(&output[start..])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why no Slice can be suggested from runs that found no FAIL_TO_PASS test.
fn no_fail_to_pass(lists: &Lists, fixed: bool) -> AppError {
    let shown = match fixed {
        true => "fails or errors on every base run and passes on every run with the fix",
        false => "fails or errors on every base run",
    };
    AppError::coded(
        "invalid-input",
        "the fix's tests",
        format!(
            "no test {shown} ({} passed on both, {} flaky, {} left out), so no Slice can show \
             the defect; check --tests and that the base is the fix's parent",
            lists.pass_to_pass.len(),
            lists.flaky.len(),
            lists.left_out.len()
        ),
    )
}

/// The draft: slice.json, recipe.json, the overlay, the harness, and an acceptance of one
/// check with no lists (what the trials run).
fn write_draft(request: &SuggestRequest, split: &Split, argv: &[String]) -> Result<(), AppError> {
    let dir = &request.dir;
    let mut slice = serde_json::json!({"id": request.id, "revision": 1, "scope": split.scope});
    let open = beside_tests(&split.scope, &split.overlay);
    if !open.is_empty() {
        slice["open"] = serde_json::json!(open);
    }
    write(&dir.join("slice.json"), slice.to_string().as_bytes())?;
    write(&dir.join("recipe.json"), RECIPE.as_bytes())?;
    for file in &split.overlay {
        write_entry(&dir.join("overlay"), file)?;
    }
    if request.runner == Runner::Unittest {
        write(
            &dir.join("harness").join(UNITTEST_HARNESS),
            UNITTEST_HARNESS_TEXT.as_bytes(),
        )?;
    }
    let draft = command_check(request, ("tests", "before", "base"), argv, 0, (&[], &[]));
    write_checks(dir, vec![draft])
}

/// The scope's paths in a directory that holds a test file of the overlay (or below one):
/// the freeze closes such a directory to proposals, since a file beside a trusted test could
/// stand in for what it loads, so the Slice opens the scope's own paths there again.
fn beside_tests(scope: &[String], overlay: &[SnapshotFile]) -> Vec<String> {
    scope
        .iter()
        .filter(|path| {
            overlay.iter().any(|test| match test.path.rsplit_once('/') {
                None => true,
                Some((dir, _)) => path.starts_with(&format!("{dir}/")),
            })
        })
        .cloned()
        .collect()
}

/// The acceptance written: before (both lists), after (FAIL_TO_PASS), guardrail
/// (PASS_TO_PASS, when there is one).
fn write_acceptance(
    request: &SuggestRequest,
    argv: &[String],
    lists: &Lists,
    (base_exit, fixed_exit): (i32, i32),
) -> Result<(), AppError> {
    let (f2p, p2p) = (&lists.fail_to_pass[..], &lists.pass_to_pass[..]);
    let mut checks = vec![
        command_check(
            request,
            ("bug-shown", "before", "base"),
            argv,
            base_exit,
            (f2p, p2p),
        ),
        command_check(
            request,
            ("bug-fixed", "after", "candidate"),
            argv,
            fixed_exit,
            (f2p, &[]),
        ),
    ];
    if !p2p.is_empty() {
        checks.push(command_check(
            request,
            ("still-passing", "guardrail", "candidate"),
            argv,
            fixed_exit,
            (&[], p2p),
        ));
    }
    write_checks(&request.dir, checks)
}

/// One command check of the suggested Slice.
fn command_check(
    request: &SuggestRequest,
    (id, phase, stage): (&str, &str, &str),
    argv: &[String],
    exit: i32,
    (fail_to_pass, pass_to_pass): (&[String], &[String]),
) -> serde_json::Value {
    let env: serde_json::Map<String, serde_json::Value> =
        [("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned())]
            .into_iter()
            .filter(|_| request.runner != Runner::Node)
            .chain(request.env.iter().cloned())
            .map(|(key, value)| (key, serde_json::Value::String(value)))
            .collect();
    let mut expectation = serde_json::json!({"exitCode": exit});
    if !fail_to_pass.is_empty() {
        expectation["failToPass"] = serde_json::json!(fail_to_pass);
    }
    if !pass_to_pass.is_empty() {
        expectation["passToPass"] = serde_json::json!(pass_to_pass);
    }
    serde_json::json!({
        "kind": "command", "id": id, "phase": phase, "stage": stage,
        "argv": argv,
        "cwd": {"from": "tree", "path": ""},
        "env": env,
        "environment": request.environment,
        "results": {"junit": "results.xml", "maxBytes": 8388608},
        "expectation": expectation,
    })
}

fn write_checks(dir: &Path, checks: Vec<serde_json::Value>) -> Result<(), AppError> {
    let acceptance = serde_json::json!({
        "protocol": "sf-repository-acceptance/3",
        "checks": checks,
    });
    let text = serde_json::to_string_pretty(&acceptance)
        .map_err(|error| AppError::new("internal", error.to_string()))?;
    write(&dir.join("acceptance.json"), text.as_bytes())
}

/// Writes `file` under `root`, making its directories.
fn write_entry(root: &Path, file: &SnapshotFile) -> Result<(), AppError> {
    use sf_host::contracts::tree_path::EntryMode;
    let path = root.join(&file.path);
    if file.mode == EntryMode::Symlink {
        let target = String::from_utf8_lossy(&file.content).into_owned();
        make_parent(&path)?;
        return std::os::unix::fs::symlink(target, &path).map_err(|error| io_error(&path, error));
    }
    write(&path, &file.content)?;
    if file.mode == EntryMode::Executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|error| io_error(&path, error))?;
    }
    Ok(())
}

fn make_parent(path: &Path) -> Result<(), AppError> {
    match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent).map_err(|error| io_error(parent, error)),
        None => Ok(()),
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), AppError> {
    make_parent(path)?;
    std::fs::write(path, bytes).map_err(|error| io_error(path, error))
}

fn io_error(path: &Path, error: std::io::Error) -> AppError {
    AppError::coded("io", path.display(), error)
}
