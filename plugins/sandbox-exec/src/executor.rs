//! The configured Executor: one runtime, one profile, one launcher.

use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sf_contracts::executor::ProgramTree;
use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::{
    CancelToken, Executor, ExecutorError, ProfileDescription, RequestDigests, RunAnswer,
    RunCommand, RunEnvironment, RunIdentities, RunRequest, RunResources, RuntimeDescription,
};

use crate::cgroup::{Cleaner, Hierarchy, RunGroup};
use crate::identity::{IdRange, Ids};
use crate::plan::{
    Binds, CommandPlan, EnvironmentBind, LandlockPlan, LandlockRule, PLAN_PROTOCOL, Plan,
    PlanEntryKind, PlanFile, RootEntry, RootEntryKind, RunPlan, TreeBind,
};
use crate::prepare::Preparer;
use crate::profile::{
    self, HARNESS_DIR, HOSTNAME, INPUT_DIR, INSIDE_ID, LANDLOCK_ABI_NUMBER, Limits, NetworkMode,
    PROC_OPTIONS, PROGRAM_DIR, Profile, ROOT_TMPFS_OPTIONS, SCRATCH_DIR, STAGE,
};
use crate::runtime::{BindSource, Runtime, RuntimeConfig, device_sources};
use crate::seccomp::NamedFilter;
use crate::supervisor::{Launch, Ran, Resources, Source, Start, Started, start, supervise};
use crate::zygote::{FirstLauncher, ForkServer};

/// The file name of the launcher program built by this crate.
pub const LAUNCHER_NAME: &str = "sf-sandbox-launcher";

/// How the sandbox-exec Executor is configured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxConfig {
    /// The runtime every run uses.
    pub runtime: RuntimeConfig,
    /// The bounds of every run besides its timeout and output limits.
    #[serde(default)]
    pub limits: Limits,
    /// The launcher program. `None`: `sf-sandbox-launcher` in the directory of the current
    /// executable, else in its parent directory (where Cargo puts binaries relative to test
    /// and example executables).
    #[serde(default)]
    pub launcher: Option<PathBuf>,
    /// The host ids (uid and gid) the sandboxes run as when sf runs as root, one of its own
    /// per sandbox: a range no other software uses (checked against the system's user, group
    /// and subordinate-id files). Default [`crate::DEFAULT_IDS`].
    #[serde(default)]
    pub ids_when_root: IdRange,
    /// How the network namespace is made. `None`: one shared empty namespace when sf runs as
    /// root (cheaper), a new one per run otherwise (the only way without privilege).
    #[serde(default)]
    pub network: Option<NetworkMode>,
    /// Whether sandboxes are built ahead of the runs that use them (the default): from an
    /// Executor's second run on, the next run's sandbox is built after each run, and a run
    /// then only adds its own files and starts. Every sandbox still serves exactly one run.
    /// Without it, each run builds its sandbox when it starts.
    #[serde(default = "default_prepare_ahead")]
    pub prepare_ahead: bool,
    /// Whether every run must be bounded as a whole by a control group: when none can be
    /// made, runs fail with `unavailable` (mechanism `cgroup`) instead of running with the
    /// per-process limits only.
    #[serde(default)]
    pub require_cgroup: bool,
    /// The most memory all of this Executor's runs may use together (bytes), bounded by the
    /// collection group its runs' groups are made in; `None`: three quarters of the machine's
    /// memory, and never less than one run's bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_memory_bytes: Option<u64>,
    /// Whether runs may overlap where no control group can bound them together (their memory
    /// then has no total): off by default, so that such an Executor runs one at a time.
    #[serde(default)]
    pub parallel_runs_without_cgroup: bool,
}

fn default_prepare_ahead() -> bool {
    true
}

impl SandboxConfig {
    /// The defaults for `runtime`.
    pub fn new(runtime: RuntimeConfig) -> Self {
        Self {
            runtime,
            limits: Limits::default(),
            launcher: None,
            ids_when_root: IdRange::default(),
            network: None,
            prepare_ahead: true,
            require_cgroup: false,
            total_memory_bytes: None,
            parallel_runs_without_cgroup: false,
        }
    }

    /// The total memory bound of all runs together: the configured one, which may not be
    /// below one run's bound, or the default.
    fn total_memory(&self) -> Result<u64, ExecutorError> {
        let one_run = self.limits.memory_bytes;
        match self.total_memory_bytes {
            Some(total) if total < one_run => Err(ExecutorError::Unavailable {
                mechanism: "cgroup".to_owned(),
                reason: format!(
                    "total_memory_bytes = {total} is below one run's memory bound ({one_run}): \
                     every run could be stopped by the total before its own bound; raise it \
                     or lower [executor.limits] memory_bytes"
                ),
            }),
            Some(total) => Ok(total),
            None => Ok(machine_memory().map_or(one_run, |memory| (memory / 4 * 3).max(one_run))),
        }
    }
}

