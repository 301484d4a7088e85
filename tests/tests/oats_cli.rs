//! The `sf oats` command line (sf-oats's `cli::run`, which `sf oats` execs): every command,
//! text and `--json` envelopes, exit statuses, over the real sandbox.

mod oats_support;

use std::ffi::OsString;
use std::path::Path;

use oats_support::{Bench, launcher};
use serde_json::{Value, json};

/// Runs `sf oats <args>` with `state`; returns (status, stdout, stderr).
fn sf_oats(state: &Path, args: &[&str]) -> (u8, String, String) {
    launcher();
    let mut argv: Vec<OsString> = vec!["sf-oats".into(), "--state".into(), state.into()];
    argv.extend(args.iter().map(OsString::from));
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let status = sf_oats_cli::run(argv, &mut stdout, &mut stderr);
    (
        status,
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

fn envelope(state: &Path, args: &[&str]) -> (u8, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (status, stdout, _) = sf_oats(state, &all);
    let value: Value = serde_json::from_str(stdout.trim_end())
        .unwrap_or_else(|e| panic!("{e}: {stdout:?} for {args:?}"));
    assert_eq!(stdout.matches('\n').count(), 1, "one envelope: {stdout}");
    assert_eq!(value["schemaVersion"], 1);
    if args.first() == Some(&"run") {
        // A command run exits with the script's status, also when the run itself worked.
        assert!(value["ok"] == true || status != 0, "{value}");
    } else {
        assert_eq!(status == 0, value["ok"] == true, "{value}");
    }
    (status, value)
}

#[test]
fn the_command_line_registers_trusts_and_runs() {
    let bench = Bench::new();
    let state = bench.root.join("sf-state");
    let tool = bench.fixture("tool", "tool");
    let tool = tool.to_str().unwrap();

    let (status, stdout, _) = sf_oats(&state, &["register", tool]);
    assert_eq!(status, 0);
    assert!(
        stdout.contains("untrusted: review with `sf oats show acme.tool`"),
        "{stdout}"
    );
    let (_, listed) = envelope(&state, &["list"]);
    assert_eq!(listed["result"]["capabilities"][0]["trusted"], false);

    // Untrusted: nothing runs, the error names the trust command.
    let (status, value) = envelope(&state, &["run", "acme.tool", "echo"]);
    assert_eq!(status, 1);
    assert_eq!(value["error"]["code"], "E_CAPABILITY_BLOCKED");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sf oats trust acme.tool")
    );

    let (_, shown) = envelope(&state, &["show", "acme.tool"]);
    let integrity = shown["result"]["integrity"].as_str().unwrap().to_owned();
    assert_eq!(
        shown["result"]["surface"]["environment"],
        json!(["ACME_TOKEN", "ACME_REGION"])
    );
    let (status, value) = envelope(&state, &["trust", "acme.tool", "--integrity", "nope"]);
    assert_eq!(
        (status, value["error"]["code"].as_str()),
        (1, Some("integrity-drift"))
    );
    let (status, _, stderr) = sf_oats(&state, &["trust", "acme.tool", "--integrity", &integrity]);
    assert_eq!(status, 0);
    assert!(
        stderr.contains("approving the executable surface of acme.tool"),
        "{stderr}"
    );
    assert!(
        stderr.contains("ACME_TOKEN"),
        "the environment is disclosed: {stderr}"
    );

    // A command passes the script's output and status through.
    let (status, stdout, _) = sf_oats(&state, &["run", "acme.tool", "echo", "--", "x", "--y"]);
    assert_eq!(status, 0);
    let seen: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(seen["argv"], json!(["echo", "x", "--y"]));
    let (status, stdout, _) = sf_oats(&state, &["run", "acme.tool", "provider-fails"]);
    assert_eq!(status, 1);
    assert!(stdout.contains("E_ACME_BROKEN"));
    // With --json the status is the script's too (the envelope says the run itself worked).
    let (status, value) = envelope(&state, &["run", "acme.tool", "kernel"]);
    assert_eq!(status, 1, "--json exits as text mode does: {value}");
    assert_eq!(value["ok"], true, "{value}");
    assert_eq!(value["result"]["exitCode"], 1);
    let (status, _, _) = sf_oats(&state, &["run", "acme.tool", "kernel"]);
    assert_eq!(status, 1, "text mode: the script's status");

    // Operations: the receipt, and oats's codes.
    let (_, value) = envelope(
        &state,
        &[
            "operation",
            "acme.tool",
            "report",
            "--arg",
            "target=main",
            "--setting",
            "mode=fancy",
        ],
    );
    assert_eq!(
        value["result"]["result"],
        json!({"args": ["--target", "main"], "mode": "fancy", "operation": "report"})
    );
    let (status, value) = envelope(&state, &["operation", "acme.tool", "two"]);
    assert_eq!(
        (status, value["error"]["code"].as_str()),
        (1, Some("E_OPERATION_RESULT"))
    );
    // The error carries oats's details, as docs/oats.md promises.
    assert_eq!(
        value["error"]["details"]["unconfirmed"], true,
        "details of E_OPERATION_RESULT: {value}"
    );
    let (_, value) = envelope(&state, &["operation", "acme.tool", "report"]);
    assert_eq!(value["error"]["code"], "E_BAD_ARGS");

    // The gate.
    let binding = bench.root.join("binding.json");
    std::fs::write(&binding, r#"{"status":"ready"}"#).unwrap();
    let binding = binding.to_str().unwrap();
    let (status, stdout, _) = sf_oats(&state, &["gate", "acme.tool", "--binding", binding]);
    assert_eq!((status, stdout.as_str()), (0, "proceed\n"));
    std::fs::write(binding, r#"{"status":"unavailable","problems":["down"]}"#).unwrap();
    let (_, value) = envelope(&state, &["gate", "acme.tool", "--binding", binding]);
    assert_eq!(value["error"]["code"], "gate-refused");
    assert_eq!(
        value["error"]["message"],
        "acme.tool binding check: unavailable (down)"
    );

    // Usage errors are status 2, with a usage envelope under --json.
    let (status, stdout, _) = sf_oats(&state, &["--json", "frobnicate"]);
    assert_eq!(status, 2);
    assert!(stdout.contains(r#""code":"usage""#), "{stdout}");
}

#[test]
fn the_command_line_runs_hooks() {
    let bench = Bench::new();
    let state = bench.root.join("sf-state");
    let hooks = bench.fixture("hooks", "hooks");
    assert_eq!(sf_oats(&state, &["register", hooks.to_str().unwrap()]).0, 0);
    let home = bench.root.join("instance");
    let home = home.to_str().unwrap();
    // Untrusted required hook: refused before the home exists.
    let (_, value) = envelope(&state, &["hook", "spawn", "--home", home]);
    assert_eq!(value["error"]["code"], "E_REQUIRED_HOOK_UNTRUSTED");
    assert!(!Path::new(home).exists());
    assert_eq!(sf_oats(&state, &["trust", "acme.hooks"]).0, 0);

    let (_, value) = envelope(
        &state,
        &[
            "hook",
            "spawn",
            "--home",
            home,
            "--capability",
            "acme.hooks",
            "--setting",
            r#"acme.hooks:spawnEnv={"ACME_SESSION":"s-9"}"#,
        ],
    );
    assert_eq!(value["result"]["outcome"], "spawned", "{value}");
    assert_eq!(value["result"]["env"], json!({"ACME_SESSION": "s-9"}));
    let (status, stdout, _) = sf_oats(&state, &["hook", "retire", "--home", home]);
    assert_eq!(status, 0);
    assert!(stdout.starts_with("retired "), "{stdout}");
    assert!(!Path::new(home).exists());

    // A failing required spawn whose compensation fails: quarantined, then retried.
    let (status, value) = envelope(
        &state,
        &[
            "hook",
            "spawn",
            "--home",
            home,
            "--setting",
            "acme.hooks:spawn=fail",
            "--setting",
            "acme.hooks:retire=fail",
        ],
    );
    assert_eq!(status, 1);
    assert_eq!(value["error"]["code"], "E_REQUIRED_HOOK_FAILED");
    assert!(
        value["error"]["message"]
            .as_str()
            .unwrap()
            .contains("INCOMPLETE")
    );
    let (_, value) = envelope(
        &state,
        &[
            "hook",
            "retire",
            "--home",
            home,
            "--setting",
            "acme.hooks:retire=fail",
        ],
    );
    assert_eq!(value["error"]["code"], "rollback-incomplete");
    let (_, value) = envelope(&state, &["hook", "retire", "--home", home]);
    assert_eq!(value["result"]["outcome"], "cleared", "{value}");
    assert!(!Path::new(home).exists());
    let (_, value) = envelope(&state, &["hook", "launch", "--home", home]);
    assert_eq!(value["error"]["code"], "unsupported-hook");

    // A home that is not one: the refusal says what is wrong with it, not only the rule.
    let file = bench.root.join("a-file");
    std::fs::write(&file, "").unwrap();
    let link = bench.root.join("a-link");
    std::os::unix::fs::symlink(&bench.root, &link).unwrap();
    for (given, says) in [
        (home.to_owned(), "does not exist"),
        (file.display().to_string(), "is not a directory"),
        (link.display().to_string(), "is a symbolic link"),
    ] {
        let (status, value) = envelope(&state, &["hook", "retire", "--home", &given]);
        assert_eq!(status, 1);
        assert_eq!(value["error"]["code"], "home-unavailable", "{value}");
        let message = value["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&given) && message.contains(says),
            "{message}"
        );
    }
}

/// `sf oats` runs the `sf-oats` program beside `sf` in place of itself, after the loader's
/// file checks: a copy that its group may write is refused, naming the program and the rule.
#[test]
fn sf_forwards_to_a_checked_sf_oats() {
    use std::os::unix::fs::PermissionsExt as _;
    let built = sf_tests::plugins::built();
    let bench = Bench::new();
    let bin = bench.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (from, name) in [
        (&built.sf, "sf"),
        (&built.sf_oats, "sf-oats"),
        (&built.launcher, "sf-sandbox-launcher"),
    ] {
        std::fs::copy(from, bin.join(name)).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let state = bench.root.join("state");
    let run = || {
        let output = std::process::Command::new(bin.join("sf"))
            .env_remove("SF_PLUGIN_PATH")
            .arg("--json")
            .arg("oats")
            .arg("--state")
            .arg(&state)
            .arg("list")
            .output()
            .unwrap();
        let value: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)));
        assert_eq!(output.status.success(), value["ok"] == true, "{value}");
        value
    };
    let listed = run();
    assert_eq!(listed["ok"], true, "{listed}");
    assert_eq!(listed["result"], json!({"capabilities": []}), "{listed}");

    std::fs::set_permissions(bin.join("sf-oats"), std::fs::Permissions::from_mode(0o775)).unwrap();
    let refused = run();
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "insecure-plugin", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("sf-oats"), "{message}");
    assert!(message.contains("group or others may write"), "{message}");
}

/// The commands that only read create nothing: `list` and `show` with a state directory that
/// does not exist answer without making it.
#[test]
fn list_and_show_create_no_state() {
    let bench = Bench::new();
    let state = bench.root.join("never-made");
    let (status, listed) = envelope(&state, &["list"]);
    assert_eq!(status, 0);
    assert_eq!(listed["result"]["capabilities"], json!([]));
    let (status, shown) = envelope(&state, &["show", "acme.tool"]);
    assert_eq!(status, 1);
    assert_eq!(shown["error"]["code"], "unknown-capability");
    assert!(!state.exists(), "nothing was created");
    // Registering creates it (the control).
    let tool = bench.fixture("tool", "tool");
    assert_eq!(sf_oats(&state, &["register", tool.to_str().unwrap()]).0, 0);
    assert!(state.exists());
}

/// Registrations managed over time: untrust revokes (the next run is refused), upgrade
/// replaces the registration with a new version from another directory (new integrity,
/// untrusted until reviewed again; another capability's directory is refused, and so is an
/// unknown id), unregister removes it and leaves its directory alone. Each leaves the
/// registry whole.
#[test]
fn registrations_are_untrusted_upgraded_and_unregistered() {
    let bench = Bench::new();
    let state = bench.root.join("sf-state");
    let tool = bench.fixture("tool", "tool");
    sf_oats(&state, &["register", tool.to_str().unwrap()]);
    let (status, _) = envelope(&state, &["trust", "acme.tool"]);
    assert_eq!(status, 0);
    assert_eq!(sf_oats(&state, &["run", "acme.tool", "echo"]).0, 0);

    let (status, untrusted) = envelope(&state, &["untrust", "acme.tool"]);
    assert_eq!(
        (status, &untrusted["result"]["trusted"]),
        (0, &json!(false))
    );
    let (status, refused) = envelope(&state, &["run", "acme.tool", "echo"]);
    assert_eq!(status, 1, "an untrusted capability runs nothing: {refused}");
    assert_eq!(refused["ok"], false, "{refused}");

    // Version 2.0.0, in another directory.
    let newer = bench.fixture("tool", "tool-2");
    let manifest = newer.join("oats.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"1.0.0\"", "\"2.0.0\"")).unwrap();
    let (_, before) = envelope(&state, &["show", "acme.tool"]);
    let (status, upgraded) = envelope(&state, &["upgrade", "acme.tool", newer.to_str().unwrap()]);
    assert_eq!(status, 0, "{upgraded}");
    let upgraded = &upgraded["result"];
    assert_eq!(upgraded["version"], "2.0.0");
    assert_eq!(upgraded["trusted"], false, "trust is never carried over");
    assert_ne!(upgraded["integrity"], before["result"]["integrity"]);
    assert_eq!(
        upgraded["path"],
        json!(newer.canonicalize().unwrap().display().to_string())
    );
    assert_eq!(sf_oats(&state, &["run", "acme.tool", "echo"]).0, 1);
    envelope(&state, &["trust", "acme.tool"]);
    assert_eq!(sf_oats(&state, &["run", "acme.tool", "echo"]).0, 0);

    // Another capability's directory, or an unknown id: refused, the registry unchanged.
    let other = bench.fixture("okf", "okf");
    let (status, refused) = envelope(&state, &["upgrade", "acme.tool", other.to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not acme.tool"),
        "{refused}"
    );
    let (_, unknown) = envelope(
        &state,
        &["upgrade", "acme.nothing", newer.to_str().unwrap()],
    );
    assert_eq!(unknown["error"]["code"], "unknown-capability", "{unknown}");
    let (_, listed) = envelope(&state, &["list"]);
    assert_eq!(
        listed["result"]["capabilities"].as_array().unwrap().len(),
        1
    );
    assert_eq!(listed["result"]["capabilities"][0]["version"], "2.0.0");

    let (status, gone) = envelope(&state, &["unregister", "acme.tool"]);
    assert_eq!((status, &gone["result"]["id"]), (0, &json!("acme.tool")));
    let (_, listed) = envelope(&state, &["list"]);
    assert_eq!(listed["result"]["capabilities"], json!([]));
    assert!(
        newer.join("oats.json").is_file(),
        "the directory is left alone"
    );
    let (_, again) = envelope(&state, &["unregister", "acme.tool"]);
    assert_eq!(again["error"]["code"], "unknown-capability", "{again}");
    // And the directory can be registered again.
    assert_eq!(sf_oats(&state, &["register", tool.to_str().unwrap()]).0, 0);
}

/// Capabilities are plugins in sf's sense: `sf plugins list` shows each registered one with its
/// version, integrity, trust state and the roles it can fill, and `sf plugins check DIR`
/// checks a capability directory as registration would, writing nothing.
#[test]
fn sf_plugins_lists_and_checks_capabilities() {
    let built = sf_tests::plugins::built();
    let bench = Bench::new();
    let state = bench.root.join("sf-state");
    let tool = bench.fixture("tool", "tool");
    let sf = |args: &[&str]| {
        let output = std::process::Command::new(&built.sf)
            .env_remove("SF_PLUGIN_PATH")
            .env_remove("SF_CONFIG")
            .env("SF_STATE_DIR", &state)
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        let value: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)));
        assert_eq!(output.status.success(), value["ok"] == true, "{value}");
        value
    };
    let listed = sf(&["plugins", "list"]);
    assert_eq!(listed["result"]["capabilities"], json!([]), "{listed}");

    sf_oats(&state, &["register", tool.to_str().unwrap()]);
    let listed = sf(&["plugins", "list"]);
    let capability = &listed["result"]["capabilities"][0];
    assert_eq!(capability["id"], "acme.tool", "{listed}");
    assert_eq!(capability["version"], "1.0.0");
    assert_eq!(capability["trusted"], false);
    assert!(
        capability["integrity"]
            .as_str()
            .unwrap()
            .contains(":sha256-"),
        "{capability}"
    );
    let roles = capability["roles"].as_array().unwrap();
    for role in ["gate", "check", "operations", "commands"] {
        assert!(roles.contains(&json!(role)), "{role}: {capability}");
    }
    assert_eq!(capability["trust"], "untrusted", "{capability}");
    sf_oats(&state, &["trust", "acme.tool"]);
    assert_eq!(
        sf(&["plugins", "list"])["result"]["capabilities"][0]["trusted"],
        true
    );
    // Instructions only: nothing to approve, and the listing says so rather than untrusted.
    let notes = bench.fixture("instructions", "notes");
    sf_oats(&state, &["register", notes.to_str().unwrap()]);
    let listed = sf(&["plugins", "list"]);
    let notes = listed["result"]["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|capability| capability["id"] == "acme.notes")
        .unwrap_or_else(|| panic!("acme.notes is listed: {listed}"))
        .clone();
    assert_eq!(notes["trust"], "needs no approval", "{notes}");
    let (_, stdout, _) = sf_oats(&state, &["list"]);
    assert!(
        stdout.contains("acme.notes 0.1.0 needs no approval"),
        "{stdout}"
    );

    let checked = sf(&["plugins", "check", tool.to_str().unwrap()]);
    assert_eq!(checked["result"]["id"], "acme.tool", "{checked}");
    assert_eq!(checked["result"]["integrity"], capability["integrity"]);
    assert_eq!(checked["result"]["executable"], true);
    // A directory whose manifest is broken is refused with oats's code, nothing registered.
    let broken = bench.fixture("tool", "broken");
    std::fs::write(broken.join("oats.json"), b"{\"capability\": 7}").unwrap();
    let refused = sf(&["plugins", "check", broken.to_str().unwrap()]);
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid-manifest", "{refused}");
    assert_eq!(
        sf(&["plugins", "list"])["result"]["capabilities"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// A capability's declared environment comes from the operator's file, never from sf-oats's
/// own environment: an exported ACME_TOKEN does not reach a run; `--environment FILE` (private)
/// gives the declared names only; a file others can read is refused, naming the fix.
#[test]
fn declared_environment_comes_from_the_operators_file_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let built = sf_tests::plugins::built();
    let bench = Bench::new();
    let state = bench.root.join("sf-state");
    let tool = bench.fixture("tool", "tool");
    sf_oats(&state, &["register", tool.to_str().unwrap()]);
    sf_oats(&state, &["trust", "acme.tool"]);
    let echo = |extra: &[&str]| {
        let output = std::process::Command::new(&built.sf_oats)
            .env("ACME_TOKEN", "exported-for-something-else")
            .env("ACME_REGION", "exported-too")
            .arg("--json")
            .arg("--state")
            .arg(&state)
            .args(extra)
            .args(["run", "acme.tool", "echo"])
            .output()
            .unwrap();
        let envelope: Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code(), envelope)
    };
    let (status, ran) = echo(&[]);
    assert_eq!(status, Some(0), "{ran}");
    let seen: Value = serde_json::from_str(ran["result"]["stdout"].as_str().unwrap()).unwrap();
    assert!(seen["env"].get("ACME_TOKEN").is_none(), "{seen}");
    assert!(seen["env"].get("ACME_REGION").is_none(), "{seen}");

    let file = bench.root.join("acme.env.json");
    std::fs::write(
        &file,
        r#"{"ACME_TOKEN": "from-the-operator", "OTHER_TOKEN": "not declared"}"#,
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (status, ran) = echo(&["--environment", file.to_str().unwrap()]);
    assert_eq!(status, Some(0), "{ran}");
    let seen: Value = serde_json::from_str(ran["result"]["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(seen["env"]["ACME_TOKEN"], "from-the-operator", "{seen}");
    assert!(
        seen["env"].get("OTHER_TOKEN").is_none(),
        "undeclared: {seen}"
    );
    assert!(
        seen["env"].get("ACME_REGION").is_none(),
        "not supplied: {seen}"
    );

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (status, refused) = echo(&["--environment", file.to_str().unwrap()]);
    assert_eq!(status, Some(1), "{refused}");
    assert_eq!(refused["error"]["code"], "invalid-environment", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("chmod 600"),
        "{refused}"
    );
}
