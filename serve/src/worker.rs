//! The worker of one repository: it takes that repository's oldest open proposal, carries it
//! from the state it is in to a final one, and goes on with the next, one after another (no
//! lanes or speculation yet). After a restart it starts with whatever was open, where it was.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sf_app::Backends;
use sf_host::plugin::serve_config::ServeRepository;

use crate::queue::Queue;
use crate::state::State;
use crate::steps::{NotSealed, land_sealed, seal_on_target};

/// How long an idle worker sleeps between looks at the queue.
const IDLE: Duration = Duration::from_millis(200);

/// What the workers share with the pages.
#[derive(Default)]
pub struct Activity {
    /// Collections running now.
    pub collecting: AtomicUsize,
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
    loop {
        match step(&backends, &repository, &state, &queue, &activity) {
            Ok(true) => {}
            Ok(false) => std::thread::sleep(IDLE),
            Err(error) => {
                eprintln!("sf-serve: worker {}: {error}", repository.name);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
}

/// Takes one step of the oldest open proposal; `Ok(false)` when there is none.
fn step(
    backends: &Backends,
    repository: &ServeRepository,
    state: &std::path::Path,
    queue: &Queue,
    activity: &Activity,
) -> Result<bool, String> {
    let Some(entry) = queue.next_open(&repository.name)? else {
        return Ok(false);
    };
    match entry.state {
        State::Queued => queue.set_state(&entry.id, State::Sealing)?,
        State::Sealing => match seal_on_target(backends, repository, state, &entry) {
            Ok(sealed) => queue.sealed(
                &entry.id,
                &sealed.slice.to_string_lossy(),
                &sealed.candidate,
                &sealed.commit,
            )?,
            Err(NotSealed::Refused(end)) => queue.finish(&entry.id, &end)?,
            // Still `sealing`: taken again after the pause a failed step takes.
            Err(NotSealed::Fault(fault)) => return Err(format!("proposal {}: {fault}", entry.id)),
        },
        State::Collecting | State::Landing => {
            activity.collecting.fetch_add(1, Ordering::SeqCst);
            let mut moved = Ok(());
            let end = land_sealed(backends, repository, &entry, &mut || {
                moved = queue.set_state(&entry.id, State::Landing);
            });
            activity.collecting.fetch_sub(1, Ordering::SeqCst);
            moved?;
            queue.finish(&entry.id, &end)?;
        }
        _ => {}
    }
    Ok(true)
}
