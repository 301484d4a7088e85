//! The Executor's own limits a run hit: processes, memory, file size, CPU time, open files,
//! scratch space. A limit the Executor sets is the sandbox's, not the Candidate's: a run that
//! hit one says nothing about the program that the Slice asked (a test suite that could not
//! start its hundredth thread failed for the sandbox's reason), so a judge never attributes
//! its outcome to the program.
//!
//! An Executor states every limit it saw hit ([`LimitHit`], at most one per [`Limit`], in
//! [`Limit`] order) with the limit's value and how it knows, in its own words (the counter it
//! read). What it cannot see it does not state: a limit hit that left no trace the Executor
//! can read (a failed `clone` inside the run, say, when no control group counts it) is not in
//! the list, and the Executor's documentation says which hits it sees.

use std::fmt;

use crate::canonical::MAX_SAFE_INTEGER;

crate::word_enum! {
    /// A kind of limit the Executor sets on a run.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Limit {
        /// Processes and threads at once (a fork or a thread was refused).
        "processes" Processes,
        /// The memory of the whole run (an allocation failed, or a process was killed).
        "memory" Memory,
        /// The size of one file written (a write was refused past it).
        "file-size" FileSize,
        /// The CPU time of one process (a process was stopped at it).
        "cpu-time" CpuTime,
        /// The open files of one process (an open was refused).
        "open-files" OpenFiles,
        /// The bytes the scratch space holds (it was full).
        "scratch" Scratch,
        /// The files and directories the scratch space holds (it was full).
        "scratch-files" ScratchFiles,
        /// The memory of all the runs of one collection together (the Executor's total,
        /// reached while this run was within its own bound): never a bound a check declares.
        "collection-memory" CollectionMemory,
    }
}

impl Limit {
    /// The limit in words, as a reason names it: `process limit`, `memory limit`, ….
    pub fn describe(self) -> &'static str {
        match self {
            Self::Processes => "process limit",
            Self::Memory => "memory limit",
            Self::FileSize => "file-size limit",
            Self::CpuTime => "CPU-time limit",
            Self::OpenFiles => "open-files limit",
            Self::Scratch => "scratch space",
            Self::ScratchFiles => "scratch file count",
            Self::CollectionMemory => "collection's total memory",
        }
    }

    /// `value` in the limit's unit: processes, bytes, seconds or files.
    pub fn amount(self, value: u64) -> String {
        const MIB: u64 = 1 << 20;
        match self {
            Self::Processes => format!("{value}"),
            Self::Memory | Self::FileSize | Self::Scratch | Self::CollectionMemory => {
                if value >= MIB && value.is_multiple_of(MIB) {
                    format!("{} MiB", value / MIB)
                } else {
                    format!("{value} bytes")
                }
            }
            Self::CpuTime => format!("{value} s"),
            Self::OpenFiles | Self::ScratchFiles => format!("{value} files"),
        }
    }
}

/// The most characters of a [`LimitHit::detail`].
pub const MAX_LIMIT_DETAIL_CHARS: usize = 256;

/// One limit a run hit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LimitHit {
    limit: Limit,
    value: u64,
    detail: String,
}

impl LimitHit {
    /// That the run hit `limit`, whose value was `value` (in the limit's unit, at most
    /// 2^53 − 1), as `detail` says (1 to [`MAX_LIMIT_DETAIL_CHARS`] characters, none a
    /// control character). `Err` names the rule broken.
    pub fn new(limit: Limit, value: u64, detail: impl Into<String>) -> Result<Self, String> {
        let detail = detail.into();
        if value > MAX_SAFE_INTEGER as u64 {
            return Err(format!(
                "the value of the {} is at most 2^53 - 1",
                limit.as_str()
            ));
        }
        if detail.is_empty()
            || detail.chars().count() > MAX_LIMIT_DETAIL_CHARS
            || detail.chars().any(char::is_control)
        {
            return Err(format!(
                "the detail of a limit hit is 1 to {MAX_LIMIT_DETAIL_CHARS} characters without \
                 control characters"
            ));
        }
        Ok(Self {
            limit,
            value,
            detail,
        })
    }

    /// Which limit.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// The limit's value in force for the run, in its unit.
    pub fn value(&self) -> u64 {
        self.value
    }

