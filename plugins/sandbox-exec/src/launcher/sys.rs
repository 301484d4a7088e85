//! Thin wrappers over the system calls the launcher needs that neither std nor nix wraps
//! (the new mount API, pidfd, close_range, capset), and the error type that names the
//! mechanism a failing call belongs to.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::path::Path;

/// A setup step that failed: which confinement mechanism, and what happened.
#[derive(Debug)]
pub struct Failure {
    pub mechanism: &'static str,
    pub detail: String,
}

impl Failure {
    pub fn new(mechanism: &'static str, detail: impl Into<String>) -> Self {
        Self {
            mechanism,
            detail: detail.into(),
        }
    }

    /// The failure of the call just made, with errno.
    pub fn last(mechanism: &'static str, what: impl AsRef<str>) -> Self {
        Self::new(
            mechanism,
            format!("{}: {}", what.as_ref(), io::Error::last_os_error()),
        )
    }
}

pub type Step<T = ()> = Result<T, Failure>;

/// Checks a libc return value: -1 is a failure of `what`.
pub fn check(
    rc: libc::c_long,
    mechanism: &'static str,
    what: impl AsRef<str>,
) -> Step<libc::c_long> {
    if rc == -1 {
        Err(Failure::last(mechanism, what))
    } else {
        Ok(rc)
    }
}

pub fn cstring(text: &str, mechanism: &'static str) -> Step<CString> {
    CString::new(text).map_err(|_| Failure::new(mechanism, format!("{text:?} holds a NUL")))
}

pub fn cpath(path: &Path, mechanism: &'static str) -> Step<CString> {
    cstring(
        path.to_str()
            .ok_or_else(|| Failure::new(mechanism, format!("{} is not UTF-8", path.display())))?,
        mechanism,
    )
}

pub const OPEN_TREE_CLONE: libc::c_uint = 1;
pub const AT_RECURSIVE: libc::c_uint = 0x8000;
pub const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A detached copy of the mount tree at `path` (a bind mount not yet attached anywhere).
pub fn open_tree_clone(path: &CStr) -> io::Result<RawFd> {
    open_tree_clone_at(libc::AT_FDCWD, path)
}

/// As [`open_tree_clone`], with `path` relative to the directory `dir` (a name in it).
pub fn open_tree_clone_at(dir: RawFd, path: &CStr) -> io::Result<RawFd> {
    // SAFETY: a valid C string and flags; the kernel returns a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dir,
            path.as_ptr(),
            OPEN_TREE_CLONE
                | libc::O_CLOEXEC as libc::c_uint
                | AT_RECURSIVE
                | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as RawFd)
    }
}

/// Sets mount attributes on the mount at `fd` (with `path` empty) or at `path`.
pub fn mount_setattr(fd: RawFd, path: &CStr, flags: libc::c_uint, set: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `attr` lives across the call and its size is passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Attaches the detached tree `fd` at `target`.
pub fn move_mount(fd: RawFd, target: &CStr) -> io::Result<()> {
    // SAFETY: valid descriptor and C strings.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn mount(
    source: &CStr,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    // SAFETY: valid C strings or null pointers, as mount(2) accepts.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.map_or(std::ptr::null(), CStr::as_ptr),
            flags,
            data.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn close_range(first: libc::c_uint, last: libc::c_uint) {
    if first > last {
        return;
    }
    // SAFETY: closing descriptors this process owns; nothing refers to them afterwards.
    unsafe {
        libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint);
    }
}

pub fn pidfd_open(pid: libc::pid_t) -> io::Result<RawFd> {
    // SAFETY: plain integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as RawFd)
    }
}

/// SIGKILL to the process a pidfd names (and no later process with its pid).
pub fn pidfd_kill(pidfd: RawFd) {
    // SAFETY: pidfd_send_signal with a pidfd and no siginfo; a stale pidfd fails harmlessly.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd,
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        );
    }
}

pub fn pivot_root_here() -> io::Result<()> {
    // SAFETY: valid C strings.
    let rc = unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Empties the effective, permitted and inheritable capability sets.
pub fn capset_empty() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: the header and two data words live across the call, as version 3 requires.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The running kernel's Landlock ABI version (0 when Landlock is unavailable).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no ruleset.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).unwrap_or(0)
}

/// Writes all of `bytes` to `fd`, retrying on EINTR; errors are ignored, because the reader
/// judges a missing report itself.
pub fn write_all(fd: RawFd, bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: a valid buffer of the given length.
        let written = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if written < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        rest = &rest[written as usize..];
    }
}

/// Ends this process at once, without running destructors or flushing anything shared.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit is always safe to call.
    unsafe { libc::_exit(code) }
}

/// The stack of a process started by [`spawn_until_exec`].
const SPAWN_STACK_BYTES: usize = 1 << 20;

/// Starts a process that shares this one's memory until it execs (`CLONE_VM | CLONE_VFORK`, as
/// `posix_spawn` does) and runs `child` in it on a stack of its own; this process waits until
/// the child has exec'd or exited. Returns the child's pid.
///
/// Why: a forked child gets a copy-on-write copy of this process's memory, whose page tables
/// cost time to copy and whose teardown at exec costs again, which on a virtual machine is a
/// large part of starting a short program. Only memory is shared: the child has its own
/// descriptor table, signal handlers, credentials, Landlock domain and seccomp filters, so
/// whatever it confines is its own. `child` should exec or exit (should it return, the child
/// exits with 127), and this process must be single-threaded (it is suspended while the child
/// runs in its memory).
pub fn spawn_until_exec(child: &mut dyn FnMut()) -> Step<libc::pid_t> {
    extern "C" fn trampoline(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `&mut &mut dyn FnMut()` passed below, alive while the parent
        // is suspended.
        let child = unsafe { &mut *arg.cast::<&mut dyn FnMut()>() };
        child();
        exit_now(127)
    }
    // SAFETY: an anonymous private mapping for the child's stack, unmapped once it exec'd.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SPAWN_STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(Failure::last(
            "pid-namespace",
            "a stack for the program's process",
        ));
    }
    let mut child = child;
    // SAFETY: clone with a valid function, the top of a valid stack, and an argument that
    // outlives the child's use of it (CLONE_VFORK suspends us until it execs or exits).
    let pid = unsafe {
        libc::clone(
            trampoline,
            stack.cast::<u8>().add(SPAWN_STACK_BYTES).cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut child as *mut &mut dyn FnMut()).cast(),
        )
    };
    let failed = (pid < 0).then(|| Failure::last("pid-namespace", "clone of the program"));
    // SAFETY: the child no longer uses the stack: it has exec'd or exited.
    unsafe { libc::munmap(stack, SPAWN_STACK_BYTES) };
    match failed {
        Some(failure) => Err(failure),
        None => Ok(pid),
    }
}
