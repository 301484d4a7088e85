//! `sf env add`, `sf env build`, `sf env remove`, `sf env show` and `sf env list`: the
//! dependency environments (a venv, a `node_modules`, a toolchain) that checks run in, kept
//! read-only by digest in the store that `[environments] store` names ([`sf_app::env`]),
//! added from a directory or built from a lockfile in the sandbox ([`sf_app::env_build`]).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::env::{self, AddRequest};
use sf_app::env_build::{self, BuildRequest, Recipe};
use sf_host::environment_store::{EnvironmentEntry, EnvironmentLimits};

use super::common::{CliError, Context, Output};

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// Copy DIR into the store under NAME; a check binds it, read-only, at DIR's absolute path
    /// (or, with --root, as its run's whole root)
    Add(AddArgs),
    /// Build an environment from the lockfile in a commit's tree (the target by default),
    /// inside the sandbox, its network limited to the package registries, and store it under
    /// NAME
    Build(BuildArgs),
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
pub struct BuildArgs {
    /// The new name (a name is re-pointed only with --replace)
    #[arg(value_name = "NAME")]
    name: String,
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The factory commit whose lockfile is read (40 hex digits); default: the target
    #[arg(long, value_name = "REV")]
    commit: Option<String>,
    /// The package tool: pip (a requirements file), uv (uv.lock with pyproject.toml), npm
    /// (package-lock.json with package.json) or cargo (Cargo.lock with Cargo.toml, on a
    /// --toolchain)
    #[arg(long, value_name = "RECIPE")]
    recipe: String,
    /// The lockfile's path in the tree; default: the recipe's usual file (requirements.txt,
    /// uv.lock, package-lock.json, Cargo.lock)
    #[arg(long, value_name = "PATH")]
    lockfile: Option<String>,
    /// A dependency group to install (a uv.lock's)
    #[arg(long = "group", value_name = "NAME")]
    groups: Vec<String>,
    /// An extra to install (a uv.lock's)
    #[arg(long = "extra", value_name = "NAME")]
    extras: Vec<String>,
    /// The toolchain environment (cargo, rustc and their libraries) a cargo build copies and
    /// vendors the locked crates beside
    #[arg(long, value_name = "NAME")]
    toolchain: Option<String>,
    /// Point NAME at the new environment whatever it named before: a new version
    #[arg(long)]
    replace: bool,
    /// How long the build may take
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    timeout_seconds: u64,
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
        EnvCommand::Build(args) => build(context, args),
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

fn build(context: &Context, args: BuildArgs) -> Result<Output, CliError> {
    if args.timeout_seconds == 0 || args.timeout_seconds > 3600 {
        return Err(sf_app::error::AppError::invalid(
            format!("--timeout-seconds {}", args.timeout_seconds),
            "a build takes 1 to 3600 seconds",
        ));
    }
    let request = BuildRequest {
        name: args.name,
        identity: args.identity,
        commit: args.commit,
        recipe: Recipe::parse(&args.recipe)?,
        lockfile: args.lockfile,
        groups: args.groups,
        extras: args.extras,
        toolchain: args.toolchain,
        replace: args.replace,
        limits: EnvironmentLimits::default(),
        timeout: std::time::Duration::from_secs(args.timeout_seconds),
    };
    let built = env_build::build(&context.backends, &request)?;
    let mut output = describe(&built.entry);
    let record = &built.record;
    output.text.push_str(&format!(
        "recipe  {}\nfrom    {} at {} ({})\n",
        record.recipe, record.lockfile, record.commit, record.inputs[&record.lockfile]
    ));
    for (tool, version) in &record.tools {
        output.text.push_str(&format!("tool    {tool} {version}\n"));
    }
    for registry in &record.registries {
        output.text.push_str(&format!("reached {registry}\n"));
    }
    if let Some((earlier, path)) = &built.differs_from {
        output.text.push_str(&format!(
            "not reproducible: {path} differs from {earlier}, built from the same inputs\n"
        ));
    }
    if built.rebuilt {
        output
            .text
            .push_str("the same environment was built before: its record is kept\n");
    }
    if let Some(before) = &built.replaced {
        output.text.push_str(&format!(
            "replaced {before} (kept: Slices frozen with it still use it)\n"
        ));
        output.json["replaced"] = serde_json::json!(before.to_string());
    }
    output.json["build"] = serde_json::json!({
        "recipe": record.recipe,
        "lockfile": record.lockfile,
        "groups": record.groups,
        "extras": record.extras,
        "commit": record.commit,
        "inputs": record.inputs.iter().map(|(path, digest)| (path.clone(), digest.to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        "tools": record.tools,
        "registries": record.registries,
        "toolchain": record.toolchain.as_ref().map(|digest| digest.to_string()),
        "differsFrom": built.differs_from.as_ref().map(|(environment, path)| {
            serde_json::json!({"environment": environment.to_string(), "path": path})
        }),
        "rebuilt": built.rebuilt,
    });
    Ok(output)
}

fn list(context: &Context) -> Result<Output, CliError> {
    let env::Listed {
        store: root,
        names,
        built,
    } = env::list(&context.backends)?;
    let width = names.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut text = String::new();
    if names.is_empty() {
        text.push_str(&format!("no environments in {}\n", root.display()));
    }
    for (name, digest) in &names {
        match built.get(digest) {
            Some((recipe, lockfile, lockfile_digest)) => text.push_str(&format!(
                "{name:<width$}  {digest}  built by {recipe} from {lockfile} ({lockfile_digest})\n"
            )),
            None => text.push_str(&format!("{name:<width$}  {digest}\n")),
        }
    }
    let environments: Vec<serde_json::Value> = names
        .iter()
        .map(|(name, digest)| {
            let mut listed = serde_json::json!({"name": name, "digest": digest.to_string()});
            if let Some((recipe, lockfile, lockfile_digest)) = built.get(digest) {
                listed["built"] = serde_json::json!({
                    "recipe": recipe,
                    "lockfile": lockfile,
                    "lockfileDigest": lockfile_digest,
                });
            }
            listed
        })
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
