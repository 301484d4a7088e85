//! Running one capability script through an [`Executor`]: `node <script> <tokens…> <args…>`,
//! without a shell.
//!
//! The Executor contract runs a program snapshot (an entry file and arguments) with one
//! input snapshot, and gives the program a cleared environment; it has no notion of
//! environment variables, a working directory or standard input. sf therefore runs a small
//! launcher ([`LAUNCHER`]) as the entry. The program is:
//!
//! ```text
//! artifact/…                     the capability's files (read-only), as hashed
//! sf-oats-launch.mjs             the launcher
//! sf-kernel-unavailable.mjs      what OATS_CLI_BIN names (see below)
//! ```
//!
//! and the input holds one `request.json` (`sf-oats-launch/1`): the script, its arguments,
//! exactly the environment sf chose, the working directory (the private home or the
//! capability root) and the bytes for standard input. The launcher makes a private home
//! under the Executor's writable scratch (`$HOME` of the run), then starts
//! `process.execPath <artifact/script> <args…>` with `child_process.spawnSync` (argv form, no
//! shell), that environment and nothing else besides `HOME` (the private home), `TMPDIR`,
//! `PATH=/usr/bin:/bin` and `LANG=C.UTF-8`, the standard input bytes on a pipe that is then
//! closed, and the run's stdout and stderr inherited. It exits with the script's exit code, or
//! ends itself with the script's signal, so the Executor's answer describes the script.
//!
//! `OATS_CLI_BIN` names `sf-kernel-unavailable.mjs`: sf does not provide the oats kernel's
//! callbacks, and a script that calls them (`node $OATS_CLI_BIN …`) gets one failed v1
//! envelope, `E_KERNEL_UNAVAILABLE`, and exit 1, instead of an obscure error.

use std::collections::BTreeMap;
use std::time::Duration;

use sf_contracts::canonical::{self, Value};
use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::{CancelToken, Executor, RunAnswer, RunBounds, RunRequest};

use crate::error::{ErrorCode, OatsError, Result};

/// The protocol string of the launch request.
pub const LAUNCH_PROTOCOL: &str = "sf-oats-launch/1";
/// The launcher's path in the program.
pub const LAUNCHER_PATH: &str = "sf-oats-launch.mjs";
/// The kernel stub's path in the program.
pub const KERNEL_STUB_PATH: &str = "sf-kernel-unavailable.mjs";
/// The request's path in the input.
pub const REQUEST_PATH: &str = "request.json";
/// The code the kernel stub answers with.
pub const KERNEL_UNAVAILABLE: &str = "E_KERNEL_UNAVAILABLE";

/// The launcher program (Node, ES module).
pub const LAUNCHER: &str = r#"// sf-oats launcher: runs one oats capability script as `node <script> <args...>` with exactly
// the environment, working directory and standard input sf chose. No shell.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const fail = (message) => { process.stderr.write(`sf-oats launcher: ${message}\n`); process.exit(125); };
const program = dirname(fileURLToPath(import.meta.url));
let request;
try { request = JSON.parse(readFileSync(process.argv[2], 'utf8')); } catch (error) { fail(`unreadable request: ${error.message}`); }
if (request === null || typeof request !== 'object' || request.protocol !== 'sf-oats-launch/1') fail('unknown request protocol');
const scratch = process.env.HOME || process.env.TMPDIR || '/tmp';
const home = join(scratch, 'oats-home');
const tmp = join(scratch, 'oats-tmp');
mkdirSync(home, { recursive: true, mode: 0o700 });
mkdirSync(tmp, { recursive: true, mode: 0o700 });
const root = join(program, 'artifact');
const places = { home, root, kernel: join(program, 'sf-kernel-unavailable.mjs') };
const env = { ...request.env, HOME: home, TMPDIR: tmp, PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' };
for (const [name, place] of Object.entries(request.places)) env[name] = places[place];
const result = spawnSync(process.execPath, [join(root, request.script), ...request.args], {
  cwd: request.cwd === 'root' ? root : request.cwd === 'home' ? home : request.cwd,
  env,
  input: request.stdin,
  stdio: ['pipe', 'inherit', 'inherit'],
  windowsHide: true,
});
if (result.error) { process.stderr.write(`sf-oats launcher: the script did not start: ${result.error.message}\n`); process.exit(127); }
if (result.signal) process.kill(process.pid, result.signal);
process.exit(result.status ?? 1);
"#;

/// The kernel stub (Node, ES module).
pub const KERNEL_STUB: &str = r#"// sf runs oats capabilities without the oats kernel: OATS_CLI_BIN callbacks are not provided.
process.stdout.write(JSON.stringify({ schemaVersion: 1, ok: false, error: { code: 'E_KERNEL_UNAVAILABLE', message: `sf runs oats capabilities without the oats kernel; the callback "oats ${process.argv.slice(2).join(' ')}" (OATS_CLI_BIN) is not provided (see docs/oats.md)` } }) + '\n');
process.exit(1);
"#;

/// Where a variable's value is a path only the launcher knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The private home.
    Home,
    /// The capability root (the artifact, read-only).
    Root,
    /// The kernel stub.
    Kernel,
}

