//! Binding phases on the wire, and a capability's `binding.check` as sf's Gate: it passes the
//! Gate conformance suite (as the file gate does), and it drives integration: ready moves the
//! target; not ready withholds it with the capability's reason in the observation.

mod oats_support;

mod land_support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oats_support::{Bench, sandbox};
use serde_json::{Value, json};
use sf_host::contracts::{Gate, GateAnswer, GateError};
use sf_host::repository::Invocation;
use sf_oats::binding::{self, CheckStatus, PhaseOutcome};
use sf_oats::{Oats, OatsBindingGate, OatsBindingGateConfig, OatsOptions, Phase, RunContext};
use sf_sdk::conformance::gate::{self as conformance, Setting};
use sf_tests::{TestRepo, edit, frozen, payload, proposal};

fn trusted(bench: &Bench, fixture: &str, id: &str, options: OatsOptions) -> Arc<Oats> {
    let dir = bench.fixture(fixture, fixture);
    let oats = Arc::new(bench.oats_with(sandbox(), options));
    oats.register(&dir).unwrap();
    oats.trust(id, None).unwrap();
    oats
}

fn check(oats: &Oats, binding: Value) -> PhaseOutcome {
    oats.run_phase(
        "acme.tool",
        Phase::Check,
        json!({"binding": binding, "context": {}, "action": "test"}),
        Duration::from_secs(30),
        &RunContext::default(),
    )
    .unwrap()
    .outcome
}

