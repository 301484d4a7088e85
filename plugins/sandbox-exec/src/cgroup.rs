//! A control group per run: every process of a run in one group whose memory, process count
//! and CPU time are bounded together, and whose peak memory is read after the run.
//!
//! Memory the per-process limits do not see (tmpfs pages, memfd, shared memory, page tables,
//! the kernel's own allocations for the run) is charged to the group of the process that
//! caused it, so one group bounds the run as a whole. Two kinds of hierarchy are used:
//!
//! - **cgroup v2**, where the group sf runs in, or its parent, offers the `memory` controller
//!   to its children (`cgroup.subtree_control`) and sf may create groups there (root, or a
//!   delegated subtree): `memory.max` (and `memory.swap.max = 0`), `pids.max`, `cpu.max`; the
//!   peak is `memory.peak`;
//! - **cgroup v1** as root, one group in each of the `memory`, `pids` and `cpu` hierarchies
//!   (below sf's own group in each): `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`
//!   where swap is accounted), `pids.max`, `cpu.cfs_quota_us` over `cpu.cfs_period_us`; the peak
//!   is `memory.max_usage_in_bytes`.
//!
//! After a run its event counters say which bounds the run hit ([`RunGroup::events`]): the
//! forks and threads refused at the process bound (`pids.events` `max`, both kinds), and the
//! processes the kernel killed for want of memory (v1 `memory.oom_control` `oom_kill` and
//! `under_oom`; v2 `memory.events` `oom` and `oom_kill`). v1's `memory.failcnt` is not one of
//! them: it counts every charge that met the bound, including page cache the kernel then
//! reclaimed without the program noticing.
//!
//! The runs' memory groups are made inside one **collection group** per Executor
//! ([`CollectionGroup`], `sf-collection-<pid>-…`), whose memory bound is the total of all its
//! runs together: with several runs at once, each within its own bound, the machine's memory
//! is still bounded by one number. A run killed for want of memory while it was below its own
//! bound was stopped by the total ([`Events::within_own_bound`]), which the run's answer names
//! as the collection's limit, never the run's.
//!
//! v2 is preferred when both would do. The host opens each group's `tasks` (v1) or
//! `cgroup.procs` (v2) and hands the descriptors to the launcher's process, which writes itself
//! into them before it gives up root (the kernel checks a write against the opener's
//! credentials), so every process of the run starts inside. A group is removed once its last
//! process has exited.

use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Which kind of hierarchy bounds the runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// What a run's group bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The most memory the run may use (bytes).
    pub memory_bytes: u64,
    /// The most processes (and threads) at once.
    pub processes: u64,
    /// CPU time per wall-clock time, in percent of one CPU.
    pub cpu_percent: u64,
}

/// What a run's group counted of the bounds its processes met.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// Forks and threads refused at the process bound (`pids.events` `max`).
    pub processes_refused: u64,
    /// Processes the kernel killed because the group's memory ran out (`oom_kill`).
    pub oom_kills: u64,
    /// Times the group's memory ran out and an allocation was about to fail (v2 `oom`).
    pub oom: u64,
    /// Whether the group was out of memory when read (v1 `under_oom`).
    pub under_oom: bool,
    /// Whether the run's memory stayed below its own bound (its peak under it), so that a
    /// process killed for want of memory was killed at the collection's total.
    pub within_own_bound: bool,
    /// The collection's total memory bound, when the run's group is inside one.
    pub collection_total: Option<u64>,
}

/// The CFS period the CPU bound is expressed over (100 ms, the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// The directories runs' groups are made in.
#[derive(Debug)]
pub struct Hierarchy {
    pub version: Version,
    /// v2: the one parent; v1: the memory, pids and cpu parents. The memory parent (the first)
    /// is the collection group's directory once it is made.
    parents: Vec<PathBuf>,
    /// The group every run's memory group is inside; removed after them (declared last).
    collection: Option<CollectionGroup>,
}

