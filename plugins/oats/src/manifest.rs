//! The strict `oats.json` parser for the 0.24.0 capability contract.
//!
//! Every object of the schema is closed: a key that is not declared is refused, naming the
//! field. Keys that start with `_` are annotations and are dropped at every level of the
//! manifest's own structure (never inside free-form values such as a setting's `default`).
//! Fields that later kernels added (`binding.reasons`, `binding.keys`, `private`, the
//! `launch` hook, `harness`, `settings.*.hostOnly`) are refused with `unsupported-field`,
//! because a 0.24.0 kernel refuses them too. Cross-field rules follow the schema and the
//! runtime: `required` only on `spawn`; `binding` needs `layer`; binding phases and
//! operations name existing commands; environment names under the vendor prefix (or a
//! declared namespace) and outside the core and bootstrap denylists; the id grammars.
//!
//! Numbers in a manifest may be fractions (a setting default of `0.5` is fine); integers
//! are only required where the schema says `1`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::compat::{OATS_CONTRACT_VERSION, Range};
use crate::error::{ErrorCode, OatsError, Result};
use crate::grammar;
use crate::json::{self, Limits, type_name};

/// The file name of a capability's manifest, at the root of its directory.
pub const MANIFEST_FILE: &str = "oats.json";

/// The bounds of a manifest: 256 KiB, nesting 32, 16 384 values. A real manifest (okf 2.1.0)
/// is about 5 KiB.
pub const MANIFEST_LIMITS: Limits = Limits {
    bytes: 256 * 1024,
    depth: 32,
    entries: 16_384,
};

sf_contracts::word_enum! {
    /// A capability's exclusive layer, by its name in manifests.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Layer {
        /// The knowledge layer (`OATS_LAYER=knowledge`, the binding `slot`).
        "knowledge" Knowledge,
        /// The messaging layer.
        "messaging" Messaging,
        /// The tasks layer.
        "tasks" Tasks,
    }
}

/// A host command a capability needs on PATH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRequirement {
    /// The command's name, as it would be looked up on PATH.
    pub command: String,
    /// Why the capability needs it, for a person.
    pub why: String,
    /// How to install it, for a person.
    pub install: Option<String>,
}

/// A runtime package a capability needs.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeRequirement {
    /// The agent runtime the package belongs to: `pi` or `claude`.
    pub runtime: String,
    /// The package's name in that runtime.
    pub package: String,
    /// Why the capability needs it, for a person.
    pub why: String,
    /// How to install it, for a person.
    pub install: Option<String>,
    /// `marketplace`, as declared.
    pub marketplace: Option<String>,
    /// `when`: a condition object, kept as declared (sf does not evaluate it).
    pub when: Option<Map<String, Value>>,
    /// `minVersion`: the lowest acceptable package version, `X.Y.Z`.
    pub min_version: Option<String>,
    /// `ifInstalled`, as declared.
    pub if_installed: Option<bool>,
}

/// One `requires` item.
#[derive(Clone, Debug, PartialEq)]
pub enum Requirement {
    /// An item without `runtime`: a host command.
    Host(HostRequirement),
    /// An item with `runtime`: a package of an agent runtime.
    Runtime(RuntimeRequirement),
}

/// `helperInjection` (`version: 1`), by its `mode`. sf validates it, and checks a file's
/// containment; it injects nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HelperInjection {
    /// `inherit`, with no path.
    Inherit,
    /// `omit`, with no path.
    Omit,
    /// `file`, with the capability's own file.
    File {
        /// The file, a normalized relative POSIX path under the capability root.
        path: String,
    },
}

/// A command line: `"<script> [args…]"` split on white space, without a shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    /// The declared text.
    pub text: String,
    /// The first token: the script, relative to the capability root.
    pub script: String,
    /// The other tokens, passed after the script.
    pub args: Vec<String>,
}

impl CommandLine {
    fn parse(text: &str, field: &str) -> Result<Self> {
        let mut tokens = text.split_whitespace();
        let Some(script) = tokens.next() else {
            return Err(invalid(field, "must be a non-empty command string"));
        };
        if let Some(problem) = grammar::lexical_escape(script) {
            return Err(OatsError::new(
                ErrorCode::PathEscape,
                field,
                format!("script {script:?} {problem}"),
            ));
        }
        Ok(Self {
            text: text.to_owned(),
            script: script.to_owned(),
            args: tokens.map(str::to_owned).collect(),
        })
    }
}

/// The binding phases (provider binding wire v1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The command (a key of `commands`) the `normalize` phase runs.
    pub normalize: String,
    /// The command the `bind` phase runs.
    pub bind: String,
    /// The command the `check` phase runs; sf's Gate consults it.
    pub check: String,
}

