//! `sf seal`: seal a proposal as a Candidate for a frozen Slice. The Slice is the only source
//! of what the Candidate is sealed for (its scope, protected paths, base and records): the
//! Candidate's manifest names the Slice's digest.

use std::path::PathBuf;

use clap::Args;

use sf_app::seal::{SealRequest, seal};

use super::common::{CliError, Context, Output};
use super::render;

#[derive(Debug, Args)]
pub struct SealArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The frozen Slice directory the Candidate is sealed for (from `sf slice freeze`)
    #[arg(long, value_name = "SLICE")]
    slice: PathBuf,
    /// The proposal: {edits: [{path, prior, text | bytes | link | mode}], message?, author?}
    #[arg(long, value_name = "FILE")]
    proposal: PathBuf,
}

pub fn run(context: &Context, args: SealArgs) -> Result<Output, CliError> {
    let request = SealRequest {
        identity: args.identity,
        slice: args.slice,
        proposal: args.proposal,
    };
    seal(&context.backends, &request).map(|sealed| render::sealed(&sealed))
}