/// The group all of one Executor's runs share, bounding their memory together; removed when
/// dropped (once the runs' groups inside it are gone).
#[derive(Debug)]
pub struct CollectionGroup {
    directory: PathBuf,
    total: u64,
}

/// One run's group (one directory per hierarchy for v1), removed when dropped.
#[derive(Debug)]
pub struct RunGroup {
    version: Version,
    directories: Vec<PathBuf>,
    /// The memory bound last written (the run's own).
    memory_bytes: AtomicU64,
    /// The collection's total, when the group is inside one.
    collection_total: Option<u64>,
}

/// Names runs' groups uniquely within this copy of the crate.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A random token of this copy of the crate, in every group name: one process may hold two
/// copies (sandbox-exec linked into a program that also loads it as a plugin), each with its
/// own counter, and the pid alone would make their names collide.
fn copy_token() -> u64 {
    static TOKEN: OnceLock<u64> = OnceLock::new();
    *TOKEN.get_or_init(|| {
        let mut bytes = [0u8; 8];
        // SAFETY: the buffer is valid for writes of its length.
        let filled = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
        if filled == bytes.len() as isize {
            u64::from_ne_bytes(bytes)
        } else {
            // Without the kernel's randomness the address of this copy's counter still tells
            // two copies apart (each library is mapped at its own address).
            std::ptr::addr_of!(NEXT) as u64
        }
    })
}

impl Hierarchy {
    /// The hierarchy this process can make bounded groups in, with the collection group
    /// bounding all runs' memory at `total` bytes, checked by making one run's group (which it
    /// returns, for a first run: removed when dropped); `Err` says why there is none.
    pub fn find(bounds: &Bounds, total: u64) -> Result<(Self, RunGroup), String> {
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|error| format!("/proc/self/mountinfo: {error}"))?;
        let own = fs::read_to_string("/proc/self/cgroup")
            .map_err(|error| format!("/proc/self/cgroup: {error}"))?;
        let mut reasons = Vec::new();
        for candidate in [v2(&mounts, &own), v1(&mounts, &own)] {
            match candidate.and_then(|mut hierarchy| {
                hierarchy.clear_stale();
                hierarchy.enclose(total)?;
                hierarchy.create(bounds).map(|group| (hierarchy, group))
            }) {
                Ok(hierarchy) => return Ok(hierarchy),
                Err(reason) => reasons.push(reason),
            }
        }
        Err(reasons.join("; "))
    }

    /// Makes a run's group with `bounds`.
    pub fn create(&self, bounds: &Bounds) -> Result<RunGroup, String> {
        let name = format!(
            "sf-run-{}-{:016x}-{}",
            std::process::id(),
            copy_token(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut group = RunGroup {
            version: self.version,
            directories: Vec::new(),
            memory_bytes: AtomicU64::new(bounds.memory_bytes),
            collection_total: self.collection.as_ref().map(|collection| collection.total),
        };
        for parent in &self.parents {
            let directory = parent.join(&name);
            fs::create_dir(&directory)
                .map_err(|error| format!("making {}: {error}", directory.display()))?;
            group.directories.push(directory);
        }
        group.bound(bounds)?;
        Ok(group)
    }

    /// Makes the collection group bounding every run's memory at `total` bytes, and makes
    /// runs' memory groups inside it from then on.
    fn enclose(&mut self, total: u64) -> Result<(), String> {
        let collection = CollectionGroup::create(self.version, &self.parents[0], total)?;
        self.parents[0] = collection.directory.clone();
        self.collection = Some(collection);
        Ok(())
    }

    /// Removes empty groups left by sf processes that are gone (killed before they removed
    /// them), and their collection groups with the runs' groups inside; a group still in use
    /// cannot be removed, and one of a live process is kept.
    fn clear_stale(&self) {
        for parent in &self.parents {
            for (path, prefix) in stale_groups(parent) {
                if prefix == COLLECTION_PREFIX {
                    for (run, _) in stale_groups(&path) {
                        let _ = fs::remove_dir(run);
                    }
                }
                let _ = fs::remove_dir(path);
            }
        }
    }
}

const RUN_PREFIX: &str = "sf-run-";
const COLLECTION_PREFIX: &str = "sf-collection-";

/// The groups in `parent` named by an sf process that is gone (`sf-run-<pid>-…` or
/// `sf-collection-<pid>-…`), with the prefix each has.
fn stale_groups(parent: &Path) -> Vec<(PathBuf, &'static str)> {
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (prefix, rest) = [RUN_PREFIX, COLLECTION_PREFIX]
                .into_iter()
                .find_map(|prefix| Some((prefix, name.strip_prefix(prefix)?)))?;
            let pid = rest.split('-').next()?.parse::<u32>().ok()?;
            let gone = !Path::new(&format!("/proc/{pid}")).exists();
            gone.then(|| (entry.path(), prefix))
        })
        .collect()
}

