//! The program's process: every per-process confinement, then the exec of the runtime.
//!
//! What does not depend on the run is made ready by the init while the sandbox is prepared
//! ([`arm`]): the Landlock ruleset with every rule but the program's and the input's (whose
//! tmpfs mounts come with the run), the seccomp program, the executable's path and the
//! environment. Once the run's mounts exist the init adds their two rules ([`Armed::finish`]);
//! the program's process then only restricts itself with the finished ruleset.
//!
//! Order matters: descriptors first (so nothing inherited survives), rlimits, then the
//! capability steps that themselves need CAP_SETPCAP (securebits, bounding set), then the
//! empty capability sets and no_new_privs, then Landlock and finally seccomp (whose filter
//! still allows the report write and the exec).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use landlock::{
    AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use super::sys::{self, Failure, Step, check, cstring};
use super::{SOCKET, fail, report};
use crate::plan::{Plan, Report, RunPlan};
use crate::seccomp;

/// What the init makes ready for the program's process before the run (see the module
/// documentation).
pub struct Armed {
    /// The ruleset being built (until [`Armed::finish`]).
    building: Option<RulesetCreated>,
    /// The finished ruleset's descriptor (after [`Armed::finish`]).
    ruleset: Option<OwnedFd>,
    kernel_abi: u32,
    filters: Vec<seccompiler::BpfProgram>,
    path: CString,
    environment: Vec<CString>,
    /// A detached, writable clone of the sandbox's /proc (see `mounts::build_root`).
    writable_proc: OwnedFd,
}

/// The OOM score adjustment of the program's processes: the highest, so that when the run's
/// control group runs out of memory the kernel kills the program's processes, not the init
/// or the launcher (which would leave the run's end unreported).
const OOM_SCORE_ADJ: &[u8] = b"1000";

/// Makes everything of the confinement ready that does not depend on the run; run by the init
/// inside the built root, while the sandbox is prepared.
pub fn arm(plan: &Plan, writable_proc: RawFd) -> Step<Armed> {
    // SAFETY: the descriptor build_root returned, owned by no one else.
    let writable_proc = unsafe { OwnedFd::from_raw_fd(writable_proc) };
    let filters = plan
        .seccomp
        .iter()
        .map(|text| {
            hex::decode(text)
                .ok()
                .and_then(|bytes| seccomp::decode(&bytes))
                .ok_or_else(|| Failure::new("seccomp", "a filter in the plan does not decode"))
        })
        .collect::<Step<Vec<_>>>()?;
    let environment = plan
        .environment
        .iter()
        .map(|(key, value)| cstring(&format!("{key}={value}"), "exec"))
        .collect::<Step<Vec<_>>>()?;
    let (building, kernel_abi) =
        landlock_ruleset(plan, |path| !plan.snapshot_dirs().contains(&path))?;
    Ok(Armed {
        building: Some(building),
        ruleset: None,
        kernel_abi,
        filters,
        path: cstring(&plan.executable, "exec")?,
        environment,
        writable_proc,
    })
}

impl Armed {
    /// Adds the rules of the program's, the input's and the harness's directories, now that
    /// the run's mounts cover them (a rule holds the inode it was given), and, for a run whose
    /// command asked to execute what it writes to its scratch, the execute right on the
    /// scratch (rules for one directory add up); and finishes the ruleset.
    pub fn finish(&mut self, plan: &Plan, run: &RunPlan) -> Step {
        let mut ruleset = self
            .building
            .take()
            .ok_or_else(|| Failure::new("landlock", "the ruleset was finished twice"))?;
        for rule in plan
            .landlock
            .rules
            .iter()
            .filter(|rule| plan.snapshot_dirs().contains(&rule.path.as_str()))
        {
            ruleset = add_rule(ruleset, &rule.path, rule.access)?;
        }
        if run.scratch_executable {
            ruleset = add_rule(
                ruleset,
                &plan.scratch_dir,
                BitFlags::from(AccessFs::Execute).bits(),
            )?;
        }
        let fd: Option<OwnedFd> = ruleset.into();
        self.ruleset = Some(fd.ok_or_else(|| {
            Failure::new(
                "landlock",
                "the kernel gave no ruleset; nothing runs without one",
            )
        })?);
        Ok(())
    }
}

