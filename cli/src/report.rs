//! `sf report --identity FILE --candidate DIGEST --slice SLICE [--out FILE]`: one
//! self-contained HTML file a reviewer reads before trusting a Candidate: the Candidate and
//! its message, a diff of every edit against the base, each check as its record shows it, the
//! newest Verdict with the reason for each check, the landing (as `sf show` reads it), and
//! every identity digest. Read-only but for the new file.
//!
//! Everything a Candidate produced (its message, paths, file contents, a run's output, test
//! names) is hostile: the page is rendered by minijinja from an `.html` template, which
//! escapes every value by default; nothing is marked safe. The page holds no script and
//! forbids any (its Content-Security-Policy allows inline style only), needs no network, and
//! names its own digest: the SHA-256 of the file with that digest written as `sha256:` and 64
//! zeros ([`REPORT_DIGEST_PLACEHOLDER`]).

use std::path::PathBuf;

use clap::Args;

use sf_app::facts::{self, Facts, ReportRequest};
use sf_app::files::write_new_file;
use sf_app::slice_dir::SliceDir;
use sf_host::assurance::{Check, Observation, ProcessCheck, ReviewVerdict, Reviews, Stage};
use sf_host::canonical::Digest;
use sf_host::repository::EditedEntry;

use super::common::{CliError, Context, Output};
use super::render::{
    command_line, deliveries_json, facts_json, integrations_json, results_lines, tail,
};

/// The value the report's digest is computed over in its own place.
pub const REPORT_DIGEST_PLACEHOLDER: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";
/// The template, compiled into sf.
const TEMPLATE: &str = include_str!("report/report.html");
/// How much of a run's stdout and stderr the page shows: the end of it.
const OUTPUT_LINES: usize = 200;
const OUTPUT_BYTES: usize = 64 * 1024;
/// How many of those lines are shown before the rest is folded.
const SHOWN_LINES: usize = 8;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The Candidate's digest (sha256:…) or the id of its commit M
    #[arg(long, value_name = "DIGEST")]
    candidate: String,
    /// The frozen Slice whose evidence the Verdict is judged from (read-only)
    #[arg(long, value_name = "SLICE")]
    slice: PathBuf,
    /// The new file to write (never overwritten); default: sf-report-<digest>.html in the
    /// working directory
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// `sf report`.
pub fn run(context: &Context, args: ReportArgs) -> Result<Output, CliError> {
    let request = ReportRequest {
        identity: args.identity,
        candidate: args.candidate,
        slice: args.slice,
        out: args.out,
    };
    let report = facts::report(&context.backends, &request)?;
    let (facts, slice, out) = (&report.facts, &report.slice, &report.out);
    let page = page(facts, slice);
    let html = render(&page)?;
    let report_digest = Digest::of(html.as_bytes()).to_string();
    let html = html.replace(REPORT_DIGEST_PLACEHOLDER, &report_digest);
    write_new_file(out, html.as_bytes()).map_err(|error| {
        CliError::new(
            "write-failed",
            format!("--out {}: cannot be written ({error})", out.display()),
        )
    })?;
    Ok(Output {
        json: serde_json::json!({
            "path": out.display().to_string(),
            "digest": report_digest,
            "candidate": facts.sealed.digest.to_string(),
            "outcome": page["verdict"]["outcome"],
        }),
        text: format!("{}\nreport digest {report_digest}\n", out.display()),
    })
}

/// What the template is given: every fact of the page (judged once, by the use case: the
/// page shows that one Verdict).
fn page(facts: &Facts, slice: &SliceDir) -> serde_json::Value {
    let mut shown = facts_json(facts);
    let candidate = shown.clone();
    let verdict = match facts.verdict() {
        Some(verdict) => {
            let mut value = shown["verdict"].take();
            value["reasons"] = serde_json::json!(verdict.reasons);
            value
        }
        None => {
            let why = facts.judged.as_ref().err().cloned().unwrap_or_default();
            serde_json::json!({"outcome": "none", "none": why, "reasons": []})
        }
    };
    let reviews = facts.verdict().and_then(|verdict| verdict.reviews.as_ref());
    let checks = checks(slice, facts);
    let mut verdict = verdict;
    verdict["misses"] = serde_json::json!(misses(&checks));
    serde_json::json!({
        "report_digest": REPORT_DIGEST_PLACEHOLDER,
        "candidate": candidate,
        "verdict": verdict,
        "checks": checks,
        "review": review_section(slice, reviews, &shown["review"]["records"]),
        "diff": diff(&facts.edits),
        "landing": {
            "word": facts.landing(),
            "integrations": integrations_json(facts),
            "deliveries": deliveries_json(facts),
        },
        "identities": identities(&facts.sealed, slice),
    })
}

