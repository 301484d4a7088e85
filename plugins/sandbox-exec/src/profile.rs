//! The confinement profile: the whole recipe besides the runtime's own paths, as canonical
//! JSON, and its digest. The launcher is handed exactly what this recipe says (the plan is
//! built from it), so the digest names what is enforced.

use std::path::Path;

use landlock::{ABI, Access, AccessFs, AccessNet, BitFlags, Scope};
use serde::{Deserialize, Serialize};
use sf_contracts::canonical::{self, Digest, Value};
use sf_contracts::{ExecutorError, ProfileDescription};

use crate::identity::IdRange;
use crate::plan::Resource;
use crate::runtime::DEVICES;
use crate::seccomp::{self, NamedFilter};

/// The protocol string of the profile's canonical document. Version 2 counts the launcher and
/// the init in the process rlimit, sets it above the control group's process bound (so that
/// the group's bound, whose hits are counted, is the one reached), and states which limits a
/// run's answer records as hit (`limitsRecorded`).
pub const PROFILE_PROTOCOL: &str = "sf-sandbox-profile/2";

/// Where the program's, the input's and the harness's files are, read-only, inside the
/// sandbox: where the Executor contract says they are.
pub use sf_contracts::{HARNESS_DIR, INPUT_DIR, PROGRAM_DIR};
/// The writable, size-capped scratch directory (also HOME and TMPDIR).
pub const SCRATCH_DIR: &str = "/sf/scratch";
/// The user and group id of the program inside its user namespace: not 0, so the program is
/// never root even inside.
pub const INSIDE_ID: u32 = 1000;
/// The host name inside the sandbox.
pub const HOSTNAME: &str = "sf-sandbox";
/// The directory the launcher builds the new root over, in its private mount namespace.
pub const STAGE: &str = "/tmp";
/// The size of the sandbox's root file system, which holds only directories and links.
pub const ROOT_TMPFS_OPTIONS: &str = "size=1m,nr_inodes=4096,mode=0755";
/// The options of the fresh /proc: only the sandbox's own processes, nothing of /proc/sys.
pub const PROC_OPTIONS: &str = "subset=pid";

/// The resource limits of a run (the defaults, and why, are in docs/sandbox.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// RLIMIT_CPU (seconds, per process): SIGXCPU at this, SIGKILL one second later.
    pub cpu_seconds: u64,
    /// RLIMIT_AS (bytes, per process).
    pub address_space_bytes: u64,
    /// RLIMIT_FSIZE (bytes, per file written).
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// The most processes and threads the program may have at once. The run's control group
    /// bounds them exactly (its `pids.max` is this plus the launcher and the init); without
    /// one, RLIMIT_NPROC does, which counts every thread of the sandbox's user in its user
    /// namespace and is set [`NPROC_ABOVE_GROUP`] above the group's bound, so that the
    /// group's bound is the one reached, and counted.
    pub processes: u64,
    /// The size of the scratch file system in bytes.
    pub scratch_bytes: u64,
    /// The most files and directories the scratch may hold.
    pub scratch_inodes: u64,
    /// The most memory the whole run may use at once (bytes): every process, and what they
    /// hold in tmpfs, memfd and shared memory. Enforced by the run's control group, where one
    /// can be made.
    #[serde(default = "default_memory_bytes")]
    pub memory_bytes: u64,
    /// The CPU time the whole run may use per second of wall-clock time, in percent of one
    /// CPU (200: two CPUs' worth). Enforced by the run's control group, where one can be made.
    #[serde(default = "default_cpu_percent")]
    pub cpu_percent: u64,
}

fn default_memory_bytes() -> u64 {
    Limits::default().memory_bytes
}

fn default_cpu_percent() -> u64 {
    Limits::default().cpu_percent
}

/// The defaults fit a real project's test suite (one that starts a hundred threads, a JIT
/// runtime that reserves gigabytes of address space, a scratch for caches and temporary
/// files); docs/sandbox.md says why each is what it is.
impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: 3600,
            address_space_bytes: 16 << 30,
            file_size_bytes: 512 << 20,
            open_files: 1024,
            processes: 1024,
            scratch_bytes: 512 << 20,
            scratch_inodes: 65536,
            memory_bytes: 2 << 30,
            cpu_percent: 200,
        }
    }
}

