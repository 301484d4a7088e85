//! Where a remote run was executed: the remote-execution Action it travelled as and the worker
//! that ran it, as a remote Executor reports them in its answer ([`crate::RunAnswer::remote`])
//! and an evidence record keeps them. A local run has none.
//!
//! Both come from a cluster, so both are checked ([`RemoteRun::check`]) before a host or a
//! record takes them: the Action as REAPI names a digest, `HASH/SIZE` (64 lowercase hex
//! digits, a size in decimal without leading zeros), the worker's name 1 to
//! [`MAX_WORKER_CHARS`] characters without a control character.

use serde::{Deserialize, Serialize};

/// The most characters a worker's name may hold.
pub const MAX_WORKER_CHARS: usize = 256;

/// The rule a remote run's facts keep, as an error names it.
pub const REMOTE_RUN_RULE: &str = "action is HASH/SIZE (64 lowercase hex digits, a decimal size \
                                   without leading zeros) and worker, when named, 1 to 256 \
                                   characters without a control character";

/// Where a remote run was executed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteRun {
    /// The digest of the Action the run was sent as, `HASH/SIZE`.
    pub action: String,
    /// The name of the worker that ran it, when one vouched for the run; `None` for a run the
    /// cluster lost.
    #[serde(deserialize_with = "crate::canonical::nullable")]
    pub worker: Option<String>,
}

impl RemoteRun {
    /// `Err` with [`REMOTE_RUN_RULE`] when a field breaks it.
    pub fn check(&self) -> Result<(), &'static str> {
        let worker_ok = self.worker.as_ref().is_none_or(|worker| {
            (1..=MAX_WORKER_CHARS).contains(&worker.chars().count())
                && !worker.chars().any(char::is_control)
        });
        if is_action_digest(&self.action) && worker_ok {
            Ok(())
        } else {
            Err(REMOTE_RUN_RULE)
        }
    }
}

fn is_action_digest(text: &str) -> bool {
    let Some((hash, size)) = text.split_once('/') else {
        return false;
    };
    hash.len() == 64
        && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && (1..=20).contains(&size.len())
        && size.bytes().all(|b| b.is_ascii_digit())
        && (size == "0" || !size.starts_with('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(action: &str, worker: Option<&str>) -> RemoteRun {
        RemoteRun {
            action: action.to_owned(),
            worker: worker.map(str::to_owned),
        }
    }

    #[test]
    fn only_a_digest_and_a_plain_name_pass() {
        let hash = "a".repeat(64);
        assert!(
            remote(&format!("{hash}/140"), Some("worker-0"))
                .check()
                .is_ok()
        );
        assert!(remote(&format!("{hash}/0"), None).check().is_ok());
        for action in [
            format!("{hash}/014"),
            format!("{hash}/"),
            format!("{}/1", "A".repeat(64)),
            format!("{}/1", "a".repeat(63)),
            hash.clone(),
        ] {
            assert!(remote(&action, None).check().is_err(), "{action}");
        }
        for worker in ["", "line\nbreak", &"w".repeat(257)] {
            assert!(
                remote(&format!("{hash}/1"), Some(worker)).check().is_err(),
                "{worker:?}"
            );
        }
    }
}
