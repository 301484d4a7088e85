//! `sf seal`: seal a proposal as a Candidate for a frozen Slice. The Slice is the only source
//! of what the Candidate is sealed for (its scope, protected paths, base and records): the
//! Candidate's manifest names the Slice's digest.

use std::path::PathBuf;

use clap::Args;

use super::common::{CliError, Context, Output, read_input_within, repository_error};
use super::slice_dir::{SliceDir, coded};
use sf_host::canonical::Digest;
use sf_host::repository::{
    MAX_PROPOSAL_DOCUMENT_BYTES, ManifestEntry, RepositoryError, SealedCandidate, TreeContents,
    candidate_ref, parse_proposal,
};
use sf_host::snapshot::SnapshotFile;

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

/// The entries of a tree, as the JSON output shows them.
pub(super) fn listed_files(files: &[SnapshotFile]) -> Vec<serde_json::Value> {
    files
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

/// The name and value of the digest that names a Candidate's content: its tree digest
/// (`sf-candidate/4`) or its snapshot digest (before).
pub(super) fn content_field(sealed: &SealedCandidate) -> (&'static str, Option<String>) {
    let name = match sealed.manifest.contents {
        TreeContents::Trees { .. } => "treeDigest",
        _ => "snapshotDigest",
    };
    (name, sealed.content_digest().map(ToString::to_string))
}

/// The output of `seal`: the Candidate's identities and its edits (never every file: a tree
/// may hold 100,000).
pub fn describe(sealed: &SealedCandidate) -> Output {
    let manifest = &sealed.manifest;
    let edits: Vec<serde_json::Value> = manifest
        .edits
        .iter()
        .map(|edit| {
            let entry = |entry: &Option<ManifestEntry>| {
                entry.as_ref().map(|entry| {
                    serde_json::json!({"mode": entry.mode.octal(), "sha256": entry.sha256.to_string()})
                })
            };
            serde_json::json!({"path": edit.path, "prior": entry(&edit.prior), "next": entry(&edit.next)})
        })
        .collect();
    let (content_name, content) = content_field(sealed);
    let mut json = serde_json::json!({
        "digest": sealed.digest.to_string(),
        "protocol": manifest.protocol(),
        "ref": candidate_ref(&sealed.digest).as_str(),
        "commit": manifest.commit.to_hex(),
        "tree": manifest.tree.to_hex(),
        "baseCommit": manifest.base_commit.to_hex(),
        "slice": manifest.binding.as_ref().map(|binding| binding.digest.to_string()),
        "proposalDigest": manifest.proposal_digest.to_string(),
        "edits": edits,
    });
    json[content_name] = content.clone().into();
    let text = format!(
        "sealed Candidate {}\n  commit   {}\n  tree     {}\n  base     {}\n  slice    {} revision {}\n  content  {}\n  edits    {}\n",
        sealed.digest,
        manifest.commit,
        manifest.tree,
        manifest.base_commit,
        manifest.slice.id,
        manifest.slice.revision,
        content.unwrap_or_else(|| "-".into()),
        manifest.edits.len()
    );
    Output { json, text }
}
