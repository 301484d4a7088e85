//! `sf land`: the whole guarded path in one command (the use case [`sf_app::land`]):
//! preflight, re-export, collect, re-export, judge, and only on Verified prepare and invoke
//! behind a guard that judges the stored evidence again immediately before the move. A replay
//! of an occurrence that landed starts nothing and reports the earlier result.
//!
//! Exit status, for CI scripts: 0 integrated (now or before); 2 invalid input or usage
//! (nothing written); 3 Failed; 4 Inconclusive, or no Verdict could be issued; 5 withheld by
//! the gate (before anything started, or after the claim: the occurrence is then consumed);
//! 6 unknown (inspect; never retry the occurrence); 7 not dispatched (the target moved away
//! from the Candidate's base); 1 anything else (nothing decided). With `--deliver`, a
//! landing that integrated goes on to deliver the same commit to the base's upstream (the
//! same Verified Verdict, a delivery intent for the same action occurrence), and the exit
//! status is the delivery's when it is not confirmed: 5 withheld, 6 unknown, 7 not
//! dispatched, 8 refused.

use std::path::PathBuf;

use clap::Args;

use sf_app::land::{DEFAULT_OWNER, LandRequest, land};

use super::args::{CandidateInSlice, delivery_mode};
use super::common::Context;
use super::exit::{Outcome, landed_status, landing_error_status};
use super::progress::Progress;
use super::render;

#[derive(Debug, Args)]
pub struct LandArgs {
    #[command(flatten)]
    target: CandidateInSlice,
    /// A gate file ({"proceed": true} or {"proceed": false, "reason": …}), read before
    /// anything starts, before every run and immediately before the move, in place of the
    /// configured [gate] (default: open)
    #[arg(long, value_name = "FILE")]
    gate: Option<PathBuf>,
    /// The action id of the integration; default: land/<the Candidate digest>
    #[arg(long, value_name = "ID")]
    action: Option<String>,
    /// The action's occurrence; default 1. A new effect needs a new occurrence
    #[arg(long, value_name = "N", default_value_t = 1)]
    occurrence: u64,
    /// The owner id of the integration
    #[arg(long, value_name = "ID", default_value = DEFAULT_OWNER)]
    owner: String,
    /// The owner's generation
    #[arg(long, value_name = "N", default_value_t = 1)]
    generation: u64,
    /// When the collection must be over (RFC 3339 UTC); default: in one hour
    #[arg(long, value_name = "ISO")]
    deadline: Option<String>,
    /// How many checks run at a time (each still one sandboxed run and one record)
    #[arg(long, value_name = "N", default_value = "1")]
    jobs: std::num::NonZeroUsize,
    /// Land this attempt (fence epoch), collected earlier by `sf collect`, judged again,
    /// instead of collecting a new one; the Verified guard judges it once more before the move
    #[arg(long, value_name = "N")]
    attempt: Option<u64>,
    /// After integrating, deliver the commit to the base's upstream, at most once (see `sf
    /// deliver`)
    #[arg(long)]
    deliver: bool,
    /// With --deliver: push to a new side branch refs/heads/sf/<candidate> instead of the
    /// upstream branch
    #[arg(long, requires = "deliver")]
    side_branch: bool,
}

impl LandArgs {
    fn request(&self) -> LandRequest {
        LandRequest {
            target: self.target.target(),
            gate: self.gate.clone(),
            action: self.action.clone(),
            occurrence: self.occurrence,
            owner: self.owner.clone(),
            generation: self.generation,
            deadline: self.deadline.clone(),
            jobs: self.jobs,
            deliver: self.deliver.then_some(delivery_mode(self.side_branch)),
            attempt: self.attempt,
        }
    }
}

/// `sf land`.
pub fn run(context: &Context, args: LandArgs) -> Outcome {
    let mut progress = Progress::default();
    let request = args.request();
    let landed = land(&context.backends, &request, &mut |event| {
        progress.report(event)
    });
    drop(progress);
    match landed {
        Ok(landed) => Outcome {
            exit: landed_status(&landed),
            result: Ok(render::landed(&landed)),
        },
        Err(error) => Outcome {
            exit: landing_error_status(&error),
            result: Err(error),
        },
    }
}
