//! The pre-move guard: one consultation of a Gate by the claim holder, immediately before the
//! target update, where only an exact, timely allowance lets the update start.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::contracts::{Gate, GateAnswer, is_valid_reason};

/// The reason given when a gate's answer is neither an allowance nor a valid refusal.
pub const MALFORMED_GUARD_ANSWER: &str =
    "the guard answered neither {proceed: true} nor {proceed: false, reason} with a valid reason";

/// Consults `gate` once, on its own thread so that a gate that never answers cannot hold the
/// call: no answer within `timeout` withholds (the gate is abandoned, not stopped), and an
/// allowance that arrives when the monotonic clock shows `timeout` or more since the call is
/// late and withholds too. Only an exact, timely `Proceed` returns `Ok`.
pub fn consult(gate: Arc<dyn Gate>, timeout: Duration) -> Result<(), String> {
    let started = Instant::now();
    let deadline = started + timeout;
    let (sender, receiver) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("sf-integration-guard".into())
        .spawn(move || {
            let answer =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gate.current(deadline)));
            let _ = sender.send(answer);
        });
    if let Err(error) = spawned {
        return Err(format!(
            "the guard failed: it could not be started: {error}"
        ));
    }
    let answer = match receiver.recv_timeout(timeout) {
        Ok(answer) => answer,
        Err(_) => {
            return Err(format!(
                "the guard did not answer within {} ms",
                timeout.as_millis()
            ));
        }
    };
    let late = started.elapsed() >= timeout;
    match answer {
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a value that cannot be described".into());
            Err(format!("the guard failed: {}", truncate(&message, 256)))
        }
        Ok(Err(error)) => Err(format!(
            "the guard failed: {}",
            truncate(&error.to_string(), 256)
        )),
        Ok(Ok(GateAnswer::Refuse { reason })) if is_valid_reason(&reason) => Err(reason),
        Ok(Ok(GateAnswer::Refuse { .. })) => Err(MALFORMED_GUARD_ANSWER.into()),
        Ok(Ok(GateAnswer::Proceed)) if late => Err(format!(
            "the guard did not answer within {} ms",
            timeout.as_millis()
        )),
        Ok(Ok(GateAnswer::Proceed)) => Ok(()),
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    text.chars().take(max_chars).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn only_an_exact_timely_allowance_proceeds() {
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
