//! Operations (`oats operation run`): the provider's own command, with each `--arg
//! name=value` placed as the declared flag and the value, and an answer that must be exactly
//! one v1 envelope.
//!
//! The envelope (Desktop CLI API v1) is one JSON object on stdout:
//! `{"schemaVersion":1,"ok":true,"result":…}` or
//! `{"schemaVersion":1,"ok":false,"error":{"code":…,"message":…,"details"?:…}}`, nothing
//! else (white space around it is allowed). The outcome:
//! - exit 0 and one `ok:true` envelope: success, the result relayed (a `view` operation's
//!   result must be `{documents:[{label, kind:"markdown"|"text", path?, text?}], summary?}`);
//! - one `ok:false` envelope (with any exit code, since failed envelopes come with a non-zero
//!   exit): the provider's code relayed when it is shaped `^E_[A-Z0-9_]+$`, else
//!   `E_OPERATION_RESULT` with `details.cause`;
//! - the timeout: `E_OPERATION_TIMEOUT`;
//! - anything else (no envelope, two, a malformed one, `ok:true` with a non-zero exit, a
//!   signal, the output limit): `E_OPERATION_RESULT` with
//!   `details {unconfirmed:true, exit, status, signal?, envelope?, stderr?}`: sf cannot
//!   confirm what happened.

use std::path::Path;

use serde_json::{Map, Value, json};
use sf_contracts::{RunAnswer, RunIdentities, RunStatus};

use crate::error::{ErrorCode, OatsError, Result};
use crate::host::{Oats, Prepared, RunContext};
use crate::json::{self, Limits, type_name};
use crate::launch::{Cwd, Launch, Place};
use crate::manifest::{OperationContext, OperationKind};

/// `E_OPERATION_RESULT`.
pub const E_OPERATION_RESULT: &str = "E_OPERATION_RESULT";
/// `E_OPERATION_TIMEOUT`.
pub const E_OPERATION_TIMEOUT: &str = "E_OPERATION_TIMEOUT";
/// The bounds of an envelope.
pub const ENVELOPE_LIMITS: Limits = Limits {
    bytes: 16 * 1024 * 1024,
    depth: 64,
    entries: 1_000_000,
};
/// The most stderr bytes copied into `details.stderr`.
const STDERR_DETAIL: usize = 4096;

/// A parsed v1 envelope.
#[derive(Clone, Debug, PartialEq)]
pub enum Envelope {
    /// `ok:true`, with the `result`.
    Ok(Value),
    /// `ok:false`, with the `error`'s members.
    Failed {
        /// `error.code`, as the provider wrote it.
        code: String,
        /// `error.message`.
        message: String,
        /// `error.details`, when present.
        details: Option<Value>,
    },
}

impl Envelope {
    /// The envelope as JSON (what the provider printed, re-encoded).
    pub fn to_json(&self) -> Value {
        match self {
            Self::Ok(result) => json!({"schemaVersion": 1, "ok": true, "result": result}),
            Self::Failed {
                code,
                message,
                details,
            } => {
                let mut error = json!({"code": code, "message": message});
                if let Some(details) = details {
                    error["details"] = details.clone();
                }
                json!({"schemaVersion": 1, "ok": false, "error": error})
            }
        }
    }
}

/// Reads stdout as exactly one v1 envelope.
pub fn parse_envelope(stdout: &[u8]) -> std::result::Result<Envelope, String> {
    let text = std::str::from_utf8(stdout).map_err(|_| "stdout is not UTF-8".to_owned())?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("stdout holds no envelope".into());
    }
    let value = match json::parse(trimmed.as_bytes(), ENVELOPE_LIMITS) {
        Ok(value) => value,
        Err(problem) => {
            let documents = serde_json::Deserializer::from_str(trimmed)
                .into_iter::<serde::de::IgnoredAny>()
                .take_while(Result::is_ok)
                .count();
            if documents > 1 {
                return Err(format!(
                    "stdout holds {documents} or more JSON documents; exactly one envelope is expected"
                ));
            }
            return Err(format!("stdout is not one JSON envelope: {problem}"));
        }
    };
    envelope_from_value(&value)
}

