//! Hostile plugins: every refusal is a typed error naming the plugin, and the host process
//! survives every case. Each case runs in a child process (the `sf` binary, or this test
//! executable re-run in a child mode), so a case that killed its host would fail its test
//! instead of the whole run; the parent checks that the child ended normally and reported.
//!
//! The hostile library is the `sf-test-hostile-plugin` crate: see its documentation for the
//! switches (`SF_HOSTILE_ENTRY`, `SF_HOSTILE_REPLY`, the `panicking` tag).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sf_host::contracts::{
    EncodedObject, ObjectStoreExt, ObjectStoreFactory, RefName, RefUpdate, StoreRoot,
};
use sf_host::git_object::{ObjectId, ObjectKind};
use sf_host::plugin::loader::CallReply;
use sf_host::plugin::object_store_protocol as wire;
use sf_host::plugin::{PluginError, PluginFence, PluginObjectStoreFactory, load};
use sf_tests::plugins::{built, run_json, sf};

/// Set in a child: which scenario to run.
const CHILD: &str = "SF_HOSTILE_TEST_CHILD";
/// Set in a child: the hostile library.
const LIBRARY: &str = "SF_HOSTILE_TEST_LIBRARY";

/// Runs `scenario` in a child process (this executable, running only `child`), and returns
/// its report. Panics unless the child exited normally and reported.
fn in_child(scenario: &str, env: &[(&str, &str)]) -> BTreeMap<String, Value> {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD, scenario)
        .env(LIBRARY, &built().hostile)
        .env_remove("SF_HOSTILE_ENTRY")
        .env_remove("SF_HOSTILE_REPLY")
        .env_remove("SF_HOSTILE_REPLY_SCOPE")
        .envs(env.iter().copied())
        .output()
        .expect("running the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the child running {scenario} did not survive: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let report = stdout
        .lines()
        .find_map(|line| line.split_once("REPORT ").map(|(_, report)| report))
        .unwrap_or_else(|| panic!("no report from {scenario}:\n{stdout}\n{stderr}"));
    serde_json::from_str(report).expect("a JSON report")
}

/// The child mode: runs the scenario named by `SF_HOSTILE_TEST_CHILD` and prints its report.
/// In a normal test run the variable is unset and this test does nothing.
#[test]
fn child() {
    let Ok(scenario) = std::env::var(CHILD) else {
        return;
    };
    let library = PathBuf::from(std::env::var_os(LIBRARY).expect("the hostile library"));
    let report = match scenario.as_str() {
        "panics" => panics(&library),
        "garbage" => garbage(&library),
        "contract" => contracts(&library),
        "fence" => fence(&library),
        "old-minor-reads" => old_minor_reads(&library),
        other => panic!("no scenario {other}"),
    };
    println!("\nREPORT {}", Value::Object(report.into_iter().collect()));
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

fn config(panic_in: &str) -> serde_json::Map<String, Value> {
    let mut config = serde_json::Map::new();
    config.insert("panic_in".into(), Value::from(panic_in));
    config
}

fn error_entry<T: std::fmt::Debug>(result: Result<T, impl std::fmt::Display + HasCode>) -> Value {
    match result {
        Ok(value) => json!({"ok": format!("{value:?}")}),
        Err(error) => json!({"code": error.code(), "message": error.to_string()}),
    }
}

trait HasCode {
    fn code(&self) -> &'static str;
}

impl HasCode for PluginError {
    fn code(&self) -> &'static str {
        PluginError::code(self)
    }
}

impl HasCode for sf_host::contracts::ObjectStoreError {
    fn code(&self) -> &'static str {
        sf_host::contracts::ObjectStoreError::code(self)
    }
}

impl HasCode for sf_host::contracts::FenceError {
    fn code(&self) -> &'static str {
        sf_host::contracts::FenceError::code(self)
    }
}

fn update_entry(result: Result<RefUpdate, sf_host::contracts::ObjectStoreError>) -> Value {
    match result {
        Ok(RefUpdate::Unknown { reason }) => json!({"unknown": reason}),
        other => json!({"other": format!("{other:?}")}),
    }
}

