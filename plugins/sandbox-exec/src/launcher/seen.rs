//! What the namespace's init sees of the limits a run hit: the ends of the processes it
//! reaps (its program's first process, and every orphan that ended before it) and how full
//! the scratch is when that first process has ended.
//!
//! - a process ended by SIGXFSZ wrote past the file-size rlimit;
//! - a process ended by SIGXCPU reached the CPU rlimit's soft limit, and one ended by SIGKILL
//!   after at least that much CPU time its hard limit (one second later);
//! - a scratch with no free block, or no free inode, was full.
//!
//! A process reaped by its own parent (a shell's child, say) is not seen here; its parent
//! sees how it ended. The control group's counters (processes, memory) are read by the
//! supervisor, outside the sandbox.

use std::ffi::CString;
use std::os::fd::RawFd;

use crate::plan::{Plan, Report, Resource};

/// The counts the init keeps while it reaps.
pub struct Seen {
    /// The CPU rlimit's soft limit, in seconds (`None`: the plan sets none).
    cpu_seconds: Option<u64>,
    file_size_ends: u32,
    cpu_signal_ends: u32,
    cpu_kill_ends: u32,
    /// An `O_PATH` descriptor of the scratch's root, opened once it was mounted (`-1`: none).
    scratch: RawFd,
}

impl Seen {
    /// Nothing seen yet, for a run of `plan` whose scratch is mounted.
    pub fn new(plan: &Plan) -> Self {
        let cpu_seconds = plan
            .rlimits
            .iter()
            .find(|(resource, _, _)| *resource == Resource::Cpu)
            .map(|(_, soft, _)| *soft);
        let scratch = CString::new(plan.scratch_dir.as_str())
            .ok()
            .map_or(-1, |path| {
                // SAFETY: a valid C string; the descriptor is only ever given to fstatfs.
                unsafe {
                    libc::open(
                        path.as_ptr(),
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    )
                }
            });
        Self {
            cpu_seconds,
            file_size_ends: 0,
            cpu_signal_ends: 0,
            cpu_kill_ends: 0,
            scratch,
        }
    }

    /// Counts how a reaped process ended: its wait `status` and resource `usage`.
    pub fn reaped(&mut self, status: libc::c_int, usage: &libc::rusage) {
        if !libc::WIFSIGNALED(status) {
            return;
        }
        let seconds = |time: libc::timeval| time.tv_sec.max(0) as u64;
        match libc::WTERMSIG(status) {
            libc::SIGXFSZ => self.file_size_ends = self.file_size_ends.saturating_add(1),
            libc::SIGXCPU => self.cpu_signal_ends = self.cpu_signal_ends.saturating_add(1),
            libc::SIGKILL
                if self.cpu_seconds.is_some_and(|limit| {
                    seconds(usage.ru_utime).saturating_add(seconds(usage.ru_stime)) >= limit
                }) =>
            {
                self.cpu_kill_ends = self.cpu_kill_ends.saturating_add(1);
            }
            _ => {}
        }
    }

    /// The `hit` reports of what was seen, the scratch's fill read now.
    pub fn reports(&self) -> Vec<Report> {
        let mut reports = Vec::new();
        let hit = |limit: &str, detail: String| Report::Hit {
            limit: limit.to_owned(),
            detail,
        };
        if self.file_size_ends > 0 {
            reports.push(hit(
                "file-size",
                format!("SIGXFSZ ended {}", processes(self.file_size_ends)),
            ));
        }
        let mut cpu = Vec::new();
        if self.cpu_signal_ends > 0 {
            cpu.push(format!("SIGXCPU ended {}", processes(self.cpu_signal_ends)));
        }
        if self.cpu_kill_ends > 0 {
            cpu.push(format!(
                "SIGKILL ended {} after the CPU limit's time",
                processes(self.cpu_kill_ends)
            ));
        }
        if !cpu.is_empty() {
            reports.push(hit("cpu-time", cpu.join("; ")));
        }
        if self.scratch >= 0 {
            // SAFETY: zeroed statfs is a valid value to be overwritten.
            let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
            // SAFETY: our own descriptor and a valid statfs.
            if unsafe { libc::fstatfs(self.scratch, &mut fs) } == 0 {
                if fs.f_blocks > 0 && fs.f_bfree == 0 {
                    reports.push(hit(
                        "scratch",
                        "the scratch had no free block when the program's first process ended"
                            .to_owned(),
                    ));
                }
                if fs.f_files > 0 && fs.f_ffree == 0 {
                    reports.push(hit(
                        "scratch-files",
                        "the scratch had no free inode when the program's first process ended"
                            .to_owned(),
                    ));
                }
            }
        }
        reports
    }
}

fn processes(count: u32) -> String {
    if count == 1 {
        "1 process".to_owned()
    } else {
        format!("{count} processes")
    }
}