sf_contracts::word_enum! {
    /// A binding phase, by its name on the wire.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Phase {
        /// `normalize`: the provider normalizes the caller's input before binding.
        "normalize" Normalize,
        /// `bind`: the provider produces the binding that `check` is later asked about.
        "bind" Bind,
        /// `check`: the provider reports whether it is usable now
        /// ([`CheckResult`](crate::binding::CheckResult)).
        "check" Check,
    }
}

impl Binding {
    /// The command key a phase runs.
    pub fn command(&self, phase: Phase) -> &str {
        match phase {
            Phase::Normalize => &self.normalize,
            Phase::Bind => &self.bind,
            Phase::Check => &self.check,
        }
    }
}

sf_contracts::word_enum! {
    /// A lifecycle event, by its name in manifests and in `OATS_EVENT`; only the events
    /// 0.24.0 accepts parse.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum HookEvent {
        /// `soul-scaffold`: runs in an existing home; it may not contribute environment.
        "soul-scaffold" SoulScaffold,
        /// `spawn`: runs in a new home; the only hook that can be required or contribute
        /// environment.
        "spawn" Spawn,
        /// `retire`: runs before a home is removed, and to compensate a failed spawn.
        "retire" Retire,
    }
}

/// One hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    /// The hook's command line.
    pub command: CommandLine,
    /// Only ever true on `spawn`.
    pub required: bool,
    /// Whether the hook opted in to a source receipt (`inputs.sourceReceipt {version:1}`).
    /// sf parses the opt-in but has no receipt to deliver (like oats's classic path).
    pub source_receipt: bool,
}

/// An operation's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationKind {
    /// `action` (the default): its result is relayed as the provider wrote it.
    Action,
    /// `view`: its result must be documents to show, `{documents, summary?}`.
    View,
}

/// Where an operation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationContext {
    /// `home` (the default): it needs an instance home.
    Home,
    /// `scope`: it runs without a home.
    Scope,
}

/// One declared argument of an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationArg {
    /// The argument's name (`--arg name=value`), `^[a-z][a-z0-9-]*$`, unique in the operation.
    pub name: String,
    /// The declared flag, `^--[a-z][a-z0-9-]*$`; see [`OperationArg::flag`].
    pub flag: Option<String>,
    /// Whether the operation refuses to run without it.
    pub required: bool,
    /// What the argument means, for a person.
    pub description: Option<String>,
}

impl OperationArg {
    /// The flag placed before the value: the declared one, else `--<name>`.
    pub fn flag(&self) -> String {
        self.flag
            .clone()
            .unwrap_or_else(|| format!("--{}", self.name))
    }
}

/// One operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// The command (a key of `commands`) the operation runs.
    pub command: String,
    /// Whether it is an action or a view.
    pub kind: OperationKind,
    /// Whether it needs an instance home.
    pub context: OperationContext,
    /// What the operation does, for a person.
    pub description: Option<String>,
    /// The declared arguments, in order.
    pub args: Vec<OperationArg>,
}

/// One documented setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// The value in `OATS_SETTINGS` unless the caller overrides it; any JSON value.
    pub default: Option<Value>,
    /// The only values the effective setting may take, when declared.
    pub values: Option<Vec<Value>>,
    /// What the setting means, for a person.
    pub description: Option<String>,
}

/// `retirement` (accepted by the 0.21-era runtime though not in the schema).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retirement {
    /// `disposable.home`, as declared; sf keeps it and does not act on it.
    pub home: Vec<String>,
    /// `disposable.work`, as declared; sf keeps it and does not act on it.
    pub work: Vec<String>,
}

