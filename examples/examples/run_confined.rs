//! Run one small `/bin/sh` program confined with the sandbox-exec Executor.
//!
//! The program builds a `SandboxExecutor` for the shell runtime, describes its runtime and
//! confinement profile (each a digest a judge can pin), and runs one script that reads its
//! argument and an input file and writes to stdout and stderr. It prints the run's status,
//! exit code, stdout and stderr, and the identities the Executor reports it enforced: the
//! program, input, runtime, profile and bounds digests and the Landlock status.
//!
//! The program's files are placed read-only at `/sf/program`, the input's at `/sf/input`; the
//! sandbox has no network and sees only the runtime's readable paths of the host.
//!
//! Run it with `cargo build -p sf-sandbox-exec --bins && cargo run -p sf-examples --example
//! run_confined` (the Executor starts `sf-sandbox-launcher`, which it looks for beside the
//! example's executable and one directory up). It needs a kernel with user namespaces and
//! Landlock.

use std::error::Error;
use std::time::Duration;

use sf_host::contracts::{CancelToken, Executor, RunBounds, RunRequest, RunStatus};
use sf_host::snapshot::SnapshotFile;
use sf_sandbox_exec::{RuntimeConfig, SandboxConfig, SandboxExecutor};

const SCRIPT: &str = "\
read -r name < /sf/input/name.txt
echo \"hello, $name, from $1\"
echo 'a line on stderr' >&2
exit 3
";

fn main() -> Result<(), Box<dyn Error>> {
    // The defaults: `/bin/sh` reading /usr/bin, /bin and the library directories; the launcher
    // found beside this executable (set `config.launcher` to place it elsewhere).
    let config = SandboxConfig::new(RuntimeConfig::shell());
    let executor = SandboxExecutor::new(config)?;
    println!("launcher     {}", executor.launcher().display());

    let runtime = executor.describe_runtime()?;
    println!(
        "executable   {} ({} readable host paths)",
        runtime.executable.display(),
        runtime.readable.len()
    );

    let request = RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: vec![SnapshotFile::regular(
            "greet.sh",
            SCRIPT.as_bytes().to_vec(),
        )],
        entry: "greet.sh".into(),
        args: vec!["the sandbox".into()],
        input: vec![SnapshotFile::regular("name.txt", b"reader\n".to_vec())],
        harness: Vec::new(),
        bounds: RunBounds::new(Duration::from_secs(20), 64 * 1024),
    };
    // `run` is `Err` only if nothing started; how the program ended is in the answer.
    let answer = executor.run(&request, &CancelToken::new())?;

    println!("status       {}", answer.status.code());
    if answer.status == RunStatus::Exited {
        println!("exit code    {}", answer.exit_code.unwrap_or(-1));
    }
    for line in String::from_utf8_lossy(&answer.stdout).lines() {
        println!("stdout       {line}");
    }
    for line in String::from_utf8_lossy(&answer.stderr).lines() {
        println!("stderr       {line}");
    }
    let identities = &answer.identities;
    println!("program      {}", identities.program);
    println!("input        {}", identities.input);
    println!("runtime      {}", identities.runtime);
    println!("profile      {}", identities.profile);
    println!("bounds       {}", identities.bounds);
    // What the Executor enforced, in its own words (mechanism and status).
    for (mechanism, status) in identities.enforcement.facts() {
        println!("enforced     {mechanism} {status}");
    }
    // The identities match what the Executor describes, so a judge can pin them beforehand.
    println!(
        "pinnable     {}",
        identities.runtime == runtime.digest
            && identities.profile == executor.profile()?.digest
            && identities.bounds == request.bounds.digest()
    );
    Ok(())
}
