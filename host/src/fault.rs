//! Fault points: named moments inside the repository's operations where a test can stop,
//! delay or kill the process to prove what happens when work is interrupted there. In
//! production the hook is [`NoFaults`], which does nothing.

use std::fmt;

/// A named moment at which [`FaultPoints::reached`] is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultPoint {
    /// `create_repository` wrote the initial objects; no ref or marker exists yet.
    InitialObjectsWritten,
    /// `seal` wrote the Candidate's objects; its ref is not yet created.
    ObjectsWritten,
    /// `seal` created the Candidate ref.
    Published,
    /// Integration: the dispatch claim was acknowledged.
    IntegrationClaimed,
    /// Integration: the target update was submitted to the store.
    IntegrationSubmitted,
    /// Integration: the store confirmed the target update and the receipt write was attempted.
    IntegrationAcknowledged,
    /// Integration: the guard withheld the update after the claim.
    IntegrationWithheld,
    /// Delivery: the dispatch claim was acknowledged.
    DeliveryClaimed,
    /// Delivery: the push is about to start.
    DeliverySubmitted,
    /// Delivery: the push ended, the remote was read back and the receipt write (if any) was
    /// attempted.
    DeliveryAcknowledged,
    /// Landing: the collection ended and its hold was released; nothing is judged yet.
    LandCollected,
    /// Landing: the Verdict was reached; nothing is prepared yet.
    LandJudged,
}

impl FaultPoint {
    /// The point's name (stable: fault tests select points by it).
    pub fn name(self) -> &'static str {
        match self {
            Self::InitialObjectsWritten => "initial-objects-written",
            Self::ObjectsWritten => "objects-written",
            Self::Published => "published",
            Self::IntegrationClaimed => "integration-claimed",
            Self::IntegrationSubmitted => "integration-submitted",
            Self::IntegrationAcknowledged => "integration-acknowledged",
            Self::IntegrationWithheld => "integration-withheld",
            Self::DeliveryClaimed => "delivery-claimed",
            Self::DeliverySubmitted => "delivery-submitted",
            Self::DeliveryAcknowledged => "delivery-acknowledged",
            Self::LandCollected => "land-collected",
            Self::LandJudged => "land-judged",
        }
    }

    /// Every point, for tests that iterate over them.
    pub const ALL: [FaultPoint; 12] = [
        Self::InitialObjectsWritten,
        Self::ObjectsWritten,
        Self::Published,
        Self::IntegrationClaimed,
        Self::IntegrationSubmitted,
        Self::IntegrationAcknowledged,
        Self::IntegrationWithheld,
        Self::DeliveryClaimed,
        Self::DeliverySubmitted,
        Self::DeliveryAcknowledged,
        Self::LandCollected,
        Self::LandJudged,
    ];

    /// The point named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|point| point.name() == name)
    }
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A hook called at each [`FaultPoint`].
pub trait FaultPoints: Send + Sync {
    /// Called when the operation reaches `point`; a test hook may block, panic or exit here.
    fn reached(&self, point: FaultPoint);
}

/// The production hook: does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFaults;

impl FaultPoints for NoFaults {
    fn reached(&self, _point: FaultPoint) {}
}

impl<F: Fn(FaultPoint) + Send + Sync> FaultPoints for F {
    fn reached(&self, point: FaultPoint) {
        self(point)
    }
}
