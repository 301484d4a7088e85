//! The Executor conformance harness for a `/bin/sh` runtime: each behaviour the suite asks
//! for as a shell script.

use std::sync::Arc;

use sf_sdk::conformance::executor::{Behaviour, Harness, Program};
use sf_sdk::contracts::Executor;
use sf_sdk::contracts::snapshot::SnapshotFile;

/// Where the scripts read the run's input files: the directory sandbox-exec shows the input
/// at inside a run.
const INPUT_DIR: &str = "/sf/input";

/// The shell harness over an executor whose runtime is `/bin/sh`.
pub struct ShellHarness(pub Arc<dyn Executor>);

impl Harness for ShellHarness {
    fn executor(&self) -> &dyn Executor {
        self.0.as_ref()
    }

    fn program(&self, behaviour: &Behaviour) -> Program {
        let script = match behaviour {
            Behaviour::Print {
                stdout,
                stderr,
                input,
                code,
            } => {
                let mut script = format!(
                    "printf '%s\\n' '{stdout}'\nprintf '%s\\n' \"$1\"\nprintf '%s\\n' '{stderr}' >&2\n"
                );
                if let Some(path) = input {
                    script.push_str(&format!("cat '{INPUT_DIR}/{path}'\n"));
                }
                script.push_str(&format!("exit {code}\n"));
                script
            }
            Behaviour::Sleep => "sleep 600\n".to_owned(),
            Behaviour::Flood => {
                "while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done\n".to_owned()
            }
        };
        Program {
            files: vec![SnapshotFile::regular("main.sh", script.into_bytes())],
            entry: "main.sh".into(),
            args: Vec::new(),
        }
    }
}
