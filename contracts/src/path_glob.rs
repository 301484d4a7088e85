//! Protected-path patterns: globs over repository paths that no proposal may create, change
//! or delete (a Slice's `protected` list, such as `**/conftest.py` or `tests/**`).
//!
//! The language is deliberately small, so that what a pattern protects is obvious:
//!
//! - a pattern is a relative path of `/`-separated segments (no leading or trailing `/`, no
//!   empty, `.` or `..` segment), at most [`MAX_PATTERN_BYTES`] bytes;
//! - a segment `**` matches zero or more whole segments (so `tests/**` protects `tests`
//!   itself too: a file there would hide the directory);
//! - in any other segment, `*` matches zero or more characters and `?` exactly one, never a
//!   `/`; every other character matches itself;
//! - `[`, `]`, `{`, `}`, `\` and a leading `!` are refused rather than given a meaning, so a
//!   pattern written for another glob dialect cannot silently protect less than it says.
//!
//! Matching ignores ASCII case: a proposal cannot slip `Tests/x.py` past `tests/**`, since a
//! case-insensitive checkout, or a test runner, may treat the two as one.

use std::fmt;

/// The longest pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 255;

/// A parsed protected-path pattern.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PathGlob {
    text: String,
    segments: Vec<Segment>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Segment {
    /// `**`: any number of whole segments.
    Any,
    /// A segment pattern of literal bytes, `*` and `?`, lowercased.
    Pattern(Vec<Token>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Token {
    Byte(u8),
    Star,
    Question,
}

/// Why a pattern is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("protected pattern {pattern:?}: {rule}")]
pub struct GlobError {
    /// The pattern as given.
    pub pattern: String,
    /// The rule of the pattern language it breaks.
    pub rule: &'static str,
}

impl PathGlob {
    /// Parses `text` (see the module documentation).
    pub fn parse(text: &str) -> Result<Self, GlobError> {
        let refuse = |rule| {
            Err(GlobError {
                pattern: text.to_owned(),
                rule,
            })
        };
        if text.is_empty() || text.len() > MAX_PATTERN_BYTES {
            return refuse("a pattern holds 1 to 255 bytes");
        }
        if text.starts_with('!') {
            return refuse("a pattern cannot be negated: list only what is protected");
        }
        if text.bytes().any(|byte| b"[]{}\\".contains(&byte)) {
            return refuse("the pattern holds [, ], {, } or \\ (only *, ? and ** are special)");
        }
        if text.chars().any(char::is_control) {
            return refuse("the pattern holds a control character");
        }
        let mut segments = Vec::new();
        for segment in text.split('/') {
            match segment {
                "" => return refuse("a pattern is a relative path without empty segments"),
                "." | ".." => return refuse("the pattern has a . or .. segment"),
                "**" => {
                    // `**/**` means what `**` means; keep one.
                    if segments.last() != Some(&Segment::Any) {
                        segments.push(Segment::Any);
                    }
                }
                _ if segment.contains("**") => {
                    return refuse("** is a whole segment (as in a/**/b), never part of one");
                }
                _ => segments.push(Segment::Pattern(
                    segment
                        .bytes()
                        .map(|byte| match byte {
                            b'*' => Token::Star,
                            b'?' => Token::Question,
                            other => Token::Byte(other.to_ascii_lowercase()),
                        })
                        .collect(),
                )),
            }
        }
        Ok(Self {
            text: text.to_owned(),
            segments,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `path` (a repository path of `/`-separated segments) matches the pattern.
    pub fn matches(&self, path: &str) -> bool {
        let path: Vec<Vec<u8>> = path
            .split('/')
            .map(|segment| segment.bytes().map(|b| b.to_ascii_lowercase()).collect())
            .collect();
        // Dynamic programming over (pattern segment, path segment): linear in their product,
        // whatever the number of `**`.
        let (patterns, segments) = (self.segments.len(), path.len());
        let mut reach = vec![vec![false; segments + 1]; patterns + 1];
        reach[patterns][segments] = true;
        for p in (0..patterns).rev() {
            for s in (0..=segments).rev() {
                reach[p][s] = match &self.segments[p] {
                    Segment::Any => reach[p + 1][s] || (s < segments && reach[p][s + 1]),
                    Segment::Pattern(tokens) => {
                        s < segments && segment_matches(tokens, &path[s]) && reach[p + 1][s + 1]
                    }
                };
            }
        }
        reach[0][0]
    }
}

impl PathGlob {
    /// A pattern that matches `path` (a repository path) and at most a little more
    /// ([`covering_text`]); `None` for a path too long to be written as a pattern.
    pub fn covering(path: &str) -> Option<Self> {
        Self::parse(&covering_text(path)).ok()
    }

    /// Whether every path at or below `path` matches: the pattern is literal segments that
    /// lead to `path` (or above it) followed by one `**`.
    pub fn covers_subtree(&self, path: &str) -> bool {
        let Some((Segment::Any, literal)) = self.segments.split_last() else {
            return false;
        };
        let mut below = path.split('/');
        literal.iter().all(|segment| {
            let Segment::Pattern(tokens) = segment else {
                return false;
            };
            below.next().is_some_and(|part| {
                tokens.len() == part.len()
                    && tokens
                        .iter()
                        .zip(part.bytes())
                        .all(|(token, byte)| *token == Token::Byte(byte.to_ascii_lowercase()))
            })
        })
    }

    /// Whether some path could match both `self` and `other`. Never `false` when one could;
    /// sometimes `true` when none can (two wildcard segments are taken to meet, and a `**`
    /// to meet anything from where it stands), which is what a check that refuses a pattern
    /// reaching into another needs.
    pub fn may_overlap(&self, other: &PathGlob) -> bool {
        let (mut a, mut b) = (self.segments.iter(), other.segments.iter());
        loop {
            match (a.next(), b.next()) {
                (None, None) => return true,
                (Some(Segment::Any), _) | (_, Some(Segment::Any)) => return true,
                (None, Some(_)) | (Some(_), None) => return false,
                (Some(Segment::Pattern(x)), Some(Segment::Pattern(y))) => {
                    let literal = |tokens: &[Token]| {
                        tokens
                            .iter()
                            .map(|token| match token {
                                Token::Byte(byte) => Some(*byte),
                                _ => None,
                            })
                            .collect::<Option<Vec<u8>>>()
                    };
                    let meets = match (literal(x), literal(y)) {
                        (Some(x), Some(y)) => x == y,
                        (Some(x), None) => segment_matches(y, &x),
                        (None, Some(y)) => segment_matches(x, &y),
                        (None, None) => true,
                    };
                    if !meets {
                        return false;
                    }
                }
            }
        }
    }
}

impl fmt::Display for PathGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether one path segment matches one segment pattern (`*` and `?` within the segment).
fn segment_matches(tokens: &[Token], segment: &[u8]) -> bool {
    let mut reach = vec![vec![false; segment.len() + 1]; tokens.len() + 1];
    reach[tokens.len()][segment.len()] = true;
    for t in (0..tokens.len()).rev() {
        for s in (0..=segment.len()).rev() {
            reach[t][s] = match tokens[t] {
                Token::Star => reach[t + 1][s] || (s < segment.len() && reach[t][s + 1]),
                Token::Question => s < segment.len() && reach[t + 1][s + 1],
                Token::Byte(byte) => s < segment.len() && segment[s] == byte && reach[t + 1][s + 1],
            };
        }
    }
    reach[0][0]
}

/// `path` (a repository path) written as a pattern that matches it and at most a little
/// more: each byte the language refuses (`[`, `]`, `{`, `}`, `\\`, a leading `!`) becomes `?`,
/// and its `*` and `?` stay wildcards. Closing a little more than a path is always safe.
pub fn covering_text(path: &str) -> String {
    path.char_indices()
        .map(|(at, c)| match c {
            '[' | ']' | '{' | '}' | '\\' => '?',
            '!' if at == 0 => '?',
            other => other,
        })
        .collect()
}

/// The first pattern of `patterns` that `path` matches, if any.
pub fn first_match<'a>(patterns: &'a [PathGlob], path: &str) -> Option<&'a PathGlob> {
    patterns.iter().find(|pattern| pattern.matches(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, path: &str) -> bool {
        PathGlob::parse(pattern).unwrap().matches(path)
    }

    #[test]
    fn double_star_spans_whole_segments() {
        assert!(matches("**/conftest.py", "conftest.py"));
        assert!(matches("**/conftest.py", "tests/unit/conftest.py"));
        assert!(!matches("**/conftest.py", "tests/conftest.py.bak"));
        assert!(!matches("**/conftest.py", "tests/myconftest.py"));
        assert!(matches("tests/**", "tests/test_a.py"));
        assert!(matches("tests/**", "tests/a/b/c.py"));
        assert!(
            matches("tests/**", "tests"),
            "** matches zero segments, so tests/** protects a file named tests too"
        );
        assert!(!matches("tests/**", "src/tests/x.py"));
        assert!(matches("a/**/b", "a/b"));
        assert!(matches("a/**/b", "a/x/y/b"));
        assert!(!matches("a/**/b", "a/x/y/c"));
        assert!(matches("**", "anything/at/all"));
        assert!(matches("**/**/x", "x"));
    }

    #[test]
    fn overlap_is_never_missed() {
        let overlap = |a: &str, b: &str| {
            let (a, b) = (PathGlob::parse(a).unwrap(), PathGlob::parse(b).unwrap());
            assert_eq!(a.may_overlap(&b), b.may_overlap(&a), "symmetric");
            a.may_overlap(&b)
        };
        assert!(overlap("tests/**", "tests/extra/**"));
        assert!(overlap("tests/test_x.*", "tests/test_x.pyc"));
        assert!(overlap("Tests/X.py", "tests/x.py"), "case is ignored");
        assert!(overlap("**/*.pth", "src/a.pth"));
        assert!(overlap("tests/*/conftest.py", "tests/a/*.py"));
        assert!(!overlap("tests/extra/**", "tests/test_x/**"));
        assert!(!overlap("tests/extra/**", "tests/test_x.*"));
        assert!(!overlap("tests/extra/**", "tests/__pycache__/**"));
        assert!(!overlap("tests/test_x.*", "tests/test_y.py"));
        assert!(!overlap("a/b", "a/b/c"), "a literal path has one length");
        assert!(!overlap("src/x.py", "tests/**"));
    }

    #[test]
    fn a_covering_pattern_matches_its_path() {
        for path in ["tests/[x].py", "!a/b{c}.py", "a/b*c?.py", "a\\b"] {
            let glob = PathGlob::covering(path).unwrap();
            assert!(glob.matches(path), "{path} -> {glob}");
        }
        assert_eq!(PathGlob::covering("a/!b").unwrap().as_str(), "a/!b");
        assert!(PathGlob::covering(&"a".repeat(300)).is_none());
    }

    #[test]
    fn a_subtree_is_covered_only_by_a_literal_prefix_and_one_double_star() {
        let covers =
            |pattern: &str, path: &str| PathGlob::parse(pattern).unwrap().covers_subtree(path);
        assert!(covers("src/**", "src"));
        assert!(covers("src/**", "src/typing_extensions.py"));
        assert!(covers("Src/**", "src/a/b"));
        assert!(covers("**", "anything"));
        assert!(!covers("src/**", "srcs/a"));
        assert!(!covers("src/a/**", "src"), "only the part below src/a");
        assert!(!covers("src/*.py", "src"));
        assert!(
            !covers("src/x.py", "src/x.py"),
            "a literal path closes no subtree"
        );
        assert!(!covers("*/**", "src"));
    }

    #[test]
    fn star_and_question_stay_within_a_segment() {
        assert!(matches("tests/test_*.py", "tests/test_api.py"));
        assert!(!matches("tests/test_*.py", "tests/sub/test_api.py"));
        assert!(matches("*.cfg", "setup.cfg"));
        assert!(!matches("*.cfg", "a/setup.cfg"));
        assert!(matches("file?.txt", "file1.txt"));
        assert!(!matches("file?.txt", "file10.txt"));
        assert!(matches("a*b*c", "abc"));
        assert!(matches("a*b*c", "aXbYc"));
        assert!(!matches("a*b*c", "aXbY"));
    }

    #[test]
    fn literal_paths_and_case() {
        assert!(matches("pytest.ini", "pytest.ini"));
        assert!(!matches("pytest.ini", "a/pytest.ini"));
        assert!(matches("tests/**", "Tests/x.py"));
        assert!(matches("**/CONFTEST.py", "a/conftest.PY"));
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = format!("{}x", "*a".repeat(100));
        assert!(!matches(&pattern, &"a".repeat(250)));
        let deep = vec!["**"; 50].join("/a/");
        assert!(!matches(&deep, &vec!["b"; 120].join("/")));
    }

    #[test]
    fn other_dialects_are_refused() {
        for bad in [
            "",
            "/abs",
            "trailing/",
            "a//b",
            "./a",
            "a/../b",
            "!negated",
            "[ab].py",
            "{a,b}",
            "back\\slash",
            "a**b",
            "x/**y",
            "tab\there",
        ] {
            assert!(PathGlob::parse(bad).is_err(), "{bad:?}");
        }
        assert!(PathGlob::parse(&"a".repeat(256)).is_err());
        assert!(PathGlob::parse(&"a".repeat(255)).is_ok());
    }
}
