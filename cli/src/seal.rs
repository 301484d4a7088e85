//! `sf seal`: seal a proposal as a Candidate for a frozen Slice. The Slice is the only source
//! of what the Candidate is sealed for (its scope, protected paths, base and records): the
//! Candidate's manifest names the Slice's digest.

use std::path::PathBuf;

use clap::Args;

use sf_app::propose::ProposalSource;
use sf_app::seal::{ProposalInput, SealRequest, seal};

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
    #[arg(long, value_name = "FILE", required_unless_present_any = ["commit", "tree", "diff"], conflicts_with_all = ["commit", "tree", "diff"])]
    proposal: Option<PathBuf>,
    /// Seal the changes of this commit of --repo against its first parent (as `sf propose
    /// --commit` makes the proposal)
    #[arg(long, value_name = "REV", requires = "repo", conflicts_with_all = ["tree", "diff"])]
    commit: Option<String>,
    /// Seal the directory's differences from the Slice's base (as `sf propose --tree`)
    #[arg(long, value_name = "DIR", conflicts_with = "diff")]
    tree: Option<PathBuf>,
    /// Seal a Git diff of the Slice's base (as `sf propose --diff`; - for standard input)
    #[arg(long, value_name = "FILE")]
    diff: Option<PathBuf>,
    /// The Git repository of --commit
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// With --commit, --tree or --diff: keep only the changes at or under PATH (repeatable)
    #[arg(long, value_name = "PATH")]
    only: Vec<String>,
}

pub fn run(context: &Context, args: SealArgs) -> Result<Output, CliError> {
    let source = ProposalSource::of_flags(args.commit, args.tree, args.diff, args.repo);
    let proposal = match args.proposal {
        Some(file) => ProposalInput::File(file),
        None => ProposalInput::Made {
            source,
            only: args.only,
        },
    };
    let request = SealRequest {
        identity: args.identity,
        slice: args.slice,
        proposal,
    };
    seal(&context.backends, &request).map(|sealed| render::sealed(&sealed))
}
