//! Reading unified hunks (`@@ -a,b +c,d @@`, then context, `-`, `+` and
//! `\ No newline at end of file` lines) exactly as many lines as their header declares.

use crate::lines::{Lines, trim_end};
use crate::path::shown;
use crate::{Hunk, HunkLine, LineKind, PatchError};

/// Reads the hunks that start at the next line, and checks that no hunk line follows the last
/// one (a header that declares fewer lines than the hunk has).
pub(crate) fn parse_hunks(lines: &mut Lines, path: &str) -> Result<Vec<Hunk>, PatchError> {
    let mut hunks = Vec::new();
    while lines.peek().is_some_and(|l| l.starts_with(b"@@ ")) {
        hunks.push(parse_hunk(lines, path, hunks.len() + 1)?);
    }
    if let Some(next) = lines.peek()
        && is_stray(next)
    {
        return Err(PatchError::BadHunk {
            path: path.into(),
            hunk: hunks.len(),
            line: lines.number(),
            what: "the hunk has more lines than its header declares".into(),
        });
    }
    Ok(hunks)
}

/// A line that looks like hunk content; the mail signature `-- ` is not one.
fn is_stray(line: &[u8]) -> bool {
    match line.first() {
        Some(b' ' | b'+' | b'\\') => true,
        Some(b'-') => trim_end(line) != b"-- " && !line.starts_with(b"--- "),
        _ => false,
    }
}

fn parse_hunk(lines: &mut Lines, path: &str, hunk: usize) -> Result<Hunk, PatchError> {
    let line = lines.number();
    let bad = |line: usize, what: &str| PatchError::BadHunk {
        path: path.into(),
        hunk,
        line,
        what: what.into(),
    };
    let header = lines.next_line().unwrap_or_default();
    let (old_start, old_count, new_start, new_count) =
        parse_range(trim_end(header)).ok_or_else(|| {
            bad(
                line,
                &format!("a bad hunk header {:?}", shown(trim_end(header))),
            )
        })?;
    let (mut old_left, mut new_left) = (old_count, new_count);
    let mut body: Vec<HunkLine> = Vec::new();
    while old_left > 0 || new_left > 0 {
        let number = lines.number();
        let Some(text) = lines.next_line() else {
            return Err(bad(number, "the diff ends inside the hunk"));
        };
        if text.starts_with(b"\\") {
            no_newline(&mut body, text).map_err(|what| bad(number, what))?;
            continue;
        }
        if !text.ends_with(b"\n") {
            return Err(bad(number, "the diff ends in the middle of a hunk line"));
        }
        let (kind, content) = match text[0] {
            b' ' => (LineKind::Context, &text[1..]),
            b'\n' => (LineKind::Context, text),
            b'-' => (LineKind::Removed, &text[1..]),
            b'+' => (LineKind::Added, &text[1..]),
            _ => {
                return Err(bad(
                    number,
                    "the hunk has fewer lines than its header declares",
                ));
            }
        };
        let in_old = kind != LineKind::Added;
        let in_new = kind != LineKind::Removed;
        if (in_old && old_left == 0) || (in_new && new_left == 0) {
            return Err(bad(
                number,
                "the hunk's lines do not match its header's counts",
            ));
        }
        old_left -= u64::from(in_old);
        new_left -= u64::from(in_new);
        body.push(HunkLine {
            kind,
            text: content.to_vec(),
        });
    }
    // The marker of the hunk's last line comes after the counts are met.
    if let Some(text) = lines.peek()
        && text.starts_with(b"\\")
    {
        let number = lines.number();
        lines.next_line();
        no_newline(&mut body, text).map_err(|what| bad(number, what))?;
    }
    if body.iter().all(|l| l.kind == LineKind::Context) {
        return Err(bad(line, "the hunk changes nothing"));
    }
    Ok(Hunk {
        old_start,
        old_count,
        new_start,
        new_count,
        lines: body,
        line,
    })
}

/// `\ No newline at end of file` (in any language: Git checks only `\ ` and a length): the
/// line before it has no newline.
fn no_newline(body: &mut [HunkLine], marker: &[u8]) -> Result<(), &'static str> {
    if !marker.starts_with(b"\\ ") || trim_end(marker).len() < 12 {
        return Err("a line starting with `\\` that is not `\\ No newline at end of file`");
    }
    let last = body
        .last_mut()
        .ok_or("`\\ No newline at end of file` before any line")?;
    if last.text.last() != Some(&b'\n') {
        return Err("`\\ No newline at end of file` twice");
    }
    last.text.pop();
    Ok(())
}

/// `@@ -a[,b] +c[,d] @@[ section]`; a count left out is 1.
fn parse_range(header: &[u8]) -> Option<(u64, u64, u64, u64)> {
    let rest = header.strip_prefix(b"@@ -")?;
    let (old_start, old_count, rest) = start_count(rest)?;
    let rest = rest.strip_prefix(b" +")?;
    let (new_start, new_count, rest) = start_count(rest)?;
    if !(rest == b" @@" || rest.starts_with(b" @@ ")) {
        return None;
    }
    Some((old_start, old_count, new_start, new_count))
}

fn start_count(s: &[u8]) -> Option<(u64, u64, &[u8])> {
    let (start, rest) = number(s)?;
    match rest.strip_prefix(b",") {
        Some(rest) => {
            let (count, rest) = number(rest)?;
            Some((start, count, rest))
        }
        None => Some((start, 1, rest)),
    }
}

/// A decimal number; None when it is missing or overflows a u64.
fn number(s: &[u8]) -> Option<(u64, &[u8])> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in &s[..digits] {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some((n, &s[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ranges() {
        assert_eq!(parse_range(b"@@ -1,2 +3,4 @@"), Some((1, 2, 3, 4)));
        assert_eq!(parse_range(b"@@ -1 +1 @@ fn main()"), Some((1, 1, 1, 1)));
        assert_eq!(parse_range(b"@@ -0,0 +1 @@"), Some((0, 0, 1, 1)));
        assert_eq!(parse_range(b"@@ -1,99999999999999999999 +1 @@"), None);
        assert_eq!(parse_range(b"@@ -1,2 +3,4"), None);
        assert_eq!(parse_range(b"@@ -a,2 +3,4 @@"), None);
        assert_eq!(parse_range(b"@@ -1,2 +3,4 @@@"), None);
    }
}
