//! The `sf` command line, killing itself with SIGKILL at the fault point that
//! `SF_TEST_KILL_AT` names (a test-only program: the real `sf` has no such hook). How the crash
//! tests interrupt `sf land` between its steps.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use sf_host::fault::FaultPoint;

fn main() -> ExitCode {
    let point = match std::env::var("SF_TEST_KILL_AT") {
        Ok(name) => match FaultPoint::from_name(&name) {
            Some(point) => Some(point),
            None => {
                eprintln!("sf-faulty: SF_TEST_KILL_AT names no fault point: {name}");
                return ExitCode::from(2);
            }
        },
        Err(_) => None,
    };
    sf_cli::main_with_faults(
        std::env::args_os(),
        Arc::new(move |reached: FaultPoint| {
            if Some(reached) == point {
                // The harshest interruption: no unwinding, no destructors, no flush.
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            }
        }),
    )
}
