//! The strict 0.24.0 manifest parser: the okf fixture parses with exactly the shape oats
//! gives it; every valid shape is accepted; every refusal in section 3 of the contract study
//! (and the bad input of the issue) is refused with its stable code, naming the field.

mod oats_support;

use serde_json::{Value, json};
use sf_oats::ErrorCode;
use sf_oats::manifest::{
    self, HelperInjection, HookEvent, Layer, OperationContext, OperationKind, Requirement,
};

fn okf_bytes() -> Vec<u8> {
    std::fs::read(oats_support::fixtures().join("okf/oats.json")).expect("the okf fixture")
}

/// A minimal valid manifest to vary.
fn base() -> Value {
    json!({
        "capability": "acme.tool",
        "version": "1.0.0",
        "description": "a tool",
        "commands": {"run": "bin/run.mjs go"},
    })
}

fn parse(value: &Value) -> Result<manifest::Manifest, sf_oats::OatsError> {
    manifest::parse(&serde_json::to_vec(value).unwrap())
}

fn with(mut value: Value, pointer: &str, item: Value) -> Value {
    // Sets value at a dotted path, creating objects on the way.
    let mut current = &mut value;
    let parts: Vec<&str> = pointer.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        current = current
            .as_object_mut()
            .unwrap()
            .entry(part.to_string())
            .or_insert_with(|| json!({}));
    }
    current
        .as_object_mut()
        .unwrap()
        .insert(parts[parts.len() - 1].to_owned(), item);
    value
}

fn refused(value: &Value, code: ErrorCode, field: &str) {
    match parse(value) {
        Ok(_) => panic!("accepted: {value}"),
        Err(error) => {
            assert_eq!(error.code, code, "{error} for {value}");
            assert_eq!(error.subject, field, "{error} for {value}");
        }
    }
}

#[test]
fn the_okf_fixture_parses_with_its_exact_shape() {
    let parsed = manifest::parse(&okf_bytes()).expect("okf 2.1.0 parses");
    assert_eq!(parsed.capability, "oats.okf");
    assert_eq!(parsed.version, "2.1.0");
    assert_eq!(parsed.command.as_deref(), Some("okf"));
    assert_eq!(parsed.compatibility.as_deref(), Some(">=0.24.0"));
    assert_eq!(parsed.layer, Some(Layer::Knowledge));
    assert_eq!(parsed.helper_injection, Some(HelperInjection::Omit));
    assert_eq!(parsed.commands.len(), 14);
    assert_eq!(
        parsed.commands["binding-check"].script,
        "bin/oats-okf-binding.mjs"
    );
    assert_eq!(parsed.commands["binding-check"].args, vec!["check"]);
    let binding = parsed.binding.as_ref().unwrap();
    assert_eq!(
        (
            binding.normalize.as_str(),
            binding.bind.as_str(),
            binding.check.as_str()
        ),
        ("binding-normalize", "binding-bind", "binding-check")
    );
    // spawn {command, required:true, inputs{sourceReceipt{1}}}, retire without required,
    // soul-scaffold a plain string.
    let spawn = &parsed.hooks[&HookEvent::Spawn];
    assert!(spawn.required && spawn.source_receipt);
    let retire = &parsed.hooks[&HookEvent::Retire];
    assert!(!retire.required && retire.source_receipt);
    let scaffold = &parsed.hooks[&HookEvent::SoulScaffold];
    assert!(!scaffold.required && !scaffold.source_receipt);
    assert_eq!(scaffold.command.text, "bin/oats-okf.mjs soul-scaffold");
    assert_eq!(parsed.operations["inspect"].kind, OperationKind::View);
    assert_eq!(parsed.operations["harvest"].context, OperationContext::Home);
    assert_eq!(parsed.operations["harvest"].args.len(), 2);
    assert_eq!(
        parsed.operations["harvest"].args[0].flag(),
        "--native-request"
    );
    assert_eq!(parsed.settings.len(), 4);
    assert_eq!(
        parsed.settings["harvest-runtime"].default,
        Some(json!("pi"))
    );
    assert_eq!(parsed.agents, vec!["agents/memory-harvest"]);
    assert_eq!(parsed.skills, vec!["skills"]);
    assert_eq!(parsed.inject.as_deref(), Some("injects/okf.md"));
    assert!(parsed.requires.is_empty());
    assert!(parsed.is_executable());
    // The shared fixture is byte-identical to the copy the tests register.
    let shared = std::path::Path::new("/work/shared/fixtures/oats/oats-okf-2.1.0.oats.json");
    if let Ok(bytes) = std::fs::read(shared) {
        assert_eq!(bytes, okf_bytes());
    }
}

