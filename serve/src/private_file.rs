//! Files only the user sf serve runs as may read: the bearer tokens and the TLS private key.
//! Whoever can read either can act as the server or as its clients, and whoever can replace
//! either decides who they are; so each must be a regular file (not a symbolic link someone
//! could point elsewhere), owned by this user or root, with no access for group or others.

use std::fs::File;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Reads the private file at `path` whole (at most `limit` bytes). `named` starts every error
/// (`[serve] tokens /etc/sf/tokens`), and `create` says how to make the file when it is
/// missing; each error names what is wrong and the fix.
pub fn read(path: &Path, named: &str, create: &str, limit: u64) -> Result<Vec<u8>, String> {
    let file = open(path, named, create)?;
    // The checks are made on the file opened, not on the name, so that nothing can swap it
    // between the check and the read.
    let meta = file
        .metadata()
        .map_err(|error| format!("{named}: cannot be examined ({error})"))?;
    if !meta.is_file() {
        return Err(format!("{named}: not a regular file; give the file itself"));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid && meta.uid() != 0 {
        return Err(format!(
            "{named}: owned by uid {}, neither this user ({euid}) nor root, who could change \
             it; run `chown {euid} {}`",
            meta.uid(),
            path.display()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{named}: mode {:o} lets others read or change it; run `chmod 600 {}`",
            meta.mode() & 0o777,
            path.display()
        ));
    }
    read_at_most(file, named, limit)
}

/// Opens `path` without following a symbolic link at its end, and without waiting for a
/// writer should it be a FIFO (that is refused once it is open).
fn open(path: &Path, named: &str, create: &str) -> Result<File, String> {
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(code) if code == nix::errno::Errno::ELOOP as i32 => format!(
                "{named}: a symbolic link; name the file itself, which only this user may read"
            ),
            _ => format!("{named}: cannot be read ({error}); {create}"),
        })
}

/// The bytes of `file`, refused when there are more than `limit`.
pub fn read_at_most(file: File, named: &str, limit: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("{named}: cannot be read ({error})"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{named}: larger than {limit} bytes; give the file itself"
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn with_mode(dir: &Path, mode: u32) -> std::path::PathBuf {
        let path = dir.join(format!("file-{mode:o}"));
        std::fs::write(&path, b"secret").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn only_a_private_regular_file_of_this_user_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let private = with_mode(dir.path(), 0o600);
        assert_eq!(read(&private, "f", "make it", 64).unwrap(), b"secret");
        for mode in [0o640, 0o604, 0o644, 0o660] {
            let error = read(&with_mode(dir.path(), mode), "f", "make it", 64).unwrap_err();
            assert!(error.contains(&format!("mode {mode:o}")), "{error}");
            assert!(error.contains("chmod 600"), "{error}");
        }
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        let error = read(&link, "f", "make it", 64).unwrap_err();
        assert!(error.contains("symbolic link"), "{error}");
        let error = read(dir.path(), "f", "make it", 64).unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
        let error = read(&dir.path().join("missing"), "f", "make it", 64).unwrap_err();
        assert!(
            error.starts_with("f: cannot be read") && error.ends_with("make it"),
            "{error}"
        );
        let error = read(&private, "f", "make it", 3).unwrap_err();
        assert!(error.contains("larger than 3 bytes"), "{error}");
    }
}
