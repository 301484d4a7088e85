//! [`Oats`]: registering, showing and trusting capabilities, and preparing and running
//! their commands. Operations, binding phases and hooks are in their own modules, over the
//! same preparation: before every run the artifact is walked and hashed again, compared with
//! the registered integrity (a difference resets trust and refuses the run), its manifest
//! is read from the hashed bytes, containment is checked again, and an executable surface
//! runs only when trusted.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::{CancelToken, Executor, RunAnswer, RunIdentities, RunStatus};
use sf_io::dir_fd::{DirFd, DirFdError};

use crate::artifact::{self, Artifact};
use crate::containment;
use crate::error::{ErrorCode, OatsError, Result};
use crate::launch::{self, Cwd, Launch, Place};
use crate::manifest::{self, MANIFEST_FILE, MANIFEST_LIMITS, Manifest};
use crate::registry::{Pins, Registry, RegistryEntry};

/// The largest value of one environment variable (bytes of UTF-8).
pub const MAX_ENVIRONMENT_VALUE: usize = 8192;

/// Bounds and placement for runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OatsOptions {
    /// Where the Executor places a run's input snapshot (sandbox-exec: `/sf/input`).
    pub input_dir: String,
    /// The timeout of a command (oats sets none; sf bounds every run).
    pub command_timeout: Duration,
    /// The timeout of an operation (oats: at most 240 s).
    pub operation_timeout: Duration,
    /// The timeout of a hook (oats: 120 s).
    pub hook_timeout: Duration,
    /// The timeout of a binding phase (oats: at most 30 s).
    pub binding_timeout: Duration,
    /// The most stdout (and, separately, stderr) bytes kept from a command or operation;
    /// hooks keep at most 1 MiB of this, and binding phases keep 1 MiB.
    pub output_limit: u64,
}

impl Default for OatsOptions {
    fn default() -> Self {
        Self {
            input_dir: sf_contracts::INPUT_DIR.to_owned(),
            command_timeout: Duration::from_secs(600),
            operation_timeout: Duration::from_secs(240),
            hook_timeout: Duration::from_secs(120),
            binding_timeout: Duration::from_secs(30),
            output_limit: 16 * 1024 * 1024,
        }
    }
}

/// What a caller supplies to one run.
#[derive(Clone, Debug, Default)]
pub struct RunContext {
    /// Values for names the capability declares in `environment` (only those; only once
    /// trusted). Each value: no NUL, CR or LF, at most 8192 bytes.
    pub environment: BTreeMap<String, String>,
    /// Setting values over the manifest's defaults (`OATS_SETTINGS`).
    pub settings: Map<String, Value>,
    /// Cancels the run.
    pub cancel: CancelToken,
}

/// The executable surface of a capability: what trust approves.
#[derive(Clone, Debug, PartialEq)]
pub struct Surface {
    /// The capability id.
    pub capability: String,
    /// The `oats.tree-exec.v1` integrity of the bytes this surface was read from.
    pub integrity: String,
    /// Command name → argv (`node <script> <tokens…>`).
    pub commands: BTreeMap<String, Vec<String>>,
    /// Operation name → its command, kind, context and argument flags.
    pub operations: BTreeMap<String, Value>,
    /// Binding phase → command name.
    pub binding: BTreeMap<String, String>,
    /// Hook event → command text and whether it is required.
    pub hooks: BTreeMap<String, (String, bool)>,
    /// The launch environment names trust approves.
    pub environment: Vec<String>,
    /// The declared `environmentNamespaces`: prefixes besides the vendor's that the
    /// environment names may use.
    pub environment_namespaces: Vec<String>,
}

