//! `sf exec`: runs one program through the configured Executor (default: the sandbox-exec
//! plugin) and prints its answer: how it ended, its output, and the identities of what was
//! enforced. It is how a machine is probed (docs/sandbox.md).
//!
//! The program and input directories are read whole first, as file snapshots
//! ([`read_snapshot_dir`]): file contents are bytes (a program may hold non-UTF-8 files),
//! names follow the repository's path grammar, and symbolic links, devices, empty
//! directories and more than the snapshot limits are refused with the path at fault.
//!
//! `--runtime` sets the `runtime` key of the `[executor]` section: a value with a `/` is an
//! executable (`{executable = PATH}`, made absolute), any other value a runtime name (`sh`,
//! `python3`, `node` for sandbox-exec). When the configured runtime is a table naming the same
//! executable, it is kept as it is, so its `readable` list applies.
//!
//! The command succeeds whenever the Executor answered, whatever the program did: the answer
//! says how the program ended. It fails (`ok: false`, exit status 1) when nothing ran.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::common::{CliError, Context, Output};
use sf_host::contracts::executor::{MAX_OUTPUT_LIMIT, MAX_TIMEOUT};
use sf_host::contracts::{
    CancelToken, EntryPlace, NamespaceDisposition, RunAnswer, RunBounds, RunEntry, RunRequest,
};
use sf_host::plugin::PluginPath;
use sf_host::snapshot::SnapshotFile;
use sf_host::source_dir::read_snapshot_dir;
use sf_host::text_escape;

/// The default `--timeout-ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The default `--output-limit`.
pub const DEFAULT_OUTPUT_LIMIT: u64 = 1024 * 1024;

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The runtime: an executable (a path holding a `/`), or a runtime name (sh, python3, node)
    #[arg(long, value_name = "PATH")]
    runtime: PathBuf,
    /// The program's directory, read whole as a snapshot (placed read-only at /sf/program)
    #[arg(long, value_name = "DIR")]
    program: PathBuf,
    /// The entry file, relative to --program (or to --harness with --entry-in harness); the
    /// runtime is given it first
    #[arg(long, value_name = "REL")]
    entry: String,
    /// Which snapshot holds the entry: program or harness
    #[arg(long, value_name = "PLACE", default_value = "program", value_parser = ["program", "harness"])]
    entry_in: String,
    /// The input directory, read whole as a snapshot (placed read-only at /sf/input)
    #[arg(long, value_name = "DIR")]
    input: PathBuf,
    /// A harness directory, read whole as a snapshot (placed read-only at /sf/harness);
    /// default: no harness
    #[arg(long, value_name = "DIR")]
    harness: Option<PathBuf>,
    /// Wall-clock limit of the run, in milliseconds (1 to 3600000)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_TIMEOUT_MS)]
    timeout_ms: u64,
    /// The most bytes kept of stdout, and of stderr; one more ends the run (at most 64 MiB)
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_OUTPUT_LIMIT)]
    output_limit: u64,
    /// Arguments given to the program after its entry
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<String>,
}

pub fn run(context: &Context, args: ExecArgs) -> Result<Output, CliError> {
    let bounds = bounds(&args)?;
    let program = read_dir(&args.program, "--program")?;
    let input = read_dir(&args.input, "--input")?;
    let harness = match &args.harness {
        Some(dir) => read_dir(dir, "--harness")?,
        None => Vec::new(),
    };
    let place = EntryPlace::from_code(&args.entry_in).unwrap_or(EntryPlace::Program);
    match (place, &args.harness) {
        (EntryPlace::Program, _) => check_entry(&args.entry, "--program", &args.program, &program)?,
        (EntryPlace::Harness, Some(dir)) => check_entry(&args.entry, "--harness", dir, &harness)?,
        (EntryPlace::Harness, None) => {
            return Err(CliError::new(
                "usage",
                "--entry-in harness: give the harness directory with --harness DIR",
            ));
        }
    }
    let runtime = runtime_value(&args.runtime)?;
    let mut config = context.backends.config()?;
    let keep_configured = matches!(
        (config.executor_section().fields().get("runtime"), &runtime),
        (Some(toml::Value::Table(configured)), toml::Value::Table(given))
            if configured.get("executable") == given.get("executable")
    );
    if !keep_configured {
        config.set_executor_field("runtime", runtime);
    }
    let plugins =
        PluginPath::from_env().map_err(|error| CliError::new(error.code(), error.to_string()))?;
    let executor = config
        .executor(&plugins)
        .map_err(|error| CliError::new(error.code(), error.to_string()))?;
    let request = RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program,
        entry: RunEntry {
            place,
            path: args.entry.clone(),
        },
        args: args.args.clone(),
        input,
        harness,
        bounds,
    };
    let answer = executor
        .run(&request, &CancelToken::new())
        .map_err(|error| {
            CliError::new(
                error.code(),
                format!(
                    "the executor ({}) ran nothing: {error}",
                    config.executor_section().tag()
                ),
            )
        })?;
    Ok(Output {
        json: answer_json(&answer),
        text: answer_text(&answer),
    })
}

