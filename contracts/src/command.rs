//! The command form of a run: an `argv` with no implicit shell, a working directory, an
//! explicit environment, an optional dependency environment bound read-only, and an optional
//! results file the run writes under its scratch space, captured when it ends.
//!
//! A request with a command ([`RunRequest::command`](crate::RunRequest::command)) runs
//! `argv` instead of the runtime with an entry file. `argv[0]` is an absolute path inside
//! the run, or a bare name searched on the run's `PATH` (the dependency environment's `bin`
//! first), the way `execvp` searches. The program sees exactly [`RunCommand::full_env`]:
//! nothing is inherited from the host.
//!
//! The command is part of what a judge pins: [`RunCommand::digest`] covers every field but
//! the host directory the environment's files come from (which only says where this host
//! keeps them); the environment's own digest names its content.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::canonical::{self, Digest, Value};
use crate::executor::{
    ExecutorError, HARNESS_DIR, INPUT_DIR, MAX_ARG_BYTES, MAX_ARGS, PROGRAM_DIR,
};

/// The protocol string of a command's canonical document.
pub const COMMAND_PROTOCOL: &str = "sf-run-command/1";

/// Where a run may write: empty at the start, gone at the end; `HOME` and `TMPDIR`.
pub const SCRATCH_DIR: &str = "/sf/scratch";

/// The most variables a command's `env` may set.
pub const MAX_ENV_VARS: usize = 256;

/// The most bytes a command's `env` may hold, names and values together.
pub const MAX_ENV_BYTES: usize = 64 * 1024;

/// The largest results file a run may be asked to leave (8 MiB).
pub const MAX_RESULTS_BYTES: u64 = 8 * 1024 * 1024;

/// The variables every command gets, in this order, before its own `env` (which may replace
/// `PATH`, `TZ` and `LANG`, but never `HOME` or `TMPDIR`).
pub const BASE_ENV: [(&str, &str); 4] = [
    ("HOME", SCRATCH_DIR),
    ("LANG", "C.UTF-8"),
    ("TMPDIR", SCRATCH_DIR),
    ("TZ", "UTC"),
];

/// The `PATH` of a command without an environment, and the tail of one with it.
pub const BASE_PATH: &str = "/usr/bin:/bin";

/// Where a root environment is bound: it is the run's whole root, in place of the runtime.
pub const ROOT_AT: &str = "/";

/// The top-level names of a root environment that are never part of it: the sandbox mounts
/// its own `/dev`, `/proc` and `/sf`, and gives no `/sys`. A store leaves them out when it
/// adds a root, and an Executor never attaches them.
pub const ROOT_PROVIDED: [&str; 4] = ["dev", "proc", "sf", "sys"];

/// A dependency environment: a read-only tree from the host's content-addressed store,
/// bound at the absolute path it was built for, or, when that path is [`ROOT_AT`], as the
/// run's whole root (a Debian root made with debootstrap): the run then sees the
/// environment's files and the sandbox's own (`/sf`, `/proc`, `/dev`), and none of the
/// runtime's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunEnvironment {
    /// The environment's digest, as its store computed it over its content and `at`.
    pub digest: Digest,
    /// The host directory holding the files (the store's copy), bound read-only.
    pub tree: PathBuf,
    /// The absolute path inside the run where the files appear; [`ROOT_AT`] for a root.
    pub at: String,
}

impl RunEnvironment {
    /// Whether the environment is the run's whole root.
    pub fn is_root(&self) -> bool {
        self.at == ROOT_AT
    }
}

/// A results file the run writes under its scratch space, read by the Executor once every
/// process of the run has ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResultsRequest {
    /// The file's path relative to [`SCRATCH_DIR`], in the repository's path grammar.
    pub path: String,
    /// The most bytes kept; a larger file is not captured (see [`CapturedResults`]).
    pub max_bytes: u64,
}