/// A parsed, validated capability manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// The capability id: namespaced and lowercase, as in `acme.tool`.
    pub capability: String,
    /// The capability's own version, as declared.
    pub version: String,
    /// What the capability is, for a person.
    pub description: String,
    /// `command`: the command namespace the capability claims, `^[a-z0-9][a-z0-9-]*$`; no
    /// two registered capabilities claim the same one.
    pub command: Option<String>,
    /// `compatibility.oats`, already checked to admit [`OATS_CONTRACT_VERSION`].
    pub compatibility: Option<String>,
    /// The capability's exclusive layer; required with a binding.
    pub layer: Option<Layer>,
    /// What the capability needs from the host; parsed, not looked up.
    pub requires: Vec<Requirement>,
    /// The paths of its skills (files or directories), each listed once.
    pub skills: Vec<String>,
    /// `inject`: a file of the capability; checked to exist inside it.
    pub inject: Option<String>,
    /// `helperInjection`, when declared.
    pub helper_injection: Option<HelperInjection>,
    /// The names of the caller's environment variables the capability may receive once
    /// trusted, each listed once, under its vendor prefix or a declared namespace.
    pub environment: Vec<String>,
    /// `environmentNamespaces`: prefixes (`^[A-Z][A-Z0-9]*_$`) besides the vendor's that
    /// environment names may use.
    pub environment_namespaces: Vec<String>,
    /// Command name → its command line.
    pub commands: BTreeMap<String, CommandLine>,
    /// The commands of the binding phases (`binding`, `version: 1`), when declared.
    pub binding: Option<Binding>,
    /// At most one hook per lifecycle event.
    pub hooks: BTreeMap<HookEvent, Hook>,
    /// Operation name → the operation.
    pub operations: BTreeMap<String, Operation>,
    /// Setting name → its default, allowed values and description.
    pub settings: BTreeMap<String, Setting>,
    /// The paths of its agent directories.
    pub agents: Vec<String>,
    /// `retirement`, when declared.
    pub retirement: Option<Retirement>,
}

impl Manifest {
    /// The sf roles this capability can fill: `gate` (its `binding.check` as sf's Gate),
    /// `check` (a scope operation as a Slice's check), `hooks` (lifecycle hooks sf runs),
    /// `operations` and `commands` (run confined through `sf oats`).
    pub fn roles(&self) -> Vec<&'static str> {
        let mut roles = Vec::new();
        if self.binding.is_some() {
            roles.push("gate");
        }
        // A scope operation can be a Slice's check (a home operation needs an instance home,
        // which a check has not).
        if self
            .operations
            .values()
            .any(|operation| operation.context == OperationContext::Scope)
        {
            roles.push("check");
        }
        if !self.hooks.is_empty() {
            roles.push("hooks");
        }
        if !self.operations.is_empty() {
            roles.push("operations");
        }
        if !self.commands.is_empty() {
            roles.push("commands");
        }
        roles
    }

    /// Whether the capability has an executable surface (commands, hooks or environment),
    /// which only runs once trusted.
    pub fn is_executable(&self) -> bool {
        !self.commands.is_empty() || !self.hooks.is_empty() || !self.environment.is_empty()
    }

    /// Every declared path with the field that declares it, and whether it must be a file
    /// (`Some(true)`), a directory (`Some(false)`) or either (`None`).
    pub fn declared_paths(&self) -> Vec<(String, String, Option<bool>)> {
        let mut paths = Vec::new();
        for (index, skill) in self.skills.iter().enumerate() {
            paths.push((format!("skills[{index}]"), skill.clone(), None));
        }
        for (index, agent) in self.agents.iter().enumerate() {
            paths.push((format!("agents[{index}]"), agent.clone(), Some(false)));
        }
        if let Some(inject) = &self.inject {
            paths.push(("inject".into(), inject.clone(), Some(true)));
        }
        if let Some(HelperInjection::File { path }) = &self.helper_injection {
            paths.push(("helperInjection.path".into(), path.clone(), Some(true)));
        }
        for (name, line) in &self.commands {
            paths.push((format!("commands.{name}"), line.script.clone(), Some(true)));
        }
        for (event, hook) in &self.hooks {
            let field = format!("hooks.{}", event.as_str());
            paths.push((field, hook.command.script.clone(), Some(true)));
        }
        paths
    }
}

fn invalid(field: &str, message: impl Into<String>) -> OatsError {
    OatsError::new(ErrorCode::InvalidManifest, field, message)
}

