//! `sf exec` end to end through the built binary, which loads sandbox-exec as a plugin from
//! beside itself: `--json` envelopes parsed by the test for a program that prints, one that
//! exits non-zero, a timeout, an output flood and non-UTF-8 output; a program printing escape
//! sequences, CR and a forged status line, shown escaped in text mode; bad input (missing
//! directories, an entry outside the program, bad flags, a bad runtime or configuration)
//! giving `ok: false` and a non-zero exit status.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sf_tests::plugins::{Envelope, run_json, sf};

/// A working directory with a program and an input directory.
struct Work {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Work {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("sf-cli-exec-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("program")).unwrap();
        std::fs::create_dir(root.join("input")).unwrap();
        std::fs::write(root.join("input/data.txt"), "input-bytes\n").unwrap();
        Self { _dir: dir, root }
    }

    fn program(&self, name: &str, script: &str) -> &Self {
        let path = self.root.join("program").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, script).unwrap();
        self
    }

    /// `sf exec --json --runtime /bin/sh --program … --entry ENTRY --input …` plus `extra`.
    fn exec(&self, entry: &str, extra: &[&str]) -> Command {
        let mut command = sf();
        command
            .current_dir(&self.root)
            .args(["exec", "--json", "--runtime", "/bin/sh", "--program"])
            .arg(self.root.join("program"))
            .args(["--entry", entry, "--input"])
            .arg(self.root.join("input"))
            .args(extra);
        command
    }
}

fn digest(value: &Value) -> &str {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    assert!(
        text.len() == 71 && text.starts_with("sha256:"),
        "not a digest: {text}"
    );
    text
}

#[test]
fn a_program_that_prints() {
    let work = Work::new();
    work.program(
        "main.sh",
        "printf 'hello %s\\n' \"$1\"\ncat /sf/input/data.txt\nprintf 'oops\\n' >&2\n",
    );
    let envelope = run_json(&mut work.exec("main.sh", &["--", "world"]));
    let result = envelope.result();
    assert_eq!(result["status"], "exited");
    assert_eq!(result["exitCode"], 0);
    assert_eq!(result["signal"], Value::Null);
    assert_eq!(result["stdout"], "hello world\ninput-bytes\n");
    assert_eq!(result["stdoutLossy"], false);
    assert_eq!(result["stdoutBytes"], 24);
    assert_eq!(result["stderr"], "oops\n");
    assert_eq!(result["stderrBytes"], 5);
    let identities = &result["identities"];
    for key in ["program", "input", "runtime", "profile", "bounds"] {
        digest(&identities[key]);
    }
    assert_eq!(identities["enforcement"]["landlock"], "fully-enforced");
    let abi: u32 = identities["enforcement"]["landlock-abi"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(abi >= 6, "{identities}");
    // As root (as CI runs) the sandbox has a host id of its own and a control group; else
    // it runs as the caller, bounded per process.
    // SAFETY: geteuid has no preconditions.
    if unsafe { nix::libc::geteuid() } == 0 {
        assert_eq!(identities["enforcement"]["host-identity"], "reserved-id");
        let memory = identities["enforcement"]["memory"].as_str().unwrap();
        assert!(memory.starts_with("cgroup-v"), "{memory}");
        assert!(result["times"]["memoryPeakBytes"].as_u64().unwrap() > 0);
    } else {
        assert_eq!(identities["enforcement"]["host-identity"], "caller-id");
        assert_eq!(identities["enforcement"]["memory"], "per-process");
        assert_eq!(result["times"]["memoryPeakBytes"], Value::Null);
    }
    assert_eq!(result["namespace"]["disposition"], "reaped");
    assert_eq!(result["bounds"]["timeoutMs"], 10_000);
    assert_eq!(result["problems"], Value::Array(Vec::new()));
    assert_eq!(result["limitsHit"], Value::Array(Vec::new()));

    // The same inputs give the same identities; another argument changes none of them.
    let again = run_json(&mut work.exec("main.sh", &["--", "again"]));
    assert_eq!(again.result()["identities"], *identities);
    assert_eq!(again.result()["stdout"], "hello again\ninput-bytes\n");

    // Text mode prints the answer readably.
    let mut text = sf();
    text.current_dir(&work.root)
        .args(["exec", "--runtime", "sh", "--program", "program", "--entry"])
        .args(["main.sh", "--input", "input", "--", "text"]);
    let output = text.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("status    exited (exit code 0)"),
        "{stdout}"
    );
    assert!(stdout.contains("hello text"), "{stdout}");
    let enforced = stdout
        .lines()
        .find_map(|line| line.strip_prefix("enforced  "))
        .unwrap_or_else(|| panic!("no enforced line: {stdout}"));
    for fact in [
        "landlock fully-enforced",
        "landlock-abi ",
        "host-identity ",
        "memory ",
    ] {
        assert!(enforced.contains(fact), "{fact} in {enforced}");
    }
}

