//! The EvidenceStore and Gate contracts through the plugin machinery: `[evidence_store]` and
//! `[gate]` sections resolve compiled-in tags and plugin tags; a plugin that panics in every
//! method is a typed error (for a gate, a refusal) and the host keeps running; and `sf
//! integrate invoke` and `sf collect` take their gate from `sf.toml`. The built-in SQLite
//! store and file gate pass their conformance suites, linked and through the test plugin, in
//! sf-host's own tests (host/tests/conformance.rs).

mod land_support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use sf_host::canonical::Digest;
use sf_host::contracts::{AttemptId, EvidenceRecord, EvidenceStore, Gate, GateAnswer, GateError};
use sf_host::plugin::{Config, ConfigOrigin, PluginEvidenceStore, PluginGate, PluginPath, load};
use sf_tests::plugins::{built, run_json, sf};

fn record() -> EvidenceRecord {
    EvidenceRecord::new(
        Digest::of(b"pins"),
        AttemptId {
            product: "p".into(),
            epoch: 1,
        },
        "sf-test/1",
        b"payload",
    )
    .unwrap()
}

#[test]
fn a_plugin_that_panics_is_a_typed_error_and_a_gate_that_panics_refuses() {
    let plugin = load(&built().hostile).unwrap_or_else(|error| panic!("{error}"));
    let later = Instant::now() + Duration::from_secs(30);
    let gate = PluginGate::new(&plugin, "panicking", &serde_json::Map::new()).unwrap();
    for _ in 0..2 {
        let error = gate.current(later).expect_err("a panic is never a proceed");
        let GateError::Unavailable { reason } = &error else {
            panic!("{error:?}");
        };
        assert!(reason.contains("panic in current"), "{reason}");
        assert!(reason.contains("hostile"), "{reason}");
    }
    let store = PluginEvidenceStore::new(&plugin, "panicking", &serde_json::Map::new()).unwrap();
    let record = record();
    let errors = [
        store.put(&record, later).map(|_| ()).unwrap_err(),
        store.get(&record.id(), later).map(|_| ()).unwrap_err(),
        store.find(&record.id(), later).map(|_| ()).unwrap_err(),
    ];
    for (error, method) in errors.iter().zip(["put", "get", "find"]) {
        assert_eq!(error.code(), "unavailable", "{method}: {error}");
        assert!(
            error.to_string().contains(&format!("panic in {method}")),
            "{error}"
        );
    }
    // The host is still here and the plugin still answers.
    assert!(gate.current(later).is_err());
}

#[test]
fn a_passed_deadline_is_a_timeout_without_a_call() {
    let plugin = load(&built().hostile).unwrap_or_else(|error| panic!("{error}"));
    // The panicking gate would answer unavailable if it were called.
    let gate = PluginGate::new(&plugin, "panicking", &serde_json::Map::new()).unwrap();
    assert_eq!(
        gate.current(Instant::now() - Duration::from_millis(1)),
        Err(GateError::Timeout)
    );
}