/// The processes besides the program's that a run's control group and its process rlimit
/// count: the launcher and the init.
pub const SANDBOX_PROCESSES: u64 = 2;

/// How far RLIMIT_NPROC is set above the control group's process bound. Both count the same
/// tasks (every one of the run is in the group and of the sandbox's user), and the kernel
/// checks the rlimit first: were they equal, a fork at the bound would fail on the rlimit,
/// which leaves no trace outside, and the group's `pids.events` would never count it. Above
/// it, the group's bound is the one reached and counted; without a group the rlimit holds
/// alone, this many processes later.
pub const NPROC_ABOVE_GROUP: u64 = 8;

/// How the network namespace is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetworkMode {
    /// A new, empty network namespace per run.
    New,
    /// One empty network namespace, made once by the Executor (root only) and owned by the
    /// initial user namespace, entered by each run: no run can configure it (it holds no
    /// capability there), its loopback stays down, and Landlock's abstract-socket scope keeps
    /// runs from reaching each other's abstract sockets. Saves the cost of making and
    /// destroying a network namespace per run.
    SharedEmpty,
}

/// The Landlock ABI the profile targets: every access right and scope of this ABI is
/// handled, and a kernel that cannot enforce them all is refused.
pub const LANDLOCK_ABI: ABI = ABI::V6;
/// [`LANDLOCK_ABI`] as a number.
pub const LANDLOCK_ABI_NUMBER: u32 = 6;

/// Access rights by name, in the order the recipe lists them.
const FS_RIGHTS: &[(&str, AccessFs)] = &[
    ("execute", AccessFs::Execute),
    ("write_file", AccessFs::WriteFile),
    ("read_file", AccessFs::ReadFile),
    ("read_dir", AccessFs::ReadDir),
    ("remove_dir", AccessFs::RemoveDir),
    ("remove_file", AccessFs::RemoveFile),
    ("make_char", AccessFs::MakeChar),
    ("make_dir", AccessFs::MakeDir),
    ("make_reg", AccessFs::MakeReg),
    ("make_sock", AccessFs::MakeSock),
    ("make_fifo", AccessFs::MakeFifo),
    ("make_block", AccessFs::MakeBlock),
    ("make_sym", AccessFs::MakeSym),
    ("refer", AccessFs::Refer),
    ("truncate", AccessFs::Truncate),
    ("ioctl_dev", AccessFs::IoctlDev),
];

/// The access a class of paths gets.
pub fn runtime_directory_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute
}

pub fn runtime_file_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::Execute
}

pub fn snapshot_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

pub fn scratch_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile
        | AccessFs::ReadDir
        | AccessFs::WriteFile
        | AccessFs::RemoveDir
        | AccessFs::RemoveFile
        | AccessFs::MakeDir
        | AccessFs::MakeReg
        | AccessFs::MakeSock
        | AccessFs::MakeFifo
        | AccessFs::MakeSym
        | AccessFs::Refer
        | AccessFs::Truncate
}

pub fn device_access(device: &str) -> BitFlags<AccessFs> {
    if device == "/dev/null" {
        AccessFs::ReadFile | AccessFs::WriteFile
    } else {
        AccessFs::ReadFile.into()
    }
}

pub fn proc_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

pub fn handled_fs() -> BitFlags<AccessFs> {
    AccessFs::from_all(LANDLOCK_ABI)
}

pub fn handled_net() -> BitFlags<AccessNet> {
    AccessNet::from_all(LANDLOCK_ABI)
}

pub fn scopes() -> BitFlags<Scope> {
    Scope::from_all(LANDLOCK_ABI)
}

fn names(access: BitFlags<AccessFs>) -> Value {
    Value::Array(
        FS_RIGHTS
            .iter()
            .filter(|(_, right)| access.contains(*right))
            .map(|(name, _)| Value::from(*name))
            .collect(),
    )
}

fn strings(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|item| Value::from(*item)).collect())
}

/// The names `name` picks out of `items`, in their order.
fn listed<T>(items: &[T], name: impl Fn(&T) -> Option<&'static str>) -> Value {
    Value::Array(items.iter().filter_map(name).map(Value::from).collect())
}

