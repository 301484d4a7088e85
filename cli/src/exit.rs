//! The exit statuses of `sf`, and which one each outcome a command reports gets: what CI
//! scripts branch on.

use sf_app::LandOutcome;
use sf_app::land::Landed;
use sf_host::assurance::Outcome;
use sf_host::repository::DeliveryInvocation;

use crate::common::CliError;

/// Exit status of a command that failed.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of a usage error (unknown flag, missing argument), and of `sf land` refusing
/// invalid input.
pub const EXIT_USAGE: u8 = 2;
/// Exit status of `sf land` (and `sf judge --exit-code`) for a Failed Candidate.
pub const EXIT_FAILED: u8 = 3;
/// … for an Inconclusive one, or an attempt no Verdict may be issued for.
pub const EXIT_INCONCLUSIVE: u8 = 4;
/// … of `sf land` when the gate withheld.
pub const EXIT_WITHHELD: u8 = 5;
/// … of `sf land` when the move's outcome is unknown.
pub const EXIT_UNKNOWN: u8 = 6;
/// … of `sf land` when nothing was dispatched (the target left the Candidate's base).
pub const EXIT_NOT_DISPATCHED: u8 = 7;
/// … of `sf deliver invoke` (and `sf land --deliver`) when the remote refused the push.
pub const EXIT_REFUSED: u8 = 8;

/// The exit status `sf judge --exit-code` gives an outcome.
pub fn verdict_status(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Verified => 0,
        Outcome::Failed => EXIT_FAILED,
        Outcome::Inconclusive => EXIT_INCONCLUSIVE,
    }
}

/// The exit status of a landing's outcome.
pub fn landing_status(outcome: LandOutcome) -> u8 {
    match outcome {
        LandOutcome::Integrated => 0,
        LandOutcome::Failed => EXIT_FAILED,
        LandOutcome::Inconclusive => EXIT_INCONCLUSIVE,
        LandOutcome::Withheld => EXIT_WITHHELD,
        LandOutcome::Unknown => EXIT_UNKNOWN,
        LandOutcome::NotDispatched => EXIT_NOT_DISPATCHED,
    }
}

/// The exit status of a landing: its delivery's when it went on to deliver, else its own.
pub fn landed_status(landed: &Landed) -> u8 {
    match &landed.delivery {
        Some(delivered) => delivery_status(delivered.observation.invocation),
        None => landing_status(landed.landing.outcome),
    }
}

/// The exit status of a landing that ended in an error.
pub fn landing_error_status(error: &CliError) -> u8 {
    match error.code.as_str() {
        "usage" | "invalid-input" | "unreadable-input" | "invalid-identity" | "missing" => {
            EXIT_USAGE
        }
        "withheld" => EXIT_WITHHELD,
        "not-verified" => EXIT_INCONCLUSIVE,
        _ => EXIT_FAILURE,
    }
}

/// The exit status of a delivery's invoke: 0 only for confirmed.
pub fn delivery_status(invocation: DeliveryInvocation) -> u8 {
    match invocation {
        DeliveryInvocation::Confirmed => 0,
        DeliveryInvocation::Withheld => EXIT_WITHHELD,
        DeliveryInvocation::Unknown => EXIT_UNKNOWN,
        DeliveryInvocation::NotDispatched => EXIT_NOT_DISPATCHED,
        DeliveryInvocation::Refused => EXIT_REFUSED,
    }
}