#[test]
fn binding_phases_speak_the_wire() {
    let bench = Bench::new();
    let options = OatsOptions {
        binding_timeout: Duration::from_millis(1500),
        ..OatsOptions::default()
    };
    let oats = trusted(&bench, "tool", "acme.tool", options);
    let mut context = RunContext::default();
    context.settings.insert("mode".into(), json!("fancy"));

    // normalize: the request reaches the phase on stdin; it runs in the capability root.
    let run = oats
        .run_phase(
            "acme.tool",
            Phase::Normalize,
            json!({"declarations": [], "context": {}}),
            Duration::from_secs(30),
            &context,
        )
        .unwrap();
    let PhaseOutcome::Answered(result) = run.outcome else {
        panic!("normalize: {:?}", run.outcome);
    };
    assert_eq!(result["model"]["settings"], json!({"mode": "fancy"}));
    assert_eq!(result["model"]["root"], result["model"]["cwd"]);
    assert!(
        result["model"]["root"]
            .as_str()
            .unwrap()
            .ends_with("/artifact")
    );
    let run = oats
        .run_phase(
            "acme.tool",
            Phase::Bind,
            json!({"model": {}, "choices": {"a": 1}, "context": {}}),
            Duration::from_secs(30),
            &context,
        )
        .unwrap();
    assert!(
        matches!(&run.outcome, PhaseOutcome::Answered(r) if r["payload"] == json!({"a": 1})),
        "{:?}",
        run.outcome
    );

    // check: statuses, with free text dropped.
    let PhaseOutcome::Answered(ready) = check(&oats, json!({"status": "ready"})) else {
        panic!("ready");
    };
    assert_eq!(
        binding::parse_check(&ready).unwrap().status,
        CheckStatus::Ready
    );
    let PhaseOutcome::Answered(waiting) = check(
        &oats,
        json!({"status": "needs-configuration", "problems": ["a", "b"]}),
    ) else {
        panic!("needs-configuration");
    };
    let parsed = binding::parse_check(&waiting).unwrap();
    assert_eq!(parsed.status, CheckStatus::NeedsConfiguration);
    assert_eq!(parsed.problems, vec!["a", "b"]);
    assert_eq!(
        check(&oats, json!({"mode": "refuse"})),
        PhaseOutcome::Refused {
            code: "authorization-required".into()
        }
    );
    let PhaseOutcome::Answered(bad) = check(&oats, json!({"mode": "ready-with-problems"})) else {
        panic!("ready-with-problems");
    };
    assert!(binding::parse_check(&bad).is_err());

    // Transport rules: one document, echoed, no unknown fields, exit 0, in time.
    for mode in ["garbage", "two", "extra", "wrong-echo"] {
        assert!(
            matches!(
                check(&oats, json!({"mode": mode})),
                PhaseOutcome::Malformed { .. }
            ),
            "{mode}"
        );
    }
    assert!(matches!(
        check(&oats, json!({"mode": "exit"})),
        PhaseOutcome::Transport { .. }
    ));
    let started = Instant::now();
    assert_eq!(
        check(&oats, json!({"mode": "sleep"})),
        PhaseOutcome::TimedOut
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A gate answered by a capability's `binding.check`, linked or loaded as a plugin; the
/// harness sets the binding the check reads. The bench holding the capability lives as long
/// as the harness.
struct OatsHarness {
    gate: Box<dyn Gate>,
    binding: PathBuf,
    bench: Bench,
}

impl conformance::Harness for OatsHarness {
    fn gate(&self) -> &dyn Gate {
        self.gate.as_ref()
    }
    fn set(&self, setting: Setting) {
        let binding = match setting {
            Setting::Open => json!({"status": "ready"}),
            Setting::Closed => json!({"status": "unavailable", "problems": ["provider-down"]}),
            Setting::Broken => json!({"mode": "garbage"}),
        };
        std::fs::write(&self.binding, binding.to_string()).unwrap();
    }
}

/// The `oats-binding` gate linked, over `acme.tool` registered and trusted in a fresh bench.
fn linked_oats_gate() -> OatsHarness {
    let bench = Bench::new();
    let oats = trusted(&bench, "tool", "acme.tool", OatsOptions::default());
    let binding = bench.root.join("binding.json");
    OatsHarness {
        gate: Box::new(OatsBindingGate::new(
            oats,
            OatsBindingGateConfig {
                capability: "acme.tool".into(),
                binding_file: Some(binding.clone()),
                action: None,
                state: None,
                environment_file: None,
            },
        )),
        binding,
        bench,
    }
}

mod oats_gate_linked {
    sf_sdk::gate_conformance!(super::linked_oats_gate);
}

#[test]
fn the_oats_gate_refuses_with_the_capability_reason() {
    let harness = linked_oats_gate();

    // Every non-ready answer refuses or errs, never proceeds, and a refusal carries the
    // capability's reason.
    let later = || Instant::now() + Duration::from_secs(30);
    conformance::Harness::set(&harness, Setting::Closed);
    assert_eq!(
        harness.gate.current(later()),
        Ok(GateAnswer::Refuse {
            reason: "acme.tool binding check: unavailable (provider-down)".into()
        })
    );
    for (binding, expected) in [
        (
            json!({"status": "needs-configuration"}),
            "acme.tool binding check: needs-configuration (binding-missing)",
        ),
        (
            json!({"status": "authorization-required", "problems": []}),
            "acme.tool binding check: authorization-required",
        ),
        (
            json!({"mode": "refuse"}),
            "acme.tool binding check failed: authorization-required",
        ),
    ] {
        std::fs::write(&harness.binding, binding.to_string()).unwrap();
        assert_eq!(
            harness.gate.current(later()),
            Ok(GateAnswer::Refuse {
                reason: expected.into()
            })
        );
    }
    for binding in [json!({"mode": "exit"}), json!({"mode": "two"})] {
        std::fs::write(&harness.binding, binding.to_string()).unwrap();
        assert!(harness.gate.current(later()).is_err(), "{binding}");
    }
    std::fs::write(&harness.binding, "{\"status\":").unwrap();
    assert!(matches!(
        harness.gate.current(later()),
        Err(GateError::Malformed { .. })
    ));
    // A check slower than the caller's deadline is a timeout, not a late proceed.
    std::fs::write(&harness.binding, json!({"mode": "sleep"}).to_string()).unwrap();
    let started = Instant::now();
    assert_eq!(
        harness
            .gate
            .current(Instant::now() + Duration::from_millis(1500)),
        Err(GateError::Timeout)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

const FILES: &[(&str, &str)] = &[("src/a.txt", "alpha\n")];

fn prepared(test: &TestRepo, action: &str) -> sf_host::repository::PreparedIntegration {
    let base = test.identity.initial;
    let sealed = test
        .repo
        .seal(
            &frozen(base, &["src"]),
            &proposal(vec![edit("src/a.txt", Some("alpha\n"), Some("beta\n"))]),
        )
        .unwrap();
    test.repo
        .prepare_integration(&payload(&test.identity, &sealed, action, 1))
        .unwrap()
}

#[test]
fn a_capability_check_drives_integration() {
    let bench = Bench::new();
    let okf = bench.fixture("okf", "okf");
    let oats = Arc::new(bench.oats_with(sandbox(), OatsOptions::default()));
    oats.register(&okf).unwrap();
    let binding = bench.root.join("okf-binding.json");
    std::fs::write(&binding, "{}").unwrap();
    let gate: Arc<dyn Gate> = Arc::new(OatsBindingGate::new(
        oats.clone(),
        OatsBindingGateConfig {
            capability: "oats.okf".into(),
            binding_file: Some(binding.clone()),
            action: None,
            state: None,
            environment_file: None,
        },
    ));

    // Untrusted: withheld, naming the trust command.
    let test = TestRepo::git(FILES);
    let intent = prepared(&test, "deliver");
    let observed = test
        .repo
        .invoke_once(&intent, &sf_tests::assumed(&intent), Some(gate.clone()))
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Withheld, "{observed:?}");
    let problem = observed.problem.clone().unwrap();
    assert!(problem.contains("sf oats trust oats.okf"), "{problem}");
    assert_eq!(test.repo.target().unwrap(), test.identity.initial);

    // Trusted but not configured: withheld with the capability's reason.
    oats.trust("oats.okf", None).unwrap();
    let test = TestRepo::git(FILES);
    let intent = prepared(&test, "deliver");
    let observed = test
        .repo
        .invoke_once(&intent, &sf_tests::assumed(&intent), Some(gate.clone()))
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Withheld, "{observed:?}");
    assert!(!observed.dispatched);
    assert_eq!(
        observed.problem.as_deref(),
        Some(
            "withheld before submission: oats.okf binding check: needs-configuration (bindings-file-missing, state-dir-missing)"
        )
    );
    assert_eq!(test.repo.target().unwrap(), test.identity.initial);

    // Ready: the target moves to the Candidate's commit.
    std::fs::write(
        &binding,
        json!({"bindingsFile": "/srv/okf/bindings.json", "stateDir": "/srv/okf/state"}).to_string(),
    )
    .unwrap();
    let test = TestRepo::git(FILES);
    let intent = prepared(&test, "deliver");
    let observed = test
        .repo
        .invoke_once(&intent, &sf_tests::assumed(&intent), Some(gate.clone()))
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Confirmed, "{observed:?}");
    assert!(observed.dispatched);
    assert_eq!(test.repo.target().unwrap(), intent.payload.commit);

    // Tampering after trust: withheld, nothing of the capability runs.
    std::fs::write(okf.join("injects/okf.md"), "changed\n").unwrap();
    let test = TestRepo::git(FILES);
    let intent = prepared(&test, "deliver");
    let observed = test
        .repo
        .invoke_once(&intent, &sf_tests::assumed(&intent), Some(gate))
        .unwrap();
    assert_eq!(observed.invocation, Invocation::Withheld, "{observed:?}");
    assert!(
        observed
            .problem
            .as_deref()
            .unwrap()
            .contains("integrity-drift"),
        "{observed:?}"
    );
    assert!(!oats.registry().get("oats.okf").unwrap().trusted);
}

/// sf's state directory in `bench` with `acme.tool` registered and trusted in its `oats/`
/// registry, as `sf oats --state` would leave it.
fn state_with_trusted_tool(bench: &Bench) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let state = bench.root.join("sf-state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let oats = Oats::new(&state.join("oats"), sandbox(), OatsOptions::default()).unwrap();
    oats.register(&bench.fixture("tool", "tool")).unwrap();
    oats.trust("acme.tool", None).unwrap();
    state
}

/// The oats plugin library, loaded through the real loader.
fn oats_plugin() -> Arc<sf_host::plugin::LoadedPlugin> {
    let plugin = sf_host::plugin::load(&sf_tests::plugins::built().oats)
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "oats");
    plugin
}