#[test]
fn valid_shapes_are_accepted() {
    let cases = [
        base(),
        // instruction-only
        json!({"capability": "acme.notes", "version": "1", "description": "d", "skills": ["s"], "inject": "i.md"}),
        // scoped and slashed ids without environment
        with(base(), "capability", json!("@acme/tool")),
        with(base(), "capability", json!("aweb.evil/other")),
        // annotations are ignored at every level of the structure
        with(
            with(base(), "_comment", json!({"any": "thing"})),
            "commands._x",
            json!(42),
        ),
        with(
            base(),
            "hooks",
            json!({"spawn": {"command": "bin/run.mjs", "required": true, "_why": 1}}),
        ),
        // hook shapes
        with(
            base(),
            "hooks",
            json!({"soul-scaffold": "bin/run.mjs s", "retire": {"command": "bin/run.mjs r", "required": false}}),
        ),
        with(
            base(),
            "hooks",
            json!({"spawn": {"command": "bin/run.mjs", "inputs": {}}}),
        ),
        with(
            base(),
            "hooks",
            json!({"retire": {"command": "bin/run.mjs", "inputs": {"sourceReceipt": {"version": 1}}}}),
        ),
        // helperInjection forms
        with(
            base(),
            "helperInjection",
            json!({"version": 1, "mode": "inherit"}),
        ),
        with(
            base(),
            "helperInjection",
            json!({"version": 1, "mode": "omit"}),
        ),
        with(
            base(),
            "helperInjection",
            json!({"version": 1, "mode": "file", "path": "helpers/inject.md"}),
        ),
        // compatibility forms
        with(base(), "compatibility", json!({"oats": ">=0.24.0"})),
        with(base(), "compatibility", json!({"oats": "^0.23.0"})),
        with(base(), "compatibility", json!({"oats": "0.24.0"})),
        // requires: both shapes
        with(
            base(),
            "requires",
            json!([
                {"command": "git", "why": "delivery"},
                {"runtime": "pi", "package": "p", "why": "w", "minVersion": "1.2.3", "ifInstalled": true, "when": {"x": 1}, "marketplace": "m", "install": "i"}
            ]),
        ),
        // environment under the vendor prefix and a declared namespace
        with(
            with(base(), "environment", json!(["ACME_TOKEN", "EXTRA_KEY"])),
            "environmentNamespaces",
            json!(["EXTRA_"]),
        ),
        // settings with fractions and values
        with(
            base(),
            "settings",
            json!({"ratio": {"default": 0.5}, "mode": {"values": ["a", "b"], "description": "d"}}),
        ),
        // operations
        with(
            base(),
            "operations",
            json!({"go": {"command": "run", "kind": "view", "context": "scope", "args": [{"name": "x", "flag": "--x", "required": true, "description": "d"}]}}),
        ),
        // binding with a layer
        with(
            with(base(), "layer", json!("knowledge")),
            "binding",
            json!({"version": 1, "normalize": "run", "bind": "run", "check": "run"}),
        ),
        // the 0.21 runtime's retirement key
        with(
            base(),
            "retirement",
            json!({"disposable": {"home": ["tmp"], "work": []}}),
        ),
    ];
    for case in cases {
        if let Err(error) = parse(&case) {
            panic!("refused {case}: {error}");
        }
    }
    // Declaring environment alone makes a capability executable (it needs trust).
    let environment_only = json!({"capability": "acme.env", "version": "1", "description": "d", "environment": ["ACME_X"]});
    assert!(parse(&environment_only).unwrap().is_executable());
    let instructions =
        json!({"capability": "acme.notes", "version": "1", "description": "d", "skills": ["s"]});
    assert!(!parse(&instructions).unwrap().is_executable());
    let requires = parse(&with(
        base(),
        "requires",
        json!([{"command": "git", "why": "w"}]),
    ))
    .unwrap();
    assert!(matches!(requires.requires[0], Requirement::Host(_)));
}