fn envelope_from_value(value: &Value) -> std::result::Result<Envelope, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "the envelope is {}, not an object",
            type_name(value)
        ));
    };
    if map.get("schemaVersion").and_then(Value::as_u64) != Some(1) {
        return Err("the envelope's schemaVersion is not 1".into());
    }
    match map.get("ok") {
        Some(Value::Bool(true)) => {
            only(map, &["schemaVersion", "ok", "result"], "the envelope")?;
            let result = map.get("result").ok_or("an ok envelope has a result")?;
            Ok(Envelope::Ok(result.clone()))
        }
        Some(Value::Bool(false)) => {
            only(map, &["schemaVersion", "ok", "error"], "the envelope")?;
            let Some(Value::Object(error)) = map.get("error") else {
                return Err("a failed envelope has an error object".into());
            };
            only(
                error,
                &["code", "message", "details"],
                "the envelope's error",
            )?;
            let Some(Value::String(code)) = error.get("code") else {
                return Err("the envelope's error.code is not a string".into());
            };
            let message = match error.get("message") {
                Some(Value::String(message)) => message.clone(),
                _ => return Err("the envelope's error.message is not a string".into()),
            };
            Ok(Envelope::Failed {
                code: code.clone(),
                message,
                details: error.get("details").cloned(),
            })
        }
        _ => Err("the envelope's ok is not a boolean".into()),
    }
}

fn only(map: &Map<String, Value>, allowed: &[&str], what: &str) -> std::result::Result<(), String> {
    match map.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("{what} has an unknown field {key:?}")),
        None => Ok(()),
    }
}

/// Whether `code` is shaped like an oats kernel code.
pub fn is_kernel_code(code: &str) -> bool {
    code.strip_prefix("E_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    })
}

/// Checks a `view` result's shape.
fn check_view(result: &Value) -> std::result::Result<(), String> {
    let Value::Object(map) = result else {
        return Err("a view result is an object".into());
    };
    only(map, &["documents", "summary"], "the view result")?;
    if let Some(summary) = map.get("summary")
        && !summary.is_string()
    {
        return Err("the view result's summary is not a string".into());
    }
    let Some(Value::Array(documents)) = map.get("documents") else {
        return Err("a view result has a documents array".into());
    };
    for (index, document) in documents.iter().enumerate() {
        let Value::Object(document) = document else {
            return Err(format!("documents[{index}] is not an object"));
        };
        only(
            document,
            &["label", "kind", "path", "text"],
            &format!("documents[{index}]"),
        )?;
        if !document.get("label").is_some_and(Value::is_string) {
            return Err(format!("documents[{index}].label is not a string"));
        }
        match document.get("kind").and_then(Value::as_str) {
            Some("markdown" | "text") => {}
            _ => return Err(format!("documents[{index}].kind is not markdown or text")),
        }
        for key in ["path", "text"] {
            if document.get(key).is_some_and(|v| !v.is_string()) {
                return Err(format!("documents[{index}].{key} is not a string"));
            }
        }
    }
    Ok(())
}

/// Where an operation runs.
#[derive(Clone, Debug, Default)]
pub struct OperationTarget<'a> {
    /// The instance home, required by `context: "home"` operations. Its path and name are
    /// passed (`OATS_INSTANCE`); the run's home is private (see docs/oats.md).
    pub home: Option<&'a Path>,
}

/// The outcome of an operation that started.
#[derive(Clone, Debug, PartialEq)]
pub enum OperationOutcome {
    /// One `ok:true` envelope and exit 0.
    Succeeded {
        /// What ran and what it answered:
        /// `{operation, capability, version, integrity, argv, cwd, target, result}`.
        receipt: Value,
    },
    /// Anything else, with the oats code.
    Failed {
        /// The provider's code when shaped `^E_[A-Z0-9_]+$`, else [`E_OPERATION_RESULT`] or
        /// [`E_OPERATION_TIMEOUT`].
        code: String,
        /// What went wrong, in words (the provider's message when it sent one).
        message: String,
        /// The provider's `details`, or sf's (`unconfirmed`, `exit`, `cause`, …); `null`
        /// when a provider code came without details.
        details: Value,
    },
}

impl OperationOutcome {
    /// The code: `"ok"` or the failure's.
    pub fn code(&self) -> &str {
        match self {
            Self::Succeeded { .. } => "ok",
            Self::Failed { code, .. } => code,
        }
    }
}

/// An operation's outcome and what the Executor enforced.
#[derive(Clone, Debug)]
pub struct OperationRun {
    /// The operation's outcome, judged from the Executor's answer.
    pub outcome: OperationOutcome,
    /// What the Executor ran and enforced for the operation.
    pub identities: RunIdentities,
    /// The operation's stdout, as kept by the Executor.
    pub stdout: Vec<u8>,
    /// The operation's stderr, as kept by the Executor.
    pub stderr: Vec<u8>,
}

fn stderr_tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(STDERR_DETAIL);
    String::from_utf8_lossy(&stderr[start..]).into_owned()
}

