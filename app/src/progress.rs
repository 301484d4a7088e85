//! What a collection reports while it runs, for its caller to show: the attempt it claimed,
//! then each check's run starting and settling. A caller that shows nothing passes a closure
//! that ignores every event.

use sf_host::collector::CollectEvent;
use sf_host::contracts::AttemptId;

/// One event of a collection in progress.
#[derive(Clone, Copy, Debug)]
pub enum Progress<'a> {
    /// The attempt was claimed under the fence; `checks` process checks will run.
    Collecting {
        /// The attempt the records are filed under.
        attempt: &'a AttemptId,
        /// How many process checks the collection runs.
        checks: usize,
        /// How long the collection waited for the fence before it claimed the attempt.
        waited: std::time::Duration,
    },
    /// A check's run started or settled.
    Run(CollectEvent<'a>),
}