fn unsupported(field: &str, what: &str) -> OatsError {
    OatsError::new(
        ErrorCode::UnsupportedField,
        field,
        format!(
            "{what} was added to the oats contract after {OATS_CONTRACT_VERSION}, which is the version sf implements"
        ),
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// An object's entries without `_`-prefixed keys, each checked against `declared`; a key in
/// `later` is refused as a post-0.24.0 field.
struct Object<'a> {
    path: String,
    map: BTreeMap<&'a str, &'a Value>,
}

impl<'a> Object<'a> {
    fn new(value: &'a Value, path: &str, declared: &[&str], later: &[&str]) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(invalid(
                path,
                format!("must be an object, not {}", type_name(value)),
            ));
        };
        let mut kept = BTreeMap::new();
        for (key, item) in map {
            if key.starts_with('_') {
                continue;
            }
            if later.contains(&key.as_str()) {
                return Err(unsupported(&join(path, key), &format!("{key:?}")));
            }
            if !declared.contains(&key.as_str()) {
                return Err(invalid(
                    &join(path, key),
                    format!(
                        "is not a field of this object (declared: {})",
                        declared.join(", ")
                    ),
                ));
            }
            kept.insert(key.as_str(), item);
        }
        Ok(Self {
            path: path.to_owned(),
            map: kept,
        })
    }

    fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).copied()
    }

    fn required(&self, key: &str) -> Result<&'a Value> {
        self.get(key)
            .ok_or_else(|| invalid(&self.field(key), "is required"))
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(invalid(
                &self.field(key),
                format!("must be a string, not {}", type_name(other)),
            )),
        }
    }

    fn nonempty_string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.string(key)? {
            Some("") => Err(invalid(&self.field(key), "must not be empty")),
            other => Ok(other),
        }
    }

    fn required_string(&self, key: &str) -> Result<&'a str> {
        self.required(key)?;
        Ok(self.nonempty_string(key)?.unwrap_or_default())
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(invalid(
                &self.field(key),
                format!("must be a boolean, not {}", type_name(other)),
            )),
        }
    }

    fn version_one(&self, key: &str) -> Result<()> {
        match self.required(key)? {
            Value::Number(number) if number.as_u64() == Some(1) => Ok(()),
            other => Err(invalid(
                &self.field(key),
                format!("must be the integer 1, not {other}"),
            )),
        }
    }

    fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(other) => Err(invalid(
                &self.field(key),
                format!("must be an object, not {}", type_name(other)),
            )),
        }
    }

    fn strings(&self, key: &str, unique: bool) -> Result<Vec<String>> {
        let Some(value) = self.get(key) else {
            return Ok(Vec::new());
        };
        let Value::Array(items) = value else {
            return Err(invalid(
                &self.field(key),
                format!("must be an array of strings, not {}", type_name(value)),
            ));
        };
        let mut out = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let field = format!("{}[{index}]", self.field(key));
            let Value::String(text) = item else {
                return Err(invalid(
                    &field,
                    format!("must be a string, not {}", type_name(item)),
                ));
            };
            if unique && out.contains(text) {
                return Err(invalid(&field, format!("{text:?} is listed twice")));
            }
            out.push(text.clone());
        }
        Ok(out)
    }
}

const TOP_LEVEL: &[&str] = &[
    "capability",
    "version",
    "description",
    "command",
    "compatibility",
    "layer",
    "requires",
    "skills",
    "inject",
    "helperInjection",
    "environment",
    "environmentNamespaces",
    "commands",
    "binding",
    "hooks",
    "operations",
    "settings",
    "agents",
    "retirement",
];

/// Reads and validates a manifest from its bytes.
pub fn parse(bytes: &[u8]) -> Result<Manifest> {
    let value =
        json::parse(bytes, MANIFEST_LIMITS).map_err(|problem| problem.into_error(MANIFEST_FILE))?;
    from_value(&value)
}

