//! The seccomp filters, compiled once with seccompiler; their bytes are part of the profile.
//!
//! Three filters are stacked (the kernel applies the most restrictive answer):
//! - `deny`: everything is allowed except the calls that reach outside the sandbox or change
//!   its confinement, which fail with EPERM: ptrace, the mount family, unshare, setns,
//!   pivot_root, chroot, the key calls, bpf, perf_event_open, userfaultfd, io_uring (whose
//!   operations seccomp cannot see), module and kexec loading, handle opens, cross-process
//!   memory access, `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)` (terminal input injection),
//!   `clone` with any namespace flag, and `socket`/`socketpair` outside AF_UNIX, AF_INET and
//!   AF_INET6 (so no netlink, packet, vsock or other families);
//! - `clone3`: clone3 fails with ENOSYS, because its flags live in memory seccomp cannot
//!   read; C libraries then fall back to clone, which the first filter checks;
//! - `x32`: a system call number with the x32 bit kills the process, so that no call slips
//!   past the first two under its x32 number (seccompiler checks only the architecture).
//!
//! Every filter kills the process on a foreign architecture (seccompiler's prologue).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// One compiled filter and its name in the profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedFilter {
    pub name: &'static str,
    pub program: BpfProgram,
}

impl NamedFilter {
    /// The filter's instructions as the kernel reads them: 8 bytes each (code u16, jt u8,
    /// jf u8, k u32, little-endian on x86_64).
    pub fn bytes(&self) -> Vec<u8> {
        encode(&self.program)
    }
}

/// Encodes instructions as bytes.
pub fn encode(program: &[sock_filter]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_le_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_le_bytes());
    }
    bytes
}

/// Decodes bytes made by [`encode`]; `None` when the length is not a multiple of 8 or the
/// program is empty or longer than the kernel accepts.
pub fn decode(bytes: &[u8]) -> Option<BpfProgram> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(8) || bytes.len() / 8 > 4096 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(8)
            .map(|chunk| sock_filter {
                code: u16::from_le_bytes([chunk[0], chunk[1]]),
                jt: chunk[2],
                jf: chunk[3],
                k: u32::from_le_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
            })
            .collect(),
    )
}

/// The calls denied outright.
const DENIED: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("vhangup", libc::SYS_vhangup),
];

/// The namespace flags `clone` may not carry.
pub const CLONE_NAMESPACE_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWNS", libc::CLONE_NEWNS as u64),
    ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP as u64),
    ("CLONE_NEWUTS", libc::CLONE_NEWUTS as u64),
    ("CLONE_NEWIPC", libc::CLONE_NEWIPC as u64),
    ("CLONE_NEWUSER", libc::CLONE_NEWUSER as u64),
    ("CLONE_NEWPID", libc::CLONE_NEWPID as u64),
    ("CLONE_NEWNET", libc::CLONE_NEWNET as u64),
];

/// The ioctl requests denied: terminal input injection.
pub const DENIED_IOCTLS: &[(&str, u64)] =
    &[("TIOCSTI", libc::TIOCSTI), ("TIOCLINUX", libc::TIOCLINUX)];

/// The socket families allowed.
pub const ALLOWED_FAMILIES: &[(&str, u64)] = &[
    ("AF_UNIX", libc::AF_UNIX as u64),
    ("AF_INET", libc::AF_INET as u64),
    ("AF_INET6", libc::AF_INET6 as u64),
];

/// The x32 system call bit.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn condition(index: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(index, len, op, value).expect("a valid argument index")
}

fn rule(conditions: Vec<SeccompCondition>) -> SeccompRule {
    SeccompRule::new(conditions).expect("a non-empty condition list")
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    match_action: SeccompAction,
) -> Result<BpfProgram, seccompiler::Error> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        match_action,
        TargetArch::x86_64,
    )?;
    Ok(filter.try_into()?)
}

/// Compiles the three filters, in the order they are applied.
pub fn filters() -> Result<Vec<NamedFilter>, seccompiler::Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .map(|(_, number)| (*number, Vec::new()))
        .collect();
    rules.insert(
        libc::SYS_clone,
        CLONE_NAMESPACE_FLAGS
            .iter()
            .map(|(_, flag)| {
                rule(vec![condition(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(*flag),
                    *flag,
                )])
            })
            .collect(),
    );
    rules.insert(
        libc::SYS_ioctl,
        DENIED_IOCTLS
            .iter()
            .map(|(_, request)| {
                rule(vec![condition(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    *request,
                )])
            })
            .collect(),
    );
    let other_family = || {
        rule(
            ALLOWED_FAMILIES
                .iter()
                .map(|(_, family)| condition(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *family))
                .collect(),
        )
    };
    rules.insert(libc::SYS_socket, vec![other_family()]);
    rules.insert(libc::SYS_socketpair, vec![other_family()]);
    let deny = compile(rules, SeccompAction::Errno(libc::EPERM as u32))?;

    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Errno(libc::ENOSYS as u32),
    )?;

    // seccompiler's own prologue (the architecture check) followed by the x32 check.
    let mut x32 = compile(BTreeMap::new(), SeccompAction::KillProcess)?;
    let allow = x32.pop().expect("a filter ends in its default action");
    x32.extend([
        // A = seccomp_data.nr
        sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        },
        // if A >= X32_SYSCALL_BIT: kill the process, else allow
        sock_filter {
            code: 0x35,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_KILL_PROCESS,
        },
        allow,
    ]);

    Ok(vec![
        NamedFilter {
            name: "deny",
            program: deny,
        },
        NamedFilter {
            name: "clone3",
            program: clone3,
        },
        NamedFilter {
            name: "x32",
            program: x32,
        },
    ])
}

/// The names of the calls denied outright, for the recipe.
pub fn denied_names() -> Vec<&'static str> {
    DENIED.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_deterministically_and_round_trip() {
        let first = filters().unwrap();
        let second = filters().unwrap();
        assert_eq!(first, second);
        for filter in &first {
            assert_eq!(decode(&filter.bytes()).unwrap(), filter.program);
        }
        assert!(decode(&[0; 7]).is_none());
        assert!(decode(&[]).is_none());
    }
}
