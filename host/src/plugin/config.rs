//! Configuration (`sf.toml`): which backend serves each contract, by tag.
//!
//! ```toml
//! [object_store]
//! type = "git-cli"          # the tag
//! git = "/usr/bin/git"      # the rest of the section is the backend's configuration
//!
//! [executor]
//! type = "sandbox-exec"
//! runtime = "sh"
//!
//! [evidence_store]
//! type = "sqlite"           # path = "/var/lib/sf/evidence.db"; default: the Slice's own
//!
//! [gate]
//! type = "file"             # or "open", or a plugin's tag such as "oats-binding"
//! path = "/etc/sf/gate.json"
//!
//! [environments]
//! store = "/var/lib/sf/environments"   # default: this as root (the sandbox's user can
//!                                      # reach it), else $HOME/.local/share/sf/environments
//!
//! [env.network]
//! allow = ["pypi.example.org"]   # registries an environment build may reach, beyond each
//!                                # recipe's own (`sf env build`)
//!
//! [env.build]
//! executor = { type = "sandbox-exec", runtime = { executable = "/bin/sh", readable = ["/usr"] } }
//!
//! [delivery]
//! credential_helper = "store --file=/etc/sf/credentials"   # default: none
//! ssh_command = "ssh -i /etc/sf/deploy-key -o UserKnownHostsFile=/etc/sf/known_hosts"
//! push_timeout_seconds = 300
//! read_timeout_seconds = 60
//!
//! [attest]
//! key = "/etc/sf/attest_ed25519"   # an OpenSSH Ed25519 private key: each landing is attested
//!
//! [oats]
//! state = "/var/lib/sf"   # where `sf oats --state` keeps the registry the Slices' oats
//!                         # checks are staged from (default: as `sf oats` chooses it)
//!
//! [serve]                            # `sf serve` (see super::serve_config)
//! listen = "127.0.0.1:8080"
//! state = "/var/lib/sf/serve"
//! tokens = "/etc/sf/tokens"
//! [[serve.repository]]
//! name = "te"
//! identity = "/srv/sf/te/identity.json"
//! slices = ["/srv/sf/te/slice"]
//! deliver = true
//! ```
//!
//! Any backend section may pin the plugin library that serves it: `sha256 = "sha256:…"` (what
//! `sf plugins check` prints). The loader then refuses a library whose bytes hash otherwise,
//! before it maps them ([`loader::load_pinned`]); the key is sf's and never reaches the plugin,
//! and a compiled-in tag cannot be pinned.
//!
//! The attempt fence has no section: it comes with the evidence store (see [`Config::fence`]):
//! the same plugin's `fence` under the evidence store's tag, or the file fence.
//!
//! `[environments]` is not a backend: it has no `type`, only `store`, the absolute path of the
//! dependency environment store (`crate::environment_store`). Neither is `[delivery]`: the
//! credential helper Git asks for the delivery's URL only, and how long one push may take.
//! Nor `[env]`: the registry hosts an environment build may reach beyond its recipe's, and
//! the executor its runs use ([`DEFAULT_BUILD_EXECUTOR`] when not set), a table of the
//! `[executor]` section's shape.
//!
//! A backend section belongs to a contract that implements [`Configured`] (its section name,
//! default tag and compiled-in registry), listed in [`super::registry::CONTRACTS`]; one
//! generic [`Config::backend`] resolves every one of them. A tag resolves in two steps.
//! Backends compiled into the running program register their configuration type with
//! typetag (`#[typetag::serde(name = "…")] impl ObjectStoreBackend`, `impl ExecutorBackend`,
//! `impl EvidenceStoreBackend`, `impl GateBackend`); a tag typetag knows is deserialized into
//! that type and builds the backend directly. Any other tag is looked up in the manifests on
//! the plugin path (first match wins), and the section (without `type`) is handed to the
//! plugin, through the contract's adapter, as a JSON object. A tag neither knows is an error
//! listing every known tag.
//!
//! A section the file leaves out takes its embedded default ([`default_config`]); with no
//! file at all, every section does. The `sf` binary links no backend, so its defaults resolve
//! through the plugin path: `git-cli` is the `sf-git-cli` plugin shipped beside `sf`, and
//! `sandbox-exec` the `sf-sandbox-exec` plugin. The `sqlite` evidence store and the `open` and
//! `file` gates are compiled into sf-host itself. A section is resolved only when a command
//! needs its contract.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de;

use super::backend::PluginBackend;
use super::contract::HostContract;
use super::error::PluginError;
use super::evidence_store_adapter::StoreContext;
use super::evidence_store_protocol::EvidenceStoreContract;
use super::executor_protocol::ExecutorContract;
use super::fence_adapter::PluginFence;
use super::fence_protocol::FenceContract;
use super::gate_protocol::GateContract;
use super::loader::{self, LoadedPlugin};
use super::object_store_protocol::ObjectStoreContract;
use super::protocol::WireContract;
use super::registry;
use super::search::{self, PluginPath};
use crate::contracts::{AttemptFence, EvidenceStore, Executor, Gate, ObjectStoreFactory};
use crate::file_fence::FileFence;

pub use super::evidence_store_adapter::EvidenceStoreBackend;
pub use super::executor_adapter::ExecutorBackend;
pub use super::gate_adapter::GateBackend;
pub use super::object_store_adapter::ObjectStoreBackend;

/// The sections a configuration may hold besides one per backend.
const OTHER_SECTIONS: &[&str] = &["environments", "delivery", "env", "attest", "oats", "serve"];

/// The executor of an environment build when `[env.build] executor` is not set: the sandbox,
/// with a shell runtime that reads the host's `/usr` (the package tools: Python and pip,
/// Node.js and npm) and its certificate bundle (the tools check the registries' TLS
/// certificates), and a build's longer CPU time.
pub const DEFAULT_BUILD_EXECUTOR: &str = r#"type = "sandbox-exec"
runtime = { executable = "/bin/sh", readable = ["/usr", "/bin", "/lib", "/lib64", "/etc/ssl/certs"] }
limits = { cpu_seconds = 1800 }
"#;

/// `[env]`: environment builds' settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvSettings {
    /// `[env.network] allow`: registry hosts every build may reach beyond its recipe's.
    pub allow: Vec<String>,
    /// `[env.build] executor`, when set.
    pub build_executor: Option<toml::Table>,
}

/// The keys `[delivery]` may hold.
pub const DELIVERY_KEYS: &[&str] = &[
    "credential_helper",
    "ssh_command",
    "push_timeout_seconds",
    "read_timeout_seconds",
];

/// `[delivery]`: how sf reaches the team's remote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliverySettings {
    /// A Git credential helper for the delivery's URL only (`credential.<url>.helper`).
    pub credential_helper: Option<String>,
    /// The SSH command for `ssh://` upstreams (`core.sshCommand`), run with the caller's
    /// `SSH_AUTH_SOCK`.
    pub ssh_command: Option<String>,
    /// How long one push (or fetch) may take, in seconds; the default when `None`.
    pub push_timeout_seconds: Option<u64>,
    /// How long reading a remote's refs may take, in seconds; the default when `None`.
    pub read_timeout_seconds: Option<u64>,
}

/// The keys `[environments]` may hold.
pub const ENVIRONMENTS_KEYS: &[&str] = &["store", "trees"];

/// Where materialised trees are kept (an environment store of their own) when
/// `[environments] trees` is not set and sf runs as root: the sandbox reads them as an
/// unprivileged user, so they cannot be below root's private home.
pub const DEFAULT_TREE_STORE_AS_ROOT: &str = "/var/lib/sf/trees";