/// Calls every method of the contract once, through the adapters, with a fresh store from
/// `factory` (which must create one), and reports each outcome by method name.
fn every_store_method(factory: &dyn ObjectStoreFactory, report: &mut BTreeMap<String, Value>) {
    let store = factory
        .create(Path::new("/hostile/root"), deadline())
        .expect("a store to call");
    let name = RefName::parse("refs/heads/main").unwrap();
    let id = ObjectId::from_bytes([1; 20]);
    report.insert("mark".into(), error_entry(store.mark(b"m", deadline())));
    report.insert(
        "write_objects".into(),
        error_entry(store.write_objects(&[], deadline())),
    );
    report.insert(
        "read_objects".into(),
        error_entry(store.read_objects(&[id], 1 << 20, deadline())),
    );
    report.insert(
        "read_ref".into(),
        error_entry(store.read_ref(&name, deadline())),
    );
    report.insert(
        "list_refs".into(),
        error_entry(store.list_refs("refs/", deadline())),
    );
    report.insert(
        "create_ref".into(),
        update_entry(store.create_ref(&name, &id, deadline())),
    );
    report.insert(
        "compare_and_swap_ref".into(),
        update_entry(store.compare_and_swap_ref(&name, &id, &id, deadline())),
    );
    // Its destructor panics too: drop_instance catches it and sf warns and carries on.
    drop(store);
}

fn panics(library: &Path) -> BTreeMap<String, Value> {
    let plugin = load(library).expect("the hostile library loads");
    let mut report = BTreeMap::new();
    report.insert(
        "instantiate".into(),
        error_entry(PluginObjectStoreFactory::new(
            &plugin,
            "panicking",
            &config("instantiate"),
        )),
    );
    let factory = PluginObjectStoreFactory::new(&plugin, "panicking", &config("factory")).unwrap();
    report.insert(
        "create".into(),
        error_entry(
            factory
                .create(Path::new("/hostile/a"), deadline())
                .map(|store| store.root().clone()),
        ),
    );
    let root = StoreRoot {
        path: "/hostile/a".into(),
        dev: 0,
        ino: 1,
    };
    report.insert(
        "open".into(),
        error_entry(
            factory
                .open(&root, b"m", deadline())
                .map(|store| store.root().clone()),
        ),
    );
    // The raw call keeps the typed error.
    let raw = plugin
        .instantiate("object-store", "panicking", &config("factory"))
        .unwrap();
    report.insert(
        "raw create".into(),
        error_entry(raw.call(
            "create",
            &wire::encode_create(Path::new("/x"), deadline()),
            |_| (),
        )),
    );
    let factory = PluginObjectStoreFactory::new(&plugin, "panicking", &config("store")).unwrap();
    every_store_method(&factory, &mut report);
    report
}

fn garbage(library: &Path) -> BTreeMap<String, Value> {
    let plugin = load(library).expect("the hostile library loads");
    let mut report = BTreeMap::new();
    let factory = PluginObjectStoreFactory::new(&plugin, "panicking", &config("store")).unwrap();
    if std::env::var("SF_HOSTILE_REPLY_SCOPE").as_deref() == Ok("store") {
        every_store_method(&factory, &mut report);
    } else {
        report.insert(
            "create".into(),
            error_entry(
                factory
                    .create(Path::new("/hostile/b"), deadline())
                    .map(|store| store.root().clone()),
            ),
        );
        let raw = plugin
            .instantiate("object-store", "panicking", &config("store"))
            .unwrap();
        // The raw call hands the reply over as it came: a bad status or buffer is a typed
        // error at once, garbage bytes fail to decode.
        let raw = raw.call(
            "create",
            &wire::encode_create(Path::new("/hostile/c"), deadline()),
            |reply| match reply {
                CallReply::Answer { bytes, .. } => wire::decode_root(bytes).is_ok(),
                CallReply::ContractError { .. } => false,
            },
        );
        let code = match raw {
            Err(error) => error.code(),
            Ok(false) => "undecodable",
            Ok(true) => "decoded",
        };
        report.insert("raw create".into(), json!({ "code": code }));
    }
    report
}