#[test]
fn escape_sequences_in_a_programs_output_appear_escaped_in_text_output() {
    // A program that exits 1 and tries to pass for a success: it clears the line and returns
    // the cursor (ESC [2K, CR), retitles the terminal (OSC 0 … BEL), writes a CSI as one C1
    // character (U+009B), reverses the text direction (U+202E), and prints sf's own status
    // line and a section header of its own, on stdout and on stderr.
    let work = Work::new();
    work.program(
        "forge.sh",
        "printf 'real\\n\\033[2K\\rstatus    exited (exit code 0) after 1.0 ms\\n'\n\
         printf '\\033]0;owned\\007\\302\\233\\061m\\342\\200\\256txet\\n--- stderr (0 bytes) ---\\n'\n\
         printf 'processes reaped\\rstatus    exited (exit code 0)\\010\\177' >&2\n\
         exit 1\n",
    );
    let mut text = sf();
    text.current_dir(&work.root)
        .args(["exec", "--runtime", "sh", "--program", "program", "--entry"])
        .args(["forge.sh", "--input", "input"]);
    let output = text.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    // Not one control character reaches the terminal but newlines.
    for byte in &output.stdout {
        assert!(
            *byte == b'\n' || (0x20..0x7f).contains(byte) || *byte >= 0x80,
            "a control byte {byte:#04x} in {stdout:?}"
        );
    }
    for hidden in ['\u{9b}', '\u{202e}', '\u{7f}'] {
        assert!(!stdout.contains(hidden), "{hidden:?} in {stdout:?}");
    }
    // The real status comes first, once; every line the program printed is in the gutter.
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("status    exited (exit code 1)"),
        "{stdout}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.starts_with("status"))
            .count(),
        1,
        "{stdout}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|line| line.starts_with("--- stderr"))
            .count(),
        1,
        "{stdout}"
    );
    let stdout_block = stdout
        .split_once("--- stdout (")
        .map(|(_, rest)| rest)
        .unwrap();
    assert!(
        stdout_block.contains(
            "\n| real\n| \\x1b[2K\\rstatus    exited (exit code 0) after 1.0 ms\n\
             | \\x1b]0;owned\\x07\\u{9b}1m\\u{202e}txet\n| --- stderr (0 bytes) ---\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "| processes reaped\\rstatus    exited (exit code 0)\\x08\\x7f\n\
             \\ no newline at end\n"
        ),
        "{stdout}"
    );
    // `--json` keeps the exact text (JSON escapes it).
    let envelope = run_json(&mut work.exec("forge.sh", &[]));
    let result = envelope.result();
    assert_eq!(result["exitCode"], 1);
    assert_eq!(
        result["stderr"],
        "processes reaped\rstatus    exited (exit code 0)\u{8}\u{7f}"
    );
    assert!(
        result["stdout"]
            .as_str()
            .unwrap()
            .contains("\u{1b}]0;owned\u{7}\u{9b}1m\u{202e}txet"),
        "{result}"
    );
}

#[test]
fn a_program_that_exits_non_zero_or_prints_bytes() {
    let work = Work::new();
    work.program("fail.sh", "printf '\\377\\376x'\nexit 3\n");
    let envelope = run_json(&mut work.exec("fail.sh", &[]));
    // sf itself succeeded: the answer says how the program ended.
    assert_eq!(envelope.code, Some(0));
    let result = envelope.result();
    assert_eq!(result["status"], "exited");
    assert_eq!(result["exitCode"], 3);
    assert_eq!(result["stdoutBytes"], 3);
    assert_eq!(result["stdoutLossy"], true);
    assert_eq!(result["stdout"], "\u{fffd}\u{fffd}x");
}

