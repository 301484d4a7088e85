//! The paths a Slice closes around its trusted test material: those a proposal may not
//! create, change or delete because a test runner could load them instead of a trusted test
//! file, before it, or beside it, and the sub-paths the Slice opens again.
//!
//! Which paths are closed is decided when the Slice is frozen (from its overlay and what its
//! checks name) and written in the Slice record; this module holds the record's form and the
//! check a seal and a collection make. A path that could stand in for a trusted file stays
//! closed whatever the Slice opens; a path loaded before one, or beside one, is closed unless
//! an `open` pattern of the Slice matches it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::path_glob::PathGlob;

use super::error::{Rejection, RepositoryError};

/// The most closed patterns a Slice may hold.
pub const MAX_CLOSED: usize = 4096;
/// The most `open` patterns a Slice may hold.
pub const MAX_OPEN: usize = 64;
/// The longest description of what a closed pattern closes for, in bytes.
pub const MAX_CLOSED_FOR_BYTES: usize = 1024;

/// Why a path is closed to proposals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Because {
    /// A runner could load it instead of the trusted file (a package or module of the same
    /// name, a compiled copy, a cached byte-code file, a `node_modules` package). No Slice
    /// can open it.
    StandsIn,
    /// A runner loads it before the trusted file (a `conftest.py`, a package's `__init__`,
    /// the runner's configuration, the interpreter's start-up hooks). A Slice may open it.
    LoadedBefore,
    /// It is in a directory of trusted test material. A Slice may open it.
    Beside,
}

impl Because {
    /// The name a record writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StandsIn => "stands-in",
            Self::LoadedBefore => "loaded-before",
            Self::Beside => "beside",
        }
    }

    /// What the rule means, for messages.
    fn describe(self, protects: &str) -> String {
        match self {
            Self::StandsIn => format!("could be loaded instead of {protects}"),
            Self::LoadedBefore => format!("is loaded before {protects}"),
            Self::Beside => {
                format!("is beside {protects}, in a directory of trusted test material")
            }
        }
    }
}

/// One closed pattern: `{"pattern", "for", "because"}` in the Slice record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedPath {
    /// The paths closed ([`crate::path_glob`]).
    pub pattern: String,
    /// The trusted file (or runner) it is closed for.
    #[serde(rename = "for")]
    pub protects: String,
    /// Why.
    pub because: Because,
}

/// The closed paths of a Slice and the sub-paths it opens, as the Slice record holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClosedPaths {
    /// The closed patterns, sorted by pattern, none twice.
    pub closed: Vec<ClosedPath>,
    /// Patterns the Slice opens again (never a stand-in).
    pub open: Vec<String>,
}

/// A [`ClosedPaths`] with its patterns parsed, ready to check paths.
#[derive(Debug)]
pub struct ParsedClosedPaths<'a> {
    closed: Vec<(PathGlob, &'a ClosedPath)>,
    open: Vec<PathGlob>,
}

impl ClosedPaths {
    /// Whether nothing is closed.
    pub fn is_empty(&self) -> bool {
        self.closed.is_empty() && self.open.is_empty()
    }

    /// Checks the lists and parses their patterns: at most [`MAX_CLOSED`] closed patterns,
    /// valid, none twice, each saying what it closes for; at most [`MAX_OPEN`] open
    /// patterns, valid, none twice, none reaching into a stand-in.
    pub fn parse(&self) -> Result<ParsedClosedPaths<'_>, RepositoryError> {
        if self.closed.len() > MAX_CLOSED {
            return Err(RepositoryError::invalid(
                "frozen.closed",
                format!("holds at most {MAX_CLOSED} patterns"),
            ));
        }
        if self.open.len() > MAX_OPEN {
            return Err(RepositoryError::invalid(
                "frozen.open",
                format!("holds at most {MAX_OPEN} patterns"),
            ));
        }
        let mut seen = BTreeSet::new();
        let mut closed = Vec::with_capacity(self.closed.len());
        for (at, entry) in self.closed.iter().enumerate() {
            let field = format!("frozen.closed[{at}]");
            let glob = PathGlob::parse(&entry.pattern)
                .map_err(|error| RepositoryError::invalid(&field, error.to_string()))?;
            if !seen.insert(entry.pattern.as_str()) {
                return Err(RepositoryError::invalid(
                    format!("{field} ({})", entry.pattern),
                    "closed patterns are distinct",
                ));
            }
            if entry.protects.is_empty()
                || entry.protects.len() > MAX_CLOSED_FOR_BYTES
                || entry.protects.chars().any(char::is_control)
            {
                return Err(RepositoryError::invalid(
                    format!("{field}.for"),
                    "names what the pattern is closed for: 1 to 1024 bytes without a control \
                     character",
                ));
            }
            closed.push((glob, entry));
        }
        let mut seen = BTreeSet::new();
        let mut open = Vec::with_capacity(self.open.len());
        for (at, pattern) in self.open.iter().enumerate() {
            let field = format!("frozen.open[{at}] ({pattern})");
            let glob = PathGlob::parse(pattern)
                .map_err(|error| RepositoryError::invalid(&field, error.to_string()))?;
            if !seen.insert(pattern.as_str()) {
                return Err(RepositoryError::invalid(
                    field,
                    "open patterns are distinct",
                ));
            }
            if let Some((_, stand_in)) = closed.iter().find(|(closed, entry)| {
                entry.because == Because::StandsIn && closed.may_overlap(&glob)
            }) {
                return Err(RepositoryError::invalid(
                    field,
                    format!(
                        "reaches into \"{}\", which {}: no Slice opens a path that could stand \
                         in for its trusted material; open a narrower sub-path",
                        stand_in.pattern,
                        Because::StandsIn.describe(&stand_in.protects)
                    ),
                ));
            }
            open.push(glob);
        }
        Ok(ParsedClosedPaths { closed, open })
    }
}

