//! `sf repo create`: a new owned repository from a directory (its files, executables and
//! symbolic links, committed by sf), or from a commit of an existing Git repository
//! (`--from-git REPO --rev REV`), held byte for byte as the first base. `sf repo import`: a
//! later commit of the team's repository as a further base, with its import record, and the
//! target moved to it only when asked and only forward. `--upstream-branch` on either (and
//! `sf repo upstream`) records the base's upstream, the remote and branch a delivery pushes to.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, Subcommand};

use super::common::{CliError, Context, Output, absolute_new_path, json_value, repository_error};
use crate::{EXIT_NOT_DISPATCHED, EXIT_UNKNOWN, Outcome};
use sf_host::contracts::RefValue;
use sf_host::git_object::ObjectId;
use sf_host::git_source::{import_git_base, import_git_base_from, read_git_commit};
use sf_host::repository::{
    CreateRepository, ImportBase, ImportError, ImportedBase, InitialBase, Repository,
    RepositoryOptions, RepositorySettings, TargetMove, Upstream, UpstreamRecord, create_repository,
    open_repository,
};
use sf_host::source_dir::read_source_dir;

#[derive(Debug, Subcommand)]
pub enum RepoCommand {
    /// Create an owned repository whose first base is a directory's files (--from) or a
    /// commit of a Git repository, byte for byte (--from-git with --rev)
    Create(CreateArgs),
    /// Import a later commit of the team's Git repository as a further base, byte for byte,
    /// with a record of where it came from; --advance also moves the target to it, only
    /// forward along the source's history
    Import(ImportArgs),
    /// Record the upstream of a base (the initial commit or an imported one): the team's
    /// remote and the branch a delivery pushes to; written once per base
    Upstream(UpstreamCommandArgs),
}

/// Where a base's upstream is: given with `--upstream-branch` (and `--upstream`, which
/// defaults to the `--from-git` repository).
#[derive(Debug, Args, Clone, Default)]
pub struct UpstreamArgs {
    /// Record the base's upstream: the team's remote (a path, file://, git://, http(s):// or
    /// ssh:// URL, never with a password); default: the --from-git repository. Needs
    /// --upstream-branch
    #[arg(long, value_name = "URL", requires = "upstream_branch")]
    pub(super) upstream: Option<String>,
    /// The branch of the upstream that follows this base, which `sf deliver` moves
    #[arg(long, value_name = "BRANCH", requires = "from_git")]
    pub(super) upstream_branch: Option<String>,
}

#[derive(Debug, Args)]
pub struct UpstreamCommandArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The base commit (default: the repository's initial commit)
    #[arg(long, value_name = "COMMIT")]
    base: Option<String>,
    /// The team's remote (a path, file://, git://, http(s):// or ssh:// URL)
    #[arg(long, value_name = "URL")]
    url: String,
    /// The branch that follows the base
    #[arg(long, value_name = "BRANCH")]
    branch: String,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("import_source").required(true).args(["from_git", "from_upstream"])))]
pub struct ImportArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The team's Git repository (a work tree or a bare repository); recorded as an absolute
    /// path
    #[arg(long, value_name = "REPO", requires = "rev")]
    from_git: Option<PathBuf>,
    /// The branch, tag or commit to import
    #[arg(long, value_name = "REV", requires = "from_git")]
    rev: Option<String>,
    /// Fetch the tip of the upstream recorded for the target's base (its URL and branch) and
    /// import it, recording the same upstream for it
    #[arg(long, conflicts_with_all = ["from_git", "upstream", "upstream_branch"])]
    from_upstream: bool,
    /// Also move the target to the imported commit, by one compare-and-swap after the record
    /// is published, and only if the commit descends from the target in the source's history
    #[arg(long)]
    advance: bool,
    #[command(flatten)]
    upstream: UpstreamArgs,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("source").required(true).args(["from", "from_git"])))]
