//! The oats Gate: a capability's `binding.check` as sf's [`Gate`].
//!
//! `current` runs the check (confined, through the Executor) with
//! `{binding, context, action}` as input and answers:
//! - `ready` with no problems: [`GateAnswer::Proceed`];
//! - any other status (`needs-configuration`, `authorization-required`, `unavailable`):
//!   [`GateAnswer::Refuse`] with the capability's reason, `"<id> binding check:
//!   <status> (<problem codes>)"`;
//! - an `ok:false` answer: a refusal naming the wire code;
//! - a malformed answer, a transport failure, a capability that is untrusted, drifted or no
//!   longer contained: an error ([`GateError::Malformed`] or [`GateError::Unavailable`]),
//!   which every caller treats as a refusal;
//! - no time left, or the check timing out: [`GateError::Timeout`].
//!
//! The check is read-only and runs on every call: nothing is cached.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sf_contracts::{Executor, Gate, GateAnswer, GateError, reason_of};

use crate::binding::{self, CheckStatus, PhaseOutcome, WIRE_LIMITS};
use crate::error::{ErrorCode, OatsError};
use crate::host::{Oats, OatsOptions, RunContext};
use crate::json;
use crate::manifest::Phase;

/// The action named in the check's input when none is configured.
pub const DEFAULT_ACTION: &str = "sf.integrate";

/// The configuration of an oats binding gate, as an `sf.toml` section would hold it:
///
/// ```toml
/// [gate]
/// type = "oats-binding"
/// capability = "acme.policy"
/// binding_file = "/etc/sf/acme-binding.json"   # optional: the bound binding, read per call
/// action = "sf.integrate"                      # optional
/// state = "/var/lib/sf"                        # optional: sf's state directory
/// ```
///
/// In `sf.toml` the section resolves to the `sf-oats-plugin` library (`libsf_oats_plugin.so`,
/// built beside `sf`), which makes the gate with [`OatsBindingGate::configured`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OatsBindingGateConfig {
    /// The registered capability whose `binding.check` answers.
    pub capability: String,
    /// A JSON file holding the binding the check is asked about (the result of the `bind`
    /// phase); read on every call, so an operator can rebind without restarting. Absent:
    /// `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_file: Option<PathBuf>,
    /// The action named in the check's input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// sf's state directory, whose `oats/` registry holds the capability (as `sf oats
    /// --state` names it). Absent: chosen as `sf oats` chooses it (`$SF_STATE_DIR`, then
    /// `$XDG_STATE_HOME/sf`, then `~/.local/state/sf`). Only [`OatsBindingGate::configured`]
    /// reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PathBuf>,
    /// The operator's values for the capability's declared environment
    /// ([`crate::environment_file`]: a private JSON object of NAME: value). Absent: none; sf's
    /// own environment never reaches the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_file: Option<PathBuf>,
}

/// A [`Gate`] answered by a capability's `binding.check`.
#[derive(Debug)]
pub struct OatsBindingGate {
    oats: Arc<Oats>,
    config: OatsBindingGateConfig,
    context: RunContext,
}

impl OatsBindingGate {
    /// A gate over `oats` configured by `config`.
    pub fn new(oats: Arc<Oats>, config: OatsBindingGateConfig) -> Self {
        Self {
            oats,
            config,
            context: RunContext::default(),
        }
    }

    /// The gate a configuration section describes, on its own: the registry in the state
    /// directory (which must exist: register and trust the capability with `sf oats` first),
    /// checks run through `executor`, and the capability's declared environment taken from
    /// this process's.
    pub fn configured(
        config: OatsBindingGateConfig,
        executor: Arc<dyn Executor>,
    ) -> crate::error::Result<Self> {
        let state = crate::state::state_dir(config.state.as_deref()).ok_or_else(|| {
            OatsError::new(
                ErrorCode::StateDirectory,
                "state",
                "no state directory: set state in the [gate] section or SF_STATE_DIR",
            )
        })?;
        let state = state.canonicalize().map_err(|error| {
            OatsError::new(
                ErrorCode::StateDirectory,
                state.display().to_string(),
                format!(
                    "{error}; register and trust capability {} with `sf oats` first",
                    config.capability
                ),
            )
        })?;
        let oats = Oats::new(&state.join("oats"), executor, OatsOptions::default())?;
        let context =
            oats.declared_environment(&config.capability, config.environment_file.as_deref())?;
        Ok(Self::new(Arc::new(oats), config).with_context(context))
    }

