//! `sf plugins list` and `sf plugins check`: the dynamic plugins on the plugin path and the
//! oats capabilities registered (asked of the `sf-oats` program beside sf, which links the
//! oats plugin sf never links), and one plugin library or capability directory checked.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::common::{CliError, Context, Output};
use sf_host::plugin::abi::{ABI_MAJOR, ABI_MINOR};
use sf_host::plugin::{
    KNOWN_CONTRACTS, LoadedPlugin, PluginPath, compiled_executor_tags, compiled_object_store_tags,
    library_file,
};

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// List the plugin path and the plugins whose manifests are on it (no library is opened)
    List,
    /// Load one plugin library and check it: manifest file, magic, ABI, embedded manifest;
    /// print its SHA-256 (what `sha256 = …` in a section pins). Given an oats capability
    /// directory, check it as `sf oats register` would, writing nothing
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The plugin library (its manifest file must be beside it), or an oats capability
    /// directory (holding oats.json)
    #[arg(value_name = "LIBRARY|DIR")]
    library: PathBuf,
}

pub fn run(context: &Context, command: PluginsCommand) -> Result<Output, CliError> {
    match command {
        PluginsCommand::List => list(context),
        PluginsCommand::Check(args) => check(args),
    }
}

fn list(context: &Context) -> Result<Output, CliError> {
    let config = context.backends.config()?;
    let path =
        PluginPath::from_env().map_err(|error| CliError::new(error.code(), error.to_string()))?;
    let found = path
        .discover()
        .map_err(|error| CliError::new(error.code(), error.to_string()))?;
    let mut text = String::from("plugin path:\n");
    for dir in path.dirs() {
        text.push_str(&format!("  {}\n", dir.display()));
    }
    let compiled = compiled_object_store_tags();
    if !compiled.is_empty() {
        text.push_str(&format!(
            "compiled in: object-store: {}\n",
            compiled.join(", ")
        ));
    }
    let compiled_executors = compiled_executor_tags();
    if !compiled_executors.is_empty() {
        text.push_str(&format!(
            "compiled in: executor: {}\n",
            compiled_executors.join(", ")
        ));
    }
    text.push_str("plugins:\n");
    let mut plugins = Vec::new();
    let mut problems = Vec::new();
    for candidate in &found {
        match &candidate.manifest {
            Ok(manifest) => {
                let present = candidate.library.is_file();
                // The file as it is now, read, never opened as a library: what `sha256 = …`
                // in a section would pin.
                let sha256 = present
                    .then(|| library_file::file_sha256(&candidate.library).ok())
                    .flatten();
                text.push_str(&format!(
                    "  {} {} ({}){}\n",
                    manifest.name,
                    manifest.version,
                    candidate.library.display(),
                    if present { "" } else { " [library missing]" }
                ));
                if let Some(sha256) = &sha256 {
                    text.push_str(&format!("    sha256: {sha256}\n"));
                }
                for (contract, tags) in &manifest.contracts {
                    text.push_str(&format!("    {contract}: {}\n", tags.join(", ")));
                }
                plugins.push(serde_json::json!({
                    "name": manifest.name,
                    "version": manifest.version,
                    "abi": manifest.abi,
                    "contracts": manifest.contracts,
                    "library": candidate.library.display().to_string(),
                    "manifest": candidate.manifest_file.display().to_string(),
                    "libraryPresent": present,
                    "sha256": sha256.map(|digest| digest.to_string()),
                }));
            }
            Err(error) => {
                text.push_str(&format!(
                    "  ! {}: {error}\n",
                    candidate.manifest_file.display()
                ));
                problems.push(serde_json::json!({
                    "manifest": candidate.manifest_file.display().to_string(),
                    "code": error.code(),
                    "message": error.to_string(),
                }));
            }
        }
    }
    let capabilities = match super::external::sf_oats_json(&["list"]) {
        Ok(listed) => listed["capabilities"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        Err(error) => {
            problems
                .push(serde_json::json!({"capabilities": error.code, "message": error.message}));
            Vec::new()
        }
    };
    text.push_str("oats capabilities:\n");
    for capability in &capabilities {
        text.push_str(&capability_line(capability));
    }
    let section = config.object_store_section();
    let executor = config.executor_section();
    text.push_str(&format!(
        "configured ({}): object_store = {}, executor = {}\n",
        config.origin(),
        section.tag(),
        executor.tag()
    ));
    Ok(Output {
        json: serde_json::json!({
            "pluginPath": path.dirs().iter().map(|dir| dir.display().to_string()).collect::<Vec<_>>(),
            "compiled": {"object-store": compiled, "executor": compiled_executors},
            "plugins": plugins,
            "capabilities": capabilities,
            "problems": problems,
            "configured": {"object_store": section.tag(), "executor": executor.tag()},
        }),
        text,
    })
}

/// One registered capability, as `sf plugins list` prints it.
fn capability_line(capability: &serde_json::Value) -> String {
    let field = |name: &str| capability[name].as_str().unwrap_or("?").to_owned();
    let roles: Vec<&str> = capability["roles"]
        .as_array()
        .map(|roles| roles.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let trusted = capability["trust"]
        .as_str()
        .unwrap_or(if capability["trusted"] == true {
            "trusted"
        } else {
            "untrusted"
        });
    sf_host::text_escape::lines(&format!(
        "  {} {} {trusted} (roles: {})\n    integrity: {}\n    path: {}\n",
        field("id"),
        field("version"),
        if roles.is_empty() {
            "none".to_owned()
        } else {
            roles.join(", ")
        },
        field("integrity"),
        field("path"),
    ))
    .into_owned()
}

/// An oats capability directory checked by `sf-oats check`.
fn check_capability(dir: &Path) -> Result<Output, CliError> {
    let checked = super::external::sf_oats_json(&["check", &dir.to_string_lossy()])?;
    let mut text = capability_line(&checked);
    text.insert_str(0, "capability ok:\n");
    Ok(Output {
        json: checked,
        text,
    })
}

fn check(args: CheckArgs) -> Result<Output, CliError> {
    // A directory holding an oats manifest is a capability, not a library.
    if args.library.join("oats.json").is_file() {
        return check_capability(&args.library);
    }
    let plugin = sf_host::plugin::load(&args.library)
        .map_err(|error| CliError::new(error.code(), error.to_string()))?;
    describe(&plugin)
}

fn describe(plugin: &LoadedPlugin) -> Result<Output, CliError> {
    let manifest = plugin.manifest();
    let sha256 = plugin
        .sha256()
        .map_err(|error| CliError::new(error.code(), error.to_string()))?;
    let unknown: Vec<&String> = manifest
        .contracts
        .keys()
        .filter(|contract| !KNOWN_CONTRACTS.contains(&contract.as_str()))
        .collect();
    let mut text = format!(
        "plugin {} {}: ok\n  library   {}\n  manifest  {}\n  abi       {ABI_MAJOR}.{} (this sf: \
         {ABI_MAJOR}.{ABI_MINOR})\n  sf-sdk    {}\n  sha256    {sha256} (pin it with sha256 = \
         \"{sha256}\" in the section it serves)\n",
        manifest.name,
        manifest.version,
        plugin.library().display(),
        plugin.manifest_file().display(),
        plugin.abi_minor(),
        plugin.sdk_version()
    );
    for (contract, tags) in &manifest.contracts {
        text.push_str(&format!("  {contract}: {}\n", tags.join(", ")));
    }
    for contract in &unknown {
        text.push_str(&format!(
            "  note: this sf does not know the contract {contract}; it will not be used\n"
        ));
    }
    Ok(Output {
        json: serde_json::json!({
            "name": manifest.name,
            "sha256": sha256.to_string(),
            "version": manifest.version,
            "abi": format!("{ABI_MAJOR}.{}", plugin.abi_minor()),
            "sdkVersion": plugin.sdk_version(),
            "contracts": manifest.contracts,
            "library": plugin.library().display().to_string(),
            "manifest": plugin.manifest_file().display().to_string(),
            "unknownContracts": unknown,
        }),
        text,
    })
}