impl CollectionGroup {
    /// Makes the collection group in the memory hierarchy's `parent` with the memory bound
    /// `total` (and, on v2, the controllers its runs' groups need offered to them).
    fn create(version: Version, parent: &Path, total: u64) -> Result<Self, String> {
        let directory = parent.join(format!(
            "{COLLECTION_PREFIX}{}-{:016x}-{}",
            std::process::id(),
            copy_token(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&directory)
            .map_err(|error| format!("making {}: {error}", directory.display()))?;
        let collection = Self { directory, total };
        collection.bound(version)?;
        Ok(collection)
    }

    fn bound(&self, version: Version) -> Result<(), String> {
        let dir = &self.directory;
        match version {
            Version::V2 => {
                write(dir, "memory.max", self.total)?;
                if dir.join("memory.swap.max").exists() {
                    write(dir, "memory.swap.max", 0)?;
                }
                let offered = read(dir, "cgroup.controllers")?;
                let enable: Vec<String> = ["memory", "pids", "cpu"]
                    .into_iter()
                    .filter(|name| offered.split_whitespace().any(|offered| offered == *name))
                    .map(|name| format!("+{name}"))
                    .collect();
                write(dir, "cgroup.subtree_control", enable.join(" "))?;
            }
            Version::V1 => {
                write(dir, "memory.limit_in_bytes", self.total)?;
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write(dir, "memory.memsw.limit_in_bytes", self.total)?;
                }
            }
        }
        Ok(())
    }
}

impl Drop for CollectionGroup {
    fn drop(&mut self) {
        remove_when_empty(&self.directory);
    }
}

/// Removes the group `dir` once the kernel has taken its last process (or group) off it.
fn remove_when_empty(dir: &Path) {
    for attempt in 0..50 {
        match fs::remove_dir(dir) {
            Ok(()) => break,
            Err(error) if error.raw_os_error() == Some(libc::ENOENT) => break,
            Err(_) if attempt < 49 => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(_) => {}
        }
    }
}

impl RunGroup {
    pub fn version(&self) -> Version {
        self.version
    }

