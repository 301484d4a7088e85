//! sandbox-exec's configuration (`[executor] type = "sandbox-exec"`). The plugin library that
//! programs like `sf` load at run time is the `sf-sandbox-exec-plugin` package (`plugin/`), whose `export_plugin!` parses
//! the same [`SandboxExecBackend`], so a section means the same thing either way.
//!
//! ```toml
//! [executor]
//! type = "sandbox-exec"
//! runtime = "sh"                 # or "python3", "node", or a table:
//! # runtime = { executable = "/usr/bin/perl", readable = ["/usr/share/perl", "/usr/lib"] }
//! # launcher = "/opt/sf/sf-sandbox-launcher"
//! # ids_when_root = { first = 2147418112, count = 65536 }  # one host uid/gid per sandbox
//! # network = "new"              # or "shared-empty" (root only; the default as root)
//! # prepare_ahead = false        # build each run's sandbox when it starts (default: ahead)
//! # require_cgroup = true        # fail closed when no control group can bound a run
//! # total_memory_bytes = 8589934592  # all runs' memory together (default: 3/4 of the machine's)
//! # parallel_runs_without_cgroup = true  # let runs overlap with no control group (no total)
//!
//! [executor.limits]              # any subset; the rest keep their defaults
//! cpu_seconds = 300
//! processes = 64
//! ```
//!
//! A runtime table without `readable` takes the readable paths of the default runtime with
//! the same executable (`/bin/sh`, `/usr/bin/python3`, `/usr/bin/node`), and otherwise the
//! library directories ([`crate::LIBRARY_DIRECTORIES`]) only.
//!
//! **Finding the launcher.** Without `launcher`, this code loaded as part of a dynamic
//! library uses the `sf-sandbox-launcher` beside that library file, found with `dladdr` on a
//! function of this module: the launcher ships with the plugin, which need not live beside
//! the program that loads it. Linked statically, the crate's own default applies (beside the
//! current executable, then in its parent directory).

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sf_contracts::ExecutorError;

use crate::{
    IdRange, LAUNCHER_NAME, Limits, NetworkMode, RuntimeConfig, SandboxConfig, SandboxExecutor,
};

/// The `[executor]` section of type `sandbox-exec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxExecBackend {
    /// The runtime (default: `sh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeSetting>,
    /// Limits that differ from the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsSetting>,
    /// The launcher program (default: see the module documentation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<PathBuf>,
    /// The host ids the sandboxes run as when sf runs as root, one per sandbox (default
    /// [`crate::DEFAULT_IDS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids_when_root: Option<IdRange>,
    /// How each run's network namespace is made (default: `shared-empty` as root, else `new`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSetting>,
    /// Whether the next run's sandbox is built ahead of it (default: true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare_ahead: Option<bool>,
    /// Whether a run fails closed when no control group can bound it (default: false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_cgroup: Option<bool>,
    /// The most memory all runs may use together, in bytes (default: three quarters of the
    /// machine's memory, never below one run's bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_memory_bytes: Option<u64>,
    /// Whether runs may overlap where no control group bounds them together (default: false,
    /// one at a time there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_runs_without_cgroup: Option<bool>,
}

/// A runtime: a default by name, or an executable with (optionally) its readable paths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "a runtime name (sh, python3 or node) or a table { executable = \"/abs/path\", \
                 readable = [\"/abs/path\", …] } (readable optional, no other keys)"
)]
pub enum RuntimeSetting {
    /// `sh`, `python3` or `node`.
    Named(String),
    /// An executable and its readable paths.
    Configured(RuntimeTable),
}

/// A runtime given as a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeTable {
    /// The runtime executable, an absolute path.
    pub executable: PathBuf,
    /// The host paths the runtime may read; absent: see the module documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readable: Option<Vec<PathBuf>>,
}