pub struct CreateArgs {
    /// Where to create the repository: a path that does not exist, in a directory of this
    /// user that no one else can write
    #[arg(long, value_name = "DIR")]
    pub(super) path: PathBuf,
    /// The product id (letters, digits, . _ -)
    #[arg(long, value_name = "ID")]
    pub(super) product: String,
    /// The target ref, for example refs/heads/main
    #[arg(long, value_name = "REF")]
    pub(super) target: String,
    /// The directory to start from: its files (executable or not), symbolic links and
    /// directories, committed by sf (or use --from-git)
    #[arg(long, value_name = "SRC_DIR")]
    pub(super) from: Option<PathBuf>,
    /// An existing Git repository (a work tree or a bare repository) whose commit at --rev
    /// becomes the first base, byte for byte (same commit id, same tree id); a tree the model
    /// cannot hold (a submodule, a link leaving the tree, a name Git refuses) is refused with
    /// every path at fault listed
    #[arg(long, value_name = "REPO", requires = "rev")]
    pub(super) from_git: Option<PathBuf>,
    /// With --from-git: the branch, tag or commit to import
    #[arg(long, value_name = "REV", requires = "from_git")]
    pub(super) rev: Option<String>,
    /// The most files and links one tree may hold
    #[arg(long, value_name = "N", default_value_t = RepositorySettings::default().max_files)]
    pub(super) max_files: u64,
    /// The most bytes one file may hold
    #[arg(long, value_name = "BYTES", default_value_t = RepositorySettings::default().max_file_bytes)]
    pub(super) max_file_bytes: u64,
    /// The most bytes all blobs of one tree may hold
    #[arg(long, value_name = "BYTES", default_value_t = RepositorySettings::default().max_tree_bytes)]
    pub(super) max_tree_bytes: u64,
    /// Hold paths that differ only in case (trees made for Linux only); never when one of
    /// them is a symbolic link
    #[arg(long)]
    pub(super) allow_case_collisions: bool,
    /// Write the repository identity (needed by every later command) to this new file
    #[arg(long, value_name = "FILE")]
    pub(super) identity_out: Option<PathBuf>,
    #[command(flatten)]
    pub(super) upstream: UpstreamArgs,
}

pub fn run(context: &Context, command: RepoCommand) -> Outcome {
    match command {
        RepoCommand::Create(args) => create(context, args).into(),
        RepoCommand::Import(args) => match import(context, args) {
            Ok((output, exit)) => Outcome {
                result: Ok(output),
                exit,
            },
            Err(error) => Err(error).into(),
        },
        RepoCommand::Upstream(args) => record(context, args).into(),
    }
}

/// `path` made absolute, as text (`flag` names it in the error).
fn absolute_text(path: &Path, flag: &str) -> Result<String, CliError> {
    std::path::absolute(path)
        .ok()
        .and_then(|path| path.to_str().map(str::to_owned))
        .ok_or_else(|| {
            CliError::new(
                "invalid-input",
                format!("{flag} {}: not an absolute UTF-8 path", path.display()),
            )
        })
}

/// The upstream `args` asks for, checked, with `source` (the `--from-git` repository) as the
/// default URL; `None` when none is asked for.
/// The message of an error reading the `--from-git` repository `repo`, naming the flag once:
/// most such errors name it (or `--rev`) themselves; the others get it as a prefix.
fn from_git_message(repo: &Path, error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    if text.starts_with("--from-git") || text.starts_with("--rev") {
        text
    } else {
        format!("--from-git {}: {text}", repo.display())
    }
}

fn upstream_of(args: &UpstreamArgs, source: Option<&Path>) -> Result<Option<Upstream>, CliError> {
    let Some(branch) = &args.upstream_branch else {
        return Ok(None);
    };
    let url = match (&args.upstream, source) {
        (Some(url), _) => url.clone(),
        (None, Some(source)) => absolute_text(source, "--from-git")?,
        (None, None) => {
            return Err(CliError::new(
                "usage",
                "--upstream-branch needs --upstream URL or --from-git REPO",
            ));
        }
    };
    let upstream = Upstream {
        url,
        branch: branch.clone(),
    };
    upstream
        .validate()
        .map_err(|error| repository_error("--upstream/--upstream-branch", &error))?;
    Ok(Some(upstream))
}