/// Validates a manifest already parsed as JSON.
pub fn from_value(value: &Value) -> Result<Manifest> {
    let Value::Object(map) = value else {
        return Err(invalid(
            "(root)",
            format!("a manifest is a JSON object, not {}", type_name(value)),
        ));
    };
    // Refusals with a specific reason before the generic unknown-field one.
    for key in ["global", "groups", "souls", "targets", "agent-types"] {
        if map.contains_key(key) {
            return Err(invalid(
                key,
                "cannot declare config-owned targets; targeting belongs to the host's configuration",
            ));
        }
    }
    if map.contains_key("integration") && !map.contains_key("capability") {
        return Err(invalid(
            "capability",
            "a pre-contract manifest ({integration, layer}) needs \"capability\"; the retired key \"integration\" is not read",
        ));
    }
    let top = Object::new(value, "", TOP_LEVEL, &["private"])?;

    let capability = top.required_string("capability")?.to_owned();
    if !grammar::is_capability_id(&capability) {
        return Err(OatsError::new(
            ErrorCode::InvalidId,
            "capability",
            format!(
                "{capability:?} is not a namespaced capability id (lowercase, with a . or / separator, as in \"acme.tool\")"
            ),
        ));
    }
    let version = top.required_string("version")?.to_owned();
    let description = top.required_string("description")?.to_owned();
    let command = top.string("command")?.map(str::to_owned);
    if let Some(command) = &command
        && !grammar::is_command_name(command)
    {
        return Err(invalid(
            "command",
            format!("{command:?} does not match ^[a-z0-9][a-z0-9-]*$"),
        ));
    }

    let compatibility = match top.get("compatibility") {
        None => None,
        Some(value) => {
            let object = Object::new(value, "compatibility", &["oats"], &[])?;
            let range = object.required_string("oats")?;
            let Some(parsed) = Range::parse(range) else {
                return Err(invalid(
                    "compatibility.oats",
                    format!(
                        "{range:?} is not a range sf reads: use >=X.Y.Z, ^X.Y.Z or an exact X.Y.Z"
                    ),
                ));
            };
            if !parsed.admits(OATS_CONTRACT_VERSION) {
                return Err(OatsError::new(
                    ErrorCode::Incompatible,
                    "compatibility.oats",
                    format!(
                        "requires oats {range}; sf implements the oats {OATS_CONTRACT_VERSION} capability contract"
                    ),
                ));
            }
            Some(range.to_owned())
        }
    };

    let layer = match top.string("layer")? {
        None => None,
        Some(name) => Some(Layer::parse(name).ok_or_else(|| {
            invalid(
                "layer",
                format!("{name:?} is not one of {}", Layer::WORDS.join(", ")),
            )
        })?),
    };

    let requires = parse_requires(&top)?;
    let skills = top.strings("skills", true)?;
    let agents = top.strings("agents", false)?;
    for (field, path) in skills
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("skills[{i}]"), p))
        .chain(
            agents
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("agents[{i}]"), p)),
        )
    {
        check_lexical(&field, path)?;
    }
    let inject = top.string("inject")?.map(str::to_owned);
    if let Some(inject) = &inject {
        check_lexical("inject", inject)?;
    }
    let helper_injection = match top.get("helperInjection") {
        None => None,
        Some(value) => Some(parse_helper_injection(value)?),
    };

    let environment = top.strings("environment", true)?;
    let environment_namespaces = top.strings("environmentNamespaces", false)?;
    check_environment(&capability, &environment, &environment_namespaces)?;

    let mut commands = BTreeMap::new();
    if let Some(map) = top.object("commands")? {
        for (name, value) in map {
            if name.starts_with('_') {
                continue;
            }
            let field = format!("commands.{name}");
            if !grammar::is_command_name(name) {
                return Err(invalid(
                    &field,
                    "a command name matches ^[a-z0-9][a-z0-9-]*$",
                ));
            }
            let Value::String(text) = value else {
                return Err(invalid(
                    &field,
                    format!("must be a non-empty string, not {}", type_name(value)),
                ));
            };
            commands.insert(name.clone(), CommandLine::parse(text, &field)?);
        }
    }

    let binding = match top.get("binding") {
        None => None,
        Some(value) => {
            let object = Object::new(
                value,
                "binding",
                &["version", "normalize", "bind", "check"],
                &["reasons", "keys"],
            )?;
            object.version_one("version")?;
            let phase = |key: &str| -> Result<String> {
                let name = object.required_string(key)?;
                let field = object.field(key);
                if !grammar::is_command_name(name) {
                    return Err(invalid(
                        &field,
                        "a phase names a command: ^[a-z0-9][a-z0-9-]*$",
                    ));
                }
                if !commands.contains_key(name) {
                    return Err(invalid(
                        &field,
                        format!("names {name:?}, which is not a key of \"commands\""),
                    ));
                }
                Ok(name.to_owned())
            };
            let binding = Binding {
                normalize: phase("normalize")?,
                bind: phase("bind")?,
                check: phase("check")?,
            };
            if layer.is_none() {
                return Err(invalid(
                    "binding",
                    "a capability with a binding must declare its \"layer\"",
                ));
            }
            Some(binding)
        }
    };

    let hooks = match top.get("hooks") {
        None => BTreeMap::new(),
        Some(value) => parse_hooks(value)?,
    };
    let operations = match top.get("operations") {
        None => BTreeMap::new(),
        Some(value) => parse_operations(value, &commands)?,
    };
    let settings = match top.get("settings") {
        None => BTreeMap::new(),
        Some(value) => parse_settings(value)?,
    };
    let retirement = match top.get("retirement") {
        None => None,
        Some(value) => Some(parse_retirement(value)?),
    };

    Ok(Manifest {
        capability,
        version,
        description,
        command,
        compatibility,
        layer,
        requires,
        skills,
        inject,
        helper_injection,
        environment,
        environment_namespaces,
        commands,
        binding,
        hooks,
        operations,
        settings,
        agents,
        retirement,
    })
}

fn check_lexical(field: &str, path: &str) -> Result<()> {
    match grammar::lexical_escape(path) {
        Some(problem) => Err(OatsError::new(
            ErrorCode::PathEscape,
            field,
            format!("{path:?} {problem}"),
        )),
        None => Ok(()),
    }
}