/// The machine's memory (`MemTotal` of /proc/meminfo) in bytes, if it can be read.
fn machine_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Where a run's sandbox came from.
enum Sandbox {
    /// Built ahead of the run.
    Prepared,
    /// Started for the run.
    New,
}

/// Runs programs confined (see the crate documentation).
#[derive(Debug)]
pub struct SandboxExecutor {
    runtime: Runtime,
    profile: Profile,
    launcher: PathBuf,
    /// The fork server (the long-lived launcher that forks one launcher per run, started by
    /// the first run) and the sandbox prepared ahead of the next run.
    preparer: Preparer,
    /// Whether runs may overlap (without a control group, only when the operator says so).
    overlap: crate::overlap::Overlap,
}

fn invalid(input: String, rule: &'static str) -> ExecutorError {
    ExecutorError::InvalidInput { input, rule }
}

impl SandboxExecutor {
    /// Finds and checks the launcher and starts the one the first run will use (it waits,
    /// holding nothing, until that run or the Executor's drop, which ends it), in the shared
    /// network mode starts making the empty network namespace, then resolves the runtime and
    /// compiles the profile. Runs no program.
    pub fn new(config: SandboxConfig) -> Result<Self, ExecutorError> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let network = match config.network {
            Some(mode) => mode,
            None if root => NetworkMode::SharedEmpty,
            None => NetworkMode::New,
        };
        // The first run's launcher starts before anything else is checked, so that its exec
        // and start-up overlap the whole set-up and whatever comes before the run; the kernel
        // makes the network namespace meanwhile too (on a thread of its own, the namespace's
        // only member), waited for at the end. Both hold nothing of a run: should a check
        // below refuse the configuration, dropping them ends the launcher and closes the
        // namespace. A launcher that cannot be found is reported after the other checks, as
        // it always was.
        let found = find_launcher(config.launcher.as_deref());
        let first = found
            .as_ref()
            .ok()
            .and_then(|launcher| FirstLauncher::start(launcher.clone()));
        let making_network = match network {
            NetworkMode::SharedEmpty => Some(make_empty_network_namespace()),
            NetworkMode::New => None,
        };
        if root {
            config.ids_when_root.check()?;
            config.ids_when_root.check_unused()?;
        }
        let runtime = Runtime::new(config.runtime.clone(), root)?;
        check_runtime_paths(&runtime)?;
        let profile = Profile::new(
            config.limits,
            network,
            config.ids_when_root,
            config.require_cgroup,
        )?;
        profile::check_ceilings(&profile.limits)?;
        let launcher = found?;
        let devices = device_sources()?;
        let plan = Self::plan(&runtime, &profile, &devices, making_network.is_some())?;
        let bounds = profile::group_bounds(&profile.limits);
        let total = config.total_memory()?;
        let (hierarchy, spare) = find_hierarchy(&bounds, total, config.require_cgroup)?;
        let overlap =
            crate::overlap::Overlap::new(hierarchy.is_ok(), config.parallel_runs_without_cgroup);
        let shared = making_network.map(empty_network_namespace).transpose()?;
        let source = Source {
            server: ForkServer::new(launcher.clone(), shared, first),
            plan,
            ids: root.then(|| Ids::new(config.ids_when_root)),
            resources: Resources {
                spare: std::sync::Mutex::new(spare),
                bounds,
                required: config.require_cgroup,
                cleaner: Cleaner::new(),
                hierarchy,
            },
        };
        Ok(Self {
            runtime,
            profile,
            preparer: Preparer::new(source, config.prepare_ahead),
            launcher,
            overlap,
        })
    }

    /// Which kind of control group bounds each run (`None`: none can be made here; the
    /// per-process limits still hold).
    pub fn control_groups(&self) -> Option<&'static str> {
        self.preparer
            .shared
            .source
            .resources
            .hierarchy
            .as_ref()
            .ok()
            .map(|hierarchy| match hierarchy.version {
                crate::cgroup::Version::V1 => "v1",
                crate::cgroup::Version::V2 => "v2",
            })
    }

    /// The launcher program this Executor starts.
    pub fn launcher(&self) -> &Path {
        &self.launcher
    }

    /// The host pid of this Executor's fork server (the long-lived launcher that forks one
    /// launcher per run), if it is running: it starts with the first run, is restarted by the
    /// next run if it died, and exits when the Executor is dropped. For tests and diagnostics.
    pub fn fork_server_pid(&self) -> Option<u32> {
        self.preparer.shared.source.server.pid()
    }

    /// Whether a sandbox is prepared and waiting for the next run. For tests and
    /// diagnostics.
    pub fn has_prepared_sandbox(&self) -> bool {
        self.preparer.is_ready()
    }

    /// The runtime as configured.
    pub fn runtime_config(&self) -> &RuntimeConfig {
        self.runtime.config()
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.profile.limits
    }

    /// How each run's network namespace is made.
    pub fn network(&self) -> NetworkMode {
        self.profile.network
    }

    /// The plan of every sandbox of this Executor (everything but one run's program, input
    /// and arguments).
    fn plan(
        runtime: &Runtime,
        profile: &Profile,
        devices: &std::collections::BTreeMap<PathBuf, BindSource>,
        join_network: bool,
    ) -> Result<Plan, ExecutorError> {
        let rules = landlock_rules(runtime, devices)?;
        let limits = &profile.limits;
        let executable = crate::runtime::path_text(&runtime.config().executable)?;
        Ok(Plan {
            protocol: PLAN_PROTOCOL,
            outside_id_when_root: profile.ids.first,
            inside_id: INSIDE_ID,
            join_network,
            hostname: HOSTNAME.to_owned(),
            stage: STAGE.to_owned(),
            root_tmpfs_options: ROOT_TMPFS_OPTIONS.to_owned(),
            layout: runtime.layout().clone(),
            devices: devices.clone(),
            proc_options: PROC_OPTIONS.to_owned(),
            program_dir: PROGRAM_DIR.to_owned(),
            input_dir: INPUT_DIR.to_owned(),
            harness_dir: HARNESS_DIR.to_owned(),
            scratch_dir: SCRATCH_DIR.to_owned(),
            scratch_options: profile::scratch_options(limits),
            landlock: LandlockPlan {
                abi: LANDLOCK_ABI_NUMBER,
                handled_fs: profile::handled_fs().bits(),
                handled_net: profile::handled_net().bits(),
                scopes: profile::scopes().bits(),
                rules,
                ports: Vec::new(),
            },
            seccomp: profile.filters.iter().map(NamedFilter::hex).collect(),
            rlimits: profile::rlimits(limits),
            environment: profile::environment()
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .collect(),
            cwd: PROGRAM_DIR.to_owned(),
            executable,
            dependencies: None,
            program_tree: None,
            output: None,
            proxy_port: None,
        })
    }

    /// One run's part of the plan.
    fn run_plan(&self, request: &RunRequest) -> Result<RunPlan, ExecutorError> {
        let (argv, command) = match &request.command {
            Some(command) => (
                command.argv.clone(),
                Some(CommandPlan {
                    candidates: command.program_candidates(),
                    cwd: command.cwd.clone(),
                    environment: command.full_env(),
                    results: command
                        .results
                        .as_ref()
                        .map(|results| (results.path.clone(), results.max_bytes)),
                }),
            ),
            None => {
                let executable = crate::runtime::path_text(&self.runtime.config().executable)?;
                let mut argv = vec![executable, request.entry.inside()];
                argv.extend(request.args.iter().cloned());
                (argv, None)
            }
        };
        Ok(RunPlan {
            scratch_options: None,
            scratch_executable: request
                .command
                .as_ref()
                .is_some_and(|command| command.scratch_executable),
            cpu_seconds: request
                .command
                .as_ref()
                .and_then(|command| command.resources.cpu_seconds),
            command,
            program_options: match &request.program_tree {
                // Room for the whiteouts too: at most one per deletion.
                Some(tree) => tmpfs_options(&tree.layer, tree.deleted.len()),
                None => snapshot_tmpfs_options(&request.program),
            },
            input_options: snapshot_tmpfs_options(&request.input),
            harness_options: snapshot_tmpfs_options(&request.harness),
            program: match &request.program_tree {
                Some(tree) => layer_files(tree)?,
                None => plan_files(&request.program),
            },
            input: plan_files(&request.input),
            harness: plan_files(&request.harness),
            argv,
        })
    }

    /// A started launcher for a run: the prepared one when there is one, its launcher and the
    /// fork server still run, and the runtime's files are still the configured ones (a
    /// prepared sandbox holds the files it cloned); else a new one, started `how`.
    fn take_sandbox(&self, binds: &Binds, how: Start) -> Result<(Started, Sandbox), ExecutorError> {
        let prepared = self.preparer.take(binds);
        let usable = prepared.is_some()
            && self.runtime.binds_as_configured()
            && self.preparer.shared.source.server.is_running();
        match prepared {
            Some(started) if usable && started.is_alive() => Ok((started, Sandbox::Prepared)),
            // A sandbox prepared from files that changed since is dropped unused; a new
            // launcher checks the files again and refuses them as it always does. One whose
            // launcher ended is replaced too (a failure to build it shows again, in this run).
            _ => Ok((self.start_sandbox(binds, how)?, Sandbox::New)),
        }
    }

    /// A launcher started now, `how`, for a run that waits for it.
    fn start_sandbox(&self, binds: &Binds, how: Start) -> Result<Started, ExecutorError> {
        start(&self.preparer.shared.source, binds, how)
    }

    /// The limits of a run that asks for `resources`: the profile's, each bound the run asks
    /// for put in its place. A bound above the profile's is refused: a run may ask for less
    /// than the sandbox allows, never more.
    fn limits_for(&self, resources: &RunResources) -> Result<Limits, ExecutorError> {
        let mut limits = self.profile.limits;
        for (name, asked, limit) in [
            ("memory", resources.memory_bytes, &mut limits.memory_bytes),
            ("processes", resources.processes, &mut limits.processes),
            (
                "CPU seconds",
                resources.cpu_seconds,
                &mut limits.cpu_seconds,
            ),
            (
                "scratch bytes",
                resources.scratch_bytes,
                &mut limits.scratch_bytes,
            ),
            (
                "scratch files",
                resources.scratch_files,
                &mut limits.scratch_inodes,
            ),
        ] {
            if let Some(asked) = asked {
                if asked > *limit {
                    return Err(invalid(
                        format!("resources {name} {asked}, above the profile's {limit}"),
                        "a run's bound is at most the profile's limit",
                    ));
                }
                *limit = asked;
            }
        }
        Ok(limits)
    }

    /// Refuses an environment bound at `at` over a path of the runtime, or inside one: it
    /// would hide the runtime's files, or be hidden by them.
    fn check_apart_from_runtime(&self, what: &str, at: &Path) -> Result<(), ExecutorError> {
        let layout = self.runtime.layout();
        let mounted = layout.binds.keys().chain(layout.symlinks.keys());
        if let Some(path) = mounted
            .chain(layout.directories.iter())
            .find(|path| path.starts_with(at))
            .or_else(|| {
                let mut mounted = layout.binds.keys().chain(layout.symlinks.keys());
                mounted.find(|path| at.starts_with(path))
            })
        {
            return Err(invalid(
                format!(
                    "{what} path {} and runtime path {}",
                    at.display(),
                    path.display()
                ),
                "an environment or an output directory is bound neither over nor inside a \
                 path of the runtime",
            ));
        }
        Ok(())
    }

    /// The bind of a command's dependency environment: a directory that the sandbox's user
    /// can read and no one but root or this user can change, bound where no path of the
    /// runtime is, above or below.
    fn dependencies(&self, environment: &RunEnvironment) -> Result<EnvironmentBind, ExecutorError> {
        let tree = &environment.tree;
        let metadata = std::fs::symlink_metadata(tree).map_err(|error| {
            invalid(
                format!("environment tree {}: {error}", tree.display()),
                "an environment's tree is an existing directory",
            )
        })?;
        if !metadata.is_dir() {
            return Err(invalid(
                format!("environment tree {}", tree.display()),
                "an environment's tree is a directory, not a link or a file",
            ));
        }
        if let Some(problem) = crate::runtime::untrusted(tree) {
            return Err(invalid(
                format!("environment tree {}: {problem}", tree.display()),
                "an environment's tree, and every directory above it, is owned by root or \
                 this user and writable by neither group nor others",
            ));
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            crate::runtime::check_readable_by_others(tree, true)?;
        }
        let at = PathBuf::from(&environment.at);
        if environment.is_root() {
            return Ok(EnvironmentBind {
                root_entries: root_entries(tree)?,
                at,
                host: tree.clone(),
                dev: metadata.dev(),
                ino: metadata.ino(),
            });
        }
        self.check_apart_from_runtime("environment", &at)?;
        Ok(EnvironmentBind {
            at,
            host: tree.clone(),
            dev: metadata.dev(),
            ino: metadata.ino(),
            root_entries: Vec::new(),
        })
    }
}

