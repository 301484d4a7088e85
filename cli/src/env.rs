//! `sf env add`, `sf env show` and `sf env list`: the dependency environments (a venv, a
//! `node_modules`, a toolchain) that checks run in, kept read-only by digest in the store that
//! `[environments] store` names (`sf_host::environment_store`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{CliError, Context, Output};
use sf_host::canonical::Digest;
use sf_host::environment_store::{
    EnvironmentEntry, EnvironmentLimits, EnvironmentStore, EnvironmentStoreError, check_bind_path,
    check_name,
};

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Copy DIR into the store under NAME; a check binds it, read-only, at DIR's absolute path
    /// (or, with --root, as its run's whole root)
    Add(AddArgs),
    /// Verify a stored environment, by name or digest, and print it
    Show(ShowArgs),
    /// List every environment name in the store with its digest
    List,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The new name: 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit;
    /// a name is never re-pointed
    #[arg(value_name = "NAME")]
    name: String,
    /// The directory, by the absolute path it was built at (where the sandbox binds it), with
    /// no symbolic link in the path
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// DIR is a whole root (a Debian root made with debootstrap): a check's run sees it as /,
    /// in place of the runtime's files; its top-level dev, proc, sf and sys are not copied, and
    /// setuid, setgid and sticky bits are dropped
    #[arg(long)]
    root: bool,
    /// At most this many entries (files, links and directories together)
    #[arg(long, value_name = "N", default_value_t = EnvironmentLimits::default().files)]
    max_files: u64,
    /// At most this many bytes of file contents in all
    #[arg(long, value_name = "BYTES", default_value_t = EnvironmentLimits::default().bytes)]
    max_bytes: u64,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// An environment name, or a digest (`sha256:` and 64 hex characters)
    #[arg(value_name = "NAME|DIGEST")]
    environment: String,
}

pub fn run(context: &Context, command: EnvCommand) -> Result<Output, CliError> {
    match command {
        EnvCommand::Add(args) => add(context, args),
        EnvCommand::Show(args) => show(context, args),
        EnvCommand::List => list(context),
    }
}

fn add(context: &Context, args: AddArgs) -> Result<Output, CliError> {
    // Refused before the store is opened, so that a bad argument creates nothing.
    check_name(&args.name).map_err(store_error)?;
    check_bind_path(&args.dir).map_err(store_error)?;
    let root = context.environment_store_dir()?;
    let store = EnvironmentStore::open(&root).map_err(store_error)?;
    let limits = EnvironmentLimits {
        files: args.max_files,
        bytes: args.max_bytes,
    };
    let entry = if args.root {
        store.add_root(&args.name, &args.dir, limits)
    } else {
        store.add(&args.name, &args.dir, limits)
    }
    .map_err(store_error)?;
    Ok(describe(&entry))
}

fn show(context: &Context, args: ShowArgs) -> Result<Output, CliError> {
    // The argument is read before the store is opened, so that a bad one names itself.
    let digest = if args.environment.starts_with("sha256:") {
        Some(Digest::parse(&args.environment).ok_or_else(|| {
            CliError::new(
                "invalid-input",
                format!(
                    "{:?}: a digest is sha256: and 64 lowercase hex characters; or give a name",
                    args.environment
                ),
            )
        })?)
    } else {
        check_name(&args.environment).map_err(store_error)?;
        None
    };
    let root = context.environment_store_dir()?;
    let store = EnvironmentStore::open_existing(&root).map_err(store_error)?;
    let entry = match digest {
        Some(digest) => store.verify(&digest),
        None => store.resolve(&args.environment),
    }
    .map_err(store_error)?;
    Ok(describe(&entry))
}

fn list(context: &Context) -> Result<Output, CliError> {
    let root = context.environment_store_dir()?;
    let names = match EnvironmentStore::open_existing(&root) {
        Ok(store) => store.names().map_err(store_error)?,
        // Nothing was ever added: an empty list, and nothing created by a command that reads.
        Err(EnvironmentStoreError::NoStore { .. }) => Vec::new(),
        Err(error) => return Err(store_error(error)),
    };
    let width = names.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut text = String::new();
    if names.is_empty() {
        text.push_str(&format!("no environments in {}\n", root.display()));
    }
    for (name, digest) in &names {
        text.push_str(&format!("{name:<width$}  {digest}\n"));
    }
    let environments: Vec<serde_json::Value> = names
        .iter()
        .map(|(name, digest)| serde_json::json!({"name": name, "digest": digest.to_string()}))
        .collect();
    Ok(Output {
        json: serde_json::json!({
            "store": root.display().to_string(),
            "environments": environments,
        }),
        text,
    })
}

/// An environment as `add` and `show` print it.
fn describe(entry: &EnvironmentEntry) -> Output {
    let mut text = String::new();
    if let Some(name) = &entry.name {
        text.push_str(&format!("name    {name}\n"));
    }
    text.push_str(&format!(
        "digest  {}\nat      {}\nfiles   {}\nbytes   {}\n",
        entry.digest,
        entry.at.display(),
        entry.files,
        entry.bytes
    ));
    Output {
        json: serde_json::json!({
            "name": entry.name,
            "digest": entry.digest.to_string(),
            "at": entry.at.display().to_string(),
            "files": entry.files,
            "bytes": entry.bytes,
        }),
        text,
    }
}

/// The entry `name` points to in the configured store, verified (for `sf slice freeze`).
pub(super) fn resolve(context: &Context, name: &str) -> Result<EnvironmentEntry, CliError> {
    check_name(name).map_err(store_error)?;
    let root = context.environment_store_dir()?;
    let store = EnvironmentStore::open_existing(&root).map_err(store_error)?;
    store.resolve(name).map_err(store_error)
}

/// Each of `digests` in the configured store, verified now, by the directory holding its
/// files; an environment that changed is `corrupt` and nothing runs (for `sf collect` and
/// `sf land`, before an attempt starts).
pub(super) fn verified_trees<'a>(
    context: &Context,
    digests: impl IntoIterator<Item = &'a Digest>,
) -> Result<BTreeMap<Digest, PathBuf>, CliError> {
    let mut digests = digests.into_iter().peekable();
    if digests.peek().is_none() {
        return Ok(BTreeMap::new());
    }
    verified_trees_in(&context.environment_store_dir()?, digests)
}

/// [`verified_trees`] in the store at `root`, which needs no [`Context`] (so that another
/// thread can verify while the command goes on).
pub(super) fn verified_trees_in<'a>(
    root: &std::path::Path,
    digests: impl IntoIterator<Item = &'a Digest>,
) -> Result<BTreeMap<Digest, PathBuf>, CliError> {
    let mut digests = digests.into_iter().peekable();
    if digests.peek().is_none() {
        return Ok(BTreeMap::new());
    }
    let store = EnvironmentStore::open_existing(root).map_err(store_error)?;
    digests
        .map(|digest| {
            let entry = store.verify_for_use(digest).map_err(store_error)?;
            Ok((entry.digest, entry.tree))
        })
        .collect()
}

fn store_error(error: EnvironmentStoreError) -> CliError {
    let fix = match &error {
        EnvironmentStoreError::Missing { .. } => "; `sf env list` lists the names",
        EnvironmentStoreError::NoStore { .. } => "; `sf env add NAME DIR` creates it",
        _ => "",
    };
    CliError::new(error.code(), format!("{error}{fix}"))
}
