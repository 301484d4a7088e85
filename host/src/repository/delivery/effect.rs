//! Delivery as an at-most-once effect: one atomic push of the delivered ref and a create-only
//! marker to the team's remote. The marker is created in the same push, so only reading the
//! remote back and finding it naming this intent's tag confirms a delivery, whatever the push
//! answered; a push refused for certain is a receipt too.

use crate::contracts::RefName;
use crate::fault::FaultPoint;
use crate::git_object::ObjectId;

use super::super::Repository;
use super::super::at_most_once::{Acknowledges, Applied, Before, Effect, Faults, Postcondition};
use super::super::error::RepositoryError;
use super::attestation::{StoredAttestation, attestation_ref};
use super::observation::{DeliveryInvocation, RemoteReading, RemoteView};
use super::push::Outgoing;
use super::records::{
    DeliveryPayload, PreparedDelivery, ReceiptOutcome, marker_tag, marker_tag_id, record_reason,
};
use super::remote::{PushOutcome, Remote};

/// The effect of pushing `prepared` to `remote`.
pub(super) struct Delivery<'a> {
    /// The intent the push is for.
    pub prepared: &'a PreparedDelivery,
    /// The remote the payload's URL is reached through.
    pub remote: &'a dyn Remote,
}

impl Effect for Delivery<'_> {
    type Payload = DeliveryPayload;
    type Reading = RemoteReading;
    type Ready = Outgoing;

    const FAULTS: Faults = Faults {
        // A withheld push has no point of its own.
        withheld: None,
        claimed: FaultPoint::DeliveryClaimed,
        submitted: FaultPoint::DeliverySubmitted,
        acknowledged: FaultPoint::DeliveryAcknowledged,
        // Every push is acknowledged, once the remote was read back.
        acknowledges: Acknowledges::Every,
    };

    /// The delivered ref and the marker on the remote.
    fn read(&self, _: &Repository) -> RemoteReading {
        let payload = &self.prepared.payload;
        let (Ok(target), Ok(marker)) = (
            RefName::parse(&payload.remote_ref),
            RefName::parse(&payload.marker),
        ) else {
            return RemoteReading::Unreadable("the intent's refs are not ref names".into());
        };
        match self.remote.read_refs(&payload.remote, &[&target, &marker]) {
            Ok(values) => RemoteReading::Read {
                target: values.get(target.as_str()).copied(),
                marker: values.get(marker.as_str()).copied(),
            },
            Err(error) => RemoteReading::Unreadable(error.reason),
        }
    }

    /// The remote must be readable, name the expected value at the delivered ref, and have no
    /// marker for this delivery yet; then everything the push sends is read (and re-hashed)
    /// from the store.
    fn before(&self, repo: &Repository) -> Result<Before<Self>, RepositoryError> {
        let reading = self.read(repo);
        let payload = &self.prepared.payload;
        let refusal = match &reading {
            RemoteReading::Unreadable(why) => Some(format!(
                "the remote could not be read: {why}; no claim was made"
            )),
            RemoteReading::Read {
                marker: Some(marker),
                ..
            } => Some(format!(
                "the remote already holds {} (naming {marker}): this delivery's marker exists, so \
                 nothing is pushed again; no claim was made",
                payload.marker
            )),
            RemoteReading::Read { target, .. } if *target != payload.expected => Some(format!(
                "stale base: {} names {}, not the intent's expected {}; no claim was made",
                payload.remote_ref,
                describe(*target),
                describe(payload.expected)
            )),
            RemoteReading::Read { .. } => None,
        };
        if let Some(problem) = refusal {
            return Ok(Before::Refused(reading, problem));
        }
        match self.attestation(repo)? {
            Ok(attestation) => Ok(Before::Ready(
                reading,
                Outgoing::of(repo, payload, attestation)?,
            )),
            Err(problem) => Ok(Before::Refused(reading, problem)),
        }
    }

    /// The one push; only the remote read back, showing this intent's marker, confirms it.
    fn apply(
        &self,
        repo: &Repository,
        outgoing: Outgoing,
    ) -> Result<Applied<Self>, RepositoryError> {
        let payload = &self.prepared.payload;
        let outcome = self.remote.push(&payload.remote, &outgoing.push(payload));
        let after = self.read(repo);
        Ok(classify(self.marked(&after), outcome, after))
    }

    /// A receipt decides; without one, a claim is confirmed only by the remote's marker
    /// naming this intent's tag, and is unknown otherwise.
    fn settle(
        &self,
        receipt: Option<&ReceiptOutcome>,
        claimed: bool,
        reading: &RemoteReading,
    ) -> (DeliveryInvocation, Option<String>) {
        match (receipt, claimed) {
            (Some(ReceiptOutcome::Delivered), _) => (DeliveryInvocation::Confirmed, None),
            (Some(ReceiptOutcome::Refused(reason)), _) => (
                DeliveryInvocation::Refused,
                Some(format!("the remote refused the push: {reason}")),
            ),
            (None, true) if self.marked(reading) => (
                DeliveryInvocation::Confirmed,
                Some(
                    "no local receipt: the remote's marker names this intent's tag, so the \
                     push landed"
                        .to_owned(),
                ),
            ),
            (None, true) => (
                DeliveryInvocation::Unknown,
                Some(match reading {
                    RemoteReading::Unreadable(why) => {
                        format!("a claim without a receipt, and the remote is unreadable: {why}")
                    }
                    RemoteReading::Read { .. } => "a claim without a receipt, and the remote's \
                                                   marker is absent: the push may still land \
                                                   or may never have started"
                        .to_owned(),
                }),
            ),
            (None, false) => (DeliveryInvocation::NotDispatched, None),
        }
    }

    fn shown(&self, reading: RemoteReading) -> (Postcondition, RemoteView) {
        let payload = &self.prepared.payload;
        let named = match &reading {
            RemoteReading::Read { target, .. } => Some(*target),
            RemoteReading::Unreadable(_) => None,
        };
        let view = RemoteView {
            remote: payload.remote.clone(),
            remote_ref: payload.remote_ref.clone(),
            commit: payload.commit,
            tag: marker_tag_id(&marker_tag(payload)),
            reading,
        };
        (Postcondition::of(named, payload.commit), view)
    }

    fn receipt(&self, id: ObjectId, _: ReceiptOutcome) -> ObjectId {
        id
    }

    fn prepared(&self) -> &PreparedDelivery {
        self.prepared
    }
}

