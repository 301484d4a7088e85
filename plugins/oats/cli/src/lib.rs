//! sf-oats-cli: the `sf oats` command line (the `sf-oats` program): register, list, show,
//! trust, untrust, upgrade, unregister, run, operation, gate and hook, with sf's output
//! conventions.
//!
//! - Human-readable text on stdout by default; with `--json`, stdout is exactly one envelope,
//!   `{"schemaVersion":1,"ok":true,"result":…}` or
//!   `{"schemaVersion":1,"ok":false,"error":{"code":…,"message":…}}`.
//! - Exit status 0 only on success; 1 when the command failed; 2 for a usage error. A
//!   command run (`run`) exits with the script's status, with `--json` or without, so that a
//!   step that checks the status never takes a failed script for success; without `--json`
//!   it passes the script's stdout and stderr through, with control characters other than
//!   newline and tab shown escaped (as all text output is: [`sf_io::text_escape::lines`]);
//!   `--json` carries the exact text in its envelope (`ok: true`: the run itself worked).
//! - The registry lives in `<state>/oats`, where `<state>` is `--state`, else `$SF_STATE_DIR`,
//!   else `$XDG_STATE_HOME/sf`, else `$HOME/.local/state/sf`.
//! - Capabilities run confined by sandbox-exec with the Node runtime; its launcher is found
//!   beside this program.
//! - A run gets, of the caller's environment, only the values of names the capability
//!   declares in `environment` (and only once trusted).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use sf_contracts::{Executor, Gate, GateAnswer, RunStatus};
use sf_io::text_escape;
use sf_oats::{ErrorCode, OatsError};
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

use sf_oats::hooks::{LifecycleContext, RetireOutcome, SpawnOutcome};
use sf_oats::manifest::HookEvent;
use sf_oats::operation::{OperationOutcome, OperationTarget};
use sf_oats::state::state_dir;
use sf_oats::{Oats, OatsBindingGate, OatsBindingGateConfig, OatsOptions, RunContext};

/// `schemaVersion` of the envelope.
pub const SCHEMA_VERSION: u64 = 1;

/// sf oats: oats capability packages as sf plugins.
#[derive(Debug, Parser)]
#[command(name = "sf oats", bin_name = "sf oats", version)]
pub struct Cli {
    /// Print exactly one JSON envelope on stdout instead of text
    #[arg(long, global = true)]
    json: bool,
    /// sf's state directory (default: $SF_STATE_DIR, $XDG_STATE_HOME/sf, ~/.local/state/sf)
    #[arg(long, global = true, value_name = "DIR")]
    state: Option<PathBuf>,
    /// The operator's values for capabilities' declared environment variables: a private
    /// (0600) JSON object of NAME: "value"; sf-oats's own environment never reaches a run
    #[arg(long, global = true, value_name = "FILE")]
    environment: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Register the capability in DIR (strict manifest, containment, integrity); it starts untrusted
    Register { dir: PathBuf },
    /// List registered capabilities
    List,
    /// Show a capability: its registration and its executable surface
    Show { id: String },
    /// Review the executable surface and approve exactly the registered bytes
    Trust(TrustArgs),
    /// Revoke a capability's trust: its executable surface is refused until trusted again
    Untrust {
        id: String,
        /// Even while a frozen Slice pins the capability (its checks become Inconclusive)
        #[arg(long)]
        force: bool,
    },
    /// Replace a capability's registration with the one in DIR (a new version); it starts
    /// untrusted
    Upgrade {
        id: String,
        dir: PathBuf,
        /// Even while a frozen Slice pins the capability (its checks become Inconclusive)
        #[arg(long)]
        force: bool,
    },
    /// Remove a capability's registration (its directory is left alone)
    Unregister {
        id: String,
        /// Even while a frozen Slice pins the capability (its checks become Inconclusive)
        #[arg(long)]
        force: bool,
    },
    /// Check the capability in DIR as register would, writing nothing
    Check { dir: PathBuf },
    /// Run a command of a capability: node <script> <tokens…> <ARGS…>
    Run(RunArgs),
    /// Run an operation of a capability and read its one envelope
    Operation(OperationArgs),
    /// Ask the capability's binding.check, as the gate would
    Gate(GateArgs),
    /// Run lifecycle hooks for a home directory (spawn, retire, soul-scaffold)
    Hook(HookArgs),
    /// Stage an operation as a Slice's check: write the files of its run's harness into OUT
    /// (what `sf slice freeze` and `sf collect` ask for; see docs/oats.md)
    Stage(StageArgs),
}

