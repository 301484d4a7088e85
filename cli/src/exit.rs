//! The exit statuses of `sf`, and which one each outcome a command reports gets: what CI
//! scripts branch on; and what a command ends with ([`Outcome`]).

use sf_app::LandOutcome;
use sf_app::land::Landed;
use sf_host::assurance::Outcome as VerdictOutcome;
use sf_host::collector::CollectResult;
use sf_host::repository::DeliveryInvocation;

use crate::common::{CliError, Output};

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
/// Exit status of any command that failed `unavailable`: a server, cluster, store or fence
/// that cannot be reached or used now. Nothing was decided: retry later.
pub const EXIT_UNAVAILABLE: u8 = 9;
/// Exit status of any command that failed `corrupt`: stored data (a record, a schema, a
/// repository) failed verification. It is reported, never repaired: stop and investigate.
pub const EXIT_CORRUPT: u8 = 10;

/// The exit status of an error whose class a script acts on alike in every command (retry
/// later, or stop), or `None`.
fn class_status(code: &str) -> Option<u8> {
    match code {
        "unavailable" => Some(EXIT_UNAVAILABLE),
        "corrupt" => Some(EXIT_CORRUPT),
        _ => None,
    }
}

/// The exit status of a command that failed with `error`.
pub fn error_status(error: &CliError) -> u8 {
    match error.code.as_str() {
        // A combination of flags clap cannot express is refused by the command itself,
        // with the same status as clap's own usage errors.
        "usage" => EXIT_USAGE,
        code => class_status(code).unwrap_or(EXIT_FAILURE),
    }
}

/// What a command ended with: its result and its exit status.
#[derive(Debug)]
pub struct Outcome {
    /// The result, printed as the envelope or as text.
    pub result: Result<Output, CliError>,
    /// The exit status (one of the `EXIT_*` constants).
    pub exit: u8,
}

impl From<Result<Output, CliError>> for Outcome {
    fn from(result: Result<Output, CliError>) -> Self {
        let exit = match &result {
            Ok(_) => 0,
            Err(error) => error_status(error),
        };
        Self { result, exit }
    }
}

/// The exit status `sf judge --exit-code` gives an outcome.
pub fn verdict_status(outcome: VerdictOutcome) -> u8 {
    match outcome {
        VerdictOutcome::Verified => 0,
        VerdictOutcome::Failed => EXIT_FAILED,
        VerdictOutcome::Inconclusive => EXIT_INCONCLUSIVE,
    }
}

/// The exit status of a collection that ran to its end: 0 when a Verdict may be issued for
/// its attempt; else the class of the store error that stopped it (9 `unavailable`, 10
/// `corrupt`), or 4 (no Verdict may be issued: a record not stored, an environment that
/// changed).
pub fn collection_status(result: &CollectResult) -> u8 {
    if result.may_judge() {
        return 0;
    }
    result
        .storage_error()
        .and_then(class_status)
        .unwrap_or(EXIT_INCONCLUSIVE)
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

/// The exit status of a landing: its delivery's when it went on to deliver, else its own,
/// where a collection stopped by a store error keeps that error's class.
pub fn landed_status(landed: &Landed) -> u8 {
    let stopped = landed
        .landing
        .collected
        .as_ref()
        .filter(|collected| !collected.may_judge())
        .and_then(CollectResult::storage_error)
        .and_then(class_status);
    match (&landed.delivery, stopped) {
        (Some(delivered), _) => delivery_status(delivered.observation.invocation),
        (None, Some(status)) => status,
        (None, None) => landing_status(landed.landing.outcome),
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
        code => class_status(code).unwrap_or(EXIT_FAILURE),
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