    /// Writes `bounds` into the group (lowering them before a run that asks for less: memory
    /// is written before its swap total, so that lowering keeps the kernel's order).
    pub(crate) fn bound(&self, bounds: &Bounds) -> Result<(), String> {
        let quota = bounds.cpu_percent.saturating_mul(CPU_PERIOD_US) / 100;
        match self.version {
            Version::V2 => {
                let dir = &self.directories[0];
                self.memory_bytes
                    .store(bounds.memory_bytes, Ordering::Relaxed);
                write(dir, "memory.max", bounds.memory_bytes)?;
                if dir.join("memory.swap.max").exists() {
                    write(dir, "memory.swap.max", 0)?;
                }
                write(dir, "pids.max", bounds.processes)?;
                write(dir, "cpu.max", format!("{quota} {CPU_PERIOD_US}"))?;
            }
            Version::V1 => {
                let [memory, pids, cpu] = &self.directories[..] else {
                    return Err("a v1 group is three directories".to_owned());
                };
                self.memory_bytes
                    .store(bounds.memory_bytes, Ordering::Relaxed);
                write(memory, "memory.limit_in_bytes", bounds.memory_bytes)?;
                if memory.join("memory.memsw.limit_in_bytes").exists() {
                    write(memory, "memory.memsw.limit_in_bytes", bounds.memory_bytes)?;
                } else {
                    // Swap is not accounted: the group's reclaim at its bound must not swap
                    // (swappiness 0 makes limit reclaim leave anonymous pages in memory), so
                    // that the bound is on memory and swap together.
                    write(memory, "memory.swappiness", 0)?;
                }
                write(pids, "pids.max", bounds.processes)?;
                write(cpu, "cpu.cfs_period_us", CPU_PERIOD_US)?;
                write(cpu, "cpu.cfs_quota_us", quota)?;
            }
        }
        Ok(())
    }

    /// Each directory's file to join through, open for writing, for the launcher to write
    /// `0` (itself) into: v1's `tasks`, which moves the writing thread (the launcher has one)
    /// without the kernel's global lock on every thread group that a `cgroup.procs` write
    /// takes (its release waits for an RCU grace period, milliseconds per hierarchy); v2's
    /// `cgroup.procs`.
    pub fn procs(&self) -> Result<Vec<OwnedFd>, String> {
        let file = match self.version {
            Version::V1 => "tasks",
            Version::V2 => "cgroup.procs",
        };
        self.directories
            .iter()
            .map(|dir| {
                let path = dir.join(file);
                fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map(OwnedFd::from)
                    .map_err(|error| format!("opening {}: {error}", path.display()))
            })
            .collect()
    }

    /// The group's event counters (see [`Events`]); `Err` names the file that could not be
    /// read or that lacks a counter.
    pub fn events(&self) -> Result<Events, String> {
        let (memory, pids, memory_file) = match self.version {
            Version::V2 => (&self.directories[0], &self.directories[0], "memory.events"),
            Version::V1 => match &self.directories[..] {
                [memory, pids, _cpu] => (memory, pids, "memory.oom_control"),
                _ => return Err("a v1 group is three directories".to_owned()),
            },
        };
        let pids_events = read(pids, "pids.events")?;
        let memory_events = read(memory, memory_file)?;
        let counter = |text: &str, file: &str, key: &str| {
            counter(text, key).ok_or_else(|| format!("{file} has no counter {key}"))
        };
        Ok(Events {
            processes_refused: counter(&pids_events, "pids.events", "max")?,
            oom_kills: counter(&memory_events, memory_file, "oom_kill")?,
            oom: match self.version {
                Version::V2 => counter(&memory_events, memory_file, "oom")?,
                Version::V1 => 0,
            },
            under_oom: match self.version {
                Version::V1 => counter(&memory_events, memory_file, "under_oom")? != 0,
                Version::V2 => false,
            },
            within_own_bound: self
                .peak()
                .is_some_and(|peak| peak < self.memory_bytes.load(Ordering::Relaxed)),
            collection_total: self.collection_total,
        })
    }

