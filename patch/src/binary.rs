//! Reading a `GIT binary patch`: its `literal N` / `delta N` hunks, each a run of base85 lines
//! (a length character, then 5 characters per 4 bytes) holding zlib-deflated data. Sizes are
//! checked against the limits before anything is inflated, and inflation stops one byte past
//! the declared size.

use std::io::Read;

use flate2::read::ZlibDecoder;

use crate::lines::{Lines, trim_end};
use crate::{BinaryHunk, BinaryPatch, Limits, PatchError};

/// Reads `GIT binary patch` (the next line), the forward hunk and the reverse one if present.
pub(crate) fn parse_binary(
    lines: &mut Lines,
    path: &str,
    limits: &Limits,
) -> Result<BinaryPatch, PatchError> {
    lines.next_line();
    let forward = parse_hunk(lines, path, limits)?.ok_or_else(|| PatchError::CorruptBinary {
        path: path.into(),
        what: format!("line {}: no `literal` or `delta` hunk", lines.number()),
    })?;
    let reverse = parse_hunk(lines, path, limits)?;
    Ok(BinaryPatch { forward, reverse })
}

/// One hunk, or None when the next line does not start one.
fn parse_hunk(
    lines: &mut Lines,
    path: &str,
    limits: &Limits,
) -> Result<Option<BinaryHunk>, PatchError> {
    let Some(head) = lines.peek() else {
        return Ok(None);
    };
    let head = trim_end(head);
    let (literal, size) = if let Some(n) = head.strip_prefix(b"literal ") {
        (true, n)
    } else if let Some(n) = head.strip_prefix(b"delta ") {
        (false, n)
    } else {
        return Ok(None);
    };
    let corrupt = |what: String| PatchError::CorruptBinary {
        path: path.into(),
        what,
    };
    let line = lines.number();
    let size = decimal(size).ok_or_else(|| corrupt(format!("line {line}: a bad hunk size")))?;
    // A delta is a little larger than what it builds at worst (an opcode per 127 bytes).
    let limit = if literal {
        limits.max_file_bytes
    } else {
        limits.max_file_bytes.saturating_mul(2).saturating_add(1024)
    };
    if size > limit {
        return Err(PatchError::FileTooLarge {
            path: path.into(),
            size,
            limit,
        });
    }
    lines.next_line();
    let deflated = read_base85_lines(lines).map_err(corrupt)?;
    let data = inflate(&deflated, size).map_err(|what| corrupt(format!("line {line}: {what}")))?;
    Ok(Some(if literal {
        BinaryHunk::Literal(data)
    } else {
        BinaryHunk::Delta(data)
    }))
}

fn decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// The base85 lines up to the blank line (or the end of the diff) that closes a hunk.
fn read_base85_lines(lines: &mut Lines) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let number = lines.number();
        let Some(line) = lines.next_line() else {
            return Ok(out);
        };
        let line = trim_end(line);
        if line.is_empty() {
            return Ok(out);
        }
        decode_line(line, &mut out).map_err(|what| format!("line {number}: {what}"))?;
    }
}

/// One line: a length character (`A`-`Z` for 1-26 bytes, `a`-`z` for 27-52), then exactly
/// the characters those bytes take.
fn decode_line(line: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
    let (&len_char, data) = line.split_first().ok_or("an empty base85 line")?;
    let len = match len_char {
        b'A'..=b'Z' => usize::from(len_char - b'A') + 1,
        b'a'..=b'z' => usize::from(len_char - b'a') + 27,
        _ => return Err("a bad base85 line length character"),
    };
    if data.len() != len.div_ceil(4) * 5 {
        return Err("a base85 line whose length does not match its length character");
    }
    let mut left = len;
    for group in data.chunks(5) {
        let mut value: u32 = 0;
        for &c in group {
            let digit = base85_digit(c).ok_or("a character that is not base85")?;
            value = value
                .checked_mul(85)
                .and_then(|v| v.checked_add(digit))
                .ok_or("a base85 group that overflows")?;
        }
        let take = left.min(4);
        out.extend_from_slice(&value.to_be_bytes()[..take]);
        left -= take;
    }
    Ok(())
}

/// Git's base85 alphabet.
const ALPHABET: &[u8; 85] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

fn base85_digit(c: u8) -> Option<u32> {
    ALPHABET
        .iter()
        .position(|&a| a == c)
        .and_then(|i| u32::try_from(i).ok())
}

/// Inflates to exactly `size` bytes, reading at most one byte more to tell a longer stream.
fn inflate(deflated: &[u8], size: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    ZlibDecoder::new(deflated)
        .take(size.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| format!("the data does not inflate: {e}"))?;
    if out.len() as u64 != size {
        return Err(format!(
            "the data inflates to {}{} bytes, not the {size} declared",
            out.len(),
            if out.len() as u64 > size {
                " or more"
            } else {
                ""
            }
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_base85_lines() {
        let mut out = Vec::new();
        decode_line(b"E00000", &mut out).unwrap_err();
        decode_line(b"D00000", &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 0]);
        out.clear();
        decode_line(b"A00000", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(decode_line(b"D~~~~~", &mut Vec::new()).is_err());
        assert!(decode_line(b"D0000", &mut Vec::new()).is_err());
        assert!(decode_line(b"0", &mut Vec::new()).is_err());
    }
}
