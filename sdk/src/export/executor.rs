//! The `executor` contract served. An Executor instance keeps a [`CancelToken`] per run in
//! flight, by the host's run id, and `cancel` (which the host calls from another thread while
//! the `run` is in flight) cancels the one named.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use sf_contracts::{CancelToken, Executor};
use sf_plugin_abi::executor_protocol::{self as wire, ExecutorContract, Request};
use sf_plugin_abi::protocol;

use super::served::{self, Outcome, Place, Served, exported, plugin_error};

exported!(ExecutorContract: Executor, sf_contracts::ExecutorError, |made| Box::new(ExecutorInstance::new(made)));

/// The most cancellations remembered for runs that are not in flight (cancelled before they
/// registered, or after they ended). Run ids only grow, so the oldest are dropped first.
const MAX_EARLY_CANCELS: usize = 1024;

/// An Executor and the cancel tokens of its runs in flight, by the host's run id.
struct ExecutorInstance {
    executor: Box<dyn Executor>,
    runs: Mutex<Runs>,
}

#[derive(Default)]
struct Runs {
    in_flight: HashMap<u64, CancelToken>,
    early_cancels: BTreeSet<u64>,
}

impl ExecutorInstance {
    fn new(executor: Box<dyn Executor>) -> Self {
        Self {
            executor,
            runs: Mutex::default(),
        }
    }

    fn runs(&self) -> MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers run `id` and returns its token (already cancelled if a `cancel` came first);
    /// `None` if a run with that id is in flight.
    fn register(&self, id: u64) -> Option<CancelToken> {
        let mut runs = self.runs();
        if runs.in_flight.contains_key(&id) {
            return None;
        }
        let token = CancelToken::new();
        if runs.early_cancels.remove(&id) {
            token.cancel();
        }
        runs.in_flight.insert(id, token.clone());
        Some(token)
    }

    fn cancel(&self, id: u64) {
        let mut runs = self.runs();
        match runs.in_flight.get(&id) {
            Some(token) => token.cancel(),
            None => {
                runs.early_cancels.insert(id);
                while runs.early_cancels.len() > MAX_EARLY_CANCELS {
                    runs.early_cancels.pop_first();
                }
            }
        }
    }
}

/// Removes a run from its instance's table when the run ends, even by a panic.
struct Registered<'a> {
    instance: &'a ExecutorInstance,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.instance.runs().in_flight.remove(&self.id);
    }
}

impl Served for ExecutorInstance {
    fn serve(&self, method: &str, request: &[u8], _: Place) -> Outcome {
        let decoded = Request::decode(method, request);
        served::serve::<ExecutorContract, _>(method, decoded, |request| self.answer(request))
    }
}

impl ExecutorInstance {
    /// What the Executor answers to `request`; a run is registered while it is in flight.
    fn answer(&self, request: Request) -> Outcome {
        let executor = self.executor.as_ref();
        let answer = match request {
            Request::DescribeRuntime => executor
                .describe_runtime()
                .map(|runtime| wire::encode_runtime(&runtime)),
            Request::Profile => executor
                .profile()
                .map(|profile| wire::encode_profile(&profile)),
            Request::Overlap => Ok(wire::encode_overlap(&executor.overlap())),
            Request::Run {
                run_id,
                request,
                wire,
            } => {
                let Some(token) = self.register(run_id) else {
                    return plugin_error(
                        protocol::MALFORMED_REQUEST,
                        format!("run: a run with id {run_id} is already in flight"),
                    );
                };
                let _registered = Registered {
                    instance: self,
                    id: run_id,
                };
                executor
                    .run(&request, &token)
                    .map(|answer| wire::encode_answer(&answer, wire))
            }
            Request::Cancel { run_id } => {
                self.cancel(run_id);
                Ok(wire::encode_cancelled())
            }
        };
        served::answered::<ExecutorContract>(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ScriptedExecutor;

    #[test]
    fn cancels_reach_their_run_early_or_late() {
        let instance = ExecutorInstance::new(Box::new(ScriptedExecutor::new()));
        // A cancel before its run registered is kept: the run starts cancelled.
        instance.cancel(1);
        assert!(instance.register(1).unwrap().is_cancelled());
        // A cancel of a run in flight cancels that run only.
        let two = instance.register(2).unwrap();
        let three = instance.register(3).unwrap();
        assert!(instance.register(2).is_none(), "one run per id in flight");
        instance.cancel(3);
        assert!(!two.is_cancelled() && three.is_cancelled());
        // Ended runs leave the table; late cancels are remembered, boundedly.
        {
            let _ended = Registered {
                instance: &instance,
                id: 2,
            };
        }
        assert!(!instance.runs().in_flight.contains_key(&2));
        for id in 100..100 + 2 * MAX_EARLY_CANCELS as u64 {
            instance.cancel(id);
        }
        let runs = instance.runs();
        assert_eq!(runs.early_cancels.len(), MAX_EARLY_CANCELS);
        assert_eq!(
            runs.early_cancels.first().copied(),
            Some(100 + MAX_EARLY_CANCELS as u64)
        );
    }
}
