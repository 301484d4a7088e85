//! A Verdict as text and as JSON, with the end of what each check that was not met wrote.

use sf_app::judge::CheckOutput;
use sf_host::assurance::Verdict;
use sf_host::canonical::Digest;
use sf_host::text_escape;

use super::runs::tail;
use crate::common::{json_value, limits_hit_json};

/// How many of the last lines of a run's stdout and stderr the text of a Verdict shows for
/// each check that was not met, and at most how many bytes of them.
const TAIL_LINES: usize = 20;
const TAIL_BYTES: usize = 4096;

/// The text of a Verdict: the outcome, each check and why it missed, the reasons.
pub fn verdict_text(verdict: &Verdict, digest: &Digest) -> String {
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
fn review_lines(verdict: &Verdict) -> String {
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
pub fn verdict_json(verdict: &Verdict, digest: &Digest) -> serde_json::Value {
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

/// The last lines of the stdout and stderr of every check that was not met (missed, or not
/// attributable), escaped for the terminal: what a person needs to see why without `sf
/// evidence get`. A record that cannot be read is said in one line.
pub fn output_tails(unmet: &[CheckOutput]) -> String {
    let mut text = String::new();
    for CheckOutput {
        check,
        record: id,
        observation,
    } in unmet
    {
        match observation {
            Ok(observation) => {
                text.push_str(&format!("check {check} (record {id}):\n"));
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
                "check {check}: its record {id} cannot be shown: {}\n",
                text_escape::line(why)
            )),
        }
    }
    text
}