fn record_upstream(
    repository: &Repository,
    base: &ObjectId,
    upstream: &Upstream,
) -> Result<UpstreamRecord, CliError> {
    repository
        .record_upstream(base, upstream)
        .map_err(|error| repository_error(&format!("recording the upstream of {base}"), &error))
}

fn upstream_text(record: &UpstreamRecord) -> String {
    format!(
        "upstream of {}: {} branch {}\n",
        record.base, record.upstream.url, record.upstream.branch
    )
}

fn upstream_json(record: &UpstreamRecord) -> serde_json::Value {
    serde_json::json!({
        "base": record.base.to_hex(),
        "url": record.upstream.url,
        "branch": record.upstream.branch,
    })
}

fn record(context: &Context, args: UpstreamCommandArgs) -> Result<Output, CliError> {
    let repository = context.open_repository(&args.identity)?;
    let base = match &args.base {
        None => repository.identity().initial,
        Some(text) => ObjectId::parse_hex(text).ok_or_else(|| {
            CliError::new(
                "invalid-input",
                format!("--base {text:?}: a commit id is 40 lowercase hex characters"),
            )
        })?,
    };
    let upstream = Upstream {
        url: args.url,
        branch: args.branch,
    };
    upstream
        .validate()
        .map_err(|error| repository_error("--url/--branch", &error))?;
    let record = record_upstream(&repository, &base, &upstream)?;
    Ok(Output {
        json: upstream_json(&record),
        text: upstream_text(&record),
    })
}

/// The exit status of an import that published its record: 0 unless the target, asked to
/// move, did not (`7`: it moved meanwhile) or may not have (`6`: unknown).
fn import_status(target: &TargetMove) -> u8 {
    match target {
        TargetMove::NotAsked | TargetMove::AlreadyThere | TargetMove::Moved { .. } => 0,
        TargetMove::Conflict { .. } => EXIT_NOT_DISPATCHED,
        TargetMove::Unknown { .. } => EXIT_UNKNOWN,
        // An outcome added later: not one this command can call a success.
        _ => crate::EXIT_FAILURE,
    }
}

fn import(context: &Context, args: ImportArgs) -> Result<(Output, u8), CliError> {
    let repository = context.open_repository(&args.identity)?;
    let (request, upstream, fetched) = match (&args.from_git, &args.rev) {
        (Some(from_git), Some(rev)) => {
            let source = absolute_text(from_git, "--from-git")?;
            let upstream = upstream_of(&args.upstream, Some(from_git))?;
            let request = ImportBase {
                source,
                rev: rev.clone(),
                advance: args.advance,
            };
            (request, upstream, None)
        }
        _ => {
            let target = repository
                .target()
                .map_err(|error| repository_error("reading the target", &error))?;
            let record = repository
                .upstream_at(&target)
                .map_err(|error| repository_error("reading the target's upstream", &error))?
                .ok_or_else(|| {
                    CliError::new(
                        "invalid-input",
                        format!(
                            "--from-upstream: the target {target} records no upstream (nor does \
                             its base); record one with `sf repo upstream` or import with \
                             --from-git"
                        ),
                    )
                })?;
            let branch = sf_host::contracts::RefName::parse(&record.upstream.branch_ref())
                .map_err(|error| CliError::new("invalid-input", error.to_string()))?;
            let fetched = super::deliver::remote(context)?
                .fetch(&record.upstream.url, &branch)
                .map_err(|error| CliError::new("remote-unavailable", error.to_string()))?;
            let request = ImportBase {
                source: record.upstream.url.clone(),
                rev: branch.as_str().to_owned(),
                advance: args.advance,
            };
            (request, Some(record.upstream), Some(fetched))
        }
    };
    let imported = match &fetched {
        Some(fetched) => import_git_base_from(&repository, &request, fetched.path()),
        None => import_git_base(&repository, &request),
    }
    .map_err(|error| match error {
        ImportError::Source(error) => CliError::new(
            error.code(),
            format!(
                "{}\n(nothing was written)",
                from_git_message(Path::new(&request.source), &error)
            ),
        ),
        ImportError::Repository(error) => repository_error(
            &format!("importing into repository {}", repository.identity().path),
            &error,
        ),
        other => CliError::new(other.code(), other.to_string()),
    })?;
    let target_ref = &repository.identity().target_ref;
    let exit = import_status(&imported.target);
    let mut output = describe_import(&imported, target_ref);
    if let Some(upstream) = &upstream {
        let record = record_upstream(&repository, &imported.record.commit, upstream)?;
        output.text.push_str(&upstream_text(&record));
        output.json["upstream"] = upstream_json(&record);
    }
    Ok((output, exit))
}