/// The page, every value escaped by the template engine (an `.html` template).
fn render(page: &serde_json::Value) -> Result<String, CliError> {
    let failed = |error: minijinja::Error| {
        CliError::new("report-failed", format!("rendering the report: {error}"))
    };
    let mut environment = minijinja::Environment::new();
    environment
        .add_template("report.html", TEMPLATE)
        .map_err(failed)?;
    environment
        .get_template("report.html")
        .and_then(|template| template.render(page))
        .map_err(failed)
}

/// The review section: the subject a reviewer approves (with the command that approves it),
/// each counted review check with its prompt, reviewers and state, and every review record
/// of the attempt (`records`, as `sf show` lists them); `null` for a Slice without review
/// checks.
fn review_section(
    slice: &SliceDir,
    judged: Option<&Reviews>,
    records: &serde_json::Value,
) -> serde_json::Value {
    let checks: Vec<serde_json::Value> = slice
        .frozen
        .acceptance
        .checks
        .iter()
        .filter_map(|check| match check {
            Check::Review(review) => Some((review, review.requirement.as_ref()?)),
            Check::Process(_) => None,
        })
        .map(|(review, requirement)| {
            let counted = judged.and_then(|reviews| {
                reviews
                    .checks
                    .iter()
                    .find(|counted| counted.check == review.id)
            });
            serde_json::json!({
                "id": review.id,
                "prompt": review.prompt,
                "approvals": requirement.approvals,
                "reviewers": requirement.reviewers.iter().map(|reviewer| serde_json::json!({
                    "name": reviewer.name,
                    "key": reviewer.key,
                })).collect::<Vec<_>>(),
                "state": counted.map_or("not judged", ReviewVerdict::state),
                "approved_by": counted.map(|counted| &counted.approved_by),
                "problems": counted.map(|counted| &counted.problems),
            })
        })
        .collect();
    if checks.is_empty() {
        return serde_json::Value::Null;
    }
    serde_json::json!({
        "subject": judged.map(|reviews| reviews.subject.to_string()),
        "process": judged.map(|reviews| reviews.process.as_str()),
        "checks": checks,
        "records": records,
    })
}

/// Each process check of the acceptance, with what the Verdict and its record say.
fn checks(slice: &SliceDir, facts: &Facts) -> Vec<serde_json::Value> {
    let verdict = facts.verdict();
    slice
        .frozen
        .acceptance
        .process_checks()
        .map(|check| {
            let judged_check = verdict.and_then(|verdict| {
                verdict
                    .checks
                    .iter()
                    .find(|judged| judged.check == check.id)
            });
            let met = match judged_check.map(|judged| judged.met) {
                Some(Some(true)) => "met",
                Some(Some(false)) => "missed",
                Some(None) => "not attributable",
                None => "not judged",
            };
            let record = judged_check.and_then(|judged| judged.record.as_ref());
            let run = record
                .and_then(|id| facts.observation(id))
                .and_then(|observation| run_of(&observation));
            let expectation = expectation(check, run.as_ref());
            serde_json::json!({
                "id": check.id,
                "stage": check.stage.as_str(),
                "phase": check.phase.as_str(),
                "command": command_line(slice, check),
                "met": met,
                "record": record.map_or("-".to_owned(), ToString::to_string),
                "problems": judged_check.map_or(Vec::new(), |judged| judged.problems.clone()),
                "expectation": expectation,
                "run": run,
            })
        })
        .collect()
}

