//! Binding phases (provider binding wire v1): `normalize`, `bind` and `check`.
//!
//! The phase's command runs with its declared arguments, no shell and no implicit flags, in
//! the capability root, with the capability id (`OATS_CAPABILITY`), root (`OATS_ROOT`) and
//! effective settings (`OATS_SETTINGS`) in its environment. Standard input receives one JSON
//! request and is closed:
//!
//! ```text
//! {"schemaVersion":1,"phase":…,"slot":<layer>,"capability":…,"settings":{…},"input":…}
//! ```
//!
//! Standard output holds one JSON document, the echo of the request's header and the
//! answer: `{schemaVersion, phase, slot, capability, ok:true, result}` or
//! `{…, ok:false, error:{code, message?}}` with a code from the wire's closed list. Every
//! structured answer exits 0; a non-zero exit, a signal, the timeout (at most 30 s) or the
//! 1 MiB output limit is a transport failure. Duplicate keys, trailing output, bad UTF-8 and
//! unknown fields are refused. Provider free text (`error.message`, `problems[].message`) is
//! dropped: in 0.24.0 no `reasons` can be declared, so no free text is relayed.
//!
//! `check`'s result is `{status: ready|needs-configuration|authorization-required|unavailable,
//! problems: [{code, message?}]}`, with `ready` requiring no problems.

use std::time::Duration;

use serde_json::{Map, Value, json};
use sf_contracts::{RunIdentities, RunStatus};

use crate::error::{ErrorCode, OatsError, Result};
use crate::host::{Oats, RunContext};
use crate::json::{self, Limits, type_name};
use crate::launch::{Cwd, Launch, Place};
use crate::manifest::{self, Phase};

/// The bounds of a binding request or answer: 1 MiB, depth 32, 16 384 entries.
pub const WIRE_LIMITS: Limits = Limits {
    bytes: 1024 * 1024,
    depth: 32,
    entries: 16_384,
};
/// The longest a phase may run.
pub const MAX_PHASE_TIMEOUT: Duration = Duration::from_secs(30);
/// The wire's error codes.
pub const ERROR_CODES: &[&str] = &[
    "needs-configuration",
    "requirement-conflict",
    "invalid-binding",
    "authorization-required",
    "host-requirement-missing",
    "provider-unavailable",
    "provider-not-qualified",
];

/// What a phase answered, or why there is no answer.
#[derive(Clone, Debug, PartialEq)]
pub enum PhaseOutcome {
    /// `ok:true`.
    Answered(Value),
    /// `ok:false` with a wire code (free text dropped).
    Refused {
        /// The provider's code, one of [`ERROR_CODES`].
        code: String,
    },
    /// No structured answer: a non-zero exit, a signal, the output limit, a cancellation.
    Transport {
        /// How the run ended instead (`the check phase exited 2`).
        reason: String,
    },
    /// The time ran out.
    TimedOut,
    /// The answer broke the wire's rules.
    Malformed {
        /// The rule the answer broke.
        what: String,
    },
}

/// A phase's outcome and what the Executor enforced.
#[derive(Clone, Debug)]
pub struct PhaseRun {
    /// What the phase answered, or why it gave no answer.
    pub outcome: PhaseOutcome,
    /// What the Executor ran and enforced for the phase.
    pub identities: RunIdentities,
    /// The phase's stderr, as kept by the Executor (at most the 1 MiB output limit).
    pub stderr: Vec<u8>,
}

sf_contracts::word_enum! {
    /// `check`'s status, as the wire writes it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CheckStatus {
        /// The provider is bound and usable; no problem is listed.
        "ready" Ready,
        /// The provider needs settings or other configuration first.
        "needs-configuration" NeedsConfiguration,
        /// The provider needs someone to authorize it first.
        "authorization-required" AuthorizationRequired,
        /// The provider cannot be used now.
        "unavailable" Unavailable,
    }
}

/// A validated `check` result: the status and the problem codes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    /// The status the check reported.
    pub status: CheckStatus,
    /// The code of each problem listed, in order (their messages are dropped).
    pub problems: Vec<String>,
}