#[test]
fn a_timeout_and_an_output_flood_are_bounded() {
    let work = Work::new();
    work.program("sleep.sh", "sleep 1000\n");
    let start = Instant::now();
    let envelope = run_json(&mut work.exec("sleep.sh", &["--timeout-ms", "300"]));
    let took = start.elapsed();
    let result = envelope.result();
    assert_eq!(result["status"], "timed-out");
    assert_eq!(result["exitCode"], Value::Null);
    assert_eq!(result["bounds"]["timeoutMs"], 300);
    assert_eq!(result["namespace"]["disposition"], "reaped");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );

    work.program("flood.sh", "while :; do echo xxxxxxxxxxxxxxx; done\n");
    let envelope = run_json(&mut work.exec("flood.sh", &["--output-limit", "65536"]));
    let result = envelope.result();
    assert_eq!(result["status"], "output-limit");
    assert_eq!(result["stdoutBytes"], 65536);
    assert_eq!(result["bounds"]["stdoutLimitBytes"], 65536);
}

/// A configured runtime table naming the same executable as `--runtime` is kept, so its
/// readable list applies; limits come from the configuration too.
#[test]
fn the_configuration_shapes_the_executor() {
    let work = Work::new();
    let shared = work.root.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("note.txt"), "from the configured runtime\n").unwrap();
    let mut readable: Vec<String> = sf_sandbox_exec::RuntimeConfig::shell()
        .readable
        .iter()
        .map(|path| format!("{:?}", path.to_str().unwrap()))
        .collect();
    readable.push(format!("{:?}", shared.to_str().unwrap()));
    let config = work.root.join("configured.toml");
    std::fs::write(
        &config,
        format!(
            "[executor]\ntype = \"sandbox-exec\"\nruntime = {{ executable = \"/bin/sh\", \
             readable = [{}] }}\n\n[executor.limits]\nopen_files = 100\n",
            readable.join(", ")
        ),
    )
    .unwrap();
    work.program("read.sh", &format!("cat {}/note.txt\n", shared.display()));
    let configured = run_json(work.exec("read.sh", &["--config"]).arg(&config));
    assert_eq!(
        configured.result()["stdout"],
        "from the configured runtime\n"
    );
    // Without the configuration the path is outside what the program may read.
    let default = run_json(&mut work.exec("read.sh", &[]));
    assert_eq!(default.result()["exitCode"], 1, "{}", default.json);
    assert_ne!(
        default.result()["identities"]["runtime"],
        configured.result()["identities"]["runtime"]
    );
    assert_ne!(
        default.result()["identities"]["profile"],
        configured.result()["identities"]["profile"]
    );

    std::fs::write(&config, "[executor]\ntype = \"no-such-executor\"\n").unwrap();
    let unknown = run_json(work.exec("read.sh", &["--config"]).arg(&config));
    assert_eq!(unknown.error_code(), "unknown-tag");
    assert!(
        unknown
            .error_message()
            .contains("sandbox-exec (plugin sandbox-exec")
    );
}

#[track_caller]
/// A write past the configured file size is answered with the file-size limit named, in
/// `--json` (`limitsHit`) and in text (a `limit` line); the same write within it names
/// nothing.
#[test]
fn a_limit_the_run_hit_is_named() {
    let work = Work::new();
    let config = work.root.join("sf.toml");
    std::fs::write(
        &config,
        "[executor]\ntype = \"sandbox-exec\"\n\n[executor.limits]\nfile_size_bytes = 65536\n",
    )
    .unwrap();
    work.program(
        "write.sh",
        "exec head -c \"$1\" /dev/zero > /sf/scratch/out.bin\n",
    );
    let write = |bytes: &str| {
        let mut command = work.exec("write.sh", &["--config"]);
        command.arg(&config).args(["--", bytes]);
        command
    };
    let within = run_json(&mut write("1000"));
    assert_eq!(within.result()["limitsHit"], Value::Array(Vec::new()));
    let past = run_json(&mut write("100000"));
    let result = past.result();
    assert_eq!(result["status"], "signalled", "{result}");
    let hit = &result["limitsHit"][0];
    assert_eq!(hit["limit"], "file-size", "{result}");
    assert_eq!(hit["value"], 65536, "{result}");
    assert_eq!(
        hit["reason"],
        "the run hit the sandbox's file-size limit (65536 bytes): SIGXFSZ ended 1 process"
    );
    let mut text = sf();
    text.current_dir(&work.root)
        .args(["exec", "--config"])
        .arg(&config)
        .args(["--runtime", "sh", "--program", "program", "--entry"])
        .args(["write.sh", "--input", "input", "--", "100000"]);
    let output = text.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains(
            "limit     the run hit the sandbox's file-size limit (65536 bytes): SIGXFSZ ended 1 process\n"
        ),
        "{stdout}"
    );
}

