//! The `[executor]` section of type `reapi`, parsed strictly (an unknown key is refused), the
//! same whether the backend is linked or loaded as a plugin:
//!
//! ```toml
//! [executor]
//! type = "reapi"
//! endpoint = "http://127.0.0.1:50051"  # the cluster's gRPC endpoint (plaintext HTTP/2)
//! instance = "main"                    # the REAPI instance name (default: "")
//! worker = "HASH/SIZE"                 # the worker description sf worker prints
//! # wait_seconds = 600      # beyond a run's timeout: queueing, transfers, sandbox set-up
//! # reconnect_seconds = 60  # how long a lost connection to the cluster is retried
//! # call_seconds = 120      # the longest one call to the cluster may take
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sf_contracts::ExecutorError;

use crate::digest;
use crate::proto::execution::Digest;

/// The `[executor]` section of type `reapi`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReapiBackend {
    /// The cluster's endpoint, `http://HOST:PORT`.
    pub endpoint: String,
    /// The REAPI instance name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instance: String,
    /// The digest of the worker description (`HASH/SIZE`), as `sf worker` prints it.
    pub worker: String,
    /// Seconds a run may take beyond its timeout before sf gives up on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u64>,
    /// Seconds a lost connection is retried before the run is given up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconnect_seconds: Option<u64>,
    /// Seconds one call may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_seconds: Option<u64>,
}

/// A checked section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The endpoint.
    pub endpoint: String,
    /// The instance name.
    pub instance: String,
    /// The worker description's digest.
    pub worker: Digest,
    /// How long a run may take beyond its timeout.
    pub wait: Duration,
    /// How long a lost connection is retried.
    pub reconnect: Duration,
    /// How long one call may take.
    pub call: Duration,
}

/// The most seconds any of the durations may be (a day).
const MAX_SECONDS: u64 = 24 * 3600;

impl ReapiBackend {
    /// The section, checked: `invalid-input` naming the key at fault.
    pub fn settings(&self) -> Result<Settings, ExecutorError> {
        let invalid =
            |input: String, rule: &'static str| ExecutorError::InvalidInput { input, rule };
        let rest = self.endpoint.strip_prefix("http://").ok_or_else(|| {
            invalid(
                format!("endpoint {:?}", self.endpoint),
                "the endpoint is http://HOST:PORT (TLS is not built yet: reach a TLS cluster \
                 through a local proxy)",
            )
        })?;
        if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return Err(invalid(
                format!("endpoint {:?}", self.endpoint),
                "the endpoint is http://HOST:PORT with no path, query or user",
            ));
        }
        if self.instance.len() > 256 || self.instance.contains(char::is_control) {
            return Err(invalid(
                format!("instance {:?}", self.instance),
                "an instance name is at most 256 characters, none a control character",
            ));
        }
        let worker = digest::parse(&self.worker).map_err(|_| {
            invalid(
                format!("worker {:?}", self.worker),
                "the worker description is named HASH/SIZE (64 lowercase hex digits, a slash, \
                 the size), as sf worker prints it",
            )
        })?;
        let seconds = |name: &str, value: Option<u64>, default: u64| {
            let value = value.unwrap_or(default);
            if value == 0 || value > MAX_SECONDS {
                return Err(invalid(
                    format!("{name} {value}"),
                    "a duration is 1 to 86400 seconds",
                ));
            }
            Ok(Duration::from_secs(value))
        };
        Ok(Settings {
            endpoint: self.endpoint.clone(),
            instance: self.instance.clone(),
            worker,
            wait: seconds("wait_seconds", self.wait_seconds, 600)?,
            reconnect: seconds("reconnect_seconds", self.reconnect_seconds, 60)?,
            call: seconds("call_seconds", self.call_seconds, 120)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, String> {
        let backend: ReapiBackend = serde_json::from_str(text).map_err(|e| e.to_string())?;
        backend.settings().map_err(|e| e.to_string())
    }

    const WORKER: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/0";

    #[test]
    fn sections_parse_with_defaults() {
        let settings = parse(&format!(
            r#"{{"endpoint":"http://127.0.0.1:50051","instance":"main","worker":"{WORKER}"}}"#
        ))
        .unwrap();
        assert_eq!(settings.instance, "main");
        assert_eq!(settings.wait, Duration::from_secs(600));
        assert_eq!(digest::text(&settings.worker), WORKER);
        let settings = parse(&format!(
            r#"{{"endpoint":"http://h:1","worker":"{WORKER}","wait_seconds":5,"reconnect_seconds":2,"call_seconds":3}}"#
        ))
        .unwrap();
        assert_eq!(settings.instance, "");
        assert_eq!(settings.reconnect, Duration::from_secs(2));
    }

    #[test]
    fn bad_sections_are_refused() {
        for text in [
            format!(r#"{{"endpoint":"https://h:1","worker":"{WORKER}"}}"#),
            format!(r#"{{"endpoint":"http://h:1/x","worker":"{WORKER}"}}"#),
            format!(r#"{{"endpoint":"http://","worker":"{WORKER}"}}"#),
            r#"{"endpoint":"http://h:1","worker":"nope"}"#.to_owned(),
            format!(r#"{{"endpoint":"http://h:1","worker":"{WORKER}","wait_seconds":0}}"#),
            format!(r#"{{"endpoint":"http://h:1","worker":"{WORKER}","other":1}}"#),
            r#"{"endpoint":"http://h:1"}"#.to_owned(),
        ] {
            assert!(parse(&text).is_err(), "{text}");
        }
    }
}