fn parse_requires(top: &Object<'_>) -> Result<Vec<Requirement>> {
    let Some(value) = top.get("requires") else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = value else {
        return Err(invalid(
            "requires",
            format!("must be an array, not {}", type_name(value)),
        ));
    };
    let mut out = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let path = format!("requires[{index}]");
        let Value::Object(map) = item else {
            return Err(invalid(
                &path,
                format!("must be an object, not {}", type_name(item)),
            ));
        };
        if map.contains_key("harness") {
            return Err(unsupported(&join(&path, "harness"), "\"harness\""));
        }
        if map.contains_key("runtime") {
            let object = Object::new(
                item,
                &path,
                &[
                    "runtime",
                    "package",
                    "why",
                    "install",
                    "marketplace",
                    "when",
                    "minVersion",
                    "ifInstalled",
                ],
                &[],
            )?;
            let runtime = object.required_string("runtime")?;
            if runtime != "pi" && runtime != "claude" {
                return Err(invalid(
                    &object.field("runtime"),
                    format!("{runtime:?} is not one of pi, claude"),
                ));
            }
            let min_version = object.string("minVersion")?.map(str::to_owned);
            if let Some(min) = &min_version
                && crate::compat::Version::parse(min).is_none()
            {
                return Err(invalid(
                    &object.field("minVersion"),
                    format!("{min:?} does not match ^\\d+\\.\\d+\\.\\d+$"),
                ));
            }
            out.push(Requirement::Runtime(RuntimeRequirement {
                runtime: runtime.to_owned(),
                package: object.required_string("package")?.to_owned(),
                why: object.required_string("why")?.to_owned(),
                install: object.string("install")?.map(str::to_owned),
                marketplace: object.string("marketplace")?.map(str::to_owned),
                when: object.object("when")?.cloned(),
                min_version,
                if_installed: object.boolean("ifInstalled")?,
            }));
        } else {
            let object = Object::new(item, &path, &["command", "why", "install"], &[])?;
            out.push(Requirement::Host(HostRequirement {
                command: object.required_string("command")?.to_owned(),
                why: object.required_string("why")?.to_owned(),
                install: object.string("install")?.map(str::to_owned),
            }));
        }
    }
    Ok(out)
}

fn parse_helper_injection(value: &Value) -> Result<HelperInjection> {
    let object = Object::new(value, "helperInjection", &["version", "mode", "path"], &[])?;
    object.version_one("version")?;
    let mode = object.required_string("mode")?;
    let path = object.string("path")?;
    match (mode, path) {
        ("inherit", None) => Ok(HelperInjection::Inherit),
        ("omit", None) => Ok(HelperInjection::Omit),
        ("inherit" | "omit", Some(_)) => Err(invalid(
            "helperInjection.path",
            format!("mode {mode:?} takes no path"),
        )),
        ("file", None) => Err(invalid(
            "helperInjection.path",
            "mode \"file\" needs a path",
        )),
        ("file", Some(path)) => {
            if let Some(problem) = grammar::strict_relative_problem(path) {
                return Err(OatsError::new(
                    ErrorCode::PathEscape,
                    "helperInjection.path",
                    format!("{path:?} {problem}; it must be a normalized relative POSIX path"),
                ));
            }
            Ok(HelperInjection::File {
                path: path.to_owned(),
            })
        }
        (other, _) => Err(invalid(
            "helperInjection.mode",
            format!("{other:?} is not one of inherit, omit, file"),
        )),
    }
}

fn check_environment(capability: &str, names: &[String], namespaces: &[String]) -> Result<()> {
    for (index, prefix) in namespaces.iter().enumerate() {
        let field = format!("environmentNamespaces[{index}]");
        if !grammar::is_namespace(prefix) {
            return Err(OatsError::new(
                ErrorCode::InvalidId,
                field,
                format!("{prefix:?} does not match ^[A-Z][A-Z0-9]*_$"),
            ));
        }
        if let Some(problem) = grammar::reserved_namespace(prefix) {
            return Err(OatsError::new(
                ErrorCode::InvalidId,
                field,
                format!("{prefix:?} {problem}"),
            ));
        }
    }
    if names.is_empty() {
        return Ok(());
    }
    if !grammar::is_environment_id(capability) {
        return Err(OatsError::new(
            ErrorCode::InvalidId,
            "capability",
            format!(
                "{capability:?} declares launch environment, which needs a dotted lowercase id: ^[a-z][a-z0-9]*\\.[a-z0-9]+(?:[.-][a-z0-9]+)*$"
            ),
        ));
    }
    let vendor = grammar::vendor_of(capability).unwrap_or_default();
    let vendor_prefix = format!("{}_", vendor.to_ascii_uppercase());
    for (index, name) in names.iter().enumerate() {
        let field = format!("environment[{index}]");
        if !grammar::is_environment_name(name) {
            return Err(OatsError::new(
                ErrorCode::InvalidId,
                field,
                format!("{name:?} does not match ^[A-Za-z_][A-Za-z0-9_]{{0,127}}$"),
            ));
        }
        if let Some(problem) = grammar::reserved_environment_name(name) {
            return Err(OatsError::new(
                ErrorCode::InvalidId,
                field,
                format!("{name:?} {problem}"),
            ));
        }
        if !name.starts_with(&vendor_prefix)
            && !namespaces.iter().any(|p| name.starts_with(p.as_str()))
        {
            return Err(OatsError::new(
                ErrorCode::InvalidId,
                field,
                format!(
                    "{name:?} is outside the vendor prefix {vendor_prefix} and every declared environmentNamespaces prefix"
                ),
            ));
        }
    }
    Ok(())
}