fn describe_import(imported: &ImportedBase, target_ref: &str) -> Output {
    let record = &imported.record;
    let hex = |id: &sf_host::git_object::ObjectId| serde_json::Value::from(id.to_hex());
    let value_of = |value: &Option<RefValue>| match value {
        None => serde_json::Value::Null,
        Some(RefValue::Direct(id)) => hex(id),
        Some(RefValue::Symbolic(to)) => format!("symbolic ref to {to}").into(),
    };
    let (from, current, reason) = match &imported.target {
        TargetMove::Moved { from } => (hex(from), serde_json::Value::Null, None),
        TargetMove::Conflict { expected, current } => (hex(expected), value_of(current), None),
        TargetMove::Unknown { from, reason } => {
            (hex(from), serde_json::Value::Null, Some(reason.clone()))
        }
        _ => (serde_json::Value::Null, serde_json::Value::Null, None),
    };
    let moved = matches!(imported.target, TargetMove::Moved { .. });
    let json = serde_json::json!({
        "commit": record.commit.to_hex(),
        "tree": record.tree.to_hex(),
        "recordRef": imported.record_ref.as_str(),
        "recordCommit": imported.record_commit.to_hex(),
        "record": json_value(&record.to_value()),
        "replayed": imported.replayed,
        "target": {
            "ref": target_ref,
            "advance": record.advance,
            "outcome": imported.target.word(),
            "moved": moved,
            "from": from,
            "current": current,
            "reason": reason,
        },
    });
    let mut text = format!(
        "imported commit {} (tree {}) from {} at {:?}\n  record  {} -> {}{}\n",
        record.commit,
        record.tree,
        record.source,
        record.rev,
        imported.record_ref,
        imported.record_commit,
        if imported.replayed {
            " (already recorded: nothing written)"
        } else {
            ""
        }
    );
    let line = match &imported.target {
        TargetMove::NotAsked => format!("{target_ref} not moved (pass --advance to move it)"),
        TargetMove::AlreadyThere => format!("{target_ref} names {} already", record.commit),
        TargetMove::Moved { from } => {
            format!("{target_ref} moved from {from} to {}", record.commit)
        }
        TargetMove::Conflict { expected, current } => format!(
            "{target_ref} NOT moved: it named {expected} when checked and {} when updated \
             (it moved meanwhile); import again with --advance to move it from there",
            match current {
                None => "nothing".to_owned(),
                Some(RefValue::Direct(id)) => id.to_hex(),
                Some(RefValue::Symbolic(to)) => format!("a symbolic ref to {to}"),
            }
        ),
        TargetMove::Unknown { from, reason } => format!(
            "{target_ref}: UNKNOWN whether it moved from {from} to {} ({reason}); read it \
             before doing anything else",
            record.commit
        ),
        other => format!("{target_ref}: {}", other.word()),
    };
    text.push_str(&format!("  target  {line}\n"));
    Output { json, text }
}

