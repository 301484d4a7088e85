//! Bad input to the `sf` binary: malformed or unknown configuration, missing files, unreadable
//! plugin directories, bad flags, unstorable source trees. Each is a clear error naming the
//! input and the fix, and nothing is written. Also: the out-of-tree example plugin loaded by
//! `sf` through `sf.toml`, and `sf plugins list`.

use std::path::PathBuf;

use sf_tests::plugins::{built, run_json, sf};
use sf_tests::private_dir;

/// A private directory with a small source tree in `source/`.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = private_dir();
    std::fs::create_dir(root.join("source")).unwrap();
    std::fs::write(root.join("source/a.txt"), "a\n").unwrap();
    (dir, root)
}

/// `sf repo create --json` into `root/repo` from `root/source`, with extra arguments.
fn create(root: &std::path::Path, extra: &[&str]) -> std::process::Command {
    let mut command = sf();
    command
        .args([
            "repo",
            "create",
            "--json",
            "--product",
            "p",
            "--target",
            "refs/heads/main",
        ])
        .arg("--path")
        .arg(root.join("repo"))
        .arg("--from")
        .arg(root.join("source"))
        .args(extra);
    command
}

#[test]
fn bad_configuration_is_refused_before_anything_is_written() {
    let (_dir, root) = workspace();
    let config = root.join("sf.toml");
    let config_arg = config.to_str().unwrap();
    for (text, code, needle) in [
        ("[object_store\n", "config-invalid", "sf.toml"),
        (
            "[object_store]\ntype = \"no-such-store\"\n",
            "unknown-tag",
            "git-cli",
        ),
        (
            "[object_stor]\ntype = \"git-cli\"\n",
            "config-invalid",
            "unknown section",
        ),
        (
            "[object_store]\ngit = \"/usr/bin/git\"\n",
            "config-invalid",
            "no type",
        ),
        (
            "[object_store]\ntype = \"git-cli\"\ngit = \"/nonexistent/git\"\n",
            "plugin-refused",
            "/nonexistent/git",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let refused = run_json(&mut create(&root, &["--config", config_arg]));
        assert_eq!(refused.error_code(), code, "{text}");
        assert!(
            refused.error_message().contains(needle),
            "{text}: {}",
            refused.error_message()
        );
        assert!(
            !root.join("repo").exists(),
            "{text}: a repository was created"
        );
    }
    let missing = run_json(&mut create(&root, &["--config", "/nonexistent/sf.toml"]));
    assert_eq!(missing.error_code(), "config-unreadable");
    assert!(missing.error_message().contains("/nonexistent/sf.toml"));
    assert!(!root.join("repo").exists());
}

#[test]
fn plugin_path_problems_are_clear_errors() {
    let (_dir, root) = workspace();
    std::fs::write(
        root.join("sf.toml"),
        "[object_store]\ntype = \"elsewhere\"\n",
    )
    .unwrap();
    let config = root.join("sf.toml");
    for (path, needle) in [
        ("/nonexistent/plugins", "/nonexistent/plugins"),
        ("relative/plugins", "must be absolute"),
    ] {
        let refused = run_json(
            create(&root, &["--config", config.to_str().unwrap()]).env("SF_PLUGIN_PATH", path),
        );
        assert_eq!(refused.error_code(), "plugin-path", "{path}");
        assert!(
            refused.error_message().contains(needle),
            "{}",
            refused.error_message()
        );
        assert!(!root.join("repo").exists());
    }
    let listed = run_json(
        sf().args(["plugins", "list", "--json"])
            .env("SF_PLUGIN_PATH", "/nonexistent/x"),
    );
    assert_eq!(listed.error_code(), "plugin-path");
}

#[test]
fn missing_and_malformed_input_files_name_the_input() {
    let (_dir, root) = workspace();
    let refused = run_json(
        sf().args(["seal", "--json", "--identity", "/nonexistent/id.json"])
            .args([
                "--slice",
                "/nonexistent/slice",
                "--proposal",
                "/nonexistent/p.json",
            ]),
    );
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(
        refused
            .error_message()
            .contains("--slice /nonexistent/slice")
    );

    std::fs::write(
        root.join("identity.json"),
        "{\"protocol\":\"sf-repository/1\"}",
    )
    .unwrap();
    let refused = run_json(
        sf().args(["snapshot", "--json", "--identity"])
            .arg(root.join("identity.json")),
    );
    assert_eq!(refused.error_code(), "invalid-identity");
    assert!(refused.error_message().contains("identity.json"));

    let refused = run_json(
        sf().args(["export", "--json", "--identity"])
            .arg(root.join("identity.json"))
            .args(["--candidate", "sha256:xyz", "--out"])
            .arg(root.join("out")),
    );
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(refused.error_message().contains("--candidate"));
    assert!(!root.join("out").exists());
}

#[test]
fn unstorable_sources_and_existing_outputs_write_nothing() {
    let (_dir, root) = workspace();
    std::os::unix::fs::symlink("/etc/hostname", root.join("source/link")).unwrap();
    // A link is part of the tree model, but not one that leaves the tree.
    let refused = run_json(&mut create(&root, &[]));
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(
        refused
            .error_message()
            .contains("link: the link's target is absolute (absolute-link)"),
        "{}",
        refused.error_message()
    );
    assert!(!root.join("repo").exists());
    std::fs::remove_file(root.join("source/link")).unwrap();

    std::fs::write(root.join("identity.json"), "keep").unwrap();
    let identity = root.join("identity.json");
    let refused = run_json(&mut create(
        &root,
        &["--identity-out", identity.to_str().unwrap()],
    ));
    assert_eq!(refused.error_code(), "exists");
    assert!(!root.join("repo").exists());
    assert_eq!(std::fs::read(&identity).unwrap(), b"keep");

    let refused = run_json(
        sf().args(["repo", "create", "--json", "--product", "bad product"])
            .args(["--target", "refs/heads/main", "--path"])
            .arg(root.join("repo"))
            .arg("--from")
            .arg(root.join("source")),
    );
    assert_eq!(refused.error_code(), "invalid-input");
    assert!(refused.error_message().contains("productId"));
    assert!(!root.join("repo").exists());
}

#[test]
fn bad_flags_are_usage_errors() {
    let output = sf()
        .args(["seal", "--json", "--frobnicate"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(envelope["ok"], false);
    assert_eq!(envelope["error"]["code"], "usage");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--frobnicate")
    );
    let output = sf().args(["seal", "--frobnicate"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--frobnicate"));
    let help = sf().args(["seal", "--help"]).output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--proposal"));
}

#[test]
fn the_out_of_tree_plugin_is_loaded_through_sf_toml() {
    let (_dir, root) = workspace();
    let config = root.join("sf.toml");
    std::fs::write(&config, "[object_store]\ntype = \"example-memory\"\n").unwrap();
    // The example lives in memory, so the whole create runs in one sf process.
    let created = run_json(&mut create(&root, &["--config", config.to_str().unwrap()]));
    assert_eq!(created.result()["productId"], "p");
    assert_eq!(created.result()["dev"], 0, "the in-memory store's device");
    assert!(
        !root.join("repo").exists(),
        "the in-memory store writes no files"
    );

    let names = |listed: &sf_tests::plugins::Envelope| -> Vec<String> {
        listed.result()["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|plugin| plugin["name"].as_str().unwrap().to_owned())
            .collect()
    };
    // The default plugin path (the directory of sf) holds the built plugins and the example,
    // never a test-only plugin.
    let listed = run_json(sf().args(["plugins", "list", "--json"]));
    let result = listed.result();
    assert_eq!(result["pluginPath"], serde_json::json!([built().dir]));
    let found = names(&listed);
    for name in ["git-cli", "sandbox-exec", "oats", "example-memory"] {
        assert!(
            found.iter().any(|found| found == name),
            "{name} not in {found:?}"
        );
    }
    for name in ["hostile", "test-backends"] {
        assert!(
            !found.iter().any(|found| found == name),
            "{name} in {found:?}"
        );
    }
    assert_eq!(result["configured"]["object_store"], "git-cli");
    // The test plugins are found where the tests name them.
    let listed = run_json(
        sf().args(["plugins", "list", "--json"])
            .env("SF_PLUGIN_PATH", &built().test_plugins),
    );
    assert_eq!(
        listed.result()["pluginPath"],
        serde_json::json!([built().dir, built().test_plugins])
    );
    let found = names(&listed);
    for name in ["git-cli", "example-memory", "hostile", "test-backends"] {
        assert!(
            found.iter().any(|found| found == name),
            "{name} not in {found:?}"
        );
    }
}
