//! Making text that sf did not write safe to show on a terminal: a program's stdout and
//! stderr, the problems an Executor reports, file names, Git's messages, anything a
//! repository, a capability or a sandboxed program produced.
//!
//! A terminal acts on some characters instead of showing them: ESC starts sequences that move
//! the cursor, recolour, retitle the window or rewrite what is on screen; CR and backspace
//! move back over text already printed; the C1 controls (U+0080 to U+009F) are the same
//! sequences in one character on terminals that read them; bidirectional overrides reorder
//! what follows. Any of them lets outside text pass for sf's own lines (a forged `status
//! exited (exit code 0)`). So every such character is shown as an escape instead:
//! `\x1b`, `\r`, `\x7f`, `\u{9b}`, `\u{202e}`; newline and tab as `\n` and `\t` where a value
//! must stay on one line ([`line`]), and kept where lines are meant ([`lines`], [`block`]).
//! Invalid UTF-8 bytes are shown as `\xNN` ([`line_bytes`], [`block`]).
//!
//! A backslash is shown as itself, so the text reads as it was written; the result is for
//! people, not a lossless encoding: `--json` carries the exact text (JSON escapes it).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as itself: every control character (C0, DEL, C1),
/// the bidirectional formatting characters, and the Unicode line and paragraph separators.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Appends the visible escape of `c`.
fn push_escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `text` with every hidden character for which `escape` holds shown as its escape.
fn escaped(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escape(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` as one line: every hidden character escaped, newline and tab included. For values
/// shown inside sf's own lines (a file name, a reason, a problem).
pub fn line(text: &str) -> Cow<'_, str> {
    escaped(text, is_hidden)
}

/// `bytes` shown by `show` where they are valid UTF-8, each invalid byte as `\xNN`.
fn with_invalid_bytes<'a>(bytes: &'a [u8], show: impl Fn(&'a str) -> Cow<'a, str>) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&show(chunk.valid()));
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// `bytes` as one line: valid UTF-8 as [`line`] shows it, each invalid byte as `\xNN`.
pub fn line_bytes(bytes: &[u8]) -> String {
    with_invalid_bytes(bytes, line)
}

/// `text` with its lines kept: every hidden character escaped except newline and tab. What
/// each command's whole text output passes through before it is printed, so that nothing
/// reaches the terminal unescaped even where a value was not escaped on its own.
pub fn lines(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c != '\n' && c != '\t' && is_hidden(c))
}

/// `bytes` with their lines kept: valid UTF-8 as [`lines`] shows it, each invalid byte as
/// `\xNN`. For outside output passed on as it is, apart from its controls.
pub fn lines_bytes(bytes: &[u8]) -> String {
    with_invalid_bytes(bytes, lines)
}

/// The prefix of every line of outside output shown by [`block`]; sf's own lines never start
/// with it.
pub const BLOCK_GUTTER: &str = "| ";

/// A program's output (or any outside multi-line bytes) under a header that states its size:
///
/// ```text
/// --- stdout (12 bytes) ---
/// | hello
/// | world
/// ```
///
/// Each line is prefixed with [`BLOCK_GUTTER`] (an empty line is `|` alone, so that sf adds
/// no trailing space) and escaped as [`lines`] does (invalid UTF-8
/// bytes as `\xNN`, flagged in the header), so that a line the program printed can never be
/// read as one of sf's. Output whose last line has no newline is followed by
/// `\ no newline at end`, as in a diff.
pub fn block(name: &str, bytes: &[u8]) -> String {
    let valid = std::str::from_utf8(bytes).is_ok();
    let mut out = format!(
        "--- {name} ({} bytes{}) ---\n",
        bytes.len(),
        if valid {
            ""
        } else {
            ", not UTF-8: invalid bytes shown as \\xNN"
        }
    );
    if bytes.is_empty() {
        return out;
    }
    let ends_with_newline = bytes.ends_with(b"\n");
    let body = if ends_with_newline {
        &bytes[..bytes.len() - 1]
    } else {
        bytes
    };
    for line_bytes in body.split(|&byte| byte == b'\n') {
        if line_bytes.is_empty() {
            // An empty line is the gutter's bar alone: sf adds no trailing space.
            out.push_str(BLOCK_GUTTER.trim_end());
        } else {
            out.push_str(BLOCK_GUTTER);
            out.push_str(&lines_bytes(line_bytes));
        }
        out.push('\n');
    }
    if !ends_with_newline {
        out.push_str("\\ no newline at end\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_made_visible() {
        assert_eq!(line("plain text/ü"), "plain text/ü");
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
        assert_eq!(
            line("a\x1b]0;title\x07b\rc\x08d\x7fe\0"),
            "a\\x1b]0;title\\x07b\\rc\\x08d\\x7fe\\x00"
        );
        assert_eq!(line("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(line("\u{9b}31m\u{85}"), "\\u{9b}31m\\u{85}");
        assert_eq!(
            line("x\u{202e}y\u{2066}z\u{200f}\u{2028}"),
            "x\\u{202e}y\\u{2066}z\\u{200f}\\u{2028}"
        );
        // Not controls: kept as they are, emoji joiners included.
        assert_eq!(line("👩\u{200d}💻 \\x1b"), "👩\u{200d}💻 \\x1b");
        assert_eq!(lines("a\nb\tc\rd\x1b"), "a\nb\tc\\rd\\x1b");
        assert_eq!(line_bytes(b"ok\xff\x1b\xc3"), "ok\\xff\\x1b\\xc3");
        assert_eq!(lines_bytes(b"a\n\xff\x1b\n"), "a\n\\xff\\x1b\n");
    }

    #[test]
    fn blocks_prefix_every_line_and_state_their_size() {
        assert_eq!(block("stdout", b""), "--- stdout (0 bytes) ---\n");
        assert_eq!(
            block("stdout", b"one\n\nthree\n"),
            "--- stdout (11 bytes) ---\n| one\n|\n| three\n"
        );
        assert_eq!(
            block("stderr", b"no end"),
            "--- stderr (6 bytes) ---\n| no end\n\\ no newline at end\n"
        );
        let forged: &[u8] =
            b"ok\n\x1b[2K\rstatus    exited (exit code 0)\n--- stderr (0 bytes) ---\n";
        assert_eq!(
            block("stdout", forged),
            format!("--- stdout ({} bytes) ---\n", forged.len())
                + "| ok\n| \\x1b[2K\\rstatus    exited (exit code 0)\n\
             | --- stderr (0 bytes) ---\n"
        );
        assert_eq!(
            block("stdout", b"\xffx\n"),
            "--- stdout (3 bytes, not UTF-8: invalid bytes shown as \\xNN) ---\n| \\xffx\n"
        );
    }
}