/// Why each check that was judged is not met, a line each, for the top of the page: what a
/// reviewer reads first on a page that is not Verified.
fn misses(checks: &[serde_json::Value]) -> Vec<String> {
    let mut lines = Vec::new();
    for check in checks {
        let met = check["met"].as_str().unwrap_or_default();
        if met == "met" || met == "not judged" {
            continue;
        }
        let id = check["id"].as_str().unwrap_or_default();
        let problems = check["problems"].as_array().cloned().unwrap_or_default();
        if problems.is_empty() {
            lines.push(format!("{id} {met}"));
        }
        for problem in problems {
            lines.push(format!(
                "{id} {met}: {}",
                problem.as_str().unwrap_or_default()
            ));
        }
    }
    lines
}

/// What `check` expects, each listed test beside its outcome in `run` and whether that is
/// what the list asks for: a failToPass test fails or errors on the base and passes on the
/// Candidate, a passToPass test passes.
fn expectation(check: &ProcessCheck, run: Option<&serde_json::Value>) -> serde_json::Value {
    let tests = run
        .and_then(|run| run["results"]["tests"].as_array())
        .cloned()
        .unwrap_or_default();
    let outcome = |id: &str| {
        tests
            .iter()
            .find(|test| test["id"] == id)
            .and_then(|test| test["outcome"].as_str())
            .map(str::to_owned)
    };
    let listed = |ids: &[String], wanted: &[&str]| -> Vec<serde_json::Value> {
        ids.iter()
            .map(|id| {
                let found = outcome(id);
                let shown = match (&found, run) {
                    (Some(outcome), _) => outcome.clone(),
                    (None, Some(_)) => "not in the results".to_owned(),
                    (None, None) => "not run".to_owned(),
                };
                let as_expected = found
                    .as_deref()
                    .is_some_and(|found| wanted.contains(&found));
                serde_json::json!({"id": id, "outcome": shown, "as_expected": as_expected})
            })
            .collect()
    };
    let fail_to_pass: &[&str] = match check.stage {
        Stage::Base => &["failed", "error"],
        Stage::Candidate => &["passed"],
    };
    let expected = &check.expectation;
    serde_json::json!({
        "exit_code": expected.exit_code,
        "stdout_digest": expected.stdout_digest.as_ref().map(ToString::to_string),
        "fail_to_pass": listed(&expected.fail_to_pass, fail_to_pass),
        "fail_to_pass_wants": fail_to_pass.join(" or "),
        "pass_to_pass": listed(&expected.pass_to_pass, &["passed"]),
    })
}

/// What a record's observation shows of its run, or `None` when it holds no process facts.
fn run_of(observation: &Observation) -> Option<serde_json::Value> {
    let process = observation.facts.process.as_ref()?;
    let (stdout, stdout_cut) = tail(&observation.stdout, OUTPUT_LINES, OUTPUT_BYTES);
    let (stderr, stderr_cut) = tail(&observation.stderr, OUTPUT_LINES, OUTPUT_BYTES);
    let results = observation.results.as_ref().map(|results| {
        let mut shown = results_lines(results).1;
        if let Some(tests) = shown["tests"].as_array() {
            let count = |outcome: &str| {
                tests
                    .iter()
                    .filter(|test| test["outcome"] == outcome)
                    .count()
            };
            shown["summary"] = serde_json::json!(format!(
                "{} tests: {} passed, {} failed, {} errored, {} skipped",
                tests.len(),
                count("passed"),
                count("failed"),
                count("error"),
                count("skipped")
            ));
        }
        shown
    });
    Some(serde_json::json!({
        "status": process.status.code(),
        "exit_code": process.exit_code,
        "signal": process.signal,
        "wall_ms": process.wall_ms,
        "user_ms": process.user_ms,
        "system_ms": process.system_ms,
        "max_rss_kib": process.max_rss_kib,
        "memory_peak_bytes": process.memory_peak_bytes,
        "timeout_ms": process.timeout_ms,
        "output_limit": process.output_limit,
        "stdout": folded(stdout),
        "stdout_cut": stdout_cut,
        "stderr": folded(stderr),
        "stderr_cut": stderr_cut,
        "results": results,
    }))
}