fn integer(value: u64) -> Value {
    Value::Integer(
        i64::try_from(value)
            .unwrap_or(canonical::MAX_SAFE_INTEGER)
            .min(canonical::MAX_SAFE_INTEGER),
    )
}

/// The fixed environment of every program.
pub fn environment() -> Vec<(&'static str, &'static str)> {
    vec![
        ("HOME", SCRATCH_DIR),
        ("LANG", "C.UTF-8"),
        ("PATH", "/usr/bin:/bin"),
        ("TMPDIR", SCRATCH_DIR),
    ]
}

/// Everything the profile fixes.
#[derive(Clone, Debug)]
pub struct Profile {
    pub limits: Limits,
    pub network: NetworkMode,
    /// The host ids sandboxes run as when sf is root.
    pub ids: IdRange,
    pub filters: Vec<NamedFilter>,
    pub description: ProfileDescription,
}

impl Profile {
    /// Builds and digests the profile.
    pub fn new(
        limits: Limits,
        network: NetworkMode,
        ids: IdRange,
        require_cgroup: bool,
    ) -> Result<Self, ExecutorError> {
        check_limits(&limits)?;
        let filters = seccomp::filters().map_err(|error| ExecutorError::Unavailable {
            mechanism: "seccomp".to_owned(),
            reason: format!("the filters did not compile: {error}"),
        })?;
        let recipe = recipe(&limits, network, ids, require_cgroup, &filters);
        let recipe = canonical::encode(&recipe).map_err(|error| ExecutorError::Unavailable {
            mechanism: "profile".to_owned(),
            reason: format!("the recipe did not encode: {error}"),
        })?;
        let digest = Digest::of(&recipe);
        Ok(Self {
            limits,
            network,
            ids,
            filters,
            description: ProfileDescription { recipe, digest },
        })
    }
}

/// The stack a program gets (the usual default).
const STACK_BYTES: u64 = 8 << 20;
/// The memory a program may lock.
const LOCKED_BYTES: u64 = 64 << 10;
/// The signals that may be queued for the sandbox's user.
const PENDING_SIGNALS: u64 = 1024;

/// Every resource limit the program's process sets, soft and hard: all of the kernel's, so
/// that none is inherited from whoever started sf.
pub fn rlimits(limits: &Limits) -> Vec<(Resource, u64, u64)> {
    let same = |resource, value| (resource, value, value);
    vec![
        (
            Resource::Cpu,
            limits.cpu_seconds,
            limits.cpu_seconds.saturating_add(1),
        ),
        same(Resource::AddressSpace, limits.address_space_bytes),
        same(Resource::Data, limits.address_space_bytes),
        same(Resource::Stack, STACK_BYTES.min(limits.address_space_bytes)),
        same(Resource::Rss, limits.address_space_bytes),
        same(Resource::FileSize, limits.file_size_bytes),
        same(Resource::OpenFiles, limits.open_files),
        same(
            Resource::Processes,
            group_processes(limits).saturating_add(NPROC_ABOVE_GROUP),
        ),
        same(Resource::Core, 0),
        same(Resource::MemoryLock, LOCKED_BYTES),
        same(Resource::FileLocks, limits.open_files),
        same(Resource::PendingSignals, PENDING_SIGNALS),
        // No POSIX message queue can be made; no priority above the default, no real time.
        same(Resource::MessageQueue, 0),
        same(Resource::Nice, 0),
        same(Resource::RealtimePriority, 0),
        same(Resource::RealtimeTime, 0),
    ]
}

/// Checks that this process's hard limits let the program's process set the profile's:
/// a hard limit can only be lowered from inside the sandbox, so one below the profile's (set
/// by whoever started sf) would fail every run. Refused here, naming the limit, before
/// anything starts.
pub fn check_ceilings(limits: &Limits) -> Result<(), ExecutorError> {
    for (resource, _, hard) in rlimits(limits) {
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit of this process into a valid struct.
        if unsafe { libc::getrlimit(resource.number(), &mut current) } != 0 {
            continue;
        }
        if current.rlim_max != libc::RLIM_INFINITY && current.rlim_max < hard {
            return Err(ExecutorError::Unavailable {
                mechanism: "rlimits".to_owned(),
                reason: format!(
                    "the profile sets {} to {hard}, above the hard limit {} this process was \
                     started with, which the sandbox cannot raise; start sf with a higher \
                     limit or configure a lower one",
                    resource.name(),
                    current.rlim_max
                ),
            });
        }
    }
    Ok(())
}

