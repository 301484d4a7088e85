//! The seccomp filter; its bytes are part of the profile.
//!
//! One filter, assembled here (it used to be three stacked seccompiler filters; one filter
//! with a binary search is much cheaper to install, because the kernel builds its per-call
//! action cache by emulating the filter for every call number, and cheaper per call):
//! - any architecture but x86_64 kills the process;
//! - any call number with the x32 bit kills the process, so that no call slips past under
//!   its x32 number;
//! - ENOSYS for every call number above [`HIGHEST_REVIEWED`]: a call a newer kernel adds is
//!   denied until it has been reviewed (to a program it looks like an older kernel);
//! - EPERM for the calls that reach outside the sandbox or change its confinement: ptrace,
//!   the mount family (open_tree_attr included), unshare, setns, pivot_root, chroot, the key
//!   calls, bpf, perf_event_open, userfaultfd, io_uring (whose operations seccomp cannot see),
//!   fanotify, module and kexec loading, handle opens, cross-process memory access;
//! - EPERM for memory no per-process limit sees and code that bypasses the execute rules:
//!   memfd_create and memfd_secret (a memfd's pages count against no rlimit, and an
//!   executable memfd runs bytes written at run time, past noexec and Landlock), execveat
//!   (fd-based exec), SysV shared memory, message queues and semaphores (segments outlive
//!   their processes within the IPC namespace), POSIX message queues;
//! - EPERM for `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)` (terminal input injection), `clone`
//!   with any namespace flag, `socket`/`socketpair` outside AF_UNIX, AF_INET and AF_INET6 (so
//!   no netlink, packet, vsock or other families) or with a protocol other than the default,
//!   TCP or UDP (so no MPTCP or SCTP, which Landlock's TCP rules do not cover), and
//!   `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` (a connect Landlock does not see);
//! - ENOSYS for clone3, because its flags live in memory seccomp cannot read; C libraries then
//!   fall back to clone, which is checked;
//! - everything else is allowed.
//!
//! A unit test runs the filter on every call number (native and x32), foreign architectures
//! and the argument values that matter, against reference seccompiler filters built from the
//! same lists.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, sock_filter};

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

    /// [`NamedFilter::bytes`] in lowercase hex, as the profile's recipe and the plan carry them
    /// (a table per byte: `hex::encode` goes one character at a time).
    pub fn hex(&self) -> String {
        let bytes = self.bytes();
        let mut text = vec![0; bytes.len() * 2];
        hex::encode_to_slice(&bytes, &mut text).expect("twice as many hex digits as bytes");
        String::from_utf8(text).expect("hex digits are ASCII")
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
    ("open_tree_attr", SYS_OPEN_TREE_ATTR),
    ("quotactl_fd", libc::SYS_quotactl_fd),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("fanotify_mark", libc::SYS_fanotify_mark),
    ("uselib", libc::SYS_uselib),
    ("memfd_create", libc::SYS_memfd_create),
    ("memfd_secret", libc::SYS_memfd_secret),
    ("execveat", libc::SYS_execveat),
    ("shmget", libc::SYS_shmget),
    ("shmat", libc::SYS_shmat),
    ("shmctl", libc::SYS_shmctl),
    ("shmdt", libc::SYS_shmdt),
    ("msgget", libc::SYS_msgget),
    ("msgsnd", libc::SYS_msgsnd),
    ("msgrcv", libc::SYS_msgrcv),
    ("msgctl", libc::SYS_msgctl),
    ("semget", libc::SYS_semget),
    ("semop", libc::SYS_semop),
    ("semctl", libc::SYS_semctl),
    ("semtimedop", libc::SYS_semtimedop),
    ("mq_open", libc::SYS_mq_open),
    ("mq_unlink", libc::SYS_mq_unlink),
    ("mq_timedsend", libc::SYS_mq_timedsend),
    ("mq_timedreceive", libc::SYS_mq_timedreceive),
    ("mq_notify", libc::SYS_mq_notify),
    ("mq_getsetattr", libc::SYS_mq_getsetattr),
];

/// `open_tree_attr` (Linux 6.15), which the libc crate does not name yet.
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// The highest call number reviewed for this filter (`open_tree_attr`, Linux 6.15): every
/// higher one is denied with ENOSYS. Linux 6.17's `file_getattr` (468) and `file_setattr`
/// (469) are above it: no runtime needs them.
pub const HIGHEST_REVIEWED: u32 = 467;