/// Output shown as its first [`SHOWN_LINES`] lines and the rest, which the page folds.
fn folded(output: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(output);
    let cut = text
        .match_indices('\n')
        .nth(SHOWN_LINES - 1)
        .map_or(text.len(), |(at, _)| at + 1);
    let lines = text.lines().count();
    serde_json::json!({"head": &text[..cut], "rest": &text[cut..], "lines": lines})
}

/// A unified diff of every edit against the base, a line per entry with its kind (`add`,
/// `del`, `ctx`, `hunk`); a file that is not UTF-8 on either side is named with its sizes.
fn diff(edits: &[EditedEntry]) -> Vec<serde_json::Value> {
    edits
        .iter()
        .map(|edit| {
            let before = edit.prior.as_ref().map(|file| file.content.as_slice());
            let after = edit.next.as_ref().map(|file| file.content.as_slice());
            let change = match (before, after) {
                (None, Some(_)) => "added",
                (Some(_), None) => "deleted",
                _ => "changed",
            };
            let texts = (
                std::str::from_utf8(before.unwrap_or_default()),
                std::str::from_utf8(after.unwrap_or_default()),
            );
            let (Ok(old), Ok(new)) = texts else {
                return serde_json::json!({
                    "path": edit.path, "change": change,
                    "binary": format!(
                        "not UTF-8 text: {} bytes before, {} bytes after",
                        before.map_or(0, <[u8]>::len),
                        after.map_or(0, <[u8]>::len)
                    ),
                });
            };
            let text_diff = similar::TextDiff::from_lines(old, new);
            let mut lines = Vec::new();
            for group in text_diff.grouped_ops(3) {
                let (first, last) = (&group[0], &group[group.len() - 1]);
                lines.push(serde_json::json!({"kind": "hunk", "text": format!(
                    "@@ -{},{} +{},{} @@",
                    first.old_range().start + 1,
                    last.old_range().end - first.old_range().start,
                    first.new_range().start + 1,
                    last.new_range().end - first.new_range().start,
                )}));
                for op in &group {
                    for change in text_diff.iter_changes(op) {
                        let (kind, sign) = match change.tag() {
                            similar::ChangeTag::Delete => ("del", '-'),
                            similar::ChangeTag::Insert => ("add", '+'),
                            similar::ChangeTag::Equal => ("ctx", ' '),
                        };
                        let value = change.value();
                        let value = value.strip_suffix('\n').unwrap_or(value);
                        lines.push(
                            serde_json::json!({"kind": kind, "text": format!("{sign}{value}")}),
                        );
                    }
                }
            }
            serde_json::json!({"path": edit.path, "change": change, "lines": lines})
        })
        .collect()
}

/// Every identity digest the Candidate and the Slice pin, as (name, value) rows.
fn identities(
    sealed: &sf_host::repository::SealedCandidate,
    slice: &SliceDir,
) -> Vec<(String, String)> {
    let manifest = &sealed.manifest;
    let repository = &manifest.repository;
    let mut rows = vec![
        ("Candidate (manifest)".to_owned(), sealed.digest.to_string()),
        (
            "Candidate content".to_owned(),
            sealed
                .content_digest()
                .map_or_else(|| "-".to_owned(), ToString::to_string),
        ),
        ("proposal".to_owned(), manifest.proposal_digest.to_string()),
        ("commit M".to_owned(), manifest.commit.to_hex()),
        ("tree of M".to_owned(), manifest.tree.to_hex()),
        ("base B".to_owned(), manifest.base_commit.to_hex()),
        ("tree of B".to_owned(), manifest.base_tree.to_hex()),
        ("acceptance".to_owned(), manifest.acceptance.to_string()),
        ("recipe".to_owned(), manifest.recipe.to_string()),
        ("environment".to_owned(), manifest.environment.to_string()),
        (
            "repository".to_owned(),
            format!(
                "{} product {} initial {} target {}",
                repository.path, repository.product_id, repository.initial, repository.target_ref
            ),
        ),
    ];
    if let Some(binding) = &manifest.binding {
        rows.push(("Slice".to_owned(), binding.digest.to_string()));
    }
    rows.push((
        "Slice directory".to_owned(),
        slice.dir.display().to_string(),
    ));
    rows
}