/// Refuses a runtime whose paths reach under the directories the sandbox provides itself.
fn check_runtime_paths(runtime: &Runtime) -> Result<(), ExecutorError> {
    for path in runtime
        .layout()
        .binds
        .keys()
        .chain(runtime.layout().symlinks.keys())
        .chain(runtime.layout().directories.iter())
    {
        if profile::is_reserved(path) {
            return Err(invalid(
                format!("runtime path {}", path.display()),
                "a runtime path is not under /sf, /proc or /dev, which the sandbox reserves",
            ));
        }
    }
    Ok(())
}

/// Where runs' control groups are made, and the group made to find it (the first
/// sandbox's). Without a hierarchy, runs have the per-process limits only, unless the
/// profile `required` a group: then the Executor is refused.
fn find_hierarchy(
    bounds: &crate::cgroup::Bounds,
    total: u64,
    required: bool,
) -> Result<(Result<Hierarchy, String>, Option<RunGroup>), ExecutorError> {
    let (hierarchy, spare) = match Hierarchy::find(bounds, total) {
        Ok((hierarchy, group)) => (Ok(hierarchy), Some(group)),
        Err(reason) => (Err(reason), None),
    };
    if let (Err(reason), true) = (&hierarchy, required) {
        return Err(ExecutorError::Unavailable {
            mechanism: "cgroup".to_owned(),
            reason: format!(
                "the profile requires a control group per run and none can be made: {reason}"
            ),
        });
    }
    Ok((hierarchy, spare))
}

