//! The clap arguments several commands take alike, each with its conversion into what a use
//! case is asked.

use std::path::PathBuf;

use clap::Args;

use sf_app::Target;
use sf_app::effect::{InspectRequest, InvokeRequest, PrepareRequest};
use sf_host::repository::{Action, DeliveryMode, Owner};

/// Which Candidate, in which repository, under which frozen Slice.
#[derive(Debug, Args)]
pub struct CandidateInSlice {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub identity: PathBuf,
    /// The Candidate digest (from `sf seal`)
    #[arg(long, value_name = "DIGEST")]
    pub candidate: String,
    /// The frozen Slice directory
    #[arg(long, value_name = "SLICE")]
    pub slice: PathBuf,
}

impl CandidateInSlice {
    /// The use cases' target.
    pub fn target(&self) -> Target {
        Target {
            identity: self.identity.clone(),
            candidate: self.candidate.clone(),
            slice: self.slice.clone(),
        }
    }
}

/// Which occurrence of which action an effect's intent is for, and who owns it: what both
/// `sf integrate prepare` and `sf deliver prepare` take.
#[derive(Debug, Args)]
pub struct OccurrenceArgs {
    /// The action id
    #[arg(long, value_name = "ID")]
    pub action: String,
    /// The action's occurrence (a positive integer; a new effect needs a new occurrence)
    #[arg(long, value_name = "N")]
    pub occurrence: u64,
    /// The owner id
    #[arg(long, value_name = "ID")]
    pub owner: String,
    /// The owner's generation (a positive integer)
    #[arg(long, value_name = "N")]
    pub generation: u64,
}

impl OccurrenceArgs {
    /// The action and the owner.
    pub fn parts(&self) -> (Action, Owner) {
        (
            Action {
                id: self.action.clone(),
                occurrence: self.occurrence,
            },
            Owner {
                id: self.owner.clone(),
                generation: self.generation,
            },
        )
    }
}

/// The request of an effect's `prepare`: the Candidate in its Slice, the attempt whose
/// Verdict admits the effect, the occurrence, and the new file the record also goes to.
pub fn prepare_request(
    target: &CandidateInSlice,
    attempt: Option<u64>,
    occurrence: &OccurrenceArgs,
    prepared_out: Option<PathBuf>,
) -> PrepareRequest {
    let (action, owner) = occurrence.parts();
    PrepareRequest {
        target: target.target(),
        attempt,
        action,
        owner,
        prepared_out,
    }
}

/// Where a delivery pushes: a new side branch (`--side-branch`) or the upstream branch.
pub fn delivery_mode(side_branch: bool) -> DeliveryMode {
    match side_branch {
        true => DeliveryMode::SideBranch,
        false => DeliveryMode::Branch,
    }
}

// What `invoke` of an effect takes (no doc comment: the subcommand's own says what it does).
#[derive(Debug, Args)]
pub struct InvokeArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub identity: PathBuf,
    /// The prepared record (from `prepare --prepared-out`)
    #[arg(long, value_name = "FILE")]
    pub prepared: PathBuf,
    /// The frozen Slice whose evidence the intent's Verdict is judged from, again,
    /// immediately before the effect starts
    #[arg(long, value_name = "SLICE")]
    pub slice: PathBuf,
    /// A gate file read immediately before the effect starts, in place of the configured
    /// [gate]: exactly {"proceed": true} lets it start
    #[arg(long, value_name = "FILE")]
    pub gate: Option<PathBuf>,
}

impl InvokeArgs {
    /// The use cases' request.
    pub fn request(&self) -> InvokeRequest {
        InvokeRequest {
            identity: self.identity.clone(),
            prepared: self.prepared.clone(),
            slice: self.slice.clone(),
            gate: self.gate.clone(),
        }
    }
}

// What `inspect` of an effect takes.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    pub identity: PathBuf,
    /// The prepared record
    #[arg(long, value_name = "FILE")]
    pub prepared: PathBuf,
}

impl InspectArgs {
    /// The use cases' request.
    pub fn request(&self) -> InspectRequest {
        InspectRequest {
            identity: self.identity.clone(),
            prepared: self.prepared.clone(),
        }
    }
}
