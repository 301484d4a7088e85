//! What the test-only `sf-faulty` and `sf-serve-faulty` programs share: the fault hook that
//! kills the process with SIGKILL at the fault point `SF_TEST_KILL_AT` names (the real
//! programs have no such hook).

use std::process::ExitCode;
use std::sync::Arc;

use sf_host::fault::{FaultPoint, FaultPoints};

/// The hook `SF_TEST_KILL_AT` asks for (one that does nothing when it is unset), or the exit
/// status after saying, as `program`, that it names no fault point.
pub fn kill_at_named_point(program: &str) -> Result<Arc<dyn FaultPoints>, ExitCode> {
    let point = match std::env::var("SF_TEST_KILL_AT") {
        Ok(name) => match FaultPoint::from_name(&name) {
            Some(point) => Some(point),
            None => {
                eprintln!("{program}: SF_TEST_KILL_AT names no fault point: {name}");
                return Err(ExitCode::from(2));
            }
        },
        Err(_) => None,
    };
    Ok(Arc::new(move |reached: FaultPoint| {
        if Some(reached) == point {
            // The harshest interruption: no unwinding, no destructors, no flush.
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
    }))
}
