//! What delivery needs of a remote: read some of its refs, and push once. The repository
//! module never names the Git surface itself; `crate::git_remote` implements this over the
//! git binary's own transports.

use std::collections::BTreeMap;

use crate::contracts::{EncodedObject, RefName};
use crate::git_object::ObjectId;

/// One ref update of a push, compared and swapped on the remote: `name` moves from
/// `expected` (absent: the ref must not exist) to `new`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeasedUpdate {
    /// The remote ref.
    pub name: RefName,
    /// What it must name for the update to happen; `None`: it must not exist.
    pub expected: Option<ObjectId>,
    /// What it names after.
    pub new: ObjectId,
}

/// One atomic push: every update happens or none does.
#[derive(Debug)]
pub struct Push<'a> {
    /// Every object reachable from the pushed commit, and the base's commit and tree, as the
    /// owned store holds them (each already re-hashed against its id).
    pub objects: &'a [EncodedObject],
    /// Commits whose parents the pushed objects do not include (the base): Git's `shallow`.
    pub boundary: &'a [ObjectId],
    /// An annotated tag's bytes pushed too (the marker), with the id they must hash to.
    pub tag: (&'a [u8], ObjectId),
    /// The updates, applied together.
    pub updates: &'a [LeasedUpdate],
}

/// How a push ended, as far as the pusher can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushOutcome {
    /// The remote reported every update done.
    Applied,
    /// The remote (or the lease, before anything was sent) refused for certain: nothing was
    /// updated.
    Refused {
        /// What refused and why, as reported.
        reason: String,
    },
    /// The push may or may not have updated the remote (a timeout, a broken connection, an
    /// answer that cannot be read).
    Unknown {
        /// Why it is not known.
        reason: String,
    },
    /// The push could not be started: nothing was sent.
    NotStarted {
        /// Why.
        reason: String,
    },
}

/// Why a remote could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the remote could not be read: {reason}")]
pub struct RemoteError {
    /// What failed (never with credentials).
    pub reason: String,
}

/// A Git remote, addressed by URL.
pub trait Remote: Send + Sync {
    /// The values of `names` on the remote at `url`; a name the remote does not have is
    /// absent from the answer. Bounded by the remote's own timeout.
    fn read_refs(
        &self,
        url: &str,
        names: &[&RefName],
    ) -> Result<BTreeMap<String, ObjectId>, RemoteError>;

    /// Runs one atomic push of `push` to `url`, bounded by the remote's own timeout. Never
    /// retried here.
    fn push(&self, url: &str, push: &Push<'_>) -> PushOutcome;
}
