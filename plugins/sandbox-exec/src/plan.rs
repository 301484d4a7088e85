//! What the supervisor hands the launcher, and what the launcher reports back.
//!
//! The launcher's standard input is one end of a Unix stream socket pair. The supervisor
//! writes two messages on it, each eight bytes (little-endian length of a JSON header) and
//! the header: first the [`Plan`] (everything about the sandbox, the same for every run of an
//! Executor), then, possibly much later, the [`RunPlan`] (the program, the input and the
//! arguments of one run) followed by the bytes of every program file and every input file, in
//! header order, raw. Between the two, the launcher builds the whole sandbox and waits: a
//! sandbox is prepared ahead of the run that uses it, and used by exactly one run. When the run
//! enters a shared network namespace, its file descriptor travels with the first eight bytes
//! (SCM_RIGHTS). After the run plan the supervisor writes one byte, `k`, to have the launcher
//! kill the run; end of file (at any point) means the same.
//!
//! The launcher and its two children write reports back on the same socket, one line each,
//! in an order the process tree makes certain: `fail`, or `confined` (then perhaps
//! `exec-failed`), then any `hit` (a limit the init saw hit), then `exit`/`signal`, then
//! `done`. A launcher whose plan has a proxy port first writes `listening`, with the
//! descriptor of its listener on that port attached (SCM_RIGHTS).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sf_contracts::tree_path::EntryMode;

use crate::runtime::{BindSource, Layout};

/// The version of this exchange; a launcher refuses any other. Version 4 added each
/// snapshot entry's kind ([`PlanFile::kind`]); version 5 the dependency environment
/// ([`Plan::environment`]) and the command ([`RunPlan::command`]); version 6 the executable
/// scratch ([`RunPlan::scratch_executable`]); version 7 the root environment
/// ([`EnvironmentBind::root_entries`]); version 8 the program by reference
/// ([`Plan::program_tree`], [`PlanEntryKind::Whiteout`]); version 9 an environment build's
/// output directory and proxy ([`Plan::output`], [`Plan::proxy_port`],
/// [`LandlockPlan::ports`]).
pub const PLAN_PROTOCOL: u32 = 9;

/// Where a program tree's base is attached inside the sandbox while the program's overlay is
/// made; detached again before the program starts, so that only the overlay holds it.
pub const PROGRAM_TREE_MOUNT: &str = "/sf/.tree";

/// The largest header accepted (the file bytes follow it and are bounded separately).
pub const MAX_HEADER_BYTES: u64 = 4 << 20;

/// One entry of a snapshot, whose bytes (a link's target) follow the header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFile {
    pub path: String,
    pub kind: PlanEntryKind,
    pub size: u64,
}

/// What the launcher makes of a snapshot entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanEntryKind {
    /// A file, mode 0444.
    File,
    /// An executable file, mode 0555.
    Executable,
    /// A symbolic link whose target is the entry's bytes.
    Symlink,
    /// A whiteout (a character device 0:0) in a program tree's layer: the base's entry of
    /// that name, file or directory, is hidden. It has no bytes.
    Whiteout,
}

impl From<EntryMode> for PlanEntryKind {
    fn from(mode: EntryMode) -> Self {
        match mode {
            EntryMode::Regular => Self::File,
            EntryMode::Executable => Self::Executable,
            EntryMode::Symlink => Self::Symlink,
        }
    }
}

/// A resource limit to set: every one the kernel has, so that none is inherited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resource {
    Cpu,
    AddressSpace,
    Data,
    Stack,
    Rss,
    FileSize,
    OpenFiles,
    Processes,
    Core,
    MemoryLock,
    FileLocks,
    PendingSignals,
    MessageQueue,
    Nice,
    RealtimePriority,
    RealtimeTime,
}

