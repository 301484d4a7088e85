//! A plugin library as it is mapped: read once through a descriptor into a sealed in-memory
//! copy, checked there, and opened from there.
//!
//! `dlopen` of a path maps the file: a file truncated while mapped kills the process with
//! SIGBUS on the next page fault beyond its new end, a file changed in place changes the code
//! that runs, and a file replaced between a check and the `dlopen` is not the file checked.
//! So the library is opened once (no link followed), its bytes copied into a `memfd` that is
//! then sealed against shrinking, growing and writing (`F_SEAL_SHRINK | F_SEAL_GROW |
//! F_SEAL_WRITE | F_SEAL_SEAL`): every check below reads the sealed copy, and `dlopen` maps it
//! (`/proc/self/fd/N`). The copy cannot shrink, so no page fault of the mapped library can
//! SIGBUS; it cannot change, so what was checked is what runs; the file on disk may be
//! truncated, rewritten or replaced afterwards without effect on a loaded plugin.
//!
//! The checks on the copy: every byte range its ELF headers name (the program header table,
//! each segment's file bytes, the section header table) lies inside it, so `dlopen` never maps
//! past its end; and its SHA-256, computed on demand (for a pin in `sf.toml`, or for `sf plugins
//! check`). Only 64-bit little-endian ELF files (what this host loads) are measured; any other
//! file is left to the dynamic loader, which refuses it with its own message and maps nothing.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest as _, Sha256};

use crate::canonical::Digest;

/// The size of an ELF64 file header.
const HEADER_BYTES: usize = 64;
/// The size of one ELF64 program header.
const PROGRAM_HEADER_BYTES: u64 = 56;
/// The most program headers read (real libraries have about a dozen).
const MAX_PROGRAM_HEADERS: u64 = 4096;
/// The largest library copied (a debug build of a plugin is some tens of MiB).
pub const MAX_LIBRARY_BYTES: u64 = 1 << 30;

/// How a library file falls short of what its headers name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncated {
    /// The file's length in bytes.
    pub bytes: u64,
    /// What lies beyond it: which part and the end it needs.
    pub detail: String,
}

/// Why a library could not be copied and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// The copy holds fewer bytes than its ELF headers name.
    Truncated(Truncated),
    /// The file cannot be read, changed while it was read, or is too large; or the copy cannot
    /// be made.
    Unreadable(String),
}

/// A library's bytes in a sealed `memfd`: they can neither shrink, grow nor change.
#[derive(Debug)]
pub struct SealedLibrary {
    copy: File,
    bytes: u64,
    sha256: OnceLock<Result<Digest, String>>,
}

impl SealedLibrary {
    /// Copies `source` (an open regular file, read from its start) into a sealed `memfd` named
    /// after `name`, and checks that the copy holds every byte its ELF headers name. The file
    /// must not change while it is copied (its size, modification time and change time are
    /// compared before and after).
    pub fn copy(source: &File, name: &str) -> Result<Self, CopyError> {
        let unreadable = |what: &str, error: &dyn std::fmt::Display| {
            CopyError::Unreadable(format!("{what}: {error}"))
        };
        let before = source
            .metadata()
            .map_err(|error| unreadable("its metadata", &error))?;
        if before.len() > MAX_LIBRARY_BYTES {
            return Err(CopyError::Unreadable(format!(
                "it holds {} bytes, more than the {MAX_LIBRARY_BYTES} a plugin library may",
                before.len()
            )));
        }
        let memfd = rustix::fs::memfd_create(
            format!("sf-plugin:{name}"),
            rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
        )
        .map_err(|error| unreadable("an in-memory copy cannot be made", &error))?;
        let mut copy = File::from(memfd);
        // `io::copy` between two files lets the kernel move the bytes (sendfile), so the copy
        // costs no buffer of ours; the bound stops a file that grows while it is read.
        let copied = std::io::copy(&mut source.take(MAX_LIBRARY_BYTES + 1), &mut copy)
            .map_err(|error| unreadable("reading it", &error))?;
        let after = source
            .metadata()
            .map_err(|error| unreadable("its metadata", &error))?;
        if copied != before.len()
            || after.len() != before.len()
            || after.mtime() != before.mtime()
            || after.mtime_nsec() != before.mtime_nsec()
            || after.ctime() != before.ctime()
            || after.ctime_nsec() != before.ctime_nsec()
        {
            return Err(CopyError::Unreadable(format!(
                "it changed while it was read ({} bytes before, {copied} read, {} after): load \
                 it again once it is written",
                before.len(),
                after.len()
            )));
        }
        seal_copy(&copy).map_err(|error| unreadable("sealing its in-memory copy", &error))?;
        let sealed = Self {
            copy,
            bytes: copied,
            sha256: OnceLock::new(),
        };
        check_whole(&sealed.copy, sealed.bytes).map_err(|problem| match problem {
            Ok(truncated) => CopyError::Truncated(truncated),
            Err(detail) => CopyError::Unreadable(detail),
        })?;
        Ok(sealed)
    }