fn create(context: &Context, args: CreateArgs) -> Result<Output, CliError> {
    // Every input is checked before anything is created.
    let path = absolute_new_path(&args.path, "--path")?;
    let path_text = path.to_str().ok_or_else(|| {
        CliError::new(
            "invalid-input",
            format!("--path {}: is not UTF-8", path.display()),
        )
    })?;
    let identity_out = match &args.identity_out {
        Some(file) => {
            let file = absolute_new_path(file, "--identity-out")?;
            if file.symlink_metadata().is_ok() {
                return Err(CliError::new(
                    "exists",
                    format!(
                        "--identity-out {}: already exists; sf never overwrites it: choose a new \
                         file",
                        file.display()
                    ),
                ));
            }
            Some(file)
        }
        None => None,
    };
    if [args.max_files, args.max_file_bytes, args.max_tree_bytes].contains(&0) {
        return Err(CliError::new(
            "invalid-input",
            "--max-files, --max-file-bytes and --max-tree-bytes are positive",
        ));
    }
    let settings = RepositorySettings {
        max_files: args.max_files,
        max_file_bytes: args.max_file_bytes,
        max_tree_bytes: args.max_tree_bytes,
        allow_case_collisions: args.allow_case_collisions,
    };
    let upstream = upstream_of(&args.upstream, args.from_git.as_deref())?;
    let base = match (&args.from, &args.from_git, &args.rev) {
        (Some(dir), None, None) => InitialBase::Files(read_source_dir(dir).map_err(|error| {
            CliError::new(
                error.code(),
                format!("--from: {error} (nothing was created)"),
            )
        })?),
        (None, Some(repo), Some(rev)) => {
            let read = read_git_commit(repo, rev, &settings.limits(), settings.policy());
            InitialBase::Imported(read.map_err(|error| {
                CliError::new(
                    error.code(),
                    format!("{}\n(nothing was created)", from_git_message(repo, &error)),
                )
            })?)
        }
        _ => {
            return Err(CliError::new(
                "usage",
                "--rev goes with --from-git only: give either --from SRC_DIR or --from-git REPO with --rev REV",
            ));
        }
    };
    let factory = context.object_store()?;
    let identity = create_repository(
        factory.as_ref(),
        &CreateRepository {
            path: path_text.to_owned(),
            product_id: args.product.clone(),
            target_ref: args.target.clone(),
            base,
            settings,
        },
        &RepositoryOptions::default(),
    )
    .map_err(|error| repository_error(&format!("creating repository {path_text}"), &error))?;
    let bytes = identity.to_canonical_bytes();
    let mut text = format!(
        "created repository {} (product {}, target {}, initial commit {})\n",
        identity.path, identity.product_id, identity.target_ref, identity.initial
    );
    let mut json = json_value(&identity.to_value());
    if let Some(upstream) = &upstream {
        let recorded = open_repository(factory.as_ref(), &identity, RepositoryOptions::default())
            .map_err(|error| repository_error("opening the new repository", &error))
            .and_then(|repository| record_upstream(&repository, &identity.initial, upstream));
        match recorded {
            Ok(record) => {
                text.push_str(&upstream_text(&record));
                json["upstream"] = upstream_json(&record);
            }
            Err(mut error) => {
                error.message.push_str(&format!(
                    "; the repository was created (identity: {}): record the upstream with \
                     `sf repo upstream`",
                    String::from_utf8_lossy(&bytes)
                ));
                return Err(error);
            }
        }
    }
    if let Some(file) = &identity_out {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(file)
            .and_then(|mut handle| {
                handle.write_all(&bytes)?;
                handle.sync_all()
            })
            .map_err(|error| {
                CliError::new(
                    "identity-not-written",
                    format!(
                        "the repository was created at {}, but its identity could not be \
                         written to --identity-out {} ({error}); keep this identity: {}",
                        identity.path,
                        file.display(),
                        String::from_utf8_lossy(&bytes)
                    ),
                )
            })?;
        text.push_str(&format!("identity written to {}\n", file.display()));
    } else {
        // The identity alone on stdout, so that `> identity.json` keeps it; what was done
        // goes to stderr with the other messages for people.
        if !context.json {
            eprint!("{}", sf_host::text_escape::lines(&text));
        }
        text = String::from_utf8_lossy(&bytes).into_owned();
        text.push('\n');
    }
    Ok(Output { json, text })
}