/// The socket protocols allowed (argument 2 of `socket` and `socketpair`): the family's
/// default, TCP and UDP.
pub const ALLOWED_PROTOCOLS: &[(&str, u64)] = &[
    ("default", 0),
    ("IPPROTO_TCP", libc::IPPROTO_TCP as u64),
    ("IPPROTO_UDP", libc::IPPROTO_UDP as u64),
];

/// The send calls whose flags may not carry `MSG_FASTOPEN`, and the flags' argument index.
pub const FAST_OPEN_CALLS: &[(&str, i64, u8)] = &[
    ("sendto", libc::SYS_sendto, 3),
    ("sendmsg", libc::SYS_sendmsg, 2),
    ("sendmmsg", libc::SYS_sendmmsg, 3),
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

/// The one filter applied: see the module documentation.
pub fn filters() -> Result<Vec<NamedFilter>, seccompiler::Error> {
    Ok(vec![NamedFilter {
        name: "merged",
        program: merged(),
    }])
}

/// What the filter answers for one system call number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    /// EPERM, whatever the arguments.
    Deny,
    /// `clone`: EPERM when the flags (argument 0) carry a namespace flag.
    Clone,
    /// `ioctl`: EPERM for the denied requests (argument 1).
    Ioctl,
    /// `socket`, `socketpair`: EPERM outside the allowed families (argument 0) and
    /// protocols (argument 2).
    Socket,
    /// A send call: EPERM when its flags (the argument at this index) carry MSG_FASTOPEN.
    Send(u8),
    /// `clone3`: ENOSYS.
    Clone3,
}

/// Where a jump goes.
#[derive(Clone, Copy, Debug)]
enum Target {
    Next,
    Label(usize),
}

/// One instruction with symbolic jump targets.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A = the 32-bit word at this offset of `seccomp_data`.
    Load(u32),
    JumpEq(u32, Target, Target),
    JumpGe(u32, Target, Target),
    JumpSet(u32, Target, Target),
    Return(u32),
    /// Marks the position of a label (emits nothing).
    Label(usize),
}

