//! The worker of one repository: it lands the proposals of its queue in the order they were
//! queued, and collects those behind the head speculatively. Each proposal is sealed on the
//! one ahead of it (the head on the target), so its checks run on the tree it will land as;
//! up to `jobs` proposals are sealed and collected at once. The head's collected attempt is
//! landed (judged again, behind the gate, at most once); a proposal whose collection did not
//! pass is skipped by those behind it, which are sealed again without it (Zuul's rule: a
//! failure resets the queue behind it), and it ends as its own Verdict says once it is the
//! head, on the target its evidence was collected on. After a restart it takes up whatever
//! was open, where it was.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sf_app::Backends;
use sf_host::plugin::serve_config::ServeRepository;

use crate::queue::{Entry, Queue, Sealing};
use crate::state::State;
use crate::steps::{self, NotSealed};

/// How long an idle worker sleeps between looks at the queue.
const IDLE: Duration = Duration::from_millis(100);

/// What the workers share with the pages.
#[derive(Default)]
pub struct Activity {
    /// Collections and landings running now.
    pub collecting: AtomicUsize,
}

/// One repository's worker.
struct Worker {
    backends: Arc<Backends>,
    repository: ServeRepository,
    state: PathBuf,
    activity: Arc<Activity>,
    queue: Queue,
    /// The collections running now, by proposal and generation (an older generation's
    /// collection holds its place until it ends: it still uses the machine).
    running: Arc<Mutex<HashSet<(String, u64)>>>,
}

/// Runs the worker of `repository` until the process ends.
pub fn run(
    backends: Arc<Backends>,
    repository: ServeRepository,
    state: PathBuf,
    activity: Arc<Activity>,
) {
    let queue = loop {
        match Queue::open(&state) {
            Ok(queue) => break queue,
            Err(error) => {
                eprintln!("sf-serve: worker {}: {error}", repository.name);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    let worker = Worker {
        backends,
        repository,
        state,
        activity,
        queue,
        running: Arc::default(),
    };
    loop {
        match worker.step() {
            Ok(true) => {}
            Ok(false) => std::thread::sleep(IDLE),
            Err(error) => {
                eprintln!("sf-serve: worker {}: {error}", worker.repository.name);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

impl Worker {
    /// Takes one step: lands the head when its collection ended, else seals again the first
    /// proposal that no longer stands where it was sealed, or seals the next one, and starts
    /// the collections there is room for. `Ok(false)` when there was nothing to do.
    fn step(&self) -> Result<bool, String> {
        let open = self.queue.open_of(&self.repository.name)?;
        let Some(head) = open.first() else {
            return Ok(false);
        };
        if head.state == State::Landing || head.trial.is_some() {
            self.land_head(head)?;
            return Ok(true);
        }
        // The commit the next proposal stands on: the target for the head, else the last one
        // ahead whose collection has not failed.
        let mut on: Option<String> = None;
        let window = &open[..open.len().min(self.repository.jobs.get())];
        for entry in window {
            if matches!(entry.state, State::Queued | State::Sealing) {
                self.seal(entry, on.as_deref())?;
                return Ok(true);
            }
            let stands_on = match &on {
                Some(commit) => commit.clone(),
                None => steps::target_of(&self.backends, &self.repository)
                    .map_err(|error| format!("{}: {}", error.code, error.message))?,
            };
            if entry.base.as_deref() != Some(stands_on.as_str()) {
                self.queue.reset(&entry.id, entry.generation)?;
                return Ok(true);
            }
            self.start_collection(entry);
            if entry.trial.as_ref().is_none_or(steps::passed) {
                on = entry.commit.clone();
            }
        }
        Ok(false)
    }

    /// Seals `entry` on `on` (the target when `None`), or ends it refused.
    fn seal(&self, entry: &Entry, on: Option<&str>) -> Result<(), String> {
        if entry.state == State::Queued {
            self.queue.set_state(&entry.id, State::Sealing)?;
        }
        match steps::seal_on(&self.backends, &self.repository, &self.state, entry, on) {
            Ok(sealed) => self.queue.sealed(
                &entry.id,
                entry.generation,
                &Sealing {
                    frozen_slice: &sealed.slice.to_string_lossy(),
                    candidate: &sealed.candidate,
                    commit: &sealed.commit,
                    base: &sealed.base,
                },
            ),
            Err(NotSealed::Refused(end)) => self.queue.finish(&entry.id, &end),
            // Still `sealing`: taken again after the pause a failed step takes.
            Err(NotSealed::Fault(fault)) => Err(format!("proposal {}: {fault}", entry.id)),
        }
    }

    /// Lands the head. Before its landing starts, the target must still be the commit it was
    /// sealed on (with delivery, after the upstream's tip is imported: a commit the team
    /// pushed meanwhile is taken in, and the head is sealed again on it); once started, a
    /// landing is only ever taken up again under the same occurrence.
    fn land_head(&self, head: &Entry) -> Result<(), String> {
        if head.state != State::Landing {
            if let Err(error) = steps::import_upstream(&self.backends, &self.repository) {
                return self.queue.finish(&head.id, &steps::refused(error));
            }
            let target = steps::target_of(&self.backends, &self.repository)
                .map_err(|error| format!("{}: {}", error.code, error.message))?;
            if head.base.as_deref() != Some(target.as_str()) {
                return self.queue.reset(&head.id, head.generation);
            }
            self.queue.set_state(&head.id, State::Landing)?;
        }
        self.activity.collecting.fetch_add(1, Ordering::SeqCst);
        let end = steps::land_sealed(&self.backends, &self.repository, head);
        self.activity.collecting.fetch_sub(1, Ordering::SeqCst);
        self.queue.finish(&head.id, &end)
    }

    /// Starts the collection of the sealed `entry` on a thread of its own, unless it ended,
    /// is running, or `jobs` collections are running already.
    fn start_collection(&self, entry: &Entry) {
        if entry.trial.is_some() {
            return;
        }
        let key = (entry.id.clone(), entry.generation);
        {
            let Ok(mut running) = self.running.lock() else {
                return;
            };
            if running.contains(&key) || running.len() >= self.repository.jobs.get() {
                return;
            }
            running.insert(key.clone());
        }
        let held = key.clone();
        let (backends, repository, state, activity, running, entry) = (
            Arc::clone(&self.backends),
            self.repository.clone(),
            self.state.clone(),
            Arc::clone(&self.activity),
            Arc::clone(&self.running),
            entry.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name(format!("collect {}", entry.id))
            .spawn(move || {
                activity.collecting.fetch_add(1, Ordering::SeqCst);
                let (attempt, trial) = steps::collect_sealed(&backends, &repository, &entry);
                activity.collecting.fetch_sub(1, Ordering::SeqCst);
                // A result that cannot be recorded is collected again: the place is freed.
                let recorded = Queue::open(&state).and_then(|queue| {
                    queue.collected(&entry.id, entry.generation, attempt, &trial)
                });
                if let Err(error) = recorded {
                    eprintln!("sf-serve: proposal {}: {error}", entry.id);
                }
                if let Ok(mut running) = running.lock() {
                    running.remove(&key);
                }
            });
        if let Err(error) = spawned {
            eprintln!("sf-serve: cannot start a collection: {error}");
            if let Ok(mut running) = self.running.lock() {
                running.remove(&held);
            }
        }
    }
}