#[derive(Debug, Args)]
struct StageArgs {
    id: String,
    operation: String,
    /// A declared argument, NAME=VALUE; repeatable
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// The integrity the Slice pinned: refused unless it is the registered one
    #[arg(long)]
    integrity: Option<String>,
    /// The directory inside the run the check reads (its working directory)
    #[arg(long, value_name = "DIR")]
    tree: String,
    /// Record that the frozen Slice in this directory pins the capability
    #[arg(long, value_name = "SLICE")]
    pin: Option<PathBuf>,
    /// Where the harness is written: a directory that does not exist yet
    #[arg(long, value_name = "OUT")]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct TrustArgs {
    id: String,
    /// The integrity you reviewed (from `show`); trust is refused if it is not the registered one
    #[arg(long)]
    integrity: Option<String>,
}

#[derive(Debug, Args)]
struct RunArgs {
    id: String,
    command: String,
    /// Arguments after the command's own tokens
    #[arg(last = true)]
    args: Vec<String>,
    /// A setting value, NAME=JSON (a bare word is a string); repeatable
    #[arg(long = "setting", value_name = "NAME=VALUE")]
    settings: Vec<String>,
}

#[derive(Debug, Args)]
struct OperationArgs {
    id: String,
    name: String,
    /// A declared argument, NAME=VALUE; repeatable
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// The instance home (required by home operations)
    #[arg(long)]
    home: Option<PathBuf>,
    /// A setting value, NAME=JSON; repeatable
    #[arg(long = "setting", value_name = "NAME=VALUE")]
    settings: Vec<String>,
}

#[derive(Debug, Args)]
struct GateArgs {
    id: String,
    /// A JSON file holding the bound binding the check is asked about
    #[arg(long)]
    binding: Option<PathBuf>,
    /// The action named in the check's input
    #[arg(long)]
    action: Option<String>,
}

#[derive(Debug, Args)]
struct HookArgs {
    /// spawn, retire or soul-scaffold
    event: String,
    /// The home directory (spawn creates it)
    #[arg(long)]
    home: PathBuf,
    /// Capabilities whose hooks run (spawn, soul-scaffold); default: every registered one
    #[arg(long = "capability", value_name = "ID")]
    capabilities: Vec<String>,
    /// retire: remove the home even when work is outstanding, and report what is
    #[arg(long)]
    force: bool,
    /// A setting of one capability, ID:NAME=JSON; repeatable
    #[arg(long = "setting", value_name = "ID:NAME=VALUE")]
    settings: Vec<String>,
}

/// A command's outcome: its JSON result and its text, or an error.
struct Done {
    json: Value,
    text: String,
    /// The exit status of a command run: the script's (in both modes).
    status: Option<u8>,
    /// Bytes passed through on stdout and stderr (text mode only).
    passthrough: Option<(Vec<u8>, Vec<u8>)>,
}

struct Failure {
    code: String,
    message: String,
    /// What the failure carries besides its words (an operation's `details`); `null` for none.
    details: Value,
}

impl From<crate::OatsError> for Failure {
    fn from(error: crate::OatsError) -> Self {
        Self {
            code: error.code().to_owned(),
            message: format!("{}: {}", error.subject, error.message),
            details: Value::Null,
        }
    }
}

fn done(json: Value, text: String) -> Result<Done, Failure> {
    Ok(Done {
        json,
        text,
        status: None,
        passthrough: None,
    })
}