fn parse_hooks(value: &Value) -> Result<BTreeMap<HookEvent, Hook>> {
    let Value::Object(map) = value else {
        return Err(invalid(
            "hooks",
            format!("must be an object, not {}", type_name(value)),
        ));
    };
    let mut hooks = BTreeMap::new();
    for (key, item) in map {
        if key.starts_with('_') {
            continue;
        }
        let field = format!("hooks.{key}");
        let Some(event) = HookEvent::parse(key) else {
            let message = if key == "launch" {
                "unsupported hook: \"launch\" was added after oats 0.24.0; sf accepts soul-scaffold, spawn and retire"
                    .to_owned()
            } else {
                format!("unsupported hook {key:?}; sf accepts soul-scaffold, spawn and retire")
            };
            return Err(OatsError::new(ErrorCode::UnsupportedHook, field, message));
        };
        let hook = match item {
            Value::String(text) => Hook {
                command: CommandLine::parse(text, &field)?,
                required: false,
                source_receipt: false,
            },
            Value::Object(_) => {
                let object = Object::new(item, &field, &["command", "required", "inputs"], &[])?;
                object.required("command")?;
                let text = object.string("command")?.unwrap_or_default();
                let command = CommandLine::parse(text, &object.field("command"))?;
                let required = object.boolean("required")?.unwrap_or(false);
                if required && event != HookEvent::Spawn {
                    return Err(invalid(
                        &object.field("required"),
                        format!(
                            "the {} hook cannot be required; only the spawn hook is enforced",
                            event.as_str()
                        ),
                    ));
                }
                let source_receipt = match object.get("inputs") {
                    None => false,
                    Some(inputs) => parse_inputs(inputs, &object.field("inputs"))?,
                };
                Hook {
                    command,
                    required,
                    source_receipt,
                }
            }
            other => {
                return Err(invalid(
                    &field,
                    format!(
                        "must be a command string or {{command, required?, inputs?}}, not {}",
                        type_name(other)
                    ),
                ));
            }
        };
        hooks.insert(event, hook);
    }
    Ok(hooks)
}

fn parse_inputs(value: &Value, field: &str) -> Result<bool> {
    let object = Object::new(value, field, &["sourceReceipt"], &[])?;
    let Some(receipt) = object.get("sourceReceipt") else {
        return Ok(false);
    };
    let receipt = Object::new(receipt, &object.field("sourceReceipt"), &["version"], &[])?;
    receipt.version_one("version")?;
    Ok(true)
}