/// The bounds of a run's control group.
pub fn group_bounds(limits: &Limits) -> crate::cgroup::Bounds {
    crate::cgroup::Bounds {
        memory_bytes: limits.memory_bytes,
        processes: group_processes(limits),
        cpu_percent: limits.cpu_percent,
    }
}

/// The control group's process bound: the program's processes and the launcher and the init.
fn group_processes(limits: &Limits) -> u64 {
    limits.processes.saturating_add(SANDBOX_PROCESSES)
}

fn check_limits(limits: &Limits) -> Result<(), ExecutorError> {
    let positive = [
        ("cpu_seconds", limits.cpu_seconds),
        ("address_space_bytes", limits.address_space_bytes),
        ("file_size_bytes", limits.file_size_bytes),
        ("open_files", limits.open_files),
        ("processes", limits.processes),
        ("scratch_bytes", limits.scratch_bytes),
        ("scratch_inodes", limits.scratch_inodes),
        ("memory_bytes", limits.memory_bytes),
        ("cpu_percent", limits.cpu_percent),
    ];
    for (name, value) in positive {
        if value == 0 || value > canonical::MAX_SAFE_INTEGER as u64 {
            return Err(ExecutorError::InvalidInput {
                input: format!("limit {name} = {value}"),
                rule: "every limit is positive and at most 2^53 - 1",
            });
        }
    }
    if limits.open_files < 16 || limits.processes < 4 {
        return Err(ExecutorError::InvalidInput {
            input: format!(
                "open_files {} / processes {}",
                limits.open_files, limits.processes
            ),
            rule: "a sandbox needs at least 16 open files and 4 processes to start",
        });
    }
    Ok(())
}

/// The profile's canonical document, one part of the confinement at a time. The parts name
/// disjoint keys and the encoding sorts them, so which part writes a key changes nothing in
/// the bytes.
fn recipe(
    limits: &Limits,
    network: NetworkMode,
    ids: IdRange,
    require_cgroup: bool,
    filters: &[NamedFilter],
) -> Value {
    let parts = [
        vec![("protocol", Value::from(PROFILE_PROTOCOL))],
        namespaces_recipe(network, ids),
        file_system_recipe(limits),
        privileges_recipe(filters),
        resources_recipe(limits, require_cgroup),
        process_recipe(),
    ];
    Value::Object(
        parts
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.to_owned(), value))
            .collect(),
    )
}

/// The namespaces a run gets and who it is in them: what separates it from the host's
/// processes, network, users and host name.
fn namespaces_recipe(network: NetworkMode, ids: IdRange) -> Vec<(&'static str, Value)> {
    vec![
        (
            "namespaces",
            strings(&["user", "mount", "pid", "network", "ipc", "uts", "cgroup"]),
        ),
        (
            "network",
            Value::from(match network {
                NetworkMode::New => "new-empty",
                NetworkMode::SharedEmpty => "shared-empty-owned-by-initial-user-namespace",
            }),
        ),
        ("identity", identity_recipe(ids)),
        ("hostname", Value::from(HOSTNAME)),
    ]
}

/// The ids inside and outside the user namespace: the program is never root inside, and,
/// when sf is root, each sandbox is a uid of its own outside.
fn identity_recipe(ids: IdRange) -> Value {
    canonical::object([
        ("insideUid", integer(u64::from(INSIDE_ID))),
        ("insideGid", integer(u64::from(INSIDE_ID))),
        (
            "outsideWhenRoot",
            canonical::object([
                ("firstId", integer(u64::from(ids.first))),
                ("count", integer(u64::from(ids.count))),
                (
                    "use",
                    Value::from("one id of the range per sandbox, as uid and gid"),
                ),
            ]),
        ),
        ("outsideOtherwise", Value::from("the caller's uid and gid")),
        (
            "userNamespaceOwner",
            Value::from("the sandbox's outside uid"),
        ),
        ("forkServer", Value::from("the caller's uid, undumpable")),
        ("setgroups", Value::from("deny")),
    ])
}