/// The port, on the run's own loopback, where a run granted [`RunNetwork`] finds the host's
/// proxy: tools inside are given `http://127.0.0.1:3128` as their HTTPS proxy.
pub const PROXY_PORT: u16 = 3128;

/// Network for a run that builds a dependency environment: its network namespace has its
/// loopback up and a listener at `127.0.0.1:`[`PROXY_PORT`], and every connection made to it
/// is relayed to the host's Unix socket `proxy`, where the caller's proxy decides what the run
/// may reach (and records it). Nothing else is reachable: the run has no other interface and
/// no route. An Executor that cannot do exactly this refuses the request, starting nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunNetwork {
    /// The host's Unix socket the listener's connections are relayed to: an absolute path.
    pub proxy: PathBuf,
}

/// A writable directory a run leaves its output in (a dependency environment being built):
/// the host directory `dir`, empty, is bound read-write (and executable) at `at`, and what the
/// run leaves there stays when it ends. The Executor makes `dir` writable by the run's user;
/// what is in it afterwards is the run's output, as untrusted as its stdout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunOutput {
    /// The absolute path inside the run, outside `/sf`, `/proc` and `/dev`.
    pub at: String,
    /// The host directory, an absolute path; it must exist and be empty.
    pub dir: PathBuf,
}

/// What became of the results file a run was asked to leave.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CapturedResults {
    /// The run left no file at the path.
    Absent,
    /// The file's bytes, at most the request's `max_bytes`.
    Written(Vec<u8>),
    /// Something is at the path that is not captured: a file larger than `max_bytes`, a
    /// directory, a link, a device; the reason says which.
    Refused(String),
}

/// Bounds a command's run asks for below the Executor's own limits: the most memory its
/// processes use together, the most processes and threads at once, the CPU seconds each
/// process may use, and the size and file count of its scratch space. A bound the run hits is the program's failure to fit it, not the
/// sandbox's; one the Executor cannot enforce (no control group for memory or processes)
/// starts nothing.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunResources {
    /// Bytes of memory, all the run's processes together.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_bytes: Option<u64>,
    /// Processes and threads at once.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub processes: Option<u64>,
    /// CPU seconds per process.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_seconds: Option<u64>,
    /// Bytes the scratch space holds.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub scratch_bytes: Option<u64>,
    /// Files and directories the scratch space holds.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub scratch_files: Option<u64>,
}

impl RunResources {
    /// Whether no bound is asked for.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Whether a bound is asked for `limit`: a run that hits it did not fit what it asked,
    /// and the limit is not the Executor's own.
    pub fn declares(&self, limit: crate::limit_hit::Limit) -> bool {
        use crate::limit_hit::Limit;
        match limit {
            Limit::Memory => self.memory_bytes.is_some(),
            Limit::Processes => self.processes.is_some(),
            Limit::CpuTime => self.cpu_seconds.is_some(),
            Limit::Scratch => self.scratch_bytes.is_some(),
            Limit::ScratchFiles => self.scratch_files.is_some(),
            // The total of a collection's runs is the host's, whatever the check declares.
            Limit::FileSize | Limit::OpenFiles | Limit::CollectionMemory => false,
        }
    }

    fn document(&self) -> Value {
        let mut fields = std::collections::BTreeMap::new();
        for (name, value) in [
            ("cpuSeconds", self.cpu_seconds),
            ("memoryBytes", self.memory_bytes),
            ("processes", self.processes),
            ("scratchBytes", self.scratch_bytes),
            ("scratchFiles", self.scratch_files),
        ] {
            if let Some(value) = value {
                fields.insert(
                    name.to_owned(),
                    Value::Integer(i64::try_from(value).unwrap_or(i64::MAX)),
                );
            }
        }
        Value::Object(fields)
    }
}