impl Resource {
    /// The kernel's number for it.
    pub fn number(self) -> libc::__rlimit_resource_t {
        match self {
            Self::Cpu => libc::RLIMIT_CPU,
            Self::AddressSpace => libc::RLIMIT_AS,
            Self::Data => libc::RLIMIT_DATA,
            Self::Stack => libc::RLIMIT_STACK,
            Self::Rss => libc::RLIMIT_RSS,
            Self::FileSize => libc::RLIMIT_FSIZE,
            Self::OpenFiles => libc::RLIMIT_NOFILE,
            Self::Processes => libc::RLIMIT_NPROC,
            Self::Core => libc::RLIMIT_CORE,
            Self::MemoryLock => libc::RLIMIT_MEMLOCK,
            Self::FileLocks => libc::RLIMIT_LOCKS,
            Self::PendingSignals => libc::RLIMIT_SIGPENDING,
            Self::MessageQueue => libc::RLIMIT_MSGQUEUE,
            Self::Nice => libc::RLIMIT_NICE,
            Self::RealtimePriority => libc::RLIMIT_RTPRIO,
            Self::RealtimeTime => libc::RLIMIT_RTTIME,
        }
    }

    /// The name in the profile's recipe.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpuSeconds",
            Self::AddressSpace => "addressSpaceBytes",
            Self::Data => "dataBytes",
            Self::Stack => "stackBytes",
            Self::Rss => "residentBytes",
            Self::FileSize => "fileSizeBytes",
            Self::OpenFiles => "openFiles",
            Self::Processes => "processes",
            Self::Core => "coreBytes",
            Self::MemoryLock => "lockedMemoryBytes",
            Self::FileLocks => "fileLocks",
            Self::PendingSignals => "pendingSignals",
            Self::MessageQueue => "messageQueueBytes",
            Self::Nice => "niceCeiling",
            Self::RealtimePriority => "realtimePriority",
            Self::RealtimeTime => "realtimeMicros",
        }
    }
}

/// One Landlock rule: a path inside the sandbox and the access rights (kernel bits).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockRule {
    pub path: String,
    pub access: u64,
}

/// The Landlock ruleset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPlan {
    /// The ABI whose rights are handled; the kernel must enforce them all.
    pub abi: u32,
    pub handled_fs: u64,
    pub handled_net: u64,
    pub scopes: u64,
    pub rules: Vec<LandlockRule>,
    /// TCP ports the program may connect to (kernel bits of the network rights), for an
    /// environment build's proxy; empty for every other run.
    pub ports: Vec<LandlockPort>,
}

/// One Landlock network rule: a TCP port and the rights on it (kernel bits).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockPort {
    pub port: u16,
    pub access: u64,
}

/// Everything the launcher does, decided by the supervisor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub protocol: u32,
    /// The host uid and gid to become first when started as root.
    pub outside_id_when_root: u32,
    /// The uid and gid inside the user namespace.
    pub inside_id: u32,
    /// Whether a network namespace descriptor comes with the header (else a new one is made).
    pub join_network: bool,
    pub hostname: String,
    pub stage: String,
    pub root_tmpfs_options: String,
    pub layout: Layout,
    pub devices: BTreeMap<PathBuf, BindSource>,
    pub proc_options: String,
    pub program_dir: String,
    pub input_dir: String,
    pub harness_dir: String,
    pub scratch_dir: String,
    pub scratch_options: String,
    pub landlock: LandlockPlan,
    /// Each seccomp filter's instructions as hex of [`crate::seccomp::encode`].
    pub seccomp: Vec<String>,
    pub rlimits: Vec<(Resource, u64, u64)>,
    pub environment: Vec<(String, String)>,
    pub cwd: String,
    pub executable: String,
    /// The dependency environment every run of this sandbox sees, if any.
    pub dependencies: Option<EnvironmentBind>,
    /// The base tree of every run of this sandbox whose program is given by reference: its
    /// host directory is cloned before the pivot (checked by identity) and attached at
    /// [`PROGRAM_TREE_MOUNT`], and each run lays its layer over it.
    pub program_tree: Option<TreeBind>,
    /// An environment build's output directory, bound read-write.
    pub output: Option<OutputBind>,
    /// An environment build's proxy port: the launcher makes a network namespace of its own
    /// (whatever `join_network` says), brings its loopback up, listens on
    /// `127.0.0.1:port` and hands the listener to the supervisor, which relays each
    /// connection to the caller's proxy.
    pub proxy_port: Option<u16>,
}