fn parse(text: &str) -> Config {
    Config::parse(text, ConfigOrigin::File("/test/sf.toml".into()))
        .unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn sections_resolve_compiled_in_and_plugin_tags() {
    let (_dir, parent) = sf_test_support::private_store_dir();
    let plugins = PluginPath::new([built().dir.clone(), built().test_plugins.clone()]);
    let later = Instant::now() + Duration::from_secs(30);
    let file = parent.join("gate.json");
    std::fs::write(&file, br#"{"proceed": false, "reason": "frozen"}"#).unwrap();

    // The defaults: an open gate and the SQLite store in the given directory.
    let defaults = Config::defaults();
    assert_eq!(
        defaults.gate(&plugins).unwrap().current(later),
        Ok(GateAnswer::Proceed)
    );
    let store = defaults.evidence_store(&plugins, &parent).unwrap();
    let id = store.put(&record(), later).unwrap();
    assert!(parent.join("evidence.db").is_file());
    assert_eq!(store.get(&id, later).unwrap(), record());

    // Compiled-in file gate and a plugin's gate, from the same kind of section.
    for tag in ["file", "test-file-gate"] {
        let config = parse(&format!(
            "[gate]\ntype = \"{tag}\"\npath = \"{}\"\n",
            file.display()
        ));
        assert_eq!(
            config.gate(&plugins).unwrap().current(later),
            Ok(GateAnswer::Refuse {
                reason: "frozen".into()
            }),
            "{tag}"
        );
    }

    // A plugin's evidence store, configured by its section alone.
    let db = parent.join("plugin-evidence.db");
    let config = parse(&format!(
        "[evidence_store]\ntype = \"test-sqlite\"\npath = \"{}\"\n",
        db.display()
    ));
    let store = config
        .evidence_store(&plugins, Path::new("/unused"))
        .unwrap();
    assert_eq!(store.put(&record(), later).unwrap(), id);
    assert_eq!(
        store.find(&record().pins().clone(), later).unwrap(),
        vec![id]
    );

    // Bad sections are refused, naming the section and the rule.
    let relative = parse("[gate]\ntype = \"file\"\npath = \"gate.json\"\n");
    let error = relative.gate(&plugins).err().expect("a relative path");
    assert!(error.to_string().contains("absolute"), "{error}");
    let misspelt = parse("[gate]\ntype = \"file\"\npaht = \"/x\"\n");
    let error = misspelt.gate(&plugins).err().expect("an unknown field");
    assert!(error.to_string().contains("[gate]"), "{error}");
    let unknown = parse("[gate]\ntype = \"no-such-gate\"\n");
    let error = unknown.gate(&plugins).err().expect("an unknown tag");
    assert_eq!(error.code(), "unknown-tag");
    for known in [
        "file (compiled in)",
        "open (compiled in)",
        "test-file-gate (plugin test-backends",
    ] {
        assert!(error.to_string().contains(known), "{known}: {error}");
    }
    let unknown = parse("[evidence_store]\ntype = \"no-such-store\"\n");
    let error = unknown
        .evidence_store(&plugins, &parent)
        .err()
        .expect("an unknown tag");
    assert!(
        error.to_string().contains("sqlite (compiled in)"),
        "{error}"
    );
    assert!(error.to_string().contains("test-sqlite (plugin"), "{error}");
}

/// `sf integrate invoke --config` takes its gate from `[gate]`: a closed file gate, then the
/// same file through the plugin's gate, withholds; `--gate FILE` overrides the section.
#[test]
fn integrate_invoke_takes_its_gate_from_the_configuration() {
    let work = land_support::Work::new();
    let invoke = |config: &Path, prepared: &Path, gate: Option<&Path>| {
        let mut command = sf();
        command
            .current_dir(&work.dir)
            .args(["integrate", "invoke", "--json", "--config"])
            .arg(config)
            .args([
                "--identity",
                "identity.json",
                "--slice",
                "slice",
                "--prepared",
            ])
            .arg(prepared)
            .env("SF_PLUGIN_PATH", &built().test_plugins);
        if let Some(gate) = gate {
            command.arg("--gate").arg(gate);
        }
        run_json(&mut command)
    };

    let closed = work.dir.join("closed.json");
    std::fs::write(
        &closed,
        br#"{"proceed": false, "reason": "release freeze"}"#,
    )
    .unwrap();
    let open = work.dir.join("open.json");
    std::fs::write(&open, br#"{"proceed": true}"#).unwrap();
    let mut configs = Vec::new();
    for (occurrence, tag) in [(1, "file"), (2, "test-file-gate")] {
        let config = work.dir.join(format!("{tag}.toml"));
        std::fs::write(
            &config,
            format!(
                "[gate]\ntype = \"{tag}\"\npath = \"{}\"\n",
                closed.display()
            ),
        )
        .unwrap();
        let prepared = work.verified_intent("release", occurrence);
        let withheld = invoke(&config, &prepared, None);
        assert_eq!(withheld.code, Some(0), "{tag}: {:?}", withheld.json);
        assert_eq!(withheld.result()["invocation"], json!("withheld"), "{tag}");
        assert_eq!(
            withheld.result()["problem"],
            json!("withheld before submission: release freeze"),
            "{tag}"
        );
        assert_eq!(work.target(), work.initial());
        configs.push(config);
    }
    // --gate FILE overrides the configured (closed) gate.
    let moved = invoke(
        &configs[0],
        &work.verified_intent("release", 3),
        Some(&open),
    );
    assert_eq!(
        moved.result()["invocation"],
        json!("confirmed"),
        "{:?}",
        moved.json
    );
    assert_ne!(work.target(), work.initial());
}

/// A plugin below a directory that others may write (without the sticky bit) is refused
/// before it is opened, naming that directory: they could swap the plugin's directory. The
/// same layout under a sticky directory (like /tmp) loads.
#[test]
fn a_plugin_below_a_directory_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_dir, parent) = sf_tests::private_dir();
    let open = parent.join("open");
    let plugins = open.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::set_permissions(&plugins, std::fs::Permissions::from_mode(0o755)).unwrap();
    let library = plugins.join("libsf_test_backends_plugin.so");
    std::fs::copy(&built().backends, &library).unwrap();
    std::fs::copy(
        sf_host::plugin::manifest::manifest_path(&built().backends),
        sf_host::plugin::manifest::manifest_path(&library),
    )
    .unwrap();
    for file in [
        library.clone(),
        sf_host::plugin::manifest::manifest_path(&library),
    ] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let error = load(&library).expect_err("a directory above that others may write");
    assert_eq!(error.code(), "insecure-plugin", "{error}");
    assert!(
        error.to_string().contains(&open.display().to_string()),
        "{error}"
    );
    assert!(error.to_string().contains("sticky"), "{error}");

    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let plugin = load(&library).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(plugin.name(), "test-backends");
}
