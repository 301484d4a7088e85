//! A plugin library is mapped from a sealed in-memory copy of its bytes: a library truncated,
//! rewritten in place or replaced on disk after it was loaded keeps working (the mapped pages
//! are the copy's, which cannot shrink: never SIGBUS), and a pinned SHA-256 (`sha256 = …` in
//! the section) refuses any other bytes before they are mapped, through the `sf` binary too.
//!
//! The first test runs its body in a child process of this test binary, so that a SIGBUS (the
//! old failure: pages of a truncated mapped file) fails it as a signal, never takes the
//! harness down silently.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sf_host::canonical::Digest;
use sf_host::contracts::{AttemptId, EvidenceRecord, EvidenceStore as _};
use sf_host::plugin::evidence_store_adapter::PluginEvidenceStore;
use sf_host::plugin::manifest::manifest_path;
use sf_tests::plugins::{built, run_json, sf};
use sf_tests::private_dir;

/// A copy of the test backends plugin (and its manifest) in `dir`; its path.
fn copy_backends(dir: &Path) -> PathBuf {
    let library = dir.join("libsf_test_backends_plugin.so");
    std::fs::copy(&built().backends, &library).unwrap();
    std::fs::copy(manifest_path(&built().backends), manifest_path(&library)).unwrap();
    library
}

fn put_and_get(store: &PluginEvidenceStore, epoch: u64) {
    let record = EvidenceRecord::new(
        Digest::of(b"pins"),
        AttemptId {
            product: "p".into(),
            epoch,
        },
        "test/1",
        format!("payload {epoch}").as_bytes(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let id = store.put(&record, deadline).unwrap();
    assert_eq!(store.get(&id, deadline).unwrap(), record);
}

/// The body of the first test, run in a child process (`SF_TEST_LIBRARY_CHILD` set).
fn truncated_and_rewritten_after_loading() {
    let (_dir, root) = private_dir();
    let library = copy_backends(&root);
    let plugin = sf_host::plugin::load(&library).unwrap();
    let mut fields = serde_json::Map::new();
    fields.insert(
        "path".into(),
        root.join("state/evidence.db").display().to_string().into(),
    );
    std::fs::create_dir(root.join("state")).unwrap();
    std::fs::set_permissions(
        root.join("state"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let store = PluginEvidenceStore::new(&plugin, "test-sqlite", &fields).unwrap();
    put_and_get(&store, 1);
    let bytes = std::fs::read(&library).unwrap();
    // Truncated in place (the same inode, as an interrupted copy over it would leave it):
    // the plugin's code pages beyond the new end are the copy's, so every call still works.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&library)
        .unwrap()
        .set_len(4096)
        .unwrap();
    put_and_get(&store, 2);
    // Rewritten in place with other bytes of the same length: nothing changes either.
    std::fs::write(&library, vec![0x90; bytes.len()]).unwrap();
    put_and_get(&store, 3);
    // A second instance in this process is made from the library opened first.
    let again = sf_host::plugin::load(&library).unwrap();
    let second = PluginEvidenceStore::new(&again, "test-sqlite", &fields).unwrap();
    put_and_get(&second, 4);
}

#[test]
fn a_library_truncated_or_rewritten_after_it_was_loaded_keeps_working() {
    if std::env::var_os("SF_TEST_LIBRARY_CHILD").is_some() {
        truncated_and_rewritten_after_loading();
        return;
    }
    built();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_library_truncated_or_rewritten_after_it_was_loaded_keeps_working",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SF_TEST_LIBRARY_CHILD", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the child ended {:?} (a signal is the SIGBUS this guards against):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"));
}

#[test]
fn a_pinned_library_loads_only_with_its_digest() {
    let (_dir, root) = private_dir();
    let library = copy_backends(&root);
    let checked = run_json(sf().args(["plugins", "check", "--json"]).arg(&library));
    let digest = checked.result()["sha256"].as_str().unwrap().to_owned();
    assert_eq!(
        digest,
        Digest::of(&std::fs::read(&library).unwrap()).to_string()
    );
    let pinned = Digest::parse(&digest).unwrap();
    assert!(sf_host::plugin::load_pinned(&library, Some(&pinned)).is_ok());
    let other = Digest::of(b"another build");
    let refused = sf_host::plugin::load_pinned(&library, Some(&other)).unwrap_err();
    assert_eq!(refused.code(), "pin-mismatch", "{refused}");
    assert!(refused.to_string().contains(&digest), "{refused}");

    // Through sf: [evidence_store] pinned to another digest is refused naming both, before
    // anything is written; pinned to the library's own, it serves.
    std::fs::create_dir(root.join("state")).unwrap();
    std::fs::set_permissions(
        root.join("state"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let config = |pin: &str| {
        let path = root.join(format!("sf-{}.toml", &pin[7..15]));
        std::fs::write(
            &path,
            format!(
                "[evidence_store]\ntype = \"test-sqlite\"\nsha256 = \"{pin}\"\npath = \"{}\"\n",
                root.join("state/evidence.db").display()
            ),
        )
        .unwrap();
        path
    };
    let identity = root.join("identity.json");
    let source = root.join("source");
    std::fs::create_dir(&source).unwrap();
    std::fs::write(source.join("a.txt"), "a\n").unwrap();
    run_json(
        sf().args(["repo", "create", "--json", "--product", "p", "--target"])
            .arg("refs/heads/main")
            .arg("--path")
            .arg(root.join("repo.git"))
            .arg("--from")
            .arg(&source)
            .arg("--identity-out")
            .arg(&identity),
    )
    .result();
    let slice = sf_tests::plugins::freeze_minimal_slice(&root, &identity, &["a.txt"]);
    let find = |config: &Path| {
        run_json(
            sf().env("SF_PLUGIN_PATH", &built().test_plugins)
                .args(["evidence", "get", "--json"])
                .arg(Digest::of(b"nothing").to_string())
                .arg("--config")
                .arg(config)
                .arg("--slice")
                .arg(&slice),
        )
    };
    let wrong = find(&config(&other.to_string()));
    assert_eq!(wrong.error_code(), "pin-mismatch", "{}", wrong.json);
    assert!(wrong.error_message().contains(&other.to_string()));
    assert!(!root.join("state/evidence.db").exists());
    // The library on the plugin path is the built one; pinned to its own digest it loads
    // (and answers that there is no such record).
    let own = Digest::of(&std::fs::read(&built().backends).unwrap()).to_string();
    let served = find(&config(&own));
    assert_eq!(served.error_code(), "missing", "{}", served.json);
}
