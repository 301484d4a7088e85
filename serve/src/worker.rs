//! The worker of one repository: it lands the proposals of its queue in the order they were
//! queued, and collects those behind the head speculatively (Zuul's rule, with one
//! alternative each).
//!
//! Each proposal stands on the commit its place in the queue gives it: the head on the target,
//! every other on the Candidate of the last one ahead of it whose collection has not failed.
//! It is sealed on that commit and collected at once, so its checks run on the tree it will
//! land as. While the one it stands on is not yet collected, it is also sealed and collected
//! on what that one stands on: if that one fails, the alternative is ready. A proposal whose
//! collection did not pass is skipped by those behind it (they stand on the one before it), and
//! ends as its own Verdict says once it is the head, on the target its evidence was
//! collected on. The head's collected attempt is landed: judged again, behind the gate, at
//! most once. Up to `jobs` sealings are sealed and collected at once, the queue's order first,
//! the alternatives after. After a restart the worker takes up whatever was open, where it was.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sf_app::Backends;
use sf_host::plugin::serve_config::ServeRepository;

use crate::queue::{Entry, Opener, QueueStore, Sealing, SealingRow};
use crate::state::State;
use crate::steps::{self, NotSealed};

/// The longest an idle worker waits before it looks at the queue again (a job that ends
/// wakes it at once).
const IDLE: Duration = Duration::from_millis(100);

/// What the workers share with the pages.
#[derive(Default)]
pub struct Activity {
    /// Collections and landings running now.
    pub collecting: AtomicUsize,
}

/// One sealing to make and collect, or only to collect: a proposal on a base.
struct Job {
    entry: Entry,
    base: String,
    /// The sealing, when it was made already (its collection did not end: a restart).
    sealed: Option<SealingRow>,
}

/// One repository's worker.
struct Worker {
    backends: Arc<Backends>,
    repository: ServeRepository,
    state: PathBuf,
    opener: Opener,
    activity: Arc<Activity>,
    queue: Box<dyn QueueStore>,
    /// The jobs running now, by proposal and base (a job nobody waits for any more holds its
    /// place until it ends: it still uses the machine).
    running: Arc<Mutex<HashSet<(String, String)>>>,
    /// Told when a job ends.
    ended: Sender<()>,
}

