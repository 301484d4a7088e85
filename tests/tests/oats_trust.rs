//! Trust bound to integrity: an untrusted executable surface never runs (every surface:
//! commands, operations, binding phases, the gate); approval binds to the registered bytes;
//! any change of the bytes resets it and nothing runs. A scripted Executor records every
//! request, proving what did not start.

mod oats_support;

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::sync::Arc;
use std::time::{Duration, Instant};

use oats_support::Bench;
use serde_json::json;
use sf_host::contracts::Gate;
use sf_oats::operation::OperationTarget;
use sf_oats::{
    ErrorCode, Oats, OatsBindingGate, OatsBindingGateConfig, OatsOptions, Phase, RunContext,
};
use sf_sdk::testing::{ScriptedExecutor, ScriptedRun};

fn setup() -> (Bench, Arc<Oats>, Arc<ScriptedExecutor>, std::path::PathBuf) {
    let bench = Bench::new();
    let executor = Arc::new(ScriptedExecutor::new());
    let oats = Arc::new(bench.oats_with(executor.clone(), OatsOptions::default()));
    let dir = bench.fixture("tool", "tool");
    oats.register(&dir).unwrap();
    (bench, oats, executor, dir)
}

fn every_surface(oats: &Arc<Oats>) -> Vec<sf_oats::OatsError> {
    let context = RunContext::default();
    let mut errors = vec![
        oats.run_command("acme.tool", "echo", &[], &context)
            .unwrap_err(),
        oats.run_operation(
            "acme.tool",
            "report",
            &[("target".into(), "x".into())],
            &OperationTarget::default(),
            &context,
        )
        .unwrap_err(),
        oats.run_phase(
            "acme.tool",
            Phase::Check,
            json!({}),
            Duration::from_secs(5),
            &context,
        )
        .unwrap_err(),
    ];
    let gate = OatsBindingGate::new(
        oats.clone(),
        OatsBindingGateConfig {
            capability: "acme.tool".into(),
            ..Default::default()
        },
    );
    let answer = gate.current(Instant::now() + Duration::from_secs(5));
    let Err(sf_host::contracts::GateError::Unavailable { reason }) = answer else {
        panic!("the gate of an untrusted capability answered {answer:?}");
    };
    errors.push(sf_oats::OatsError::new(
        ErrorCode::CapabilityBlocked,
        "gate",
        reason,
    ));
    errors
}

#[test]
fn an_untrusted_surface_never_runs() {
    let (_bench, oats, executor, _dir) = setup();
    for error in every_surface(&oats) {
        assert_eq!(error.code(), "E_CAPABILITY_BLOCKED", "{error}");
        assert!(error.message.contains("sf oats trust acme.tool"), "{error}");
    }
    assert!(executor.requests().is_empty(), "something ran untrusted");
}

#[test]
fn trust_discloses_the_surface_and_binds_to_the_registered_bytes() {
    let (_bench, oats, executor, _dir) = setup();
    let shown = oats.show("acme.tool").unwrap();
    let (_, surface) = shown.state.expect("the registered bytes verify");
    assert_eq!(surface.integrity, shown.entry.integrity);
    assert_eq!(
        surface.commands["echo"],
        vec!["node", "bin/tool.mjs", "echo"]
    );
    assert_eq!(surface.binding["check"], "binding-check");
    assert_eq!(surface.environment, vec!["ACME_TOKEN", "ACME_REGION"]);
    let text = surface.to_text();
    for needle in [
        "ACME_TOKEN",
        "binding phases:",
        "check: binding-check",
        "report:",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }
    assert_eq!(
        surface.to_json()["environment"],
        json!(["ACME_TOKEN", "ACME_REGION"])
    );

    // The reviewed integrity must be the registered one.
    let error = oats
        .trust("acme.tool", Some("oats.tree-exec.v1:sha256-0000"))
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::IntegrityDrift);
    assert!(!oats.registry().get("acme.tool").unwrap().trusted);

    let trusted = oats
        .trust("acme.tool", Some(&shown.entry.integrity))
        .unwrap();
    assert!(trusted.needed && trusted.entry.trusted);
    executor.push(Ok(ScriptedRun::exited(0, b"hello\n")));
    let outcome = oats
        .run_command("acme.tool", "echo", &["x".into()], &RunContext::default())
        .unwrap();
    assert_eq!(outcome.stdout, b"hello\n");
    assert_eq!(outcome.argv, vec!["node", "bin/tool.mjs", "echo", "x"]);
    // What the Executor got: the artifact as the program, the launcher as the entry, and
    // the request as the input.
    let requests = executor.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.entry.path, sf_oats::launch::LAUNCHER_PATH);
    assert!(
        request
            .program
            .iter()
            .any(|f| f.path == "artifact/bin/tool.mjs")
    );
    assert!(
        request
            .program
            .iter()
            .any(|f| f.path == "artifact/oats.json")
    );
    assert_eq!(request.args, vec!["/sf/input/request.json"]);
    let sent = sf_oats::launch::read_request(request).unwrap();
    assert_eq!(sent["script"], "bin/tool.mjs");
    assert_eq!(sent["args"], json!(["echo", "x"]));
    assert_eq!(sent["env"]["OATS_CAPABILITY"], "acme.tool");
    assert_eq!(sent["env"]["OATS_SETTINGS"], r#"{"mode":"plain"}"#);
    assert_eq!(sent["places"]["OATS_CLI_BIN"], "kernel");
    assert_eq!(sent["cwd"], "home");
}