impl Surface {
    /// The surface of `manifest` at `integrity`.
    pub fn of(manifest: &Manifest, integrity: &str) -> Self {
        Self {
            capability: manifest.capability.clone(),
            integrity: integrity.to_owned(),
            commands: manifest
                .commands
                .iter()
                .map(|(name, line)| {
                    let mut argv = vec!["node".to_owned(), line.script.clone()];
                    argv.extend(line.args.iter().cloned());
                    (name.clone(), argv)
                })
                .collect(),
            operations: manifest
                .operations
                .iter()
                .map(|(name, op)| {
                    (
                        name.clone(),
                        json!({
                            "command": op.command,
                            "kind": match op.kind { manifest::OperationKind::Action => "action", manifest::OperationKind::View => "view" },
                            "context": match op.context { manifest::OperationContext::Home => "home", manifest::OperationContext::Scope => "scope" },
                            "args": op.args.iter().map(|a| json!({"name": a.name, "flag": a.flag(), "required": a.required})).collect::<Vec<_>>(),
                        }),
                    )
                })
                .collect(),
            binding: manifest
                .binding
                .iter()
                .flat_map(|b| {
                    [
                        ("normalize".to_owned(), b.normalize.clone()),
                        ("bind".to_owned(), b.bind.clone()),
                        ("check".to_owned(), b.check.clone()),
                    ]
                })
                .collect(),
            hooks: manifest
                .hooks
                .iter()
                .map(|(event, hook)| {
                    (
                        event.as_str().to_owned(),
                        (hook.command.text.clone(), hook.required),
                    )
                })
                .collect(),
            environment: manifest.environment.clone(),
            environment_namespaces: manifest.environment_namespaces.clone(),
        }
    }

    /// The surface as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "capability": self.capability,
            "integrity": self.integrity,
            "commands": self.commands,
            "operations": self.operations,
            "binding": self.binding,
            "hooks": self.hooks.iter().map(|(event, (command, required))| (event.clone(), json!({"command": command, "required": required}))).collect::<Map<_, _>>(),
            "environment": self.environment,
            "environmentNamespaces": self.environment_namespaces,
        })
    }

    /// The surface as text for an operator to review.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "capability {}\nintegrity  {}\n",
            self.capability, self.integrity
        );
        let mut section = |title: &str, lines: Vec<String>| {
            out.push_str(title);
            out.push('\n');
            if lines.is_empty() {
                out.push_str("  (none)\n");
            }
            for line in lines {
                out.push_str("  ");
                out.push_str(&line);
                out.push('\n');
            }
        };
        section(
            "commands:",
            self.commands
                .iter()
                .map(|(name, argv)| format!("{name}: {}", argv.join(" ")))
                .collect(),
        );
        section(
            "operations:",
            self.operations
                .iter()
                .map(|(name, op)| format!("{name}: {op}"))
                .collect(),
        );
        section(
            "binding phases:",
            self.binding
                .iter()
                .map(|(phase, command)| format!("{phase}: {command}"))
                .collect(),
        );
        section(
            "hooks:",
            self.hooks
                .iter()
                .map(|(event, (command, required))| {
                    format!(
                        "{event}: {command}{}",
                        if *required { " (required)" } else { "" }
                    )
                })
                .collect(),
        );
        section("environment:", self.environment.clone());
        if !self.environment_namespaces.is_empty() {
            section(
                "environment namespaces:",
                self.environment_namespaces.clone(),
            );
        }
        out
    }
}

/// The result of registering a directory.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The entry as written to the registry; trusted only when an identical registration
    /// was trusted before.
    pub entry: RegistryEntry,
    /// The manifest read at registration.
    pub manifest: Manifest,
    /// The executable surface an operator reviews before trusting it.
    pub surface: Surface,
    /// Whether the capability has an executable surface that needs trust.
    pub executable: bool,
}

/// The result of a trust approval.
#[derive(Clone, Debug)]
pub struct TrustOutcome {
    /// The entry after the approval.
    pub entry: RegistryEntry,
    /// The surface that was approved (re-read from the bytes just verified).
    pub surface: Surface,
    /// False for a capability with no executable surface: nothing needed approval.
    pub needed: bool,
}

