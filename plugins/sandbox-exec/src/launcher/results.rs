//! Reading a command's results file out of the run's scratch space, by the init, once every
//! other process of the run has ended (so nothing changes the file while it is read).
//!
//! Everything under scratch is the program's: the path may cross a symbolic link, name a
//! directory, a FIFO that would block, or a file of any size. The file is opened with
//! `openat2` beneath the scratch directory, refusing every link, magic link and mount
//! crossing, without blocking, and is kept only when it is a regular file of at most the
//! bytes asked for; anything else is reported as refused with the reason.

use std::ffi::CString;

use crate::plan::ResultsSeen;

/// Reads `path` (relative) beneath the directory `scratch`, keeping at most `max_bytes`.
pub fn read(scratch: &str, path: &str, max_bytes: u64) -> ResultsSeen {
    let (Ok(scratch), Ok(name)) = (CString::new(scratch), CString::new(path)) else {
        return ResultsSeen::Refused("the path holds a NUL".to_owned());
    };
    // SAFETY: opening a directory by a valid C string.
    let dir = unsafe {
        libc::open(
            scratch.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return ResultsSeen::Refused(format!(
            "the scratch directory: {}",
            std::io::Error::last_os_error()
        ));
    }
    let seen = read_beneath(dir, &name, max_bytes);
    // SAFETY: our own descriptor.
    unsafe { libc::close(dir) };
    seen
}

/// The kernel's `struct open_how` (libc's is not constructible).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

fn read_beneath(dir: libc::c_int, name: &CString, max_bytes: u64) -> ResultsSeen {
    let how = OpenHow {
        flags: (libc::O_RDONLY
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_NOCTTY
            | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH
            | libc::RESOLVE_NO_SYMLINKS
            | libc::RESOLVE_NO_MAGICLINKS
            | libc::RESOLVE_NO_XDEV,
    };
    // SAFETY: openat2 with a valid directory, C string and open_how of its own size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            name.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::ENOENT) => ResultsSeen::Absent,
            Some(libc::ELOOP) => ResultsSeen::Refused(
                "the path is or crosses a symbolic link, which is not followed".to_owned(),
            ),
            Some(libc::ENOTDIR) => {
                ResultsSeen::Refused("a component of the path is not a directory".to_owned())
            }
            _ => ResultsSeen::Refused(format!("opening it: {error}")),
        };
    }
    let fd = fd as libc::c_int;
    let seen = read_file(fd, max_bytes);
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    seen
}

fn read_file(fd: libc::c_int, max_bytes: u64) -> ResultsSeen {
    // SAFETY: a zeroed stat is a valid value, to be overwritten.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat of our own descriptor into a stat we own.
    let status = unsafe { libc::fstat(fd, &mut stat) };
    if status != 0 {
        return ResultsSeen::Refused(format!("fstat: {}", std::io::Error::last_os_error()));
    }
    if stat.st_mode & libc::S_IFMT != libc::S_IFREG {
        return ResultsSeen::Refused("it is not a regular file".to_owned());
    }
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if size > max_bytes {
        return ResultsSeen::Refused(format!(
            "it holds {size} bytes, more than the {max_bytes} kept"
        ));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    let mut buffer = [0u8; 64 * 1024];
    loop {
        // SAFETY: reading into our own buffer.
        let read = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        match read {
            0 => break,
            n if n > 0 => {
                bytes.extend_from_slice(&buffer[..n as usize]);
                if bytes.len() as u64 > max_bytes {
                    return ResultsSeen::Refused(format!(
                        "it holds more than the {max_bytes} bytes kept"
                    ));
                }
            }
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => {
                return ResultsSeen::Refused(format!(
                    "reading it: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
    }
    ResultsSeen::Written(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_beneath_without_links_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/r.xml"), b"<testsuites/>").unwrap();
        assert_eq!(
            read(root, "out/r.xml", 100),
            ResultsSeen::Written(b"<testsuites/>".to_vec())
        );
        assert_eq!(read(root, "missing.xml", 100), ResultsSeen::Absent);
        assert!(matches!(
            read(root, "out/r.xml", 5),
            ResultsSeen::Refused(_)
        ));
        assert!(matches!(read(root, "out", 100), ResultsSeen::Refused(_)));
        std::os::unix::fs::symlink("out/r.xml", dir.path().join("link.xml")).unwrap();
        assert!(matches!(
            read(root, "link.xml", 100),
            ResultsSeen::Refused(_)
        ));
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        assert!(matches!(
            read(root, "etc/hostname", 100),
            ResultsSeen::Refused(_)
        ));
        assert!(matches!(read(root, "../x", 100), ResultsSeen::Refused(_)));
        nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(read(root, "fifo", 100), ResultsSeen::Refused(_)));
    }
}