    /// The most memory the group's processes used at once, in bytes.
    pub fn peak(&self) -> Option<u64> {
        let (dir, file) = match self.version {
            Version::V2 => (&self.directories[0], "memory.peak"),
            Version::V1 => (&self.directories[0], "memory.max_usage_in_bytes"),
        };
        fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
    }
}

impl Drop for RunGroup {
    fn drop(&mut self) {
        // Its processes have exited (the caller waits for them); the kernel may take a moment
        // to take the last one off the group.
        for dir in &self.directories {
            remove_when_empty(dir);
        }
    }
}

/// Removes run groups, and reaps launchers that are this process's children, once the
/// launcher has exited, on a thread of its own so that a run does not wait for it; dropping
/// it waits for the removals asked for so far.
#[derive(Debug)]
pub struct Cleaner {
    sender: Option<mpsc::Sender<Removal>>,
    thread: Option<JoinHandle<()>>,
}

/// What to do once the process a pidfd names has exited: remove its group, reap it.
type Removal = (OwnedFd, Option<RunGroup>, Option<Child>);

/// How long a removal waits for the launcher to exit.
const EXIT_WAIT_MS: libc::c_int = 5000;

/// Asks a [`Cleaner`] to remove a group.
#[derive(Clone, Debug)]
pub struct CleanerHandle(mpsc::Sender<Removal>);

impl Cleaner {
    pub fn new() -> Self {
        let (sender, receiver) = mpsc::channel::<Removal>();
        let thread = std::thread::Builder::new()
            .name("sf-sandbox-cgroups".into())
            .spawn(move || {
                for (process, group, child) in receiver {
                    remove_after_exit(Some(process), group, child);
                }
            })
            .ok();
        Self {
            sender: Some(sender),
            thread,
        }
    }

    pub fn handle(&self) -> Option<CleanerHandle> {
        Some(CleanerHandle(self.sender.clone()?))
    }
}

impl CleanerHandle {
    /// Removes `group` and reaps `child` once the process `process` names has exited (at
    /// once, should the cleaner be gone).
    pub fn after_exit(&self, process: OwnedFd, group: Option<RunGroup>, child: Option<Child>) {
        if let Err(mpsc::SendError((_, group, child))) = self.0.send((process, group, child)) {
            remove_after_exit(None, group, child);
        }
    }
}

/// Waits (bounded) until the process `process` names has exited, then reaps `child` (that
/// process, when it is this one's child) and removes `group`. Without a pidfd (no cleaner
/// thread to wait on), the child is killed and reaped at once: the run it served is over, or
/// it never got one.
pub fn remove_after_exit(process: Option<OwnedFd>, group: Option<RunGroup>, child: Option<Child>) {
    if let Some(process) = &process {
        let mut fd = libc::pollfd {
            fd: process.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a pidfd is readable once its process exited.
        unsafe { libc::poll(&mut fd, 1, EXIT_WAIT_MS) };
    }
    if let Some(mut child) = child {
        // Exited by now, or killed (a launcher that outlived the wait); either way reaped.
        if !matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    drop(group);
}

impl Drop for Cleaner {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The text of a group's file.
fn read(dir: &Path, file: &str) -> Result<String, String> {
    let path = dir.join(file);
    fs::read_to_string(&path).map_err(|error| format!("reading {}: {error}", path.display()))
}

/// The value of `key` in a flat keyed file (`key value` lines, as `pids.events` and
/// `memory.events` are).
fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok())?
    })
}

fn write(dir: &Path, file: &str, value: impl std::fmt::Display) -> Result<(), String> {
    let path = dir.join(file);
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut handle| handle.write_all(value.to_string().as_bytes()))
        .map_err(|error| format!("writing {}: {error}", path.display()))
}

/// One mount of `/proc/self/mountinfo`: its root within the hierarchy, its mount point, its
/// file system type and its super options.
struct Mount<'a> {
    root: &'a str,
    point: &'a str,
    fstype: &'a str,
    options: &'a str,
}

fn mounts(text: &str) -> impl Iterator<Item = Mount<'_>> {
    text.lines().filter_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let mut rest = after.split(' ');
        let fstype = rest.next()?;
        let _source = rest.next()?;
        let options = rest.next().unwrap_or("");
        Some(Mount {
            root: fields.get(3)?,
            point: fields.get(4)?,
            fstype,
            options,
        })
    })
}

/// The directory of this process's group in a hierarchy mounted at `mount` with `root`,
/// given the group's path from `/proc/self/cgroup`.
fn own_directory(mount: &Mount<'_>, group: &str) -> Option<PathBuf> {
    if mount.point.contains('\\') || group.contains('\\') {
        return None;
    }
    let relative = if mount.root == "/" {
        group
    } else {
        group.strip_prefix(mount.root)?
    };
    let relative = relative.trim_start_matches('/');
    Some(Path::new(mount.point).join(relative))
}

