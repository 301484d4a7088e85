//! `sf env add`, `sf env show` and `sf env list` through the built `sf`, with the store that
//! `[environments] store` names: text and `--json` output, replays, a name never re-pointed,
//! a stored file changed from outside, and the refusals (a bad name, an unknown name or
//! digest, a relative directory, a relative or unknown store setting, no `HOME` to default
//! from), each creating nothing. As root, with no store set, the store is
//! `/var/lib/sf/environments` (not below root's home, which a run's reserved user cannot
//! pass), and an add there is not refused as unreachable.

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use sf_tests::plugins::{run_json, sf};
use sf_tests::{DEFAULT_ENVIRONMENT_STORE_AS_ROOT, default_environment_store_lock, private_dir};

/// A private directory with an `sf.toml` naming `envs/` as the store, and a small tree to add.
struct Work {
    _dir: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
    store: PathBuf,
    tree: PathBuf,
}

impl Work {
    fn new() -> Self {
        let (dir, root) = private_dir();
        // Others may pass (not read): as root, runs read the store as a reserved user.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711)).unwrap();
        let store = root.join("envs");
        let config = root.join("sf.toml");
        std::fs::write(
            &config,
            format!("[environments]\nstore = \"{}\"\n", store.display()),
        )
        .unwrap();
        let tree = root.join("tools");
        std::fs::create_dir_all(tree.join("bin")).unwrap();
        std::fs::write(tree.join("bin/run"), "#!/bin/sh\necho run\n").unwrap();
        std::fs::set_permissions(tree.join("bin/run"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(tree.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        symlink("/usr/bin/python3", tree.join("bin/python3")).unwrap();
        std::fs::create_dir(tree.join("include")).unwrap();
        Self {
            _dir: dir,
            root,
            config,
            store,
            tree,
        }
    }

    /// `sf --config sf.toml env ARGS…`.
    fn env(&self, args: &[&str]) -> Command {
        let mut command = sf();
        command
            .arg("--config")
            .arg(&self.config)
            .arg("env")
            .args(args);
        command
    }

    /// `sf env add NAME <tree>`, with `extra` arguments.
    fn add(&self, name: &str, extra: &[&str]) -> Command {
        let mut command = self.env(&["add", name]);
        command.arg(&self.tree).args(extra);
        command
    }
}

/// Runs `command` without `--json`, expecting success, and returns its stdout.
fn text(command: &mut Command) -> String {
    let output = command.output().expect("running sf");
    assert!(
        output.status.success(),
        "{:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs `command` without `--json`, expecting failure, and returns its stderr.
fn refused_text(command: &mut Command) -> String {
    let output = command.output().expect("running sf");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "nothing on stdout");
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn add_show_and_list_print_text_and_json() {
    let work = Work::new();
    // Nothing added yet: an empty list, and no store created by a command that reads.
    let listed = run_json(&mut work.env(&["list", "--json"]));
    assert_eq!(
        *listed.result(),
        json!({"store": work.store.to_str().unwrap(), "environments": []})
    );
    assert!(text(&mut work.env(&["list"])).starts_with("no environments in "));
    assert!(!work.store.exists());

    let added = run_json(&mut work.add("tools", &["--json"]));
    let result = added.result().clone();
    let digest = result["digest"].as_str().unwrap().to_owned();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    // bin, bin/python3, bin/run, include, pyvenv.cfg; the two files' bytes.
    assert_eq!(
        result,
        json!({"name": "tools", "digest": digest, "at": work.tree.to_str().unwrap(),
               "files": 5, "bytes": 35})
    );
    let hex = digest.strip_prefix("sha256:").unwrap();
    let stored = work.store.join("objects").join(hex).join("tree");
    assert_eq!(
        std::fs::read_link(stored.join("bin/python3")).unwrap(),
        Path::new("/usr/bin/python3")
    );

    // A replay, in text.
    let printed = text(&mut work.add("tools", &[]));
    assert_eq!(
        printed,
        format!(
            "name    tools\ndigest  {digest}\nat      {}\nfiles   5\nbytes   35\n",
            work.tree.display()
        )
    );
    assert_eq!(text(&mut work.env(&["show", "tools"])), printed);
    assert_eq!(
        run_json(&mut work.env(&["show", "tools", "--json"])).result(),
        &result
    );
    // By digest: verified the same way, reached by no name.
    let by_digest = run_json(&mut work.env(&["show", &digest, "--json"]));
    assert_eq!(by_digest.result()["name"], serde_json::Value::Null);
    assert_eq!(by_digest.result()["at"], result["at"]);
    assert!(!text(&mut work.env(&["show", &digest])).contains("name"));

    run_json(&mut work.add("a-first", &["--json"])).result();
    let listed = run_json(&mut work.env(&["list", "--json"]));
    assert_eq!(
        listed.result()["environments"],
        json!([{"name": "a-first", "digest": digest}, {"name": "tools", "digest": digest}])
    );
    assert_eq!(
        text(&mut work.env(&["list"])),
        format!("a-first  {digest}\ntools    {digest}\n")
    );
}

#[test]
fn a_name_is_never_re_pointed_and_a_changed_store_is_corrupt() {
    let work = Work::new();
    let first = run_json(&mut work.add("tools", &["--json"]));
    let digest = first.result()["digest"].as_str().unwrap().to_owned();
    std::fs::write(work.tree.join("extra.txt"), "more\n").unwrap();
    let refused = run_json(&mut work.add("tools", &["--json"]));
    assert_eq!(refused.error_code(), "conflict");
    assert!(refused.error_message().contains(&digest), "{refused:?}");
    assert!(refused.error_message().contains("new name"), "{refused:?}");
    let stderr = refused_text(&mut work.add("tools", &[]));
    assert!(stderr.starts_with("sf: error (conflict): "), "{stderr}");

    // A byte changed from outside: show says so, and leaves it as it is.
    let hex = digest.strip_prefix("sha256:").unwrap();
    let file = work.store.join("objects").join(hex).join("tree/pyvenv.cfg");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&file, "home = /elsewhere\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    for shown in [
        &["show", "tools", "--json"][..],
        &["show", &digest, "--json"],
    ] {
        let corrupt = run_json(&mut work.env(shown));
        assert_eq!(corrupt.error_code(), "corrupt");
        assert!(
            corrupt.error_message().contains("pyvenv.cfg"),
            "{}",
            corrupt.error_message()
        );
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "home = /elsewhere\n"
    );
}

#[test]
fn bad_arguments_and_configuration_are_refused_creating_nothing() {
    let work = Work::new();
    for (args, code, needle) in [
        (
            &["add", "Tools", "/x"][..],
            "invalid-input",
            "a name is 1 to 64",
        ),
        (
            &["add", "tools", "relative/dir"],
            "invalid-input",
            "absolute",
        ),
        (&["add", "tools", "/a/../b"], "invalid-input", "`..`"),
        (&["show", "tools"], "missing", "does not exist"),
        (&["show", "sha256:12"], "invalid-input", "64 lowercase hex"),
    ] {
        let mut command = work.env(args);
        let refused = run_json(command.arg("--json"));
        assert_eq!(refused.error_code(), code, "{args:?}");
        assert!(
            refused.error_message().contains(needle),
            "{args:?}: {}",
            refused.error_message()
        );
        assert!(!work.store.exists(), "{args:?} created the store");
    }
    run_json(&mut work.add("tools", &["--json"])).result();
    let missing = run_json(&mut work.env(&["show", "nothing", "--json"]));
    assert_eq!(missing.error_code(), "missing");
    assert!(
        missing.error_message().contains("\"nothing\""),
        "{}",
        missing.error_message()
    );
    let unknown = format!("sha256:{}", "0".repeat(64));
    assert_eq!(
        run_json(&mut work.env(&["show", &unknown, "--json"])).error_code(),
        "missing"
    );
    let limited = run_json(&mut work.add("small", &["--max-files", "2", "--json"]));
    assert_eq!(limited.error_code(), "too-large");
    assert!(limited.error_message().contains("more than 2 entries"));

    // The store's setting.
    for (setting, needle) in [
        (
            "store = \"envs\"\n",
            "[environments] store \"envs\" is not an absolute path",
        ),
        ("stor = \"/x\"\n", "[environments] stor is not a known key"),
    ] {
        std::fs::write(&work.config, format!("[environments]\n{setting}")).unwrap();
        let refused = run_json(&mut work.env(&["list", "--json"]));
        assert_eq!(refused.error_code(), "config-invalid", "{setting}");
        assert!(
            refused.error_message().contains(needle),
            "{}",
            refused.error_message()
        );
    }
    // Unset: below $HOME, or an error saying to set it. As root the default is not below
    // HOME (the next test).
    if nix::unistd::geteuid().is_root() {
        return;
    }
    let home = work.root.join("home");
    std::fs::create_dir(&home).unwrap();
    let listed = run_json(sf().args(["env", "list", "--json"]).env("HOME", &home));
    assert_eq!(
        listed.result()["store"],
        home.join(".local/share/sf/environments").to_str().unwrap()
    );
    let refused = run_json(sf().args(["env", "list", "--json"]).env_remove("HOME"));
    assert_eq!(refused.error_code(), "config-invalid");
    assert!(
        refused.error_message().contains("set [environments] store"),
        "{}",
        refused.error_message()
    );
}

/// What an add to the store as root with no store set put there, removed when dropped: the
/// whole store if the test created it, else the name and the object (a tree of this test's
/// own, so no one else's).
struct AddedToTheDefault {
    existed: bool,
    name: String,
    hex: Option<String>,
}

impl Drop for AddedToTheDefault {
    fn drop(&mut self) {
        let store = Path::new(DEFAULT_ENVIRONMENT_STORE_AS_ROOT);
        if !self.existed {
            let _ = std::fs::remove_dir_all(store);
            return;
        }
        let _ = std::fs::remove_file(store.join("names").join(&self.name));
        if let Some(hex) = &self.hex {
            let _ = std::fs::remove_dir_all(store.join("objects").join(hex));
            let _ = std::fs::remove_file(store.join("stamps").join(hex));
        }
    }
}

#[test]
fn as_root_the_unset_store_is_one_every_run_can_reach() {
    if !nix::unistd::geteuid().is_root() {
        // Below $HOME, as the test above shows.
        return;
    }
    let _lock = default_environment_store_lock();
    let work = Work::new();
    // A HOME only its owner may pass, as root's is; nothing of it is used.
    let home = work.root.join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A tree and a name of this run's own.
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    std::fs::write(work.tree.join("unique"), &unique).unwrap();
    let name = format!("sf-test-{unique}");
    let store = Path::new(DEFAULT_ENVIRONMENT_STORE_AS_ROOT);
    let mut added = AddedToTheDefault {
        existed: store.exists(),
        name: name.clone(),
        hex: None,
    };
    // No --config, no SF_CONFIG and no sf.toml in the working directory: nothing sets it.
    let unconfigured = |home: Option<&Path>| {
        let mut command = sf();
        command.current_dir(&work.tree).env_remove("SF_CONFIG");
        match home {
            Some(home) => command.env("HOME", home),
            None => command.env_remove("HOME"),
        };
        command
    };
    for home in [Some(home.as_path()), None] {
        let listed = run_json(unconfigured(home).args(["env", "list", "--json"]));
        assert_eq!(
            listed.result()["store"],
            DEFAULT_ENVIRONMENT_STORE_AS_ROOT,
            "{home:?}"
        );
    }

    let result = run_json(
        unconfigured(Some(&home))
            .args(["env", "add", &name])
            .arg(&work.tree)
            .arg("--json"),
    )
    .result()
    .clone();
    assert_eq!(result["name"], name.as_str());
    let digest = result["digest"].as_str().unwrap().to_owned();
    let hex = digest.strip_prefix("sha256:").unwrap().to_owned();
    added.hex = Some(hex.clone());
    let listed = run_json(unconfigured(Some(&home)).args(["env", "list", "--json"]));
    assert_eq!(listed.result()["store"], DEFAULT_ENVIRONMENT_STORE_AS_ROOT);
    assert!(
        listed.result()["environments"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": name, "digest": digest})),
        "{}",
        listed.json
    );
    assert!(store.join("objects").join(&hex).join("tree").is_dir());
    assert!(!home.join(".local").exists(), "nothing below HOME");
    // Every directory from / down to the store lets others pass (what the run's user needs).
    for dir in store.ancestors() {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o001, 0o001, "{} is {mode:o}", dir.display());
    }
}