/// The Landlock rules of every sandbox: the runtime's paths, the snapshot directories, the
/// scratch, /proc and each device, each with the access the profile gives its class.
fn landlock_rules(
    runtime: &Runtime,
    devices: &std::collections::BTreeMap<PathBuf, BindSource>,
) -> Result<Vec<LandlockRule>, ExecutorError> {
    let text = |path: &Path| crate::runtime::path_text(path);
    let mut rules = Vec::new();
    for (path, source) in &runtime.layout().binds {
        let access = if source.directory {
            profile::runtime_directory_access()
        } else {
            profile::runtime_file_access()
        };
        rules.push(LandlockRule {
            path: text(path)?,
            access: access.bits(),
        });
    }
    for (path, access) in [
        (PROGRAM_DIR, profile::snapshot_access()),
        (INPUT_DIR, profile::snapshot_access()),
        (HARNESS_DIR, profile::snapshot_access()),
        (SCRATCH_DIR, profile::scratch_access()),
        ("/proc", profile::proc_access()),
    ] {
        rules.push(LandlockRule {
            path: path.to_owned(),
            access: access.bits(),
        });
    }
    for device in devices.keys() {
        let device = text(device)?;
        rules.push(LandlockRule {
            access: profile::device_access(&device).bits(),
            path: device,
        });
    }
    Ok(rules)
}