    /// How the Executor knows, in its words.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

/// `the run hit the sandbox's process limit (1024): pids.events max 3`.
impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the run hit the sandbox's {} ({}): {}",
            self.limit.describe(),
            self.limit.amount(self.value),
            self.detail
        )
    }
}

/// Checks a run's list of limits hit: at most one per limit, in [`Limit`] order. `Err`
/// names the rule broken.
pub fn check_limits_hit(hits: &[LimitHit]) -> Result<(), String> {
    if hits.windows(2).any(|pair| pair[0].limit >= pair[1].limit) {
        return Err(
            "the limits hit are listed once each, in the order processes, memory, \
                    file-size, cpu-time, open-files, scratch, scratch-files"
                .to_owned(),
        );
    }
    Ok(())
}

/// A limit hit writes itself as `{"detail", "limit", "value"}`.
impl serde::Serialize for LimitHit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut state = serializer.serialize_struct("LimitHit", 3)?;
        state.serialize_field("detail", &self.detail)?;
        state.serialize_field("limit", &self.limit)?;
        state.serialize_field("value", &self.value)?;
        state.end()
    }
}

/// A limit hit reads itself from `{"detail", "limit", "value"}`, checked as
/// [`LimitHit::new`] checks it.
impl<'de> serde::Deserialize<'de> for LimitHit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            detail: String,
            limit: Limit,
            value: u64,
        }
        let wire = Wire::deserialize(deserializer)?;
        LimitHit::new(wire.limit, wire.value, wire.detail).map_err(serde::de::Error::custom)
    }
}

/// Reads a list of limits hit and checks it as [`check_limits_hit`] does.
pub fn deserialize_limits_hit<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<LimitHit>, D::Error> {
    let hits = <Vec<LimitHit> as serde::Deserialize>::deserialize(deserializer)?;
    check_limits_hit(&hits).map_err(serde::de::Error::custom)?;
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_names_its_limit_value_and_detail() {
        let hit = LimitHit::new(Limit::Processes, 1024, "pids.events max 3").unwrap();
        assert_eq!(
            hit.to_string(),
            "the run hit the sandbox's process limit (1024): pids.events max 3"
        );
        let memory = LimitHit::new(Limit::Memory, 2 << 30, "oom_kill 1").unwrap();
        assert_eq!(
            memory.to_string(),
            "the run hit the sandbox's memory limit (2048 MiB): oom_kill 1"
        );
        assert_eq!(Limit::Scratch.amount(1000), "1000 bytes");
        assert_eq!(Limit::CpuTime.amount(300), "300 s");
        for bad in [
            "",
            "a\nb",
            "\u{7f}",
            &"x".repeat(MAX_LIMIT_DETAIL_CHARS + 1),
        ] {
            assert!(LimitHit::new(Limit::Memory, 1, bad).is_err(), "{bad:?}");
        }
        assert!(LimitHit::new(Limit::Memory, 1 << 53, "x").is_err());
    }

    #[test]
    fn a_list_holds_each_limit_once_in_order() {
        let hit = |limit| LimitHit::new(limit, 1, "seen").unwrap();
        assert!(check_limits_hit(&[]).is_ok());
        assert!(check_limits_hit(&[hit(Limit::Processes), hit(Limit::Scratch)]).is_ok());
        assert!(check_limits_hit(&[hit(Limit::Scratch), hit(Limit::Processes)]).is_err());
        assert!(check_limits_hit(&[hit(Limit::Memory), hit(Limit::Memory)]).is_err());
    }

    #[test]
    fn a_hit_reads_back_as_written_and_refuses_what_new_refuses() {
        let hit = LimitHit::new(Limit::FileSize, 16 << 20, "SIGXFSZ").unwrap();
        let text = serde_json::to_string(&hit).unwrap();
        assert_eq!(
            text,
            r#"{"detail":"SIGXFSZ","limit":"file-size","value":16777216}"#
        );
        assert_eq!(serde_json::from_str::<LimitHit>(&text).unwrap(), hit);
        for bad in [
            r#"{"detail":"","limit":"file-size","value":1}"#,
            r#"{"detail":"x","limit":"disk","value":1}"#,
            r#"{"detail":"x","limit":"memory","value":1,"more":1}"#,
            r#"{"detail":"x","limit":"memory","value":9007199254740992}"#,
        ] {
            assert!(serde_json::from_str::<LimitHit>(bad).is_err(), "{bad}");
        }
    }
}
