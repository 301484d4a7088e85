//! The Gate contract: asked "may this proceed now?", a gate answers proceed, or refuse with a
//! reason. Callers treat anything but an exact, timely proceed (an error, a malformed or late
//! answer, a panic) as a refusal; a gate cannot widen what it allows by failing.

use std::any::Any;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::error_fields::contract_error;
use crate::executor::CancelToken;

/// A gate's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateAnswer {
    /// Proceed now.
    Proceed,
    /// Do not proceed. Callers accept a reason of 1 to [`MAX_REASON_CHARS`] printable ASCII
    /// characters and replace any other with a fixed one.
    Refuse {
        /// Why not, in the gate's words.
        reason: String,
    },
}

contract_error! {
    /// Why a gate gave no answer. Every variant is a refusal to the caller.
    #[derive(Clone, Debug, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum GateError {
        /// The gate's source could not be read or consulted.
        #[error("gate unavailable: {reason}")]
        "unavailable" Unavailable {
            /// Why the source could not be read or consulted.
            reason: String,
        },
        /// The gate's source said something that is neither an allowance nor a valid refusal.
        #[error("gate answer malformed: {what}")]
        "malformed" Malformed {
            /// What the source said, or what is wrong with it.
            what: String,
        },
        /// The deadline passed before the gate could answer.
        #[error("gate did not answer before its deadline")]
        "timeout" Timeout,
    }
}

/// A source of permission, consulted immediately before an effect.
pub trait Gate: Send + Sync {
    /// The gate's answer now. `deadline` is when the caller stops waiting; an answer after it
    /// is ignored.
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError>;
}

/// The longest refusal reason callers accept, in characters (printable ASCII, so bytes).
/// Long enough for a reason that names digests, paths and the fix whole. It was 256 in
/// earlier sf versions, which take a longer reason from a plugin as malformed: still a
/// refusal, so no ABI version is needed for it.
pub const MAX_REASON_CHARS: usize = 4096;

/// Whether `reason` is an acceptable refusal reason: 1 to [`MAX_REASON_CHARS`] printable
/// ASCII characters.
pub fn is_valid_reason(reason: &str) -> bool {
    (1..=MAX_REASON_CHARS).contains(&reason.len())
        && reason.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// `text` made an acceptable reason: each character outside printable ASCII shown as `?`,
/// and a text over [`MAX_REASON_CHARS`] cut at a character with the cut said; `None` for an
/// empty text.
pub fn reason_of(text: &str) -> Option<String> {
    const CUT: &str = "... (cut at 4096 characters)";
    let clean: String = text
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect();
    let kept = match clean.len() > MAX_REASON_CHARS {
        // Printable ASCII: every byte is a character, so any index is a boundary.
        true => format!("{}{CUT}", &clean[..MAX_REASON_CHARS - CUT.len()]),
        false => clean,
    };
    is_valid_reason(&kept).then_some(kept)
}

/// How often a consultation looks at its cancel token while the gate has not answered.
const CANCEL_POLL: Duration = Duration::from_millis(5);

/// Why a consultation did not allow: every case is a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Withheld {
    /// The gate refused, with a valid reason.
    Refused {
        /// The gate's reason, 1 to [`MAX_REASON_CHARS`] printable ASCII characters.
        reason: String,
    },
    /// The gate refused with a reason that is not 1 to [`MAX_REASON_CHARS`] printable ASCII
    /// characters.
    MalformedRefusal,
    /// The gate gave no answer: it failed.
    Failed(GateError),
    /// The gate panicked; the panic's message, cut to 256 characters.
    Panicked(String),
    /// The deadline passed with no answer (the gate is abandoned, not stopped).
    NoAnswer,
    /// The gate allowed at or after the deadline.
    Late,
    /// The cancel token was cancelled while the gate had not answered.
    Cancelled,
    /// The consultation could not start (no thread could be made).
    NotStarted(String),
}

/// What a caller of a [`Gate`] uses: one consultation with every rule of the contract
/// applied, written once for every caller (the integration guard, the collector).
pub trait GateExt {
    /// Consults the gate once, on a thread of its own, so that a gate that never answers
    /// cannot hold the caller: only an exact `Proceed` that arrives before `deadline` (and
    /// before `cancel`, when given, is cancelled) is `Ok`. A panic, an error, a malformed
    /// refusal, a late or missing answer all withhold.
    fn consult(&self, deadline: Instant, cancel: Option<&CancelToken>) -> Result<(), Withheld>;
}