/// A run's command.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunCommand {
    /// The program and its arguments: 1 to [`MAX_ARGS`] strings, [`MAX_ARG_BYTES`]
    /// together, none holding NUL; `argv[0]` is an absolute path or a bare name.
    pub argv: Vec<String>,
    /// The working directory: [`SCRATCH_DIR`], or the program's, the input's or the
    /// harness's directory or a directory below it that holds a file of its snapshot.
    pub cwd: String,
    /// Variables set on top of [`BASE_ENV`] and `PATH`.
    pub env: BTreeMap<String, String>,
    /// The dependency environment bound for the run, if any.
    pub environment: Option<RunEnvironment>,
    /// The results file to capture, if any.
    pub results: Option<ResultsRequest>,
    /// Bounds below the Executor's limits, if any.
    pub resources: RunResources,
    /// Whether the run may execute files it writes to its scratch space. A run's scratch is
    /// not executable unless its command asks: a compiled language's test suite (`cargo
    /// test`, a C project's `make check`) builds its test programs at run time and runs them,
    /// and they can be nowhere else. It is part of the command's digest (when asked), so a
    /// judge pins it with the rest.
    pub scratch_executable: bool,
    /// The network the run gets to its caller's proxy, if any (none: no network at all).
    pub network: Option<RunNetwork>,
    /// The writable directory the run leaves its output in, if any.
    pub output: Option<RunOutput>,
}

fn refuse<T>(input: String, rule: &'static str) -> Result<T, ExecutorError> {
    Err(ExecutorError::InvalidInput { input, rule })
}

/// Whether `path` is absolute and normal: no empty, `.` or `..` segment, no NUL, no
/// trailing slash.
pub fn is_normal_absolute(path: &str) -> bool {
    path.len() <= 4096
        && path.starts_with('/')
        && path.len() > 1
        && !path.contains('\0')
        && path[1..]
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
}

/// Whether `name` may be an environment variable's name: `[A-Za-z_][A-Za-z0-9_]*`, at most
/// 128 bytes.
pub fn is_env_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=128).contains(&bytes.len())
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// Whether `at` is, or is below, a directory the sandbox makes its own (`/sf`, `/proc`,
/// `/dev`), where nothing of the caller's may be bound.
fn is_reserved(at: &str) -> bool {
    ["/sf", "/proc", "/dev"]
        .iter()
        .any(|prefix| at == *prefix || at.strip_prefix(prefix).is_some_and(|r| r.starts_with('/')))
}

/// The run directories a command's working directory may be in, and the reserved prefix no
/// environment may be bound under.
const RUN_DIRS: [&str; 3] = [PROGRAM_DIR, INPUT_DIR, HARNESS_DIR];

/// Where a working directory is: a run directory and the path below it (`""` for itself).
pub fn cwd_place(cwd: &str) -> Option<(&'static str, &str)> {
    if cwd == SCRATCH_DIR {
        return Some((SCRATCH_DIR, ""));
    }
    RUN_DIRS.into_iter().find_map(|dir| {
        let rest = cwd.strip_prefix(dir)?;
        if rest.is_empty() {
            Some((dir, ""))
        } else {
            rest.strip_prefix('/').map(|below| (dir, below))
        }
    })
}