/// What `show` found.
#[derive(Clone, Debug)]
pub struct Shown {
    /// The entry (after a reset of trust, if the bytes changed).
    pub entry: RegistryEntry,
    /// The verified manifest and surface, or why the capability cannot be used now.
    pub state: std::result::Result<(Manifest, Surface), OatsError>,
}

/// A capability ready to run: its registry entry, the manifest and the exact files, all
/// from one walk that matched the registered integrity.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The registry entry the walk matched.
    pub entry: RegistryEntry,
    /// The manifest, read from the hashed bytes.
    pub manifest: Manifest,
    /// The walked artifact: every record and its integrity.
    pub artifact: Artifact,
    /// The program files of a run (artifact and launcher).
    pub program: Vec<SnapshotFile>,
}

/// The outcome of a command that started.
#[derive(Clone, Debug)]
pub struct CommandOutcome {
    /// The capability id.
    pub capability: String,
    /// The registered integrity of the bytes that ran.
    pub integrity: String,
    /// The command's name in the manifest.
    pub command: String,
    /// `node <script> <tokens…> <args…>`.
    pub argv: Vec<String>,
    /// How the run ended.
    pub status: RunStatus,
    /// The script's exit code when it exited.
    pub exit_code: Option<i32>,
    /// The signal number when a signal ended it.
    pub signal: Option<i32>,
    /// The script's stdout, at most [`OatsOptions::output_limit`] bytes.
    pub stdout: Vec<u8>,
    /// The script's stderr, at most [`OatsOptions::output_limit`] bytes.
    pub stderr: Vec<u8>,
    /// What the Executor enforced.
    pub identities: RunIdentities,
}

/// oats capabilities registered as sf plugins, run through one Executor.
pub struct Oats {
    pub(crate) registry: Registry,
    pub(crate) executor: Arc<dyn Executor>,
    pub(crate) options: OatsOptions,
}

