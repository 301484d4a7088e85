//! Commands and operations of a fixture capability, run confined by the real sandbox
//! (sandbox-exec with the Node runtime): argv, the exact environment, the private home, the
//! kernel stub, operation envelopes and their codes, and what a script cannot reach.

mod oats_support;

use std::collections::BTreeMap;
use std::time::Duration;

use oats_support::{Bench, sandbox};
use serde_json::{Value, json};
use sf_host::contracts::RunStatus;
use sf_oats::operation::{OperationOutcome, OperationTarget};
use sf_oats::{Oats, OatsOptions, RunContext};

fn trusted_tool(bench: &Bench, options: OatsOptions) -> (Oats, std::path::PathBuf) {
    let dir = bench.fixture("tool", "tool");
    let oats = bench.oats_with(sandbox(), options);
    oats.register(&dir).unwrap();
    oats.trust("acme.tool", None).unwrap();
    (oats, dir)
}

fn stdout_json(stdout: &[u8]) -> Value {
    serde_json::from_slice(stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(stdout)))
}

#[test]
fn a_command_runs_as_node_script_tokens_and_args_with_exactly_its_environment() {
    let bench = Bench::new();
    let (oats, _) = trusted_tool(&bench, OatsOptions::default());
    let mut context = RunContext::default();
    context
        .environment
        .insert("ACME_TOKEN".into(), "s3cret value".into());
    let outcome = oats
        .run_command(
            "acme.tool",
            "echo",
            &["a b".into(), "--x".into(), "$HOME;`id`".into()],
            &context,
        )
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Exited, "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let seen = stdout_json(&outcome.stdout);
    // argv: the manifest's tokens, then the caller's, unchanged (no shell).
    assert_eq!(seen["argv"], json!(["echo", "a b", "--x", "$HOME;`id`"]));
    let env: BTreeMap<String, String> = serde_json::from_value(seen["env"].clone()).unwrap();
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        vec![
            "ACME_TOKEN",
            "HOME",
            "LANG",
            "OATS_CAPABILITY",
            "OATS_CLI_BIN",
            "OATS_LAYER",
            "OATS_SETTINGS",
            "PATH",
            "TMPDIR"
        ],
        "the environment is exactly the declared, approved and contract variables"
    );
    assert_eq!(env["ACME_TOKEN"], "s3cret value");
    assert_eq!(env["OATS_CAPABILITY"], "acme.tool");
    assert_eq!(env["OATS_LAYER"], "tasks");
    assert_eq!(env["OATS_SETTINGS"], r#"{"mode":"plain"}"#);
    // The working directory is the private, writable home.
    assert_eq!(seen["cwd"], json!(env["HOME"]));
    assert_eq!(seen["stdin"], "");
    // The identities say it was confined, and the program is the same bytes every time.
    assert_eq!(
        outcome.identities.enforcement.status("landlock"),
        Some("fully-enforced")
    );
    let again = oats
        .run_command("acme.tool", "echo", &[], &RunContext::default())
        .unwrap();
    assert_eq!(again.identities.program, outcome.identities.program);
    assert_ne!(again.identities.input, outcome.identities.input);
}

#[test]
fn kernel_callbacks_fail_clearly() {
    let bench = Bench::new();
    let (oats, _) = trusted_tool(&bench, OatsOptions::default());
    let outcome = oats
        .run_command("acme.tool", "kernel", &[], &RunContext::default())
        .unwrap();
    assert_eq!(outcome.exit_code, Some(1), "{outcome:?}");
    let envelope = stdout_json(&outcome.stdout);
    assert_eq!(envelope["ok"], false);
    assert_eq!(envelope["error"]["code"], "E_KERNEL_UNAVAILABLE");
    let message = envelope["error"]["message"].as_str().unwrap();
    assert!(message.contains("OATS_CLI_BIN"), "{message}");
    assert!(message.contains("oats version --json"), "{message}");
}