fn bounds(args: &ExecArgs) -> Result<RunBounds, CliError> {
    let max_ms = MAX_TIMEOUT.as_millis();
    if args.timeout_ms == 0 || u128::from(args.timeout_ms) > max_ms {
        return Err(CliError::new(
            "invalid-input",
            format!(
                "--timeout-ms {}: out of range; a timeout is 1 to {max_ms} milliseconds",
                args.timeout_ms
            ),
        ));
    }
    if args.output_limit == 0 || args.output_limit > MAX_OUTPUT_LIMIT {
        return Err(CliError::new(
            "invalid-input",
            format!(
                "--output-limit {}: out of range; an output limit is 1 to {MAX_OUTPUT_LIMIT} \
                 bytes (0 would end every run at its first byte of output)",
                args.output_limit
            ),
        ));
    }
    Ok(RunBounds::new(
        Duration::from_millis(args.timeout_ms),
        args.output_limit,
    ))
}

fn read_dir(dir: &Path, flag: &str) -> Result<Vec<SnapshotFile>, CliError> {
    read_snapshot_dir(dir).map_err(|error| {
        CliError::new(
            error.code(),
            format!("{flag} {}: {error}; nothing ran", dir.display()),
        )
    })
}

fn check_entry(
    entry: &str,
    flag: &str,
    dir: &Path,
    files: &[SnapshotFile],
) -> Result<(), CliError> {
    sf_host::contracts::tree_path::check_path(entry, None).map_err(|rule| {
        CliError::new(
            "invalid-input",
            format!(
                "--entry {entry:?}: {}; name a file of {flag} {} by its path relative to it",
                rule.describe(),
                dir.display()
            ),
        )
    })?;
    if !files.iter().any(|file| file.path == entry) {
        return Err(CliError::new(
            "invalid-input",
            format!(
                "--entry {entry:?} is not a file of {flag} {}; name one of its files by its \
                 path relative to it",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// The `runtime` value of the `[executor]` section that `--runtime` names.
fn runtime_value(runtime: &Path) -> Result<toml::Value, CliError> {
    let invalid = |detail: &str| {
        CliError::new(
            "invalid-input",
            format!("--runtime {}: {detail}", runtime.display()),
        )
    };
    let text = runtime
        .to_str()
        .ok_or_else(|| invalid("is not UTF-8; name the runtime by a UTF-8 path"))?;
    if text.is_empty() {
        return Err(invalid("is empty; name an executable or a runtime"));
    }
    if !text.contains('/') {
        return Ok(toml::Value::String(text.to_owned()));
    }
    // Made absolute before the Executor checks it: `./sh` or `../bin/sh` name an executable
    // as well as its absolute path does. `.` segments go lexically; a `..` is resolved on the
    // file system (its directory canonicalized). The path is otherwise kept as given, links
    // and all: a runtime is often a link (python3), and its path decides what the sandbox
    // makes readable.
    let absolute = std::path::absolute(runtime)
        .map_err(|error| invalid(&format!("cannot be made absolute ({error})")))?;
    let absolute = if absolute
        .components()
        .any(|part| part == std::path::Component::ParentDir)
    {
        sf_app::files::absolute_new_path(&absolute, "--runtime")?
    } else {
        absolute
    };
    let absolute = absolute
        .to_str()
        .ok_or_else(|| invalid("is not UTF-8 once made absolute"))?
        .to_owned();
    let mut table = toml::Table::new();
    table.insert("executable".into(), toml::Value::String(absolute));
    Ok(toml::Value::Table(table))
}

/// Text as a lossy UTF-8 string, and whether it was not valid UTF-8.
fn lossy(bytes: &[u8]) -> (String, bool) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), true),
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// The `--json` result.
pub fn answer_json(answer: &RunAnswer) -> serde_json::Value {
    let (stdout, stdout_lossy) = lossy(&answer.stdout);
    let (stderr, stderr_lossy) = lossy(&answer.stderr);
    let identities = &answer.identities;
    serde_json::json!({
        "status": answer.status.code(),
        "exitCode": answer.exit_code,
        "signal": answer.signal,
        "stdout": stdout,
        "stdoutLossy": stdout_lossy,
        "stdoutBytes": answer.stdout.len(),
        "stderr": stderr,
        "stderrLossy": stderr_lossy,
        "stderrBytes": answer.stderr.len(),
        "times": {
            "wallMicros": micros(answer.times.wall),
            "userMicros": micros(answer.times.user),
            "systemMicros": micros(answer.times.system),
            "maxRssKib": answer.times.max_rss_kib,
            "memoryPeakBytes": answer.times.memory_peak_bytes,
        },
        "bounds": {
            "timeoutMs": answer.bounds.timeout_ms(),
            "stdoutLimitBytes": answer.bounds.stdout_limit,
            "stderrLimitBytes": answer.bounds.stderr_limit,
        },
        "identities": {
            "program": identities.program.to_string(),
            "input": identities.input.to_string(),
            "harness": identities.harness.to_string(),
            "runtime": identities.runtime.to_string(),
            "profile": identities.profile.to_string(),
            "bounds": identities.bounds.to_string(),
            "enforcement": identities
                .enforcement
                .facts()
                .map(|(mechanism, status)| (mechanism.to_owned(), serde_json::Value::from(status)))
                .collect::<serde_json::Map<String, serde_json::Value>>(),
        },
        "namespace": match &answer.namespace {
            NamespaceDisposition::Reaped => serde_json::json!({"disposition": "reaped"}),
            NamespaceDisposition::Unconfirmed { reason } => {
                serde_json::json!({"disposition": "unconfirmed", "reason": reason})
            }
        },
        "problems": answer.problems,
        "limitsHit": super::common::limits_hit_json(&answer.limits_hit),
    })
}

/// The text output: sf's lines, then the program's stdout and stderr as blocks
/// ([`text_escape::block`]: a header stating the size, every line prefixed with `| ` and its
/// control characters escaped), so that nothing the program printed can pass for a line of
/// sf's or act on the terminal.
fn answer_text(answer: &RunAnswer) -> String {
    let ended = match (answer.exit_code, answer.signal) {
        (Some(code), _) => format!(" (exit code {code})"),
        (None, Some(signal)) => format!(" (signal {signal})"),
        (None, None) => String::new(),
    };
    let identities = &answer.identities;
    let facts: Vec<String> = identities
        .enforcement
        .facts()
        .map(|(mechanism, status)| format!("{mechanism} {status}"))
        .collect();
    let mut text = format!(
        "status    {}{ended} after {:.1} ms\nprogram   {}\ninput     {}\nharness   {}\nruntime   \
         {}\nprofile   {}\nbounds    {} (timeout {} ms, output limits {} and {} bytes)\nenforced  \
         {}\n{}",
        answer.status.code(),
        answer.times.wall.as_secs_f64() * 1000.0,
        identities.program,
        identities.input,
        identities.harness,
        identities.runtime,
        identities.profile,
        identities.bounds,
        answer.bounds.timeout_ms(),
        answer.bounds.stdout_limit,
        answer.bounds.stderr_limit,
        if facts.is_empty() {
            "(nothing stated)".to_owned()
        } else {
            facts.join(", ")
        },
        answer
            .times
            .memory_peak_bytes
            .map(|peak| format!("memory    peak {peak} bytes\n"))
            .unwrap_or_default(),
    );
    match &answer.namespace {
        NamespaceDisposition::Reaped => text.push_str("processes reaped\n"),
        NamespaceDisposition::Unconfirmed { reason } => {
            text.push_str(&format!(
                "processes UNCONFIRMED: {}\n",
                text_escape::line(reason)
            ));
        }
    }
    for problem in &answer.problems {
        text.push_str(&format!("problem   {}\n", text_escape::line(problem)));
    }
    for hit in &answer.limits_hit {
        text.push_str(&format!(
            "limit     {}\n",
            text_escape::line(&hit.to_string())
        ));
    }
    for (name, bytes) in [("stdout", &answer.stdout), ("stderr", &answer.stderr)] {
        text.push_str(&text_escape::block(name, bytes));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_values() {
        assert_eq!(
            runtime_value(Path::new("sh")).unwrap(),
            toml::Value::from("sh")
        );
        let value = runtime_value(Path::new("/bin/sh")).unwrap();
        assert_eq!(value["executable"].as_str(), Some("/bin/sh"));
        let value = runtime_value(Path::new("./x")).unwrap();
        assert!(value["executable"].as_str().unwrap().starts_with('/'));
        assert_eq!(
            runtime_value(Path::new("")).unwrap_err().code,
            "invalid-input"
        );
    }

    #[test]
    fn lossy_text_is_flagged() {
        assert_eq!(lossy(b"ok"), ("ok".to_owned(), false));
        assert_eq!(lossy(b"\xffx"), ("\u{fffd}x".to_owned(), true));
    }
}
