//! Lifecycle hooks for a home directory: `soul-scaffold`, `spawn` and `retire`, with oats's
//! rollback rules.
//!
//! - **Order.** Capabilities run in id order (sf has one scope); `retire` runs in reverse.
//!   Only trusted capabilities' hooks run; an untrusted capability with a hook gives the
//!   warning "executable surface disabled", except that an untrusted *required* spawn hook
//!   refuses the spawn with `E_REQUIRED_HOOK_UNTRUSTED` before anything is created.
//! - **A hook run** is `node <script> <tokens…>` in the private home (see docs/oats.md),
//!   empty standard input, at most 120 s, with `OATS_EVENT`, `OATS_CAPABILITY`,
//!   `OATS_LAYER`, `OATS_INSTANCE`, `OATS_INSTANCE_HOME` and its alias `OATS_HOME`,
//!   `OATS_SETTINGS`, `OATS_META` (the capability's earlier `meta`) and the approved
//!   environment. The last non-empty stdout line, when it is a JSON object, may carry `meta`,
//!   `brief`, `warning`, `launch` and, on `spawn` only, `env`; it is read even when the hook
//!   failed, to recover `meta`.
//! - **spawn** creates the home (it must not exist) and sf's instance record in it
//!   ([`INSTANCE_FILE`]), then runs each spawn hook. A spawn hook's `env` must name only
//!   variables its trusted manifest declares, under its vendor prefix, outside the core and
//!   bootstrap lists, each value a string without NUL, CR or LF of at most 8192 bytes, and no
//!   name claimed by two capabilities; otherwise `E_HOOK_ENVIRONMENT_CONTRACT`, which stops
//!   further spawn hooks at once. A failing non-required hook only warns. A failing required
//!   hook (`E_REQUIRED_HOOK_FAILED`) or an environment contract failure compensates: every
//!   attempted capability's retire hook runs in reverse, with `OATS_META` set to its spawn
//!   meta. The compensation is incomplete when a retire hook fails, reports
//!   `meta.retired: false` (other than with `reason: "nothing-to-delete"`), or when a
//!   capability's spawn left `meta` but it has no retire hook. Complete: the home is removed
//!   ("spawn rolled back"). Incomplete: the home is kept, quarantined, with
//!   [`QUARANTINE_FILE`] naming the outstanding hooks by capability and their meta.
//! - **retire** of a quarantined home is the retry: it reruns exactly the outstanding hooks
//!   and clears the quarantine (removing the home) only when every one of them ran and
//!   succeeded; a retry that can rerun none (e.g. "declares no retire hook") fails closed.
//!   `force` removes the home and reports what is outstanding, which the operator now owns.
//!   Retiring a spawned home runs every retire hook in reverse and removes the home unless a
//!   hook reports incomplete cleanup, which keeps it; a capability whose spawn hook ran owes
//!   its retire hook, so if that hook cannot run now (untrusted, drifted) the home is kept too. A home with neither the instance record
//!   nor a marker is never deleted.
//! - **soul-scaffold** runs each capability's hook in the home; `env` there is a contract
//!   failure.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sf_contracts::RunStatus;

use crate::error::{ErrorCode, OatsError, Result};
use crate::grammar;
use crate::host::{Oats, Prepared, RunContext, check_environment_value};
use crate::json::{self, Limits};
use crate::launch::{Cwd, Launch, Place};
use crate::manifest::HookEvent;

/// sf's instance record in a spawned home.
pub const INSTANCE_FILE: &str = ".sf-oats-instance.json";
/// The quarantine marker of a home whose rollback is incomplete.
pub const QUARANTINE_FILE: &str = ".oats-rollback-incomplete.json";
/// The protocol string of the instance record.
pub const INSTANCE_PROTOCOL: &str = "sf-oats-instance/1";
/// The protocol string of the quarantine marker.
pub const QUARANTINE_PROTOCOL: &str = "sf-oats-rollback-incomplete/1";
/// `E_REQUIRED_HOOK_FAILED`.
pub const E_REQUIRED_HOOK_FAILED: &str = "E_REQUIRED_HOOK_FAILED";
/// `E_HOOK_ENVIRONMENT_CONTRACT`.
pub const E_HOOK_ENVIRONMENT_CONTRACT: &str = "E_HOOK_ENVIRONMENT_CONTRACT";

const RECORD_LIMITS: Limits = Limits {
    bytes: 4 * 1024 * 1024,
    depth: 64,
    entries: 100_000,
};
const HOOK_LINE_LIMITS: Limits = Limits {
    bytes: 1024 * 1024,
    depth: 64,
    entries: 100_000,
};

