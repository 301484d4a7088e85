//! The host ids the sandboxes run as when sf runs as root: a configured range reserved for
//! them, checked against the system's user, group and subordinate-id files, handed out one per
//! sandbox.
//!
//! A sandbox whose processes run under a host uid of their own is one no other host process
//! can signal, trace or enter (those need the same uid, or privilege over the namespaces its
//! uid owns); a uid shared with other software (`nobody`, say) would let any process of that
//! software do all three.

use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};
use sf_contracts::ExecutorError;

/// A range of host ids (the same numbers as uids and gids), reserved for sandboxes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdRange {
    /// The first id.
    pub first: u32,
    /// How many ids, from `first` on.
    pub count: u32,
}

/// The default range: the 65,536 ids below 2^31, far above the ranges distributions give
/// users, system accounts and (from 100,000 up) subordinate ids.
pub const DEFAULT_IDS: IdRange = IdRange {
    first: 0x7fff_0000,
    count: 0x1_0000,
};

impl Default for IdRange {
    fn default() -> Self {
        DEFAULT_IDS
    }
}

impl IdRange {
    /// The last id of the range.
    pub fn last(&self) -> u32 {
        self.first.saturating_add(self.count.saturating_sub(1))
    }

    fn contains(&self, id: u64) -> bool {
        id >= u64::from(self.first) && id <= u64::from(self.last())
    }

    /// Checks the range itself: not empty, no root, no `nobody`/overflow id, no -1.
    pub fn check(&self) -> Result<(), ExecutorError> {
        let refuse = |rule: &'static str| {
            Err(ExecutorError::InvalidInput {
                input: format!("sandbox ids {}..={}", self.first, self.last()),
                rule,
            })
        };
        if self.count == 0 || u64::from(self.first) + u64::from(self.count) > u64::from(u32::MAX) {
            return refuse("the sandbox id range is not empty and ends below 2^32 - 1");
        }
        if self.contains(0) || self.contains(65534) || self.contains(65535) {
            return refuse(
                "the sandbox id range holds neither root (0) nor nobody or the overflow id \
                 (65534, 65535)",
            );
        }
        Ok(())
    }

    /// Checks that no user, group or subordinate id range of this system uses an id of the
    /// range (`/etc/passwd`, `/etc/group`, `/etc/subuid`, `/etc/subgid`; a file that does not
    /// exist uses none).
    pub fn check_unused(&self) -> Result<(), ExecutorError> {
        for (file, kind) in [
            ("/etc/passwd", Kind::Account),
            ("/etc/group", Kind::Account),
            ("/etc/subuid", Kind::Subordinate),
            ("/etc/subgid", Kind::Subordinate),
        ] {
            let Ok(text) = std::fs::read_to_string(file) else {
                continue;
            };
            if let Some(line) = text.lines().find(|line| self.used_by(line, kind)) {
                return Err(ExecutorError::InvalidInput {
                    input: format!(
                        "sandbox ids {}..={}: {file} uses one ({})",
                        self.first,
                        self.last(),
                        line.split(':').next().unwrap_or_default()
                    ),
                    rule: "the sandbox ids are reserved for sandboxes: no user, group or \
                           subordinate id range of the system may use one",
                });
            }
        }
        Ok(())
    }

    fn used_by(&self, line: &str, kind: Kind) -> bool {
        let fields: Vec<&str> = line.split(':').collect();
        let number = |index: usize| {
            fields
                .get(index)
                .and_then(|field| field.parse::<u64>().ok())
        };
        match kind {
            Kind::Account => number(2).is_some_and(|id| self.contains(id)),
            Kind::Subordinate => match (number(1), number(2)) {
                (Some(start), Some(count)) if count > 0 => {
                    start <= u64::from(self.last()) && start + count > u64::from(self.first)
                }
                _ => false,
            },
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    /// `name:password:id:…`
    Account,
    /// `name:start:count`
    Subordinate,
}

/// Hands out the ids of a range, one per sandbox, in turn from a random start (so that two
/// sf processes are unlikely to use the same id at the same time).
#[derive(Debug)]
pub(crate) struct Ids {
    range: IdRange,
    next: AtomicU32,
}

impl Ids {
    pub fn new(range: IdRange) -> Self {
        let mut start = [0u8; 4];
        // SAFETY: getrandom fills the buffer of the given length (or fails, leaving zeros).
        unsafe { libc::getrandom(start.as_mut_ptr().cast(), start.len(), 0) };
        Self {
            range,
            next: AtomicU32::new(u32::from_ne_bytes(start)),
        }
    }

    /// The id of the next sandbox.
    pub fn take(&self) -> u32 {
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        self.range.first + turn % self.range.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked() {
        assert!(DEFAULT_IDS.check().is_ok());
        for bad in [
            IdRange {
                first: 0,
                count: 10,
            },
            IdRange {
                first: 65530,
                count: 10,
            },
            IdRange {
                first: 1000,
                count: 0,
            },
            IdRange {
                first: u32::MAX - 5,
                count: 10,
            },
        ] {
            assert_eq!(bad.check().unwrap_err().code(), "invalid-input", "{bad:?}");
        }
        let range = IdRange {
            first: 200_000,
            count: 100,
        };
        assert!(range.used_by("x:x:200050:1::/:/bin/sh", Kind::Account));
        assert!(!range.used_by("x:x:200100:1::/:/bin/sh", Kind::Account));
        assert!(range.used_by("alice:199990:11", Kind::Subordinate));
        assert!(!range.used_by("alice:199990:10", Kind::Subordinate));
        assert!(range.used_by("alice:200099:65536", Kind::Subordinate));
    }

    #[test]
    fn ids_stay_in_the_range_and_change_per_sandbox() {
        let range = IdRange {
            first: 300_000,
            count: 3,
        };
        let ids = Ids::new(range);
        let taken: Vec<u32> = (0..6).map(|_| ids.take()).collect();
        assert!(taken.iter().all(|id| (300_000..300_003).contains(id)));
        assert_ne!(taken[0], taken[1]);
        assert_eq!(taken[0], taken[3]);
    }
}