fn is_problem_code(code: &str) -> bool {
    let bytes = code.as_bytes();
    (1..=64).contains(&bytes.len())
        && bytes[0].is_ascii_alphabetic()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Reads a `check` result.
pub fn parse_check(result: &Value) -> std::result::Result<CheckResult, String> {
    let Value::Object(map) = result else {
        return Err(format!(
            "the check result is {}, not an object",
            type_name(result)
        ));
    };
    if let Some(key) = map.keys().find(|k| *k != "status" && *k != "problems") {
        return Err(format!("the check result has an unknown field {key:?}"));
    }
    let status = map
        .get("status")
        .and_then(Value::as_str)
        .and_then(CheckStatus::parse)
        .ok_or("the check status is not one of ready, needs-configuration, authorization-required, unavailable")?;
    let Some(Value::Array(items)) = map.get("problems") else {
        return Err("the check result has no problems array".into());
    };
    let mut problems = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Value::Object(problem) = item else {
            return Err(format!("problems[{index}] is not an object"));
        };
        if let Some(key) = problem.keys().find(|k| *k != "code" && *k != "message") {
            return Err(format!("problems[{index}] has an unknown field {key:?}"));
        }
        if problem.get("message").is_some_and(|m| !m.is_string()) {
            return Err(format!("problems[{index}].message is not a string"));
        }
        match problem.get("code").and_then(Value::as_str) {
            Some(code) if is_problem_code(code) => problems.push(code.to_owned()),
            _ => {
                return Err(format!(
                    "problems[{index}].code is not a code (1-64 of A-Z a-z 0-9 _ . -, starting with a letter)"
                ));
            }
        }
    }
    if status == CheckStatus::Ready && !problems.is_empty() {
        return Err("a ready check lists no problems".into());
    }
    Ok(CheckResult { status, problems })
}

/// Reads a phase's stdout against the request's header.
pub fn parse_answer(stdout: &[u8], header: &Map<String, Value>) -> PhaseOutcome {
    let malformed = |what: String| PhaseOutcome::Malformed { what };
    let value = match json::parse(stdout, WIRE_LIMITS) {
        Ok(value) => value,
        Err(problem) => {
            return malformed(format!("the answer is not one JSON document: {problem}"));
        }
    };
    let Value::Object(map) = &value else {
        return malformed(format!(
            "the answer is {}, not an object",
            type_name(&value)
        ));
    };
    for (key, expected) in header {
        if map.get(key) != Some(expected) {
            return malformed(format!("the answer does not echo the request's {key}"));
        }
    }
    let allowed = |extra: &str| {
        map.keys()
            .find(|k| !header.contains_key(*k) && *k != "ok" && *k != extra)
            .cloned()
    };
    match map.get("ok") {
        Some(Value::Bool(true)) => {
            if let Some(key) = allowed("result") {
                return malformed(format!("the answer has an unknown field {key:?}"));
            }
            match map.get("result") {
                Some(result) => PhaseOutcome::Answered(result.clone()),
                None => malformed("an ok answer has a result".into()),
            }
        }
        Some(Value::Bool(false)) => {
            if let Some(key) = allowed("error") {
                return malformed(format!("the answer has an unknown field {key:?}"));
            }
            let Some(Value::Object(error)) = map.get("error") else {
                return malformed("a failed answer has an error object".into());
            };
            if let Some(key) = error.keys().find(|k| *k != "code" && *k != "message") {
                return malformed(format!("the answer's error has an unknown field {key:?}"));
            }
            if error.get("message").is_some_and(|m| !m.is_string()) {
                return malformed("the answer's error.message is not a string".into());
            }
            match error.get("code").and_then(Value::as_str) {
                Some(code) if ERROR_CODES.contains(&code) => PhaseOutcome::Refused {
                    code: code.to_owned(),
                },
                Some(code) => malformed(format!(
                    "the answer's error code {code:?} is not a binding wire code"
                )),
                None => malformed("the answer's error.code is not a string".into()),
            }
        }
        _ => malformed("the answer's ok is not a boolean".into()),
    }
}

