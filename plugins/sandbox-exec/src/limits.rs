//! The limits a run hit, in the contract's words ([`LimitHit`]): from the run's control
//! group's counters (processes, memory; read by the supervisor once the run's namespace is
//! gone) and from what the sandbox's init saw (file size, CPU time, scratch; its `hit`
//! reports). What neither sees is not stated: a fork refused by RLIMIT_NPROC or an allocation
//! refused by RLIMIT_AS when no group bounds the run, an open refused at RLIMIT_NOFILE, a
//! scratch filled and emptied again before the program's first process ended.

use std::collections::BTreeMap;

use sf_contracts::{Limit, LimitHit};

use crate::cgroup::{Events, Version};
use crate::profile::Limits;

/// The limit's value in force under `limits` (and the collection's `total`), in the
/// contract's unit.
fn value(limits: &Limits, total: Option<u64>, limit: Limit) -> u64 {
    match limit {
        Limit::CollectionMemory => total.unwrap_or(0),
        Limit::Processes => limits.processes,
        Limit::Memory => limits.memory_bytes,
        Limit::FileSize => limits.file_size_bytes,
        Limit::CpuTime => limits.cpu_seconds,
        Limit::OpenFiles => limits.open_files,
        Limit::Scratch => limits.scratch_bytes,
        Limit::ScratchFiles => limits.scratch_inodes,
    }
}

/// What the group's counters say was hit.
fn group_hits(version: Version, events: &Events) -> Vec<(Limit, String)> {
    let mut hits = Vec::new();
    if events.processes_refused > 0 {
        hits.push((
            Limit::Processes,
            format!(
                "the run's control group refused {} fork(s) or thread(s) (pids.events max {})",
                events.processes_refused, events.processes_refused
            ),
        ));
    }
    let memory = match version {
        Version::V1 if events.oom_kills > 0 || events.under_oom => Some(format!(
            "the run's control group ran out of memory (memory.oom_control oom_kill {}, \
             under_oom {})",
            events.oom_kills,
            u8::from(events.under_oom)
        )),
        Version::V2 if events.oom_kills > 0 || events.oom > 0 => Some(format!(
            "the run's control group ran out of memory (memory.events oom {}, oom_kill {})",
            events.oom, events.oom_kills
        )),
        _ => None,
    };
    hits.extend(memory.map(|detail| match events.collection_total {
        // Killed below its own bound: the collection's runs together reached their total.
        Some(total) if events.within_own_bound => (
            Limit::CollectionMemory,
            format!(
                "the collection's runs together reached their total memory bound ({}) while \
                 this run was below its own; {detail}",
                Limit::CollectionMemory.amount(total)
            ),
        ),
        _ => (Limit::Memory, detail),
    }));
    hits
}

