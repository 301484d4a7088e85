//! Runs of one Executor at once, without a control group: nothing bounds their memory
//! together (each is bounded per process only), so `--jobs 4` could take four runs' worth of
//! the machine with no total. Such an Executor therefore runs one at a time: a run that would
//! start while another is running is refused (`unavailable`, mechanism `cgroup`), unless its
//! operator set `parallel_runs_without_cgroup = true`. With control groups the collection
//! group bounds the runs together, and any number may run.

use std::sync::atomic::{AtomicUsize, Ordering};

use sf_contracts::ExecutorError;

/// Why runs may not overlap here, and what to do.
const WHY: &str = "no control group can bound this executor's runs together (each is \
     bounded per process only): run one at a time (sf collect --jobs 1), run sf where it can \
     make control groups (as root, or with a delegated cgroup v2 subtree), or accept the risk \
     with [executor] parallel_runs_without_cgroup = true";

/// Whether runs may overlap, and how many are running.
#[derive(Debug)]
pub(crate) struct Overlap {
    /// Runs may overlap: a control group bounds them together, or the operator said so.
    allowed: bool,
    running: AtomicUsize,
}

/// One run, counted until dropped.
pub(crate) struct Running<'a>(&'a AtomicUsize);

impl Overlap {
    /// Runs may overlap when `bounded_together` (a collection group holds them) or
    /// `operator_allows` it.
    pub(crate) fn new(bounded_together: bool, operator_allows: bool) -> Self {
        Self {
            allowed: bounded_together || operator_allows,
            running: AtomicUsize::new(0),
        }
    }

    /// Whether runs may overlap, as the Executor contract says it.
    pub(crate) fn contract(&self) -> sf_contracts::Overlap {
        if self.allowed {
            sf_contracts::Overlap::Allowed
        } else {
            sf_contracts::Overlap::OneAtATime {
                reason: WHY.to_owned(),
            }
        }
    }

    /// Counts a run in; refused when another is running and runs may not overlap.
    pub(crate) fn enter(&self) -> Result<Running<'_>, ExecutorError> {
        let before = self.running.fetch_add(1, Ordering::SeqCst);
        let running = Running(&self.running);
        if before > 0 && !self.allowed {
            return Err(ExecutorError::Unavailable {
                mechanism: "cgroup".to_owned(),
                reason: format!("{before} run(s) of this executor are running and {WHY}"),
            });
        }
        Ok(running)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_bound_together_a_second_run_is_refused_until_the_first_ends() {
        let overlap = Overlap::new(false, false);
        let first = overlap.enter().unwrap();
        let refused = overlap
            .enter()
            .err()
            .expect("a second run at once is refused");
        assert_eq!(refused.code(), "unavailable");
        assert!(
            refused.to_string().contains("parallel_runs_without_cgroup"),
            "{refused}"
        );
        // The refused run is not counted: once the first ends, the next runs.
        drop(first);
        let next = overlap.enter().unwrap();
        drop(next);
        assert_eq!(overlap.running.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn bounded_together_or_allowed_runs_overlap() {
        for overlap in [Overlap::new(true, false), Overlap::new(false, true)] {
            let runs: Vec<_> = (0..4).map(|_| overlap.enter().unwrap()).collect();
            assert_eq!(overlap.running.load(Ordering::SeqCst), 4);
            drop(runs);
        }
    }
}
