//! The guard: one consultation of a Gate by the claim holder, immediately before the effect
//! starts (the target update, the push), where only an exact, timely allowance lets it start
//! ([`GateExt::consult`]); this module words what withheld it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::contracts::{Gate, GateExt, Withheld};

/// The reason given when a gate's answer is neither an allowance nor a valid refusal.
pub const MALFORMED_GUARD_ANSWER: &str =
    "the guard answered neither {proceed: true} nor {proceed: false, reason} with a valid reason";

/// Consults `gate` once, within `timeout`: `Ok` only for an exact, timely `Proceed`; otherwise
/// the refusal's own reason, or what withheld it.
pub fn consult(gate: Arc<dyn Gate>, timeout: Duration) -> Result<(), String> {
    gate.consult(Instant::now() + timeout, None)
        .map_err(|withheld| match withheld {
            Withheld::Refused { reason } => reason,
            Withheld::MalformedRefusal => MALFORMED_GUARD_ANSWER.into(),
            Withheld::Failed(error) => format!(
                "the guard failed: {}",
                error.to_string().chars().take(256).collect::<String>()
            ),
            Withheld::Panicked(message) => format!("the guard failed: {message}"),
            Withheld::NotStarted(error) => {
                format!("the guard failed: it could not be started: {error}")
            }
            Withheld::NoAnswer | Withheld::Late | Withheld::Cancelled => {
                format!("the guard did not answer within {} ms", timeout.as_millis())
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::GateAnswer;

    struct Slow(Duration, GateAnswer);
    impl Gate for Slow {
        fn current(&self, _deadline: Instant) -> Result<GateAnswer, crate::contracts::GateError> {
            std::thread::sleep(self.0);
            Ok(self.1.clone())
        }
    }

    struct Panics;
    impl Gate for Panics {
        fn current(&self, _deadline: Instant) -> Result<GateAnswer, crate::contracts::GateError> {
            panic!("boom")
        }
    }

    #[test]
    fn what_withheld_is_worded_for_the_guard() {
        let quick = Duration::from_millis(0);
        // Generous for answers that must arrive in time (a panic's backtrace can be slow on a
        // loaded machine); short only for the late case.
        let bound = Duration::from_secs(10);
        assert_eq!(
            consult(Arc::new(Slow(quick, GateAnswer::Proceed)), bound),
            Ok(())
        );
        assert_eq!(
            consult(
                Arc::new(Slow(
                    quick,
                    GateAnswer::Refuse {
                        reason: "closed".into()
                    }
                )),
                bound
            ),
            Err("closed".into())
        );
        assert_eq!(
            consult(
                Arc::new(Slow(
                    quick,
                    GateAnswer::Refuse {
                        reason: String::new()
                    }
                )),
                bound
            ),
            Err(MALFORMED_GUARD_ANSWER.into())
        );
        assert_eq!(
            consult(Arc::new(Panics), bound),
            Err("the guard failed: boom".into())
        );
        let late = consult(
            Arc::new(Slow(Duration::from_millis(1500), GateAnswer::Proceed)),
            Duration::from_millis(300),
        );
        assert_eq!(late, Err("the guard did not answer within 300 ms".into()));
    }
}