fn parse_operations(
    value: &Value,
    commands: &BTreeMap<String, CommandLine>,
) -> Result<BTreeMap<String, Operation>> {
    let Value::Object(map) = value else {
        return Err(invalid(
            "operations",
            format!("must be an object, not {}", type_name(value)),
        ));
    };
    let mut operations = BTreeMap::new();
    for (name, item) in map {
        if name.starts_with('_') {
            continue;
        }
        let field = format!("operations.{name}");
        if !grammar::is_operation_name(name) {
            return Err(invalid(
                &field,
                "an operation name matches ^[a-z][a-z0-9-]*$",
            ));
        }
        let object = Object::new(
            item,
            &field,
            &["command", "kind", "context", "description", "args"],
            &[],
        )?;
        let command = object.required_string("command")?.to_owned();
        if !commands.contains_key(&command) {
            return Err(invalid(
                &object.field("command"),
                format!("names {command:?}, which is not a key of \"commands\""),
            ));
        }
        let kind = match object.string("kind")? {
            None | Some("action") => OperationKind::Action,
            Some("view") => OperationKind::View,
            Some(other) => {
                return Err(invalid(
                    &object.field("kind"),
                    format!("{other:?} is not one of action, view"),
                ));
            }
        };
        let context = match object.string("context")? {
            None | Some("home") => OperationContext::Home,
            Some("scope") => OperationContext::Scope,
            Some(other) => {
                return Err(invalid(
                    &object.field("context"),
                    format!("{other:?} is not one of home, scope"),
                ));
            }
        };
        let description = object.string("description")?.map(str::to_owned);
        let mut args: Vec<OperationArg> = Vec::new();
        if let Some(list) = object.get("args") {
            let Value::Array(items) = list else {
                return Err(invalid(
                    &object.field("args"),
                    format!("must be an array, not {}", type_name(list)),
                ));
            };
            for (index, arg) in items.iter().enumerate() {
                let arg_field = format!("{}[{index}]", object.field("args"));
                let arg = Object::new(
                    arg,
                    &arg_field,
                    &["name", "flag", "required", "description"],
                    &[],
                )?;
                let name = arg.required_string("name")?.to_owned();
                if !grammar::is_operation_name(&name) {
                    return Err(invalid(
                        &arg.field("name"),
                        format!("{name:?} does not match ^[a-z][a-z0-9-]*$"),
                    ));
                }
                if args.iter().any(|earlier| earlier.name == name) {
                    return Err(invalid(
                        &arg.field("name"),
                        format!("{name:?} is declared twice"),
                    ));
                }
                let flag = arg.string("flag")?.map(str::to_owned);
                if let Some(flag) = &flag
                    && !grammar::is_flag(flag)
                {
                    return Err(invalid(
                        &arg.field("flag"),
                        format!("{flag:?} does not match ^--[a-z][a-z0-9-]*$"),
                    ));
                }
                args.push(OperationArg {
                    name,
                    flag,
                    required: arg.boolean("required")?.unwrap_or(false),
                    description: arg.string("description")?.map(str::to_owned),
                });
            }
        }
        operations.insert(
            name.clone(),
            Operation {
                command,
                kind,
                context,
                description,
                args,
            },
        );
    }
    Ok(operations)
}

fn parse_settings(value: &Value) -> Result<BTreeMap<String, Setting>> {
    let Value::Object(map) = value else {
        return Err(invalid(
            "settings",
            format!("must be an object, not {}", type_name(value)),
        ));
    };
    let mut settings = BTreeMap::new();
    for (name, item) in map {
        if name.starts_with('_') {
            continue;
        }
        let field = format!("settings.{name}");
        if name.is_empty() {
            return Err(invalid(&field, "the setting name is empty"));
        }
        let object = Object::new(
            item,
            &field,
            &["default", "values", "description"],
            &["hostOnly"],
        )?;
        let values = match object.get("values") {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => {
                return Err(invalid(
                    &object.field("values"),
                    format!("must be an array, not {}", type_name(other)),
                ));
            }
        };
        settings.insert(
            name.clone(),
            Setting {
                default: object.get("default").cloned(),
                values,
                description: object.string("description")?.map(str::to_owned),
            },
        );
    }
    Ok(settings)
}

fn parse_retirement(value: &Value) -> Result<Retirement> {
    let object = Object::new(value, "retirement", &["disposable"], &[])?;
    let mut retirement = Retirement::default();
    if let Some(disposable) = object.get("disposable") {
        let disposable = Object::new(disposable, "retirement.disposable", &["home", "work"], &[])?;
        retirement.home = disposable.strings("home", false)?;
        retirement.work = disposable.strings("work", false)?;
    }
    Ok(retirement)
}

/// The effective settings: each declared default, overridden by `overrides`; a value
/// outside a setting's declared `values` is refused. Undeclared settings are accepted.
pub fn effective_settings(
    manifest: &Manifest,
    overrides: &Map<String, Value>,
) -> Result<Map<String, Value>> {
    let mut effective = Map::new();
    for (name, setting) in &manifest.settings {
        if let Some(default) = &setting.default {
            effective.insert(name.clone(), default.clone());
        }
    }
    for (name, value) in overrides {
        effective.insert(name.clone(), value.clone());
    }
    for (name, value) in &effective {
        if let Some(setting) = manifest.settings.get(name)
            && let Some(values) = &setting.values
            && !values.contains(value)
        {
            return Err(OatsError::new(
                ErrorCode::InvalidSetting,
                format!("settings.{name}"),
                format!(
                    "{value} is not one of the declared values {}",
                    Value::Array(values.clone())
                ),
            ));
        }
    }
    Ok(effective)
}

/// The names of `manifest`'s commands, for messages.
pub fn command_names(manifest: &Manifest) -> String {
    let names: BTreeSet<&str> = manifest.commands.keys().map(String::as_str).collect();
    if names.is_empty() {
        "(none)".into()
    } else {
        names.into_iter().collect::<Vec<_>>().join(", ")
    }
}
