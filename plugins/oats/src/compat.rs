//! `compatibility.oats`: which oats contract versions a capability admits, with oats's own
//! rules. sf implements the 0.24.0 contract ([`OATS_CONTRACT_VERSION`]).
//!
//! Three forms are accepted, with the strict grammar of oats package manifests
//! (`^(>=|\^)?\d+\.\d+\.\d+$`):
//! - `>=X.Y.Z`: the running version is at least X.Y.Z;
//! - `X.Y.Z`: exactly that version;
//! - `^X.Y.Z`: the same major version and at least X.Y.Z. Unlike Cargo and npm, this holds
//!   for 0.x too: `^0.23.0` admits 0.24.0.
//!
//! oats's runtime lets any other form pass; sf refuses it instead (`banana`, `>=1.2`,
//! `~1.2.3`, `>= 1.2.3`).

use std::cmp::Ordering;
use std::fmt;

/// The oats capability contract version sf implements.
pub const OATS_CONTRACT_VERSION: Version = Version {
    major: 0,
    minor: 24,
    patch: 0,
};

/// A three-part version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// The first number (X of X.Y.Z).
    pub major: u64,
    /// The second number (Y).
    pub minor: u64,
    /// The third number (Z).
    pub patch: u64,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Version {
    /// Parses `\d+\.\d+\.\d+` exactly.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.');
        let mut next = || -> Option<u64> {
            let part = parts.next()?;
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let version = Self {
            major: next()?,
            minor: next()?,
            patch: next()?,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(version)
    }
}

/// A parsed `compatibility.oats` range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// `>=X.Y.Z`: that version or any later one.
    AtLeast(Version),
    /// `X.Y.Z`: that version only.
    Exactly(Version),
    /// `^X.Y.Z`: the same major version, at least X.Y.Z (also when the major is 0).
    Caret(Version),
}

impl Range {
    /// Parses one of the three forms; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        if let Some(rest) = text.strip_prefix(">=") {
            Version::parse(rest).map(Self::AtLeast)
        } else if let Some(rest) = text.strip_prefix('^') {
            Version::parse(rest).map(Self::Caret)
        } else {
            Version::parse(text).map(Self::Exactly)
        }
    }

    /// Whether the range admits `version`.
    pub fn admits(&self, version: Version) -> bool {
        match self {
            Self::AtLeast(floor) => version.cmp(floor) != Ordering::Less,
            Self::Exactly(exact) => version == *exact,
            Self::Caret(floor) => version.major == floor.major && version >= *floor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    #[test]
    fn oats_semantics() {
        let running = OATS_CONTRACT_VERSION;
        for admitted in [
            ">=0.24.0", ">=0.23.0", "0.24.0", "^0.23.0", "^0.24.0", ">=0.0.0",
        ] {
            assert!(
                Range::parse(admitted).unwrap().admits(running),
                "{admitted}"
            );
        }
        for refused in [
            ">=0.24.1",
            ">=999.0.0",
            "0.23.0",
            "^0.24.1",
            "^1.0.0",
            "0.24.1",
        ] {
            assert!(!Range::parse(refused).unwrap().admits(running), "{refused}");
        }
        assert!(Range::parse("^1.2.3").unwrap().admits(v("1.9.0")));
        assert!(!Range::parse("^1.2.3").unwrap().admits(v("2.0.0")));
    }

    #[test]
    fn other_forms_are_refused() {
        for bad in [
            "banana",
            ">=1.2",
            "~1.2.3",
            ">= 1.2.3",
            "1",
            "",
            "v1.2.3",
            "1.2.3-rc1",
            "<1.2.3",
            ">1.2.3",
            "1.2.3.4",
            "^",
            ">=",
            "1..3",
            "1.2.x",
            "+1.2.3",
        ] {
            assert!(Range::parse(bad).is_none(), "{bad:?}");
        }
    }
}