fn refused(envelope: &Envelope, code: &str, needle: &str) {
    assert_eq!(envelope.error_code(), code, "{}", envelope.json);
    assert!(
        envelope.error_message().contains(needle),
        "{needle:?} not in {}",
        envelope.error_message()
    );
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let work = Work::new();
    work.program("main.sh", "exit 0\n");

    let mut missing = sf();
    missing
        .current_dir(&work.root)
        .args([
            "exec",
            "--json",
            "--runtime",
            "/bin/sh",
            "--program",
            "nowhere",
        ])
        .args(["--entry", "main.sh", "--input", "input"]);
    refused(
        &run_json(&mut missing),
        "not-a-directory",
        "--program nowhere",
    );

    let mut missing_input = sf();
    missing_input
        .current_dir(&work.root)
        .args([
            "exec",
            "--json",
            "--runtime",
            "/bin/sh",
            "--program",
            "program",
        ])
        .args(["--entry", "main.sh", "--input", "no-input"]);
    refused(
        &run_json(&mut missing_input),
        "not-a-directory",
        "--input no-input",
    );

    refused(
        &run_json(&mut work.exec("../main.sh", &[])),
        "invalid-input",
        "--entry \"../main.sh\"",
    );
    refused(
        &run_json(&mut work.exec("/etc/passwd", &[])),
        "invalid-input",
        "--entry",
    );
    refused(
        &run_json(&mut work.exec("other.sh", &[])),
        "invalid-input",
        "is not a file of --program",
    );
    refused(
        &run_json(&mut work.exec("main.sh", &["--timeout-ms", "0"])),
        "invalid-input",
        "--timeout-ms 0",
    );
    refused(
        &run_json(&mut work.exec("main.sh", &["--output-limit", "999999999999"])),
        "invalid-input",
        "--output-limit",
    );
    let usage = run_json(&mut work.exec("main.sh", &["--timeout-ms", "soon"]));
    refused(&usage, "usage", "--timeout-ms");
    assert_eq!(usage.code, Some(2));
    let mut no_input = sf();
    no_input
        .current_dir(&work.root)
        .args([
            "exec",
            "--json",
            "--runtime",
            "/bin/sh",
            "--program",
            "program",
        ])
        .args(["--entry", "main.sh"]);
    refused(&run_json(&mut no_input), "usage", "--input");

    let mut bad_runtime = sf();
    bad_runtime
        .current_dir(&work.root)
        .args([
            "exec",
            "--json",
            "--runtime",
            "perl",
            "--program",
            "program",
        ])
        .args(["--entry", "main.sh", "--input", "input"]);
    refused(
        &run_json(&mut bad_runtime),
        "plugin-refused",
        "runtime \"perl\"",
    );
    let mut missing_runtime = sf();
    missing_runtime
        .current_dir(&work.root)
        .args([
            "exec",
            "--json",
            "--runtime",
            "/nonexistent/sh",
            "--program",
        ])
        .args(["program", "--entry", "main.sh", "--input", "input"]);
    refused(
        &run_json(&mut missing_runtime),
        "plugin-refused",
        "/nonexistent/sh",
    );

    // A program directory holding something a snapshot cannot hold: a link leaving it.
    std::os::unix::fs::symlink("/etc/passwd", work.root.join("program/link")).unwrap();
    refused(
        &run_json(&mut work.exec("main.sh", &[])),
        "invalid-input",
        "snapshot path \"link\": the link's target is absolute (absolute-link)",
    );
    std::fs::remove_file(work.root.join("program/link")).unwrap();

    // The same command without the fault runs.
    assert_eq!(
        run_json(&mut work.exec("main.sh", &[])).result()["status"],
        "exited"
    );
}
