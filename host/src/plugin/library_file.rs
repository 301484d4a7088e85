//! Checking that a plugin library file is whole before it is mapped: `dlopen` maps the
//! segments its ELF headers name, and touching a page beyond the end of a truncated file
//! kills the process with SIGBUS rather than failing the call. So the headers are read with
//! plain reads first, and every byte range they name (the program header table, each
//! segment's file bytes, the section header table) must lie inside the file.
//!
//! Only 64-bit little-endian ELF files (what this host loads) are measured; any other file is
//! left to the dynamic loader, which refuses it with its own message and maps nothing.

use std::io::Read as _;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

/// The size of an ELF64 file header.
const HEADER_BYTES: usize = 64;
/// The size of one ELF64 program header.
const PROGRAM_HEADER_BYTES: u64 = 56;
/// The most program headers read (real libraries have about a dozen).
const MAX_PROGRAM_HEADERS: u64 = 4096;

/// How a library file falls short of what its headers name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncated {
    /// The file's length in bytes.
    pub bytes: u64,
    /// What lies beyond it: which part and the end it needs.
    pub detail: String,
}

/// Checks that `library` holds every byte its ELF headers name. `Err(Ok(truncated))` when it
/// does not, `Err(Err(detail))` when it cannot be read; `Ok` also for a file that is not
/// ELF64 little-endian.
pub fn check_whole(library: &Path) -> Result<(), Result<Truncated, String>> {
    let file = std::fs::File::open(library).map_err(|error| Err(error.to_string()))?;
    let bytes = file
        .metadata()
        .map_err(|error| Err(error.to_string()))?
        .len();
    let short = |detail: String| Err(Ok(Truncated { bytes, detail }));
    let mut header = Vec::with_capacity(HEADER_BYTES);
    (&file)
        .take(HEADER_BYTES as u64)
        .read_to_end(&mut header)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_test_binary_is_whole_and_a_truncated_copy_is_not() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(check_whole(&me), Ok(()));
        let bytes = std::fs::read(&me).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for keep in [bytes.len() / 2, 100, 10] {
            let copy = dir.path().join(format!("cut-{keep}"));
            std::fs::write(&copy, &bytes[..keep]).unwrap();
            match check_whole(&copy) {
                Err(Ok(truncated)) => assert_eq!(truncated.bytes, keep as u64),
                other => panic!("{keep} bytes: {other:?}"),
            }
        }
        let text = dir.path().join("text");
        std::fs::write(&text, b"not a library").unwrap();
        assert_eq!(check_whole(&text), Ok(()));
    }
}
