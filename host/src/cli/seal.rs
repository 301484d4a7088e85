//! `sf seal`: seal a proposal as a Candidate.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context, Output, read_input, repository_error};
use crate::repository::{
    FrozenInputs, RepositoryError, SealedCandidate, candidate_ref, parse_proposal,
};

#[derive(Debug, Args)]
pub struct SealArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The frozen inputs: {base, slice: {id, revision}, scope, acceptance, recipe, environment}
    #[arg(long, value_name = "FILE")]
    pub(super) frozen: PathBuf,
    /// The proposal: {edits: [{path, prior, text}]}
    #[arg(long, value_name = "FILE")]
    pub(super) proposal: PathBuf,
}

pub fn run(context: &Context, args: SealArgs) -> Result<Output, CliError> {
    let frozen_file = args.frozen.display().to_string();
    let proposal_file = args.proposal.display().to_string();
    let frozen = FrozenInputs::from_json(&read_input(&args.frozen, "--frozen")?)
        .map_err(|error| repository_error(&format!("--frozen {frozen_file}"), &error))?;
    let proposal = parse_proposal(&read_input(&args.proposal, "--proposal")?)
        .map_err(|error| repository_error(&format!("--proposal {proposal_file}"), &error))?;
    let repository = context.open_repository(&args.identity)?;
    let sealed = repository.seal(&frozen, &proposal).map_err(|error| {
        let what = match &error {
            RepositoryError::Rejected { .. } => format!("--proposal {proposal_file}"),
            RepositoryError::InvalidInput { input, .. } if input.starts_with("frozen") => {
                format!("--frozen {frozen_file}")
            }
            _ => format!(
                "sealing {proposal_file} in repository {}",
                repository.identity().path
            ),
        };
        repository_error(&what, &error)
    })?;
    Ok(describe(&sealed))
}

/// The output of `seal`: the Candidate's identities and its files.
pub fn describe(sealed: &SealedCandidate) -> Output {
    let manifest = &sealed.manifest;
    let files: Vec<serde_json::Value> = manifest
        .files
        .iter()
        .map(|file| {
            serde_json::json!({
                "path": file.path,
                "sha256": file.sha256.to_string(),
                "bytes": file.bytes,
            })
        })
        .collect();
    let json = serde_json::json!({
        "digest": sealed.digest.to_string(),
        "ref": candidate_ref(&sealed.digest).as_str(),
        "commit": manifest.commit.to_hex(),
        "tree": manifest.tree.to_hex(),
        "baseCommit": manifest.base_commit.to_hex(),
        "proposalDigest": manifest.proposal_digest.to_string(),
        "snapshotDigest": sealed.snapshot_digest.to_string(),
        "files": files,
    });
    let text = format!(
        "sealed Candidate {}\n  commit   {}\n  tree     {}\n  base     {}\n  snapshot {}\n  files    {}\n",
        sealed.digest,
        manifest.commit,
        manifest.tree,
        manifest.base_commit,
        sealed.snapshot_digest,
        manifest.files.len()
    );
    Output { json, text }
}