fn v2(mounts_text: &str, own: &str) -> Result<Hierarchy, String> {
    let group = own
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or("cgroup v2: this process is in no v2 group")?;
    let mount = mounts(mounts_text)
        .find(|mount| mount.fstype == "cgroup2")
        .ok_or("cgroup v2: not mounted")?;
    let own_dir = own_directory(&mount, group)
        .ok_or("cgroup v2: this process's group is not below the mount")?;
    // A group with processes offers no controller to children (but the root does), so the
    // runs' groups go below sf's own group when it offers memory (the root, say), else beside
    // it, below its parent (a delegated subtree whose leaf sf runs in).
    let candidates = std::iter::once(own_dir.clone()).chain(
        own_dir
            .parent()
            .filter(|parent| parent.starts_with(mount.point))
            .map(Path::to_path_buf),
    );
    for parent in candidates {
        let offered = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
        if offered.split_whitespace().any(|name| name == "memory") {
            return Ok(Hierarchy {
                version: Version::V2,
                parents: vec![parent],
                collection: None,
            });
        }
    }
    Err(format!(
        "cgroup v2: neither {} nor its parent offers the memory controller to its children",
        own_dir.display()
    ))
}

fn v1(mounts_text: &str, own: &str) -> Result<Hierarchy, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("cgroup v1: only root can make groups and bound them".to_owned());
    }
    let mut parents = Vec::new();
    for controller in ["memory", "pids", "cpu"] {
        let has = |list: &str| list.split(',').any(|name| name == controller);
        let group = own
            .lines()
            .find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                has(controllers).then_some(path)
            })
            .ok_or_else(|| format!("cgroup v1: this process is in no {controller} group"))?;
        let mount = mounts(mounts_text)
            .find(|mount| mount.fstype == "cgroup" && has(mount.options))
            .ok_or_else(|| format!("cgroup v1: no {controller} hierarchy is mounted"))?;
        parents.push(
            own_directory(&mount, group).ok_or_else(|| {
                format!("cgroup v1: the {controller} group is not below its mount")
            })?,
        );
    }
    Ok(Hierarchy {
        version: Version::V1,
        parents,
        collection: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:15 - cgroup cgroup rw,memory
36 25 0:31 / /sys/fs/cgroup/pids rw,relatime shared:16 - cgroup cgroup rw,pids
37 25 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:17 - cgroup cgroup rw,cpu,cpuacct
38 25 0:33 / /sys/fs/cgroup/unified rw,relatime shared:18 - cgroup2 cgroup2 rw
";

    #[test]
    fn hierarchies_are_found_from_the_mount_table() {
        let mounts: Vec<Mount<'_>> = mounts(MOUNTS).collect();
        assert_eq!(mounts.len(), 4);
        assert_eq!(mounts[2].options, "rw,cpu,cpuacct");
        assert_eq!(
            own_directory(&mounts[0], "/machine/a"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/machine/a"))
        );
        let nested = Mount {
            root: "/machine",
            point: "/cg",
            fstype: "cgroup2",
            options: "rw",
        };
        assert_eq!(
            own_directory(&nested, "/machine/b"),
            Some(PathBuf::from("/cg/b"))
        );
        assert_eq!(own_directory(&nested, "/other"), None);
    }

    #[test]
    fn counters_are_read_by_key() {
        let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(counter(oom_control, "oom_kill"), Some(2));
        assert_eq!(counter(oom_control, "under_oom"), Some(0));
        assert_eq!(counter(oom_control, "oom"), None);
        assert_eq!(counter("max 17\n", "max"), Some(17));
        assert_eq!(counter("max x\n", "max"), None);
        assert_eq!(
            counter("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n", "oom"),
            Some(1)
        );
    }
}