fn open(state: Option<&Path>) -> Result<Oats, Failure> {
    let Some(state) = state_dir(state) else {
        return Err(Failure {
            code: "state-directory".into(),
            message: "no state directory: pass --state DIR or set SF_STATE_DIR".into(),
            details: Value::Null,
        });
    };
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&state)
            .map_err(|error| Failure {
                code: "state-directory".into(),
                message: format!("{}: {error}", state.display()),
                details: Value::Null,
            })?;
    }
    let state = state.canonicalize().map_err(|error| Failure {
        code: "state-directory".into(),
        message: format!("{}: {error}", state.display()),
        details: Value::Null,
    })?;
    let executor = node_sandbox(None)?;
    Ok(Oats::new(
        &state.join("oats"),
        executor,
        OatsOptions::default(),
    )?)
}

/// sandbox-exec with the Node runtime (`/usr/bin/node` and the library directories), its
/// launcher at `launcher` or, when `None`, found beside the current executable: how
/// capabilities run, from this program and from the oats gate plugin alike.
pub fn node_sandbox(launcher: Option<PathBuf>) -> Result<Arc<dyn Executor>, OatsError> {
    let mut config = SandboxConfig::new(RuntimeConfig::node());
    config.launcher = launcher;
    let executor = SandboxExecutor::new(config).map_err(|error| {
        OatsError::new(
            ErrorCode::ExecutorUnavailable,
            "sandbox-exec",
            error.to_string(),
        )
    })?;
    Ok(Arc::new(executor))
}

fn parse_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

fn pairs(items: &[String], what: &str) -> Result<Vec<(String, String)>, Failure> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| Failure {
                    code: "E_BAD_ARGS".into(),
                    message: format!("{what} {item:?} is not NAME=VALUE"),
                    details: Value::Null,
                })
        })
        .collect()
}

/// The caller's values for the names `id` declares.
/// The run context of capability `id`: of the operator's environment file's values (never
/// sf-oats's own environment), those of the names it declares, and the settings given.
fn context_for(
    oats: &Oats,
    id: &str,
    environment: Option<&Path>,
    settings: &[(String, String)],
) -> Result<RunContext, Failure> {
    let mut context = oats.declared_environment(id, environment)?;
    for (name, value) in settings {
        context.settings.insert(name.clone(), parse_value(value));
    }
    Ok(context)
}

fn entry_json(entry: &sf_oats::registry::RegistryEntry) -> Value {
    json!({
        "id": entry.id,
        "version": entry.version,
        "path": entry.path.display().to_string(),
        "integrity": entry.integrity,
        "trusted": entry.trusted,
        "trust": sf_oats::trust_state_of(entry),
        "roles": sf_oats::roles_of(entry),
    })
}

/// `check DIR`: the capability examined as `register` would, reading and writing no state.
fn check(dir: &Path) -> Result<Done, Failure> {
    let examined = sf_oats::examine(dir)?;
    let manifest = &examined.manifest;
    let text = format!(
        "capability {} {}: ok\n  path       {}\n  integrity  {}\n  roles      {}\n  {}\n",
        manifest.capability,
        manifest.version,
        examined.root.display(),
        examined.artifact.integrity,
        manifest.roles().join(", "),
        if examined.executable {
            "executable: trusted only once reviewed (sf oats show, sf oats trust)"
        } else {
            "instructions only: nothing to trust"
        }
    );
    done(
        json!({
            "id": manifest.capability,
            "version": manifest.version,
            "path": examined.root.display().to_string(),
            "integrity": examined.artifact.integrity,
            "executable": examined.executable,
            "roles": manifest.roles(),
        }),
        text,
    )
}

