//! Paths as Git writes them in a diff: C-style quoting (`"a/sp ace\t\303\251"`), the leading
//! `a/`/`b/` component, and the rules a path must meet before sf writes it.

use crate::PatchError;

/// Reads a C-quoted string at the start of `s` (which begins with `"`), as Git writes it:
/// `\a \b \t \n \v \f \r \" \\` and three-digit octal escapes. Returns the bytes and how many
/// input bytes it took, or None when it is not a whole, valid quoted string.
pub(crate) fn unquote(s: &[u8]) -> Option<(Vec<u8>, usize)> {
    if s.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while let Some(&c) = s.get(i) {
        i += 1;
        match c {
            b'"' => return Some((out, i)),
            b'\\' => {
                let e = *s.get(i)?;
                i += 1;
                let byte = match e {
                    b'a' => 7,
                    b'b' => 8,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'v' => 11,
                    b'f' => 12,
                    b'r' => b'\r',
                    b'"' | b'\\' => e,
                    b'0'..=b'3' => {
                        let d1 = octal(*s.get(i)?)?;
                        let d2 = octal(*s.get(i + 1)?)?;
                        i += 2;
                        ((e - b'0') << 6) | (d1 << 3) | d2
                    }
                    _ => return None,
                };
                out.push(byte);
            }
            _ => out.push(c),
        }
    }
    None
}

fn octal(c: u8) -> Option<u8> {
    matches!(c, b'0'..=b'7').then(|| c - b'0')
}

/// Reads a whole name field: quoted (all of it), or unquoted as it stands.
pub(crate) fn name_field(s: &[u8]) -> Option<Vec<u8>> {
    if s.first() == Some(&b'"') {
        let (name, used) = unquote(s)?;
        return (used == s.len()).then_some(name);
    }
    Some(s.to_vec())
}

/// Drops the first component (`a/`, `b/`: what `git apply -p1` strips).
pub(crate) fn strip_prefix(name: &[u8]) -> Option<&[u8]> {
    let slash = name.iter().position(|&c| c == b'/')?;
    Some(&name[slash + 1..])
}

/// The longest path accepted, in bytes (Linux's PATH_MAX).
pub(crate) const MAX_PATH: usize = 4096;

/// Checks a path (prefix already stripped) against the rules and returns it as a String.
pub(crate) fn validate(raw: &[u8], line: usize) -> Result<String, PatchError> {
    let refuse = |reason| PatchError::UnsafePath {
        line,
        path: shown(raw),
        reason,
    };
    if raw.is_empty() {
        return Err(refuse("the path is empty"));
    }
    if raw.len() > MAX_PATH {
        return Err(refuse("the path is longer than 4096 bytes"));
    }
    if raw.contains(&0) {
        return Err(refuse("the path holds a NUL byte"));
    }
    // A tab is allowed (Git quotes it as `\t`); other control bytes would reach terminals
    // and line-based tools.
    if raw.iter().any(|&c| (c < 0x20 && c != b'\t') || c == 0x7f) {
        return Err(refuse("the path holds a control character other than tab"));
    }
    if raw[0] == b'/' {
        return Err(refuse("the path is absolute"));
    }
    for component in raw.split(|&c| c == b'/') {
        match component {
            b"" => return Err(refuse("the path has an empty component")),
            b"." | b".." => return Err(refuse("the path has a `.` or `..` component")),
            c if c.eq_ignore_ascii_case(b".git") => {
                return Err(refuse("the path has a `.git` component"));
            }
            _ => {}
        }
    }
    String::from_utf8(raw.to_vec()).map_err(|_| refuse("the path is not UTF-8"))
}

/// The leading directories of a path: `a/b/c` gives `a` and `a/b`.
pub(crate) fn parents(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(|(i, _)| &path[..i])
}

/// Bytes shown in a message: printable ASCII as is, the rest escaped, at most 200 bytes.
pub(crate) fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(200)];
    let mut s: String = cut.escape_ascii().to_string();
    if bytes.len() > cut.len() {
        s.push_str("...");
    }
    s
}

/// A line shown in a message: lossy UTF-8, at most 200 bytes.
pub(crate) fn shown_line(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(200)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if bytes.len() > cut.len() {
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquotes_git_escapes() {
        let (name, used) = unquote(br#""a/with space\t\303\251\"\\" rest"#).unwrap();
        assert_eq!(name, "a/with space\té\"\\".as_bytes());
        assert_eq!(used, 28);
        assert!(unquote(br#""a/\400""#).is_none());
        assert!(unquote(br#""unterminated"#).is_none());
        assert!(unquote(br#""bad \q""#).is_none());
        assert!(unquote(br#""short \30""#).is_none());
    }

    #[test]
    fn refuses_unsafe_paths() {
        for bad in [
            &b""[..],
            b"/etc/passwd",
            b"a/../b",
            b"..",
            b"a//b",
            b"a/",
            b"./a",
            b".git/config",
            b"x/.GIT/hooks/pre-commit",
            b"x/.Git",
            b"a\0b",
            b"a\nb",
            b"\xff",
        ] {
            assert!(validate(bad, 1).is_err(), "{bad:?}");
        }
        assert_eq!(validate(b"a/.gitignore", 1).unwrap(), "a/.gitignore");
        assert_eq!(validate("é x".as_bytes(), 1).unwrap(), "é x");
        assert_eq!(validate(b"a\tb", 1).unwrap(), "a\tb");
    }

    #[test]
    fn lists_parents() {
        assert_eq!(parents("a/b/c").collect::<Vec<_>>(), ["a", "a/b"]);
        assert_eq!(parents("a").count(), 0);
    }
}
