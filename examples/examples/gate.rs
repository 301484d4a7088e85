//! Ask gates whether an effect may proceed: the built-in file gate and a custom gate.
//!
//! A Gate answers one question, "may this proceed now?", with proceed, or refuse and a reason.
//! Callers treat anything but an exact, timely proceed (an error, a late answer) as a refusal,
//! so a gate cannot widen what it allows by failing.
//!
//! The program writes a gate file and asks the `FileGate` three times: with
//! `{"proceed": true}`, with a refusal and its reason, and with a malformed file (an error,
//! hence a refusal). It then implements a gate of its own, `QuotaGate`, that lets a fixed
//! number of effects proceed and refuses every later one, and asks it three times.
//!
//! Run it with `cargo run -p sf-examples --example gate`. The gate file lives in a temporary
//! directory that is removed when the program ends.

use std::error::Error;
use std::fs;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sf_host::contracts::{Gate, GateAnswer, GateError};
use sf_host::gate::FileGate;

/// A custom gate: proceeds `limit` times, then refuses.
struct QuotaGate {
    limit: u32,
    used: AtomicU32,
}

impl Gate for QuotaGate {
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
        if Instant::now() >= deadline {
            return Err(GateError::Timeout);
        }
        // Count this call and answer from the count; concurrent callers each get one slot.
        let used = self.used.fetch_add(1, Ordering::SeqCst);
        if used < self.limit {
            Ok(GateAnswer::Proceed)
        } else {
            // A reason is 1 to 256 printable ASCII characters.
            Ok(GateAnswer::Refuse {
                reason: format!("the quota of {} integrations is spent", self.limit),
            })
        }
    }
}

/// Asks `gate` and prints what a caller would conclude.
fn ask(label: &str, gate: &dyn Gate) {
    let deadline = Instant::now() + Duration::from_secs(5);
    match gate.current(deadline) {
        Ok(GateAnswer::Proceed) => println!("{label:<24} proceed"),
        Ok(GateAnswer::Refuse { reason }) => println!("{label:<24} refuse: {reason}"),
        Err(error) => println!("{label:<24} refuse ({}): {error}", error.code()),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let workdir = tempfile::Builder::new().prefix("sf-gate-").tempdir()?;
    let gate_file = workdir.path().join("gate.json");
    // The file is read on every call, so an operator closes the gate by editing one file.
    let file_gate = FileGate::new(&gate_file);

    fs::write(&gate_file, br#"{"proceed": true}"#)?;
    ask("file gate (open)", &file_gate);

    fs::write(
        &gate_file,
        br#"{"proceed": false, "reason": "release freeze until Monday"}"#,
    )?;
    ask("file gate (closed)", &file_gate);

    fs::write(&gate_file, br#"{"proceed": "yes"}"#)?;
    ask("file gate (malformed)", &file_gate);

    fs::remove_file(&gate_file)?;
    ask("file gate (absent)", &file_gate);

    let quota = QuotaGate {
        limit: 2,
        used: AtomicU32::new(0),
    };
    for call in 1..=3 {
        ask(&format!("quota gate (call {call})"), &quota);
    }
    Ok(())
}
