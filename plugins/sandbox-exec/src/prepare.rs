//! Preparing the next run's sandbox ahead of it.
//!
//! Building a sandbox (namespaces, the root's mounts, `/proc`, `pivot_root`) does not depend
//! on the run it will serve, so the Executor keeps one built and waiting: a background thread
//! has the fork server fork a launcher and hands it the plan; the launcher builds everything
//! and its init waits for the run plan (see [`crate::plan`]). A run takes the waiting sandbox
//! (or starts one itself when none waits, or waits for the one being started) and, when it
//! ends, wakes the thread to prepare the next: building a sandbox while a run runs would take
//! cores from that run, and runs usually come with other work between them. Nothing is
//! prepared after an Executor's first run, only from its second run on: an Executor used for
//! one run (`sf exec`) never builds a sandbox it does not use. Each sandbox serves exactly
//! one run, and is dropped unused when the Executor is, which ends its processes (the init
//! reads end of file where its run plan would be).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::plan::Binds;
use crate::supervisor::{Source, Start, Started, start};

/// What the Executor and its preparing thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub source: Source,
    slot: Mutex<Slot>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Slot {
    /// The sandbox waiting, and what it binds.
    ready: Option<(Started, Binds)>,
    /// What the next sandbox binds: what the last run's did.
    next: Binds,
    /// A run ended: prepare another.
    wanted: bool,
    /// How many runs started (nothing is prepared before the second one).
    runs: u64,
    /// The thread is starting one (a run waits for it rather than start a second).
    preparing: bool,
    stopping: bool,
}

/// How long a run waits for the sandbox being started before it starts its own.
const WAIT_FOR_PREPARING: Duration = Duration::from_secs(2);

/// The Executor's side: the shared state and, when preparing ahead, the preparing thread
/// (started when the first sandbox is wanted: an Executor that runs once starts none).
#[derive(Debug)]
pub(crate) struct Preparer {
    pub shared: Arc<Shared>,
    ahead: bool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Preparer {
    /// A preparer of sandboxes from `source`; with `ahead`, its thread prepares the next
    /// sandbox whenever a run other than the first ended (the first two runs build their own,
    /// so that an Executor that runs once starts nothing it does not use).
    pub fn new(source: Source, ahead: bool) -> Self {
        let shared = Arc::new(Shared {
            source,
            slot: Mutex::new(Slot::default()),
            changed: Condvar::new(),
        });
        Self {
            shared,
            ahead,
            thread: Mutex::new(None),
        }
    }

    /// Starts the preparing thread unless it runs; without it nothing is prepared ahead.
    fn start_thread(&self) {
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        if thread.is_none() {
            let shared = Arc::clone(&self.shared);
            *thread = std::thread::Builder::new()
                .name("sf-sandbox-prepare".into())
                .spawn(move || prepare_loop(&shared))
                .ok();
        }
    }

    /// The prepared sandbox binding `binds`: the one waiting, else the one being started
    /// (waited for, up to a bound); `None` when there is neither, or it binds another
    /// environment or program tree (it is then dropped unused).
    pub fn take(&self, binds: &Binds) -> Option<Started> {
        if !self.ahead {
            return None;
        }
        let until = Instant::now() + WAIT_FOR_PREPARING;
        let mut slot = self.shared.slot();
        loop {
            if let Some((started, bound)) = slot.ready.take() {
                return (bound == *binds).then_some(started);
            }
            let left = until.saturating_duration_since(Instant::now());
            if !slot.preparing || left.is_zero() {
                return None;
            }
            slot = self
                .shared
                .changed
                .wait_timeout(slot, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// A guard that, when dropped (at the end of a run), has the next sandbox prepared,
    /// binding what this run binds, from the second run on.
    pub fn next_after(&self, binds: &Binds) -> NextAfter<'_> {
        let mut slot = self.shared.slot();
        slot.runs += 1;
        // A build's output directory and proxy are its own: the next sandbox binds what the
        // runs before it bound.
        if !binds.is_build() {
            slot.next = binds.clone();
        }
        NextAfter {
            preparer: self,
            first: slot.runs == 1,
        }
    }

    /// Whether a prepared sandbox is waiting.
    pub fn is_ready(&self) -> bool {
        self.shared.slot().ready.is_some()
    }
}

/// See [`Preparer::next_after`].
pub(crate) struct NextAfter<'a> {
    preparer: &'a Preparer,
    /// Whether this is the Executor's first run.
    pub first: bool,
}

impl Drop for NextAfter<'_> {
    fn drop(&mut self) {
        let preparer = self.preparer;
        if !preparer.ahead {
            return;
        }
        let wanted = {
            let mut slot = preparer.shared.slot();
            slot.wanted |= slot.runs >= 2;
            preparer.shared.changed.notify_all();
            slot.wanted
        };
        if wanted {
            preparer.start_thread();
        }
    }
}

impl Drop for Preparer {
    fn drop(&mut self) {
        let unused = {
            let mut slot = self.shared.slot();
            slot.stopping = true;
            self.shared.changed.notify_all();
            slot.ready.take()
        };
        drop(unused);
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// The preparing thread: waits until a sandbox is wanted and none is ready, starts one.
/// A failure is not retried until the next run wants one (that run starts its own and
/// reports the failure).
fn prepare_loop(shared: &Shared) {
    loop {
        let binds = {
            let mut slot = shared.slot();
            let needed = |slot: &Slot| slot.wanted && slot.ready.is_none();
            while !slot.stopping && !needed(&slot) {
                slot = shared
                    .changed
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if slot.stopping {
                return;
            }
            slot.wanted = false;
            slot.preparing = true;
            slot.next.clone()
        };
        let started = start(&shared.source, &binds, Start::Forked);
        let mut slot = shared.slot();
        slot.preparing = false;
        shared.changed.notify_all();
        if slot.stopping {
            return;
        }
        if let Ok(started) = started
            && slot.ready.is_none()
        {
            slot.ready = Some((started, binds));
        }
    }
}