/// Where materialised trees are kept, below `$HOME`, when `[environments] trees` is not set
/// and sf does not run as root (the sandbox then reads as sf's own user).
pub const DEFAULT_TREE_STORE: &str = ".local/share/sf/trees";

/// Where the environment store is when `[environments] store` is not set and sf runs as
/// root: as root, each run reads its environments as a reserved unprivileged user, so the
/// store cannot be below root's private (0700) home.
pub const DEFAULT_ENVIRONMENT_STORE_AS_ROOT: &str = "/var/lib/sf/environments";

/// Where the environment store is, below `$HOME`, when `[environments] store` is not set
/// and sf does not run as root (the sandbox then reads as sf's own user).
pub const DEFAULT_ENVIRONMENT_STORE: &str = ".local/share/sf/environments";

/// The largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// A contract configured by a section of `sf.toml` of its own, resolved by
/// [`Config::backend`]: to a backend compiled into the running program, or to a plugin's
/// backend through the contract's adapter.
pub trait Configured: HostContract {
    /// The section's name (`gate` for `[gate]`).
    const SECTION: &'static str;
    /// The tag a configuration without the section takes.
    const DEFAULT_TAG: &'static str;
    /// What callers are given: the contract's trait object.
    type Object: ?Sized;
    /// The backends compiled into the running program: a typetag-registered trait object, one
    /// tag per configuration type.
    type Compiled: for<'de> serde::Deserialize<'de>;
    /// What a compiled-in backend is given besides its section.
    type Context<'a>;

    /// Builds a compiled-in backend.
    fn compiled(
        backend: Self::Compiled,
        context: Self::Context<'_>,
    ) -> Result<Arc<Self::Object>, Self::Error>;

    /// A plugin's backend as what callers are given.
    fn adapt(backend: PluginBackend<Self>) -> Arc<Self::Object>;
}

/// The tags of the backends of contract `C` compiled into the running program, sorted.
pub fn compiled_tags_of<C: Configured>() -> Vec<&'static str> {
    compiled_tags::<C::Compiled>()
}

/// The tags of the ObjectStore backends compiled into the running program, sorted.
pub fn compiled_object_store_tags() -> Vec<&'static str> {
    compiled_tags_of::<ObjectStoreContract>()
}

/// The tags of the Executor backends compiled into the running program, sorted.
pub fn compiled_executor_tags() -> Vec<&'static str> {
    compiled_tags_of::<ExecutorContract>()
}

/// The tags of the EvidenceStore backends compiled into the running program, sorted.
pub fn compiled_evidence_store_tags() -> Vec<&'static str> {
    compiled_tags_of::<EvidenceStoreContract>()
}

/// The tags of the Gate backends compiled into the running program, sorted.
pub fn compiled_gate_tags() -> Vec<&'static str> {
    compiled_tags_of::<GateContract>()
}

/// The tags typetag registered for the trait object `B` (a `Box<dyn …Backend>`), sorted.
fn compiled_tags<B: for<'de> serde::Deserialize<'de>>() -> Vec<&'static str> {
    // typetag keeps its registry private; asking it for a tag no backend can have ("") makes
    // it name every registered tag in its "unknown variant" error, which this error type keeps.
    #[derive(Debug)]
    enum Probe {
        Known(&'static [&'static str]),
        Other,
    }
    impl std::fmt::Display for Probe {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{self:?}")
        }
    }
    impl std::error::Error for Probe {}
    impl de::Error for Probe {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Self::Other
        }
        fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
            Self::Known(expected)
        }
    }
    let probe: de::value::MapDeserializer<'_, _, Probe> =
        de::value::MapDeserializer::new([("type", "")].into_iter());
    let mut tags = match B::deserialize(probe) {
        Err(Probe::Known(expected)) => expected.to_vec(),
        _ => Vec::new(),
    };
    tags.sort_unstable();
    tags
}

/// Where a configuration came from, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// The embedded defaults.
    Defaults,
    /// A file.
    File(PathBuf),
}

impl std::fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Defaults => f.write_str("the embedded default configuration"),
            Self::File(path) => write!(f, "configuration file {}", path.display()),
        }
    }
}

/// Why a configuration cannot be read or resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error(
        "configuration file {}: cannot be read ({detail}); pass an existing sf.toml to --config",
        path.display()
    )]
    Unreadable {
        /// The file given.
        path: PathBuf,
        /// Why it cannot be read (absent, not a regular file, too large, not UTF-8, ...).
        detail: String,
    },
    /// The file is not a valid configuration.
    #[error("{origin}: {detail}")]
    Invalid {
        /// Where the configuration came from.
        origin: ConfigOrigin,
        /// What is wrong with it.
        detail: String,
    },
    /// No compiled-in backend and no plugin on the plugin path serves the tag.
    #[error(
        "{origin}: [{section}] type {tag:?} is not known; known types: {}. Fix the type, or put \
         the plugin that provides it on the plugin path ({})",
        if known.is_empty() { "none".to_owned() } else { known.join(", ") },
        plugin_path.iter().map(|dir| dir.display().to_string()).collect::<Vec<_>>().join(":")
    )]
    UnknownTag {
        /// Where the configuration came from.
        origin: ConfigOrigin,
        /// The section whose tag is unknown.
        section: String,
        /// The section's `type`.
        tag: String,
        /// Every tag that serves the section's contract, with where it comes from
        /// (`sqlite (compiled in)`, `<tag> (plugin <name>, <library>)`).
        known: Vec<String>,
        /// The plugin path that was searched, in order.
        plugin_path: Vec<PathBuf>,
    },
    /// A compiled-in backend refused its configuration or failed to start.
    #[error("{origin}: [{section}] type {tag:?}: {detail}")]
    Backend {
        /// Where the configuration came from.
        origin: ConfigOrigin,
        /// The section whose backend failed (`object_store`, `executor`, `evidence_store` or
        /// `gate`).
        section: String,
        /// The section's `type`.
        tag: String,
        /// What the backend reported.
        detail: String,
    },
    /// The plugin that serves the tag failed to load, check or instantiate.
    #[error("{origin}: [{section}] type {tag:?}: {error}")]
    Plugin {
        /// Where the configuration came from.
        origin: ConfigOrigin,
        /// The section whose plugin failed (`object_store`, `executor`, `evidence_store` or
        /// `gate`).
        section: String,
        /// The section's `type`.
        tag: String,
        /// What the plugin host reported.
        error: Box<PluginError>,
    },
}

impl ConfigError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unreadable { .. } => "config-unreadable",
            Self::Invalid { .. } => "config-invalid",
            Self::UnknownTag { .. } => "unknown-tag",
            Self::Backend { .. } => "backend-failed",
            // A plugin that refused its section's fields: the sf.toml is at fault, as for a
            // compiled-in backend.
            Self::Plugin { error, .. }
                if matches!(error.as_ref(), PluginError::Refused { code, .. }
                    if code == sf_plugin_abi::protocol::INVALID_CONFIG) =>
            {
                "config-invalid"
            }
            Self::Plugin { error, .. } => error.code(),
        }
    }
}

/// One backend section: its tag, the pin of the library that serves it, and the rest of its
/// fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    tag: String,
    fields: toml::Table,
    /// `sha256 = "sha256:…"`: the SHA-256 the plugin library serving the tag must have. sf's
    /// own key, never handed to the plugin.
    sha256: Option<crate::canonical::Digest>,
}