/// An environment build's output directory: a host directory, cloned read-write (executable,
/// never setuid or a device) and checked by identity, attached at `at`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutputBind {
    pub at: PathBuf,
    pub host: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// A program tree's base: a host directory (a store's verified tree), cloned read-only and
/// checked by device and inode.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TreeBind {
    pub host: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// What a sandbox binds beyond its Executor's runtime, fixed when it is built: a prepared
/// sandbox serves only a run that binds the same.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Binds {
    /// A command's dependency environment.
    pub dependencies: Option<EnvironmentBind>,
    /// A program tree's base.
    pub program_tree: Option<TreeBind>,
    /// An environment build's output directory.
    pub output: Option<OutputBind>,
    /// An environment build's proxy: the host's Unix socket the supervisor relays the run's
    /// connections to.
    pub proxy: Option<PathBuf>,
}

impl Binds {
    /// Whether these binds are an environment build's, which no sandbox is prepared ahead
    /// for: its output directory and proxy are its own.
    pub fn is_build(&self) -> bool {
        self.output.is_some() || self.proxy.is_some()
    }
}

/// A dependency environment: a host directory bound read-only (and executable) at another
/// path inside the sandbox, or, at `/`, the sandbox's whole root in place of the runtime.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnvironmentBind {
    /// Where the files appear inside.
    pub at: PathBuf,
    /// The host directory, cloned before the pivot and checked by identity.
    pub host: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// For a root environment, its top-level entries as the supervisor listed them: the init
    /// attaches each directory and file at `/<name>` and recreates each link, and each
    /// directory and file gets the rule a runtime directory or file gets. Empty for any other
    /// environment.
    pub root_entries: Vec<RootEntry>,
}

impl EnvironmentBind {
    /// Whether the environment is the sandbox's whole root.
    pub fn is_root(&self) -> bool {
        self.at == std::path::Path::new(sf_contracts::command::ROOT_AT)
    }
}

/// A top-level entry of a root environment.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RootEntry {
    /// Its name, one component.
    pub name: String,
    pub kind: RootEntryKind,
}

/// What a top-level entry of a root environment is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RootEntryKind {
    Directory,
    File,
    /// A symbolic link (a merged-/usr root's `bin → usr/bin`), recreated with this target.
    Symlink(String),
}

impl Plan {
    /// The directories each run mounts a snapshot on: the program's, the input's and the
    /// harness's.
    pub fn snapshot_dirs(&self) -> [&str; 3] {
        [&self.program_dir, &self.input_dir, &self.harness_dir]
    }

    /// This plan with `binds`: the program tree's base, and the dependency environment bound
    /// and readable and executable under Landlock. A
    /// root environment takes the runtime's place: none of the runtime's files is bound or
    /// has a rule, and each of the environment's top-level directories and files gets the
    /// rule a runtime directory or file would.
    pub fn with_binds(&self, binds: &Binds) -> Plan {
        use crate::profile::{runtime_directory_access, runtime_file_access};
        let mut plan = self.clone();
        plan.program_tree = binds.program_tree.clone();
        plan.with_build(binds);
        let Some(environment) = &binds.dependencies else {
            return plan;
        };
        if environment.is_root() {
            let runtime: std::collections::BTreeSet<String> = plan
                .layout
                .binds
                .keys()
                .map(|path| path.to_string_lossy().into_owned())
                .collect();
            plan.landlock
                .rules
                .retain(|rule| !runtime.contains(&rule.path));
            plan.layout = Layout::default();
            for entry in &environment.root_entries {
                let access = match entry.kind {
                    RootEntryKind::Directory => runtime_directory_access(),
                    RootEntryKind::File => runtime_file_access(),
                    RootEntryKind::Symlink(_) => continue,
                };
                plan.landlock.rules.push(LandlockRule {
                    path: format!("/{}", entry.name),
                    access: access.bits(),
                });
            }
        } else {
            plan.landlock.rules.push(LandlockRule {
                path: environment.at.to_string_lossy().into_owned(),
                access: runtime_directory_access().bits(),
            });
        }
        plan.dependencies = Some(environment.clone());
        plan
    }
}