    /// The path `dlopen` maps the copy by. It names the copy's descriptor, which stays open
    /// as long as this value lives (a loaded library's is never dropped), so the name is never
    /// reused for another library while the dynamic loader remembers it.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.copy.as_raw_fd()))
    }

    /// The copy's length in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The `sha256:` of the copy, computed once.
    pub fn sha256(&self) -> Result<&Digest, String> {
        self.sha256
            .get_or_init(|| {
                let mut hasher = Sha256::new();
                let mut buffer = vec![0; 1 << 20];
                let mut at = 0;
                while at < self.bytes {
                    let read = self
                        .copy
                        .read_at(&mut buffer, at)
                        .map_err(|error| format!("reading its copy: {error}"))?;
                    if read == 0 {
                        return Err("its sealed copy ended early".into());
                    }
                    hasher.update(&buffer[..read]);
                    at += read as u64;
                }
                Ok(Digest::from_bytes(hasher.finalize().into()))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The `sha256:` of the file at `path`, read once (what `sf plugins list` shows, without
/// opening the library).
pub fn file_sha256(path: &Path) -> Result<Digest, String> {
    let mut file = File::open(path).map_err(|error| error.to_string())?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|error| error.to_string())?;
    Ok(Digest::from_bytes(hasher.finalize().into()))
}

/// Checks that `file`, of `bytes` bytes, holds every byte its ELF headers name. `Err(Ok(truncated))`
/// when it does not, `Err(Err(detail))` when it cannot be read; `Ok` also for a file that is not
/// ELF64 little-endian.
fn check_whole(file: &File, bytes: u64) -> Result<(), Result<Truncated, String>> {
    let short = |detail: String| Err(Ok(Truncated { bytes, detail }));
    // Read at offsets, never through the descriptor's position (the copy's is at its end).
    let mut header = vec![0; HEADER_BYTES.min(bytes as usize)];
    file.read_exact_at(&mut header, 0)
        .map_err(|error| Err(error.to_string()))?;
    if header.starts_with(b"\x7fELF") && header.len() < HEADER_BYTES {
        return short(format!("the ELF header needs {HEADER_BYTES} bytes"));
    }
    // `\x7fELF`, class 2 (64-bit), data 1 (little-endian).
    if !header.starts_with(b"\x7fELF\x02\x01") {
        return Ok(());
    }
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([header[at], header[at + 1]]));
    let u64_at = |at: usize| {
        let mut word = [0; 8];
        word.copy_from_slice(&header[at..at + 8]);
        u64::from_le_bytes(word)
    };
    let (phoff, shoff) = (u64_at(0x20), u64_at(0x28));
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    let (shentsize, shnum) = (u16_at(0x3a), u16_at(0x3c));
    let ends = |what: &str, offset: u64, length: u64| match offset.checked_add(length) {
        Some(end) if end <= bytes => Ok(()),
        Some(end) => short(format!("{what} ends at byte {end}")),
        None => short(format!("{what} ends beyond any file")),
    };
    if shoff != 0 {
        ends("the section header table", shoff, shentsize * shnum)?;
    }
    if phnum == 0 {
        return Ok(());
    }
    if phentsize < PROGRAM_HEADER_BYTES || phnum > MAX_PROGRAM_HEADERS {
        // Not a table the dynamic loader accepts either; it refuses it without mapping.
        return Ok(());
    }
    ends("the program header table", phoff, phentsize * phnum)?;
    let mut entry = [0; PROGRAM_HEADER_BYTES as usize];
    for index in 0..phnum {
        file.read_exact_at(&mut entry, phoff + index * phentsize)
            .map_err(|error| Err(error.to_string()))?;
        let word = |at: usize| {
            let mut word = [0; 8];
            word.copy_from_slice(&entry[at..at + 8]);
            u64::from_le_bytes(word)
        };
        let (offset, file_bytes) = (word(0x08), word(0x20));
        ends(&format!("segment {index}"), offset, file_bytes)?;
    }
    Ok(())
}

/// Seals the copy against shrinking, growing and writing. The kernel refuses the write seal
/// (`EBUSY`) while a page of the copy holds a reference besides the file's own; a page just
/// written can hold one for a moment (another CPU's batch of new pages, a transfer still in
/// flight), longer than the kernel's own short wait on a loaded machine. The seal is asked
/// again, a bounded number of times, before that is an error: seen as a plugin that failed
/// to load once in a few thousand loads under the full test run.
fn seal_copy(copy: &File) -> std::io::Result<()> {
    use rustix::fs::SealFlags;
    let seals = SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE | SealFlags::SEAL;
    let mut tries = 0;
    loop {
        match rustix::fs::fcntl_add_seals(copy, seals) {
            Err(rustix::io::Errno::BUSY) if tries < SEAL_TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10 * tries));
            }
            other => return other.map_err(std::io::Error::from),
        }
    }
}

