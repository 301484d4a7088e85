//! The `sf-serve` program, killing itself with SIGKILL at the fault point that
//! `SF_TEST_KILL_AT` names (a test-only program: the real `sf-serve` has no such hook). How
//! the crash tests interrupt a landing of the server between its steps.

#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let faults = match sf_tests::faulty::kill_at_named_point("sf-serve-faulty") {
        Ok(faults) => faults,
        Err(status) => return status,
    };
    let mut args = std::env::args_os().skip(1);
    let config = match (args.next(), args.next()) {
        (Some(flag), Some(config)) if flag == "--config" => Some(config.into()),
        _ => None,
    };
    sf_serve::main_with_faults(config, faults)
}