#[test]
fn every_refusal_has_its_code_and_names_the_field() {
    use ErrorCode::*;
    let cases: Vec<(Value, ErrorCode, &str)> = vec![
        // identity and top level
        (
            json!({"integration": "x", "layer": "tasks"}),
            InvalidManifest,
            "capability",
        ),
        (
            with(base(), "souls", json!(["a"])),
            InvalidManifest,
            "souls",
        ),
        (
            with(base(), "global", json!(true)),
            InvalidManifest,
            "global",
        ),
        (
            with(base(), "targets", json!([])),
            InvalidManifest,
            "targets",
        ),
        (with(base(), "groups", json!([])), InvalidManifest, "groups"),
        (
            with(base(), "agent-types", json!([])),
            InvalidManifest,
            "agent-types",
        ),
        (
            with(base(), "unknown", json!(1)),
            InvalidManifest,
            "unknown",
        ),
        (
            with(base(), "private", json!(true)),
            UnsupportedField,
            "private",
        ),
        (
            with(base(), "capability", json!("okf")),
            InvalidId,
            "capability",
        ),
        (
            with(base(), "capability", json!("Acme.tool")),
            InvalidId,
            "capability",
        ),
        (
            with(base(), "capability", json!(7)),
            InvalidManifest,
            "capability",
        ),
        (
            with(base(), "version", json!("")),
            InvalidManifest,
            "version",
        ),
        (
            with(base(), "version", json!(1)),
            InvalidManifest,
            "version",
        ),
        (
            json!({"capability": "acme.tool", "description": "d"}),
            InvalidManifest,
            "version",
        ),
        (
            with(base(), "command", json!("Bad")),
            InvalidManifest,
            "command",
        ),
        (
            with(base(), "layer", json!("other")),
            InvalidManifest,
            "layer",
        ),
        // compatibility
        (
            with(base(), "compatibility", json!({"oats": ">=999.0.0"})),
            Incompatible,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": "^0.25.0"})),
            Incompatible,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": "0.23.0"})),
            Incompatible,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": "banana"})),
            InvalidManifest,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": ">=1.2"})),
            InvalidManifest,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": "~1.2.3"})),
            InvalidManifest,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": ">= 1.2.3"})),
            InvalidManifest,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": 1})),
            InvalidManifest,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({})),
            InvalidManifest,
            "compatibility.oats",
        ),
        (
            with(base(), "compatibility", json!({"oats": ">=0.24.0", "x": 1})),
            InvalidManifest,
            "compatibility.x",
        ),
        // requires
        (
            with(base(), "requires", json!([{"command": "git"}])),
            InvalidManifest,
            "requires[0].why",
        ),
        (
            with(
                base(),
                "requires",
                json!([{"command": "git", "why": "w", "x": 1}]),
            ),
            InvalidManifest,
            "requires[0].x",
        ),
        (
            with(
                base(),
                "requires",
                json!([{"runtime": "codex", "package": "p", "why": "w"}]),
            ),
            InvalidManifest,
            "requires[0].runtime",
        ),
        (
            with(
                base(),
                "requires",
                json!([{"runtime": "pi", "package": "p", "why": "w", "minVersion": "1.2"}]),
            ),
            InvalidManifest,
            "requires[0].minVersion",
        ),
        (
            with(
                base(),
                "requires",
                json!([{"harness": "pi", "package": "p", "why": "w"}]),
            ),
            UnsupportedField,
            "requires[0].harness",
        ),
        (
            with(base(), "requires", json!({})),
            InvalidManifest,
            "requires",
        ),
        // helperInjection
        (
            with(base(), "helperInjection", json!(null)),
            InvalidManifest,
            "helperInjection",
        ),
        (
            with(base(), "helperInjection", json!(false)),
            InvalidManifest,
            "helperInjection",
        ),
        (
            with(base(), "helperInjection", json!({})),
            InvalidManifest,
            "helperInjection.version",
        ),
        (
            with(base(), "helperInjection", json!([])),
            InvalidManifest,
            "helperInjection",
        ),
        (
            with(
                base(),
                "helperInjection",
                json!({"version": 2, "mode": "omit"}),
            ),
            InvalidManifest,
            "helperInjection.version",
        ),
        (
            with(
                base(),
                "helperInjection",
                json!({"version": 1, "mode": "other"}),
            ),
            InvalidManifest,
            "helperInjection.mode",
        ),
        (
            with(
                base(),
                "helperInjection",
                json!({"version": 1, "mode": "file"}),
            ),
            InvalidManifest,
            "helperInjection.path",
        ),
        (
            with(
                base(),
                "helperInjection",
                json!({"version": 1, "mode": "inherit", "path": "x"}),
            ),
            InvalidManifest,
            "helperInjection.path",
        ),
        (
            with(
                base(),
                "helperInjection",
                json!({"version": 1, "mode": "omit", "extra": 1}),
            ),
            InvalidManifest,
            "helperInjection.extra",
        ),
        // hooks
        (
            with(base(), "hooks", json!({"launch": "bin/run.mjs"})),
            UnsupportedHook,
            "hooks.launch",
        ),
        (
            with(base(), "hooks", json!({"stop": "bin/run.mjs"})),
            UnsupportedHook,
            "hooks.stop",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"retire": {"command": "bin/run.mjs", "required": true}}),
            ),
            InvalidManifest,
            "hooks.retire.required",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"soul-scaffold": {"command": "bin/run.mjs", "required": true}}),
            ),
            InvalidManifest,
            "hooks.soul-scaffold.required",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "bin/run.mjs", "required": "yes"}}),
            ),
            InvalidManifest,
            "hooks.spawn.required",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "bin/run.mjs", "when": 1}}),
            ),
            InvalidManifest,
            "hooks.spawn.when",
        ),
        (
            with(base(), "hooks", json!({"spawn": {"required": true}})),
            InvalidManifest,
            "hooks.spawn.command",
        ),
        (
            with(base(), "hooks", json!({"spawn": ""})),
            InvalidManifest,
            "hooks.spawn",
        ),
        (
            with(base(), "hooks", json!({"spawn": 42})),
            InvalidManifest,
            "hooks.spawn",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": null}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": false}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": []}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": {"sourceReceipt": null}}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs.sourceReceipt",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": {"sourceReceipt": false}}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs.sourceReceipt",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": {"sourceReceipt": {}}}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs.sourceReceipt.version",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": {"sourceReceipt": {"version": 2}}}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs.sourceReceipt.version",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": {"sourceReceipt": {"version": 1, "path": "x"}}}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs.sourceReceipt.path",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": {"sourceReceipt": {"version": 1, "other": true}}}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs.sourceReceipt.other",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"spawn": {"command": "x.mjs", "inputs": {"anotherContract": {}}}}),
            ),
            InvalidManifest,
            "hooks.spawn.inputs.anotherContract",
        ),
        // commands
        (
            with(base(), "commands", json!({"run": ""})),
            InvalidManifest,
            "commands.run",
        ),
        (
            with(base(), "commands", json!({"run": "   "})),
            InvalidManifest,
            "commands.run",
        ),
        (
            with(base(), "commands", json!({"run": 42})),
            InvalidManifest,
            "commands.run",
        ),
        (
            with(base(), "commands", json!({"run": null})),
            InvalidManifest,
            "commands.run",
        ),
        (
            with(base(), "commands", json!({"run": false})),
            InvalidManifest,
            "commands.run",
        ),
        (
            with(base(), "commands", json!({"run": 0})),
            InvalidManifest,
            "commands.run",
        ),
        (
            with(base(), "commands", json!({"Run": "x.mjs"})),
            InvalidManifest,
            "commands.Run",
        ),
        // binding
        (
            with(
                base(),
                "binding",
                json!({"version": 1, "normalize": "run", "bind": "run", "check": "run"}),
            ),
            InvalidManifest,
            "binding",
        ),
        (
            with(
                with(base(), "layer", json!("tasks")),
                "binding",
                json!({"version": 1, "normalize": "run", "bind": "run", "check": "missing"}),
            ),
            InvalidManifest,
            "binding.check",
        ),
        (
            with(
                with(base(), "layer", json!("tasks")),
                "binding",
                json!({"version": 2, "normalize": "run", "bind": "run", "check": "run"}),
            ),
            InvalidManifest,
            "binding.version",
        ),
        (
            with(
                with(base(), "layer", json!("tasks")),
                "binding",
                json!({"version": 1, "normalize": "run", "bind": "run"}),
            ),
            InvalidManifest,
            "binding.check",
        ),
        (
            with(
                with(base(), "layer", json!("tasks")),
                "binding",
                json!({"version": 1, "normalize": "run", "bind": "run", "check": "run", "reasons": ["x"]}),
            ),
            UnsupportedField,
            "binding.reasons",
        ),
        (
            with(
                with(base(), "layer", json!("tasks")),
                "binding",
                json!({"version": 1, "normalize": "run", "bind": "run", "check": "run", "keys": ["x"]}),
            ),
            UnsupportedField,
            "binding.keys",
        ),
        (
            with(
                with(base(), "layer", json!("tasks")),
                "binding",
                json!({"version": 1, "normalize": "run", "bind": "run", "check": "run", "x": 1}),
            ),
            InvalidManifest,
            "binding.x",
        ),
        // operations
        (
            with(base(), "operations", json!({"go": {"command": "missing"}})),
            InvalidManifest,
            "operations.go.command",
        ),
        (
            with(
                base(),
                "operations",
                json!({"go": {"command": "run", "kind": "other"}}),
            ),
            InvalidManifest,
            "operations.go.kind",
        ),
        (
            with(
                base(),
                "operations",
                json!({"go": {"command": "run", "context": "elsewhere"}}),
            ),
            InvalidManifest,
            "operations.go.context",
        ),
        (
            with(
                base(),
                "operations",
                json!({"go": {"command": "run", "extra": 1}}),
            ),
            InvalidManifest,
            "operations.go.extra",
        ),
        (
            with(
                base(),
                "operations",
                json!({"go": {"command": "run", "args": [{"name": "x", "other": 1}]}}),
            ),
            InvalidManifest,
            "operations.go.args[0].other",
        ),
        (
            with(
                base(),
                "operations",
                json!({"go": {"command": "run", "args": [{"name": "X"}]}}),
            ),
            InvalidManifest,
            "operations.go.args[0].name",
        ),
        (
            with(
                base(),
                "operations",
                json!({"go": {"command": "run", "args": [{"name": "x", "flag": "-x"}]}}),
            ),
            InvalidManifest,
            "operations.go.args[0].flag",
        ),
        (
            with(
                base(),
                "operations",
                json!({"go": {"command": "run", "args": [{"name": "x", "required": "no"}]}}),
            ),
            InvalidManifest,
            "operations.go.args[0].required",
        ),
        (
            with(base(), "operations", json!({"Go": {"command": "run"}})),
            InvalidManifest,
            "operations.Go",
        ),
        // settings
        (
            with(base(), "settings", json!({"x": {"other": 1}})),
            InvalidManifest,
            "settings.x.other",
        ),
        (
            with(base(), "settings", json!({"x": {"hostOnly": true}})),
            UnsupportedField,
            "settings.x.hostOnly",
        ),
        (
            with(base(), "settings", json!({"x": {"values": "a"}})),
            InvalidManifest,
            "settings.x.values",
        ),
        (
            with(base(), "settings", json!({"x": 1})),
            InvalidManifest,
            "settings.x",
        ),
        // environment
        (
            with(
                with(base(), "capability", json!("aweb@evil")),
                "environment",
                json!(["AWEB_X"]),
            ),
            InvalidId,
            "capability",
        ),
        (
            with(
                with(base(), "capability", json!("aweb/evil")),
                "environment",
                json!(["AWEB_X"]),
            ),
            InvalidId,
            "capability",
        ),
        (
            with(
                with(base(), "capability", json!("aweb.evil@other")),
                "environment",
                json!(["AWEB_X"]),
            ),
            InvalidId,
            "capability",
        ),
        (
            with(
                with(base(), "capability", json!("aweb.evil/other")),
                "environment",
                json!(["AWEB_X"]),
            ),
            InvalidId,
            "capability",
        ),
        (
            with(
                with(base(), "capability", json!("aweb-evil.identity")),
                "environment",
                json!(["AWEB_X"]),
            ),
            InvalidId,
            "capability",
        ),
        (
            with(base(), "environment", json!(["OTHER_TOKEN"])),
            InvalidId,
            "environment[0]",
        ),
        (
            with(base(), "environment", json!(["PATH"])),
            InvalidId,
            "environment[0]",
        ),
        (
            with(base(), "environment", json!(["OATS_INSTANCE"])),
            InvalidId,
            "environment[0]",
        ),
        (
            with(base(), "environment", json!(["NODE_OPTIONS"])),
            InvalidId,
            "environment[0]",
        ),
        (
            with(base(), "environment", json!(["ACME-X"])),
            InvalidId,
            "environment[0]",
        ),
        (
            with(base(), "environment", json!(["ACME_X", "ACME_X"])),
            InvalidManifest,
            "environment[1]",
        ),
        (
            with(
                with(base(), "environment", json!(["LD_PRELOAD"])),
                "environmentNamespaces",
                json!(["LD_"]),
            ),
            InvalidId,
            "environmentNamespaces[0]",
        ),
        (
            with(base(), "environmentNamespaces", json!(["OATS_"])),
            InvalidId,
            "environmentNamespaces[0]",
        ),
        (
            with(base(), "environmentNamespaces", json!(["PYTHONX_"])),
            InvalidId,
            "environmentNamespaces[0]",
        ),
        (
            with(base(), "environmentNamespaces", json!(["lower_"])),
            InvalidId,
            "environmentNamespaces[0]",
        ),
        // skills, agents, inject: wrong types and duplicates
        (
            with(base(), "skills", json!("skills")),
            InvalidManifest,
            "skills",
        ),
        (
            with(base(), "skills", json!(["a", "a"])),
            InvalidManifest,
            "skills[1]",
        ),
        (
            with(base(), "agents", json!([1])),
            InvalidManifest,
            "agents[0]",
        ),
        (
            with(base(), "inject", json!(["x"])),
            InvalidManifest,
            "inject",
        ),
        (
            with(
                base(),
                "retirement",
                json!({"disposable": {"home": ["x"], "other": []}}),
            ),
            InvalidManifest,
            "retirement.disposable.other",
        ),
    ];
    for (value, code, field) in &cases {
        refused(value, *code, field);
    }
}