#[test]
fn any_change_of_the_bytes_resets_trust_and_nothing_runs() {
    let (bench, oats, executor, dir) = setup();
    let registered = oats.registry().get("acme.tool").unwrap().integrity;
    type Change = Box<dyn Fn()>;
    let tampers: Vec<(&str, Change, Change)> = vec![
        (
            "one byte of a script",
            Box::new({
                let dir = dir.clone();
                move || {
                    let mut bytes = std::fs::read(dir.join("bin/tool.mjs")).unwrap();
                    bytes[0] ^= 1;
                    std::fs::write(dir.join("bin/tool.mjs"), bytes).unwrap();
                }
            }),
            Box::new({
                let dir = dir.clone();
                move || {
                    let mut bytes = std::fs::read(dir.join("bin/tool.mjs")).unwrap();
                    bytes[0] ^= 1;
                    std::fs::write(dir.join("bin/tool.mjs"), bytes).unwrap();
                }
            }),
        ),
        (
            "the exec bit",
            Box::new({
                let dir = dir.clone();
                move || {
                    std::fs::set_permissions(
                        dir.join("bin/tool.mjs"),
                        std::fs::Permissions::from_mode(0o755),
                    )
                    .unwrap()
                }
            }),
            Box::new({
                let dir = dir.clone();
                move || {
                    std::fs::set_permissions(
                        dir.join("bin/tool.mjs"),
                        std::fs::Permissions::from_mode(0o644),
                    )
                    .unwrap()
                }
            }),
        ),
        (
            "a planted link",
            Box::new({
                let dir = dir.clone();
                move || symlink("tool.mjs", dir.join("bin/planted.mjs")).unwrap()
            }),
            Box::new({
                let dir = dir.clone();
                move || std::fs::remove_file(dir.join("bin/planted.mjs")).unwrap()
            }),
        ),
        (
            "a new file",
            Box::new({
                let dir = dir.clone();
                move || std::fs::write(dir.join("extra.txt"), "x").unwrap()
            }),
            Box::new({
                let dir = dir.clone();
                move || std::fs::remove_file(dir.join("extra.txt")).unwrap()
            }),
        ),
    ];
    for (what, tamper, restore) in tampers {
        oats.trust("acme.tool", None).unwrap();
        tamper();
        let error = oats
            .run_command("acme.tool", "echo", &[], &RunContext::default())
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::IntegrityDrift, "{what}: {error}");
        assert!(error.message.contains("trust was reset"), "{what}: {error}");
        let entry = oats.registry().get("acme.tool").unwrap();
        assert!(!entry.trusted, "{what}: trust survived");
        assert_eq!(
            entry.integrity, registered,
            "{what}: the registration moved"
        );
        // Trust cannot be approved for bytes that are not the registered ones.
        assert_eq!(
            oats.trust("acme.tool", None).unwrap_err().code,
            ErrorCode::IntegrityDrift,
            "{what}"
        );
        restore();
        // The bytes are back, but trust stays reset until approved again.
        let error = oats
            .run_command("acme.tool", "echo", &[], &RunContext::default())
            .unwrap_err();
        assert_eq!(error.code(), "E_CAPABILITY_BLOCKED", "{what}: {error}");
    }
    assert!(
        executor.requests().is_empty(),
        "something ran after tampering"
    );

    // Re-registering changed bytes records them untrusted; identical bytes keep trust.
    oats.trust("acme.tool", None).unwrap();
    assert!(oats.register(&dir).unwrap().entry.trusted);
    std::fs::write(dir.join("extra.txt"), "x").unwrap();
    let moved = oats.register(&dir).unwrap().entry;
    assert!(!moved.trusted);
    assert_ne!(moved.integrity, registered);

    // A registered directory replaced by a link to another directory.
    let other = bench.fixture("tool", "elsewhere");
    oats.trust("acme.tool", None).unwrap();
    let moved_away = bench.root.join("moved-away");
    std::fs::rename(&dir, &moved_away).unwrap();
    symlink(&other, &dir).unwrap();
    let error = oats
        .run_command("acme.tool", "echo", &[], &RunContext::default())
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::IntegrityDrift, "{error}");
    assert!(!oats.registry().get("acme.tool").unwrap().trusted);
    assert!(executor.requests().is_empty());
}