impl RunCommand {
    /// Checks every rule of a command an Executor checks before it starts anything (the
    /// working directory's existence in its snapshot is checked with the request).
    pub fn check(&self) -> Result<(), ExecutorError> {
        let Some(program) = self.argv.first() else {
            return refuse("argv".to_owned(), "a command's argv names a program");
        };
        if self.argv.len() > MAX_ARGS {
            return refuse(
                format!("argv of {} strings", self.argv.len()),
                "a command's argv holds at most 256 strings",
            );
        }
        if self.argv.iter().map(String::len).sum::<usize>() > MAX_ARG_BYTES {
            return refuse(
                "argv".to_owned(),
                "a command's argv holds at most 64 KiB together",
            );
        }
        if let Some(arg) = self.argv.iter().find(|arg| arg.contains('\0')) {
            return refuse(format!("argv string {arg:?}"), "an argv string holds a NUL");
        }
        if program.is_empty()
            || (program.contains('/') && !is_normal_absolute(program))
            || program == "."
            || program == ".."
        {
            return refuse(
                format!("argv[0] {program:?}"),
                "argv[0] is a bare name searched on PATH or a normal absolute path",
            );
        }
        if !is_normal_absolute(&self.cwd) || cwd_place(&self.cwd).is_none() {
            return refuse(
                format!("cwd {:?}", self.cwd),
                "the working directory is /sf/scratch, or /sf/program, /sf/input or \
                 /sf/harness or a directory below one, written as a normal absolute path",
            );
        }
        if self.env.len() > MAX_ENV_VARS {
            return refuse(
                format!("env of {} variables", self.env.len()),
                "a command sets at most 256 variables",
            );
        }
        let mut bytes = 0;
        for (name, value) in &self.env {
            bytes += name.len() + value.len();
            if !is_env_name(name) {
                return refuse(
                    format!("env variable {name:?}"),
                    "a variable's name is a letter or '_' then letters, digits and '_', at \
                     most 128 bytes",
                );
            }
            if name == "HOME" || name == "TMPDIR" {
                return refuse(
                    format!("env variable {name}"),
                    "HOME and TMPDIR are the run's scratch directory and cannot be set",
                );
            }
            if value.contains('\0') {
                return refuse(format!("env variable {name}"), "the value holds a NUL");
            }
        }
        if bytes > MAX_ENV_BYTES {
            return refuse(
                "env".to_owned(),
                "a command's variables hold at most 64 KiB together",
            );
        }
        if let Some(environment) = &self.environment {
            let at = &environment.at;
            if !environment.is_root() && (!is_normal_absolute(at) || is_reserved(at)) {
                return refuse(
                    format!("environment path {at:?}"),
                    "an environment is bound at / (as the whole root) or at a normal \
                     absolute path outside /sf, /proc and /dev",
                );
            }
            if !environment.tree.is_absolute() {
                return refuse(
                    format!("environment tree {}", environment.tree.display()),
                    "an environment's host directory is an absolute path",
                );
            }
        }
        for (name, value) in [
            ("memory", self.resources.memory_bytes),
            ("processes", self.resources.processes),
            ("CPU seconds", self.resources.cpu_seconds),
            ("scratch bytes", self.resources.scratch_bytes),
            ("scratch files", self.resources.scratch_files),
        ] {
            if value == Some(0)
                || value.is_some_and(|value| value > crate::canonical::MAX_SAFE_INTEGER as u64)
            {
                return refuse(
                    format!("resources {name}"),
                    "a bound is a positive integer of at most 2^53 - 1",
                );
            }
        }
        self.check_build_access()?;
        if let Some(results) = &self.results {
            if crate::tree_path::check_path(
                &results.path,
                Some(crate::tree_path::EntryMode::Regular),
            )
            .is_err()
            {
                return refuse(
                    format!("results path {:?}", results.path),
                    "a results file is a path in the repository's grammar, relative to \
                     /sf/scratch",
                );
            }
            if results.max_bytes == 0 || results.max_bytes > MAX_RESULTS_BYTES {
                return refuse(
                    format!("results limit {}", results.max_bytes),
                    "a results file is kept up to 1 byte to 8 MiB",
                );
            }
        }
        Ok(())
    }

    /// Checks the network and the output directory of a command that builds an environment:
    /// host paths absolute, the output bound at a normal absolute path outside `/sf`, `/proc`
    /// and `/dev`, neither over nor inside the dependency environment.
    fn check_build_access(&self) -> Result<(), ExecutorError> {
        if let Some(network) = &self.network
            && !network.proxy.is_absolute()
        {
            return refuse(
                format!("network proxy {}", network.proxy.display()),
                "a run's proxy socket is an absolute host path",
            );
        }
        let Some(output) = &self.output else {
            return Ok(());
        };
        if !is_normal_absolute(&output.at) || is_reserved(&output.at) {
            return refuse(
                format!("output path {:?}", output.at),
                "an output directory is bound at a normal absolute path outside /sf, /proc \
                 and /dev",
            );
        }
        if !output.dir.is_absolute() {
            return refuse(
                format!("output directory {}", output.dir.display()),
                "an output directory is an absolute host path",
            );
        }
        if let Some(environment) = &self.environment {
            let nested = |outer: &str, inner: &str| {
                outer == inner
                    || inner
                        .strip_prefix(outer)
                        .is_some_and(|rest| rest.starts_with('/'))
            };
            if environment.is_root()
                || nested(&environment.at, &output.at)
                || nested(&output.at, &environment.at)
            {
                return refuse(
                    format!("output path {:?}", output.at),
                    "an output directory is bound neither over nor inside the dependency \
                     environment, and not beside a root environment",
                );
            }
        }
        Ok(())
    }