/// Maps an Executor answer to an operation outcome (see the module documentation).
pub fn judge(answer: &RunAnswer, kind: OperationKind, receipt: Value) -> OperationOutcome {
    let unconfirmed = |message: String, envelope: Option<Value>| {
        let mut details = json!({
            "unconfirmed": true,
            "exit": answer.exit_code,
            "status": answer.status.code(),
        });
        if let Some(signal) = answer.signal {
            details["signal"] = json!(signal);
        }
        if let Some(envelope) = envelope {
            details["envelope"] = envelope;
        }
        if !answer.stderr.is_empty() {
            details["stderr"] = json!(stderr_tail(&answer.stderr));
        }
        OperationOutcome::Failed {
            code: E_OPERATION_RESULT.into(),
            message,
            details,
        }
    };
    match answer.status {
        RunStatus::TimedOut => {
            return OperationOutcome::Failed {
                code: E_OPERATION_TIMEOUT.into(),
                message: format!(
                    "the operation did not finish within {} ms and was killed",
                    answer.bounds.timeout_ms()
                ),
                details: json!({"unconfirmed": true, "timeoutMs": answer.bounds.timeout_ms()}),
            };
        }
        RunStatus::Exited => {}
        other => {
            return unconfirmed(
                format!(
                    "the operation ended {} before its answer was confirmed",
                    other.code()
                ),
                None,
            );
        }
    }
    let envelope = match parse_envelope(&answer.stdout) {
        Ok(envelope) => envelope,
        Err(problem) => return unconfirmed(problem, None),
    };
    match (&envelope, answer.exit_code) {
        (Envelope::Ok(result), Some(0)) => {
            if kind == OperationKind::View
                && let Err(problem) = check_view(result)
            {
                return unconfirmed(problem, Some(envelope.to_json()));
            }
            let mut receipt = receipt;
            receipt["result"] = result.clone();
            OperationOutcome::Succeeded { receipt }
        }
        (Envelope::Ok(_), exit) => unconfirmed(
            format!("the envelope says ok but the operation exited {exit:?}"),
            Some(envelope.to_json()),
        ),
        (
            Envelope::Failed {
                code,
                message,
                details,
            },
            _,
        ) if is_kernel_code(code) => OperationOutcome::Failed {
            code: code.clone(),
            message: message.clone(),
            details: details.clone().unwrap_or(Value::Null),
        },
        (Envelope::Failed { code, message, .. }, _) => OperationOutcome::Failed {
            code: E_OPERATION_RESULT.into(),
            message: message.clone(),
            details: json!({"unconfirmed": false, "cause": code, "envelope": envelope.to_json()}),
        },
    }
}

impl Oats {
    /// Runs operation `name` of capability `id` with `args` (`name=value` pairs of declared
    /// arguments). `Err` only when nothing started: unknown operation
    /// (`E_OPERATION_UNKNOWN`), a `home` operation without a home (`E_OPERATION_UNAVAILABLE`),
    /// unknown, repeated or missing arguments (`E_BAD_ARGS`), untrusted, drifted, ….
    pub fn run_operation(
        &self,
        id: &str,
        name: &str,
        args: &[(String, String)],
        target: &OperationTarget<'_>,
        context: &RunContext,
    ) -> Result<OperationRun> {
        let prepared = self.prepare(id, true)?;
        let (launch, kind, home) = self.operation_launch(&prepared, name, args, target, context)?;
        let answer = self.launch(&prepared, &launch, &context.cancel)?;
        let receipt = json!({
            "operation": name,
            "capability": prepared.entry.id,
            "version": prepared.entry.version,
            "integrity": prepared.entry.integrity,
            "argv": launch.argv(),
            "cwd": "home",
            "target": home.map(|h| json!({
                "home": h.display().to_string(),
                "instance": h.file_name().map(|n| n.to_string_lossy().into_owned()),
            })),
        });
        Ok(OperationRun {
            outcome: judge(&answer, kind, receipt),
            identities: answer.identities,
            stdout: answer.stdout,
            stderr: answer.stderr,
        })
    }