/// Confines this process as `plan` says, with what the init `armed`, and execs the runtime
/// with `run`'s arguments. Never returns.
pub fn confine_and_exec(plan: &Plan, run: &RunPlan, armed: &Armed) -> ! {
    // SAFETY: a duplicate of the report socket that closes itself on exec.
    let channel = unsafe { libc::fcntl(SOCKET, libc::F_DUPFD_CLOEXEC, 3) };
    let channel = if channel < 0 { SOCKET } else { channel };
    super::REPORTS.store(channel, std::sync::atomic::Ordering::SeqCst);
    match confine(plan, run, armed, channel) {
        Ok(exec) => {
            let confined = Report::Confined {
                landlock_abi: armed.kernel_abi,
                landlock: "fully-enforced".to_owned(),
            };
            report(channel, &confined);
            // As execvp searches PATH: a candidate that is missing or cannot be executed
            // gives way to the next; the first other failure ends the search.
            let mut failed = libc::ENOENT;
            for path in &exec.paths {
                // SAFETY: null-terminated arrays of pointers into CStrings that live until
                // exec.
                unsafe {
                    libc::execve(path.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr());
                }
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                match errno {
                    libc::ENOENT | libc::ENOTDIR => {}
                    libc::EACCES => failed = libc::EACCES,
                    other => {
                        failed = other;
                        break;
                    }
                }
            }
            report(channel, &Report::ExecFailed { errno: failed });
            sys::exit_now(127)
        }
        Err(failure) => {
            report(channel, &fail(failure));
            sys::exit_now(126)
        }
    }
}

/// Puts every signal back to its default disposition and unblocks them all. Ignored signals
/// and the blocked mask survive exec, and the launcher's are not the program's business: it is
/// a Rust program, which ignores SIGPIPE (a pipeline's writer must die when its reader is
/// gone), and the process that started sf may have ignored or blocked others. The raw system
/// call reaches the signals the C library reserves for itself too.
fn reset_signals() {
    /// The kernel's `struct sigaction` on x86_64.
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: u64,
        restorer: usize,
        mask: u64,
    }
    let default = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: rt_sigaction with a valid kernel sigaction, no old action, and the size of
        // the kernel's signal set.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                &default as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                8usize,
            );
        }
    }
    let empty: u64 = 0;
    // SAFETY: rt_sigprocmask with a valid 8-byte set and no old set.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        );
    }
}

/// What execve needs, prepared before seccomp applies.
struct Exec {
    paths: Vec<CString>,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

/// Every per-process confinement step, in the order the module documentation gives; answers
/// what the exec needs, allocated before seccomp applies.
fn confine(plan: &Plan, run: &RunPlan, armed: &Armed, channel: RawFd) -> Step<Exec> {
    let ruleset = armed
        .ruleset
        .as_ref()
        .ok_or_else(|| Failure::new("landlock", "the ruleset was not finished"))?
        .as_raw_fd();
    leave_the_session();
    reset_signals();
    read_stdin_from_dev_null()?;
    raise_oom_score(armed)?;
    close_inherited_descriptors(channel, ruleset);
    set_rlimits(plan, run)?;
    reset_scheduling()?;
    enter_working_directory(plan, run)?;
    let exec = prepare_exec(run, armed)?;
    drop_capabilities()?;
    set_no_new_privileges()?;
    restrict_with_landlock(ruleset)?;
    install_seccomp_filters(armed)?;
    Ok(exec)
}

/// A new session: no controlling terminal to inject input into.
fn leave_the_session() {
    // SAFETY: setsid of this process.
    unsafe {
        libc::setsid();
    }
}

/// Standard input from /dev/null: the program reads nothing of whoever started sf.
fn read_stdin_from_dev_null() -> Step {
    // SAFETY: descriptor juggling on this process's own table.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null < 0 {
            return Err(Failure::last("file-descriptors", "open /dev/null"));
        }
        if libc::dup2(null, 0) < 0 {
            return Err(Failure::last("file-descriptors", "dup2 /dev/null"));
        }
        if null != 0 {
            libc::close(null);
        }
    }
    Ok(())
}

/// Raises this process's OOM score to [`OOM_SCORE_ADJ`] through the init's writable clone of
/// /proc: raising one's own needs no privilege, and the clone is closed with every other
/// inherited descriptor next.
fn raise_oom_score(armed: &Armed) -> Step {
    // SAFETY: openat relative to our own descriptor, a write of a valid buffer, a close.
    unsafe {
        let fd = libc::openat(
            armed.writable_proc.as_raw_fd(),
            c"self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Err(Failure::last("proc", "opening oom_score_adj"));
        }
        let written = libc::write(fd, OOM_SCORE_ADJ.as_ptr().cast(), OOM_SCORE_ADJ.len());
        libc::close(fd);
        if written != OOM_SCORE_ADJ.len() as isize {
            return Err(Failure::last("proc", "writing oom_score_adj"));
        }
    }
    Ok(())
}