/// `[executor.limits]`: each field overrides the default of [`Limits`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSetting {
    /// [`Limits::cpu_seconds`].
    pub cpu_seconds: Option<u64>,
    /// [`Limits::address_space_bytes`].
    pub address_space_bytes: Option<u64>,
    /// [`Limits::file_size_bytes`].
    pub file_size_bytes: Option<u64>,
    /// [`Limits::open_files`].
    pub open_files: Option<u64>,
    /// [`Limits::processes`].
    pub processes: Option<u64>,
    /// [`Limits::scratch_bytes`].
    pub scratch_bytes: Option<u64>,
    /// [`Limits::scratch_inodes`].
    pub scratch_inodes: Option<u64>,
    /// [`Limits::memory_bytes`].
    pub memory_bytes: Option<u64>,
    /// [`Limits::cpu_percent`].
    pub cpu_percent: Option<u64>,
}

impl LimitsSetting {
    fn apply(&self) -> Limits {
        let base = Limits::default();
        Limits {
            cpu_seconds: self.cpu_seconds.unwrap_or(base.cpu_seconds),
            address_space_bytes: self.address_space_bytes.unwrap_or(base.address_space_bytes),
            file_size_bytes: self.file_size_bytes.unwrap_or(base.file_size_bytes),
            open_files: self.open_files.unwrap_or(base.open_files),
            processes: self.processes.unwrap_or(base.processes),
            scratch_bytes: self.scratch_bytes.unwrap_or(base.scratch_bytes),
            scratch_inodes: self.scratch_inodes.unwrap_or(base.scratch_inodes),
            memory_bytes: self.memory_bytes.unwrap_or(base.memory_bytes),
            cpu_percent: self.cpu_percent.unwrap_or(base.cpu_percent),
        }
    }
}

/// `network`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkSetting {
    /// [`NetworkMode::New`](crate::NetworkMode::New).
    New,
    /// [`NetworkMode::SharedEmpty`](crate::NetworkMode::SharedEmpty).
    SharedEmpty,
}

/// The default runtimes by name.
pub const RUNTIME_NAMES: &[&str] = &["sh", "python3", "node"];

fn named_runtime(name: &str) -> Option<RuntimeConfig> {
    match name {
        "sh" => Some(RuntimeConfig::shell()),
        "python3" => Some(RuntimeConfig::python3()),
        "node" => Some(RuntimeConfig::node()),
        _ => None,
    }
}

impl RuntimeSetting {
    /// The runtime this setting names.
    pub fn resolve(&self) -> Result<RuntimeConfig, ExecutorError> {
        match self {
            Self::Named(name) => named_runtime(name).ok_or_else(|| ExecutorError::InvalidInput {
                input: format!("runtime {name:?}"),
                rule: "a runtime is sh, python3, node, or a table { executable, readable }",
            }),
            Self::Configured(RuntimeTable {
                executable,
                readable: Some(readable),
            }) => Ok(RuntimeConfig {
                executable: executable.clone(),
                readable: readable.clone(),
            }),
            Self::Configured(RuntimeTable {
                executable,
                readable: None,
            }) => Ok(RUNTIME_NAMES
                .iter()
                .filter_map(|name| named_runtime(name))
                .find(|runtime| &runtime.executable == executable)
                .unwrap_or_else(|| RuntimeConfig::with_libraries(executable.clone(), &[]))),
        }
    }
}

impl SandboxExecBackend {
    /// The Executor configuration this section describes.
    pub fn sandbox_config(&self) -> Result<SandboxConfig, ExecutorError> {
        let runtime = match &self.runtime {
            Some(runtime) => runtime.resolve()?,
            None => RuntimeConfig::shell(),
        };
        let mut config = SandboxConfig::new(runtime);
        if let Some(limits) = &self.limits {
            config.limits = limits.apply();
        }
        config.launcher = self.launcher.clone().or_else(launcher_beside_library);
        if let Some(ids) = self.ids_when_root {
            config.ids_when_root = ids;
        }
        config.network = self.network.map(|network| match network {
            NetworkSetting::New => NetworkMode::New,
            NetworkSetting::SharedEmpty => NetworkMode::SharedEmpty,
        });
        if let Some(ahead) = self.prepare_ahead {
            config.prepare_ahead = ahead;
        }
        if let Some(required) = self.require_cgroup {
            config.require_cgroup = required;
        }
        config.total_memory_bytes = self.total_memory_bytes;
        if let Some(allowed) = self.parallel_runs_without_cgroup {
            config.parallel_runs_without_cgroup = allowed;
        }
        Ok(config)
    }