impl Place {
    fn as_str(self) -> &'static str {
        match self {
            Self::Home => "home",
            Self::Root => "root",
            Self::Kernel => "kernel",
        }
    }
}

/// The working directory of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cwd {
    /// The private home (commands, operations, hooks).
    Home,
    /// The capability root, read-only (binding phases).
    Root,
    /// An absolute directory inside the run: the tree a Slice's check reads, read-only.
    Path(String),
}

impl Cwd {
    /// How the request writes it: `"home"`, `"root"`, or the absolute path.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Home => "home",
            Self::Root => "root",
            Self::Path(path) => path,
        }
    }
}

/// One script to run.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The script, relative to the capability root.
    pub script: String,
    /// Everything after the script: the manifest's tokens, then the caller's arguments.
    pub args: Vec<String>,
    /// The environment (besides the launcher's base variables and `places`).
    pub env: BTreeMap<String, String>,
    /// Variables whose value is a path inside the run.
    pub places: BTreeMap<String, Place>,
    /// Where the script starts.
    pub cwd: Cwd,
    /// Standard input (UTF-8 text; JSON for binding phases).
    pub stdin: String,
    /// The run's timeout, a whole number of milliseconds (the Executor refuses others).
    pub timeout: Duration,
    /// The most stdout bytes kept, and separately the most stderr bytes.
    pub output_limit: u64,
}

impl Launch {
    /// The argv the script sees, as oats would write it: `node <script> <args…>`.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = vec!["node".to_owned(), self.script.clone()];
        argv.extend(self.args.iter().cloned());
        argv
    }
}

/// The files the launcher adds to every program.
pub fn launcher_files() -> Vec<SnapshotFile> {
    vec![
        SnapshotFile::regular(LAUNCHER_PATH, LAUNCHER.as_bytes().to_vec()),
        SnapshotFile::regular(KERNEL_STUB_PATH, KERNEL_STUB.as_bytes().to_vec()),
    ]
}

/// The launch request (`request.json`, `sf-oats-launch/1`) the launcher reads for `launch`.
pub fn request_file(launch: &Launch) -> Result<SnapshotFile> {
    let request = canonical::object([
        ("protocol", Value::from(LAUNCH_PROTOCOL)),
        ("script", Value::from(launch.script.as_str())),
        (
            "args",
            Value::Array(
                launch
                    .args
                    .iter()
                    .map(|a| Value::from(a.as_str()))
                    .collect(),
            ),
        ),
        (
            "env",
            Value::Object(
                launch
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect(),
            ),
        ),
        (
            "places",
            Value::Object(
                launch
                    .places
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect(),
            ),
        ),
        ("cwd", Value::from(launch.cwd.as_str())),
        ("stdin", Value::from(launch.stdin.as_str())),
    ]);
    let bytes = canonical::encode(&request).map_err(|error| {
        OatsError::new(
            ErrorCode::TooLarge,
            "launch request",
            format!("the request does not encode: {error}"),
        )
    })?;
    Ok(SnapshotFile::regular(REQUEST_PATH, bytes))
}

/// Runs `launch` with `program` (the artifact's files under `artifact/` and the
/// [`launcher_files`]). `input_dir` is where the Executor places the input snapshot.
/// `Err` only when nothing started.
pub fn run(
    executor: &dyn Executor,
    program: &[SnapshotFile],
    input_dir: &str,
    launch: &Launch,
    cancel: &CancelToken,
) -> Result<RunAnswer> {
    let request = request_file(launch)?;
    let run_request = RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program: program.to_vec(),
        entry: LAUNCHER_PATH.into(),
        args: vec![format!(
            "{}/{REQUEST_PATH}",
            input_dir.trim_end_matches('/')
        )],
        input: vec![request],
        harness: Vec::new(),
        bounds: RunBounds::new(launch.timeout, launch.output_limit),
    };
    executor.run(&run_request, cancel).map_err(|error| {
        OatsError::new(
            ErrorCode::ExecutorUnavailable,
            launch.script.clone(),
            format!("the Executor started nothing: {error}"),
        )
    })
}

/// The request a [`run`] sent, read back from a recorded [`RunRequest`] (for tests of what
/// a script was given).
pub fn read_request(request: &RunRequest) -> Option<serde_json::Value> {
    let file = request.input.iter().find(|f| f.path == REQUEST_PATH)?;
    serde_json::from_slice(&file.content).ok()
}