#[test]
fn paths_that_escape_lexically_are_path_escape() {
    let cases: Vec<(Value, &str)> = vec![
        (with(base(), "skills", json!(["../../shared"])), "skills[0]"),
        (with(base(), "skills", json!(["/abs/skills"])), "skills[0]"),
        (with(base(), "agents", json!(["a/../../x"])), "agents[0]"),
        (with(base(), "inject", json!("C:/x.md")), "inject"),
        (with(base(), "inject", json!("~/x.md")), "inject"),
        (with(base(), "inject", json!("a\\b.md")), "inject"),
        (with(base(), "inject", json!("a\u{0}b.md")), "inject"),
        (
            with(
                base(),
                "commands",
                json!({"run": "../../../../outside.mjs"}),
            ),
            "commands.run",
        ),
        (
            with(base(), "commands", json!({"run": "/usr/bin/env node"})),
            "commands.run",
        ),
        (
            with(base(), "hooks", json!({"spawn": "../../../../outside.mjs"})),
            "hooks.spawn",
        ),
        (
            with(
                base(),
                "hooks",
                json!({"retire": {"command": "bin\\r.mjs"}}),
            ),
            "hooks.retire.command",
        ),
    ];
    for (value, field) in &cases {
        refused(value, ErrorCode::PathEscape, field);
    }
    for path in [
        "", "/abs", "../x", "a/../x", "a//b", "a/./b", "C:/abs", "a\\b", "a\u{0}b", ".",
    ] {
        refused(
            &with(
                base(),
                "helperInjection",
                json!({"version": 1, "mode": "file", "path": path}),
            ),
            ErrorCode::PathEscape,
            "helperInjection.path",
        );
    }
}