/// Closes every descriptor above stderr but the report channel and the ruleset (closed once
/// applied), so that nothing inherited survives into the program.
fn close_inherited_descriptors(channel: RawFd, ruleset: RawFd) {
    let mut keep = [channel, ruleset];
    keep.sort_unstable();
    let mut first = 3;
    for fd in keep {
        if fd >= first {
            if fd > first {
                sys::close_range(first as u32, fd as u32 - 1);
            }
            first = fd + 1;
        }
    }
    sys::close_range(first as u32, u32::MAX);
}

/// Sets every resource limit of the plan, soft and hard, then the run's own lower CPU bound
/// where it asks for one: none is inherited from whoever started sf.
fn set_rlimits(plan: &Plan, run: &RunPlan) -> Step {
    for (resource, soft, hard) in &plan.rlimits {
        let which = resource.number();
        let limit = libc::rlimit {
            rlim_cur: *soft,
            rlim_max: *hard,
        };
        // SAFETY: a valid rlimit.
        let status = unsafe { libc::setrlimit(which, &limit) };
        check(status.into(), "rlimits", format!("setrlimit {resource:?}"))?;
    }
    if let Some(seconds) = run.cpu_seconds {
        let limit = libc::rlimit {
            rlim_cur: seconds,
            rlim_max: seconds.saturating_add(1),
        };
        // SAFETY: a valid rlimit; lowering is always allowed.
        let status = unsafe { libc::setrlimit(libc::RLIMIT_CPU, &limit) };
        check(
            status.into(),
            "rlimits",
            "setrlimit Cpu (the run's own bound)",
        )?;
    }
    Ok(())
}

/// A real-time scheduling policy of whoever started sf is not the program's: back to the
/// ordinary one (always allowed; the niceness stays, and RLIMIT_NICE keeps it from being
/// lowered).
fn reset_scheduling() -> Step {
    let ordinary = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler of this process with a valid parameter.
    let status = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &ordinary) };
    check(status.into(), "rlimits", "sched_setscheduler(SCHED_OTHER)")?;
    Ok(())
}

/// Enters the command's working directory (the program's directory without a command).
fn enter_working_directory(plan: &Plan, run: &RunPlan) -> Step {
    let cwd = run
        .command
        .as_ref()
        .map_or(&plan.cwd, |command| &command.cwd);
    std::env::set_current_dir(cwd)
        .map_err(|error| Failure::new("mount", format!("chdir {cwd}: {error}")))
}

/// Everything execve needs, allocated now: after seccomp applies, nothing is.
fn prepare_exec(run: &RunPlan, armed: &Armed) -> Step<Exec> {
    let strings = run
        .argv
        .iter()
        .map(|arg| cstring(arg, "exec"))
        .collect::<Step<Vec<_>>>()?;
    let mut argv: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
    argv.push(std::ptr::null());
    let (paths, variables) = match &run.command {
        Some(command) => (
            command
                .candidates
                .iter()
                .map(|path| cstring(path, "exec"))
                .collect::<Step<Vec<_>>>()?,
            command
                .environment
                .iter()
                .map(|(name, value)| cstring(&format!("{name}={value}"), "exec"))
                .collect::<Step<Vec<_>>>()?,
        ),
        None => (vec![armed.path.clone()], Vec::new()),
    };
    let environment = if run.command.is_some() {
        &variables
    } else {
        &armed.environment
    };
    let mut envp: Vec<*const libc::c_char> = environment.iter().map(|s| s.as_ptr()).collect();
    envp.push(std::ptr::null());
    Ok(Exec {
        paths,
        _strings: strings.into_iter().chain(variables).collect(),
        argv,
        envp,
    })
}

/// no_new_privs: no exec can gain a privilege (set-id bits, file capabilities), and seccomp
/// may be installed without any.
fn set_no_new_privileges() -> Step {
    // SAFETY: prctl with integer arguments.
    let status = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    check(status.into(), "no-new-privs", "PR_SET_NO_NEW_PRIVS")?;
    Ok(())
}

