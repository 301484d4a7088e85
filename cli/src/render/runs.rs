//! A check's run as a person reads it: how it ended in a word, its command line, the end of
//! its output, and its per-test results.

use sf_app::slice_dir::SliceDir;
use sf_host::assurance::ProcessCheck;
use sf_host::assurance::acceptance::CheckRun;
use sf_host::assurance::test_results::TestResults;
use sf_host::collector::{CollectedRun, RunState};
use sf_host::contracts::{CapturedResults, RunStatus};
use sf_host::text_escape;

use crate::common::limits_hit_json;

/// A collected run as `--json` shows it.
pub fn run_json_of(run: &CollectedRun) -> serde_json::Value {
    serde_json::json!({
        "check": run.check,
        "state": run.state.as_str(),
        "evidence": run.evidence.as_ref().map(ToString::to_string),
        "problems": run.problems,
        "limitsHit": limits_hit_json(&run.limits_hit),
        "storageError": run.storage_error,
    })
}

/// How a run ended, in a word a person reads first: the executor's status (`exited 0`,
/// `timed-out`, `output-limit`, `signalled 9`) for a run it answered, else the run's state
/// (`not-started`, `unresolved`, `storage-failed`).
pub fn run_word(run: &CollectedRun) -> String {
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

/// The end of `bytes`: at most `lines` lines and `max_bytes` bytes, and whether that cut
/// anything.
pub fn tail(bytes: &[u8], lines: usize, max_bytes: usize) -> (&[u8], bool) {
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
pub fn command_line(slice: &SliceDir, check: &ProcessCheck) -> String {
    let words: Vec<String> = match &check.run {
        CheckRun::Entry { entry, args, .. } => std::iter::once(slice.frozen.recipe.runtime.clone())
            .chain(std::iter::once(entry.inside()))
            .chain(args.iter().cloned())
            .collect(),
        CheckRun::Command(command) => command.argv.clone(),
        // As `sf oats operation` is typed; the capability runs at its pinned integrity.
        CheckRun::Oats(oats) => ["sf", "oats", "operation", &oats.capability, &oats.operation]
            .map(str::to_owned)
            .into_iter()
            .chain(
                oats.args
                    .iter()
                    .flat_map(|(name, value)| ["--arg".to_owned(), format!("{name}={value}")]),
            )
            .collect(),
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
        None => match check.oats() {
            Some(oats) => format!("{line}  (at {})", text_escape::line(&oats.integrity)),
            None => line,
        },
    }
}

/// The per-test table of a command's results file, as text (a line per test, escaped) and
/// as JSON (`{state, reason?, error?, tests: [{id, outcome, durationMs}]}`).
pub fn results_lines(results: &CapturedResults) -> (String, serde_json::Value) {
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
            Ok(parsed) => test_lines(&parsed),
        },
    }
}

/// A parsed results file: a summary line, a line per test, and the tests as JSON.
fn test_lines(parsed: &TestResults) -> (String, serde_json::Value) {
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