    /// The `PATH` the run gets unless `env` sets one: the environment's `bin` first (a root
    /// environment's own `/usr/local/bin`, then the base).
    pub fn default_path(&self) -> String {
        match &self.environment {
            Some(environment) if environment.is_root() => format!("/usr/local/bin:{BASE_PATH}"),
            Some(environment) => format!("{}/bin:{BASE_PATH}", environment.at),
            None => BASE_PATH.to_owned(),
        }
    }

    /// Every variable the program sees, sorted by name: [`BASE_ENV`], `PATH`, then `env`.
    pub fn full_env(&self) -> Vec<(String, String)> {
        let mut all: BTreeMap<String, String> = BASE_ENV
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        all.insert("PATH".to_owned(), self.default_path());
        all.extend(self.env.clone());
        all.into_iter().collect()
    }

    /// The files `argv[0]` is tried as, in order: itself when absolute, else each directory
    /// of the run's `PATH` (an empty segment is skipped, not the working directory).
    pub fn program_candidates(&self) -> Vec<String> {
        let program = &self.argv[0];
        if program.starts_with('/') {
            return vec![program.clone()];
        }
        let path = self
            .full_env()
            .into_iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value)
            .unwrap_or_default();
        path.split(':')
            .filter(|dir| dir.starts_with('/'))
            .map(|dir| format!("{}/{program}", dir.trim_end_matches('/')))
            .collect()
    }

    /// The canonical document [`RunCommand::digest`] hashes:
    /// `{"argv":[…],"cwd":…,"env":{…},"environment":{"at","digest"}|null,"protocol":"sf-run-command/1","resources":{"cpuSeconds"?,"memoryBytes"?,"processes"?,"scratchBytes"?,"scratchFiles"?},"results":{"maxBytes","path"}|null,"scratchExecutable"?:true,"network"?:{"proxyPort"},"output"?:{"at"}}`.
    pub fn document(&self) -> Value {
        let environment = match &self.environment {
            Some(environment) => canonical::object([
                ("at", Value::from(environment.at.as_str())),
                ("digest", Value::from(environment.digest.to_string())),
            ]),
            None => Value::Null,
        };
        let results = match &self.results {
            Some(results) => canonical::object([
                ("path", Value::from(results.path.as_str())),
                (
                    "maxBytes",
                    Value::Integer(i64::try_from(results.max_bytes).unwrap_or(i64::MAX)),
                ),
            ]),
            None => Value::Null,
        };
        let env = Value::Object(
            self.env
                .iter()
                .map(|(name, value)| (name.clone(), Value::from(value.as_str())))
                .collect(),
        );
        let mut document = std::collections::BTreeMap::from([
            ("protocol".to_owned(), Value::from(COMMAND_PROTOCOL)),
            (
                "argv".to_owned(),
                Value::Array(self.argv.iter().map(|a| Value::from(a.as_str())).collect()),
            ),
            ("cwd".to_owned(), Value::from(self.cwd.as_str())),
            ("env".to_owned(), env),
            ("environment".to_owned(), environment),
            ("results".to_owned(), results),
            ("resources".to_owned(), self.resources.document()),
        ]);
        // Only when asked: every command without them keeps the digest it always had. The
        // host paths (the proxy's socket, the output's directory) say only where this host
        // keeps them, as an environment's tree does.
        if self.scratch_executable {
            document.insert("scratchExecutable".to_owned(), Value::Bool(true));
        }
        if self.network.is_some() {
            document.insert(
                "network".to_owned(),
                canonical::object([("proxyPort", Value::Integer(i64::from(PROXY_PORT)))]),
            );
        }
        if let Some(output) = &self.output {
            document.insert(
                "output".to_owned(),
                canonical::object([("at", Value::from(output.at.as_str()))]),
            );
        }
        Value::Object(document)
    }

    /// The `sha256:` of [`RunCommand::document`]. Every Executor digests a command this
    /// way, so a judge can compute the digest it pins.
    pub fn digest(&self) -> Digest {
        // A checked command holds strings and small integers only; should one not encode,
        // the digest of its error text still differs from every real command's.
        canonical::digest(&self.document())
            .unwrap_or_else(|error| Digest::of(error.to_string().as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> RunCommand {
        RunCommand {
            argv: vec!["python3".into(), "-m".into(), "pytest".into()],
            cwd: PROGRAM_DIR.into(),
            env: BTreeMap::new(),
            environment: None,
            results: None,
            resources: RunResources::default(),
            scratch_executable: false,
            network: None,
            output: None,
        }
    }

    #[test]
    fn rules() {
        assert!(command().check().is_ok());
        let refused = |change: &dyn Fn(&mut RunCommand)| {
            let mut command = command();
            change(&mut command);
            command.check().is_err()
        };
        assert!(refused(&|c| c.argv.clear()));
        assert!(refused(&|c| c.argv[0] = "bin/python3".into()));
        assert!(refused(&|c| c.argv[0] = "/usr/../bin/sh".into()));
        assert!(refused(&|c| c.argv[1] = "a\0b".into()));
        assert!(refused(&|c| c.cwd = "/tmp".into()));
        assert!(refused(&|c| c.cwd = "/sf/program/../x".into()));
        assert!(refused(&|c| c.cwd = "/sf/programs".into()));
        assert!(refused(&|c| c.cwd = "/sf/scratch/sub".into()));
        assert!(refused(&|c| {
            c.env.insert("HOME".into(), "/".into());
        }));
        assert!(refused(&|c| {
            c.env.insert("1X".into(), "y".into());
        }));
        let environment = |at: &str| RunEnvironment {
            digest: Digest::of(b"e"),
            tree: "/var/lib/sf/e".into(),
            at: at.into(),
        };
        assert!(refused(&|c| c.environment = Some(environment("/sf/env"))));
        assert!(refused(&|c| c.environment = Some(environment("relative"))));
        assert!(!refused(&|c| c.environment = Some(environment("/sfx/env"))));
        let results = |path: &str, max_bytes| ResultsRequest {
            path: path.into(),
            max_bytes,
        };
        assert!(refused(&|c| c.results = Some(results("../x.xml", 10))));
        assert!(refused(&|c| c.results = Some(results("x.xml", 0))));
        assert!(refused(&|c| {
            c.results = Some(results("x.xml", MAX_RESULTS_BYTES + 1))
        }));
        assert!(!refused(&|c| c.results = Some(results("out/x.xml", 10))));
        assert!(!refused(&|c| c.cwd = "/sf/harness/tests".into()));
        assert!(refused(&|c| c.resources.memory_bytes = Some(0)));
        assert!(!refused(&|c| c.resources.processes = Some(64)));
        let output = |at: &str, dir: &str| RunOutput {
            at: at.into(),
            dir: dir.into(),
        };
        assert!(!refused(
            &|c| c.output = Some(output("/opt/env", "/var/tmp/o"))
        ));
        assert!(refused(
            &|c| c.output = Some(output("/sf/out", "/var/tmp/o"))
        ));
        assert!(refused(&|c| c.output = Some(output("/dev", "/var/tmp/o"))));
        assert!(refused(
            &|c| c.output = Some(output("opt/env", "/var/tmp/o"))
        ));
        assert!(refused(&|c| c.output = Some(output("/opt/env", "o"))));
        let beside = |at: &'static str| {
            move |c: &mut RunCommand| {
                c.environment = Some(environment(at));
                c.output = Some(output("/opt/env", "/var/tmp/o"));
            }
        };
        assert!(refused(&beside("/opt/env")));
        assert!(refused(&beside("/opt")));
        assert!(refused(&beside("/opt/env/inner")));
        assert!(refused(&beside("/")));
        assert!(!refused(&beside("/opt/envs")));
        assert!(refused(&|c| {
            c.network = Some(RunNetwork {
                proxy: "proxy.sock".into(),
            })
        }));
        assert!(!refused(&|c| {
            c.network = Some(RunNetwork {
                proxy: "/run/sf/proxy.sock".into(),
            })
        }));
    }

    #[test]
    fn the_environment_is_fixed_and_searched_first() {
        let mut command = command();
        assert_eq!(
            command.program_candidates(),
            ["/usr/bin/python3", "/bin/python3"]
        );
        command.environment = Some(RunEnvironment {
            digest: Digest::of(b"e"),
            tree: "/var/lib/sf/e".into(),
            at: "/opt/venv".into(),
        });
        assert_eq!(command.program_candidates()[0], "/opt/venv/bin/python3");
        command.env.insert("PATH".into(), "/x::rel:/y/".into());
        assert_eq!(command.program_candidates(), ["/x/python3", "/y/python3"]);
        let env = command.full_env();
        assert!(env.contains(&("HOME".into(), SCRATCH_DIR.into())));
        assert!(env.contains(&("TZ".into(), "UTC".into())));
        assert_eq!(env.len(), 5);
    }

    #[test]
    fn the_digest_covers_every_field_but_the_host_directory() {
        let base = command();
        let mut seen = std::collections::BTreeSet::new();
        seen.insert(base.digest());
        let mut changed = base.clone();
        changed.argv.push("-x".into());
        assert!(seen.insert(changed.digest()));
        let mut changed = base.clone();
        changed.cwd = SCRATCH_DIR.into();
        assert!(seen.insert(changed.digest()));
        let mut changed = base.clone();
        changed.env.insert("A".into(), "1".into());
        assert!(seen.insert(changed.digest()));
        let mut changed = base.clone();
        changed.results = Some(ResultsRequest {
            path: "r.xml".into(),
            max_bytes: 5,
        });
        assert!(seen.insert(changed.digest()));
        let mut changed = base.clone();
        changed.resources.memory_bytes = Some(1 << 28);
        assert!(seen.insert(changed.digest()));
        let mut changed = base.clone();
        changed.scratch_executable = true;
        assert!(seen.insert(changed.digest()));
        let mut changed = base.clone();
        changed.environment = Some(RunEnvironment {
            digest: Digest::of(b"e"),
            tree: "/a".into(),
            at: "/opt/e".into(),
        });
        assert!(seen.insert(changed.digest()));
        let mut moved = changed.clone();
        moved.environment.as_mut().unwrap().tree = "/b".into();
        assert_eq!(moved.digest(), changed.digest());
        let mut changed = base.clone();
        changed.network = Some(RunNetwork {
            proxy: "/run/a.sock".into(),
        });
        assert!(seen.insert(changed.digest()));
        let mut moved = changed.clone();
        moved.network = Some(RunNetwork {
            proxy: "/run/b.sock".into(),
        });
        assert_eq!(moved.digest(), changed.digest());
        let mut changed = base.clone();
        changed.output = Some(RunOutput {
            at: "/opt/e".into(),
            dir: "/var/tmp/a".into(),
        });
        assert!(seen.insert(changed.digest()));
        let mut moved = changed.clone();
        moved.output.as_mut().unwrap().dir = "/var/tmp/b".into();
        assert_eq!(moved.digest(), changed.digest());
    }
}