#[test]
fn trust_is_per_capability_and_only_for_executable_ones() {
    let (bench, oats, executor, _dir) = setup();
    let notes = bench.fixture("instructions", "notes");
    let registration = oats.register(&notes).unwrap();
    assert!(!registration.executable);
    let outcome = oats.trust("acme.notes", None).unwrap();
    assert!(
        !outcome.needed,
        "an instruction-only capability needs no approval"
    );
    oats.prepare("acme.notes", true)
        .expect("an instruction-only capability needs no trust");
    // Approving one leaves its sibling untouched.
    let hooks = bench.fixture("hooks", "hooks");
    oats.register(&hooks).unwrap();
    oats.trust("acme.hooks", None).unwrap();
    assert!(!oats.registry().get("acme.tool").unwrap().trusted);
    assert!(oats.registry().get("acme.hooks").unwrap().trusted);
    assert_eq!(
        oats.trust("acme.unknown", None).unwrap_err().code(),
        "unknown-capability"
    );
    assert!(executor.requests().is_empty());
}

#[test]
fn only_declared_environment_and_settings_reach_a_run() {
    let (_bench, oats, executor, _dir) = setup();
    oats.trust("acme.tool", None).unwrap();
    let mut context = RunContext::default();
    context.environment.insert("OTHER_TOKEN".into(), "x".into());
    let error = oats
        .run_command("acme.tool", "echo", &[], &context)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidEnvironment, "{error}");
    assert_eq!(error.subject, "OTHER_TOKEN");
    for bad in ["a\nb", "a\0b", "a\rb", &"x".repeat(8193)] {
        let mut context = RunContext::default();
        context.environment.insert("ACME_TOKEN".into(), bad.into());
        let error = oats
            .run_command("acme.tool", "echo", &[], &context)
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidEnvironment, "{error}");
    }
    let mut context = RunContext::default();
    context.settings.insert("mode".into(), json!("loud"));
    let error = oats
        .run_command("acme.tool", "echo", &[], &context)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidSetting, "{error}");
    assert_eq!(error.subject, "settings.mode");
    let error = oats
        .run_command("acme.tool", "missing", &[], &RunContext::default())
        .unwrap_err();
    assert_eq!(error.code(), "E_UNKNOWN_COMMAND");
    assert!(error.message.contains("echo"), "{error}");
    assert!(executor.requests().is_empty());

    // A declared value and an undeclared setting (accepted, as oats does) do reach it.
    let mut context = RunContext::default();
    context
        .environment
        .insert("ACME_TOKEN".into(), "secret".into());
    context.settings.insert("mode".into(), json!("fancy"));
    context.settings.insert("free".into(), json!(1.5));
    oats.run_command("acme.tool", "echo", &[], &context)
        .unwrap();
    let sent = sf_oats::launch::read_request(&executor.requests()[0]).unwrap();
    assert_eq!(sent["env"]["ACME_TOKEN"], "secret");
    assert_eq!(
        sent["env"]["OATS_SETTINGS"],
        r#"{"free":1.5,"mode":"fancy"}"#
    );
    assert!(sent["env"].get("ACME_REGION").is_none());
}