/// Runs the worker of `repository` until the process ends: the Slice copies in `state`, the
/// queue opened by `opener`.
pub fn run(
    backends: Arc<Backends>,
    repository: ServeRepository,
    state: PathBuf,
    opener: Opener,
    activity: Arc<Activity>,
) {
    let queue = loop {
        match opener.open() {
            Ok(queue) => break queue,
            Err(error) => {
                eprintln!("sf-serve: worker {}: {error}", repository.name);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    };
    let (ended, wake): (Sender<()>, Receiver<()>) = channel();
    let mut worker = Worker {
        backends,
        repository,
        state,
        opener,
        activity,
        queue,
        running: Arc::default(),
        ended,
    };
    loop {
        match worker.step() {
            Ok(true) => {}
            Ok(false) => {
                let _ = wake.recv_timeout(IDLE);
            }
            Err(error) => {
                eprintln!("sf-serve: worker {}: {error}", worker.repository.name);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

/// What one look at the queue found to do, besides what it did at once.
#[derive(Default)]
struct Wanted {
    /// Jobs on the queue's own path, in its order.
    main: Vec<Job>,
    /// Alternatives, in the queue's order.
    alternatives: Vec<Job>,
}

impl Worker {
    /// Takes one step: lands the head when its collection ended; else makes each proposal
    /// stand where its place says, ending a head refused there; and starts the jobs there is
    /// room for. `Ok(false)` when nothing changed.
    fn step(&mut self) -> Result<bool, String> {
        let open = self.queue.open_of(&self.repository.name)?;
        let Some(head) = open.first() else {
            return Ok(false);
        };
        if head.state == State::Landing || head.trial.is_some() {
            self.land_head(head)?;
            return Ok(true);
        }
        let sealings = self.queue.sealings_of(&self.repository.name)?;
        match self.walk(&open, &sealings)? {
            Some(wanted) => self.start(wanted),
            None => Ok(true),
        }
    }

    /// Walks the window in the queue's order: makes the first proposal that does not stand
    /// where its place says stand there (or ends a head refused there), and answers `None`
    /// when it did; else answers the jobs the window wants.
    fn walk(&mut self, open: &[Entry], sealings: &[SealingRow]) -> Result<Option<Wanted>, String> {
        let window = &open[..open.len().min(self.repository.jobs.get())];
        let mut wanted = Wanted::default();
        // The commit the next proposal stands on (`None`: the target), and what it would stand
        // on if the one it stands on, not yet collected, fails.
        let (mut on, mut otherwise): (Option<String>, Option<String>) = (None, None);
        for (at, entry) in window.iter().enumerate() {
            let base = match &on {
                Some(commit) => commit.clone(),
                None => self.target()?,
            };
            if let Some(alternative) = otherwise.take() {
                let sealed = find(sealings, &entry.id, &alternative).cloned();
                wanted.alternatives.push(job(entry, alternative, sealed));
            }
            let Some(sealing) = find(sealings, &entry.id, &base) else {
                // The head is sealed on the upstream's tip: a commit the team pushed is
                // taken in first (the next look stands the head on it); only when its job
                // can start, so that a full house does not fetch at every look.
                if at == 0
                    && self.has_room()
                    && !self.runs(&entry.id, &base)
                    && self.imported_anew(&base)?
                {
                    return Ok(None);
                }
                wanted.main.push(job(entry, base, None));
                break;
            };
            if let Some(refusal) = &sealing.refusal {
                if at == 0 {
                    self.queue
                        .finish(&entry.id, &steps::refused(refusal.clone()))?;
                    return Ok(None);
                }
                // Refused here: those behind stand where it would have.
                continue;
            }
            let standing = entry.state == State::Collecting
                && entry.candidate.is_some()
                && entry.generation == sealing.number
                && entry.trial == sealing.trial;
            if !standing {
                self.queue.stand_on(&entry.id, sealing)?;
                return Ok(None);
            }
            match &sealing.trial {
                None => {
                    wanted
                        .main
                        .push(job(entry, base.clone(), Some(sealing.clone())));
                    otherwise = Some(base);
                    on = sealing.commit.clone();
                }
                Some(trial) if steps::passed(trial) => on = sealing.commit.clone(),
                // Failed here: those behind stand where it would have.
                Some(_) => {}
            }
        }
        Ok(Some(wanted))
    }

    /// Starts the jobs there is room for, the queue's own path first; `Ok(true)` when one
    /// started or the head was ended.
    fn start(&mut self, wanted: Wanted) -> Result<bool, String> {
        let mut started = false;
        for job in wanted.main.into_iter().chain(wanted.alternatives) {
            let ended = job
                .sealed
                .as_ref()
                .is_some_and(|sealing| sealing.trial.is_some() || sealing.refusal.is_some());
            if !ended {
                started |= self.spawn(job)?;
            }
        }
        Ok(started)
    }

    /// Whether fewer than `jobs` jobs are running.
    fn has_room(&self) -> bool {
        self.running
            .lock()
            .is_ok_and(|running| running.len() < self.repository.jobs.get())
    }

    /// Whether a job of proposal `id` on `base` is running.
    fn runs(&self, id: &str, base: &str) -> bool {
        self.running
            .lock()
            .is_ok_and(|running| running.contains(&(id.to_owned(), base.to_owned())))
    }

    /// With delivery, imports the upstream's tip; whether the target moved from `target`.
    /// An import that fails leaves the target as it was: the head is sealed on it, and its
    /// landing imports again before it starts.
    fn imported_anew(&self, target: &str) -> Result<bool, String> {
        if let Err(error) = steps::import_upstream(&self.backends, &self.repository) {
            eprintln!(
                "sf-serve: worker {}: the upstream: {}",
                self.repository.name, error.message
            );
            return Ok(false);
        }
        Ok(self.target()? != target)
    }

    /// The commit the target names now.
    fn target(&self) -> Result<String, String> {
        steps::target_of(&self.backends, &self.repository)
            .map_err(|error| format!("{}: {}", error.code, error.message))
    }

    /// Lands the head. Before its landing starts, the target must still be the commit it
    /// stands on (with delivery, after the upstream's tip is imported: a commit the team
    /// pushed meanwhile is taken in, and the head stands on it next); once started, a landing
    /// is only ever taken up again under the same occurrence.
    fn land_head(&mut self, head: &Entry) -> Result<(), String> {
        if head.state != State::Landing {
            if let Err(error) = steps::import_upstream(&self.backends, &self.repository) {
                return self
                    .queue
                    .finish(&head.id, &steps::refused(steps::refusal(&error)));
            }
            if head.base.as_deref() != Some(self.target()?.as_str()) {
                return self.queue.leave(&head.id);
            }
            self.queue.set_state(&head.id, State::Landing)?;
        }
        self.activity.collecting.fetch_add(1, Ordering::SeqCst);
        let end = steps::land_sealed(&self.backends, &self.repository, head);
        self.activity.collecting.fetch_sub(1, Ordering::SeqCst);
        self.queue.finish(&head.id, &end)
    }

    /// Starts `job` on a thread of its own unless it runs already or `jobs` jobs run;
    /// `Ok(true)` when it started.
    fn spawn(&mut self, job: Job) -> Result<bool, String> {
        let key = (job.entry.id.clone(), job.base.clone());
        {
            let Ok(mut running) = self.running.lock() else {
                return Ok(false);
            };
            if running.contains(&key) || running.len() >= self.repository.jobs.get() {
                return Ok(false);
            }
            running.insert(key.clone());
        }
        if job.sealed.is_none() && job.entry.state == State::Queued {
            self.queue.set_state(&job.entry.id, State::Sealing)?;
        }
        let context = JobContext {
            backends: Arc::clone(&self.backends),
            repository: self.repository.clone(),
            state: self.state.clone(),
            opener: self.opener.clone(),
            activity: Arc::clone(&self.activity),
        };
        let (running, ended, held) = (Arc::clone(&self.running), self.ended.clone(), key.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("seal {}", job.entry.id))
            .spawn(move || {
                if let Err(error) = context.run(job) {
                    eprintln!("sf-serve: {error}");
                }
                if let Ok(mut running) = running.lock() {
                    running.remove(&key);
                }
                let _ = ended.send(());
            });
        if let Err(error) = spawned {
            if let Ok(mut running) = self.running.lock() {
                running.remove(&held);
            }
            return Err(format!("cannot start a job: {error}"));
        }
        Ok(true)
    }
}

/// A job for `entry` on `base`.
fn job(entry: &Entry, base: String, sealed: Option<SealingRow>) -> Job {
    Job {
        entry: entry.clone(),
        base,
        sealed,
    }
}

/// The sealing of proposal `id` on `base`, if there is one.
fn find<'a>(sealings: &'a [SealingRow], id: &str, base: &str) -> Option<&'a SealingRow> {
    sealings
        .iter()
        .find(|sealing| sealing.proposal == id && sealing.base == base)
}

/// What a job's thread works with.
struct JobContext {
    backends: Arc<Backends>,
    repository: ServeRepository,
    state: PathBuf,
    opener: Opener,
    activity: Arc<Activity>,
}

impl JobContext {
    /// Seals the job's proposal on its base (unless it was sealed), records the sealing, and
    /// collects it. A fault of the server's own records nothing: the job is started again.
    fn run(&self, job: Job) -> Result<(), String> {
        let mut queue = self.opener.open()?;
        let sealing = match job.sealed {
            Some(sealing) => sealing,
            None => {
                let (entry, base) = (&job.entry, job.base.as_str());
                let sealed =
                    steps::seal_on(&self.backends, &self.repository, &self.state, entry, base);
                match sealed {
                    Ok(sealed) => queue.add_sealing(
                        &entry.id,
                        base,
                        Ok(&Sealing {
                            frozen_slice: &sealed.slice.to_string_lossy(),
                            candidate: &sealed.candidate,
                            commit: &sealed.commit,
                        }),
                    )?,
                    Err(NotSealed::Refused(refusal)) => {
                        queue.add_sealing(&entry.id, base, Err(&refusal))?;
                        return Ok(());
                    }
                    Err(NotSealed::Fault(fault)) => {
                        return Err(format!("proposal {}: {fault}", entry.id));
                    }
                }
            }
        };
        let Some(target) = steps::sealed_target(
            &self.repository,
            sealing.candidate.as_ref(),
            sealing.frozen_slice.as_ref(),
        ) else {
            return Ok(());
        };
        self.activity.collecting.fetch_add(1, Ordering::SeqCst);
        let (attempt, trial) = steps::collect_sealed(&self.backends, &target);
        self.activity.collecting.fetch_sub(1, Ordering::SeqCst);
        queue.collected(&sealing.proposal, sealing.number, attempt, &trial)
    }
}