fn contracts(library: &Path) -> BTreeMap<String, Value> {
    let plugin = load(library).expect("the hostile library loads");
    let mut report = BTreeMap::new();
    report.insert(
        "unknown contract".into(),
        error_entry(
            plugin
                .instantiate("executor", "panicking", &serde_json::Map::new())
                .map(|_| ()),
        ),
    );
    report.insert(
        "unknown tag".into(),
        error_entry(
            plugin
                .instantiate("object-store", "nothing", &serde_json::Map::new())
                .map(|_| ()),
        ),
    );
    report.insert(
        "bad config".into(),
        error_entry(
            plugin
                .instantiate("object-store", "panicking", &config("elsewhere"))
                .map(|_| ()),
        ),
    );
    report
}

/// The `panicking` fence: made, then asked; under `SF_HOSTILE_ENTRY=abi-minor-2`, refused
/// before it is made.
fn fence(library: &Path) -> BTreeMap<String, Value> {
    use sf_host::contracts::AttemptFence as _;
    let plugin = load(library).expect("the hostile library loads");
    let mut report = BTreeMap::new();
    match PluginFence::new(&plugin, "panicking", &serde_json::Map::new()) {
        Err(error) => {
            report.insert("instantiate".into(), error_entry::<()>(Err(error)));
        }
        Ok(fence) => {
            let candidate = sf_host::canonical::Digest::of(b"candidate");
            report.insert("instantiate".into(), json!({"ok": "made"}));
            report.insert(
                "acquire".into(),
                error_entry(
                    fence
                        .acquire("product", &candidate)
                        .map(|hold| hold.attempt().clone()),
                ),
            );
            report.insert(
                "last_epoch".into(),
                error_entry(fence.last_epoch("product")),
            );
            report.insert(
                "bad id".into(),
                error_entry(fence.acquire("bad id", &candidate).map(|_| ())),
            );
        }
    }
    report
}

/// Reads under a read scope from the store of a plugin of ABI 1.2 (run with
/// `SF_HOSTILE_ENTRY=abi-minor-2`, which aborts on a read-scope method): the host must serve
/// the reads without sending the scope.
fn old_minor_reads(library: &Path) -> BTreeMap<String, Value> {
    let plugin = load(library).unwrap();
    let (_dir, parent) = sf_tests::private_dir();
    let factory =
        PluginObjectStoreFactory::new(&plugin, "memory-root", &serde_json::Map::new()).unwrap();
    let store = factory.create(&parent.join("root"), deadline()).unwrap();
    let blob = EncodedObject::new(ObjectKind::Blob, b"read me\n".to_vec());
    store
        .write_objects(std::slice::from_ref(&blob), deadline())
        .unwrap();
    let read = {
        let _scope = store.read_scope();
        store.read_verified(&[blob.id], 4096, deadline()).unwrap()
    };
    let mut report = BTreeMap::new();
    report.insert("abi".into(), json!(plugin.abi_minor()));
    report.insert(
        "read".into(),
        json!(read[0].as_ref().map(|o| o.body.clone())),
    );
    report
}

#[test]
fn a_store_plugin_older_than_abi_1_10_is_never_sent_a_read_scope() {
    let report = in_child("old-minor-reads", &[("SF_HOSTILE_ENTRY", "abi-minor-2")]);
    assert_eq!(report["abi"], json!(2));
    assert_eq!(report["read"], json!(b"read me\n".to_vec()));
}

fn code_of(report: &BTreeMap<String, Value>, key: &str) -> String {
    report[key]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{key}: no error code in {}", report[key]))
        .to_owned()
}

