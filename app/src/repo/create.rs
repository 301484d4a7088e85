//! A new owned repository from a directory (its files, executables and symbolic links,
//! committed by sf), or from a commit of an existing Git repository, held byte for byte as
//! the first base; its upstream recorded when asked for, and its identity written to a new
//! file when asked for.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sf_host::contracts::ObjectStoreFactory;
use sf_host::git_source::{GitSource, GitSourceError};
use sf_host::repository::{
    CreateRepository, InitialBase, RepositoryError, RepositoryIdentity, RepositoryOptions,
    RepositorySettings, StreamedBase, Upstream, UpstreamRecord, create_repository, open_repository,
};
use sf_host::source_dir::{SourceDirBytes, list_source_dir};

use super::{UpstreamRequest, from_git_message, record_upstream, upstream_of};
use crate::backends::Backends;
use crate::error::{AppError, repository_error, source_dir_error};
use crate::files::{absolute_new_path, new_record_file, write_new_file};

/// Where a new repository's first base comes from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A directory's files (`--from`).
    Files(PathBuf),
    /// A commit of a Git repository (`--from-git` with `--rev`).
    Git {
        /// The Git repository.
        repo: PathBuf,
        /// The branch, tag or commit.
        rev: String,
    },
    /// `--rev` without `--from-git`, or neither source: refused as a usage error once the
    /// other inputs are checked.
    Unclear,
}

/// A repository to create.
#[derive(Clone, Debug)]
pub struct CreateRequest {
    /// Where: a path that does not exist.
    pub path: PathBuf,
    /// The product id.
    pub product: String,
    /// The target ref.
    pub target: String,
    /// The first base.
    pub source: Source,
    /// The bounds of its trees.
    pub settings: RepositorySettings,
    /// A new file the identity is written to.
    pub identity_out: Option<PathBuf>,
    /// The first base's upstream, when one is to be recorded.
    pub upstream: UpstreamRequest,
}

/// A repository created.
#[derive(Clone, Debug)]
pub struct Created {
    /// Its identity (every later request names the file that holds it).
    pub identity: RepositoryIdentity,
    /// The identity's canonical bytes.
    pub bytes: Vec<u8>,
    /// The first base's upstream, when recorded.
    pub upstream: Option<UpstreamRecord>,
    /// The file the identity was written to, when asked for.
    pub identity_file: Option<PathBuf>,
}

/// Creates the repository; every input is checked before anything is created.
pub fn create(backends: &Backends, request: &CreateRequest) -> Result<Created, AppError> {
    let path = absolute_new_path(&request.path, "--path")?;
    let path_text = path.to_str().ok_or_else(|| {
        AppError::new(
            "invalid-input",
            format!("--path {}: is not UTF-8", path.display()),
        )
    })?;
    let identity_out = new_record_file(request.identity_out.as_deref(), "--identity-out")?;
    let settings = request.settings;
    if [
        settings.max_files,
        settings.max_file_bytes,
        settings.max_tree_bytes,
    ]
    .contains(&0)
    {
        return Err(AppError::new(
            "invalid-input",
            "--max-files, --max-file-bytes and --max-tree-bytes are positive",
        ));
    }
    let from_git = match &request.source {
        Source::Git { repo, .. } => Some(repo.as_path()),
        _ => None,
    };
    let upstream = upstream_of(&request.upstream, from_git)?;
    let base = initial_base(&request.source, &settings)?;
    let factory = backends.object_store()?;
    let identity = create_repository(
        factory.as_ref(),
        &CreateRepository {
            path: path_text.to_owned(),
            product_id: request.product.clone(),
            target_ref: request.target.clone(),
            base,
            settings,
        },
        &RepositoryOptions::default(),
    )
    .map_err(|error| {
        let mut app = repository_error(&format!("creating repository {path_text}"), &error);
        // A new repository has no record to conflict with: a conflict is its source,
        // changed between the read that checked it and the read that stored it.
        if matches!(error, RepositoryError::Conflict { .. }) {
            app.code = "changed-while-read".into();
        }
        app
    })?;
    let bytes = identity.to_canonical_bytes();
    let upstream = upstream
        .map(|upstream| record_first_upstream(factory.as_ref(), &identity, &bytes, &upstream))
        .transpose()?;
    if let Some(file) = &identity_out {
        write_identity(file, &identity, &bytes)?;
    }
    Ok(Created {
        identity,
        bytes,
        upstream,
        identity_file: identity_out,
    })
}

/// Records `upstream` as the upstream of the new repository's first base; the repository
/// exists already, so the error hands its identity over.
fn record_first_upstream(
    factory: &dyn ObjectStoreFactory,
    identity: &RepositoryIdentity,
    bytes: &[u8],
    upstream: &Upstream,
) -> Result<UpstreamRecord, AppError> {
    open_repository(factory, identity, RepositoryOptions::default())
        .map_err(|error| repository_error("opening the new repository", &error))
        .and_then(|repository| record_upstream(&repository, &identity.initial, upstream))
        .map_err(|mut error| {
            error.message.push_str(&format!(
                "; the repository was created (identity: {}): record the upstream with `sf \
                 repo upstream`",
                String::from_utf8_lossy(bytes)
            ));
            error
        })
}

/// The first base `source` names, read once for its leaves' identities (every check of the
/// source made, no file's bytes kept) and read again as the repository is written.
fn initial_base(source: &Source, settings: &RepositorySettings) -> Result<InitialBase, AppError> {
    let limits = settings.limits();
    match source {
        Source::Files(dir) => {
            let leaves = list_source_dir(dir, &limits).map_err(|error| {
                let mut app = source_dir_error("--from", error);
                app.message.push_str(" (nothing was created)");
                app
            })?;
            Ok(InitialBase::Streamed(StreamedBase {
                leaves,
                commit: None,
                bytes: Arc::new(Mutex::new(SourceDirBytes::new(dir, &limits))),
            }))
        }
        Source::Git { repo, rev } => {
            let refused = |error: GitSourceError| {
                AppError::new(
                    error.code(),
                    format!("{}\n(nothing was created)", from_git_message(repo, &error)),
                )
            };
            let mut git = GitSource::open(repo).map_err(refused)?;
            let (head, leaves) = git
                .read_leaves(rev, &limits, settings.policy())
                .map_err(refused)?;
            let bytes = git.into_bytes(head.tree, &limits, settings.policy());
            Ok(InitialBase::Streamed(StreamedBase {
                leaves,
                commit: Some(head),
                bytes: Arc::new(Mutex::new(bytes)),
            }))
        }
        Source::Unclear => Err(AppError::new(
            "usage",
            "--rev goes with --from-git only: give either --from SRC_DIR or --from-git REPO with --rev REV",
        )),
    }
}

/// Writes the identity to the new file `file`; the repository exists already, so the error
/// hands the identity over.
fn write_identity(
    file: &std::path::Path,
    identity: &RepositoryIdentity,
    bytes: &[u8],
) -> Result<(), AppError> {
    write_new_file(file, bytes).map_err(|error| {
        AppError::new(
            "identity-not-written",
            format!(
                "the repository was created at {}, but its identity could not be written to \
                 --identity-out {} ({error}); keep this identity: {}",
                identity.path,
                file.display(),
                String::from_utf8_lossy(bytes)
            ),
        )
    })
}
