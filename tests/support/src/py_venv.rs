//! Python venvs of pinned packages from PyPI, made under the target directory by a `.ci/`
//! script (which CI runs first; a test run alone runs it too), for the independent
//! implementations sf's output is checked with. A venv that cannot be made fails the test:
//! nothing is skipped.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `<target>/<name>`, made (or found up to date) by `.ci/<script> <target>/<name>`.
pub fn made(name: &str, script: &str) -> PathBuf {
    let profile = crate::build::profile_dir();
    let venv = profile.parent().expect("<target>/<profile>").join(name);
    let script = crate::build::workspace_root().join(".ci").join(script);
    let output = Command::new(&script)
        .arg(&venv)
        .output()
        .unwrap_or_else(|error| panic!("running {}: {error}", script.display()));
    assert!(
        output.status.success(),
        "{} could not make {name} (it installs from PyPI): {}\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    venv
}

/// Runs `venv`'s Python on the program `program` with `args`, `stdin` written to it and
/// closed: its output (the caller judges the status).
pub fn run(venv: &Path, program: &str, args: &[&OsStr], stdin: &[u8]) -> Output {
    let mut child = Command::new(venv.join("bin/python"))
        .args(["-c", program])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the venv's python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("writing the program's input");
    child.wait_with_output().expect("the program's output")
}