fn message_of(report: &BTreeMap<String, Value>, key: &str) -> String {
    report[key]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_plugin_that_panics_in_every_method_is_reported_and_the_host_survives() {
    let report = in_child("panics", &[]);
    assert_eq!(code_of(&report, "instantiate"), "plugin-panicked");
    assert!(message_of(&report, "instantiate").contains("panic in instantiate"));
    assert_eq!(code_of(&report, "raw create"), "plugin-panicked");
    for method in [
        "create",
        "open",
        "mark",
        "write_objects",
        "read_objects",
        "read_ref",
        "list_refs",
    ] {
        assert_eq!(code_of(&report, method), "unavailable", "{method}");
        let message = message_of(&report, method);
        assert!(
            message.contains("plugin hostile panicked in") && message.contains(method),
            "{method}: {message}"
        );
    }
    // A ref write that panicked may have happened: its outcome is unknown, never an error.
    for method in ["create_ref", "compare_and_swap_ref"] {
        let reason = report[method]["unknown"]
            .as_str()
            .unwrap_or_else(|| panic!("{method}: {}", report[method]));
        assert!(reason.contains("panicked"), "{method}: {reason}");
    }
}

#[test]
fn a_fence_plugin_that_panics_is_unavailable_and_one_older_than_minor_9_is_refused() {
    let report = in_child("fence", &[]);
    assert_eq!(report["instantiate"]["ok"], "made", "{report:?}");
    for method in ["acquire", "last_epoch"] {
        assert_eq!(code_of(&report, method), "unavailable", "{method}");
        assert!(
            message_of(&report, method).contains("plugin hostile panicked in"),
            "{method}: {report:?}"
        );
    }
    // A bad Product id never reaches the plugin.
    assert_eq!(code_of(&report, "bad id"), "invalid-input");

    let report = in_child("fence", &[("SF_HOSTILE_ENTRY", "abi-minor-2")]);
    assert_eq!(
        code_of(&report, "instantiate"),
        "unknown-contract",
        "{report:?}"
    );
    let message = message_of(&report, "instantiate");
    assert!(
        message.contains("ABI 1.2") && message.contains("fence contract came with ABI 1.9"),
        "{message}"
    );
}

#[test]
fn a_plugin_that_answers_garbage_is_reported_and_the_host_survives() {
    for mode in [
        "garbage",
        "bad-header",
        "wrong-shape",
        "bad-section",
        "bad-status",
        "null-reply",
    ] {
        let report = in_child("garbage", &[("SF_HOSTILE_REPLY", mode)]);
        assert_eq!(code_of(&report, "create"), "corrupt", "{mode}");
        assert!(
            message_of(&report, "create")
                .contains("plugin hostile answered create with a malformed message"),
            "{mode}: {}",
            message_of(&report, "create")
        );
        let raw = code_of(&report, "raw create");
        assert!(
            raw == "malformed-message" || raw == "undecodable",
            "{mode}: {raw}"
        );
    }
    let report = in_child(
        "garbage",
        &[
            ("SF_HOSTILE_REPLY", "garbage"),
            ("SF_HOSTILE_REPLY_SCOPE", "store"),
        ],
    );
    for method in [
        "mark",
        "write_objects",
        "read_objects",
        "read_ref",
        "list_refs",
    ] {
        assert_eq!(code_of(&report, method), "corrupt", "{method}");
    }
    for method in ["create_ref", "compare_and_swap_ref"] {
        assert!(
            report[method]["unknown"]
                .as_str()
                .is_some_and(|r| r.contains("malformed")),
            "{method}: {}",
            report[method]
        );
    }
}

#[test]
fn unknown_contracts_tags_and_configurations_are_refused() {
    let report = in_child("contract", &[]);
    assert_eq!(code_of(&report, "unknown contract"), "unknown-contract");
    assert!(message_of(&report, "unknown contract").contains("plugin hostile"));
    assert_eq!(code_of(&report, "unknown tag"), "unknown-tag");
    assert!(message_of(&report, "unknown tag").contains("panicking"));
    assert_eq!(code_of(&report, "bad config"), "plugin-refused");
    assert!(message_of(&report, "bad config").contains("elsewhere"));
}

/// `sf plugins check` on the hostile library with `SF_HOSTILE_ENTRY=mode`.
fn check(library: &Path, entry: Option<&str>) -> sf_tests::plugins::Envelope {
    let mut command = sf();
    command.args(["plugins", "check", "--json"]).arg(library);
    if let Some(mode) = entry {
        command.env("SF_HOSTILE_ENTRY", mode);
    }
    run_json(&mut command)
}

#[test]
fn entry_tables_are_checked_before_the_first_call() {
    let library = &built().hostile;
    for (mode, code, needle) in [
        ("wrong-magic", "wrong-magic", "magic number"),
        ("abi-major", "abi-mismatch", "built for ABI 2.0"),
        ("null-table", "malformed-table", "null table"),
        (
            "null-function",
            "malformed-table",
            "function pointer is null",
        ),
    ] {
        let envelope = check(library, Some(mode));
        assert_eq!(envelope.error_code(), code, "{mode}");
        assert!(
            envelope.error_message().contains(needle),
            "{mode}: {}",
            envelope.error_message()
        );
        assert!(
            envelope.error_message().contains("plugin hostile"),
            "{mode}"
        );
    }
    // A newer minor version is compatible.
    let newer = check(library, Some("abi-minor"));
    assert_eq!(
        newer.result()["abi"],
        format!(
            "{}.{}",
            sf_sdk::export::ABI_MAJOR,
            sf_sdk::export::ABI_MINOR + 1
        )
    );
    assert_eq!(check(library, None).result()["name"], "hostile");
}

/// A private directory holding a copy of the hostile library and `manifest` beside it.
fn copied(manifest: Option<&str>, with_library: bool) -> (tempfile::TempDir, PathBuf) {
    let (dir, path) = sf_tests::private_dir();
    let library = path.join("libhostile_copy.so");
    if with_library {
        std::fs::copy(&built().hostile, &library).unwrap();
    }
    if let Some(manifest) = manifest {
        std::fs::write(path.join("libhostile_copy.sf-plugin.json"), manifest).unwrap();
    }
    (dir, library)
}

fn manifest_text() -> String {
    std::fs::read_to_string(sf_host::plugin::manifest::manifest_path(&built().hostile)).unwrap()
}

#[test]
fn manifest_files_are_checked_against_the_library() {
    let real = manifest_text();
    let (_dir, library) = copied(Some(&real.replace("0.1.0", "9.9.9")), true);
    let envelope = check(&library, None);
    assert_eq!(envelope.error_code(), "manifest-mismatch");
    assert!(
        envelope.error_message().contains("9.9.9"),
        "{}",
        envelope.error_message()
    );

    let (_dir, library) = copied(Some(&real.replace("\"abi\":1", "\"abi\":2")), true);
    let envelope = check(&library, None);
    assert_eq!(envelope.error_code(), "abi-mismatch");

    let (_dir, library) = copied(None, true);
    assert_eq!(check(&library, None).error_code(), "missing-manifest");

    let (_dir, library) = copied(Some(&real), false);
    assert_eq!(check(&library, None).error_code(), "missing-library");

    let (_dir, library) = copied(Some("{\"schema\":\"sf-plugin/1\""), true);
    assert_eq!(check(&library, None).error_code(), "invalid-manifest");

    let (dir, library) = copied(Some(&real), true);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o757)).unwrap();
    assert_eq!(check(&library, None).error_code(), "insecure-plugin");
    drop(dir);

    // The byte-identical copy passes.
    let (_dir, library) = copied(Some(&real), true);
    assert_eq!(check(&library, None).result()["name"], "hostile");
}

