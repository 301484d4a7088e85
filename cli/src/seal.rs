//! `sf seal`: seal a proposal as a Candidate for a frozen Slice. The Slice is the only source
//! of what the Candidate is sealed for (its scope, protected paths, base and records): the
//! Candidate's manifest names the Slice's digest.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context, Output, read_input_within, repository_error};
use super::slice_dir::{SliceDir, coded};
use sf_host::canonical::Digest;
use sf_host::repository::{
    MAX_PROPOSAL_DOCUMENT_BYTES, RepositoryError, SealedCandidate, candidate_ref, parse_proposal,
};

#[derive(Debug, Args)]
pub struct SealArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    pub(super) identity: PathBuf,
    /// The frozen Slice directory the Candidate is sealed for (from `sf slice freeze`)
    #[arg(long, value_name = "SLICE")]
    pub(super) slice: PathBuf,
    /// The proposal: {edits: [{path, prior, text | bytes | link | mode}], message?, author?}
    #[arg(long, value_name = "FILE")]
    pub(super) proposal: PathBuf,
}

pub fn run(context: &Context, args: SealArgs) -> Result<Output, CliError> {
    let proposal_file = args.proposal.display().to_string();
    let slice = SliceDir::open(&args.slice)?;
    let bytes = read_input_within(
        &args.proposal,
        "--proposal",
        MAX_PROPOSAL_DOCUMENT_BYTES as u64,
    )?;
    let proposal = parse_proposal(&bytes)
        .map_err(|error| repository_error(&format!("--proposal {proposal_file}"), &error))?;
    let repository = context.open_repository(&args.identity)?;
    if slice.frozen.record.repository != *repository.identity() {
        return Err(coded(
            "invalid-input",
            format!("--slice {}", slice.dir.display()),
            format!(
                "was frozen for repository {} ({}), not {}; freeze a Slice for this repository",
                slice.frozen.record.repository.path,
                slice.frozen.record.repository.product_id,
                repository.identity().path
            ),
        ));
    }
    let frozen = slice.frozen.record.frozen_inputs(&slice.digest);
    let sealed = repository.seal(&frozen, &proposal).map_err(|error| {
        let what = match &error {
            RepositoryError::Rejected { .. } => format!("--proposal {proposal_file}"),
            RepositoryError::InvalidInput { input, .. } if input.starts_with("frozen") => {
                format!("--slice {}", slice.dir.display())
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

/// The entries of a Candidate's tree, as the JSON output shows them.
pub(super) fn listed_files(sealed: &SealedCandidate) -> Vec<serde_json::Value> {
    sealed
        .files
        .iter()
        .map(|file| {
            super::common::file_entry(
                &file.path,
                file.mode,
                &Digest::of(&file.content),
                file.content.len() as u64,
            )
        })
        .collect()
}

/// The output of `seal`: the Candidate's identities and its files.
pub fn describe(sealed: &SealedCandidate) -> Output {
    let manifest = &sealed.manifest;
    let files = listed_files(sealed);
    let json = serde_json::json!({
        "digest": sealed.digest.to_string(),
        "ref": candidate_ref(&sealed.digest).as_str(),
        "commit": manifest.commit.to_hex(),
        "tree": manifest.tree.to_hex(),
        "baseCommit": manifest.base_commit.to_hex(),
        "slice": manifest.binding.as_ref().map(|binding| binding.digest.to_string()),
        "proposalDigest": manifest.proposal_digest.to_string(),
        "snapshotDigest": sealed.snapshot_digest.to_string(),
        "files": files,
    });
    let text = format!(
        "sealed Candidate {}\n  commit   {}\n  tree     {}\n  base     {}\n  slice    {} revision {}\n  snapshot {}\n  files    {}\n",
        sealed.digest,
        manifest.commit,
        manifest.tree,
        manifest.base_commit,
        manifest.slice.id,
        manifest.slice.revision,
        sealed.snapshot_digest,
        sealed.files.len()
    );
    Output { json, text }
}