impl Delivery<'_> {
    /// M's attestation to create on the remote with the push: the one the owned repository
    /// keeps, unless the remote holds that very one already (`None`: nothing to create). A
    /// remote holding another attestation for M, or one that cannot be read, is a refusal
    /// (`Err`, before any claim): a commit never gets a second, different attestation.
    fn attestation(
        &self,
        repo: &Repository,
    ) -> Result<Result<Option<StoredAttestation>, String>, RepositoryError> {
        let payload = &self.prepared.payload;
        let Some(kept) = repo.attestation(&payload.commit)? else {
            return Ok(Ok(None));
        };
        let name = attestation_ref(&payload.commit);
        let remote = match self.remote.read_refs(&payload.remote, &[&name]) {
            Ok(values) => values.get(name.as_str()).copied(),
            Err(error) => {
                return Ok(Err(format!(
                    "the remote's {name} could not be read: {}; no claim was made",
                    error.reason
                )));
            }
        };
        Ok(match remote {
            None => Ok(Some(kept)),
            Some(id) if id == kept.id => Ok(None),
            Some(id) => Err(format!(
                "the remote already holds another attestation for {} ({name} names {id}, this \
                 repository keeps {}): a commit's attestation is never replaced; no claim was \
                 made",
                payload.commit, kept.id
            )),
        })
    }

    /// Whether `reading` shows the remote's marker naming this intent's tag: the marker is
    /// created in the same atomic push as the ref, so it does only if that push landed.
    fn marked(&self, reading: &RemoteReading) -> bool {
        let tag = marker_tag_id(&marker_tag(&self.prepared.payload));
        matches!(reading, RemoteReading::Read { marker: Some(m), .. } if *m == tag)
    }
}

/// What a push that answered `outcome`, after which the remote read back `after`, is known
/// to have done.
fn classify<'a>(marked: bool, outcome: PushOutcome, after: RemoteReading) -> Applied<Delivery<'a>> {
    let (invocation, outcome, problem) = if marked {
        let problem = match outcome {
            PushOutcome::Applied => None,
            other => Some(format!(
                "the push's own answer was not a success ({other:?}), but reading the \
                 remote back shows this intent's marker: it landed"
            )),
        };
        (
            DeliveryInvocation::Confirmed,
            Some(ReceiptOutcome::Delivered),
            problem,
        )
    } else {
        match outcome {
            PushOutcome::Applied => (
                DeliveryInvocation::Unknown,
                None,
                Some(format!(
                    "the remote reported the push done, but reading it back did not show \
                     the marker: {}",
                    describe_reading(&after)
                )),
            ),
            PushOutcome::Refused { reason } => (
                DeliveryInvocation::Refused,
                Some(ReceiptOutcome::Refused(record_reason(&reason))),
                Some(format!("the remote refused the push: {reason}")),
            ),
            PushOutcome::NotStarted { reason } => {
                let reason = format!("the push could not be started: {reason}");
                (
                    DeliveryInvocation::Refused,
                    Some(ReceiptOutcome::Refused(record_reason(&reason))),
                    Some(reason),
                )
            }
            PushOutcome::Unknown { reason } => (
                DeliveryInvocation::Unknown,
                None,
                Some(format!(
                    "the push's outcome is not known: {reason}; the remote read back: {}; \
                     unknown is not failed",
                    describe_reading(&after)
                )),
            ),
        }
    };
    Applied {
        reading: after,
        invocation,
        outcome,
        problem,
    }
}

/// A ref's value as read, in words.
fn describe(value: Option<ObjectId>) -> String {
    value.map_or_else(|| "nothing (absent)".to_owned(), |id| id.to_string())
}

/// What the remote showed, in words.
fn describe_reading(reading: &RemoteReading) -> String {
    match reading {
        RemoteReading::Read { target, marker } => format!(
            "the ref names {}, the marker {}",
            describe(*target),
            describe(*marker)
        ),
        RemoteReading::Unreadable(why) => format!("unreadable ({why})"),
    }
}