    /// The Executor this section describes.
    pub fn executor(&self) -> Result<SandboxExecutor, ExecutorError> {
        SandboxExecutor::new(self.sandbox_config()?)
    }
}

/// The file this code was loaded from, when that is a dynamic library and not the running
/// executable (into which the crate may be linked statically).
pub fn plugin_library() -> Option<PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let address = plugin_library as fn() -> Option<PathBuf> as *const libc::c_void;
    // SAFETY: dladdr only reads the loader's tables and fills `info`; a zero return means
    // the address is in no loaded object, and then `info` is not read.
    let found = unsafe { libc::dladdr(address, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so `info` is initialised.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname points at a NUL-terminated path owned by the loader, alive while the
    // object is loaded (forever: sf never unloads a plugin).
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let library = Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()))
        .canonicalize()
        .ok()?;
    let executable = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .ok();
    (Some(&library) != executable.as_ref()).then_some(library)
}

/// `sf-sandbox-launcher` beside this plugin's library, when loaded as one.
fn launcher_beside_library() -> Option<PathBuf> {
    Some(plugin_library()?.parent()?.join(LAUNCHER_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SandboxExecBackend, String> {
        serde_json::from_str(text).map_err(|error| error.to_string())
    }

    #[test]
    fn sections_parse_and_resolve() {
        let backend = parse("{}").unwrap();
        assert_eq!(
            backend.sandbox_config().unwrap().runtime,
            RuntimeConfig::shell()
        );
        let backend = parse(r#"{"runtime":"python3","limits":{"processes":8}}"#).unwrap();
        let config = backend.sandbox_config().unwrap();
        assert_eq!(config.runtime, RuntimeConfig::python3());
        assert_eq!(config.limits.processes, 8);
        assert_eq!(config.limits.cpu_seconds, Limits::default().cpu_seconds);
        let backend = parse(r#"{"runtime":{"executable":"/bin/sh"}}"#).unwrap();
        assert_eq!(
            backend.sandbox_config().unwrap().runtime,
            RuntimeConfig::shell()
        );
        let backend = parse(r#"{"runtime":{"executable":"/opt/x"}}"#).unwrap();
        assert_eq!(
            backend.sandbox_config().unwrap().runtime,
            RuntimeConfig::with_libraries("/opt/x", &[])
        );
        let backend =
            parse(r#"{"runtime":{"executable":"/opt/x","readable":["/opt"]},"network":"new"}"#)
                .unwrap();
        let config = backend.sandbox_config().unwrap();
        assert_eq!(config.runtime.readable, vec![PathBuf::from("/opt")]);
        assert_eq!(config.network, Some(NetworkMode::New));
        let backend = parse(
            r#"{"ids_when_root":{"first":300000,"count":10},"require_cgroup":true,
                "limits":{"memory_bytes":1048576,"cpu_percent":50}}"#,
        )
        .unwrap();
        let config = backend.sandbox_config().unwrap();
        assert_eq!(
            config.ids_when_root,
            IdRange {
                first: 300_000,
                count: 10
            }
        );
        assert!(config.require_cgroup);
        assert_eq!(config.limits.memory_bytes, 1 << 20);
        assert_eq!(config.limits.cpu_percent, 50);
        assert_eq!(config.limits.processes, Limits::default().processes);
        let defaults = parse("{}").unwrap().sandbox_config().unwrap();
        assert_eq!(defaults.ids_when_root, crate::DEFAULT_IDS);
        assert!(!defaults.require_cgroup);
    }

    #[test]
    fn bad_sections_are_refused() {
        for text in [
            r#"{"runtim":"sh"}"#,
            r#"{"runtime":3}"#,
            r#"{"runtime":{"executable":"/bin/sh","extra":1}}"#,
            r#"{"limits":{"cpu":1}}"#,
            r#"{"network":"host"}"#,
            r#"{"outside_id_when_root":65534}"#,
            r#"{"ids_when_root":{"first":1}}"#,
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
        let backend = parse(r#"{"runtime":"perl"}"#).unwrap();
        assert_eq!(
            backend.sandbox_config().unwrap_err().code(),
            "invalid-input"
        );
    }

    #[test]
    fn a_statically_linked_crate_is_not_a_plugin_library() {
        assert_eq!(plugin_library(), None);
    }
}