/// The file system the program sees: a new root of its own, and nothing of the host's but
/// what is mounted into it.
fn file_system_recipe(limits: &Limits) -> Vec<(&'static str, Value)> {
    vec![
        ("mountPropagation", Value::from("private, recursive")),
        ("mounts", mounts_recipe(limits)),
        ("pivotRoot", Value::from("old root detached")),
    ]
}

/// Every mount of the new root, in the order the launcher makes them.
fn mounts_recipe(limits: &Limits) -> Value {
    let snapshot_flags = ["ro", "nosuid", "nodev", "noexec"];
    let mut mounts = vec![
        canonical::object([
            ("target", Value::from("/")),
            ("type", Value::from("tmpfs")),
            ("options", Value::from(ROOT_TMPFS_OPTIONS)),
            ("flags", strings(&["ro", "nosuid", "nodev"])),
            ("builtOver", Value::from(STAGE)),
        ]),
        bind_recipe("<each runtime path>", &["ro", "nosuid", "nodev"]),
    ];
    mounts.extend(
        DEVICES
            .iter()
            .map(|device| bind_recipe(device, &["ro", "nosuid", "noexec"])),
    );
    mounts.push(canonical::object([
        ("target", Value::from("/proc")),
        ("type", Value::from("proc")),
        ("options", Value::from(PROC_OPTIONS)),
        ("flags", strings(&["ro", "nosuid", "nodev", "noexec"])),
    ]));
    for (target, options) in [
        (PROGRAM_DIR, "sized to the program"),
        (INPUT_DIR, "sized to the input"),
        (HARNESS_DIR, "sized to the harness"),
    ] {
        mounts.push(tmpfs_recipe(target, options.to_owned(), &snapshot_flags));
    }
    mounts.push(tmpfs_recipe(
        SCRATCH_DIR,
        scratch_options(limits),
        &["nosuid", "nodev", "noexec"],
    ));
    Value::Array(mounts)
}

/// A recursive bind mount of a host path whose device and inode are checked against the
/// configuration, so that a path replaced after it was configured is refused.
fn bind_recipe(target: &str, flags: &[&str]) -> Value {
    canonical::object([
        ("target", Value::from(target)),
        ("type", Value::from("bind")),
        ("recursive", Value::Bool(true)),
        ("flags", strings(flags)),
        (
            "checkedIdentity",
            Value::from("device and inode as configured"),
        ),
    ])
}

/// A tmpfs mount, which holds only what the launcher copies into it, within its options.
fn tmpfs_recipe(target: &str, options: String, flags: &[&str]) -> Value {
    canonical::object([
        ("target", Value::from(target)),
        ("type", Value::from("tmpfs")),
        ("options", Value::from(options)),
        ("flags", strings(flags)),
    ])
}

/// What the program may do once it runs: no capability, no privilege gained through exec,
/// Landlock's rules over the file system and network, and the seccomp filters.
fn privileges_recipe(filters: &[NamedFilter]) -> Vec<(&'static str, Value)> {
    vec![
        (
            "capabilities",
            Value::from(
                "none: bounding set and ambient cleared, securebits locked, effective, \
                 permitted and inheritable empty",
            ),
        ),
        ("noNewPrivileges", Value::Bool(true)),
        ("enforces", crate::enforcement::profile_enforces()),
        ("landlock", landlock_recipe()),
        ("seccomp", seccomp_recipe(filters)),
    ]
}

/// The Landlock ruleset: every right of [`LANDLOCK_ABI`] handled, so that whatever no rule
/// grants is denied, even where a mount would allow it.
fn landlock_recipe() -> Value {
    let net_rights = [
        ("bind_tcp", AccessNet::BindTcp),
        ("connect_tcp", AccessNet::ConnectTcp),
    ];
    let scope_names = [
        ("abstract_unix_socket", Scope::AbstractUnixSocket),
        ("signal", Scope::Signal),
    ];
    canonical::object([
        ("abi", integer(u64::from(LANDLOCK_ABI_NUMBER))),
        ("requirement", Value::from("fully-enforced")),
        ("handledFs", names(handled_fs())),
        (
            "handledNet",
            listed(&net_rights, |(name, right)| {
                handled_net().contains(*right).then_some(*name)
            }),
        ),
        (
            "scopes",
            listed(&scope_names, |(name, scope)| {
                scopes().contains(*scope).then_some(*name)
            }),
        ),
        ("rules", landlock_rules_recipe()),
    ])
}