impl std::fmt::Debug for Oats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oats")
            .field("registry", &self.registry)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Oats {
    /// Opens the registry in `state_dir` (private; created if absent) and runs capabilities
    /// through `executor`.
    pub fn new(
        state_dir: &Path,
        executor: Arc<dyn Executor>,
        options: OatsOptions,
    ) -> Result<Self> {
        Ok(Self {
            registry: Registry::open(state_dir)?,
            executor,
            options,
        })
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The options in force.
    pub fn options(&self) -> &OatsOptions {
        &self.options
    }

    /// Registers the capability in `dir`: strict manifest, compatibility, containment,
    /// integrity. Nothing is registered when any check fails. Re-registering the same
    /// directory records its current bytes; trust survives only when they are identical.
    pub fn register(&self, dir: &Path) -> Result<Registration> {
        self.admit(dir, None)
    }

    /// Replaces the registration of `id` with the capability in `dir` (a new version, or the
    /// same one moved): every check of [`Oats::register`], the directory's capability id must
    /// be `id`, and trust is never carried over (the new bytes are reviewed anew). Atomic on
    /// the registry: the old registration stands until the new one replaces it.
    /// Refused while a frozen Slice pins `id`, unless `force` ([`crate::check`]).
    pub fn upgrade(&self, id: &str, dir: &Path, force: bool) -> Result<Registration> {
        self.admit(dir, Some((id, force)))
    }

    /// Revokes the trust of `id`: from now on its executable surface is refused until it is
    /// trusted again. Answers the entry as it now is (idempotent).
    /// Refused while a frozen Slice pins `id`, unless `force` ([`crate::check`]).
    pub fn untrust(&self, id: &str, force: bool) -> Result<RegistryEntry> {
        self.registry.update_all(|entries, pins| {
            let entry = entries
                .get_mut(id)
                .ok_or_else(|| crate::registry::unknown(id))?;
            crate::check::refuse_if_pinned(entry, pins, "untrusting it", force)?;
            entry.trusted = false;
            Ok(entry.clone())
        })
    }

    /// The checks of a registration of `dir`, then its entry: a new one (`upgrading` `None`),
    /// or the replacement of `upgrading`'s.
    fn admit(&self, dir: &Path, upgrading: Option<(&str, bool)>) -> Result<Registration> {
        let Examined {
            root,
            manifest,
            artifact,
            executable,
        } = examine(dir)?;
        let others = self.registry.read()?;
        let namespace_owner = manifest.command.as_ref().and_then(|command| {
            others.values().find(|other| {
                other.id != manifest.capability
                    && read_manifest(&other.path)
                        .ok()
                        .and_then(|bytes| manifest::parse(&bytes).ok())
                        .is_some_and(|m| m.command.as_deref() == Some(command))
            })
        });
        if let Some(owner) = namespace_owner {
            return Err(OatsError::new(
                ErrorCode::DuplicateNamespace,
                "command",
                format!(
                    "the command namespace {:?} is already claimed by {} ({})",
                    manifest.command.as_deref().unwrap_or_default(),
                    owner.id,
                    owner.path.display()
                ),
            ));
        }
        let entry = self.registry.update_all(|entries, pins| {
            if let Some((id, force)) = upgrading {
                let integrity = &artifact.integrity;
                return upgraded(entries, (id, force), pins, &manifest, &root, integrity);
            }
            if let Some(existing) = entries.get(&manifest.capability)
                && existing.path != root
            {
                return Err(OatsError::new(
                    ErrorCode::DuplicateCapabilityId,
                    manifest.capability.clone(),
                    format!(
                        "is already registered from {}; unregister it first to register {}",
                        existing.path.display(),
                        root.display()
                    ),
                ));
            }
            registered_as_another(entries, &root, &manifest.capability)?;
            let trusted = entries.get(&manifest.capability).is_some_and(|existing| {
                existing.trusted && existing.integrity == artifact.integrity
            });
            let entry = RegistryEntry {
                id: manifest.capability.clone(),
                version: manifest.version.clone(),
                path: root.clone(),
                integrity: artifact.integrity.clone(),
                trusted,
            };
            entries.insert(entry.id.clone(), entry.clone());
            Ok(entry)
        })?;
        Ok(Registration {
            surface: Surface::of(&manifest, &entry.integrity),
            entry,
            manifest,
            executable,
        })
    }

    /// Removes a registration (the directory is left alone). Refused while a frozen Slice
    /// pins `id`, unless `force` ([`crate::check`]).
    pub fn unregister(&self, id: &str, force: bool) -> Result<RegistryEntry> {
        self.registry.update_all(|entries, pins| {
            let entry = entries
                .get(id)
                .ok_or_else(|| crate::registry::unknown(id))?;
            crate::check::refuse_if_pinned(entry, pins, "unregistering it", force)?;
            entries
                .remove(id)
                .ok_or_else(|| crate::registry::unknown(id))
        })
    }

    /// Every registered capability.
    pub fn list(&self) -> Result<Vec<RegistryEntry>> {
        Ok(self.registry.read()?.into_values().collect())
    }

    /// One capability as it is now: its entry and, when its bytes still match, its manifest
    /// and surface. Changed bytes reset trust (as any check does).
    pub fn show(&self, id: &str) -> Result<Shown> {
        let entry = self.registry.get(id)?;
        let state = self.verify(&entry).map(|(artifact, manifest)| {
            let surface = Surface::of(&manifest, &artifact.integrity);
            (manifest, surface)
        });
        let entry = self.registry.get(id)?;
        Ok(Shown { entry, state })
    }

    /// Approves the executable surface of exactly the registered bytes. `reviewed`: the
    /// integrity the operator reviewed (from `show`); when given it must be the registered
    /// one. Refused when the bytes changed since registration (`integrity-drift`).
    pub fn trust(&self, id: &str, reviewed: Option<&str>) -> Result<TrustOutcome> {
        let entry = self.registry.get(id)?;
        if let Some(reviewed) = reviewed
            && reviewed != entry.integrity
        {
            return Err(OatsError::new(
                ErrorCode::IntegrityDrift,
                id,
                format!(
                    "the reviewed integrity {reviewed} is not the registered {}; review the registered bytes with `sf oats show {id}`",
                    entry.integrity
                ),
            ));
        }
        let (artifact, manifest) = self.verify(&entry)?;
        let surface = Surface::of(&manifest, &artifact.integrity);
        if !manifest.is_executable() {
            return Ok(TrustOutcome {
                entry,
                surface,
                needed: false,
            });
        }
        let entry = self.registry.update(|entries| {
            let Some(current) = entries.get_mut(id) else {
                return Err(crate::registry::unknown(id));
            };
            if current.integrity != artifact.integrity {
                return Err(OatsError::new(
                    ErrorCode::IntegrityDrift,
                    id,
                    "the registration changed while trust was being approved; review again",
                ));
            }
            current.trusted = true;
            Ok(current.clone())
        })?;
        Ok(TrustOutcome {
            entry,
            surface,
            needed: true,
        })
    }

    /// Walks and hashes the artifact, compares it with `entry` (resetting trust on a
    /// difference), reads the manifest from the hashed bytes and checks containment.
    pub(crate) fn verify(&self, entry: &RegistryEntry) -> Result<(Artifact, Manifest)> {
        let root = match fs::canonicalize(&entry.path) {
            Ok(root) if root == entry.path => root,
            Ok(other) => {
                self.reset_trust(entry)?;
                return Err(OatsError::new(
                    ErrorCode::IntegrityDrift,
                    entry.id.clone(),
                    format!(
                        "{} now resolves to {}; the registered directory was replaced, and trust was reset",
                        entry.path.display(),
                        other.display()
                    ),
                ));
            }
            Err(error) => {
                return Err(OatsError::new(
                    ErrorCode::Io,
                    entry.id.clone(),
                    format!("{}: {error}", entry.path.display()),
                ));
            }
        };
        let artifact = match artifact::walk(&root) {
            Ok(artifact) => artifact,
            Err(error) => {
                self.reset_trust(entry)?;
                return Err(error);
            }
        };
        if artifact.integrity != entry.integrity {
            self.reset_trust(entry)?;
            return Err(OatsError::new(
                ErrorCode::IntegrityDrift,
                entry.id.clone(),
                format!(
                    "the bytes in {} changed since registration (registered {}, now {}); trust was reset and nothing runs. Review the change, then `sf oats register {}` and `sf oats trust {}`",
                    entry.path.display(),
                    entry.integrity,
                    artifact.integrity,
                    entry.path.display(),
                    entry.id
                ),
            ));
        }
        let Some(bytes) = artifact.entries.get(MANIFEST_FILE).and_then(|e| match e {
            artifact::Entry::File { content, .. } => Some(content.clone()),
            artifact::Entry::Link { .. } => None,
        }) else {
            return Err(OatsError::new(
                ErrorCode::InvalidManifest,
                MANIFEST_FILE,
                "the artifact has no regular oats.json",
            ));
        };
        let manifest = manifest::parse(&bytes)?;
        if manifest.capability != entry.id {
            return Err(OatsError::new(
                ErrorCode::RegistryCorrupt,
                entry.id.clone(),
                format!("the manifest declares {:?}", manifest.capability),
            ));
        }
        containment::check(&root, &manifest)?;
        Ok((artifact, manifest))
    }

    fn reset_trust(&self, entry: &RegistryEntry) -> Result<()> {
        self.registry.update(|entries| {
            if let Some(current) = entries.get_mut(&entry.id)
                && current.integrity == entry.integrity
            {
                current.trusted = false;
            }
            Ok(())
        })
    }

    /// A run context holding, of the values the operator supplies in `file`
    /// ([`crate::environment_file`]), those of the names capability `id` declares; empty
    /// without a file, or when the capability cannot be read. Never from this process's own
    /// environment: a variable an operator exports for something else never reaches a
    /// capability. Every run checks the context against the approved environment again.
    pub fn declared_environment(&self, id: &str, file: Option<&Path>) -> Result<RunContext> {
        let mut context = RunContext::default();
        let Some(file) = file else {
            return Ok(context);
        };
        let mut supplied = crate::environment_file::read(file)?;
        if let Ok(prepared) = self.prepare(id, false) {
            for name in &prepared.manifest.environment {
                if let Some(value) = supplied.remove(name) {
                    context.environment.insert(name.clone(), value);
                }
            }
        }
        Ok(context)
    }

    /// Everything a run needs, checked now: see the module documentation. With
    /// `require_trust`, an untrusted executable capability is refused with
    /// `E_CAPABILITY_BLOCKED`.
    pub fn prepare(&self, id: &str, require_trust: bool) -> Result<Prepared> {
        let entry = self.registry.get(id)?;
        let (artifact, manifest) = self.verify(&entry)?;
        if require_trust && manifest.is_executable() && !entry.trusted {
            return Err(blocked(id));
        }
        let mut program = artifact.program_files()?;
        program.extend(launch::launcher_files());
        Ok(Prepared {
            entry,
            manifest,
            artifact,
            program,
        })
    }

    /// The approved environment for a run: `context.environment`, each name declared by
    /// the manifest, each value acceptable.
    pub(crate) fn approved_environment(
        manifest: &Manifest,
        context: &RunContext,
    ) -> Result<BTreeMap<String, String>> {
        for (name, value) in &context.environment {
            if !manifest.environment.contains(name) {
                return Err(OatsError::new(
                    ErrorCode::InvalidEnvironment,
                    name.clone(),
                    format!(
                        "is not in {}'s declared environment ({}); only declared, trusted names reach a run",
                        manifest.capability,
                        manifest.environment.join(", ")
                    ),
                ));
            }
            check_environment_value(name, value)?;
        }
        Ok(context.environment.clone())
    }

    pub(crate) fn base_environment(
        manifest: &Manifest,
        context: &RunContext,
    ) -> Result<(BTreeMap<String, String>, BTreeMap<String, Place>)> {
        let mut env = Self::approved_environment(manifest, context)?;
        let settings = manifest::effective_settings(manifest, &context.settings)?;
        env.insert("OATS_CAPABILITY".into(), manifest.capability.clone());
        env.insert("OATS_SETTINGS".into(), Value::Object(settings).to_string());
        if let Some(layer) = manifest.layer {
            env.insert("OATS_LAYER".into(), layer.as_str().into());
        }
        let mut places = BTreeMap::new();
        places.insert("OATS_CLI_BIN".to_owned(), Place::Kernel);
        Ok((env, places))
    }

    pub(crate) fn launch(
        &self,
        prepared: &Prepared,
        launch: &Launch,
        cancel: &CancelToken,
    ) -> Result<RunAnswer> {
        launch::run(
            self.executor.as_ref(),
            &prepared.program,
            &self.options.input_dir,
            launch,
            cancel,
        )
    }

    /// Runs command `name` of capability `id` as `node <script> <tokens…> <args…>`, with
    /// the private home as its working directory and empty standard input. `Err` only when
    /// nothing started.
    pub fn run_command(
        &self,
        id: &str,
        name: &str,
        args: &[String],
        context: &RunContext,
    ) -> Result<CommandOutcome> {
        let prepared = self.prepare(id, true)?;
        let Some(line) = prepared.manifest.commands.get(name) else {
            return Err(OatsError::new(
                ErrorCode::UnknownCommand,
                name,
                format!(
                    "{id} declares no command {name:?} (commands: {})",
                    manifest::command_names(&prepared.manifest)
                ),
            ));
        };
        let (env, places) = Self::base_environment(&prepared.manifest, context)?;
        let mut all_args = line.args.clone();
        all_args.extend(args.iter().cloned());
        let launch = Launch {
            script: line.script.clone(),
            args: all_args,
            env,
            places,
            cwd: Cwd::Home,
            stdin: String::new(),
            timeout: self.options.command_timeout,
            output_limit: self.options.output_limit,
        };
        let answer = self.launch(&prepared, &launch, &context.cancel)?;
        Ok(CommandOutcome {
            capability: prepared.entry.id.clone(),
            integrity: prepared.entry.integrity.clone(),
            command: name.to_owned(),
            argv: launch.argv(),
            status: answer.status,
            exit_code: answer.exit_code,
            signal: answer.signal,
            stdout: answer.stdout,
            stderr: answer.stderr,
            identities: answer.identities,
        })
    }
}

/// The `E_CAPABILITY_BLOCKED` error for `id`.
pub fn blocked(id: &str) -> OatsError {
    OatsError::new(
        ErrorCode::CapabilityBlocked,
        id,
        format!(
            "not trusted: approve it with `sf oats trust {id}` after reviewing `sf oats show {id}`; until then nothing of its executable surface runs"
        ),
    )
}

/// Checks one environment value: no NUL, CR or LF; at most 8192 bytes.
pub fn check_environment_value(name: &str, value: &str) -> Result<()> {
    if value.contains(['\0', '\r', '\n']) {
        return Err(OatsError::new(
            ErrorCode::InvalidEnvironment,
            name,
            "the value holds a NUL, CR or LF",
        ));
    }
    if value.len() > MAX_ENVIRONMENT_VALUE {
        return Err(OatsError::new(
            ErrorCode::InvalidEnvironment,
            name,
            format!("a value is at most {MAX_ENVIRONMENT_VALUE} bytes"),
        ));
    }
    Ok(())
}

fn is_owner_exec(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    fs::symlink_metadata(path).is_ok_and(|m| m.mode() & 0o100 != 0)
}

/// Reads `<root>/oats.json`: a regular file (not a link), within the manifest bound, through a
/// descriptor of `root` opened without following a link in any component.
pub(crate) fn read_manifest(root: &Path) -> Result<Vec<u8>> {
    let name = std::ffi::OsStr::new(MANIFEST_FILE);
    let invalid =
        |message: String| OatsError::new(ErrorCode::InvalidManifest, MANIFEST_FILE, message);
    let directory = DirFd::open(root).map_err(artifact::dir_fd_error)?;
    if directory
        .entry(name)
        .map_err(artifact::dir_fd_error)?
        .is_none()
    {
        return Err(invalid(format!(
            "{} has no oats.json; a capability directory holds its manifest at its root",
            root.display()
        )));
    }
    match directory.read_file_named(name, MANIFEST_LIMITS.bytes as u64) {
        Ok(read) => Ok(read.bytes),
        Err(DirFdError::TooLarge { .. }) => Err(OatsError::new(
            ErrorCode::TooLarge,
            MANIFEST_FILE,
            format!("a manifest is at most {} bytes", MANIFEST_LIMITS.bytes),
        )),
        Err(DirFdError::NotRegular { .. }) => Err(invalid("is not a regular file".into())),
        Err(error @ DirFdError::Symlink { .. }) => Err(invalid(error.to_string())),
        Err(error) => Err(artifact::dir_fd_error(error)),
    }
}

/// A capability directory as registration would record it, every check of its own made
/// (strict manifest, compatibility, containment, integrity, program files); nothing is read
/// of the registry and nothing is written.
pub struct Examined {
    /// The directory, resolved.
    pub root: PathBuf,
    /// Its manifest, read from the hashed bytes.
    pub manifest: Manifest,
    /// Its walked and hashed artifact.
    pub artifact: Artifact,
    /// Whether it has an executable surface (what needs trust).
    pub executable: bool,
}

/// The sf roles the registered capability `entry` can fill, read from its manifest as it is
/// now (what `list` shows; every use checks the registered integrity first); none when the
/// manifest cannot be read.
pub fn roles_of(entry: &RegistryEntry) -> Vec<&'static str> {
    current_manifest(entry)
        .map(|manifest| manifest.roles())
        .unwrap_or_default()
}