#[test]
fn sf_survives_a_hostile_backend_and_says_why() {
    let (_dir, root) = sf_tests::private_dir();
    let source = root.join("source");
    std::fs::create_dir(&source).unwrap();
    std::fs::write(source.join("a.txt"), "a\n").unwrap();
    let config = root.join("sf.toml");
    let create = |panic_in: &str, reply: Option<&str>| {
        std::fs::write(
            &config,
            format!("[object_store]\ntype = \"panicking\"\npanic_in = \"{panic_in}\"\n"),
        )
        .unwrap();
        let mut command = sf();
        command
            .args(["repo", "create", "--json", "--product", "p", "--target"])
            .args(["refs/heads/main", "--path"])
            .arg(root.join("repo"))
            .arg("--from")
            .arg(&source)
            .arg("--config")
            .arg(&config)
            .env("SF_PLUGIN_PATH", &built().test_plugins);
        if let Some(mode) = reply {
            command.env("SF_HOSTILE_REPLY", mode);
        }
        run_json(&mut command)
    };
    let panicked = create("store", None);
    assert_eq!(panicked.error_code(), "unavailable");
    assert!(
        panicked
            .error_message()
            .contains("plugin hostile panicked in write_objects"),
        "{}",
        panicked.error_message()
    );
    let garbage = create("store", Some("garbage"));
    assert_eq!(garbage.error_code(), "corrupt");
    assert!(garbage.error_message().contains("malformed message"));
    let instantiate = create("instantiate", None);
    assert_eq!(instantiate.error_code(), "plugin-panicked");
    assert!(!root.join("repo").exists(), "nothing was written");
}