    /// The launch of operation `name` of a prepared capability, with its kind and the home
    /// it runs for: every refusal of [`Oats::run_operation`] before anything starts.
    pub(crate) fn operation_launch<'t>(
        &self,
        prepared: &Prepared,
        name: &str,
        args: &[(String, String)],
        target: &OperationTarget<'t>,
        context: &RunContext,
    ) -> Result<(Launch, OperationKind, Option<&'t Path>)> {
        let id = prepared.entry.id.as_str();
        let manifest = &prepared.manifest;
        let Some(operation) = manifest.operations.get(name) else {
            return Err(OatsError::new(
                ErrorCode::OperationUnknown,
                name,
                format!(
                    "{id} declares no operation {name:?} (operations: {})",
                    if manifest.operations.is_empty() {
                        "(none)".to_owned()
                    } else {
                        manifest
                            .operations
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            ));
        };
        let home = match (operation.context, target.home) {
            (OperationContext::Home, None) => {
                return Err(OatsError::new(
                    ErrorCode::OperationUnavailable,
                    name,
                    "is a home operation; give the instance home (--home DIR)",
                ));
            }
            (_, Some(home)) => {
                if let Some(problem) = crate::hooks::existing_home_problem(home) {
                    return Err(OatsError::new(
                        ErrorCode::OperationUnavailable,
                        home.display().to_string(),
                        problem,
                    ));
                }
                Some(home)
            }
            (OperationContext::Scope, None) => None,
        };
        let mut extra = Vec::new();
        for (arg_name, value) in args {
            let Some(declared) = operation.args.iter().find(|a| &a.name == arg_name) else {
                return Err(OatsError::new(
                    ErrorCode::BadArgs,
                    arg_name.clone(),
                    format!(
                        "operation {name} declares no argument {arg_name:?} (arguments: {})",
                        operation
                            .args
                            .iter()
                            .map(|a| a.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            };
            if args.iter().filter(|(other, _)| other == arg_name).count() > 1 {
                return Err(OatsError::new(
                    ErrorCode::BadArgs,
                    arg_name.clone(),
                    "is given twice",
                ));
            }
            extra.push(declared.flag());
            extra.push(value.clone());
        }
        if let Some(missing) = operation
            .args
            .iter()
            .find(|a| a.required && !args.iter().any(|(n, _)| n == &a.name))
        {
            return Err(OatsError::new(
                ErrorCode::BadArgs,
                missing.name.clone(),
                format!("operation {name} requires --arg {}=VALUE", missing.name),
            ));
        }
        let line = &manifest.commands[&operation.command];
        let (mut env, mut places) = Self::base_environment(manifest, context)?;
        env.insert("OATS_OPERATION".into(), name.to_owned());
        if let Some(home) = home {
            let instance = home
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            env.insert("OATS_INSTANCE".into(), instance);
            places.insert("OATS_HOME".into(), Place::Home);
            places.insert("OATS_INSTANCE_HOME".into(), Place::Home);
        }
        let mut all_args = line.args.clone();
        all_args.extend(extra);
        let launch = Launch {
            script: line.script.clone(),
            args: all_args,
            env,
            places,
            cwd: Cwd::Home,
            stdin: String::new(),
            timeout: self.options.operation_timeout,
            output_limit: self.options.output_limit,
        };
        Ok((launch, operation.kind, home))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes() {
        assert_eq!(
            parse_envelope(b"{\"schemaVersion\":1,\"ok\":true,\"result\":{\"a\":1}}\n"),
            Ok(Envelope::Ok(json!({"a": 1})))
        );
        assert!(matches!(
            parse_envelope(
                br#"{"schemaVersion":1,"ok":false,"error":{"code":"E_X","message":"m"}}"#
            ),
            Ok(Envelope::Failed { .. })
        ));
        for bad in [
            &b""[..],
            b"  \n",
            b"{\"schemaVersion\":1,\"ok\":true,\"result\":1}\n{\"schemaVersion\":1,\"ok\":true,\"result\":2}",
            b"{\"schemaVersion\":2,\"ok\":true,\"result\":1}",
            b"{\"schemaVersion\":1,\"ok\":true}",
            b"{\"schemaVersion\":1,\"ok\":true,\"result\":1,\"extra\":1}",
            b"{\"schemaVersion\":1,\"ok\":true,\"result\":1,\"result\":2}",
            b"{\"schemaVersion\":1,\"ok\":false,\"error\":{\"code\":1,\"message\":\"m\"}}",
            b"progress\n{\"schemaVersion\":1,\"ok\":true,\"result\":1}",
            b"[1]",
        ] {
            assert!(parse_envelope(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let two = parse_envelope(b"{\"schemaVersion\":1,\"ok\":true,\"result\":1}{\"schemaVersion\":1,\"ok\":true,\"result\":2}").unwrap_err();
        assert!(two.contains("2 or more"), "{two}");
        assert!(is_kernel_code("E_OPERATION_RESULT"));
        assert!(!is_kernel_code("E_"));
        assert!(!is_kernel_code("ENOENT"));
        assert!(!is_kernel_code("E_lower"));
    }

    #[test]
    fn views() {
        assert!(check_view(&json!({"documents": [{"label": "a", "kind": "markdown", "text": "x"}], "summary": "s"})).is_ok());
        assert!(check_view(&json!({"documents": [{"label": "a", "kind": "html"}]})).is_err());
        assert!(check_view(&json!({"documents": [], "extra": 1})).is_err());
        assert!(check_view(&json!([])).is_err());
    }
}
