//! `seal`: a proposal sealed as a Candidate for a frozen Slice. The Slice is the only source
//! of what the Candidate is sealed for (its scope, protected paths, base and records): the
//! Candidate's manifest names the Slice's digest.

use std::path::PathBuf;

use sf_host::repository::{
    MAX_PROPOSAL_DOCUMENT_BYTES, RepositoryError, SealedCandidate, parse_proposal,
};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::input::read_input_within;
use crate::slice_dir::SliceDir;

/// A proposal to seal, for a frozen Slice of a repository.
#[derive(Clone, Debug)]
pub struct SealRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The frozen Slice directory the Candidate is sealed for.
    pub slice: PathBuf,
    /// The proposal file.
    pub proposal: PathBuf,
}

/// Seals `request.proposal` for the Slice; the Candidate is written once.
pub fn seal(backends: &Backends, request: &SealRequest) -> Result<SealedCandidate, AppError> {
    let proposal_file = request.proposal.display().to_string();
    let slice = SliceDir::open(&request.slice)?;
    let bytes = read_input_within(
        &request.proposal,
        "--proposal",
        MAX_PROPOSAL_DOCUMENT_BYTES as u64,
    )?;
    let proposal = parse_proposal(&bytes)
        .map_err(|error| repository_error(&format!("--proposal {proposal_file}"), &error))?;
    let repository = backends.open_repository(&request.identity)?;
    if slice.frozen.record.repository != *repository.identity() {
        return Err(AppError::coded(
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
    repository.seal(&frozen, &proposal).map_err(|error| {
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
    })
}