#[test]
fn bad_input_gives_typed_errors() {
    let bad: Vec<(Vec<u8>, ErrorCode)> = vec![
        (b"{".to_vec(), ErrorCode::InvalidJson),
        (b"".to_vec(), ErrorCode::InvalidJson),
        (b"null".to_vec(), ErrorCode::InvalidManifest),
        (b"[]".to_vec(), ErrorCode::InvalidManifest),
        (b"3".to_vec(), ErrorCode::InvalidManifest),
        (b"\"x\"".to_vec(), ErrorCode::InvalidManifest),
        (b"{\"capability\":\"acme.tool\"} trailing".to_vec(), ErrorCode::InvalidJson),
        (b"\xff\xfe{}".to_vec(), ErrorCode::InvalidJson),
        (
            br#"{"capability":"acme.tool","capability":"acme.other","version":"1","description":"d"}"#.to_vec(),
            ErrorCode::DuplicateKey,
        ),
        (
            br#"{"capability":"acme.tool","version":"1","description":"d","hooks":{"spawn":"a.mjs","spawn":"b.mjs"}}"#.to_vec(),
            ErrorCode::DuplicateKey,
        ),
        (
            format!("{}{}", "[".repeat(40), "]".repeat(40)).into_bytes(),
            ErrorCode::InvalidJson,
        ),
    ];
    for (bytes, code) in bad {
        let error = manifest::parse(&bytes).unwrap_err();
        assert_eq!(
            error.code,
            code,
            "{error} for {}",
            String::from_utf8_lossy(&bytes)
        );
    }
    // The size bound: a valid manifest padded past 256 KiB.
    let mut big = base();
    big["description"] = json!("x".repeat(manifest::MANIFEST_LIMITS.bytes));
    let error = parse(&big).unwrap_err();
    assert_eq!(error.code, ErrorCode::TooLarge, "{error}");
    // A duplicate key names the key.
    let error = manifest::parse(br#"{"a":1,"a":2}"#).unwrap_err();
    assert!(error.message.contains("\"a\""), "{error}");
}