/// The access each class of path is granted: the runtime's files, the snapshots, the scratch,
/// /proc and each device.
fn landlock_rules_recipe() -> Value {
    let mut rules = vec![
        canonical::object([
            ("path", Value::from("<each runtime directory>")),
            ("access", names(runtime_directory_access())),
        ]),
        canonical::object([
            ("path", Value::from("<each runtime file>")),
            ("access", names(runtime_file_access())),
        ]),
    ];
    for (path, access) in [
        (PROGRAM_DIR, snapshot_access()),
        (INPUT_DIR, snapshot_access()),
        (HARNESS_DIR, snapshot_access()),
        (SCRATCH_DIR, scratch_access()),
        ("/proc", proc_access()),
    ] {
        rules.push(canonical::object([
            ("path", Value::from(path)),
            ("access", names(access)),
        ]));
    }
    for device in DEVICES {
        rules.push(canonical::object([
            ("path", Value::from(*device)),
            ("access", names(device_access(device))),
        ]));
    }
    Value::Array(rules)
}

/// The seccomp filters as installed (their BPF, so the digest names the very programs), and
/// what they deny, by name, for a reader.
fn seccomp_recipe(filters: &[NamedFilter]) -> Value {
    let first = |&(name, _): &(&'static str, u64)| Some(name);
    canonical::object([
        (
            "filters",
            Value::Array(
                filters
                    .iter()
                    .map(|filter| {
                        canonical::object([
                            ("name", Value::from(filter.name)),
                            ("bpf", Value::from(filter.hex())),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("deniedCalls", strings(&seccomp::denied_names())),
        (
            "cloneDeniedFlags",
            listed(seccomp::CLONE_NAMESPACE_FLAGS, first),
        ),
        ("ioctlDenied", listed(seccomp::DENIED_IOCTLS, first)),
        (
            "socketFamiliesAllowed",
            listed(seccomp::ALLOWED_FAMILIES, first),
        ),
        (
            "socketProtocolsAllowed",
            listed(seccomp::ALLOWED_PROTOCOLS, first),
        ),
        (
            "fastOpenDenied",
            listed(seccomp::FAST_OPEN_CALLS, |(name, _, _)| Some(*name)),
        ),
        (
            "aboveHighestReviewed",
            canonical::object([
                ("highest", integer(u64::from(seccomp::HIGHEST_REVIEWED))),
                ("action", Value::from("ENOSYS")),
            ]),
        ),
        ("clone3", Value::from("ENOSYS")),
        ("foreignArchitecture", Value::from("kill-process")),
        ("x32", Value::from("kill-process")),
    ])
}

/// How much of the machine a run may take: per-process rlimits, the run's control group, and
/// which limits its answer records as hit.
fn resources_recipe(limits: &Limits, require_cgroup: bool) -> Vec<(&'static str, Value)> {
    let rlimits = Value::Object(
        rlimits(limits)
            .into_iter()
            .map(|(resource, soft, hard)| {
                (
                    resource.name().to_owned(),
                    canonical::object([("soft", integer(soft)), ("hard", integer(hard))]),
                )
            })
            .collect(),
    );
    vec![
        ("rlimits", rlimits),
        ("controlGroup", control_group_recipe(limits, require_cgroup)),
        ("limitsRecorded", limits_recorded()),
        (
            "oomScoreAdjustment",
            Value::from("1000 for the program's processes: the group's OOM kills them first"),
        ),
        (
            "scheduling",
            Value::from("SCHED_OTHER; the niceness sf runs with, never lowered"),
        ),
    ]
}

/// The run's control group: the bounds on the whole run (every process, and what they hold
/// in memory), and what happens where no group can be made.
fn control_group_recipe(limits: &Limits, require_cgroup: bool) -> Value {
    let bounds = group_bounds(limits);
    canonical::object([
        ("memoryBytes", integer(bounds.memory_bytes)),
        ("processes", integer(bounds.processes)),
        ("cpuPercent", integer(bounds.cpu_percent)),
        ("swap", integer(0)),
        (
            "hierarchy",
            Value::from("cgroup v2 where sf's group offers the memory controller, else v1 as root"),
        ),
        (
            "whenUnavailable",
            Value::from(if require_cgroup {
                "the run fails (unavailable)"
            } else {
                "per-process limits only, stated in the answer"
            }),
        ),
    ])
}

/// How the program's process starts and ends: its environment, directory, arguments, file
/// descriptors and signals, and how its processes are ended together.
fn process_recipe() -> Vec<(&'static str, Value)> {
    let environment = Value::Object(
        environment()
            .into_iter()
            .map(|(key, value)| (key.to_owned(), Value::from(value)))
            .collect(),
    );
    vec![
        ("environment", environment),
        ("workingDirectory", Value::from(PROGRAM_DIR)),
        (
            "argv",
            strings(&["<runtime executable>", "/sf/program/<entry>", "<args>…"]),
        ),
        (
            "fileDescriptors",
            Value::from("0 /dev/null, 1 stdout pipe, 2 stderr pipe; every other one closed"),
        ),
        (
            "signals",
            Value::from("every disposition default, none blocked"),
        ),
        (
            "processes",
            Value::from(
                "the namespace's init reaps; when the program ends, or on timeout, output \
                 limit or cancellation, the init dies and the kernel kills the whole pid \
                 namespace",
            ),
        ),
    ]
}

/// Which limits a run's answer records as hit, and from what (the launcher's reports and the
/// run's control group: [`crate::limits`]).
fn limits_recorded() -> Value {
    canonical::object([
        (
            "processes",
            Value::from("the run's group's pids.events max; not recorded without a group"),
        ),
        (
            "memory",
            Value::from(
                "the run's group's OOM kills (v1 memory.oom_control oom_kill and under_oom, \
                 v2 memory.events oom and oom_kill); not recorded without a group",
            ),
        ),
        (
            "file-size",
            Value::from("SIGXFSZ ending a process the init reaps"),
        ),
        (
            "cpu-time",
            Value::from(
                "SIGXCPU, or SIGKILL after the CPU rlimit's time, ending a process the init \
                 reaps",
            ),
        ),
        ("open-files", Value::from("not recorded")),
        (
            "scratch",
            Value::from("no free block when the program's first process ends"),
        ),
        (
            "scratch-files",
            Value::from("no free inode when the program's first process ends"),
        ),
    ])
}

/// The scratch tmpfs options.
pub fn scratch_options(limits: &Limits) -> String {
    format!(
        "size={},nr_inodes={},mode=0700",
        limits.scratch_bytes, limits.scratch_inodes
    )
}

/// Whether `path` is one of the sandbox's fixed paths (a runtime path may not be).
pub fn is_reserved(path: &Path) -> bool {
    ["/sf", "/proc", "/dev"]
        .iter()
        .any(|reserved| path.starts_with(reserved))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_covers_limits_and_mode() {
        let ids = IdRange::default();
        let base = Profile::new(Limits::default(), NetworkMode::New, ids, false).unwrap();
        let same = Profile::new(Limits::default(), NetworkMode::New, ids, false).unwrap();
        assert_eq!(base.description, same.description);
        let limits = Limits {
            open_files: 300,
            ..Limits::default()
        };
        let other = Profile::new(limits, NetworkMode::New, ids, false).unwrap();
        assert_ne!(base.description.digest, other.description.digest);
        let shared = Profile::new(Limits::default(), NetworkMode::SharedEmpty, ids, false).unwrap();
        assert_ne!(base.description.digest, shared.description.digest);
        let required = Profile::new(Limits::default(), NetworkMode::New, ids, true).unwrap();
        assert_ne!(base.description.digest, required.description.digest);
        let memory = Limits {
            memory_bytes: 1 << 30,
            ..Limits::default()
        };
        let memory = Profile::new(memory, NetworkMode::New, ids, false).unwrap();
        assert_ne!(base.description.digest, memory.description.digest);
        let other_ids = IdRange {
            first: 300_000,
            count: 10,
        };
        let other_ids =
            Profile::new(Limits::default(), NetworkMode::New, other_ids, false).unwrap();
        assert_ne!(base.description.digest, other_ids.description.digest);
        let text = String::from_utf8(base.description.recipe).unwrap();
        assert!(text.contains("\"bpf\""), "{text}");
    }
}