/// What one hook run gave.
#[derive(Clone, Debug, PartialEq)]
pub struct HookResult {
    /// The id of the capability whose hook ran.
    pub capability: String,
    /// Which hook ran.
    pub event: HookEvent,
    /// Whether the manifest declares the hook required (only a spawn hook can be).
    pub required: bool,
    /// Whether it exited 0 in time (and, for an environment, kept the contract).
    pub succeeded: bool,
    /// "ok", or what went wrong.
    pub message: String,
    /// The answer's `meta`: the capability's own state, kept in the instance record and
    /// passed to its later hooks as `OATS_META`.
    pub meta: Option<Value>,
    /// The answer's `brief`, reported, not applied.
    pub brief: Option<String>,
    /// The answer's `warning`, reported.
    pub warning: Option<String>,
    /// The answer's `launch`, reported, not applied (sf launches no agent runtime).
    pub launch: Option<Value>,
    /// The validated environment a spawn hook contributed.
    pub env: BTreeMap<String, String>,
}

impl HookResult {
    /// Whether a retire hook proved its cleanup: it succeeded, and did not report
    /// `meta.retired: false` (except with `reason: "nothing-to-delete"`).
    pub fn cleanup_proven(&self) -> bool {
        if !self.succeeded {
            return false;
        }
        match &self.meta {
            Some(Value::Object(meta)) if meta.get("retired") == Some(&Value::Bool(false)) => {
                meta.get("reason").and_then(Value::as_str) == Some("nothing-to-delete")
            }
            _ => true,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "capability": self.capability,
            "event": self.event.as_str(),
            "required": self.required,
            "succeeded": self.succeeded,
            "message": self.message,
            "meta": self.meta,
            "brief": self.brief,
            "warning": self.warning,
            "launch": self.launch,
            "env": self.env,
        })
    }
}

/// Work a rollback could not prove done.
#[derive(Clone, Debug, PartialEq)]
pub struct Outstanding {
    /// The id of the capability that owes the work, or `sf` for a home sf could not remove.
    pub capability: String,
    /// `"retire"` when a retire hook can redo it; `None` when the capability has none.
    pub hook: Option<String>,
    /// The capability's spawn meta, given to the retire hook as `OATS_META`.
    pub meta: Value,
    /// Why the work is not proven done.
    pub reason: String,
}

impl Outstanding {
    fn to_json(&self) -> Value {
        json!({
            "capability": self.capability,
            "hook": self.hook,
            "meta": self.meta,
            "reason": self.reason,
        })
    }

    fn from_json(value: &Value) -> Option<Self> {
        let map = value.as_object()?;
        if map.len() != 4 {
            return None;
        }
        let hook = match map.get("hook")? {
            Value::Null => None,
            Value::String(hook) if hook == "retire" => Some(hook.clone()),
            _ => return None,
        };
        let capability = map.get("capability")?.as_str()?.to_owned();
        if !grammar::is_capability_id(&capability) && capability != "sf" {
            return None;
        }
        Some(Self {
            capability,
            hook,
            meta: map.get("meta")?.clone(),
            reason: map.get("reason")?.as_str()?.to_owned(),
        })
    }
}

/// The outcome of a spawn that started (the home was created).
#[derive(Clone, Debug, PartialEq)]
pub enum SpawnOutcome {
    /// Every required hook succeeded; the home is spawned.
    Spawned {
        /// The home that was created.
        home: PathBuf,
        /// The contributed launch environment, sorted by name.
        env: BTreeMap<String, String>,
        /// Every spawn hook that ran, in order.
        hooks: Vec<HookResult>,
        /// Disabled hooks of untrusted capabilities, hooks' own warnings and failed
        /// non-required hooks, each prefixed with the capability id.
        warnings: Vec<String>,
    },
    /// A required hook or the environment contract failed; compensation was complete and
    /// the home was removed.
    RolledBack {
        /// [`E_REQUIRED_HOOK_FAILED`] or [`E_HOOK_ENVIRONMENT_CONTRACT`].
        code: &'static str,
        /// What failed, naming the capability.
        failure: String,
        /// Every hook that ran: the spawn hooks, then the compensating retire hooks.
        hooks: Vec<HookResult>,
    },
    /// Compensation was incomplete: the home is kept with a quarantine marker.
    Quarantined {
        /// [`E_REQUIRED_HOOK_FAILED`] or [`E_HOOK_ENVIRONMENT_CONTRACT`].
        code: &'static str,
        /// What failed, naming the capability, and that the rollback is incomplete.
        failure: String,
        /// Every hook that ran: the spawn hooks, then the compensating retire hooks.
        hooks: Vec<HookResult>,
        /// The work the compensation could not prove done, as the marker lists it.
        outstanding: Vec<Outstanding>,
        /// The path of the quarantine marker ([`QUARANTINE_FILE`] in the home).
        marker: PathBuf,
    },
}

