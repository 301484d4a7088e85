//! The `sf-serve` program, killing itself with SIGKILL at the fault point that
//! `SF_TEST_KILL_AT` names (a test-only program: the real `sf-serve` has no such hook). How
//! the crash tests interrupt a landing of the server between its steps.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use sf_host::fault::FaultPoint;

fn main() -> ExitCode {
    let point = match std::env::var("SF_TEST_KILL_AT") {
        Ok(name) => match FaultPoint::from_name(&name) {
            Some(point) => Some(point),
            None => {
                eprintln!("sf-serve-faulty: SF_TEST_KILL_AT names no fault point: {name}");
                return ExitCode::from(2);
            }
        },
        Err(_) => None,
    };
    let mut args = std::env::args_os().skip(1);
    let config = match (args.next(), args.next()) {
        (Some(flag), Some(config)) if flag == "--config" => Some(config.into()),
        _ => None,
    };
    sf_serve::main_with_faults(
        config,
        Arc::new(move |reached: FaultPoint| {
            if Some(reached) == point {
                // The harshest interruption: no unwinding, no destructors, no flush.
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            }
        }),
    )
}