impl Plan {
    /// An environment build's part of the binds: the output directory, writable under
    /// Landlock as the scratch is; the proxy's port, the only one the program may connect to.
    fn with_build(&mut self, binds: &Binds) {
        if let Some(output) = &binds.output {
            self.landlock.rules.push(LandlockRule {
                path: output.at.to_string_lossy().into_owned(),
                access: (crate::profile::scratch_access() | landlock::AccessFs::Execute).bits(),
            });
            self.output = Some(output.clone());
        }
        if binds.proxy.is_some() {
            let port = sf_contracts::PROXY_PORT;
            self.landlock.ports.push(LandlockPort {
                port,
                access: landlock::BitFlags::from(landlock::AccessNet::ConnectTcp).bits(),
            });
            self.proxy_port = Some(port);
        }
    }
}

/// One run's part: what the sandbox prepared by a [`Plan`] runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPlan {
    /// tmpfs options of the program's file system, sized to it.
    pub program_options: String,
    pub input_options: String,
    pub harness_options: String,
    pub program: Vec<PlanFile>,
    pub input: Vec<PlanFile>,
    pub harness: Vec<PlanFile>,
    pub argv: Vec<String>,
    /// A command in place of the runtime with an entry: `argv[0]` is tried as each of
    /// `candidates` in turn, as `execvp` does.
    pub command: Option<CommandPlan>,
    /// RLIMIT_CPU below the plan's, when the run asks for less.
    pub cpu_seconds: Option<u64>,
    /// The scratch's tmpfs size options when the run asks for less than the plan's: the init
    /// remounts the scratch with them before the program's process starts.
    pub scratch_options: Option<String>,
    /// Whether the run's command asked to execute what it writes to its scratch: the init
    /// remounts the (still empty) scratch without `noexec` and Landlock gives it the execute
    /// right too. Every other run's scratch stays `noexec`.
    pub scratch_executable: bool,
}

/// What a run with a command execs, where, with what, and what it leaves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandPlan {
    pub candidates: Vec<String>,
    pub cwd: String,
    pub environment: Vec<(String, String)>,
    /// The results file under scratch, and the most bytes kept.
    pub results: Option<(String, u64)>,
}

impl RunPlan {
    /// The total file bytes that follow the header.
    pub fn file_bytes(&self) -> u64 {
        self.files().map(|file| file.size).sum()
    }

    /// The program's, the input's and the harness's files, in the order their bytes follow
    /// the header.
    pub fn files(&self) -> impl Iterator<Item = &PlanFile> {
        self.program
            .iter()
            .chain(self.input.iter())
            .chain(self.harness.iter())
    }
}

/// What the init found at a command's results path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResultsSeen {
    Absent,
    Written(Vec<u8>),
    Refused(String),
}

/// A report line from the launcher side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// Setup failed at `mechanism`; nothing of the program ran.
    Fail { mechanism: String, detail: String },
    /// The program's process is confined and about to exec the runtime.
    Confined { landlock_abi: u32, landlock: String },
    /// The exec of the runtime failed with this errno; nothing of the program ran.
    ExecFailed { errno: i32 },
    /// The init saw the run hit `limit` (a word of the contract's `Limit`), as `detail` says.
    Hit { limit: String, detail: String },
    /// The results file the command left, once every other process of the run had ended.
    Results(ResultsSeen),
    /// The program's first process exited with this code.
    Exit { code: i32 },
    /// The program's first process was killed by this signal.
    Signal { signal: i32 },
    /// The launcher listens on the proxy's port in the run's network namespace; the
    /// listener's descriptor came with the line.
    Listening { port: u16 },
    /// The namespace's init was reaped (the whole pid namespace is gone), with the resource
    /// use of every reaped process of the run.
    Done {
        user_us: u64,
        system_us: u64,
        max_rss_kib: u64,
    },
}

