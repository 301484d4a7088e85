//! What every subcommand shares: the context (configuration and output mode), the output and
//! error types, reading input files, and opening the configured repository.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sf_host::canonical::Value;
use sf_host::contracts::{
    AttemptFence, EvidenceStore, Executor, Gate, LimitHit, ObjectStoreFactory,
};
use sf_host::fault::{FaultPoints, NoFaults};
use sf_host::plugin::{Config, ConfigError, PluginPath};
use sf_host::repository::{
    Repository, RepositoryError, RepositoryIdentity, RepositoryOptions, open_repository,
    parse_repository_identity,
};

/// The largest input file read (identities, frozen inputs, proposals). Every record sf reads
/// is bounded by 1 MiB of canonical JSON; a little more lets the parser name the limit.
pub const MAX_INPUT_BYTES: u64 = 2 * 1024 * 1024;

/// What every command knows besides its own arguments.
#[derive(Clone)]
pub struct Context {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--json`.
    pub json: bool,
    /// The fault hook the repository and landing steps call (tests only; production never
    /// sets one).
    pub faults: Arc<dyn FaultPoints>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .field("json", &self.json)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// The context of a command line: `--config` and `--json`, no fault hook.
    pub fn new(config: Option<PathBuf>, json: bool) -> Self {
        Self {
            config,
            json,
            faults: Arc::new(NoFaults),
        }
    }

    /// The configuration: `--config`, or the embedded defaults.
    pub fn config(&self) -> Result<Config, CliError> {
        Config::load(self.config.as_deref())
            .map_err(|error| CliError::new(error.code(), error.to_string()))
    }

    /// The directory of the dependency environment store: `[environments] store`, or
    /// `$HOME/.local/share/sf/environments` when the configuration does not set it.
    pub fn environment_store_dir(&self) -> Result<PathBuf, CliError> {
        self.config()?.environment_store_dir().map_err(config_error)
    }

    /// The tree store's directory (`[environments] trees`, or its default).
    pub fn tree_store_dir(&self) -> Result<PathBuf, CliError> {
        self.config()?.tree_store_dir().map_err(config_error)
    }

    /// The configured ObjectStore factory, through the plugin path when the tag is a plugin's.
    pub fn object_store(&self) -> Result<Arc<dyn ObjectStoreFactory>, CliError> {
        self.config()?
            .object_store(&plugin_path()?)
            .map_err(config_error)
    }

    /// The configured Executor.
    pub fn executor(&self) -> Result<Arc<dyn Executor>, CliError> {
        self.executor_of(&self.config()?)
    }

    /// The Executor `config` names.
    pub fn executor_of(&self, config: &Config) -> Result<Arc<dyn Executor>, CliError> {
        config.executor(&plugin_path()?).map_err(config_error)
    }

    /// The configured EvidenceStore; `state_dir` is where a local store keeps its files by
    /// default (the Slice's evidence directory).
    pub fn evidence_store(&self, state_dir: &Path) -> Result<Arc<dyn EvidenceStore>, CliError> {
        self.config()?
            .evidence_store(&plugin_path()?, state_dir)
            .map_err(config_error)
    }

    /// The attempt fence that comes with the configured EvidenceStore; `fence_dir` is where
    /// the file fence keeps its files when the store brings no fence of its own.
    pub fn fence(&self, fence_dir: &Path) -> Result<Arc<dyn AttemptFence>, CliError> {
        self.config()?
            .fence(&plugin_path()?, fence_dir)
            .map_err(config_error)
    }

    /// The configured EvidenceStore, opened for reading only (nothing of sf's is created).
    pub fn existing_evidence_store(
        &self,
        state_dir: &Path,
    ) -> Result<Arc<dyn EvidenceStore>, CliError> {
        self.config()?
            .existing_evidence_store(&plugin_path()?, state_dir)
            .map_err(config_error)
    }

    /// The configured Gate, or the file gate reading `file` when a command's `--gate FILE`
    /// overrides the configuration.
    pub fn gate(&self, file: Option<&Path>) -> Result<Arc<dyn Gate>, CliError> {
        let mut config = self.config()?;
        if let Some(file) = file {
            let file = std::path::absolute(file).map_err(|error| {
                CliError::new(
                    "invalid-input",
                    format!("--gate {}: {error}", file.display()),
                )
            })?;
            config.set_file_gate(&file);
        }
        config.gate(&plugin_path()?).map_err(config_error)
    }

    /// Opens the repository the identity file names, with the configured store.
    pub fn open_repository(&self, identity_file: &Path) -> Result<Repository, CliError> {
        let identity = read_identity(identity_file)?;
        let factory = self.object_store()?;
        let options = RepositoryOptions {
            faults: Arc::clone(&self.faults),
            ..RepositoryOptions::default()
        };
        open_repository(factory.as_ref(), &identity, options).map_err(|error| {
            repository_error(
                &format!(
                    "repository {} (identity {})",
                    identity.path,
                    identity_file.display()
                ),
                &error,
            )
        })
    }
}

/// A command's successful output: the `--json` result and the text printed otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// The `result` of the `--json` envelope.
    pub json: serde_json::Value,
    /// What is printed without `--json`.
    pub text: String,
}

/// A command's failure: a stable kebab-case code and a message naming the input at fault and
/// the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CliError {
    /// The stable kebab-case code.
    pub code: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl CliError {
    /// The error with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// A repository error, with `what` naming the input or repository at fault.
pub fn repository_error(what: &str, error: &RepositoryError) -> CliError {
    let fix = match error {
        RepositoryError::Rejected { .. } => {
            "; fix the proposal and seal again (nothing was written)"
        }
        RepositoryError::InvalidInput { .. } => "; fix that input (nothing was written)",
        RepositoryError::Exists { .. } => "",
        RepositoryError::Missing { .. } => "; check the digest or commit against `sf seal` output",
        RepositoryError::Corrupt { .. } => {
            "; the repository's data failed verification: it is reported, never repaired"
        }
        _ => "",
    };
    CliError::new(error.code(), format!("{what}: {error}{fix}"))
}

/// Reads an input file, naming it by `what` (for example `--proposal`) in errors.
pub fn read_input(path: &Path, what: &str) -> Result<Vec<u8>, CliError> {
    read_input_within(path, what, MAX_INPUT_BYTES)
}

/// [`read_input`] for an input with its own bound of `limit` bytes (a proposal).
pub fn read_input_within(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>, CliError> {
    let unreadable = |detail: String| {
        CliError::new(
            "unreadable-input",
            format!(
                "{what} {}: cannot be read ({detail}); pass an existing file",
                path.display()
            ),
        )
    };
    let meta = std::fs::metadata(path).map_err(|error| unreadable(error.to_string()))?;
    if !meta.is_file() {
        return Err(unreadable("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|error| unreadable(error.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(unreadable(format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

/// Reads and parses an identity file.
pub fn read_identity(path: &Path) -> Result<RepositoryIdentity, CliError> {
    let bytes = read_input(path, "--identity")?;
    parse_repository_identity(&bytes).map_err(|error| {
        CliError::new(
            "invalid-identity",
            format!(
                "--identity {}: not a repository identity ({error}); pass the file `sf repo \
                 create --identity-out` wrote",
                path.display()
            ),
        )
    })
}

/// A canonical record as a serde_json value.
pub fn json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::Integer(number) => serde_json::Value::from(*number),
        Value::String(text) => serde_json::Value::String(text.clone()),
        Value::Array(items) => serde_json::Value::Array(items.iter().map(json_value).collect()),
        Value::Object(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|(key, item)| (key.clone(), json_value(item)))
                .collect(),
        ),
    }
}

/// The limits a run hit, as `--json` shows them: `[{limit, value, detail, reason}]`, `reason`
/// the sentence a Verdict names the limit with.
pub fn limits_hit_json(hits: &[LimitHit]) -> serde_json::Value {
    hits.iter()
        .map(|hit| {
            serde_json::json!({
                "limit": hit.limit().as_str(),
                "value": hit.value(),
                "detail": hit.detail(),
                "reason": hit.to_string(),
            })
        })
        .collect()
}

/// An absolute form of `path`: relative paths are taken from the working directory, and the
/// parent (which must exist) is resolved, so that the result is canonical up to its last
/// component, which may not exist yet.
pub fn absolute_new_path(path: &Path, what: &str) -> Result<PathBuf, CliError> {
    let invalid = |detail: String| {
        CliError::new(
            "invalid-input",
            format!("{what} {}: {detail}", path.display()),
        )
    };
    let name = path
        .file_name()
        .filter(|name| *name != "." && *name != "..")
        .ok_or_else(|| invalid("names no new file or directory".into()))?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let parent = std::fs::canonicalize(&parent).map_err(|error| {
        invalid(format!(
            "its parent directory {} cannot be resolved ({error}); create it first",
            parent.display()
        ))
    })?;
    Ok(parent.join(name))
}

/// The plugin path from the environment.
fn plugin_path() -> Result<PluginPath, CliError> {
    PluginPath::from_env().map_err(|error| CliError::new(error.code(), error.to_string()))
}

fn config_error(error: ConfigError) -> CliError {
    CliError::new(error.code(), error.to_string())
}

/// One file of a listing as the JSON output shows it: its path, mode word (`file`,
/// `executable`, `symlink`), SHA-256 and size.
pub fn file_entry(
    path: &str,
    mode: sf_host::contracts::tree_path::EntryMode,
    sha256: &sf_host::canonical::Digest,
    bytes: u64,
) -> serde_json::Value {
    serde_json::json!({
        "path": path,
        "mode": mode.word(),
        "sha256": sha256.to_string(),
        "bytes": bytes,
    })
}

/// `file`, made absolute, when it does not exist yet: where a command writes a record it must
/// never overwrite (`flag` names the option in the error).
pub fn new_record_file(file: Option<&Path>, flag: &str) -> Result<Option<PathBuf>, CliError> {
    let Some(file) = file else {
        return Ok(None);
    };
    let file = absolute_new_path(file, flag)?;
    if file.symlink_metadata().is_ok() {
        return Err(CliError::new(
            "exists",
            format!(
                "{flag} {}: already exists; sf never overwrites it: choose a new file",
                file.display()
            ),
        ));
    }
    Ok(Some(file))
}

/// Writes `value` canonically to the new file `file` (created, never overwritten, synced).
/// The record is retained in the repository already, so the error says how to get it again.
pub fn write_new_record(file: &Path, value: &Value, flag: &str) -> Result<(), CliError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let bytes = sf_host::canonical::encode(value)
        .map_err(|error| CliError::new("invalid-input", error.to_string()))?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(file)
        .and_then(|mut out| out.write_all(&bytes).and_then(|()| out.sync_all()))
        .map_err(|error| {
            CliError::new(
                "unwritable-output",
                format!(
                    "{flag} {}: cannot be written ({error}); the intent is retained: run \
                     prepare again with the same input to get it",
                    file.display()
                ),
            )
        })
}
