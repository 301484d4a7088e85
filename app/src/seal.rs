//! `seal`: a proposal sealed as a Candidate for a frozen Slice. The Slice is the only source
//! of what the Candidate is sealed for (its scope, protected paths, base and records): the
//! Candidate's manifest names the Slice's digest.

use std::path::PathBuf;

use sf_host::repository::{
    MAX_PROPOSAL_DOCUMENT_BYTES, Proposal, RepositoryError, SealedCandidate, parse_proposal,
};

use crate::backends::Backends;
use crate::error::{AppError, repository_error};
use crate::input::read_input_within;
use crate::propose::{ProposalSource, propose_in, slice_inputs};
use crate::slice_dir::SliceDir;

/// A proposal to seal, for a frozen Slice of a repository.
#[derive(Clone, Debug)]
pub struct SealRequest {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The frozen Slice directory the Candidate is sealed for.
    pub slice: PathBuf,
    /// The proposal, or what to make it from.
    pub proposal: ProposalInput,
}

/// What a seal's proposal is.
#[derive(Clone, Debug)]
pub enum ProposalInput {
    /// A proposal file (`--proposal`).
    File(PathBuf),
    /// A proposal made as `sf propose` makes it (`--commit`, `--tree`), kept to `only`.
    Made {
        /// Where its changes come from.
        source: ProposalSource,
        /// Keep only the changes at or under these paths (all when empty).
        only: Vec<String>,
    },
}

/// Seals the proposal for the Slice; the Candidate is written once.
pub fn seal(backends: &Backends, request: &SealRequest) -> Result<SealedCandidate, AppError> {
    let slice = SliceDir::open(&request.slice)?;
    // A proposal file is read and parsed before the repository is opened.
    let (pending, named) = match &request.proposal {
        ProposalInput::File(file) => (
            Pending::Parsed(read_proposal(file)?),
            format!("--proposal {}", file.display()),
        ),
        ProposalInput::Made { source, only } => {
            (Pending::Make(source, only), "the proposal made".to_owned())
        }
    };
    let repository = backends.open_repository(&request.identity)?;
    let frozen = slice_inputs(&repository, &slice)?;
    let proposal = match pending {
        Pending::Parsed(proposal) => proposal,
        Pending::Make(source, only) => propose_in(&repository, &frozen, source, only)?.proposal,
    };
    repository.seal(&frozen, &proposal).map_err(|error| {
        let what = match &error {
            RepositoryError::Rejected { .. } => named.clone(),
            RepositoryError::InvalidInput { input, .. } if input.starts_with("frozen") => {
                format!("--slice {}", slice.dir.display())
            }
            _ => format!(
                "sealing {named} in repository {}",
                repository.identity().path
            ),
        };
        repository_error(&what, &error)
    })
}

/// A seal's proposal before the repository is open: parsed, or to be made.
enum Pending<'a> {
    Parsed(Proposal),
    Make(&'a ProposalSource, &'a [String]),
}

/// The proposal in `file`, parsed.
fn read_proposal(file: &std::path::Path) -> Result<Proposal, AppError> {
    let bytes = read_input_within(file, "--proposal", MAX_PROPOSAL_DOCUMENT_BYTES as u64)?;
    parse_proposal(&bytes)
        .map_err(|error| repository_error(&format!("--proposal {}", file.display()), &error))
}