/// The most top-level entries a root environment may have (a Debian root has about twenty).
const MAX_ROOT_ENTRIES: usize = 4096;

/// A root environment's top-level entries, read through a descriptor once, for the init to
/// attach and the plan's rules: the names the sandbox provides itself are left out, and an
/// entry of another kind (a device, a socket) or a link whose target is not UTF-8 is refused,
/// since the store never keeps one.
fn root_entries(tree: &Path) -> Result<Vec<RootEntry>, ExecutorError> {
    use sf_io::dir_fd::{DirFd, EntryKind};
    let shown = || format!("environment tree {}", tree.display());
    let unreadable = |error: sf_io::dir_fd::DirFdError| ExecutorError::Unavailable {
        mechanism: "environment".to_owned(),
        reason: format!("{}: {error}", shown()),
    };
    let dir = DirFd::open(tree).map_err(unreadable)?;
    let mut entries = Vec::new();
    for entry in dir.entries(MAX_ROOT_ENTRIES).map_err(unreadable)? {
        let Some(name) = entry.name.to_str() else {
            return Err(invalid(
                shown(),
                "a root environment's top-level names are UTF-8",
            ));
        };
        if sf_contracts::command::ROOT_PROVIDED.contains(&name) {
            continue;
        }
        let kind = match entry.kind {
            EntryKind::Directory => RootEntryKind::Directory,
            EntryKind::File => RootEntryKind::File,
            EntryKind::Symlink => {
                let target = dir.read_link(&entry).map_err(unreadable)?;
                let Some(target) = target.to_str() else {
                    return Err(invalid(
                        format!("{}: {name}", shown()),
                        "a root environment's top-level links have UTF-8 targets",
                    ));
                };
                RootEntryKind::Symlink(target.to_owned())
            }
            EntryKind::Other => {
                return Err(invalid(
                    format!("{}: {name}", shown()),
                    "a root environment's top-level entries are directories, files and links",
                ));
            }
        };
        entries.push(RootEntry {
            name: name.to_owned(),
            kind,
        });
    }
    Ok(entries)
}