fn execute(cli: Cli, json_mode: bool, stderr: &mut dyn Write) -> Result<Done, Failure> {
    if let Command::Check { dir } = &cli.command {
        return check(dir);
    }
    // The commands that only read create nothing: with no registry yet, nothing is registered.
    if matches!(cli.command, Command::List | Command::Show { .. }) {
        let registry = state_dir(cli.state.as_deref()).map(|dir| dir.join("oats"));
        if registry.is_none_or(|dir| std::fs::symlink_metadata(dir).is_err()) {
            return match cli.command {
                Command::Show { id } => Err(sf_oats::registry::unknown(&id).into()),
                _ => done(
                    json!({"capabilities": []}),
                    "no capability is registered\n".into(),
                ),
            };
        }
    }
    let oats = open(cli.state.as_deref())?;
    let environment = cli.environment;
    match cli.command {
        Command::Register { dir } => {
            let registration = oats.register(&dir)?;
            let entry = &registration.entry;
            let text = format!(
                "registered {} {} from {}\nintegrity {}\n{}\n",
                entry.id,
                entry.version,
                entry.path.display(),
                entry.integrity,
                if !registration.executable {
                    "instructions only: nothing to trust".to_owned()
                } else if entry.trusted {
                    "trusted (the bytes are unchanged)".to_owned()
                } else {
                    format!(
                        "untrusted: review with `sf oats show {0}`, then `sf oats trust {0}`",
                        entry.id
                    )
                }
            );
            let mut json = entry_json(entry);
            json["executable"] = json!(registration.executable);
            done(json, text)
        }
        Command::Check { dir } => check(&dir),
        Command::Untrust { id, force } => {
            let entry = oats.untrust(&id, force)?;
            let text = format!(
                "untrusted {}: its executable surface is refused until `sf oats trust {}`\n",
                entry.id, entry.id
            );
            done(entry_json(&entry), text)
        }
        Command::Upgrade { id, dir, force } => {
            let registration = oats.upgrade(&id, &dir, force)?;
            let entry = &registration.entry;
            let text = format!(
                "upgraded {} to {} from {}\nintegrity {}\nuntrusted: review with `sf oats show \
                 {}`, then `sf oats trust {}`\n",
                entry.id,
                entry.version,
                entry.path.display(),
                entry.integrity,
                entry.id,
                entry.id
            );
            let mut json = entry_json(entry);
            json["executable"] = json!(registration.executable);
            done(json, text)
        }
        Command::Unregister { id, force } => {
            let entry = oats.unregister(&id, force)?;
            let text = format!(
                "unregistered {} (its directory {} is left alone)\n",
                entry.id,
                entry.path.display()
            );
            done(entry_json(&entry), text)
        }
        Command::List => {
            let entries = oats.list()?;
            let mut text = String::new();
            for entry in &entries {
                text.push_str(&format!(
                    "{} {} {} {}\n",
                    entry.id,
                    entry.version,
                    sf_oats::trust_state_of(entry),
                    entry.path.display()
                ));
            }
            if entries.is_empty() {
                text.push_str("no capability is registered\n");
            }
            done(
                json!({"capabilities": entries.iter().map(entry_json).collect::<Vec<_>>()}),
                text,
            )
        }
        Command::Show { id } => {
            let shown = oats.show(&id)?;
            let mut json = entry_json(&shown.entry);
            let mut text = format!(
                "{} {} ({})\npath {}\n",
                shown.entry.id,
                shown.entry.version,
                sf_oats::trust_state_of(&shown.entry),
                shown.entry.path.display()
            );
            match &shown.state {
                Ok((manifest, surface)) => {
                    json["description"] = json!(manifest.description);
                    json["surface"] = surface.to_json();
                    text.push_str(&surface.to_text());
                }
                Err(error) => {
                    json["problem"] = json!({"code": error.code(), "message": error.message});
                    text.push_str(&format!("problem ({}): {}\n", error.code(), error.message));
                }
            }
            done(json, text)
        }
        Command::Trust(args) => {
            // Disclose before persisting: the surface goes to stderr first.
            if !json_mode
                && let Ok(shown) = oats.show(&args.id)
                && let Ok((_, surface)) = &shown.state
            {
                let _ = writeln!(
                    stderr,
                    "approving the executable surface of {}:\n{}",
                    args.id,
                    text_escape::lines(&surface.to_text())
                );
            }
            let outcome = oats.trust(&args.id, args.integrity.as_deref())?;
            let text = if outcome.needed {
                format!(
                    "trusted {} at {}\n",
                    outcome.entry.id, outcome.entry.integrity
                )
            } else {
                format!(
                    "{} has no executable surface; nothing needs approval\n",
                    outcome.entry.id
                )
            };
            let mut json = entry_json(&outcome.entry);
            json["needed"] = json!(outcome.needed);
            json["surface"] = outcome.surface.to_json();
            done(json, text)
        }
        Command::Run(args) => {
            let settings = pairs(&args.settings, "--setting")?;
            let context = context_for(&oats, &args.id, environment.as_deref(), &settings)?;
            let outcome = oats.run_command(&args.id, &args.command, &args.args, &context)?;
            let code = match outcome.status {
                RunStatus::Exited => outcome.exit_code.unwrap_or(1).clamp(0, 255) as u8,
                RunStatus::Signalled => 128u8.saturating_add(outcome.signal.unwrap_or(0) as u8),
                _ => 125,
            };
            let json = json!({
                "capability": outcome.capability,
                "command": outcome.command,
                "argv": outcome.argv,
                "status": outcome.status.code(),
                "exitCode": outcome.exit_code,
                "signal": outcome.signal,
                "stdout": String::from_utf8_lossy(&outcome.stdout),
                "stderr": String::from_utf8_lossy(&outcome.stderr),
                "program": outcome.identities.program.to_string(),
            });
            Ok(Done {
                json,
                text: String::new(),
                status: Some(code),
                passthrough: Some((outcome.stdout, outcome.stderr)),
            })
        }
        Command::Operation(args) => {
            let settings = pairs(&args.settings, "--setting")?;
            let operation_args = pairs(&args.args, "--arg")?;
            let context = context_for(&oats, &args.id, environment.as_deref(), &settings)?;
            let run = oats.run_operation(
                &args.id,
                &args.name,
                &operation_args,
                &OperationTarget {
                    home: args.home.as_deref(),
                },
                &context,
            )?;
            match run.outcome {
                OperationOutcome::Succeeded { receipt } => {
                    let text = format!(
                        "{}\n",
                        serde_json::to_string_pretty(&receipt["result"]).unwrap_or_default()
                    );
                    done(receipt, text)
                }
                OperationOutcome::Failed {
                    code,
                    message,
                    details,
                } => Err(Failure {
                    code,
                    message,
                    details,
                }),
            }
        }
        Command::Gate(args) => {
            let context = context_for(&oats, &args.id, environment.as_deref(), &[])?;
            let gate = OatsBindingGate::new(
                std::sync::Arc::new(oats),
                OatsBindingGateConfig {
                    capability: args.id.clone(),
                    binding_file: args.binding,
                    action: args.action,
                    state: None,
                    environment_file: environment.clone(),
                },
            )
            .with_context(context);
            match gate.current(Instant::now() + Duration::from_secs(30)) {
                Ok(GateAnswer::Proceed) => done(
                    json!({"capability": args.id, "answer": "proceed"}),
                    "proceed\n".into(),
                ),
                Ok(GateAnswer::Refuse { reason }) => Err(Failure {
                    code: "gate-refused".into(),
                    message: reason,
                    details: Value::Null,
                }),
                Err(error) => Err(Failure {
                    code: format!("gate-{}", error.code()),
                    message: error.to_string(),
                    details: Value::Null,
                }),
            }
        }
        Command::Hook(args) => hook(&oats, args, environment.as_deref()),
        Command::Stage(args) => stage(&oats, args),
    }
}

