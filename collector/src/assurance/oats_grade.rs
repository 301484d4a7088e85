//! How an oats check's run is graded: on the operation's one envelope on stdout
//! (`{"schemaVersion":1,"ok":true,"result":…}` or `{"schemaVersion":1,"ok":false,"error":
//! {"code":…,"message":…}}`, white space around it allowed) and the exit code, as the oats
//! host reads an operation's answer.
//!
//! - exit 0 and an `ok: true` envelope: the operation succeeded;
//! - an `ok: false` envelope (with a non-zero exit code): it failed with its code;
//! - anything else (no envelope, two, a malformed one, `ok: true` with a non-zero exit, a
//!   signal): nobody can say what the operation decided, so the check is undecided, never
//!   Failed (the capability, not the Candidate, broke its contract) nor met.
//!
//! A failure's message comes from the capability, which may echo what the Candidate holds:
//! it is kept to [`MAX_MESSAGE_CHARS`] characters with control characters escaped.

use serde_json::Value;

use crate::contracts::RunStatus;

use super::ProcessFacts;
use super::acceptance::OatsExpectation;

/// The most characters of a capability's failure message kept in a miss.
pub const MAX_MESSAGE_CHARS: usize = 512;
/// The most stdout bytes read as an envelope.
const MAX_ENVELOPE_BYTES: usize = 8 * 1024 * 1024;

/// What the operation answered.
enum Answer {
    Succeeded,
    Failed { code: String, message: String },
}

/// How the run missed `expect` (none: met), or `Err` with why it cannot decide.
pub(super) fn misses(
    expect: &OatsExpectation,
    process: &ProcessFacts,
    stdout: &[u8],
) -> Result<Vec<String>, String> {
    let answer = answer(process, stdout)
        .map_err(|why| format!("the capability's answer cannot decide: {why}"))?;
    Ok(match (answer, expect) {
        (Answer::Succeeded, OatsExpectation { ok: true, .. }) => Vec::new(),
        (Answer::Succeeded, OatsExpectation { code, .. }) => vec![format!(
            "the operation succeeded; the check expects it to fail{}",
            code.as_ref()
                .map_or_else(String::new, |code| format!(" with {code}"))
        )],
        (Answer::Failed { code, message }, OatsExpectation { ok: true, .. }) => {
            vec![format!("the operation failed with {code}: {message}")]
        }
        (
            Answer::Failed { code, message },
            OatsExpectation {
                code: Some(want), ..
            },
        ) if code != *want => {
            vec![format!(
                "the operation failed with {code}, not the expected {want}: {message}"
            )]
        }
        (Answer::Failed { .. }, _) => Vec::new(),
    })
}