/// The bind of a program tree's base: a directory that the sandbox's user can read and no
/// one but root or this user can change, and that is still the one the store verified
/// (device and inode; the init checks them again when it clones it).
fn program_tree_bind(tree: &ProgramTree) -> Result<TreeBind, ExecutorError> {
    let unavailable = |reason: String| ExecutorError::Unavailable {
        mechanism: "program-tree".to_owned(),
        reason,
    };
    let metadata = std::fs::symlink_metadata(&tree.dir)
        .map_err(|error| unavailable(format!("{}: {error}", tree.dir.display())))?;
    if !metadata.is_dir() || metadata.dev() != tree.dev || metadata.ino() != tree.ino {
        return Err(unavailable(format!(
            "{} is not the directory the store verified (device {} inode {})",
            tree.dir.display(),
            tree.dev,
            tree.ino
        )));
    }
    if let Some(problem) = crate::runtime::untrusted(&tree.dir) {
        return Err(invalid(
            format!("program tree {}: {problem}", tree.dir.display()),
            "a program tree, and every directory above it, is owned by root or this user and \
             writable by neither group nor others",
        ));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        crate::runtime::check_readable_by_others(&tree.dir, true)?;
    }
    Ok(TreeBind {
        host: tree.dir.clone(),
        dev: tree.dev,
        ino: tree.ino,
    })
}

/// The run plan's program entries of a program tree: its layer, then a whiteout for each
/// name the layer hides: a deleted leaf, or the highest directory the deletions empty (a
/// directory of the base that the tree no longer holds), so that the overlay shows exactly
/// the tree.
fn layer_files(tree: &ProgramTree) -> Result<Vec<PlanFile>, ExecutorError> {
    let checked = tree.check()?;
    let mut files = plan_files(&tree.layer);
    let mut hidden = std::collections::BTreeSet::new();
    for path in &tree.deleted {
        let mut top = path.as_str();
        while let Some((parent, _)) = top.rsplit_once('/') {
            if checked.holds_directory(parent) {
                break;
            }
            top = parent;
        }
        hidden.insert(top.to_owned());
    }
    files.extend(hidden.into_iter().map(|path| PlanFile {
        path,
        kind: PlanEntryKind::Whiteout,
        size: 0,
    }));
    Ok(files)
}

fn file_bytes(file: &SnapshotFile) -> &[u8] {
    &file.content
}

fn plan_files(files: &[SnapshotFile]) -> Vec<PlanFile> {
    files
        .iter()
        .map(|file| PlanFile {
            path: file.path.clone(),
            kind: file.mode.into(),
            size: file.content.len() as u64,
        })
        .collect()
}

/// tmpfs options that fit `files` exactly enough: their pages, one inode per file and
/// directory, and a little slack.
fn snapshot_tmpfs_options(files: &[SnapshotFile]) -> String {
    tmpfs_options(files, 0)
}

/// [`snapshot_tmpfs_options`] with `extra` inodes more.
fn tmpfs_options(files: &[SnapshotFile], extra: usize) -> String {
    const PAGE: u64 = 4096;
    let pages: u64 = files
        .iter()
        .map(|file| (file.content.len() as u64).div_ceil(PAGE))
        .sum();
    let mut directories = std::collections::BTreeSet::new();
    for file in files {
        let mut path = Path::new(&file.path);
        while let Some(parent) = path.parent() {
            if parent.as_os_str().is_empty() {
                break;
            }
            directories.insert(parent.to_path_buf());
            path = parent;
        }
    }
    format!(
        "size={},nr_inodes={},mode=0755",
        (pages + 16) * PAGE,
        files.len() + directories.len() + extra + 16
    )
}

impl Executor for SandboxExecutor {
    fn describe_runtime(&self) -> Result<RuntimeDescription, ExecutorError> {
        self.runtime.describe()
    }

    fn profile(&self) -> Result<ProfileDescription, ExecutorError> {
        Ok(self.profile.description.clone())
    }

    fn overlap(&self) -> sf_contracts::Overlap {
        self.overlap.contract()
    }