/// The trust state of `entry` in words: `trusted`, `untrusted`, or `needs no approval` for a
/// capability without an executable surface (instructions only), as its manifest is now.
pub fn trust_state_of(entry: &RegistryEntry) -> &'static str {
    if entry.trusted {
        "trusted"
    } else if current_manifest(entry).is_some_and(|manifest| !manifest.is_executable()) {
        "needs no approval"
    } else {
        "untrusted"
    }
}

/// The manifest of `entry`'s directory as it is now, unchecked against its integrity (for
/// what `list` shows only).
fn current_manifest(entry: &RegistryEntry) -> Option<Manifest> {
    read_manifest(&entry.path)
        .ok()
        .and_then(|bytes| manifest::parse(&bytes).ok())
}

/// Examines the capability directory `dir` (what `sf oats check` and `sf plugins check`
/// print); `Err` for the first check it fails.
pub fn examine(dir: &Path) -> Result<Examined> {
    let root = fs::canonicalize(dir).map_err(|error| {
        OatsError::new(
            ErrorCode::Io,
            dir.display().to_string(),
            format!("the capability directory cannot be resolved: {error}"),
        )
    })?;
    if !root.is_dir() {
        return Err(OatsError::new(
            ErrorCode::Io,
            dir.display().to_string(),
            "is not a directory; register the directory that holds oats.json",
        ));
    }
    let bytes = read_manifest(&root)?;
    let manifest = manifest::parse(&bytes)?;
    containment::check(&root, &manifest)?;
    let artifact = artifact::walk(&root)?;
    if artifact.entries.get(MANIFEST_FILE)
        != Some(&artifact::Entry::File {
            executable: is_owner_exec(&root.join(MANIFEST_FILE)),
            content: bytes.clone(),
        })
    {
        return Err(OatsError::new(
            ErrorCode::IntegrityDrift,
            root.join(MANIFEST_FILE).display().to_string(),
            "oats.json changed while the capability was being registered; retry",
        ));
    }
    let executable = manifest.is_executable();
    if executable {
        artifact.program_files()?;
    }
    Ok(Examined {
        root,
        manifest,
        artifact,
        executable,
    })
}

