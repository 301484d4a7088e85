//! The path grammar shared by the repository, snapshots and the executor: relative paths of
//! segments made of `A-Z a-z 0-9 . _ -`, with no `.`, `..` or `.git*` segment (any case), at
//! most [`MAX_PATH_BYTES`] bytes; and the set rules: no two paths equal ignoring case, and no
//! path both a file and a directory.

use std::collections::BTreeMap;

/// The longest path accepted, in bytes. Also bounds every segment below the usual 255-byte
/// file-name limit of Linux file systems, so any accepted path can be written to disk.
pub const MAX_PATH_BYTES: usize = 255;

/// Which path rule an input breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathRule {
    /// Empty, absolute, with an empty segment, or with a byte outside the segment alphabet.
    Grammar,
    /// A `.` or `..` segment.
    DotSegment,
    /// A segment starting with `.git` in any case.
    GitSegment,
    /// Longer than [`MAX_PATH_BYTES`].
    TooLong,
    /// Equal to another path when case is ignored.
    CaseCollision,
    /// A file and a directory at once.
    FileDirectoryClash,
    /// Listed twice.
    Duplicate,
}

impl PathRule {
    /// The stable kebab-case code of the rule.
    pub fn code(self) -> &'static str {
        match self {
            Self::Grammar => "bad-path",
            Self::DotSegment => "dot-segment",
            Self::GitSegment => "git-segment",
            Self::TooLong => "path-too-long",
            Self::CaseCollision => "case-collision",
            Self::FileDirectoryClash => "file-directory-clash",
            Self::Duplicate => "duplicate-path",
        }
    }

    /// The rule in words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Grammar => {
                "a path is relative, with non-empty segments of A-Z a-z 0-9 . _ - separated by /"
            }
            Self::DotSegment => "a path has no . or .. segment",
            Self::GitSegment => "a path has no segment starting with .git (any case)",
            Self::TooLong => "a path is at most 255 bytes",
            Self::CaseCollision => "no two paths may differ only in case",
            Self::FileDirectoryClash => "no path may be both a file and a directory",
            Self::Duplicate => "each path appears once",
        }
    }
}

/// Checks one path against the grammar.
pub fn check_path(path: &str) -> Result<(), PathRule> {
    if path.len() > MAX_PATH_BYTES {
        return Err(PathRule::TooLong);
    }
    if path.is_empty() {
        return Err(PathRule::Grammar);
    }
    for segment in path.split('/') {
        if segment.is_empty()
            || !segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(PathRule::Grammar);
        }
        if segment == "." || segment == ".." {
            return Err(PathRule::DotSegment);
        }
        if segment.len() >= 4 && segment[..4].eq_ignore_ascii_case(".git") {
            return Err(PathRule::GitSegment);
        }
    }
    Ok(())
}

/// Checks a set of file paths: each valid, none twice, none equal to another ignoring case,
/// none a directory of another. Returns the first offending path with its rule.
pub fn check_path_set<'a>(
    paths: impl IntoIterator<Item = &'a str>,
) -> Result<(), (String, PathRule)> {
    // Lowercased path → the path as given; a file-directory clash is also a clash ignoring
    // case, so checking the lowercased set for both finds every case.
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for path in paths {
        check_path(path).map_err(|rule| (path.to_owned(), rule))?;
        let folded = path.to_ascii_lowercase();
        if let Some(earlier) = seen.insert(folded, path) {
            let rule = if earlier == path {
                PathRule::Duplicate
            } else {
                PathRule::CaseCollision
            };
            return Err((path.to_owned(), rule));
        }
    }
    // In sorted order a directory "a" is followed by its children "a/…" directly or after
    // siblings such as "a-b" that sort between "a" and "a/"; scan forward past them.
    let folded: Vec<&String> = seen.keys().collect();
    for (index, parent) in folded.iter().enumerate() {
        let prefix = format!("{parent}/");
        for later in &folded[index + 1..] {
            if later.starts_with(&prefix) {
                return Err((seen[*later].to_owned(), PathRule::FileDirectoryClash));
            }
            if later.as_bytes() > prefix.as_bytes() {
                break;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        for good in ["a", "a/b.txt", "A_b-c.d/e", "x.gi", "git/x", "a.git"] {
            assert_eq!(check_path(good), Ok(()), "{good}");
        }
        let bad = [
            ("", PathRule::Grammar),
            ("/a", PathRule::Grammar),
            ("a/", PathRule::Grammar),
            ("a//b", PathRule::Grammar),
            ("a b", PathRule::Grammar),
            ("a\0b", PathRule::Grammar),
            ("é", PathRule::Grammar),
            ("a\\b", PathRule::Grammar),
            ("./a", PathRule::DotSegment),
            ("a/..", PathRule::DotSegment),
            (".git", PathRule::GitSegment),
            ("a/.GIT/b", PathRule::GitSegment),
            (".gitignore", PathRule::GitSegment),
            (".GitModules", PathRule::GitSegment),
        ];
        for (path, rule) in bad {
            assert_eq!(check_path(path), Err(rule), "{path:?}");
        }
        assert_eq!(check_path(&"a".repeat(255)), Ok(()));
        assert_eq!(check_path(&"a".repeat(256)), Err(PathRule::TooLong));
    }

    #[test]
    fn sets() {
        assert_eq!(check_path_set(["a", "a-b", "b/c"]), Ok(()));
        assert_eq!(
            check_path_set(["a", "a"]),
            Err(("a".into(), PathRule::Duplicate))
        );
        assert_eq!(
            check_path_set(["a", "A"]),
            Err(("A".into(), PathRule::CaseCollision))
        );
        assert_eq!(
            check_path_set(["a", "a-b", "a.c", "a/x"]),
            Err(("a/x".into(), PathRule::FileDirectoryClash))
        );
        assert_eq!(
            check_path_set(["Dir", "dir/x"]),
            Err(("dir/x".into(), PathRule::FileDirectoryClash))
        );
    }
}