impl Oats {
    /// Runs binding phase `phase` of capability `id` with `input`, within `timeout` (capped
    /// at 30 s and at the configured binding timeout). `Err` only when nothing started.
    pub fn run_phase(
        &self,
        id: &str,
        phase: Phase,
        input: Value,
        timeout: Duration,
        context: &RunContext,
    ) -> Result<PhaseRun> {
        let prepared = self.prepare(id, true)?;
        let manifest = &prepared.manifest;
        let Some(binding) = &manifest.binding else {
            return Err(OatsError::new(
                ErrorCode::BindingUndeclared,
                id,
                "declares no binding, so it has no binding phases",
            ));
        };
        let command = binding.command(phase);
        let line = &manifest.commands[command];
        let settings = manifest::effective_settings(manifest, &context.settings)?;
        let header: Map<String, Value> = [
            ("schemaVersion".to_owned(), json!(1)),
            ("phase".to_owned(), json!(phase.as_str())),
            (
                "slot".to_owned(),
                json!(manifest.layer.map(|l| l.as_str()).unwrap_or_default()),
            ),
            ("capability".to_owned(), json!(manifest.capability)),
        ]
        .into_iter()
        .collect();
        let mut request = header.clone();
        request.insert("settings".into(), Value::Object(settings));
        request.insert("input".into(), input);
        let stdin = Value::Object(request).to_string();
        if stdin.len() > WIRE_LIMITS.bytes {
            return Err(OatsError::new(
                ErrorCode::TooLarge,
                "binding request",
                format!("a binding request is at most {} bytes", WIRE_LIMITS.bytes),
            ));
        }
        let (env, mut places) = Self::base_environment(manifest, context)?;
        places.insert("OATS_ROOT".into(), Place::Root);
        let timeout = timeout
            .min(MAX_PHASE_TIMEOUT)
            .min(self.options.binding_timeout);
        let timeout = Duration::from_millis(timeout.as_millis().max(1) as u64);
        let launch = Launch {
            script: line.script.clone(),
            args: line.args.clone(),
            env,
            places,
            cwd: Cwd::Root,
            stdin,
            timeout,
            output_limit: WIRE_LIMITS.bytes as u64,
        };
        let answer = self.launch(&prepared, &launch, &context.cancel)?;
        let outcome = match answer.status {
            RunStatus::TimedOut => PhaseOutcome::TimedOut,
            RunStatus::Exited if answer.exit_code == Some(0) => {
                parse_answer(&answer.stdout, &header)
            }
            RunStatus::Exited => PhaseOutcome::Transport {
                reason: format!(
                    "the {} phase exited {}",
                    phase.as_str(),
                    answer.exit_code.unwrap_or(-1)
                ),
            },
            other => PhaseOutcome::Transport {
                reason: format!("the {} phase ended {}", phase.as_str(), other.code()),
            },
        };
        Ok(PhaseRun {
            outcome,
            identities: answer.identities,
            stderr: answer.stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Map<String, Value> {
        json!({"schemaVersion": 1, "phase": "check", "slot": "tasks", "capability": "acme.tool"})
            .as_object()
            .unwrap()
            .clone()
    }

    fn answer(extra: Value) -> Vec<u8> {
        let mut value = Value::Object(header());
        for (k, v) in extra.as_object().unwrap() {
            value[k] = v.clone();
        }
        value.to_string().into_bytes()
    }

    #[test]
    fn answers() {
        assert_eq!(
            parse_answer(&answer(json!({"ok": true, "result": 1})), &header()),
            PhaseOutcome::Answered(json!(1))
        );
        assert_eq!(
            parse_answer(
                &answer(
                    json!({"ok": false, "error": {"code": "needs-configuration", "message": "dropped"}})
                ),
                &header()
            ),
            PhaseOutcome::Refused {
                code: "needs-configuration".into()
            }
        );
        for bad in [
            answer(json!({"ok": false, "error": {"code": "E_OTHER"}})),
            answer(json!({"ok": false, "error": {"code": "needs-configuration", "x": 1}})),
            answer(json!({"ok": true, "result": 1, "warnings": []})),
            answer(json!({"ok": true})),
            answer(json!({"ok": "yes", "result": 1})),
            answer(json!({"ok": true, "result": 1, "phase": "bind"})),
            b"{\"schemaVersion\":1,\"schemaVersion\":1}".to_vec(),
            [answer(json!({"ok": true, "result": 1})), b"\n{}".to_vec()].concat(),
            b"\xff".to_vec(),
        ] {
            assert!(
                matches!(
                    parse_answer(&bad, &header()),
                    PhaseOutcome::Malformed { .. }
                ),
                "{}",
                String::from_utf8_lossy(&bad)
            );
        }
    }

    #[test]
    fn checks() {
        let ok = parse_check(
            &json!({"status": "unavailable", "problems": [{"code": "down", "message": "x"}]}),
        )
        .unwrap();
        assert_eq!(ok.status, CheckStatus::Unavailable);
        assert_eq!(ok.problems, vec!["down"]);
        for bad in [
            json!({"status": "ready", "problems": [{"code": "x"}]}),
            json!({"status": "green", "problems": []}),
            json!({"status": "ready"}),
            json!({"status": "ready", "problems": [], "warnings": []}),
            json!({"status": "unavailable", "problems": [{"code": "has space"}]}),
            json!({"status": "unavailable", "problems": [{"code": "x", "extra": 1}]}),
            json!([]),
        ] {
            assert!(parse_check(&bad).is_err(), "{bad}");
        }
    }
}
