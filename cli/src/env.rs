//! `sf env add`, `sf env remove`, `sf env show` and `sf env list`: the dependency environments (a venv, a
//! `node_modules`, a toolchain) that checks run in, kept read-only by digest in the store that
//! `[environments] store` names ([`sf_app::env`]).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::env::{self, AddRequest};
use sf_host::environment_store::{EnvironmentEntry, EnvironmentLimits};

use super::common::{CliError, Context, Output};

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Copy DIR into the store under NAME; a check binds it, read-only, at DIR's absolute path
    /// (or, with --root, as its run's whole root)
    Add(AddArgs),
    /// Remove a name; the environment it named stays stored for the Slices frozen with it
    Remove(RemoveArgs),
    /// Verify a stored environment, by name or digest, and print it
    Show(ShowArgs),
    /// List every environment name in the store with its digest
    List,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The new name: 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit;
    /// a name is re-pointed only with --replace
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
    /// Point NAME at this tree whatever it named before: a new version. Slices frozen with the
    /// old one keep it (they pin its digest, and it stays stored)
    #[arg(long)]
    replace: bool,
    /// At most this many entries (files, links and directories together)
    #[arg(long, value_name = "N", default_value_t = EnvironmentLimits::default().files)]
    max_files: u64,
    /// At most this many bytes of file contents in all
    #[arg(long, value_name = "BYTES", default_value_t = EnvironmentLimits::default().bytes)]
    max_bytes: u64,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The name to remove
    #[arg(value_name = "NAME")]
    name: String,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// An environment name, or a digest (`sha256:` and 64 hex characters)
    #[arg(value_name = "NAME|DIGEST")]
    environment: String,
}

pub fn run(context: &Context, command: EnvCommand) -> Result<Output, CliError> {
    let backends = &context.backends;
    match command {
        EnvCommand::Add(args) => {
            let request = AddRequest {
                name: args.name,
                dir: args.dir,
                root: args.root,
                limits: EnvironmentLimits {
                    files: args.max_files,
                    bytes: args.max_bytes,
                },
                replace: args.replace,
            };
            let added = env::add(backends, &request)?;
            let mut output = describe(&added.entry);
            if let Some(before) = &added.replaced {
                output.text.push_str(&format!(
                    "replaced {before} (kept: Slices frozen with it still use it)\n"
                ));
                output.json["replaced"] = serde_json::json!(before.to_string());
            }
            Ok(output)
        }
        EnvCommand::Remove(args) => {
            let digest = env::remove(backends, &args.name)?;
            Ok(Output {
                json: serde_json::json!({"name": args.name, "removed": digest.to_string()}),
                text: format!(
                    "removed the name {} (it named {digest}, which stays stored for the Slices \
                     frozen with it)\n",
                    args.name
                ),
            })
        }
        EnvCommand::Show(args) => {
            env::show(backends, &args.environment).map(|entry| describe(&entry))
        }
        EnvCommand::List => list(context),
    }
}

fn list(context: &Context) -> Result<Output, CliError> {
    let env::Listed { store: root, names } = env::list(&context.backends)?;
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