/// The operation's answer read from the run, or why it cannot be read.
fn answer(process: &ProcessFacts, stdout: &[u8]) -> Result<Answer, String> {
    if process.status != RunStatus::Exited {
        return Err(format!("the run {}", process.status.code()));
    }
    let exit = process.exit_code.unwrap_or(-1);
    if stdout.len() > MAX_ENVELOPE_BYTES {
        return Err("stdout is larger than an envelope may be".into());
    }
    let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_owned())?;
    let value: Value = serde_json::from_str(text.trim())
        .map_err(|error| format!("stdout is not one JSON envelope ({error})"))?;
    let Value::Object(envelope) = &value else {
        return Err("the envelope is not an object".into());
    };
    if envelope.get("schemaVersion").and_then(Value::as_u64) != Some(1) {
        return Err("the envelope's schemaVersion is not 1".into());
    }
    let only = |keys: &[&str]| envelope.keys().all(|key| keys.contains(&key.as_str()));
    match envelope.get("ok") {
        Some(Value::Bool(true)) if only(&["schemaVersion", "ok", "result"]) => {
            if !envelope.contains_key("result") {
                return Err("an ok envelope has no result".into());
            }
            if exit != 0 {
                return Err(format!("an ok envelope came with exit code {exit}"));
            }
            Ok(Answer::Succeeded)
        }
        Some(Value::Bool(false)) if only(&["schemaVersion", "ok", "error"]) => {
            let error = envelope.get("error").and_then(Value::as_object);
            let code = error
                .and_then(|error| error.get("code"))
                .and_then(Value::as_str);
            let Some(code) = code else {
                return Err("a failed envelope names no error code".into());
            };
            let message = error
                .and_then(|error| error.get("message"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            Ok(Answer::Failed {
                code: kept(code),
                message: kept(message),
            })
        }
        _ => Err("the envelope is neither an ok nor a failed v1 envelope".into()),
    }
}

/// `text` cut at [`MAX_MESSAGE_CHARS`] characters (the cut said), control characters
/// escaped.
fn kept(text: &str) -> String {
    let escaped = sf_io::text_escape::line(text).into_owned();
    match escaped.char_indices().nth(MAX_MESSAGE_CHARS) {
        None => escaped,
        Some((at, _)) => format!(
            "{}… (cut at {MAX_MESSAGE_CHARS} characters)",
            &escaped[..at]
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> ProcessFacts {
        ProcessFacts {
            status: RunStatus::Exited,
            exit_code: Some(code),
            signal: None,
            timeout_ms: 1000,
            output_limit: 65536,
            wall_ms: 1,
            user_ms: 0,
            system_ms: 0,
            max_rss_kib: 0,
            memory_peak_bytes: None,
            limits_hit: Some(Vec::new()),
            reaped: true,
        }
    }

    fn expect(ok: bool, code: Option<&str>) -> OatsExpectation {
        OatsExpectation {
            ok,
            code: code.map(str::to_owned),
        }
    }

    const OK: &[u8] = b" {\"schemaVersion\":1,\"ok\":true,\"result\":{\"files\":1}}\n";
    const FAILED: &[u8] =
        b"{\"schemaVersion\":1,\"ok\":false,\"error\":{\"code\":\"E_BIG\",\"message\":\"a\\u0007b\"}}";

    #[test]
    fn an_envelope_meets_or_misses_what_the_check_expects() {
        assert_eq!(misses(&expect(true, None), &exited(0), OK), Ok(vec![]));
        assert_eq!(misses(&expect(false, None), &exited(1), FAILED), Ok(vec![]));
        assert_eq!(
            misses(&expect(false, Some("E_BIG")), &exited(1), FAILED),
            Ok(vec![])
        );
        let missed = misses(&expect(true, None), &exited(1), FAILED).unwrap();
        // The capability's control character reaches no reason raw.
        assert_eq!(missed, ["the operation failed with E_BIG: a\\x07b"]);
        let missed = misses(&expect(false, Some("E_OTHER")), &exited(1), FAILED).unwrap();
        assert!(missed[0].contains("not the expected E_OTHER"), "{missed:?}");
        let missed = misses(&expect(false, Some("E_BIG")), &exited(0), OK).unwrap();
        assert!(
            missed[0].contains("expects it to fail with E_BIG"),
            "{missed:?}"
        );
    }

    #[test]
    fn an_answer_that_breaks_the_envelope_contract_decides_nothing() {
        let mut signalled = exited(0);
        signalled.status = RunStatus::Signalled;
        for (process, stdout) in [
            (exited(1), OK),
            (exited(0), &b""[..]),
            (exited(0), b"progress\n{\"schemaVersion\":1,\"ok\":true,\"result\":1}"),
            (exited(0), b"{\"schemaVersion\":1,\"ok\":true,\"result\":1}{\"schemaVersion\":1,\"ok\":true,\"result\":2}"),
            (exited(0), b"{\"schemaVersion\":2,\"ok\":true,\"result\":1}"),
            (exited(0), b"{\"schemaVersion\":1,\"ok\":true}"),
            (exited(0), b"{\"schemaVersion\":1,\"ok\":true,\"result\":1,\"extra\":1}"),
            (exited(1), b"{\"schemaVersion\":1,\"ok\":false,\"error\":{\"message\":\"m\"}}"),
            (exited(0), b"\xff"),
            (signalled, OK),
        ] {
            let answer = misses(&expect(true, None), &process, stdout);
            assert!(
                answer.as_ref().is_err_and(|why| why.starts_with("the capability's answer cannot decide")),
                "{}: {answer:?}",
                String::from_utf8_lossy(stdout)
            );
        }
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_and_says_so() {
        let text = "é".repeat(MAX_MESSAGE_CHARS + 10);
        let kept = kept(&text);
        assert!(kept.starts_with(&"é".repeat(MAX_MESSAGE_CHARS)));
        assert!(kept.ends_with(&format!("… (cut at {MAX_MESSAGE_CHARS} characters)")));
        assert_eq!(super::kept("short"), "short");
    }
}