impl ParsedClosedPaths<'_> {
    /// The closed pattern that keeps a proposal from touching `path`, if any: the first
    /// stand-in that matches it, or else the first other pattern that matches it when no
    /// `open` pattern does.
    pub fn closing(&self, path: &str) -> Option<&ClosedPath> {
        let matching = || {
            self.closed
                .iter()
                .filter(|(glob, _)| glob.matches(path))
                .map(|(_, entry)| *entry)
        };
        if let Some(stand_in) = matching().find(|entry| entry.because == Because::StandsIn) {
            return Some(stand_in);
        }
        let first = matching().next()?;
        (!self.open.iter().any(|open| open.matches(path))).then_some(first)
    }

    /// Refuses the first of `paths` (a proposal's edits) that the closure keeps a proposal
    /// from touching, naming the path, the trusted file it is closed for and the rule.
    pub fn check<'p>(
        &self,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Result<(), RepositoryError> {
        for path in paths {
            if let Some(entry) = self.closing(path) {
                let remedy = match entry.because {
                    Because::StandsIn => {
                        "no proposal may create, change or delete it, and no \
                                          Slice can open it"
                    }
                    _ => {
                        "no proposal may create, change or delete it unless the Slice opens \
                          it (\"open\" in slice.json)"
                    }
                };
                return Err(RepositoryError::rejected(
                    Rejection::ProtectedPath,
                    format!("proposal edit {path}"),
                    format!(
                        "{} (the Slice closes \"{}\"): {remedy}",
                        entry.because.describe(&entry.protects),
                        entry.pattern
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(pattern: &str, because: Because) -> ClosedPath {
        ClosedPath {
            pattern: pattern.into(),
            protects: "tests/test_x.py".into(),
            because,
        }
    }

    fn closure(open: &[&str]) -> ClosedPaths {
        ClosedPaths {
            closed: vec![
                closed("tests/test_x/**", Because::StandsIn),
                closed("tests/__pycache__/**", Because::StandsIn),
                closed("tests/**", Because::Beside),
                closed("conftest.py", Because::LoadedBefore),
            ],
            open: open.iter().map(|pattern| (*pattern).into()).collect(),
        }
    }

    #[test]
    fn a_stand_in_stays_closed_and_the_rest_opens_only_where_the_slice_says() {
        let closure = closure(&["tests/extra/**", "conftest.py"]);
        let parsed = closure.parse().unwrap();
        let rule = |path: &str| parsed.closing(path).map(|entry| entry.because);
        assert_eq!(rule("tests/test_x/__init__.py"), Some(Because::StandsIn));
        assert_eq!(rule("Tests/__PYCACHE__/x.pyc"), Some(Because::StandsIn));
        assert_eq!(rule("tests/other/test_y.py"), Some(Because::Beside));
        assert_eq!(rule("tests/extra/test_y.py"), None, "opened");
        assert_eq!(rule("conftest.py"), None, "opened");
        assert_eq!(rule("src/x.py"), None, "never closed");
        let refused = parsed
            .check(["src/x.py", "tests/test_x/__init__.py"])
            .unwrap_err();
        assert_eq!(refused.rejection(), Some(Rejection::ProtectedPath));
        let message = refused.to_string();
        assert!(message.contains("tests/test_x/__init__.py"), "{message}");
        assert!(
            message.contains("could be loaded instead of tests/test_x.py"),
            "{message}"
        );
    }

    #[test]
    fn an_open_pattern_reaching_into_a_stand_in_is_refused() {
        for open in ["tests/**", "tests/test_x/sub/**", "**/__pycache__/**"] {
            let refused = closure(&[open]).parse().unwrap_err();
            assert!(
                refused.to_string().contains("stand in"),
                "{open}: {refused}"
            );
        }
        assert!(closure(&["tests/extra/**"]).parse().is_ok());
    }

    #[test]
    fn malformed_lists_are_refused() {
        let mut twice = closure(&[]);
        twice.closed.push(closed("tests/**", Because::Beside));
        assert!(twice.parse().is_err());
        let mut unnamed = closure(&[]);
        unnamed.closed[0].protects = String::new();
        assert!(unnamed.parse().is_err());
        assert!(closure(&["a", "a"]).parse().is_err());
        assert!(closure(&["!a"]).parse().is_err());
    }
}