    fn run(&self, request: &RunRequest, cancel: &CancelToken) -> Result<RunAnswer, ExecutorError> {
        if cancel.is_cancelled() {
            return Err(ExecutorError::Aborted);
        }
        let digests = request.check()?;
        let runtime = self.runtime.describe()?;
        let binds = self.binds(request)?;
        let resources = request
            .command
            .as_ref()
            .map(|command| command.resources)
            .unwrap_or_default();
        let limits = self.limits_for(&resources)?;
        let lower = (resources.memory_bytes.is_some() || resources.processes.is_some())
            .then(|| profile::group_bounds(&limits));
        let mut run = self.run_plan(request)?;
        if resources.scratch_bytes.is_some() || resources.scratch_files.is_some() {
            run.scratch_options = Some(format!(
                "size={},nr_inodes={}",
                limits.scratch_bytes, limits.scratch_inodes
            ));
        }
        let header = serde_json::to_vec(&run).map_err(|error| ExecutorError::Unavailable {
            mechanism: "launcher".to_owned(),
            reason: format!("the run plan did not encode: {error}"),
        })?;
        let files = run_files(request, &run);
        let _running = self.overlap.enter()?;
        let launch = |started| {
            supervise(Launch {
                started,
                header: header.clone(),
                files: files.clone(),
                bounds: request.bounds,
                cancel,
                limits: &limits,
                lower,
                proxy: binds.proxy.as_deref(),
            })
        };
        // However this run ends, the next sandbox is built after it: building it while the
        // run runs would take the machine's cores from the run.
        let next = self.preparer.next_after(&binds);
        let ran = self.run_in_sandbox(&binds, next.first, cancel, &launch)?;
        Ok(self.answer(request, digests, runtime, ran))
    }
}

impl SandboxExecutor {
    /// What a run's sandbox binds besides the runtime: its command's dependency
    /// environment and its program tree's base, each checked.
    fn binds(&self, request: &RunRequest) -> Result<Binds, ExecutorError> {
        let dependencies = match request
            .command
            .as_ref()
            .and_then(|c| c.environment.as_ref())
        {
            Some(environment) => Some(self.dependencies(environment)?),
            None => None,
        };
        let command = request.command.as_ref();
        let output = match command.and_then(|command| command.output.as_ref()) {
            Some(output) => {
                self.check_apart_from_runtime("output", Path::new(&output.at))?;
                Some(crate::build::output_bind(output)?)
            }
            None => None,
        };
        let proxy = match command.and_then(|command| command.network.as_ref()) {
            Some(network) => Some(crate::build::proxy_socket(network)?),
            None => None,
        };
        Ok(Binds {
            dependencies,
            program_tree: match &request.program_tree {
                Some(tree) => Some(program_tree_bind(tree)?),
                None => None,
            },
            output,
            proxy,
        })
    }

    /// Has `launch` run in a sandbox: the prepared one when it can be used, else one started
    /// now (without the fork server for an Executor's `first` run, which would be pure cost
    /// were it the only run; the second run starts the fork server).
    fn run_in_sandbox(
        &self,
        binds: &Binds,
        first: bool,
        cancel: &CancelToken,
        launch: &dyn Fn(Started) -> Result<Ran, ExecutorError>,
    ) -> Result<Ran, ExecutorError> {
        let how = if first { Start::Once } else { Start::Forked };
        match self.take_sandbox(binds, how)? {
            (started, Sandbox::Prepared) => match launch(started) {
                Ok(ran) => Ok(ran),
                // `Err` means the program did not start: the prepared sandbox was lost before
                // it took the run (say its fork server was killed). A new one gets the run,
                // and reports its own failure if it has one.
                Err(_) if !cancel.is_cancelled() => {
                    launch(self.start_sandbox(binds, Start::Forked)?)
                }
                Err(error) => Err(error),
            },
            (started, Sandbox::New) => launch(started),
        }
    }

    /// The answer of a run that started: what happened, and the identities that were
    /// enforced.
    fn answer(
        &self,
        request: &RunRequest,
        digests: RequestDigests,
        runtime: RuntimeDescription,
        ran: Ran,
    ) -> RunAnswer {
        let RequestDigests {
            program,
            input,
            harness,
        } = digests;
        let enforcement = crate::enforcement::run_facts(
            ran.landlock
                .as_ref()
                .map(|(abi, status)| (*abi, status.as_str())),
            ran.id.is_some(),
            ran.group,
        );
        RunAnswer {
            remote: None,
            results: ran.results.clone(),
            status: ran.status,
            exit_code: ran.exit_code,
            signal: ran.signal,
            stdout: ran.stdout,
            stderr: ran.stderr,
            times: ran.times,
            bounds: request.bounds,
            identities: RunIdentities {
                command: request.command.as_ref().map(RunCommand::digest),
                program,
                input,
                harness,
                runtime: runtime.digest,
                profile: self.profile.description.digest.clone(),
                bounds: request.bounds.digest(),
                enforcement,
            },
            namespace: ran.namespace,
            problems: ran.problems,
            limits_hit: ran.limits_hit,
        }
    }
}

