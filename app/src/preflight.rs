//! The checks made before an attempt is claimed, so that a typo or a closed gate starts
//! nothing and consumes nothing: the gate file is one, the executor is the Slice's and may run
//! as many checks at once as `--jobs` asks, the deadline is ahead, and the gate answers
//! proceed.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sf_host::assurance::{FrozenSlice, current_environment};
use sf_host::collector::environment_problem;
use sf_host::contracts::{Executor, Gate, Overlap};
use sf_host::repository::consult_gate;

use crate::error::AppError;
use crate::input::read_input;
use crate::landing::LandError;

/// How long the preflight waits for the gate's first answer.
pub const PREFLIGHT_GATE_TIMEOUT: Duration = Duration::from_secs(30);

/// A gate file (`--gate FILE`) must be a readable gate file before anything starts: a typo
/// there is a usage error, not a consumed occurrence.
pub fn check_gate_file(file: Option<&Path>) -> Result<(), AppError> {
    let Some(file) = file else {
        return Ok(());
    };
    let bytes = read_input(file, "--gate")?;
    let shape = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .filter(|value| {
            value
                .get("proceed")
                .is_some_and(serde_json::Value::is_boolean)
        });
    match shape {
        Some(_) => Ok(()),
        None => Err(AppError::new(
            "invalid-input",
            format!(
                "--gate {}: is not a gate file ({{\"proceed\": true}} or {{\"proceed\": false, \
                 \"reason\": …}}); nothing was started",
                file.display()
            ),
        )),
    }
}

/// `--jobs` above 1 only for an Executor whose runs may overlap: one that cannot bound
/// overlapping runs together (sandbox-exec without control groups) refuses, naming why.
pub(crate) fn check_jobs(executor: &dyn Executor, jobs: NonZeroUsize) -> Result<(), AppError> {
    if jobs.get() == 1 {
        return Ok(());
    }
    match executor.overlap() {
        Overlap::Allowed => Ok(()),
        Overlap::OneAtATime { reason } => Err(AppError::invalid(
            format!("--jobs {jobs}"),
            format!("the executor runs one check at a time here: {reason}; nothing was started"),
        )),
    }
}

/// The checks made before an attempt is claimed: the executor's runtime is the recipe's and
/// its environment is the Slice's; the deadline is ahead; and `gate`, asked once (for at most
/// [`PREFLIGHT_GATE_TIMEOUT`]), answers proceed. A refusal or an unreadable gate is
/// [`LandError::Withheld`]; nothing is written either way.
pub(crate) fn preflight(
    executor: &dyn Executor,
    slice: &FrozenSlice,
    gate: &Arc<dyn Gate>,
    deadline: SystemTime,
) -> Result<(), LandError> {
    let runtime = executor.describe_runtime().map_err(|error| {
        LandError::invalid(
            "the executor",
            format!(
                "its runtime cannot be described ({}): {error}",
                error.code()
            ),
        )
    })?;
    let environment = current_environment(executor).map_err(|error| {
        LandError::invalid(
            "the executor",
            format!("its environment cannot be described: {error}"),
        )
    })?;
    if let Some(problem) = environment_problem(&runtime, &environment, slice) {
        return Err(LandError::invalid(
            format!("the executor of Slice {}", slice.record.id),
            format!(
                "{problem}; the Slice was frozen under another executor: freeze a new revision \
                 for this one"
            ),
        ));
    }
    let left = deadline
        .duration_since(SystemTime::now())
        .map_err(|_| LandError::invalid("the deadline", "has passed; give one in the future"))?;
    consult_gate(Arc::clone(gate), PREFLIGHT_GATE_TIMEOUT.min(left))
        .map_err(|reason| LandError::Withheld { reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gate_file_passes_the_gate_file_check() {
        assert!(check_gate_file(None).is_ok());
        let dir = std::env::temp_dir().join(format!("sf-app-gate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (open, other) = (dir.join("open.json"), dir.join("other.json"));
        std::fs::write(&open, "{\"proceed\": true}").unwrap();
        std::fs::write(&other, "{\"go\": true}").unwrap();
        assert!(check_gate_file(Some(&open)).is_ok());
        let error = check_gate_file(Some(&other)).unwrap_err();
        assert_eq!(error.code, "invalid-input");
        assert!(error.message.ends_with("nothing was started"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