/// How many times a refused write seal is asked for again (about half a second in all).
const SEAL_TRIES: u64 = 10;

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(path: &Path) -> Result<SealedLibrary, CopyError> {
        SealedLibrary::copy(&File::open(path).unwrap(), "test")
    }

    #[test]
    fn the_running_test_binary_is_whole_and_a_truncated_copy_is_not() {
        let me = std::env::current_exe().unwrap();
        let copy = sealed(&me).unwrap();
        let bytes = std::fs::read(&me).unwrap();
        assert_eq!(copy.bytes(), bytes.len() as u64);
        assert_eq!(copy.sha256().unwrap(), &Digest::of(&bytes));
        assert_eq!(file_sha256(&me).unwrap(), Digest::of(&bytes));
        let dir = tempfile::tempdir().unwrap();
        for keep in [bytes.len() / 2, 100, 10] {
            let cut = dir.path().join(format!("cut-{keep}"));
            std::fs::write(&cut, &bytes[..keep]).unwrap();
            match sealed(&cut) {
                Err(CopyError::Truncated(truncated)) => {
                    assert_eq!(truncated.bytes, keep as u64)
                }
                other => panic!("{keep} bytes: {other:?}"),
            }
        }
        let text = dir.path().join("text");
        std::fs::write(&text, b"not a library").unwrap();
        assert_eq!(sealed(&text).unwrap().bytes(), 13);
    }

    #[test]
    fn the_copy_is_sealed_against_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lib");
        std::fs::write(&file, b"library bytes").unwrap();
        let copy = sealed(&file).unwrap();
        let seals = rustix::fs::fcntl_get_seals(&copy.copy).unwrap();
        use rustix::fs::SealFlags;
        assert!(
            seals
                .contains(SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE | SealFlags::SEAL)
        );
        // Through its /proc name too: it opens read-only copies only, and cannot shrink.
        let path = copy.path();
        assert!(
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|mut file| std::io::Write::write_all(&mut file, b"x"))
                .is_err()
        );
        assert!(copy.copy.set_len(1).is_err());
        // The file on disk changes; the copy does not.
        std::fs::write(&file, b"other").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"library bytes");
        assert_eq!(copy.sha256().unwrap(), &Digest::of(b"library bytes"));
    }
}