/// The bytes of a run's files in run plan order: the program's (for a program by reference,
/// its layer; a whiteout has no bytes), the input's and the harness's.
fn run_files<'a>(request: &'a RunRequest, run: &RunPlan) -> Vec<&'a [u8]> {
    let program_files = match &request.program_tree {
        Some(tree) => &tree.layer,
        None => &request.program,
    };
    let whiteouts = run
        .program
        .iter()
        .filter(|file| file.kind == PlanEntryKind::Whiteout)
        .count();
    program_files
        .iter()
        .map(file_bytes)
        .chain(std::iter::repeat_n(&[][..], whiteouts))
        .chain(request.input.iter().map(file_bytes))
        .chain(request.harness.iter().map(file_bytes))
        .collect()
}

/// A network namespace being made (see [`make_empty_network_namespace`]).
type MakingNetwork = std::thread::JoinHandle<std::io::Result<OwnedFd>>;

/// Starts making an empty network namespace owned by the initial user namespace, held by a
/// descriptor: a short-lived thread unshares its own network namespace and opens it.
fn make_empty_network_namespace() -> MakingNetwork {
    std::thread::spawn(|| -> std::io::Result<OwnedFd> {
        // SAFETY: unshare of this thread's network namespace only; the thread ends next.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let file = std::fs::File::open("/proc/thread-self/ns/net")?;
        Ok(OwnedFd::from(file))
    })
}

/// The network namespace `making` made.
fn empty_network_namespace(making: MakingNetwork) -> Result<OwnedFd, ExecutorError> {
    match making.join() {
        Ok(Ok(fd)) => Ok(fd),
        Ok(Err(error)) => Err(ExecutorError::Unavailable {
            mechanism: "network-namespace".to_owned(),
            reason: format!("making the shared empty network namespace: {error}"),
        }),
        Err(_) => Err(ExecutorError::Unavailable {
            mechanism: "network-namespace".to_owned(),
            reason: "the thread making the network namespace panicked".to_owned(),
        }),
    }
}

/// Finds the launcher and checks that no one but root or this user can change it.
fn find_launcher(configured: Option<&Path>) -> Result<PathBuf, ExecutorError> {
    let candidates: Vec<PathBuf> = match configured {
        Some(path) => vec![path.to_path_buf()],
        None => {
            let exe = std::env::current_exe().map_err(|error| ExecutorError::Unavailable {
                mechanism: "launcher".to_owned(),
                reason: format!("the current executable is unknown: {error}"),
            })?;
            exe.ancestors()
                .skip(1)
                .take(2)
                .map(|dir| dir.join(LAUNCHER_NAME))
                .collect()
        }
    };
    let Some(found) = candidates.iter().find(|path| path.is_file()) else {
        return Err(ExecutorError::Unavailable {
            mechanism: "launcher".to_owned(),
            reason: format!(
                "{LAUNCHER_NAME} was not found (looked at {}); build it with `cargo build -p \
                 sf-sandbox-exec` and keep it beside the sf executable, or configure its path",
                candidates
                    .iter()
                    .map(|path| path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    let path = found
        .canonicalize()
        .map_err(|error| ExecutorError::Unavailable {
            mechanism: "launcher".to_owned(),
            reason: format!("{}: {error}", found.display()),
        })?;
    let metadata = std::fs::metadata(&path).map_err(|error| ExecutorError::Unavailable {
        mechanism: "launcher".to_owned(),
        reason: format!("{}: {error}", path.display()),
    })?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mode = metadata.permissions().mode();
    let problem = crate::runtime::untrusted(&path);
    if (metadata.uid() != 0 && metadata.uid() != euid) || mode & 0o100 == 0 || problem.is_some() {
        return Err(ExecutorError::Unavailable {
            mechanism: "launcher".to_owned(),
            reason: format!(
                "{} must be executable, owned by root or this user and writable by no one else, \
                 and so must every directory above it (or be sticky){}",
                path.display(),
                problem
                    .map(|problem| format!(": {problem}"))
                    .unwrap_or_default()
            ),
        });
    }
    Ok(path)
}