/// `stage`: the operation staged as a check, its harness written into a new directory.
fn stage(oats: &Oats, args: StageArgs) -> Result<Done, Failure> {
    let operation_args = pairs(&args.args, "--arg")?;
    let staged = oats.stage_check(
        &args.id,
        &args.operation,
        &operation_args,
        args.integrity.as_deref(),
        &args.tree,
        args.pin.as_deref(),
    )?;
    sf_oats::check::write_files(&args.out, &staged.files)?;
    let text = format!(
        "staged {} {} operation {} ({} files) in {}\nintegrity {}\n",
        staged.capability,
        staged.version,
        args.operation,
        staged.files.len(),
        args.out.display(),
        staged.integrity
    );
    done(
        json!({
            "capability": staged.capability,
            "version": staged.version,
            "integrity": staged.integrity,
            "operation": args.operation,
            "out": args.out.display().to_string(),
            "files": staged.files.len(),
        }),
        text,
    )
}

fn hook(oats: &Oats, args: HookArgs, environment: Option<&Path>) -> Result<Done, Failure> {
    let Some(event) = HookEvent::parse(&args.event) else {
        return Err(Failure {
            code: "unsupported-hook".into(),
            message: format!(
                "{:?} is not a hook event sf runs (spawn, retire, soul-scaffold)",
                args.event
            ),
            details: Value::Null,
        });
    };
    let home = if args.home.is_absolute() {
        args.home.clone()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(&args.home))
            .unwrap_or(args.home.clone())
    };
    let ids: Vec<String> = if args.capabilities.is_empty() {
        oats.list()?.into_iter().map(|entry| entry.id).collect()
    } else {
        args.capabilities.clone()
    };
    let mut context = LifecycleContext::default();
    for id in &ids {
        context
            .capabilities
            .insert(id.clone(), context_for(oats, id, environment, &[])?);
    }
    for item in &args.settings {
        let Some((id, rest)) = item.split_once(':') else {
            return Err(Failure {
                code: "E_BAD_ARGS".into(),
                message: format!("--setting {item:?} is not ID:NAME=VALUE"),
                details: Value::Null,
            });
        };
        let (name, value) = pairs(&[rest.to_owned()], "--setting")?.remove(0);
        context
            .capabilities
            .entry(id.to_owned())
            .or_default()
            .settings
            .insert(name, parse_value(&value));
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    match event {
        HookEvent::Spawn => {
            let outcome = oats.spawn(&home, &refs, &context)?;
            let json = outcome.to_json();
            match &outcome {
                SpawnOutcome::Spawned { env, warnings, .. } => {
                    let mut text = format!("spawned {}\n", home.display());
                    for (name, value) in env {
                        text.push_str(&format!("env {name}={value}\n"));
                    }
                    for warning in warnings {
                        text.push_str(&format!("warning: {warning}\n"));
                    }
                    done(json, text)
                }
                SpawnOutcome::RolledBack { code, failure, .. }
                | SpawnOutcome::Quarantined { code, failure, .. } => Err(Failure {
                    code: (*code).to_owned(),
                    message: failure.clone(),
                    details: Value::Null,
                }),
            }
        }
        HookEvent::Retire => {
            let outcome = oats.retire(&home, args.force, &context)?;
            let json = outcome.to_json();
            match &outcome {
                RetireOutcome::Retired { .. } => {
                    done(json, format!("retired {}\n", home.display()))
                }
                RetireOutcome::Cleared { .. } => done(
                    json,
                    format!("quarantine cleared; removed {}\n", home.display()),
                ),
                RetireOutcome::Forced { outstanding } => {
                    let mut text = format!("removed {}\n", home.display());
                    for item in outstanding {
                        text.push_str(&format!(
                            "outstanding, now yours: {}: {}\n",
                            item.capability, item.reason
                        ));
                    }
                    done(json, text)
                }
                RetireOutcome::Blocked { problems, .. } => Err(Failure {
                    code: "retire-blocked".into(),
                    message: format!("the home is kept: {}", problems.join("; ")),
                    details: Value::Null,
                }),
                RetireOutcome::StillQuarantined { outstanding, .. } => Err(Failure {
                    code: "rollback-incomplete".into(),
                    message: format!(
                        "still quarantined; outstanding: {}",
                        outstanding
                            .iter()
                            .map(|o| format!("{} ({})", o.capability, o.reason))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                    details: Value::Null,
                }),
            }
        }
        HookEvent::SoulScaffold => {
            let results = oats.scaffold(&home, &refs, &context)?;
            let failed: Vec<String> = results
                .iter()
                .filter(|r| !r.succeeded)
                .map(|r| format!("{}: {}", r.capability, r.message))
                .collect();
            if !failed.is_empty() {
                return Err(Failure {
                    code: "hook-failed".into(),
                    message: failed.join("; "),
                    details: Value::Null,
                });
            }
            let ran: BTreeMap<&str, &str> = results
                .iter()
                .map(|r| (r.capability.as_str(), r.message.as_str()))
                .collect();
            done(
                json!({"ran": ran}),
                format!("soul-scaffold ran for {} capabilities\n", results.len()),
            )
        }
    }
}

/// The envelope of an outcome.
fn envelope(outcome: &Result<Done, Failure>) -> Value {
    match outcome {
        Ok(done) => json!({"schemaVersion": SCHEMA_VERSION, "ok": true, "result": done.json}),
        Err(failure) => json!({
            "schemaVersion": SCHEMA_VERSION,
            "ok": false,
            "error": error_json(failure),
        }),
    }
}

/// The envelope's `error`: `{code, message}`, with `details` when the failure has some.
fn error_json(failure: &Failure) -> Value {
    let mut error = json!({"code": failure.code, "message": failure.message});
    if !failure.details.is_null() {
        error["details"] = failure.details.clone();
    }
    error
}

/// Runs the command line `args` (the first is the program name), writing to `stdout` and
/// `stderr`; returns the exit status.
pub fn run(
    args: impl IntoIterator<Item = OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> u8 {
    let args: Vec<OsString> = args.into_iter().collect();
    let json_mode = args.iter().skip(1).any(|arg| arg == "--json");
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                let _ = write!(stdout, "{}", error.render());
                return 0;
            }
            if json_mode {
                let message = error.render().to_string();
                let outcome = Err(Failure {
                    code: "usage".into(),
                    message: message.trim_end().trim_start_matches("error: ").to_owned(),
                    details: Value::Null,
                });
                let _ = writeln!(stdout, "{}", envelope(&outcome));
            } else {
                let _ = write!(stderr, "{}", error.render());
            }
            return 2;
        }
    };
    let json_mode = cli.json;
    let outcome = execute(cli, json_mode, stderr);
    if json_mode {
        let _ = writeln!(stdout, "{}", envelope(&outcome));
        return match &outcome {
            Ok(done) => done.status.unwrap_or(0),
            Err(_) => 1,
        };
    }
    match outcome {
        Ok(done) => {
            // Nothing from the capability (its output, its manifest's names and
            // descriptions) reaches the terminal with its control characters unescaped.
            if let Some((out, err)) = &done.passthrough {
                let _ = stdout.write_all(text_escape::lines_bytes(out).as_bytes());
                let _ = stderr.write_all(text_escape::lines_bytes(err).as_bytes());
            } else {
                let _ = stdout.write_all(text_escape::lines(&done.text).as_bytes());
            }
            done.status.unwrap_or(0)
        }
        Err(failure) => {
            let _ = writeln!(
                stderr,
                "sf oats: error ({}): {}",
                failure.code,
                text_escape::lines(&failure.message)
            );
            if !failure.details.is_null() {
                let _ = writeln!(
                    stderr,
                    "sf oats: details: {}",
                    text_escape::lines(&failure.details.to_string())
                );
            }
            1
        }
    }
}

/// Runs the command line of the process.
pub fn main() -> ExitCode {
    let code = run(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    ExitCode::from(code)
}