/// `duplicate-capability-id` when `root` is registered under an id other than `id`.
fn registered_as_another(
    entries: &BTreeMap<String, RegistryEntry>,
    root: &Path,
    id: &str,
) -> Result<()> {
    match entries
        .values()
        .find(|other| other.path == root && other.id != id)
    {
        Some(other) => Err(OatsError::new(
            ErrorCode::DuplicateCapabilityId,
            root.display().to_string(),
            format!(
                "this directory is registered as {}; unregister that id first",
                other.id
            ),
        )),
        None => Ok(()),
    }
}

/// The registry's entries with `id`'s registration replaced by the capability `manifest`
/// found at `root` with `integrity`, untrusted: refused when `id` is not registered, when the
/// directory holds another capability, or when another id is registered from it.
fn upgraded(
    entries: &mut BTreeMap<String, RegistryEntry>,
    (id, force): (&str, bool),
    pins: &Pins,
    manifest: &Manifest,
    root: &Path,
    integrity: &str,
) -> Result<RegistryEntry> {
    let Some(old) = entries.get(id) else {
        return Err(crate::registry::unknown(id));
    };
    crate::check::refuse_if_pinned(old, pins, "upgrading it", force)?;
    if manifest.capability != id {
        return Err(OatsError::new(
            ErrorCode::DuplicateCapabilityId,
            root.display().to_string(),
            format!(
                "holds the capability {}, not {id}; upgrade a capability with a directory of \
                 the same id",
                manifest.capability
            ),
        ));
    }
    registered_as_another(entries, root, id)?;
    let entry = RegistryEntry {
        id: id.to_owned(),
        version: manifest.version.clone(),
        path: root.to_path_buf(),
        integrity: integrity.to_owned(),
        trusted: false,
    };
    entries.insert(entry.id.clone(), entry.clone());
    Ok(entry)
}