fn operation(
    oats: &Oats,
    name: &str,
    args: &[(&str, &str)],
    home: Option<&std::path::Path>,
) -> OperationOutcome {
    let args: Vec<(String, String)> = args
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    oats.run_operation(
        "acme.tool",
        name,
        &args,
        &OperationTarget { home },
        &RunContext::default(),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
    .outcome
}

#[test]
fn operation_envelopes_round_trip_and_failures_get_oats_codes() {
    let bench = Bench::new();
    let options = OatsOptions {
        operation_timeout: Duration::from_millis(1500),
        ..OatsOptions::default()
    };
    let (oats, _) = trusted_tool(&bench, options);

    // One ok envelope and exit 0: the result round-trips inside the receipt.
    let OperationOutcome::Succeeded { receipt } =
        operation(&oats, "report", &[("target", "main"), ("level", "2")], None)
    else {
        panic!("report failed");
    };
    assert_eq!(
        receipt["result"],
        json!({"args": ["--target", "main", "--level", "2"], "mode": "plain", "operation": "report"})
    );
    assert_eq!(
        receipt["argv"],
        json!([
            "node",
            "bin/tool.mjs",
            "envelope",
            "--target",
            "main",
            "--level",
            "2"
        ])
    );
    assert_eq!(receipt["operation"], "report");
    assert_eq!(receipt["capability"], "acme.tool");
    assert_eq!(receipt["target"], Value::Null);

    // Two envelopes, none, ok with a non-zero exit: unconfirmed.
    let cases = [
        ("two", "2 or more JSON documents"),
        ("none", "no envelope"),
        ("ok-then-exit", "exited Some(1)"),
    ];
    for (name, needle) in cases {
        match operation(&oats, name, &[], None) {
            OperationOutcome::Failed {
                code,
                message,
                details,
            } => {
                assert_eq!(code, "E_OPERATION_RESULT", "{name}: {message}");
                assert!(message.contains(needle), "{name}: {message}");
                assert_eq!(details["unconfirmed"], true, "{name}");
                if name == "none" {
                    assert_eq!(details["stderr"], "nothing to say\n");
                }
                if name == "ok-then-exit" {
                    assert_eq!(details["exit"], 1);
                    assert_eq!(details["envelope"]["result"], json!({"done": true}));
                }
            }
            other => panic!("{name}: {other:?}"),
        }
    }

    // A provider's failure is relayed with its code; a code not shaped E_… is wrapped.
    match operation(&oats, "provider-fails", &[], None) {
        OperationOutcome::Failed {
            code,
            message,
            details,
        } => {
            assert_eq!(code, "E_ACME_BROKEN");
            assert_eq!(message, "the widget is broken");
            assert_eq!(details, json!({"widget": 7}));
        }
        other => panic!("{other:?}"),
    }
    match operation(&oats, "odd-code", &[], None) {
        OperationOutcome::Failed { code, details, .. } => {
            assert_eq!(code, "E_OPERATION_RESULT");
            assert_eq!(details["cause"], "ENOENT");
        }
        other => panic!("{other:?}"),
    }

    // The timeout.
    let started = std::time::Instant::now();
    assert_eq!(
        operation(&oats, "slow", &[], None).code(),
        "E_OPERATION_TIMEOUT"
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    // A view must answer documents; a home operation needs a home.
    let home = bench.root.join("instance-7");
    std::fs::create_dir(&home).unwrap();
    let OperationOutcome::Succeeded { receipt } = operation(&oats, "inspect", &[], Some(&home))
    else {
        panic!("inspect failed");
    };
    assert_eq!(receipt["result"]["documents"][0]["text"], "# instance-7");
    assert_eq!(receipt["target"]["instance"], "instance-7");
    assert_eq!(
        operation(&oats, "bad-inspect", &[], None).code(),
        "E_OPERATION_RESULT"
    );
}

#[test]
fn operations_refuse_before_anything_starts() {
    let bench = Bench::new();
    let (oats, _) = trusted_tool(&bench, OatsOptions::default());
    let refuse = |name: &str, args: &[(&str, &str)]| {
        let args: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        oats.run_operation(
            "acme.tool",
            name,
            &args,
            &OperationTarget::default(),
            &RunContext::default(),
        )
        .unwrap_err()
    };
    assert_eq!(refuse("missing", &[]).code(), "E_OPERATION_UNKNOWN");
    assert_eq!(refuse("inspect", &[]).code(), "E_OPERATION_UNAVAILABLE");
    assert_eq!(refuse("report", &[]).code(), "E_BAD_ARGS");
    assert_eq!(
        refuse("report", &[("target", "x"), ("bogus", "y")]).code(),
        "E_BAD_ARGS"
    );
    assert_eq!(
        refuse("report", &[("target", "x"), ("target", "y")]).code(),
        "E_BAD_ARGS"
    );
}

#[test]
fn scripts_run_confined() {
    let bench = Bench::new();
    let (oats, dir) = trusted_tool(&bench, OatsOptions::default());
    let registered = dir.canonicalize().unwrap();
    let outcome = oats
        .run_command(
            "acme.tool",
            "probe",
            &[registered.display().to_string()],
            &RunContext::default(),
        )
        .unwrap();
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let results: Vec<Value> = serde_json::from_slice(&outcome.stdout).unwrap();
    let outcome_of = |label: &str| -> String {
        results
            .iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("no probe {label}: {results:?}"))["outcome"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for denied in [
        "read-etc-passwd",
        "read-registered-dir",
        "read-proc-1-environ",
        "write-artifact",
        "connect-1.1.1.1:53",
        "connect-127.0.0.1:22",
        "dns",
    ] {
        assert_eq!(outcome_of(denied), "denied", "{denied}: {results:?}");
    }
    for allowed in ["read-artifact", "write-home"] {
        assert_eq!(outcome_of(allowed), "allowed", "{allowed}: {results:?}");
    }
    // The root holds nothing of the host but the runtime's files.
    let root = results.iter().find(|r| r["label"] == "list-root").unwrap();
    let listing = root["value"].as_str().unwrap_or_default();
    for host_dir in ["etc", "root", "home", "tmp", "work"] {
        assert!(
            !listing.split(',').any(|entry| entry == host_dir),
            "/{host_dir} is visible: {listing}"
        );
    }
    // Nothing the script wrote reached the capability directory.
    assert!(!dir.join("bin/written.txt").exists());
}

/// A real capability layout: skills and a command under an npm scope
/// (`node_modules/@scope/pkg/…`) register, and the command runs with the scoped files in its
/// program.
#[test]
fn a_capability_under_an_npm_scope_registers_and_its_command_runs() {
    let bench = Bench::new();
    let dir = bench.fixture("tool", "scoped");
    let package = dir.join("node_modules/@scope/pkg");
    std::fs::create_dir_all(package.join("skills/greet")).unwrap();
    std::fs::write(package.join("skills/greet/SKILL.md"), "# greet\n").unwrap();
    std::fs::write(
        package.join("index.mjs"),
        "import { readFileSync } from 'node:fs';\n\
         const skill = readFileSync(new URL('./skills/greet/SKILL.md', import.meta.url), 'utf8');\n\
         process.stdout.write(JSON.stringify({ scoped: true, skill }) + '\\n');\n",
    )
    .unwrap();
    let mut manifest = oats_support::manifest(&dir);
    manifest["skills"] = json!(["skills", "node_modules/@scope/pkg/skills"]);
    manifest["commands"]["scoped"] = json!("node_modules/@scope/pkg/index.mjs");
    oats_support::write_manifest(&dir, &manifest);
    let oats = bench.oats_with(sandbox(), OatsOptions::default());
    oats.register(&dir).unwrap();
    oats.trust("acme.tool", None).unwrap();
    let outcome = oats
        .run_command("acme.tool", "scoped", &[], &RunContext::default())
        .unwrap();
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    let seen = stdout_json(&outcome.stdout);
    assert_eq!(seen, json!({"scoped": true, "skill": "# greet\n"}));
}