impl Section {
    /// A section naming `tag` and nothing else: what a section left out of a file is.
    fn tagged(tag: &str) -> Self {
        Self {
            tag: tag.to_owned(),
            fields: toml::Table::new(),
            sha256: None,
        }
    }

    /// The tag (`type`).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The section's fields other than `type` and `sha256`.
    pub fn fields(&self) -> &toml::Table {
        &self.fields
    }

    /// The pinned SHA-256 of the plugin library serving the section, if any.
    pub fn sha256(&self) -> Option<&crate::canonical::Digest> {
        self.sha256.as_ref()
    }
}

/// A parsed configuration: one backend section per contract configured by its own.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    origin: ConfigOrigin,
    /// Every backend section of the registry ([`registry::CONTRACTS`]), by name.
    sections: BTreeMap<&'static str, Section>,
    /// `[environments] store`, when set.
    environment_store: Option<PathBuf>,
    /// `[environments] trees`, when set.
    tree_store: Option<PathBuf>,
    /// `[delivery]`.
    delivery: DeliverySettings,
    /// `[env]`.
    env: EnvSettings,
    /// `[attest] key`, when set: the private key landings are attested with.
    attest_key: Option<PathBuf>,
    /// `[oats] state`, when set: the state directory of the oats registry.
    oats_state: Option<PathBuf>,
    /// `[serve]`, when set.
    serve: Option<super::serve_config::ServeSettings>,
}

/// How a section's tag resolved.
enum Resolved<B> {
    /// A backend compiled into the running program.
    Compiled(B),
    /// A plugin, with the section's fields (without `type`) as JSON.
    Plugin(
        Arc<LoadedPlugin>,
        serde_json::Map<String, serde_json::Value>,
    ),
}

/// The embedded default configuration: every backend section with its default tag.
pub fn default_config() -> String {
    registry::backend_sections()
        .map(|section| format!("[{}]\ntype = {:?}\n", section.name, section.default_tag))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every section a configuration may hold, in the order messages list them.
fn section_names() -> Vec<&'static str> {
    let backends = registry::backend_sections().map(|section| section.name);
    backends.chain(OTHER_SECTIONS.iter().copied()).collect()
}

impl Config {
    /// The embedded defaults ([`default_config`]).
    pub fn defaults() -> Self {
        Self::parse(&default_config(), ConfigOrigin::Defaults)
            .expect("the embedded default configuration is valid")
    }