/// `offsetof(struct seccomp_data, args[index])`, low half (little-endian).
const fn argument_low(index: u32) -> u32 {
    16 + 8 * index
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;

fn errno(number: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (number as u32 & libc::SECCOMP_RET_DATA)
}

/// Resolves labels into a program; every jump is forward and fits in 8 bits.
fn assemble(ops: &[Op]) -> BpfProgram {
    let mut positions = BTreeMap::new();
    let mut pc = 0usize;
    for op in ops {
        match op {
            Op::Label(label) => {
                positions.insert(*label, pc);
            }
            _ => pc += 1,
        }
    }
    let mut program = Vec::with_capacity(pc);
    for op in ops {
        let here = program.len();
        let offset = |target: &Target| -> u8 {
            match target {
                Target::Next => 0,
                Target::Label(label) => {
                    let to = positions[label];
                    assert!(to > here, "seccomp jumps go forward");
                    u8::try_from(to - here - 1).expect("a seccomp jump fits in 8 bits")
                }
            }
        };
        let (code, jt, jf, k) = match op {
            Op::Label(_) => continue,
            Op::Load(offset) => (BPF_LD_W_ABS, 0, 0, *offset),
            Op::JumpEq(k, t, f) => (BPF_JEQ_K, offset(t), offset(f), *k),
            Op::JumpGe(k, t, f) => (BPF_JGE_K, offset(t), offset(f), *k),
            Op::JumpSet(k, t, f) => (BPF_JSET_K, offset(t), offset(f), *k),
            Op::Return(k) => (BPF_RET_K, 0, 0, *k),
        };
        program.push(sock_filter { code, jt, jf, k });
    }
    program
}

// Labels of the shared blocks at the end of the program.
const ALLOW: usize = 0;
const EPERM: usize = 1;
const KILL: usize = 2;
const ENOSYS: usize = 3;
const CLONE: usize = 4;
const IOCTL: usize = 5;
const SOCKET: usize = 6;
/// `SEND + index`: the send check on the flags at argument `index`.
const SEND: usize = 10;
/// Labels of the search tree's nodes start here.
const TREE: usize = 100;

fn verdict_label(verdict: Verdict) -> usize {
    match verdict {
        Verdict::Deny => EPERM,
        Verdict::Clone => CLONE,
        Verdict::Ioctl => IOCTL,
        Verdict::Socket => SOCKET,
        Verdict::Send(index) => SEND + usize::from(index),
        Verdict::Clone3 => ENOSYS,
    }
}

/// Emits a binary search over `calls` (sorted by number, A = the number): each call jumps
/// to its verdict's block, anything else to ALLOW. Small ranges are a chain of comparisons.
fn search(calls: &[(u32, Verdict)], ops: &mut Vec<Op>, next_label: &mut usize) {
    if calls.len() <= 4 {
        for (number, verdict) in calls {
            ops.push(Op::JumpEq(
                *number,
                Target::Label(verdict_label(*verdict)),
                Target::Next,
            ));
        }
        ops.push(Op::Return(libc::SECCOMP_RET_ALLOW));
        return;
    }
    let middle = calls.len() / 2;
    let upper = *next_label;
    *next_label += 1;
    ops.push(Op::JumpGe(
        calls[middle].0,
        Target::Label(upper),
        Target::Next,
    ));
    search(&calls[..middle], ops, next_label);
    ops.push(Op::Label(upper));
    search(&calls[middle..], ops, next_label);
}

/// The merged filter: the architecture check (anything but x86_64 kills the process), the
/// x32 check (any number with the x32 bit kills the process), then a binary search over the
/// filtered call numbers; every call not listed is allowed.
fn merged() -> BpfProgram {
    let calls = filtered_calls();
    let mut ops = vec![
        Op::Load(4),
        Op::JumpEq(AUDIT_ARCH_X86_64, Target::Next, Target::Label(KILL)),
        Op::Load(0),
        Op::JumpGe(X32_SYSCALL_BIT, Target::Label(KILL), Target::Next),
        Op::JumpGe(HIGHEST_REVIEWED + 1, Target::Label(ENOSYS), Target::Next),
    ];
    let mut next_label = TREE;
    search(&calls, &mut ops, &mut next_label);
    ops.extend(clone_check());
    ops.extend(ioctl_check());
    ops.extend(socket_check());
    ops.extend(send_checks());
    ops.extend([
        Op::Label(EPERM),
        Op::Return(errno(libc::EPERM)),
        Op::Label(ALLOW),
        Op::Return(libc::SECCOMP_RET_ALLOW),
        Op::Label(ENOSYS),
        Op::Return(errno(libc::ENOSYS)),
        Op::Label(KILL),
        Op::Return(libc::SECCOMP_RET_KILL_PROCESS),
    ]);
    assemble(&ops)
}

/// Every call number the filter answers for, sorted, each with its one verdict.
fn filtered_calls() -> Vec<(u32, Verdict)> {
    let mut calls: Vec<(u32, Verdict)> = DENIED
        .iter()
        .map(|(_, number)| (*number as u32, Verdict::Deny))
        .collect();
    calls.extend([
        (libc::SYS_clone as u32, Verdict::Clone),
        (libc::SYS_ioctl as u32, Verdict::Ioctl),
        (libc::SYS_socket as u32, Verdict::Socket),
        (libc::SYS_socketpair as u32, Verdict::Socket),
        (libc::SYS_clone3 as u32, Verdict::Clone3),
    ]);
    calls.extend(
        FAST_OPEN_CALLS
            .iter()
            .map(|(_, number, index)| (*number as u32, Verdict::Send(*index))),
    );
    calls.sort();
    calls.dedup();
    assert!(
        calls.windows(2).all(|pair| pair[0].0 != pair[1].0),
        "one verdict per call"
    );
    calls
}

/// clone: EPERM when the flags carry a namespace flag. The flags are an unsigned long of
/// which the kernel reads the low 32 bits, where every namespace flag is.
fn clone_check() -> Vec<Op> {
    let namespace_mask = CLONE_NAMESPACE_FLAGS
        .iter()
        .fold(0u64, |mask, (_, flag)| mask | flag);
    let namespace_mask = u32::try_from(namespace_mask).expect("namespace flags are 32-bit");
    vec![
        Op::Label(CLONE),
        Op::Load(argument_low(0)),
        Op::JumpSet(namespace_mask, Target::Label(EPERM), Target::Label(ALLOW)),
    ]
}

/// ioctl: EPERM for the denied requests. The request is an unsigned int (the low 32 bits of
/// argument 1).
fn ioctl_check() -> Vec<Op> {
    let mut ops = vec![Op::Label(IOCTL), Op::Load(argument_low(1))];
    for (_, request) in DENIED_IOCTLS {
        let request = u32::try_from(*request).expect("ioctl requests are 32-bit");
        ops.push(Op::JumpEq(request, Target::Label(EPERM), Target::Next));
    }
    ops.push(Op::Return(libc::SECCOMP_RET_ALLOW));
    ops
}

/// socket, socketpair: EPERM outside the allowed families and protocols. The family and the
/// protocol are ints (the low 32 bits of arguments 0 and 2).
fn socket_check() -> Vec<Op> {
    const PROTOCOL: usize = 7;
    let mut ops = vec![Op::Label(SOCKET), Op::Load(argument_low(0))];
    for (_, family) in ALLOWED_FAMILIES {
        let family = u32::try_from(*family).expect("families are 32-bit");
        ops.push(Op::JumpEq(family, Target::Label(PROTOCOL), Target::Next));
    }
    ops.extend([
        Op::Return(errno(libc::EPERM)),
        Op::Label(PROTOCOL),
        Op::Load(argument_low(2)),
    ]);
    for (_, protocol) in ALLOWED_PROTOCOLS {
        let protocol = u32::try_from(*protocol).expect("protocols are 32-bit");
        ops.push(Op::JumpEq(protocol, Target::Label(ALLOW), Target::Next));
    }
    ops.push(Op::Return(errno(libc::EPERM)));
    ops
}

/// Send calls: EPERM when the flags carry MSG_FASTOPEN (a connect Landlock does not see,
/// since it checks `connect`). The flags are an int (the low 32 bits of their argument);
/// one check per argument index.
fn send_checks() -> Vec<Op> {
    let mut indexes: Vec<u8> = FAST_OPEN_CALLS.iter().map(|(_, _, index)| *index).collect();
    indexes.sort_unstable();
    indexes.dedup();
    let mut ops = Vec::new();
    for index in indexes {
        ops.extend([
            Op::Label(SEND + usize::from(index)),
            Op::Load(argument_low(u32::from(index))),
            Op::JumpSet(
                libc::MSG_FASTOPEN as u32,
                Target::Label(EPERM),
                Target::Label(ALLOW),
            ),
        ]);
    }
    ops
}

/// `AUDIT_ARCH_X86_64`.
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;

/// The names of the calls denied outright, for the recipe.
pub fn denied_names() -> Vec<&'static str> {
    DENIED.iter().map(|(name, _)| *name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    fn condition(
        index: u8,
        len: SeccompCmpArgLen,
        op: SeccompCmpOp,
        value: u64,
    ) -> SeccompCondition {
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

    /// The three stacked seccompiler filters this crate applied before the merged one, kept as
    /// the reference the merged filter must agree with.
    fn reference_filters() -> Result<Vec<NamedFilter>, seccompiler::Error> {
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
        let other = |index: u8, allowed: &[(&str, u64)]| {
            rule(
                allowed
                    .iter()
                    .map(|(_, value)| {
                        condition(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *value)
                    })
                    .collect(),
            )
        };
        for call in [libc::SYS_socket, libc::SYS_socketpair] {
            rules.insert(
                call,
                vec![other(0, ALLOWED_FAMILIES), other(2, ALLOWED_PROTOCOLS)],
            );
        }
        for (_, call, index) in FAST_OPEN_CALLS {
            let fast_open = libc::MSG_FASTOPEN as u64;
            rules.insert(
                *call,
                vec![rule(vec![condition(
                    *index,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(fast_open),
                    fast_open,
                )])],
            );
        }
        let deny = compile(rules, SeccompAction::Errno(libc::EPERM as u32))?;

        let mut unknown: BTreeMap<i64, Vec<SeccompRule>> =
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
        unknown.extend((i64::from(HIGHEST_REVIEWED) + 1..1024).map(|nr| (nr, Vec::new())));
        let clone3 = compile(unknown, SeccompAction::Errno(libc::ENOSYS as u32))?;

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

    /// Runs a classic BPF seccomp program on one `seccomp_data` (nr, arch, args).
    fn evaluate(program: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                0 => nr,
                4 => arch,
                8 | 12 => 0,
                16..=63 => {
                    let arg = args[((offset - 16) / 8) as usize];
                    if offset.is_multiple_of(8) {
                        arg as u32
                    } else {
                        (arg >> 32) as u32
                    }
                }
                _ => panic!("load outside seccomp_data: {offset}"),
            }
        };
        let mut a = 0u32;
        let mut pc = 0usize;
        loop {
            let ins = &program[pc];
            pc += 1;
            let jump = |taken: bool| if taken { ins.jt } else { ins.jf } as usize;
            match ins.code {
                0x20 => a = word(ins.k),
                0x15 => pc += jump(a == ins.k),
                0x25 => pc += jump(a > ins.k),
                0x35 => pc += jump(a >= ins.k),
                0x45 => pc += jump(a & ins.k != 0),
                0x05 => pc += ins.k as usize,
                0x06 => return ins.k,
                0x54 => a &= ins.k,
                code => panic!("instruction {code:#x} not modelled"),
            }
        }
    }

    /// The kernel's answer for stacked filters: the most restrictive action wins (kill before
    /// errno before allow), and among errnos the most recently installed filter's.
    fn stacked(filters: &[BpfProgram], nr: u32, arch: u32, args: [u64; 6]) -> u32 {
        let rank = |action: u32| match action & libc::SECCOMP_RET_ACTION_FULL {
            libc::SECCOMP_RET_KILL_PROCESS => 0,
            libc::SECCOMP_RET_KILL_THREAD => 1,
            libc::SECCOMP_RET_ERRNO => 3,
            libc::SECCOMP_RET_ALLOW => 9,
            other => panic!("action {other:#x} not modelled"),
        };
        let mut best = libc::SECCOMP_RET_ALLOW;
        for filter in filters {
            let answer = evaluate(filter, nr, arch, args);
            if rank(answer) <= rank(best) {
                best = answer;
            }
        }
        best
    }

    #[test]
    fn the_merged_filter_answers_as_the_three_stacked_filters() {
        let reference: Vec<BpfProgram> = reference_filters()
            .unwrap()
            .into_iter()
            .map(|filter| filter.program)
            .collect();
        let merged = filters().unwrap();
        assert_eq!(merged.len(), 1);
        let merged = &merged[0].program;
        assert!(
            merged.len() * 2 < reference.iter().map(Vec::len).sum::<usize>(),
            "the merged filter is shorter: {} instructions",
            merged.len()
        );
        let mut values: Vec<u64> =
            vec![0, 1, 2, 10, 16, 17, 38, 40, 0xffff_ffff, 1 << 32, u64::MAX];
        values.extend(CLONE_NAMESPACE_FLAGS.iter().map(|(_, flag)| *flag));
        values.extend(
            CLONE_NAMESPACE_FLAGS
                .iter()
                .map(|(_, flag)| *flag | (1 << 40)),
        );
        values.extend(
            CLONE_NAMESPACE_FLAGS
                .iter()
                .map(|(_, flag)| *flag | libc::SIGCHLD as u64),
        );
        values.extend(DENIED_IOCTLS.iter().map(|(_, request)| *request));
        values.extend(
            DENIED_IOCTLS
                .iter()
                .map(|(_, request)| *request | (7 << 32)),
        );
        values.extend(
            ALLOWED_FAMILIES
                .iter()
                .map(|(_, family)| *family | (1 << 33)),
        );
        values.extend(
            ALLOWED_PROTOCOLS
                .iter()
                .map(|(_, protocol)| *protocol | (1 << 34)),
        );
        values.extend([
            262,
            132,
            libc::MSG_FASTOPEN as u64,
            libc::MSG_FASTOPEN as u64 | libc::MSG_DONTWAIT as u64,
        ]);
        values.extend(0..48);
        let arches = [AUDIT_ARCH_X86_64, 0x4000_0003, 0];
        let numbers = (0u32..1024)
            .chain((0u32..1024).map(|nr| nr | X32_SYSCALL_BIT))
            .chain([u32::MAX, 0x8000_0000]);
        let mut checked = 0;
        for nr in numbers {
            for arch in arches {
                let argument_sensitive = [
                    libc::SYS_clone,
                    libc::SYS_ioctl,
                    libc::SYS_socket,
                    libc::SYS_socketpair,
                    libc::SYS_sendto,
                    libc::SYS_sendmsg,
                    libc::SYS_sendmmsg,
                ]
                .contains(&(nr as i64))
                    && arch == AUDIT_ARCH_X86_64;
                let samples: &[u64] = if argument_sensitive {
                    &values
                } else {
                    &[0, u64::MAX]
                };
                for &first in samples {
                    for &second in samples {
                        // Arguments 2 and 3 matter to socket (protocol) and the send
                        // calls (flags): they take the samples too.
                        let args = [first, second, second, first, 0, 0];
                        assert_eq!(
                            evaluate(merged, nr, arch, args),
                            stacked(&reference, nr, arch, args),
                            "nr {nr:#x} arch {arch:#x} args {first:#x} {second:#x}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }

    #[test]
    fn filters_compile_deterministically_and_round_trip() {
        let first = filters().unwrap();
        let second = filters().unwrap();
        assert_eq!(first, second);
        for filter in &first {
            assert_eq!(decode(&filter.bytes()).unwrap(), filter.program);
            assert_eq!(filter.hex(), hex::encode(filter.bytes()));
        }
        assert!(decode(&[0; 7]).is_none());
        assert!(decode(&[]).is_none());
    }
}