/// The limits the run hit: the init's `reported` hits (limit word, detail) and, when a group
/// bounded the run, what its counters say (`group`: its kind and its counters, or why they
/// could not be read). Anything that cannot be stated becomes one of `problems`, which makes
/// the run unattributable: a limit the run may have hit is never left out unsaid.
pub(crate) fn limits_hit(
    limits: &Limits,
    reported: &[(String, String)],
    group: Option<(Version, Result<Events, String>)>,
    problems: &mut Vec<String>,
) -> Vec<LimitHit> {
    let mut seen: BTreeMap<Limit, String> = BTreeMap::new();
    let total = match &group {
        Some((_, Ok(events))) => events.collection_total,
        _ => None,
    };
    for (word, detail) in reported {
        match Limit::parse(word) {
            Some(limit) => {
                seen.entry(limit).or_insert_with(|| detail.clone());
            }
            None => problems.push(format!("the sandbox reported an unknown limit {word:?}")),
        }
    }
    match group {
        Some((version, Ok(events))) => {
            for (limit, detail) in group_hits(version, &events) {
                seen.entry(limit).or_insert(detail);
            }
        }
        Some((_, Err(reason))) => problems.push(format!(
            "the run's control group's counters could not be read, so whether the run hit its \
             process or memory limit is unknown: {reason}"
        )),
        None => {}
    }
    let mut hits = Vec::new();
    for (limit, detail) in seen {
        match LimitHit::new(limit, value(limits, total, limit), detail) {
            Ok(hit) => hits.push(hit),
            Err(rule) => problems.push(format!(
                "the run hit the sandbox's {}, which cannot be stated: {rule}",
                limit.describe()
            )),
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(processes_refused: u64, oom_kills: u64, oom: u64, under_oom: bool) -> Events {
        Events {
            processes_refused,
            oom_kills,
            oom,
            under_oom,
            within_own_bound: false,
            collection_total: Some(8 << 30),
        }
    }

    #[test]
    fn a_kill_below_the_runs_own_bound_is_the_collections() {
        let limits = Limits::default();
        let mut problems = Vec::new();
        let below = Events {
            within_own_bound: true,
            ..events(0, 1, 0, false)
        };
        let hits = limits_hit(&limits, &[], Some((Version::V1, Ok(below))), &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].limit(), Limit::CollectionMemory);
        assert_eq!(hits[0].value(), 8 << 30);
        assert!(hits[0].detail().contains("8192 MiB"), "{hits:?}");
        // At its own bound, the run's own memory limit.
        let hits = limits_hit(
            &limits,
            &[],
            Some((Version::V1, Ok(events(0, 1, 0, false)))),
            &mut problems,
        );
        assert_eq!(hits[0].limit(), Limit::Memory);
        assert_eq!(hits[0].value(), limits.memory_bytes);
    }

    #[test]
    fn the_groups_counters_and_the_inits_reports_are_stated_in_order() {
        let limits = Limits::default();
        let mut problems = Vec::new();
        let reported = vec![
            ("scratch".to_owned(), "full".to_owned()),
            ("file-size".to_owned(), "SIGXFSZ ended 1 process".to_owned()),
        ];
        let hits = limits_hit(
            &limits,
            &reported,
            Some((Version::V1, Ok(events(3, 1, 0, false)))),
            &mut problems,
        );
        assert!(problems.is_empty(), "{problems:?}");
        let kinds: Vec<Limit> = hits.iter().map(LimitHit::limit).collect();
        assert_eq!(
            kinds,
            [
                Limit::Processes,
                Limit::Memory,
                Limit::FileSize,
                Limit::Scratch
            ]
        );
        assert_eq!(hits[0].value(), limits.processes);
        assert!(hits[0].detail().contains("pids.events max 3"), "{hits:?}");
        assert!(hits[1].detail().contains("oom_kill 1"), "{hits:?}");
        assert_eq!(hits[3].value(), limits.scratch_bytes);
        sf_contracts::check_limits_hit(&hits).unwrap();
    }

    #[test]
    fn quiet_counters_state_nothing_and_unreadable_ones_are_a_problem() {
        let limits = Limits::default();
        let mut problems = Vec::new();
        for (version, quiet) in [
            (Version::V1, events(0, 0, 0, false)),
            (Version::V2, events(0, 0, 0, true)),
        ] {
            assert!(limits_hit(&limits, &[], Some((version, Ok(quiet))), &mut problems).is_empty());
        }
        assert!(problems.is_empty());
        let v2 = limits_hit(
            &limits,
            &[],
            Some((Version::V2, Ok(events(0, 0, 2, false)))),
            &mut problems,
        );
        assert_eq!(v2[0].limit(), Limit::Memory);
        assert!(v2[0].detail().contains("memory.events oom 2"), "{v2:?}");
        let unread = limits_hit(
            &limits,
            &[("bogus".to_owned(), "x".to_owned())],
            Some((Version::V1, Err("reading pids.events: gone".to_owned()))),
            &mut problems,
        );
        assert!(unread.is_empty());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[1].contains("pids.events: gone"), "{problems:?}");
    }
}
