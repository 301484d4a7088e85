//! The `sf` command line, killing itself with SIGKILL at the fault point that
//! `SF_TEST_KILL_AT` names (a test-only program: the real `sf` has no such hook). How the crash
//! tests interrupt `sf land` between its steps.

#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    match sf_tests::faulty::kill_at_named_point("sf-faulty") {
        Ok(faults) => sf_cli::main_with_faults(std::env::args_os(), faults),
        Err(status) => status,
    }
}
