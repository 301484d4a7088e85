//! Built-in gates: [`OpenGate`] (every call proceeds; the default) and [`FileGate`]. In
//! `sf.toml` they are `[gate] type = "open"` and `type = "file", path = "…"` (see
//! [`crate::plugin::builtin`]).
//!
//! The file gate reads a small JSON file on every call: exactly
//! `{"proceed": true}` proceeds, `{"proceed": false, "reason": "…"}` refuses with that reason,
//! and anything else (absent, unreadable, not a regular file, too large, malformed, extra
//! fields) is an error, which every caller treats as a refusal.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::time::Instant;

use crate::canonical::{self, Value};
use crate::contracts::{Gate, GateAnswer, GateError, is_valid_reason};

/// A gate that always proceeds: what runs when no gate is configured.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenGate;

impl Gate for OpenGate {
    fn current(&self, _deadline: Instant) -> Result<GateAnswer, GateError> {
        Ok(GateAnswer::Proceed)
    }
}

/// The largest gate file read.
pub const MAX_GATE_FILE_BYTES: u64 = 4096;

/// A gate that reads its answer from a file on every call, so an operator can close it by
/// editing one file.
#[derive(Clone, Debug)]
pub struct FileGate {
    path: PathBuf,
}

impl FileGate {
    /// The gate of the file at `path`. Nothing is read until the gate is asked.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    fn read(&self) -> Result<Vec<u8>, GateError> {
        let unavailable = |error: std::io::Error| GateError::Unavailable {
            reason: format!("{}: {error}", self.path.display()),
        };
        // O_NONBLOCK so that a FIFO in place of the file cannot hold the caller.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(&self.path)
            .map_err(unavailable)?;
        let meta = file.metadata().map_err(unavailable)?;
        if !meta.is_file() {
            return Err(GateError::Unavailable {
                reason: format!("{} is not a regular file", self.path.display()),
            });
        }
        let mut bytes = Vec::new();
        file.take(MAX_GATE_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(unavailable)?;
        if bytes.len() as u64 > MAX_GATE_FILE_BYTES {
            return Err(GateError::Malformed {
                what: format!(
                    "{} is larger than {MAX_GATE_FILE_BYTES} bytes",
                    self.path.display()
                ),
            });
        }
        Ok(bytes)
    }
}

impl Gate for FileGate {
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
        let bytes = self.read()?;
        if Instant::now() >= deadline {
            return Err(GateError::Timeout);
        }
        parse_answer(&bytes).map_err(|what| GateError::Malformed {
            what: format!("{}: {what}", self.path.display()),
        })
    }
}

/// Parses a gate answer: `{"proceed":true}` or `{"proceed":false,"reason":"…"}` exactly.
pub fn parse_answer(bytes: &[u8]) -> Result<GateAnswer, String> {
    let value = canonical::parse(bytes).map_err(|error| error.to_string())?;
    let Value::Object(map) = &value else {
        return Err("a gate answer is a JSON object".into());
    };
    match (map.get("proceed"), map.get("reason"), map.len()) {
        (Some(Value::Bool(true)), None, 1) => Ok(GateAnswer::Proceed),
        (Some(Value::Bool(false)), Some(Value::String(reason)), 2) if is_valid_reason(reason) => {
            Ok(GateAnswer::Refuse { reason: reason.clone() })
        }
        _ => Err(r#"a gate answer is exactly {"proceed": true} or {"proceed": false, "reason": "<1-4096 printable ASCII>"}"#.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_answers_parse() {
        assert_eq!(
            parse_answer(br#"{"proceed":true}"#),
            Ok(GateAnswer::Proceed)
        );
        assert_eq!(
            parse_answer(br#" { "proceed" : true } "#),
            Ok(GateAnswer::Proceed)
        );
        assert_eq!(
            parse_answer(br#"{"proceed":false,"reason":"frozen"}"#),
            Ok(GateAnswer::Refuse {
                reason: "frozen".into()
            })
        );
        for bad in [
            &br#"{"proceed":"yes"}"#[..],
            br#"{"proceed":true,"reason":"x"}"#,
            br#"{"proceed":true,"extra":1}"#,
            br#"{"proceed":false}"#,
            br#"{"proceed":false,"reason":""}"#,
            br#"{"proceed":false,"reason":"tab\there"}"#,
            br#"true"#,
            br#"{"proceed":true,"proceed":true}"#,
            b"",
        ] {
            assert!(
                parse_answer(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // A reason is kept whole up to the contract's limit, and refused past it.
        let whole = format!(r#"{{"proceed":false,"reason":"{}"}}"#, "a".repeat(257));
        assert!(parse_answer(whole.as_bytes()).is_ok());
        let long = format!(r#"{{"proceed":false,"reason":"{}"}}"#, "a".repeat(4097));
        assert!(parse_answer(long.as_bytes()).is_err());
    }

    #[test]
    fn file_gate_reads_on_every_call_and_refuses_what_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gate.json");
        let gate = FileGate::new(&path);
        let later = Instant::now() + std::time::Duration::from_secs(5);
        assert!(matches!(
            gate.current(later),
            Err(GateError::Unavailable { .. })
        ));
        std::fs::write(&path, br#"{"proceed":true}"#).unwrap();
        assert_eq!(gate.current(later), Ok(GateAnswer::Proceed));
        std::fs::write(&path, br#"{"proceed":false,"reason":"closed"}"#).unwrap();
        assert_eq!(
            gate.current(later),
            Ok(GateAnswer::Refuse {
                reason: "closed".into()
            })
        );
        std::fs::write(&path, vec![b' '; 5000]).unwrap();
        assert!(matches!(
            gate.current(later),
            Err(GateError::Malformed { .. })
        ));
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/null", &path).unwrap();
        assert!(matches!(
            gate.current(later),
            Err(GateError::Unavailable { .. })
        ));
        std::fs::remove_file(&path).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(matches!(
            gate.current(later),
            Err(GateError::Unavailable { .. })
        ));
    }
}