/// Restricts this process with the finished Landlock ruleset, and closes it. The ruleset was
/// made with every requested right a hard requirement (its creation fails otherwise), so a
/// restriction that succeeds enforces all of it.
fn restrict_with_landlock(ruleset: RawFd) -> Step {
    // SAFETY: landlock_restrict_self on the ruleset's descriptor, no flags; then closing it.
    let restricted = unsafe {
        let rc = libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32);
        libc::close(ruleset);
        rc
    };
    check(restricted, "landlock", "landlock_restrict_self")?;
    Ok(())
}

/// Installs the seccomp filters, last: they still allow the report write and the exec.
fn install_seccomp_filters(armed: &Armed) -> Step {
    for filter in &armed.filters {
        seccompiler::apply_filter(filter)
            .map_err(|error| Failure::new("seccomp", format!("installing a filter: {error}")))?;
    }
    Ok(())
}

fn drop_capabilities() -> Step {
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
    const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
    const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;
    // SAFETY: prctl with integer arguments.
    unsafe {
        check(
            libc::prctl(
                libc::PR_SET_SECUREBITS,
                SECBIT_NOROOT
                    | SECBIT_NOROOT_LOCKED
                    | SECBIT_NO_SETUID_FIXUP
                    | SECBIT_NO_SETUID_FIXUP_LOCKED
                    | SECBIT_KEEP_CAPS_LOCKED
                    | SECBIT_NO_CAP_AMBIENT_RAISE
                    | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                0,
                0,
                0,
            )
            .into(),
            "capabilities",
            "PR_SET_SECUREBITS",
        )?;
        // Every capability the kernel knows: dropping one past the last fails with EINVAL.
        for capability in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(Failure::last(
                    "capabilities",
                    format!("PR_CAPBSET_DROP {capability}"),
                ));
            }
        }
        check(
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
            .into(),
            "capabilities",
            "PR_CAP_AMBIENT_CLEAR_ALL",
        )?;
    }
    sys::capset_empty().map_err(|error| Failure::new("capabilities", format!("capset: {error}")))
}

/// The ruleset of `plan`, every right a hard requirement, with the rules whose path `include`
/// accepts; and the kernel's Landlock ABI.
fn landlock_ruleset(plan: &Plan, include: impl Fn(&str) -> bool) -> Step<(RulesetCreated, u32)> {
    let kernel_abi = sys::landlock_abi();
    let wanted = plan.landlock.abi;
    if kernel_abi < wanted {
        return Err(Failure::new(
            "landlock",
            format!(
                "the profile needs Landlock ABI {wanted} but the kernel offers {kernel_abi}; \
                 nothing runs with less confinement"
            ),
        ));
    }
    let invalid = |what: &str| Failure::new("landlock", format!("the plan's {what} do not decode"));
    let handled_fs =
        BitFlags::<AccessFs>::from_bits(plan.landlock.handled_fs).map_err(|_| invalid("rights"))?;
    let handled_net = BitFlags::<AccessNet>::from_bits(plan.landlock.handled_net)
        .map_err(|_| invalid("network rights"))?;
    let scopes =
        BitFlags::<Scope>::from_bits(plan.landlock.scopes).map_err(|_| invalid("scopes"))?;
    let error = |error: landlock::RulesetError| Failure::new("landlock", error.to_string());
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled_fs)
        .map_err(error)?
        .handle_access(handled_net)
        .map_err(error)?
        .scope(scopes)
        .map_err(error)?
        .create()
        .map_err(error)?;
    for rule in plan
        .landlock
        .rules
        .iter()
        .filter(|rule| include(&rule.path))
    {
        ruleset = add_rule(ruleset, &rule.path, rule.access)?;
    }
    for port in &plan.landlock.ports {
        let access =
            BitFlags::<AccessNet>::from_bits(port.access).map_err(|_| invalid("port rules"))?;
        ruleset = ruleset
            .add_rule(NetPort::new(port.port, access))
            .map_err(error)?;
    }
    Ok((ruleset, kernel_abi))
}

/// Adds a path-beneath rule for `path` with the `access` bits.
fn add_rule(ruleset: RulesetCreated, path: &str, access: u64) -> Step<RulesetCreated> {
    let access = BitFlags::<AccessFs>::from_bits(access)
        .map_err(|_| Failure::new("landlock", "the plan's rules do not decode"))?;
    let fd =
        PathFd::new(path).map_err(|error| Failure::new("landlock", format!("{path}: {error}")))?;
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|error| Failure::new("landlock", error.to_string()))
}
