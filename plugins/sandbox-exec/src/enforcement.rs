//! What sandbox-exec enforced on a run, as the contract's enforcement facts, in the words the
//! older wire shapes map to (so a host that speaks only `run` or `run_v2` reads the same
//! facts): `landlock` (`fully-enforced`, `partially-enforced`, `not-enforced`),
//! `landlock-abi` (the kernel's Landlock ABI), `host-identity` (`reserved-id`: a host uid of
//! the sandbox's own; `caller-id`: the caller's) and `memory` (`cgroup-v1`, `cgroup-v2`: one
//! control group bounded every process; `per-process`: rlimits only).
//!
//! The profile states ([`profile_enforces`]) the one fact every run must report, a fully
//! enforced Landlock ruleset: the rest depend on how sf runs (as root or not) and on the
//! machine's control groups, and are reported, not promised.

use sf_contracts::Enforcement;
use sf_contracts::canonical::{self, Value};
use sf_contracts::legacy_enforcement::{HOST_IDENTITY, LANDLOCK, LANDLOCK_ABI, MEMORY};

use crate::cgroup;

/// A fully enforced Landlock ruleset.
const FULLY_ENFORCED: &str = "fully-enforced";

/// The profile recipe's `enforces` member: the facts every run under the profile reports.
pub(crate) fn profile_enforces() -> Value {
    canonical::object([(LANDLOCK, FULLY_ENFORCED.into())])
}

/// The facts of one run: the Landlock ABI and status the launcher reported (`None`: Landlock
/// was not applied), whether the run had a host id of its own, and the control group that
/// held it.
pub(crate) fn run_facts(
    landlock: Option<(u32, &str)>,
    reserved_id: bool,
    group: Option<cgroup::Version>,
) -> Enforcement {
    let (abi, status) = match landlock {
        Some((abi, FULLY_ENFORCED)) => (Some(abi), FULLY_ENFORCED),
        Some((abi, _)) => (Some(abi), "partially-enforced"),
        None => (None, "not-enforced"),
    };
    let mut facts = vec![
        (LANDLOCK, status),
        (
            HOST_IDENTITY,
            if reserved_id {
                "reserved-id"
            } else {
                "caller-id"
            },
        ),
        (
            MEMORY,
            match group {
                Some(cgroup::Version::V1) => "cgroup-v1",
                Some(cgroup::Version::V2) => "cgroup-v2",
                None => "per-process",
            },
        ),
    ];
    let abi = abi.map(|abi| abi.to_string());
    if let Some(abi) = &abi {
        facts.push((LANDLOCK_ABI, abi));
    }
    Enforcement::from_facts(facts).expect("fixed words, one status per mechanism")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_reports_what_held_it() {
        let full = run_facts(Some((6, FULLY_ENFORCED)), true, Some(cgroup::Version::V1));
        assert_eq!(full.status(LANDLOCK), Some(FULLY_ENFORCED));
        assert_eq!(full.status(LANDLOCK_ABI), Some("6"));
        assert_eq!(full.status(HOST_IDENTITY), Some("reserved-id"));
        assert_eq!(full.status(MEMORY), Some("cgroup-v1"));
        let required = Enforcement::from_value(&profile_enforces()).unwrap();
        assert!(full.unmet(&required).is_empty());

        let weaker = run_facts(Some((4, "partially-enforced")), false, None);
        assert_eq!(weaker.status(LANDLOCK), Some("partially-enforced"));
        assert_eq!(weaker.status(HOST_IDENTITY), Some("caller-id"));
        assert_eq!(weaker.status(MEMORY), Some("per-process"));
        assert_eq!(weaker.unmet(&required).len(), 1);

        let none = run_facts(None, false, Some(cgroup::Version::V2));
        assert_eq!(none.status(LANDLOCK), Some("not-enforced"));
        assert_eq!(none.status(LANDLOCK_ABI), None);
        assert_eq!(none.status(MEMORY), Some("cgroup-v2"));
    }
}