    /// The same gate with `context` (settings and approved environment) for every check.
    pub fn with_context(mut self, context: RunContext) -> Self {
        self.context = context;
        self
    }

    fn binding(&self) -> Result<Value, GateError> {
        let Some(path) = &self.config.binding_file else {
            return Ok(Value::Null);
        };
        let unavailable = |why: String| GateError::Unavailable {
            reason: format!("binding file {}: {why}", path.display()),
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| unavailable(e.to_string()))?;
        if !file
            .metadata()
            .map_err(|e| unavailable(e.to_string()))?
            .is_file()
        {
            return Err(unavailable("not a regular file".into()));
        }
        let mut bytes = Vec::new();
        file.take(WIRE_LIMITS.bytes as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| unavailable(e.to_string()))?;
        json::parse(&bytes, WIRE_LIMITS).map_err(|problem| GateError::Malformed {
            what: format!("binding file {}: {problem}", path.display()),
        })
    }
}

/// The capability's reason as the Gate contract takes it: kept whole up to its limit, cut
/// at a character with the cut said beyond it.
fn reason(text: String) -> String {
    reason_of(&text).unwrap_or_else(|| "the oats binding check refused".to_owned())
}

impl Gate for OatsBindingGate {
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Err(GateError::Timeout);
        };
        if left < Duration::from_millis(1) {
            return Err(GateError::Timeout);
        }
        let input = json!({
            "binding": self.binding()?,
            "context": {"host": "sf"},
            "action": self.config.action.as_deref().unwrap_or(DEFAULT_ACTION),
        });
        let id = &self.config.capability;
        let run = self
            .oats
            .run_phase(id, Phase::Check, input, left, &self.context)
            .map_err(|error| GateError::Unavailable {
                reason: format!("{}: {}: {}", error.code(), error.subject, error.message),
            })?;
        if Instant::now() > deadline {
            return Err(GateError::Timeout);
        }
        match run.outcome {
            PhaseOutcome::Answered(result) => match binding::parse_check(&result) {
                Ok(check) if check.status == CheckStatus::Ready => Ok(GateAnswer::Proceed),
                Ok(check) => Ok(GateAnswer::Refuse {
                    reason: reason(if check.problems.is_empty() {
                        format!("{id} binding check: {}", check.status.as_str())
                    } else {
                        format!(
                            "{id} binding check: {} ({})",
                            check.status.as_str(),
                            check.problems.join(", ")
                        )
                    }),
                }),
                Err(what) => Err(GateError::Malformed {
                    what: format!("{id} binding check: {what}"),
                }),
            },
            PhaseOutcome::Refused { code } => Ok(GateAnswer::Refuse {
                reason: reason(format!("{id} binding check failed: {code}")),
            }),
            PhaseOutcome::TimedOut => Err(GateError::Timeout),
            PhaseOutcome::Transport { reason } => Err(GateError::Unavailable {
                reason: format!("{id} binding check: {reason}"),
            }),
            PhaseOutcome::Malformed { what } => Err(GateError::Malformed {
                what: format!("{id} binding check: {what}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_printable_ascii_kept_whole_to_the_contracts_limit() {
        assert_eq!(reason("closed".into()), "closed");
        assert_eq!(reason("tab\there é".into()), "tab?here ?");
        // Longer than the old 256 and kept whole; cut, with the cut said, past the limit.
        assert_eq!(reason("x".repeat(300)), "x".repeat(300));
        let cut = reason("x".repeat(5000));
        assert_eq!(cut.len(), sf_contracts::MAX_REASON_CHARS);
        assert!(cut.ends_with("(cut at 4096 characters)"), "{cut}");
        assert_eq!(reason(String::new()), "the oats binding check refused");
        let config: OatsBindingGateConfig =
            serde_json::from_value(json!({"capability": "acme.tool", "binding_file": "/b.json"}))
                .unwrap();
        assert_eq!(
            config.binding_file.as_deref(),
            Some(std::path::Path::new("/b.json"))
        );
        assert!(
            serde_json::from_value::<OatsBindingGateConfig>(json!({"capability": "a.b", "x": 1}))
                .is_err()
        );
    }
}