impl Report {
    /// The report as one line (without the newline). Text fields have line breaks replaced.
    pub fn encode(&self) -> String {
        match self {
            Self::Fail { mechanism, detail } => format!(
                "fail {} {}",
                mechanism.replace(char::is_whitespace, "-"),
                detail.replace(['\n', '\r'], " ")
            ),
            Self::Confined {
                landlock_abi,
                landlock,
            } => format!("confined {landlock_abi} {landlock}"),
            Self::ExecFailed { errno } => format!("exec-failed {errno}"),
            Self::Listening { port } => format!("listening {port}"),
            Self::Results(ResultsSeen::Absent) => "results absent".to_owned(),
            Self::Results(ResultsSeen::Written(bytes)) => {
                format!("results written {}", hex::encode(bytes))
            }
            Self::Results(ResultsSeen::Refused(reason)) => {
                format!("results refused {}", reason.replace(['\n', '\r'], " "))
            }
            Self::Hit { limit, detail } => format!(
                "hit {} {}",
                limit.replace(char::is_whitespace, "-"),
                detail.replace(['\n', '\r'], " ")
            ),
            Self::Exit { code } => format!("exit {code}"),
            Self::Signal { signal } => format!("signal {signal}"),
            Self::Done {
                user_us,
                system_us,
                max_rss_kib,
            } => format!("done {user_us} {system_us} {max_rss_kib}"),
        }
    }

    /// Parses one line; `None` for anything else.
    pub fn parse(line: &str) -> Option<Self> {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let mut fields = rest.split(' ');
        let mut number = || fields.next()?.parse::<u64>().ok();
        Some(match word {
            "fail" => {
                let (mechanism, detail) = rest.split_once(' ').unwrap_or((rest, ""));
                Self::Fail {
                    mechanism: mechanism.to_owned(),
                    detail: detail.to_owned(),
                }
            }
            "confined" => {
                let (abi, status) = rest.split_once(' ')?;
                Self::Confined {
                    landlock_abi: abi.parse().ok()?,
                    landlock: status.to_owned(),
                }
            }
            "exec-failed" => Self::ExecFailed {
                errno: rest.parse().ok()?,
            },
            "listening" => Self::Listening {
                port: rest.parse().ok()?,
            },
            "hit" => {
                let (limit, detail) = rest.split_once(' ')?;
                Self::Hit {
                    limit: limit.to_owned(),
                    detail: detail.to_owned(),
                }
            }
            "results" => {
                let (state, rest) = rest.split_once(' ').unwrap_or((rest, ""));
                Self::Results(match state {
                    "absent" if rest.is_empty() => ResultsSeen::Absent,
                    "written" => ResultsSeen::Written(hex::decode(rest).ok()?),
                    "refused" => ResultsSeen::Refused(rest.to_owned()),
                    _ => return None,
                })
            }
            "exit" => Self::Exit {
                code: rest.parse().ok()?,
            },
            "signal" => Self::Signal {
                signal: rest.parse().ok()?,
            },
            "done" => Self::Done {
                user_us: number()?,
                system_us: number()?,
                max_rss_kib: number()?,
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        for report in [
            Report::Fail {
                mechanism: "user-namespace".into(),
                detail: "unshare: EPERM".into(),
            },
            Report::Confined {
                landlock_abi: 7,
                landlock: "fully-enforced".into(),
            },
            Report::ExecFailed { errno: 2 },
            Report::Results(ResultsSeen::Absent),
            Report::Results(ResultsSeen::Written(b"<x/>\n\0".to_vec())),
            Report::Results(ResultsSeen::Written(Vec::new())),
            Report::Results(ResultsSeen::Refused("a directory".into())),
            Report::Hit {
                limit: "file-size".into(),
                detail: "SIGXFSZ ended 2 processes".into(),
            },
            Report::Exit { code: -1 },
            Report::Signal { signal: 9 },
            Report::Done {
                user_us: 1,
                system_us: 2,
                max_rss_kib: 3,
            },
        ] {
            assert_eq!(Report::parse(&report.encode()), Some(report));
        }
        assert_eq!(Report::parse("bogus"), None);
        assert_eq!(Report::parse("exit x"), None);
        assert_eq!(Report::parse("hit memory"), None);
    }
}