/// The `oats-binding` gate loaded from the sf-oats plugin library, over `acme.tool`
/// registered and trusted in a fresh bench's state directory.
fn loaded_oats_gate() -> OatsHarness {
    let bench = Bench::new();
    let state = state_with_trusted_tool(&bench);
    let binding = bench.root.join("binding.json");
    let config = json!({"capability": "acme.tool", "binding_file": binding, "state": state});
    let gate = sf_host::plugin::PluginGate::new(
        &oats_plugin(),
        "oats-binding",
        config.as_object().unwrap(),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    OatsHarness {
        gate: Box::new(gate),
        binding,
        bench,
    }
}

/// The `oats-binding` gate loaded through the loader passes the same suite.
mod oats_gate_loaded {
    sf_sdk::gate_conformance!(super::loaded_oats_gate);
}

/// The loaded `oats-binding` gate refuses with the capability's reason, and its sections are
/// checked when it is made.
#[test]
fn the_oats_gate_plugin_refuses_with_the_reason_and_checks_its_section() {
    let harness = loaded_oats_gate();
    let plugin = oats_plugin();
    let bench = &harness.bench;
    conformance::Harness::set(&harness, Setting::Closed);
    assert_eq!(
        harness
            .gate
            .current(Instant::now() + Duration::from_secs(30)),
        Ok(GateAnswer::Refuse {
            reason: "acme.tool binding check: unavailable (provider-down)".into()
        })
    );

    // A section naming an unknown field, or a state directory that does not exist, is
    // refused when the gate is made, naming the problem.
    for (config, needle) in [
        (
            json!({"capability": "acme.tool", "bindng_file": "/x"}),
            "bindng_file",
        ),
        (
            json!({"capability": "acme.tool", "state": bench.root.join("missing")}),
            "register and trust capability acme.tool",
        ),
    ] {
        let error =
            sf_host::plugin::PluginGate::new(&plugin, "oats-binding", config.as_object().unwrap())
                .expect_err("refused");
        assert!(error.to_string().contains(needle), "{error}");
    }
}

/// `[gate] type = "oats-binding"` in `sf.toml`: `sf integrate invoke` withholds the move
/// with the capability's reason while the check is not ready, and moves the target once it is.
#[test]
fn sf_toml_selects_the_oats_binding_gate() {
    use sf_tests::plugins::{run_json, sf};
    let bench = Bench::new();
    let state = state_with_trusted_tool(&bench);
    let binding = bench.root.join("binding.json");
    let config = bench.root.join("sf.toml");
    std::fs::write(
        &config,
        format!(
            "[gate]\ntype = \"oats-binding\"\ncapability = \"acme.tool\"\nbinding_file = \
             \"{}\"\nstate = \"{}\"\n",
            binding.display(),
            state.display()
        ),
    )
    .unwrap();
    let work = land_support::Work::new();
    let invoke = |occurrence: u64| {
        let prepared = work.verified_intent("deliver", occurrence);
        run_json(
            sf().current_dir(&work.dir)
                .args(["integrate", "invoke", "--json", "--config"])
                .arg(&config)
                .args([
                    "--identity",
                    "identity.json",
                    "--slice",
                    "slice",
                    "--prepared",
                ])
                .arg(&prepared),
        )
    };

    std::fs::write(
        &binding,
        json!({"status": "unavailable", "problems": ["provider-down"]}).to_string(),
    )
    .unwrap();
    let withheld = invoke(1);
    assert_eq!(
        withheld.result()["invocation"],
        json!("withheld"),
        "{:?}",
        withheld.json
    );
    assert_eq!(
        withheld.result()["problem"],
        json!("withheld before submission: acme.tool binding check: unavailable (provider-down)")
    );
    assert_eq!(work.target(), work.initial());

    std::fs::write(&binding, json!({"status": "ready"}).to_string()).unwrap();
    let moved = invoke(2);
    assert_eq!(
        moved.result()["invocation"],
        json!("confirmed"),
        "{:?}",
        moved.json
    );
    assert_ne!(work.target(), work.initial());
}
