//! A lease's claim to run its Action, once: the rule that makes "a check runs once" sf's,
//! whatever the cluster retries.
//!
//! Before the program starts, the worker
//!
//! 1. looks for the Action's start marker ([`sf_reapi::start_marker`]) in the CAS, and refuses
//!    the lease if it is there: a worker started this run before (the cluster retries a run
//!    whose worker or lease it lost), so running it again would count it twice;
//! 2. writes the marker and waits for the CAS to confirm it;
//! 3. asks the bot for a session update sent after that confirmation ([`Holder::held`]), and
//!    starts only if the cluster's answer still gives it the lease.
//!
//! Step 3 closes the race between two workers: the cluster moves a lease to another worker
//! only after it has dropped this worker's session, so a cluster that still gave this worker
//! the lease after the marker was stored gives it to no other worker before then, and any
//! other worker it gives it to later finds the marker. A worker killed before step 2 never
//! started the program: the cluster's retry is the first execution. A marker stored whose
//! confirmation was lost, or a lease lost after step 2, leaves the run refused everywhere:
//! lost, never run twice.

use sf_reapi::proto::execution::Digest;
use sf_reapi::start_marker;
use tokio::sync::{mpsc, oneshot};

use crate::lease::Worker;

/// The lease task's way to ask the bot whether the cluster still gives it the lease.
pub struct Holder {
    asks: mpsc::Sender<oneshot::Sender<bool>>,
}

/// The bot's end of a [`Holder`]: the questions of one lease's task.
pub type Questions = mpsc::Receiver<oneshot::Sender<bool>>;

/// A holder and the bot's end of it, for one lease.
pub fn holder() -> (Holder, Questions) {
    let (asks, questions) = mpsc::channel(1);
    (Holder { asks }, questions)
}

impl Holder {
    /// Whether the answer to a session update sent after this call still holds the lease:
    /// `false` too when the bot no longer follows the lease.
    pub async fn held(&self) -> bool {
        let (answer, answered) = oneshot::channel();
        if self.asks.send(answer).await.is_err() {
            return false;
        }
        answered.await.unwrap_or(false)
    }
}

/// Why a lease was not claimed: nothing ran.
pub enum Unclaimed {
    /// A worker started the Action before: the run is not executed again.
    Started(String),
    /// The marker could not be looked for or stored, or the lease was lost: the cluster may
    /// give the lease to another worker, which finds the marker if it was stored.
    Unsure(String),
}

/// Claims the Action `action` for this worker: steps 1 to 3 of the module's rule.
pub async fn claim(worker: &Worker, action: &Digest, holder: &Holder) -> Result<(), Unclaimed> {
    let marker = start_marker::digest(action);
    let shown = sf_reapi::digest::text(&marker);
    let missing = worker
        .cas
        .find_missing(std::slice::from_ref(&marker))
        .await
        .map_err(|error| {
            Unclaimed::Unsure(format!(
                "the start marker {shown} could not be looked for ({error}); nothing ran"
            ))
        })?;
    if missing.is_empty() {
        return Err(Unclaimed::Started(format!(
            "its start marker {shown} is in the CAS: a worker started this run before, and a \
             run is executed at most once"
        )));
    }
    worker
        .cas
        .upload_one(&start_marker::bytes(action))
        .await
        .map_err(|error| {
            Unclaimed::Unsure(format!(
                "the start marker {shown} could not be stored ({error}); nothing ran"
            ))
        })?;
    if !holder.held().await {
        return Err(Unclaimed::Unsure(format!(
            "the cluster no longer gives this worker the lease after its start marker {shown} \
             was stored; nothing ran"
        )));
    }
    Ok(())
}