impl GateExt for Arc<dyn Gate> {
    fn consult(&self, deadline: Instant, cancel: Option<&CancelToken>) -> Result<(), Withheld> {
        let (sender, receiver) = mpsc::channel();
        let gate = Arc::clone(self);
        std::thread::Builder::new()
            .name("sf-gate".into())
            .spawn(move || {
                let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    gate.current(deadline)
                }));
                let _ = sender.send(answer);
            })
            .map_err(|error| Withheld::NotStarted(error.to_string()))?;
        let answer = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(left.min(CANCEL_POLL)) {
                Ok(answer) => break answer,
                Err(RecvTimeoutError::Timeout) => {
                    if cancel.is_some_and(CancelToken::is_cancelled) {
                        return Err(Withheld::Cancelled);
                    }
                    if Instant::now() >= deadline {
                        return Err(Withheld::NoAnswer);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(Withheld::NoAnswer),
            }
        };
        match answer {
            Err(panic) => Err(Withheld::Panicked(panic_message(panic.as_ref()))),
            Ok(Err(error)) => Err(Withheld::Failed(error)),
            Ok(Ok(GateAnswer::Refuse { reason })) if is_valid_reason(&reason) => {
                Err(Withheld::Refused { reason })
            }
            Ok(Ok(GateAnswer::Refuse { .. })) => Err(Withheld::MalformedRefusal),
            Ok(Ok(GateAnswer::Proceed)) if Instant::now() >= deadline => Err(Withheld::Late),
            Ok(Ok(GateAnswer::Proceed)) => Ok(()),
        }
    }
}

/// A panic's message, cut to 256 characters.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
        .chars()
        .take(256)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_kept_whole_to_its_limit_and_cut_with_the_cut_said() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let long = format!("refused: pinned {digest}; fix: run `sf oats trust x`. ").repeat(10);
        assert!(long.len() > 256 && long.len() < MAX_REASON_CHARS);
        assert_eq!(reason_of(&long).as_deref(), Some(long.as_str()));
        let over = "é".repeat(MAX_REASON_CHARS + 1);
        let cut = reason_of(&over).unwrap();
        assert_eq!(cut.len(), MAX_REASON_CHARS);
        assert!(is_valid_reason(&cut));
        assert!(cut.starts_with("???") && cut.ends_with("... (cut at 4096 characters)"));
        assert_eq!(reason_of(""), None);
        assert!(!is_valid_reason(&"a".repeat(MAX_REASON_CHARS + 1)));
    }

    struct Slow(Duration, Result<GateAnswer, GateError>);
    impl Gate for Slow {
        fn current(&self, _deadline: Instant) -> Result<GateAnswer, GateError> {
            std::thread::sleep(self.0);
            self.1.clone()
        }
    }

    struct Panics;
    impl Gate for Panics {
        fn current(&self, _deadline: Instant) -> Result<GateAnswer, GateError> {
            panic!("boom")
        }
    }

    fn consult(gate: impl Gate + 'static, within: Duration) -> Result<(), Withheld> {
        let gate: Arc<dyn Gate> = Arc::new(gate);
        gate.consult(Instant::now() + within, None)
    }

    #[test]
    fn only_an_exact_timely_allowance_proceeds() {
        let now = Duration::ZERO;
        // Generous for answers that must arrive in time (a panic's backtrace can be slow on a
        // loaded machine); short only for the late case.
        let bound = Duration::from_secs(10);
        assert_eq!(consult(Slow(now, Ok(GateAnswer::Proceed)), bound), Ok(()));
        let refuse = |reason: &str| {
            Ok(GateAnswer::Refuse {
                reason: reason.into(),
            })
        };
        assert_eq!(
            consult(Slow(now, refuse("closed")), bound),
            Err(Withheld::Refused {
                reason: "closed".into()
            })
        );
        assert_eq!(
            consult(Slow(now, refuse("")), bound),
            Err(Withheld::MalformedRefusal)
        );
        assert_eq!(
            consult(Slow(now, Err(GateError::Timeout)), bound),
            Err(Withheld::Failed(GateError::Timeout))
        );
        assert_eq!(
            consult(Panics, bound),
            Err(Withheld::Panicked("boom".into()))
        );
        assert_eq!(
            consult(
                Slow(Duration::from_millis(1500), Ok(GateAnswer::Proceed)),
                Duration::from_millis(300)
            ),
            Err(Withheld::NoAnswer)
        );
    }

    #[test]
    fn a_cancelled_consultation_withholds_at_once() {
        let gate: Arc<dyn Gate> = Arc::new(Slow(Duration::from_secs(5), Ok(GateAnswer::Proceed)));
        let cancel = CancelToken::new();
        cancel.cancel();
        let started = Instant::now();
        assert_eq!(
            gate.consult(started + Duration::from_secs(10), Some(&cancel)),
            Err(Withheld::Cancelled)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
