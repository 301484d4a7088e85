//! `sf repo create`: a new owned repository from a directory (its files, executables and
//! symbolic links, committed by sf), or from a commit of an existing Git repository
//! (`--from-git REPO --rev REV`), held byte for byte as the first base. `sf repo import`: a
//! later commit of the team's repository as a further base, with its import record, and the
//! target moved to it only when asked and only forward. `--upstream-branch` on either (and
//! `sf repo upstream`) records the base's upstream, the remote and branch a delivery pushes to.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Subcommand};

use sf_app::repo::{
    self, CreateRequest, Created, ImportFrom, ImportRequest, RecordUpstream, Source,
    UpstreamRequest,
};
use sf_host::contracts::RefValue;
use sf_host::repository::{ImportedBase, RepositorySettings, TargetMove, UpstreamRecord};

use super::common::{CliError, Context, Output, json_value};
use super::exit::{EXIT_FAILURE, EXIT_NOT_DISPATCHED, EXIT_UNKNOWN, Outcome};

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
    upstream: Option<String>,
    /// The branch of the upstream that follows this base, which `sf deliver` moves
    #[arg(long, value_name = "BRANCH", requires = "from_git")]
    upstream_branch: Option<String>,
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
    path: PathBuf,
    /// The product id (letters, digits, . _ -)
    #[arg(long, value_name = "ID")]
    product: String,
    /// The target ref, for example refs/heads/main
    #[arg(long, value_name = "REF")]
    target: String,
    /// The directory to start from: its files (executable or not), symbolic links and
    /// directories, committed by sf (or use --from-git)
    #[arg(long, value_name = "SRC_DIR")]
    from: Option<PathBuf>,
    /// An existing Git repository (a work tree or a bare repository) whose commit at --rev
    /// becomes the first base, byte for byte (same commit id, same tree id); a tree the model
    /// cannot hold (a submodule, a link leaving the tree, a name Git refuses) is refused with
    /// every path at fault listed
    #[arg(long, value_name = "REPO", requires = "rev")]
    from_git: Option<PathBuf>,
    /// With --from-git: the branch, tag or commit to import
    #[arg(long, value_name = "REV", requires = "from_git")]
    rev: Option<String>,
    /// The most files and links one tree may hold
    #[arg(long, value_name = "N", default_value_t = RepositorySettings::default().max_files)]
    max_files: u64,
    /// The most bytes one file may hold
    #[arg(long, value_name = "BYTES", default_value_t = RepositorySettings::default().max_file_bytes)]
    max_file_bytes: u64,
    /// The most bytes all blobs of one tree may hold
    #[arg(long, value_name = "BYTES", default_value_t = RepositorySettings::default().max_tree_bytes)]
    max_tree_bytes: u64,
    /// Hold paths that differ only in case (trees made for Linux only); never when one of
    /// them is a symbolic link
    #[arg(long)]
    allow_case_collisions: bool,
    /// Write the repository identity (needed by every later command) to this new file
    #[arg(long, value_name = "FILE")]
    identity_out: Option<PathBuf>,
    #[command(flatten)]
    upstream: UpstreamArgs,
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

impl UpstreamArgs {
    fn request(&self) -> UpstreamRequest {
        UpstreamRequest {
            url: self.upstream.clone(),
            branch: self.upstream_branch.clone(),
        }
    }
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
    let request = RecordUpstream {
        identity: args.identity,
        base: args.base,
        url: args.url,
        branch: args.branch,
    };
    let record = repo::upstream(&context.backends, &request)?;
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
        _ => EXIT_FAILURE,
    }
}

fn import(context: &Context, args: ImportArgs) -> Result<(Output, u8), CliError> {
    let from = match (args.from_git, args.rev) {
        (Some(repo), Some(rev)) => ImportFrom::Git { repo, rev },
        _ => ImportFrom::Upstream,
    };
    let request = ImportRequest {
        identity: args.identity,
        from,
        advance: args.advance,
        upstream: args.upstream.request(),
    };
    let imported = repo::import(&context.backends, &request)?;
    let exit = import_status(&imported.imported.target);
    let mut output = describe_import(&imported.imported, &imported.target_ref);
    if let Some(record) = &imported.upstream {
        output.text.push_str(&upstream_text(record));
        output.json["upstream"] = upstream_json(record);
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
    let source = match (args.from, args.from_git, args.rev) {
        (Some(dir), None, None) => Source::Files(dir),
        (None, Some(repo), Some(rev)) => Source::Git { repo, rev },
        _ => Source::Unclear,
    };
    let request = CreateRequest {
        path: args.path,
        product: args.product,
        target: args.target,
        source,
        settings: RepositorySettings {
            max_files: args.max_files,
            max_file_bytes: args.max_file_bytes,
            max_tree_bytes: args.max_tree_bytes,
            allow_case_collisions: args.allow_case_collisions,
        },
        identity_out: args.identity_out,
        upstream: args.upstream.request(),
    };
    let created = repo::create(&context.backends, &request)?;
    Ok(describe_created(&created, context.json))
}

/// A created repository; without `--identity-out`, the identity alone on stdout, so that
/// `> identity.json` keeps it, and what was done on stderr with the other messages for people.
fn describe_created(created: &Created, json_mode: bool) -> Output {
    let identity = &created.identity;
    let mut text = format!(
        "created repository {} (product {}, target {}, initial commit {})\n",
        identity.path, identity.product_id, identity.target_ref, identity.initial
    );
    let mut json = json_value(&identity.to_value());
    if let Some(record) = &created.upstream {
        text.push_str(&upstream_text(record));
        json["upstream"] = upstream_json(record);
    }
    match &created.identity_file {
        Some(file) => text.push_str(&format!("identity written to {}\n", file.display())),
        None => {
            if !json_mode {
                eprint!("{}", sf_host::text_escape::lines(&text));
            }
            text = String::from_utf8_lossy(&created.bytes).into_owned();
            text.push('\n');
        }
    }
    Output { json, text }
}