impl SpawnOutcome {
    /// The outcome as JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Spawned {
                home,
                env,
                hooks,
                warnings,
            } => json!({
                "outcome": "spawned",
                "home": home.display().to_string(),
                "env": env,
                "hooks": hooks.iter().map(HookResult::to_json).collect::<Vec<_>>(),
                "warnings": warnings,
            }),
            Self::RolledBack {
                code,
                failure,
                hooks,
            } => json!({
                "outcome": "rolled-back",
                "code": code,
                "message": failure,
                "hooks": hooks.iter().map(HookResult::to_json).collect::<Vec<_>>(),
            }),
            Self::Quarantined {
                code,
                failure,
                hooks,
                outstanding,
                marker,
            } => json!({
                "outcome": "quarantined",
                "code": code,
                "message": failure,
                "hooks": hooks.iter().map(HookResult::to_json).collect::<Vec<_>>(),
                "outstanding": outstanding.iter().map(Outstanding::to_json).collect::<Vec<_>>(),
                "marker": marker.display().to_string(),
            }),
        }
    }
}

/// The outcome of a retirement that started.
#[derive(Clone, Debug, PartialEq)]
pub enum RetireOutcome {
    /// Every retire hook proved its cleanup; the home was removed.
    Retired {
        /// Every retire hook that ran, in reverse id order.
        hooks: Vec<HookResult>,
    },
    /// A retire hook reported incomplete cleanup (or could not run); the home is kept.
    Blocked {
        /// Every retire hook that ran, in reverse id order.
        hooks: Vec<HookResult>,
        /// Why the home is kept, one line per capability at fault.
        problems: Vec<String>,
    },
    /// A retry reran every outstanding hook successfully; quarantine cleared, home removed.
    Cleared {
        /// The retire hooks the retry reran.
        hooks: Vec<HookResult>,
    },
    /// A retry left work outstanding; the marker now lists what remains.
    StillQuarantined {
        /// The retire hooks the retry reran.
        hooks: Vec<HookResult>,
        /// What the marker lists now.
        outstanding: Vec<Outstanding>,
    },
    /// `force`: the home was removed; `outstanding` is what the operator now owns.
    Forced {
        /// What the quarantine marker listed; empty when there was none or sf could not
        /// read it.
        outstanding: Vec<Outstanding>,
    },
}

impl RetireOutcome {
    /// The outcome as JSON.
    pub fn to_json(&self) -> Value {
        let hooks =
            |hooks: &[HookResult]| hooks.iter().map(HookResult::to_json).collect::<Vec<_>>();
        let outstanding =
            |items: &[Outstanding]| items.iter().map(Outstanding::to_json).collect::<Vec<_>>();
        match self {
            Self::Retired { hooks: h } => json!({"outcome": "retired", "hooks": hooks(h)}),
            Self::Blocked { hooks: h, problems } => {
                json!({"outcome": "blocked", "hooks": hooks(h), "problems": problems})
            }
            Self::Cleared { hooks: h } => json!({"outcome": "cleared", "hooks": hooks(h)}),
            Self::StillQuarantined {
                hooks: h,
                outstanding: o,
            } => {
                json!({"outcome": "still-quarantined", "hooks": hooks(h), "outstanding": outstanding(o)})
            }
            Self::Forced { outstanding: o } => {
                json!({"outcome": "forced", "outstanding": outstanding(o)})
            }
        }
    }
}

/// Per-capability run contexts for a lifecycle call (settings and approved environment).
#[derive(Clone, Debug, Default)]
pub struct LifecycleContext {
    /// Each capability's run context, by capability id; a capability not listed runs with
    /// the default context (no settings over the defaults, no environment).
    pub capabilities: BTreeMap<String, RunContext>,
}

impl LifecycleContext {
    fn of(&self, id: &str) -> RunContext {
        self.capabilities.get(id).cloned().unwrap_or_default()
    }
}

/// What is wrong with `home` as an existing home directory, or `None`: it is relative, it
/// does not exist, or it is not a directory (a link to one is not followed).
pub(crate) fn existing_home_problem(home: &Path) -> Option<String> {
    if !home.is_absolute() {
        return Some("is a relative path; name the home by an absolute path".into());
    }
    match home.symlink_metadata() {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            Some("does not exist; give the home `sf oats hook spawn --home` created".into())
        }
        Err(error) => Some(format!("cannot be read: {error}")),
        Ok(meta) if meta.file_type().is_symlink() => {
            Some("is a symbolic link; give the home directory itself".into())
        }
        Ok(meta) if !meta.is_dir() => Some("is not a directory; give the home directory".into()),
        Ok(_) => None,
    }
}

fn home_error(home: &Path, message: impl Into<String>) -> OatsError {
    OatsError::new(
        ErrorCode::HomeUnavailable,
        home.display().to_string(),
        message,
    )
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    let temporary = path.with_extension("tmp");
    let result = (|| -> std::io::Result<()> {
        use std::io::Write as _;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temporary)?;
        file.write_all(&bytes)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        fs::rename(&temporary, path)?;
        if let Some(parent) = path.parent() {
            fs::File::open(parent)?.sync_all()?;
        }
        Ok(())
    })();
    result.map_err(|error| OatsError::io(path.display(), &error))
}