    /// Reads `path`, or takes the embedded defaults when there is none.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(path) = path else {
            return Ok(Self::defaults());
        };
        let unreadable = |detail: String| ConfigError::Unreadable {
            path: path.to_owned(),
            detail,
        };
        let meta = std::fs::metadata(path).map_err(|error| unreadable(error.to_string()))?;
        if !meta.is_file() {
            return Err(unreadable("not a regular file".into()));
        }
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(unreadable(format!("larger than {MAX_CONFIG_BYTES} bytes")));
        }
        let bytes = std::fs::read(path).map_err(|error| unreadable(error.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| ConfigError::Invalid {
            origin: ConfigOrigin::File(path.to_owned()),
            detail: "not UTF-8".into(),
        })?;
        Self::parse(&text, ConfigOrigin::File(path.to_owned()))
    }

    /// Parses configuration text. Every top-level key must be a known section holding a
    /// table with a string `type`; sections left out take their defaults.
    pub fn parse(text: &str, origin: ConfigOrigin) -> Result<Self, ConfigError> {
        let invalid = |detail: String| ConfigError::Invalid {
            origin: origin.clone(),
            detail,
        };
        let mut table: toml::Table = text
            .parse()
            .map_err(|error: toml::de::Error| invalid(error.to_string().trim_end().to_owned()))?;
        let known = section_names();
        if let Some(unknown) = table.keys().find(|key| !known.contains(&key.as_str())) {
            return Err(invalid(format!(
                "unknown section [{unknown}]; the known sections are {}",
                known
                    .iter()
                    .map(|section| format!("[{section}]"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let (environment_store, tree_store) = match table.remove("environments") {
            Some(value) => environments(value).map_err(invalid)?,
            None => (None, None),
        };
        let delivery = match table.remove("delivery") {
            Some(value) => delivery(value).map_err(invalid)?,
            None => DeliverySettings::default(),
        };
        let env = match table.remove("env") {
            Some(value) => env_settings(value).map_err(invalid)?,
            None => EnvSettings::default(),
        };
        let attest_key = match table.remove("attest") {
            Some(value) => attest_key(value).map_err(invalid)?,
            None => None,
        };
        let oats_state = match table.remove("oats") {
            Some(value) => oats_state(value).map_err(invalid)?,
            None => None,
        };
        let serve = match table.remove("serve") {
            Some(value) => Some(super::serve_config::serve_settings(value).map_err(invalid)?),
            None => None,
        };
        let mut sections = BTreeMap::new();
        for backend in registry::backend_sections() {
            let taken = match table.remove(backend.name) {
                Some(value) => section(backend.name, value).map_err(invalid)?,
                // The defaults must name every section: they are what the others fall back on.
                None if origin == ConfigOrigin::Defaults => {
                    return Err(invalid(format!("the defaults lack [{}]", backend.name)));
                }
                None => Section::tagged(backend.default_tag),
            };
            sections.insert(backend.name, taken);
        }
        Ok(Self {
            sections,
            environment_store,
            tree_store,
            delivery,
            env,
            attest_key,
            oats_state,
            serve,
            origin,
        })
    }

    /// The directory of the tree store, where the bases of Candidates run by reference are
    /// materialised: `[environments] trees`, or by default
    /// [`DEFAULT_TREE_STORE_AS_ROOT`] as root and `$HOME/.local/share/sf/trees` otherwise.
    pub fn tree_store_dir(&self) -> Result<PathBuf, ConfigError> {
        if self.tree_store.is_none() && nix::unistd::geteuid().is_root() {
            return Ok(PathBuf::from(DEFAULT_TREE_STORE_AS_ROOT));
        }
        let home = std::env::var_os("HOME");
        self.store_dir(
            self.tree_store.as_ref(),
            "trees",
            DEFAULT_TREE_STORE,
            home.as_deref().map(Path::new),
        )
    }

    /// `[serve]`: what `sf serve` listens on and lands into; `None` when not configured.
    pub fn serve(&self) -> Option<&super::serve_config::ServeSettings> {
        self.serve.as_ref()
    }

    /// `[attest] key`: the OpenSSH private key each landing's attestation is signed with;
    /// `None` when landings are not attested.
    pub fn attest_key(&self) -> Option<&Path> {
        self.attest_key.as_deref()
    }

    /// `[oats] state`: the state directory whose `oats/` registry the Slices' oats checks
    /// are staged from; `None` for the one `sf oats` chooses by default.
    pub fn oats_state(&self) -> Option<&Path> {
        self.oats_state.as_deref()
    }

    /// `[delivery]`.
    pub fn delivery(&self) -> &DeliverySettings {
        &self.delivery
    }

    /// `[env]`.
    pub fn env(&self) -> &EnvSettings {
        &self.env
    }

    /// The executor an environment build's runs use, as a record for
    /// [`Config::with_executor_record`]: `[env.build] executor`, or
    /// [`DEFAULT_BUILD_EXECUTOR`].
    pub fn build_executor_record(&self) -> Result<crate::canonical::Value, String> {
        let table = match &self.env.build_executor {
            Some(table) => table.clone(),
            None => DEFAULT_BUILD_EXECUTOR
                .parse::<toml::Table>()
                .map_err(|error| format!("the default build executor: {error}"))?,
        };
        toml_to_canonical(&toml::Value::Table(table), "env.build.executor")
    }

    /// The directory of the dependency environment store: `[environments] store`, or by
    /// default [`DEFAULT_ENVIRONMENT_STORE_AS_ROOT`] as root and
    /// `$HOME/.local/share/sf/environments` otherwise. Without it set, not as root, a `HOME`
    /// that is unset or not absolute is `config-invalid`, saying to set it.
    pub fn environment_store_dir(&self) -> Result<PathBuf, ConfigError> {
        let home = std::env::var_os("HOME");
        self.environment_store_dir_with(
            home.as_deref().map(Path::new),
            nix::unistd::geteuid().is_root(),
        )
    }

    /// [`Config::environment_store_dir`] with `home` for `$HOME`, and `is_root` for whether
    /// sf runs as root.
    fn environment_store_dir_with(
        &self,
        home: Option<&Path>,
        is_root: bool,
    ) -> Result<PathBuf, ConfigError> {
        if self.environment_store.is_none() && is_root {
            return Ok(PathBuf::from(DEFAULT_ENVIRONMENT_STORE_AS_ROOT));
        }
        self.store_dir(
            self.environment_store.as_ref(),
            "store",
            DEFAULT_ENVIRONMENT_STORE,
            home,
        )
    }

    /// `[environments] key` when `set`, else `default` below `home`; without `home` (or with
    /// a relative one), `config-invalid`, saying to set the key.
    fn store_dir(
        &self,
        set: Option<&PathBuf>,
        key: &str,
        default: &str,
        home: Option<&Path>,
    ) -> Result<PathBuf, ConfigError> {
        if let Some(store) = set {
            return Ok(store.clone());
        }
        match home {
            Some(home) if home.is_absolute() => Ok(home.join(default)),
            _ => Err(ConfigError::Invalid {
                origin: self.origin.clone(),
                detail: format!(
                    "[environments] {key} is not set, and HOME is unset or not an absolute \
                     path, so there is no default ($HOME/{default}); set \
                     [environments] {key} = \"/absolute/dir\""
                ),
            }),
        }
    }

    /// Where this configuration came from.
    pub fn origin(&self) -> &ConfigOrigin {
        &self.origin
    }

    /// The section of contract `C`.
    pub fn section_of<C: Configured>(&self) -> &Section {
        self.section(C::SECTION)
    }

    /// The backend section `name`, which every configuration holds.
    fn section(&self, name: &str) -> &Section {
        &self.sections[name]
    }

    fn section_mut(&mut self, name: &str) -> &mut Section {
        self.sections
            .get_mut(name)
            .expect("every backend section is parsed or defaulted")
    }

    /// The `[object_store]` section.
    pub fn object_store_section(&self) -> &Section {
        self.section_of::<ObjectStoreContract>()
    }

    /// The `[executor]` section.
    pub fn executor_section(&self) -> &Section {
        self.section_of::<ExecutorContract>()
    }

    /// The `[evidence_store]` section.
    pub fn evidence_store_section(&self) -> &Section {
        self.section_of::<EvidenceStoreContract>()
    }

    /// The `[gate]` section.
    pub fn gate_section(&self) -> &Section {
        self.section_of::<GateContract>()
    }

    /// Makes `[gate]` the file gate reading `path` (how `--gate FILE` overrides the file).
    pub fn set_file_gate(&mut self, path: &Path) {
        let mut gate = Section::tagged("file");
        gate.fields.insert(
            "path".to_owned(),
            toml::Value::String(path.to_string_lossy().into_owned()),
        );
        *self.section_mut(GateContract::SECTION) = gate;
    }

    /// The `[executor]` section as one canonical JSON object, `type` included: what a frozen
    /// Slice records, so that its collections run under the executor it was frozen with. A
    /// float or a date, which canonical JSON cannot hold, is refused.
    pub fn executor_record(&self) -> Result<crate::canonical::Value, String> {
        let executor = self.executor_section();
        let mut table = executor.fields.clone();
        table.insert("type".into(), toml::Value::String(executor.tag.clone()));
        toml_to_canonical(&toml::Value::Table(table), ExecutorContract::SECTION)
    }

    /// This configuration with its `[executor]` section replaced by `record` (an
    /// [`Config::executor_record`]): how a collection takes the executor its Slice recorded.
    pub fn with_executor_record(
        mut self,
        record: &crate::canonical::Value,
    ) -> Result<Self, String> {
        let name = ExecutorContract::SECTION;
        let value = canonical_to_toml(record, name)?;
        let executor = self.section_mut(name);
        // The pin is the loading policy of this configuration, not the executor's settings a
        // Slice records: it stays.
        let pin = executor.sha256.take();
        *executor = section(name, value)?;
        executor.sha256 = pin;
        Ok(self)
    }

    /// Sets `key` of the `[executor]` section to `value` (how `sf exec --runtime` names the
    /// runtime); `type` cannot be set this way.
    pub fn set_executor_field(&mut self, key: &str, value: toml::Value) {
        if key != "type" {
            let executor = self.section_mut(ExecutorContract::SECTION);
            executor.fields.insert(key.to_owned(), value);
        }
    }

    /// Builds the backend of contract `C` its section names: a compiled-in backend if one is
    /// registered under the tag (given `context`), otherwise the plugin on `plugins` whose
    /// manifest lists the tag under the contract (configured by its section alone).
    pub fn backend<C: Configured>(
        &self,
        plugins: &PluginPath,
        context: C::Context<'_>,
    ) -> Result<Arc<C::Object>, ConfigError> {
        let section = self.section_of::<C>();
        match self.resolve::<C>(plugins)? {
            Resolved::Compiled(backend) => C::compiled(backend, context)
                .map_err(|error| self.backend_error(C::SECTION, section, error.to_string())),
            Resolved::Plugin(plugin, fields) => {
                PluginBackend::<C>::new(&plugin, &section.tag, &fields)
                    .map(C::adapt)
                    .map_err(|error| self.plugin_error(C::SECTION, section, error))
            }
        }
    }

    /// Builds the configured ObjectStore factory ([`Config::backend`]).
    pub fn object_store(
        &self,
        plugins: &PluginPath,
    ) -> Result<Arc<dyn ObjectStoreFactory>, ConfigError> {
        self.backend::<ObjectStoreContract>(plugins, ())
    }

    /// Builds the configured Executor ([`Config::backend`]).
    pub fn executor(&self, plugins: &PluginPath) -> Result<Arc<dyn Executor>, ConfigError> {
        self.backend::<ExecutorContract>(plugins, ())
    }

    /// Builds the configured EvidenceStore ([`Config::backend`]); a compiled-in backend is
    /// given `state_dir`, the current Slice's evidence directory.
    pub fn evidence_store(
        &self,
        plugins: &PluginPath,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, ConfigError> {
        let context = StoreContext {
            state_dir,
            existing: false,
        };
        self.backend::<EvidenceStoreContract>(plugins, context)
    }

    /// [`Config::evidence_store`] for commands that only read: a compiled-in backend creates
    /// nothing (the SQLite store refuses a database that does not exist). A plugin store is
    /// instantiated as it is; what its instantiation does is the plugin's.
    pub fn existing_evidence_store(
        &self,
        plugins: &PluginPath,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, ConfigError> {
        let context = StoreContext {
            state_dir,
            existing: true,
        };
        self.backend::<EvidenceStoreContract>(plugins, context)
    }

    /// Builds the configured Gate ([`Config::backend`]).
    pub fn gate(&self, plugins: &PluginPath) -> Result<Arc<dyn Gate>, ConfigError> {
        self.backend::<GateContract>(plugins, ())
    }

    /// The attempt fence that comes with the configured evidence store: the same plugin's
    /// `fence` under the same tag, configured by the same `[evidence_store]` section, when its
    /// manifest lists one; otherwise the file fence in `fence_dir` (the Slice's own). The
    /// epochs name the attempts whose records the store holds, so the fence must reach every
    /// collector the store does: there is no `[fence]` section to set it apart.
    pub fn fence(
        &self,
        plugins: &PluginPath,
        fence_dir: &Path,
    ) -> Result<Arc<dyn AttemptFence>, ConfigError> {
        let name = EvidenceStoreContract::SECTION;
        let section = self.section(name);
        match self.resolve::<EvidenceStoreContract>(plugins)? {
            Resolved::Plugin(plugin, fields)
                if plugin
                    .manifest()
                    .provides(FenceContract::NAME, &section.tag) =>
            {
                let fence = PluginFence::new(&plugin, &section.tag, &fields)
                    .map_err(|error| self.plugin_error(name, section, error))?;
                Ok(Arc::new(fence))
            }
            Resolved::Compiled(_) | Resolved::Plugin(..) => FileFence::open(fence_dir)
                .map(|fence| Arc::new(fence) as Arc<dyn AttemptFence>)
                .map_err(|error| self.backend_error(name, section, error.to_string())),
        }
    }

    fn backend_error(&self, name: &str, section: &Section, detail: String) -> ConfigError {
        ConfigError::Backend {
            origin: self.origin.clone(),
            section: name.into(),
            tag: section.tag.clone(),
            detail,
        }
    }

    fn plugin_error(&self, name: &str, section: &Section, error: PluginError) -> ConfigError {
        ConfigError::Plugin {
            origin: self.origin.clone(),
            section: name.into(),
            tag: section.tag.clone(),
            error: Box::new(error),
        }
    }

    /// Resolves the section of contract `C`: to its compiled-in backend if typetag knows its
    /// tag, else to the first plugin on `plugins` that lists the tag under the contract,
    /// loaded and checked.
    fn resolve<C: Configured>(
        &self,
        plugins: &PluginPath,
    ) -> Result<Resolved<C::Compiled>, ConfigError> {
        let (name, section) = (C::SECTION, self.section_of::<C>());
        let compiled = compiled_tags_of::<C>();
        if compiled.contains(&section.tag.as_str()) {
            return self.compiled::<C>(section).map(Resolved::Compiled);
        }
        let found = plugins
            .discover()
            .map_err(|error| self.plugin_error(name, section, error))?;
        let Some(candidate) = search::find(&found, C::NAME, &section.tag) else {
            return Err(self.unknown_tag::<C>(compiled, &found, plugins));
        };
        let plugin = loader::load_pinned(&candidate.library, section.sha256.as_ref())
            .map_err(|error| self.plugin_error(name, section, error))?;
        let fields = serde_json::to_value(&section.fields)
            .ok()
            .and_then(|value| match value {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            })
            .ok_or_else(|| {
                self.backend_error(
                    name,
                    section,
                    "the section cannot be expressed as JSON".into(),
                )
            })?;
        Ok(Resolved::Plugin(plugin, fields))
    }

    /// The compiled-in backend `section` configures (it has no library to pin).
    fn compiled<C: Configured>(&self, section: &Section) -> Result<C::Compiled, ConfigError> {
        if section.sha256.is_some() {
            return Err(ConfigError::Invalid {
                origin: self.origin.clone(),
                detail: format!(
                    "[{}] sha256: type {:?} is compiled into sf, so there is no plugin \
                     library to pin; remove sha256",
                    C::SECTION,
                    section.tag
                ),
            });
        }
        let mut table = section.fields.clone();
        table.insert("type".into(), toml::Value::String(section.tag.clone()));
        toml::Value::Table(table)
            .try_into()
            .map_err(|error: toml::de::Error| {
                self.backend_error(
                    C::SECTION,
                    section,
                    format!("invalid configuration: {}", error.to_string().trim_end()),
                )
            })
    }

    /// `unknown-tag`: neither a compiled-in backend nor a plugin among `found` (the plugin
    /// path `plugins`) serves the tag of `C`'s section. Lists every tag that serves the
    /// contract, and warns of the manifests that could not be used.
    fn unknown_tag<C: Configured>(
        &self,
        compiled: Vec<&'static str>,
        found: &[search::Discovered],
        plugins: &PluginPath,
    ) -> ConfigError {
        let mut known: Vec<String> = compiled
            .into_iter()
            .map(|tag| format!("{tag} (compiled in)"))
            .collect();
        for (tag, plugin, library) in search::tags(found, C::NAME) {
            known.push(format!("{tag} (plugin {plugin}, {})", library.display()));
        }
        for broken in found.iter().filter(|found| found.manifest.is_err()) {
            eprintln!(
                "sf: warning: skipping {}: {}",
                broken.manifest_file.display(),
                broken
                    .manifest
                    .as_ref()
                    .err()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            );
        }
        ConfigError::UnknownTag {
            origin: self.origin.clone(),
            section: C::SECTION.into(),
            tag: self.section_of::<C>().tag.clone(),
            known,
            plugin_path: plugins.dirs().to_vec(),
        }
    }
}

/// A TOML value as canonical JSON; `at` names it in errors.
fn toml_to_canonical(value: &toml::Value, at: &str) -> Result<crate::canonical::Value, String> {
    use crate::canonical::Value;
    Ok(match value {
        toml::Value::String(text) => Value::String(text.clone()),
        toml::Value::Integer(n)
            if n.unsigned_abs() <= crate::canonical::MAX_SAFE_INTEGER as u64 =>
        {
            Value::Integer(*n)
        }
        toml::Value::Integer(_) => return Err(format!("{at} is an integer beyond 2^53 - 1")),
        toml::Value::Boolean(flag) => Value::Bool(*flag),
        toml::Value::Float(_) => {
            return Err(format!(
                "{at} is a float, which a frozen record cannot hold: write an integer"
            ));
        }
        toml::Value::Datetime(_) => {
            return Err(format!("{at} is a date, which a frozen record cannot hold"));
        }
        toml::Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| toml_to_canonical(item, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(key, item)| {
                    Ok((
                        key.clone(),
                        toml_to_canonical(item, &format!("{at}.{key}"))?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// Canonical JSON as a TOML value (the inverse of [`toml_to_canonical`]); null has no TOML
/// form and is refused.
fn canonical_to_toml(value: &crate::canonical::Value, at: &str) -> Result<toml::Value, String> {
    use crate::canonical::Value;
    Ok(match value {
        Value::Null => return Err(format!("{at} is null, which configuration cannot hold")),
        Value::Bool(flag) => toml::Value::Boolean(*flag),
        Value::Integer(n) => toml::Value::Integer(*n),
        Value::String(text) => toml::Value::String(text.clone()),
        Value::Array(items) => toml::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| canonical_to_toml(item, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => toml::Value::Table(
            map.iter()
                .map(|(key, item)| {
                    Ok((
                        key.clone(),
                        canonical_to_toml(item, &format!("{at}.{key}"))?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// Reads `[environments]`: `store` and `trees`, each an absolute path.
fn environments(value: toml::Value) -> Result<(Option<PathBuf>, Option<PathBuf>), String> {
    let toml::Value::Table(fields) = value else {
        return Err("[environments] must be a table".into());
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !ENVIRONMENTS_KEYS.contains(&key.as_str()))
    {
        return Err(format!(
            "[environments] {unknown} is not a known key; the known keys are {}",
            ENVIRONMENTS_KEYS.join(", ")
        ));
    }
    let path = |key: &str| match fields.get(key) {
        None => Ok(None),
        Some(toml::Value::String(store)) if Path::new(store).is_absolute() => {
            Ok(Some(PathBuf::from(store)))
        }
        Some(toml::Value::String(store)) => Err(format!(
            "[environments] {key} {store:?} is not an absolute path; name the store's \
             directory by its absolute path"
        )),
        Some(_) => Err(format!(
            "[environments] {key} must be a string (an absolute path)"
        )),
    };
    Ok((path("store")?, path("trees")?))
}

/// `[attest]`: `key`, the absolute path of an OpenSSH private key; nothing else. The key is
/// read (and held to its rules) when a landing is attested, not here.
fn attest_key(value: toml::Value) -> Result<Option<PathBuf>, String> {
    let toml::Value::Table(mut fields) = value else {
        return Err("[attest] must be a table".into());
    };
    let key = match fields.remove("key") {
        Some(toml::Value::String(key)) if Path::new(&key).is_absolute() => Some(PathBuf::from(key)),
        Some(_) => {
            return Err(
                "[attest] key must be the absolute path of an OpenSSH Ed25519 private \
                        key (`ssh-keygen -t ed25519 -N '' -f PATH`)"
                    .into(),
            );
        }
        None => None,
    };
    if let Some(unknown) = fields.keys().next() {
        return Err(format!(
            "[attest] {unknown} is not a known key; the only key is key"
        ));
    }
    Ok(key)
}

/// `[oats]`: `state`, the absolute path of the state directory `sf oats --state` names;
/// nothing else.
fn oats_state(value: toml::Value) -> Result<Option<PathBuf>, String> {
    let toml::Value::Table(mut fields) = value else {
        return Err("[oats] must be a table".into());
    };
    let state = match fields.remove("state") {
        Some(toml::Value::String(state)) if Path::new(&state).is_absolute() => {
            Some(PathBuf::from(state))
        }
        Some(_) => {
            return Err(
                "[oats] state must be the absolute path of the state directory `sf oats \
                 --state` names (the registry is its oats/ directory)"
                    .into(),
            );
        }
        None => None,
    };
    if let Some(unknown) = fields.keys().next() {
        return Err(format!(
            "[oats] {unknown} is not a known key; the only key is state"
        ));
    }
    Ok(state)
}

/// `[env]`: `network.allow`, a list of host names, and `build.executor`, a table with a
/// `type`; nothing else.
fn env_settings(value: toml::Value) -> Result<EnvSettings, String> {
    let toml::Value::Table(mut fields) = value else {
        return Err("[env] must be a table".into());
    };
    let mut settings = EnvSettings::default();
    if let Some(network) = fields.remove("network") {
        let toml::Value::Table(mut network) = network else {
            return Err("[env.network] must be a table".into());
        };
        if let Some(allow) = network.remove("allow") {
            let hosts = allow.as_array().and_then(|hosts| {
                hosts
                    .iter()
                    .map(|host| host.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
            });
            settings.allow = hosts.ok_or(
                "[env.network] allow must be a list of host names, such as \
                 [\"pypi.example.org\"]",
            )?;
            // Each entry is held to the proxy's rule here, so that a bad one is refused when
            // the configuration is read, before a build starts anything.
            crate::registry_proxy::ProxyConfig::allowing(settings.allow.iter().cloned())
                .check()
                .map_err(|error| format!("[env.network] allow: {error}"))?;
        }
        if let Some(unknown) = network.keys().next() {
            return Err(format!(
                "[env.network] {unknown} is not a known key; the only key is allow"
            ));
        }
    }
    if let Some(build) = fields.remove("build") {
        let toml::Value::Table(mut build) = build else {
            return Err("[env.build] must be a table".into());
        };
        match build.remove("executor") {
            Some(toml::Value::Table(executor)) if executor.contains_key("type") => {
                settings.build_executor = Some(executor);
            }
            Some(_) => {
                return Err(
                    "[env.build] executor must be a table with a type, shaped as [executor] is"
                        .into(),
                );
            }
            None => {}
        }
        if let Some(unknown) = build.keys().next() {
            return Err(format!(
                "[env.build] {unknown} is not a known key; the only key is executor"
            ));
        }
    }
    if let Some(unknown) = fields.keys().next() {
        return Err(format!(
            "[env] {unknown} is not a known key; the known tables are network and build"
        ));
    }
    Ok(settings)
}

fn delivery(value: toml::Value) -> Result<DeliverySettings, String> {
    let toml::Value::Table(fields) = value else {
        return Err("[delivery] must be a table".into());
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !DELIVERY_KEYS.contains(&key.as_str()))
    {
        return Err(format!(
            "[delivery] {unknown} is not a known key; the known keys are {}",
            DELIVERY_KEYS.join(", ")
        ));
    }
    let command = |key: &str| match fields.get(key) {
        None => Ok(None),
        Some(toml::Value::String(text))
            if !text.is_empty() && !text.chars().any(char::is_control) =>
        {
            Ok(Some(text.clone()))
        }
        Some(_) => Err(format!(
            "[delivery] {key} must be a non-empty string without control characters (as Git's \
             own setting takes it)"
        )),
    };
    let seconds = |key: &str| match fields.get(key) {
        None => Ok(None),
        Some(toml::Value::Integer(seconds)) if (1..=86_400).contains(seconds) => {
            Ok(Some(*seconds as u64))
        }
        Some(_) => Err(format!(
            "[delivery] {key} must be an integer from 1 to 86400"
        )),
    };
    Ok(DeliverySettings {
        credential_helper: command("credential_helper")?,
        ssh_command: command("ssh_command")?,
        push_timeout_seconds: seconds("push_timeout_seconds")?,
        read_timeout_seconds: seconds("read_timeout_seconds")?,
    })
}

fn section(name: &str, value: toml::Value) -> Result<Section, String> {
    let toml::Value::Table(mut fields) = value else {
        return Err(format!("[{name}] must be a table"));
    };
    let tag = match fields.remove("type") {
        Some(toml::Value::String(tag)) => tag,
        Some(_) => return Err(format!("[{name}] type must be a string")),
        None => {
            return Err(format!(
                "[{name}] has no type; name its backend, for example type = \"git-cli\""
            ));
        }
    };
    super::manifest::check_word(&tag)
        .map_err(|rule| format!("[{name}] type {tag:?} is not a tag: {rule}"))?;
    let sha256 = match fields.remove("sha256") {
        None => None,
        Some(toml::Value::String(text)) => {
            Some(crate::canonical::Digest::parse(&text).ok_or_else(|| {
                format!(
                    "[{name}] sha256 {text:?} is not sha256: and 64 lowercase hex digits (`sf \
                     plugins check LIBRARY` prints a library's)"
                )
            })?)
        }
        Some(_) => return Err(format!("[{name}] sha256 must be a string")),
    };
    Ok(Section {
        tag,
        fields,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_read_as_a_digest_kept_from_the_plugin_and_refused_for_a_compiled_in_tag() {
        let file = || ConfigOrigin::File("sf.toml".into());
        let pin = format!("sha256:{}", "ab".repeat(32));
        let config = Config::parse(
            &format!("[evidence_store]\ntype = \"postgres\"\nsha256 = \"{pin}\"\nhost = \"h\"\n"),
            file(),
        )
        .unwrap();
        let section = config.evidence_store_section();
        assert_eq!(section.sha256().map(ToString::to_string), Some(pin.clone()));
        assert!(!section.fields().contains_key("sha256"));
        assert!(section.fields().contains_key("host"));
        for bad in ["\"sha256:AB\"", "12", "\"ab\""] {
            let error = Config::parse(
                &format!("[evidence_store]\ntype = \"postgres\"\nsha256 = {bad}\n"),
                file(),
            )
            .unwrap_err();
            assert_eq!(error.code(), "config-invalid", "{bad}: {error}");
        }
        let compiled = Config::parse(
            &format!("[evidence_store]\ntype = \"sqlite\"\nsha256 = \"{pin}\"\n"),
            file(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let error = compiled
            .evidence_store(&PluginPath::new(Vec::new()), dir.path())
            .err()
            .unwrap();
        assert_eq!(error.code(), "config-invalid");
        assert!(error.to_string().contains("compiled into sf"), "{error}");
        // The executor's pin stays when a collection takes the Slice's executor record.
        let executor = Config::parse(
            &format!("[executor]\ntype = \"sandbox-exec\"\nsha256 = \"{pin}\"\n"),
            file(),
        )
        .unwrap();
        let record = executor.executor_record().unwrap();
        assert!(!format!("{record:?}").contains("sha256"));
        let taken = executor.with_executor_record(&record).unwrap();
        assert_eq!(
            taken.executor_section().sha256().map(ToString::to_string),
            Some(pin)
        );
    }

    #[test]
    fn the_delivery_section_is_read_strictly() {
        let file = || ConfigOrigin::File("sf.toml".into());
        let config = Config::parse(
            "[delivery]\ncredential_helper = \"store --file=/etc/sf/creds\"\npush_timeout_seconds = 20\nread_timeout_seconds = 5\n",
            file(),
        )
        .unwrap();
        assert_eq!(
            config.delivery(),
            &DeliverySettings {
                credential_helper: Some("store --file=/etc/sf/creds".into()),
                ssh_command: None,
                push_timeout_seconds: Some(20),
                read_timeout_seconds: Some(5),
            }
        );
        assert_eq!(
            Config::parse("", file()).unwrap().delivery(),
            &DeliverySettings::default()
        );
        for bad in [
            "[delivery]\npassword = \"x\"\n",
            "[delivery]\npush_timeout_seconds = 0\n",
            "[delivery]\nread_timeout_seconds = \"60\"\n",
            "[delivery]\ncredential_helper = \"\"\n",
            "[delivery]\ncredential_helper = \"a\\nb\"\n",
            "delivery = 1\n",
        ] {
            let error = Config::parse(bad, file()).unwrap_err();
            assert_eq!(error.code(), "config-invalid", "{bad}");
            assert!(error.to_string().contains("[delivery]"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_attest_section_names_one_absolute_key_path() {
        let file = || ConfigOrigin::File("sf.toml".into());
        let config = Config::parse("[attest]\nkey = \"/etc/sf/attest_ed25519\"\n", file()).unwrap();
        assert_eq!(
            config.attest_key(),
            Some(Path::new("/etc/sf/attest_ed25519"))
        );
        assert_eq!(Config::parse("", file()).unwrap().attest_key(), None);
        for bad in [
            "[attest]\nkey = \"relative/key\"\n",
            "[attest]\nkey = 1\n",
            "[attest]\nkey = \"/k\"\ncommand = \"ssh-agent\"\n",
            "attest = 1\n",
        ] {
            let error = Config::parse(bad, file()).unwrap_err();
            assert_eq!(error.code(), "config-invalid", "{bad}");
            assert!(error.to_string().contains("[attest]"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_oats_section_names_one_absolute_state_directory() {
        let file = || ConfigOrigin::File("sf.toml".into());
        let config = Config::parse("[oats]\nstate = \"/var/lib/sf\"\n", file()).unwrap();
        assert_eq!(config.oats_state(), Some(Path::new("/var/lib/sf")));
        assert_eq!(Config::parse("", file()).unwrap().oats_state(), None);
        for bad in [
            "[oats]\nstate = \"relative\"\n",
            "[oats]\nstate = 1\n",
            "[oats]\nstate = \"/s\"\nregistry = \"/r\"\n",
            "oats = 1\n",
        ] {
            let error = Config::parse(bad, file()).unwrap_err();
            assert_eq!(error.code(), "config-invalid", "{bad}");
            assert!(error.to_string().contains("[oats]"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_executor_section_round_trips_through_its_record() {
        let config = Config::parse(
            "[executor]\ntype = \"sandbox-exec\"\nruntime = { executable = \"/bin/sh\", readable = [\"/usr/lib\"] }\nprepare_ahead = false\n",
            ConfigOrigin::Defaults,
        );
        // The defaults origin insists on every section; use a file origin instead.
        assert!(config.is_err());
        let config = Config::parse(
            "[executor]\ntype = \"sandbox-exec\"\nruntime = { executable = \"/bin/sh\", readable = [\"/usr/lib\"] }\nprepare_ahead = false\n",
            ConfigOrigin::File("sf.toml".into()),
        )
        .unwrap();
        let record = config.executor_record().unwrap();
        let other = Config::defaults().with_executor_record(&record).unwrap();
        assert_eq!(other.executor_section(), config.executor_section());
        assert_eq!(other.executor_record().unwrap(), record);
        let floats = Config::parse(
            "[executor]\ntype = \"sandbox-exec\"\nshare = 0.5\n",
            ConfigOrigin::File("sf.toml".into()),
        )
        .unwrap();
        assert!(floats.executor_record().unwrap_err().contains("float"));
        assert!(
            Config::defaults()
                .with_executor_record(&crate::canonical::Value::Null)
                .is_err()
        );
    }

    #[test]
    fn the_embedded_defaults_are_the_registered_tags() {
        assert_eq!(
            default_config(),
            "[object_store]\ntype = \"git-cli\"\n\n[executor]\ntype = \"sandbox-exec\"\n\n\
             [evidence_store]\ntype = \"sqlite\"\n\n[gate]\ntype = \"open\"\n"
        );
    }

    #[test]
    fn defaults_name_git_cli() {
        let config = Config::defaults();
        assert_eq!(config.object_store_section().tag(), "git-cli");
        assert!(config.object_store_section().fields().is_empty());
        assert_eq!(config.executor_section().tag(), "sandbox-exec");
        assert_eq!(config.evidence_store_section().tag(), "sqlite");
        assert_eq!(config.gate_section().tag(), "open");
    }

    #[test]
    fn missing_sections_take_defaults() {
        let config = Config::parse("", ConfigOrigin::File("/x".into())).unwrap();
        assert_eq!(config.object_store_section().tag(), "git-cli");
        assert_eq!(config.executor_section().tag(), "sandbox-exec");
        let mut config = Config::parse(
            "[executor]\ntype = \"other\"\nruntime = \"sh\"\n",
            ConfigOrigin::File("/x".into()),
        )
        .unwrap();
        assert_eq!(config.object_store_section().tag(), "git-cli");
        assert_eq!(config.executor_section().tag(), "other");
        config.set_executor_field("runtime", toml::Value::from("python3"));
        config.set_executor_field("type", toml::Value::from("ignored"));
        assert_eq!(config.executor_section().tag(), "other");
        assert_eq!(
            config.executor_section().fields()["runtime"].as_str(),
            Some("python3")
        );
    }

    #[test]
    fn bad_configurations_are_refused() {
        for (text, needle) in [
            ("[object_store", "TOML parse error"),
            ("[executor_x]\ntype = \"a\"", "unknown section"),
            ("object_store = 1", "must be a table"),
            ("[object_store]\ngit = \"/usr/bin/git\"", "has no type"),
            ("[object_store]\ntype = 1", "must be a string"),
            ("[object_store]\ntype = \"Git CLI\"", "is not a tag"),
        ] {
            let error = Config::parse(text, ConfigOrigin::File("/x".into())).unwrap_err();
            assert_eq!(error.code(), "config-invalid", "{text}");
            assert!(error.to_string().contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn the_environment_store_is_configured_or_below_home() {
        let origin = || ConfigOrigin::File("/x".into());
        let config = Config::parse("[environments]\nstore = \"/srv/envs\"\n", origin()).unwrap();
        assert_eq!(
            config.environment_store_dir_with(None, false).unwrap(),
            Path::new("/srv/envs")
        );
        let config = Config::parse("", origin()).unwrap();
        assert_eq!(
            config
                .environment_store_dir_with(Some(Path::new("/home/me")), false)
                .unwrap(),
            Path::new("/home/me/.local/share/sf/environments")
        );
        for home in [None, Some(Path::new("relative"))] {
            let error = config.environment_store_dir_with(home, false).unwrap_err();
            assert_eq!(error.code(), "config-invalid");
            assert!(
                error.to_string().contains("[environments] store"),
                "{error}"
            );
        }
        let config = Config::parse("[environments]\n", origin()).unwrap();
        assert!(config.environment_store_dir_with(None, false).is_err());
        for (text, needle) in [
            (
                "[environments]\nstore = \"envs\"\n",
                "[environments] store \"envs\"",
            ),
            ("[environments]\nstore = 1\n", "must be a string"),
            ("[environments]\ntype = \"x\"\n", "[environments] type"),
            ("environments = 1\n", "must be a table"),
        ] {
            let error = Config::parse(text, origin()).unwrap_err();
            assert_eq!(error.code(), "config-invalid", "{text}");
            assert!(error.to_string().contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn as_root_the_environment_store_is_one_the_sandbox_can_reach_unless_configured() {
        let origin = || ConfigOrigin::File("/x".into());
        let config = Config::parse("", origin()).unwrap();
        // Never below root's home (0700, which the sandbox's user cannot pass), with or
        // without a HOME.
        for home in [Some(Path::new("/root")), Some(Path::new("relative")), None] {
            assert_eq!(
                config.environment_store_dir_with(home, true).unwrap(),
                Path::new(DEFAULT_ENVIRONMENT_STORE_AS_ROOT),
                "{home:?}"
            );
        }
        assert_eq!(
            DEFAULT_ENVIRONMENT_STORE_AS_ROOT,
            "/var/lib/sf/environments"
        );
        // A store that is set wins, as root too.
        let config = Config::parse("[environments]\nstore = \"/srv/envs\"\n", origin()).unwrap();
        assert_eq!(
            config
                .environment_store_dir_with(Some(Path::new("/root")), true)
                .unwrap(),
            Path::new("/srv/envs")
        );
    }

    /// `[env]`: registries beside each recipe's, held to the proxy's rule when read; the
    /// build's executor, the sandbox by default; anything else refused, naming the key.
    #[test]
    fn env_settings_are_checked_when_read() {
        let file = || ConfigOrigin::File("sf.toml".into());
        let config = Config::parse(
            "[env.network]\nallow = [\"pypi.example.org\", \"*.mirror.example\"]\n\
             [env.build]\nexecutor = { type = \"sandbox-exec\", runtime = \"sh\" }\n",
            file(),
        )
        .unwrap();
        assert_eq!(config.env().allow, ["pypi.example.org", "*.mirror.example"]);
        let record = config.build_executor_record().unwrap();
        assert_eq!(
            crate::canonical::encode(&record).unwrap(),
            br#"{"runtime":"sh","type":"sandbox-exec"}"#
        );
        let default = Config::parse("", file())
            .unwrap()
            .build_executor_record()
            .unwrap();
        let default = String::from_utf8(crate::canonical::encode(&default).unwrap()).unwrap();
        assert!(
            default.contains("/etc/ssl/certs") && default.contains("sandbox-exec"),
            "{default}"
        );
        for (bad, named) in [
            ("[env.network]\nallow = [\"127.0.0.1\"]\n", "127.0.0.1"),
            (
                "[env.network]\nallow = [\"https://pypi.org\"]\n",
                "https://pypi.org",
            ),
            (
                "[env.network]\nallow = \"pypi.org\"\n",
                "list of host names",
            ),
            ("[env.network]\nports = [443]\n", "ports"),
            (
                "[env.build]\nexecutor = { runtime = \"sh\" }\n",
                "with a type",
            ),
            ("[env.cache]\n", "cache"),
        ] {
            let error = Config::parse(bad, file()).unwrap_err();
            assert_eq!(error.code(), "config-invalid", "{bad}: {error}");
            assert!(error.to_string().contains(named), "{bad}: {error}");
        }
    }

    #[test]
    fn unknown_tags_list_the_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::parse(
            "[object_store]\ntype = \"no-such-store\"",
            ConfigOrigin::File("/x".into()),
        )
        .unwrap();
        let error = config
            .object_store(&PluginPath::new([dir.path().to_owned()]))
            .err()
            .expect("an unknown tag");
        assert_eq!(error.code(), "unknown-tag");
        assert!(error.to_string().contains("known types"), "{error}");
        let config = Config::parse(
            "[executor]\ntype = \"no-such-executor\"",
            ConfigOrigin::File("/x".into()),
        )
        .unwrap();
        let error = config
            .executor(&PluginPath::new([dir.path().to_owned()]))
            .err()
            .expect("an unknown tag");
        assert_eq!(error.code(), "unknown-tag");
        assert!(error.to_string().contains("[executor]"), "{error}");
    }

    #[test]
    fn the_fence_comes_with_the_evidence_store() {
        let dir = tempfile::tempdir().unwrap();
        let plugins = PluginPath::new([dir.path().to_owned()]);
        let root = dir.path().canonicalize().unwrap().join("fence");
        // The built-in SQLite store: the file fence in the directory given.
        let fence = Config::defaults().fence(&plugins, &root).unwrap();
        let hold = fence
            .acquire("product", &crate::canonical::Digest::of(b"candidate"))
            .unwrap();
        assert_eq!(hold.attempt().epoch, 1);
        assert!(
            root.join(format!(
                "{}.lock",
                crate::canonical::Digest::of(b"product").hex()
            ))
            .exists()
        );
        // A store no backend serves has no fence either.
        let config = Config::parse(
            "[evidence_store]\ntype = \"no-such-store\"",
            ConfigOrigin::File("/x".into()),
        )
        .unwrap();
        let error = config.fence(&plugins, &root).unwrap_err();
        assert_eq!(error.code(), "unknown-tag");
        assert!(error.to_string().contains("[evidence_store]"), "{error}");
    }
}
