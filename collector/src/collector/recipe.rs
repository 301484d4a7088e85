//! The recipe a Slice is frozen with for this collector: the authored bounds, this
//! collector's closure, and what the configured executor runs and enforces now.

use crate::assurance::Recipe;
use crate::contracts::{Executor, ExecutorError};

use super::collector_closure;

/// The recipe of a Slice run by `executor`, now, with this collector: the authored bounds,
/// the executor's runtime executable and the enforcement facts its profile states.
pub fn current_recipe(
    executor: &dyn Executor,
    timeout_ms: u64,
    output_limit: u64,
) -> Result<Recipe, ExecutorError> {
    let runtime = executor.describe_runtime()?;
    let enforcement = executor.profile()?.enforces()?;
    let runtime = runtime
        .executable
        .to_str()
        .ok_or(ExecutorError::InvalidInput {
            input: "the runtime executable".into(),
            rule: "a recipe names the runtime by a UTF-8 path",
        })?
        .to_owned();
    Ok(Recipe {
        collector_closure: collector_closure(),
        timeout_ms,
        output_limit,
        runtime,
        enforcement,
    })
}