fn read_json(path: &Path) -> Result<Option<Value>> {
    let bytes = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => {
            use std::io::Read as _;
            let mut bytes = Vec::new();
            file.take(RECORD_LIMITS.bytes as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|error| OatsError::io(path.display(), &error))?;
            bytes
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(OatsError::io(path.display(), &error)),
    };
    json::parse(&bytes, RECORD_LIMITS)
        .map(Some)
        .map_err(|problem| {
            OatsError::new(
                ErrorCode::HomeCorrupt,
                path.display().to_string(),
                problem.to_string(),
            )
        })
}

/// Reads the last non-empty stdout line as a hook answer.
fn hook_answer(stdout: &[u8]) -> Option<Map<String, Value>> {
    let text = String::from_utf8_lossy(stdout);
    let line = text.lines().rev().find(|line| !line.trim().is_empty())?;
    match json::parse(line.trim().as_bytes(), HOOK_LINE_LIMITS) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// Checks a spawn hook's `env` against the environment contract; `taken` holds the names
/// earlier capabilities contributed.
fn check_env(
    prepared: &Prepared,
    env: &Value,
    taken: &BTreeMap<String, String>,
) -> std::result::Result<BTreeMap<String, String>, String> {
    let id = &prepared.manifest.capability;
    let Value::Object(map) = env else {
        return Err(format!("env is {}, not an object", json::type_name(env)));
    };
    let Some(vendor) = grammar::vendor_of(id) else {
        return Err(format!(
            "{id} has no vendor matching ^[a-z][a-z0-9]*$ before its first '.', so it cannot contribute launch environment"
        ));
    };
    let prefix = format!("{}_", vendor.to_ascii_uppercase());
    let mut out = BTreeMap::new();
    for (name, value) in map {
        if !grammar::is_environment_name(name) {
            return Err(format!("{name:?} is not a portable environment name"));
        }
        if let Some(problem) = grammar::reserved_environment_name(name) {
            return Err(format!("{name} {problem}"));
        }
        if !name.starts_with(&prefix) {
            return Err(format!("{name} is outside the vendor prefix {prefix}"));
        }
        if !prepared.manifest.environment.contains(name) {
            return Err(format!(
                "{name} is not in {id}'s trusted environment declaration"
            ));
        }
        let Value::String(value) = value else {
            return Err(format!(
                "{name}'s value is {}, not a string",
                json::type_name(value)
            ));
        };
        check_environment_value(name, value)
            .map_err(|error| format!("{name}: {}", error.message))?;
        if let Some(owner) = taken.get(name) {
            return Err(format!("{name} is already contributed by {owner}"));
        }
        out.insert(name.clone(), value.clone());
    }
    Ok(out)
}

impl Oats {
    /// Runs `event`'s hook of a prepared capability in `home`.
    fn run_hook(
        &self,
        prepared: &Prepared,
        event: HookEvent,
        home: &Path,
        meta: Option<&Value>,
        context: &RunContext,
    ) -> HookResult {
        self.run_hook_with_env(prepared, event, home, meta, context)
            .0
    }

    /// [`Oats::run_hook`], also returning the `env` a spawn hook printed (unchecked).
    fn run_hook_with_env(
        &self,
        prepared: &Prepared,
        event: HookEvent,
        home: &Path,
        meta: Option<&Value>,
        context: &RunContext,
    ) -> (HookResult, Option<Value>) {
        let hook = &prepared.manifest.hooks[&event];
        let mut result = HookResult {
            capability: prepared.manifest.capability.clone(),
            event,
            required: hook.required,
            succeeded: false,
            message: String::new(),
            meta: None,
            brief: None,
            warning: None,
            launch: None,
            env: BTreeMap::new(),
        };
        let (mut env, mut places) = match Self::base_environment(&prepared.manifest, context) {
            Ok(pair) => pair,
            Err(error) => {
                result.message = format!("the hook did not start: {error}");
                return (result, None);
            }
        };
        env.insert("OATS_EVENT".into(), event.as_str().into());
        env.insert(
            "OATS_INSTANCE".into(),
            home.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        if let Some(meta) = meta {
            env.insert("OATS_META".into(), meta.to_string());
        }
        places.insert("OATS_HOME".into(), Place::Home);
        places.insert("OATS_INSTANCE_HOME".into(), Place::Home);
        let launch = Launch {
            script: hook.command.script.clone(),
            args: hook.command.args.clone(),
            env,
            places,
            cwd: Cwd::Home,
            stdin: String::new(),
            timeout: self.options.hook_timeout,
            output_limit: self.options.output_limit.min(1024 * 1024),
        };
        let answer = match self.launch(prepared, &launch, &context.cancel) {
            Ok(answer) => answer,
            Err(error) => {
                result.message = format!("the hook did not start: {error}");
                return (result, None);
            }
        };
        let mut raw_env = None;
        if let Some(map) = hook_answer(&answer.stdout) {
            result.meta = map.get("meta").cloned();
            result.brief = map.get("brief").and_then(Value::as_str).map(str::to_owned);
            result.warning = map
                .get("warning")
                .and_then(Value::as_str)
                .map(str::to_owned);
            result.launch = map.get("launch").cloned();
            if let Some(env) = map.get("env") {
                if event != HookEvent::Spawn {
                    result.message = format!(
                        "{E_HOOK_ENVIRONMENT_CONTRACT}: env from the {} hook; env is supported only for spawn",
                        event.as_str()
                    );
                    return (result, None);
                }
                // Checked by the caller, which knows what other capabilities took.
                raw_env = Some(env.clone());
            }
        }
        match (answer.status, answer.exit_code) {
            (RunStatus::Exited, Some(0)) => {
                result.succeeded = true;
                result.message = "ok".into();
            }
            (RunStatus::Exited, code) => {
                result.message = format!("exited {}", code.unwrap_or(-1));
            }
            (RunStatus::TimedOut, _) => {
                result.message = format!("timed out after {} ms", answer.bounds.timeout_ms());
            }
            (status, _) => {
                result.message = format!("ended {}", status.code());
            }
        }
        if !result.succeeded {
            let tail = String::from_utf8_lossy(&answer.stderr);
            let tail = tail.trim();
            if !tail.is_empty() {
                let start = tail.len().saturating_sub(512);
                let start = (start..tail.len())
                    .find(|i| tail.is_char_boundary(*i))
                    .unwrap_or(0);
                result.message.push_str(": ");
                result.message.push_str(&tail[start..]);
            }
        }
        (result, raw_env)
    }

    fn prepare_all(&self, ids: &[&str], required_check: bool) -> Result<Vec<(Prepared, bool)>> {
        let mut sorted: Vec<&str> = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut out = Vec::new();
        for id in sorted {
            let prepared = self.prepare(id, false)?;
            let trusted = prepared.entry.trusted || !prepared.manifest.is_executable();
            if required_check
                && !trusted
                && prepared
                    .manifest
                    .hooks
                    .get(&HookEvent::Spawn)
                    .is_some_and(|hook| hook.required)
            {
                return Err(OatsError::new(
                    ErrorCode::RequiredHookUntrusted,
                    id,
                    format!(
                        "declares a required spawn hook but is not trusted; nothing was created. Review it with `sf oats show {id}` and approve it with `sf oats trust {id}`"
                    ),
                ));
            }
            out.push((prepared, trusted));
        }
        Ok(out)
    }

    /// Spawns a home: creates `home` (which must not exist) and runs the spawn hooks of
    /// `capabilities`. `Err` only when nothing was created.
    pub fn spawn(
        &self,
        home: &Path,
        capabilities: &[&str],
        context: &LifecycleContext,
    ) -> Result<SpawnOutcome> {
        if !home.is_absolute() {
            return Err(home_error(
                home,
                "is a relative path; name the home by an absolute path",
            ));
        }
        if !home.parent().is_some_and(Path::is_dir) {
            return Err(home_error(
                home,
                "the home's parent directory does not exist",
            ));
        }
        if home.symlink_metadata().is_ok() {
            return Err(home_error(
                home,
                "already exists; spawn creates a new home (retire the old one first)",
            ));
        }
        let prepared = self.prepare_all(capabilities, true)?;
        let mut warnings = Vec::new();
        for (prepared, trusted) in &prepared {
            if !trusted && !prepared.manifest.hooks.is_empty() {
                warnings.push(format!(
                    "{}: executable surface disabled (not trusted); its hooks do not run",
                    prepared.manifest.capability
                ));
            }
            Self::base_environment(
                &prepared.manifest,
                &context.of(&prepared.manifest.capability),
            )?;
        }
        fs::DirBuilder::new()
            .mode(0o700)
            .create(home)
            .map_err(|error| home_error(home, format!("cannot be created: {error}")))?;
        let record_path = home.join(INSTANCE_FILE);
        let mut record = json!({
            "protocol": INSTANCE_PROTOCOL,
            "state": "spawning",
            "capabilities": prepared.iter().map(|(p, _)| json!({"id": p.entry.id, "integrity": p.entry.integrity})).collect::<Vec<_>>(),
            "attempted": [],
            "meta": {},
            "env": {},
        });
        write_json(&record_path, &record)?;

        let mut hooks = Vec::new();
        let mut attempted: Vec<usize> = Vec::new();
        let mut metas: BTreeMap<String, Value> = BTreeMap::new();
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        let mut owners: BTreeMap<String, String> = BTreeMap::new();
        let mut failure: Option<(&'static str, String)> = None;
        for (index, (capability, trusted)) in prepared.iter().enumerate() {
            if !trusted || !capability.manifest.hooks.contains_key(&HookEvent::Spawn) {
                continue;
            }
            let id = capability.manifest.capability.clone();
            let (mut result, env_output) =
                self.run_hook_with_env(capability, HookEvent::Spawn, home, None, &context.of(&id));
            attempted.push(index);
            if let Some(meta) = &result.meta {
                metas.insert(id.clone(), meta.clone());
            }
            if let Some(warning) = &result.warning {
                warnings.push(format!("{id}: {warning}"));
            }
            if let Some(raw) = env_output {
                match check_env(capability, &raw, &owners) {
                    Ok(contributed) => {
                        for name in contributed.keys() {
                            owners.insert(name.clone(), id.clone());
                        }
                        env.extend(contributed.clone());
                        result.env = contributed;
                    }
                    Err(problem) => {
                        result.env = BTreeMap::new();
                        result.succeeded = false;
                        result.message = format!("{E_HOOK_ENVIRONMENT_CONTRACT}: {problem}");
                        hooks.push(result);
                        failure = Some((
                            E_HOOK_ENVIRONMENT_CONTRACT,
                            format!(
                                "{id}: the spawn hook broke the environment contract: {problem}"
                            ),
                        ));
                        break;
                    }
                }
            }
            if !result.succeeded {
                if result.message.starts_with(E_HOOK_ENVIRONMENT_CONTRACT) {
                    let message = result.message.clone();
                    hooks.push(result);
                    failure = Some((E_HOOK_ENVIRONMENT_CONTRACT, format!("{id}: {message}")));
                    break;
                }
                if result.required {
                    let message = format!(
                        "{id}: the spawn hook (declared required) failed: {}",
                        result.message
                    );
                    hooks.push(result);
                    failure = Some((E_REQUIRED_HOOK_FAILED, message));
                    break;
                }
                warnings.push(format!("{id}: the spawn hook failed: {}", result.message));
            }
            hooks.push(result);
        }

        let Some((code, message)) = failure else {
            record["state"] = json!("spawned");
            record["meta"] = json!(metas);
            record["env"] = json!(env);
            record["attempted"] = json!(
                attempted
                    .iter()
                    .map(|index| prepared[*index].0.manifest.capability.clone())
                    .collect::<Vec<_>>()
            );
            write_json(&record_path, &record)?;
            return Ok(SpawnOutcome::Spawned {
                home: home.to_path_buf(),
                env,
                hooks,
                warnings,
            });
        };

        // Compensation: every attempted capability's retire hook, in reverse.
        let mut outstanding = Vec::new();
        for index in attempted.into_iter().rev() {
            let (capability, _) = &prepared[index];
            let id = capability.manifest.capability.clone();
            let meta = metas.get(&id).cloned();
            if capability.manifest.hooks.contains_key(&HookEvent::Retire) {
                let result = self.run_hook(
                    capability,
                    HookEvent::Retire,
                    home,
                    Some(meta.as_ref().unwrap_or(&Value::Null)),
                    &context.of(&id),
                );
                if !result.cleanup_proven() {
                    outstanding.push(Outstanding {
                        capability: id.clone(),
                        hook: Some("retire".into()),
                        meta: meta.clone().unwrap_or(Value::Null),
                        reason: format!(
                            "the compensating retire hook did not prove cleanup: {}",
                            result.message
                        ),
                    });
                }
                hooks.push(result);
            } else if let Some(meta) = meta.filter(|m| !m.is_null()) {
                outstanding.push(Outstanding {
                    capability: id.clone(),
                    hook: None,
                    meta,
                    reason: "its spawn hook left meta but it declares no retire hook".into(),
                });
            }
        }
        if outstanding.is_empty() {
            match fs::remove_dir_all(home) {
                Ok(()) => {
                    return Ok(SpawnOutcome::RolledBack {
                        code,
                        failure: format!("{message}; spawn rolled back"),
                        hooks,
                    });
                }
                Err(error) => outstanding.push(Outstanding {
                    capability: "sf".into(),
                    hook: None,
                    meta: Value::Null,
                    reason: format!("the home could not be removed: {error}"),
                }),
            }
        }
        let marker = home.join(QUARANTINE_FILE);
        write_json(
            &marker,
            &json!({
                "protocol": QUARANTINE_PROTOCOL,
                "cause": {"code": code, "message": message},
                "outstanding": outstanding.iter().map(Outstanding::to_json).collect::<Vec<_>>(),
            }),
        )?;
        Ok(SpawnOutcome::Quarantined {
            code,
            failure: format!(
                "{message}; rollback INCOMPLETE: the home is quarantined ({} outstanding); retry with retire",
                outstanding.len()
            ),
            hooks,
            outstanding,
            marker,
        })
    }

    /// Runs the soul-scaffold hooks of `capabilities` in `home` (an existing directory).
    pub fn scaffold(
        &self,
        home: &Path,
        capabilities: &[&str],
        context: &LifecycleContext,
    ) -> Result<Vec<HookResult>> {
        if let Some(problem) = existing_home_problem(home) {
            return Err(home_error(home, problem));
        }
        let prepared = self.prepare_all(capabilities, false)?;
        let mut results = Vec::new();
        for (capability, trusted) in &prepared {
            if *trusted
                && capability
                    .manifest
                    .hooks
                    .contains_key(&HookEvent::SoulScaffold)
            {
                let id = &capability.manifest.capability;
                results.push(self.run_hook(
                    capability,
                    HookEvent::SoulScaffold,
                    home,
                    None,
                    &context.of(id),
                ));
            }
        }
        Ok(results)
    }

    /// Retires `home`: the retry of a quarantined home, or the retirement of a spawned one
    /// (see the module documentation). `Err` only when nothing ran and nothing was removed.
    pub fn retire(
        &self,
        home: &Path,
        force: bool,
        context: &LifecycleContext,
    ) -> Result<RetireOutcome> {
        if let Some(problem) = existing_home_problem(home) {
            return Err(home_error(home, problem));
        }
        let marker_path = home.join(QUARANTINE_FILE);
        let record_path = home.join(INSTANCE_FILE);
        let marker = match read_json(&marker_path) {
            Ok(marker) => marker,
            Err(error) if force => {
                let _ = error;
                remove_home(home)?;
                return Ok(RetireOutcome::Forced {
                    outstanding: Vec::new(),
                });
            }
            Err(error) => return Err(error),
        };
        if let Some(marker) = marker {
            let outstanding = parse_marker(&marker);
            if force {
                remove_home(home)?;
                return Ok(RetireOutcome::Forced {
                    outstanding: outstanding.unwrap_or_default(),
                });
            }
            let Some(outstanding) = outstanding else {
                return Err(OatsError::new(
                    ErrorCode::HomeCorrupt,
                    marker_path.display().to_string(),
                    "the quarantine marker is not one sf wrote; inspect the home and retire with force to remove it",
                ));
            };
            return self.retry(home, &marker_path, &marker, outstanding, context);
        }
        let Some(record) = read_json(&record_path)? else {
            return Err(OatsError::new(
                ErrorCode::HomeUnidentified,
                home.display().to_string(),
                "holds neither sf's instance record nor a quarantine marker, so it is not deleted",
            ));
        };
        if force {
            remove_home(home)?;
            return Ok(RetireOutcome::Forced {
                outstanding: Vec::new(),
            });
        }
        let (ids, attempted, metas) = parse_record(&record).ok_or_else(|| {
            OatsError::new(
                ErrorCode::HomeCorrupt,
                record_path.display().to_string(),
                "the instance record is not one sf wrote; inspect the home and retire with force to remove it",
            )
        })?;
        let mut hooks = Vec::new();
        let mut problems = Vec::new();
        for id in ids.iter().rev() {
            // A capability whose spawn hook ran owes its retire hook; one whose spawn hook did
            // not run (it had none, or was untrusted then) owes nothing, so a retire hook it
            // cannot run now does not block.
            let owed = attempted.contains(id);
            let prepared = match self.prepare(id, false) {
                Ok(prepared) => prepared,
                Err(error) if owed => {
                    problems.push(format!("{id}: its retire hook cannot run: {error}"));
                    continue;
                }
                Err(_) => continue,
            };
            if !prepared.manifest.hooks.contains_key(&HookEvent::Retire) {
                continue;
            }
            if prepared.manifest.is_executable() && !prepared.entry.trusted {
                if owed {
                    problems.push(format!("{id}: its retire hook cannot run: not trusted"));
                }
                continue;
            }
            let result = self.run_hook(
                &prepared,
                HookEvent::Retire,
                home,
                Some(metas.get(id).unwrap_or(&Value::Null)),
                &context.of(id),
            );
            if !result.cleanup_proven() {
                problems.push(format!(
                    "{id}: the retire hook reported incomplete cleanup: {}",
                    result.message
                ));
            }
            hooks.push(result);
        }
        if !problems.is_empty() {
            return Ok(RetireOutcome::Blocked { hooks, problems });
        }
        remove_home(home)?;
        Ok(RetireOutcome::Retired { hooks })
    }

    fn retry(
        &self,
        home: &Path,
        marker_path: &Path,
        marker: &Value,
        outstanding: Vec<Outstanding>,
        context: &LifecycleContext,
    ) -> Result<RetireOutcome> {
        let mut hooks = Vec::new();
        let mut remaining = Vec::new();
        let mut blockers = Vec::new();
        for item in outstanding {
            if item.hook.is_none() {
                blockers.push(format!(
                    "{}: {}; no hook can prove this done",
                    item.capability,
                    if item.reason.contains("declares no retire hook") {
                        "declares no retire hook".to_owned()
                    } else {
                        item.reason.clone()
                    }
                ));
                remaining.push(item);
                continue;
            }
            let prepared = match self.prepare(&item.capability, false) {
                Ok(prepared) if prepared.entry.trusted || !prepared.manifest.is_executable() => {
                    prepared
                }
                Ok(_) => {
                    blockers.push(format!("{}: not trusted", item.capability));
                    remaining.push(item);
                    continue;
                }
                Err(error) => {
                    blockers.push(format!("{}: {error}", item.capability));
                    remaining.push(item);
                    continue;
                }
            };
            if !prepared.manifest.hooks.contains_key(&HookEvent::Retire) {
                blockers.push(format!("{}: declares no retire hook", item.capability));
                remaining.push(item);
                continue;
            }
            let result = self.run_hook(
                &prepared,
                HookEvent::Retire,
                home,
                Some(&item.meta),
                &context.of(&item.capability),
            );
            let proven = result.cleanup_proven();
            let message = result.message.clone();
            hooks.push(result);
            if !proven {
                remaining.push(Outstanding {
                    reason: format!("the retried retire hook did not prove cleanup: {message}"),
                    ..item
                });
            }
        }
        if hooks.is_empty() {
            return Err(OatsError::new(
                ErrorCode::RollbackIncomplete,
                home.display().to_string(),
                format!(
                    "the retry could rerun none of the outstanding hooks, so the quarantine stays: {}. Inspect the home, then retire with force to remove it and own what is outstanding",
                    blockers.join("; ")
                ),
            ));
        }
        if remaining.is_empty() {
            remove_home(home)?;
            return Ok(RetireOutcome::Cleared { hooks });
        }
        let mut updated = marker.clone();
        updated["outstanding"] = json!(
            remaining
                .iter()
                .map(Outstanding::to_json)
                .collect::<Vec<_>>()
        );
        write_json(marker_path, &updated)?;
        Ok(RetireOutcome::StillQuarantined {
            hooks,
            outstanding: remaining,
        })
    }
}

fn parse_marker(marker: &Value) -> Option<Vec<Outstanding>> {
    let map = marker.as_object()?;
    if map.get("protocol")?.as_str()? != QUARANTINE_PROTOCOL {
        return None;
    }
    map.get("outstanding")?
        .as_array()?
        .iter()
        .map(Outstanding::from_json)
        .collect()
}

/// The capability ids, the ids whose spawn hook ran, and each meta.
type Record = (Vec<String>, Vec<String>, BTreeMap<String, Value>);

fn parse_record(record: &Value) -> Option<Record> {
    let map = record.as_object()?;
    if map.get("protocol")?.as_str()? != INSTANCE_PROTOCOL {
        return None;
    }
    let ids = map
        .get("capabilities")?
        .as_array()?
        .iter()
        .map(|c| c.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect::<Option<Vec<_>>>()?;
    let attempted = map
        .get("attempted")?
        .as_array()?
        .iter()
        .map(|id| id.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()?;
    let metas = map
        .get("meta")?
        .as_object()?
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some((ids, attempted, metas))
}

fn remove_home(home: &Path) -> Result<()> {
    fs::remove_dir_all(home)
        .map_err(|error| home_error(home, format!("could not be removed: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(meta: Option<Value>, succeeded: bool) -> HookResult {
        HookResult {
            capability: "acme.x".into(),
            event: HookEvent::Retire,
            required: false,
            succeeded,
            message: String::new(),
            meta,
            brief: None,
            warning: None,
            launch: None,
            env: BTreeMap::new(),
        }
    }

    #[test]
    fn the_last_non_empty_line_is_the_answer() {
        let answer = hook_answer(b"log\n{\"meta\":{\"a\":1}}\n\n  \n").unwrap();
        assert_eq!(answer["meta"], json!({"a": 1}));
        assert!(hook_answer(b"{\"meta\":1}\nnot json\n").is_none());
        assert!(hook_answer(b"[1]\n").is_none());
        assert!(hook_answer(b"").is_none());
    }

    #[test]
    fn cleanup_is_proven_only_by_success_without_retired_false() {
        assert!(result(None, true).cleanup_proven());
        assert!(result(Some(json!({"retired": true})), true).cleanup_proven());
        assert!(
            result(
                Some(json!({"retired": false, "reason": "nothing-to-delete"})),
                true
            )
            .cleanup_proven()
        );
        assert!(!result(Some(json!({"retired": false})), true).cleanup_proven());
        assert!(!result(Some(json!({"retired": false, "reason": "x"})), true).cleanup_proven());
        assert!(!result(None, false).cleanup_proven());
    }

    #[test]
    fn markers_and_records_are_read_strictly() {
        let marker = json!({
            "protocol": QUARANTINE_PROTOCOL,
            "cause": {},
            "outstanding": [{"capability": "acme.x", "hook": "retire", "meta": null, "reason": "r"}],
        });
        assert_eq!(parse_marker(&marker).unwrap().len(), 1);
        let mut bad = marker.clone();
        bad["outstanding"][0]["hook"] = json!("spawn");
        assert!(parse_marker(&bad).is_none());
        let mut bad = marker.clone();
        bad["protocol"] = json!("other/1");
        assert!(parse_marker(&bad).is_none());
        let mut bad = marker;
        bad["outstanding"][0]["extra"] = json!(1);
        assert!(parse_marker(&bad).is_none());
        let record = json!({
            "protocol": INSTANCE_PROTOCOL,
            "capabilities": [{"id": "acme.x", "integrity": "i"}],
            "attempted": ["acme.x"],
            "meta": {"acme.x": {"a": 1}},
        });
        let (ids, attempted, metas) = parse_record(&record).unwrap();
        assert_eq!((ids.len(), attempted.len(), metas.len()), (1, 1, 1));
        assert!(parse_record(&json!({"protocol": INSTANCE_PROTOCOL})).is_none());
    }
}
