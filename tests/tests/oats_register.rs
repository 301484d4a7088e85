//! Registration: self-containment (missing files, `..`, absolute paths, links out, nested
//! links, broken links, cycles), the portable integrity digest, the registry file, and bad
//! input that registers nothing. No capability code runs here.

mod oats_support;

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::Path;
use std::sync::Arc;

use oats_support::{Bench, manifest, write_manifest};
use serde_json::json;
use sf_oats::{ErrorCode, Oats, OatsOptions};
use sf_sdk::testing::ScriptedExecutor;

fn scripted(bench: &Bench) -> (Oats, Arc<ScriptedExecutor>) {
    let executor = Arc::new(ScriptedExecutor::new());
    (
        bench.oats_with(executor.clone(), OatsOptions::default()),
        executor,
    )
}

fn refused(oats: &Oats, dir: &Path, code: ErrorCode) -> sf_oats::OatsError {
    let before = std::fs::read(oats.registry().dir().join("registry.json")).ok();
    let error = oats
        .register(dir)
        .expect_err("registration must be refused");
    assert_eq!(error.code, code, "{error}");
    let after = std::fs::read(oats.registry().dir().join("registry.json")).ok();
    assert_eq!(before, after, "a refused registration changed the registry");
    error
}

#[test]
fn okf_registers_and_without_its_scripts_is_not_self_contained() {
    let bench = Bench::new();
    let (oats, executor) = scripted(&bench);
    let okf = bench.fixture("okf", "okf");
    let registration = oats.register(&okf).expect("the okf fixture registers");
    assert_eq!(registration.entry.id, "oats.okf");
    assert_eq!(registration.entry.version, "2.1.0");
    assert!(!registration.entry.trusted);
    assert!(registration.executable);
    assert_eq!(registration.entry.path, okf.canonicalize().unwrap());

    let bare = bench.fixture("okf", "okf-bare");
    std::fs::remove_file(bare.join("bin/oats-okf.mjs")).unwrap();
    let error = refused(&oats, &bare, ErrorCode::NotSelfContained);
    assert_eq!(error.code(), "capability-not-self-contained");
    // The first declared command (in name order) that uses the missing script.
    assert_eq!(error.subject, "commands.complete", "{error}");
    assert!(error.message.contains("bin/oats-okf.mjs"), "{error}");

    std::fs::remove_dir_all(bare.join("bin")).unwrap();
    let error = refused(&oats, &bare, ErrorCode::NotSelfContained);
    assert!(error.message.contains("bin/oats-okf"), "{error}");
    assert_eq!(oats.list().unwrap().len(), 1);
    assert!(executor.requests().is_empty(), "registration ran something");
}

#[test]
fn every_declared_resource_must_exist() {
    let bench = Bench::new();
    let (oats, _) = scripted(&bench);
    for (remove, field) in [
        ("injects/tool.md", "inject"),
        ("skills", "skills[0]"),
        ("agents/helper", "agents[0]"),
        ("bin/binding.mjs", "commands.binding-bind"),
    ] {
        let dir = bench.fixture("tool", &format!("tool-{}", remove.replace('/', "-")));
        let path = dir.join(remove);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        let error = refused(&oats, &dir, ErrorCode::NotSelfContained);
        assert_eq!(error.subject, field, "{error}");
        assert!(error.message.contains(remove), "{error}");
    }
    // A declared directory that is a file, and a declared file that is a directory.
    let dir = bench.fixture("tool", "tool-kinds");
    std::fs::remove_dir_all(dir.join("agents/helper")).unwrap();
    std::fs::write(dir.join("agents/helper"), "not a directory").unwrap();
    assert_eq!(
        refused(&oats, &dir, ErrorCode::NotSelfContained).subject,
        "agents[0]"
    );
    assert!(oats.list().unwrap().is_empty());
}

#[test]
fn links_must_resolve_inside_the_artifact() {
    let bench = Bench::new();
    let (oats, _) = scripted(&bench);
    let outside = bench.root.join("outside");
    std::fs::create_dir_all(outside.join("skills")).unwrap();
    std::fs::write(outside.join("skills/SKILL.md"), "outside").unwrap();
    std::fs::write(outside.join("evil.mjs"), "console.log('outside')").unwrap();

    // A declared skill directory that is a link out of the root.
    let dir = bench.fixture("tool", "skill-link-out");
    std::fs::remove_dir_all(dir.join("skills")).unwrap();
    symlink(outside.join("skills"), dir.join("skills")).unwrap();
    let error = refused(&oats, &dir, ErrorCode::NotSelfContained);
    assert_eq!(error.subject, "skills[0]");
    assert!(
        error.message.contains("escapes its integrity boundary"),
        "{error}"
    );

    // A descendant link escaping under a contained skill root.
    let dir = bench.fixture("tool", "descendant-out");
    symlink(
        outside.join("skills/SKILL.md"),
        dir.join("skills/tool/LEAK.md"),
    )
    .unwrap();
    assert_eq!(
        refused(&oats, &dir, ErrorCode::NotSelfContained).subject,
        "skills[0]"
    );

    // A command script that is a link out.
    let dir = bench.fixture("tool", "script-out");
    std::fs::remove_file(dir.join("bin/binding.mjs")).unwrap();
    symlink(outside.join("evil.mjs"), dir.join("bin/binding.mjs")).unwrap();
    assert_eq!(
        refused(&oats, &dir, ErrorCode::NotSelfContained).subject,
        "commands.binding-bind"
    );

    // Nested links: skills/tool/a -> b, b -> ../../../outside (relative, two hops).
    let dir = bench.fixture("tool", "nested-out");
    symlink("b", dir.join("skills/tool/a")).unwrap();
    symlink("../../../outside/skills", dir.join("skills/tool/b")).unwrap();
    refused(&oats, &dir, ErrorCode::NotSelfContained);

    // A broken link under a declared directory, and one elsewhere in the artifact.
    let dir = bench.fixture("tool", "broken-declared");
    symlink("missing.md", dir.join("skills/tool/broken.md")).unwrap();
    let error = refused(&oats, &dir, ErrorCode::NotSelfContained);
    assert!(error.message.contains("broken"), "{error}");
    let dir = bench.fixture("tool", "broken-elsewhere");
    symlink("nowhere", dir.join("dangling")).unwrap();
    refused(&oats, &dir, ErrorCode::NotSelfContained);

    // An undeclared link out anywhere in the artifact (the whole artifact is the program).
    let dir = bench.fixture("tool", "undeclared-out");
    symlink("/etc/passwd", dir.join("passwd")).unwrap();
    refused(&oats, &dir, ErrorCode::NotSelfContained);
    assert!(oats.list().unwrap().is_empty());

    // Links that stay inside are fine: nested, absolute-inside, and a directory cycle.
    let dir = bench.fixture("tool", "inside");
    let canonical = dir.canonicalize().unwrap();
    symlink("b", dir.join("skills/tool/a")).unwrap();
    symlink("../../injects", dir.join("skills/tool/b")).unwrap();
    symlink(
        canonical.join("injects/tool.md"),
        dir.join("skills/tool/abs.md"),
    )
    .unwrap();
    symlink("..", dir.join("skills/tool/loop")).unwrap();
    symlink("tool.mjs", dir.join("bin/alias.mjs")).unwrap();
    let registration = oats.register(&dir).expect("contained links register");
    let prepared = oats.prepare(&registration.entry.id, false).unwrap();
    let find = |path: &str| {
        prepared
            .program
            .iter()
            .find(|file| file.path == path)
            .map(|file| file.content.clone())
    };
    let tool = std::fs::read(dir.join("bin/tool.mjs")).unwrap();
    assert_eq!(find("artifact/bin/alias.mjs"), Some(tool));
    let inject = std::fs::read(dir.join("injects/tool.md")).unwrap();
    assert_eq!(find("artifact/skills/tool/a/tool.md"), Some(inject.clone()));
    assert_eq!(find("artifact/skills/tool/abs.md"), Some(inject));
}

#[test]
fn special_and_unportable_files_are_refused() {
    let bench = Bench::new();
    let (oats, _) = scripted(&bench);
    let dir = bench.fixture("tool", "fifo");
    nix::unistd::mkfifo(
        &dir.join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    assert_eq!(
        refused(&oats, &dir, ErrorCode::UnsupportedFile).subject,
        "pipe"
    );

    let dir = bench.fixture("tool", "non-utf8");
    let name = std::ffi::OsStr::new(std::str::from_utf8(b"bad").unwrap()).to_owned();
    let mut bytes = name.into_encoded_bytes();
    bytes.push(0xff);
    // SAFETY: the bytes are a file name for this platform (any bytes but NUL and '/').
    let name = unsafe { std::ffi::OsString::from_encoded_bytes_unchecked(bytes) };
    std::fs::write(dir.join(name), "x").unwrap();
    refused(&oats, &dir, ErrorCode::UnsupportedFile);

    // An executable capability whose files cannot be carried into a run: a name Git refuses.
    let dir = bench.fixture("tool", "git-dir");
    std::fs::create_dir_all(dir.join(".github")).unwrap();
    std::fs::write(dir.join(".github/ci.yml"), "x").unwrap();
    std::fs::write(dir.join("bad\rname"), "x").unwrap();
    let error = refused(&oats, &dir, ErrorCode::UnsupportedPath);
    assert_eq!(error.subject, "bad\rname");
    assert!(oats.list().unwrap().is_empty());
}

#[test]
fn bad_manifests_register_nothing() {
    let bench = Bench::new();
    let (oats, _) = scripted(&bench);
    let cases: Vec<(&str, Vec<u8>, ErrorCode)> = vec![
        ("malformed", b"{\"capability\":".to_vec(), ErrorCode::InvalidJson),
        (
            "duplicate",
            br#"{"capability":"acme.tool","version":"1","version":"2","description":"d"}"#.to_vec(),
            ErrorCode::DuplicateKey,
        ),
        (
            "wrong-type",
            br#"{"capability":"acme.tool","version":1,"description":"d"}"#.to_vec(),
            ErrorCode::InvalidManifest,
        ),
        (
            "bad-id",
            br#"{"capability":"Acme","version":"1","description":"d"}"#.to_vec(),
            ErrorCode::InvalidId,
        ),
        (
            "nul-path",
            br#"{"capability":"acme.tool","version":"1","description":"d","inject":"a\u0000b"}"#.to_vec(),
            ErrorCode::PathEscape,
        ),
        (
            "backslash-path",
            br#"{"capability":"acme.tool","version":"1","description":"d","commands":{"x":"bin\\x.mjs"}}"#.to_vec(),
            ErrorCode::PathEscape,
        ),
        (
            "oversized",
            {
                let mut bytes = br#"{"capability":"acme.tool","version":"1","description":""#.to_vec();
                bytes.extend(std::iter::repeat_n(b'x', 300 * 1024));
                bytes.extend_from_slice(b"\"}");
                bytes
            },
            ErrorCode::TooLarge,
        ),
        (
            "incompatible",
            br#"{"capability":"acme.tool","version":"1","description":"d","compatibility":{"oats":">=999.0.0"}}"#.to_vec(),
            ErrorCode::Incompatible,
        ),
    ];
    for (name, bytes, code) in cases {
        let dir = bench.root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("oats.json"), bytes).unwrap();
        let error = refused(&oats, &dir, code);
        assert_eq!(error.code, code, "{name}: {error}");
    }
    // No manifest; a manifest that is a link.
    let dir = bench.root.join("empty");
    std::fs::create_dir_all(&dir).unwrap();
    refused(&oats, &dir, ErrorCode::InvalidManifest);
    let dir = bench.fixture("tool", "linked-manifest");
    std::fs::rename(dir.join("oats.json"), dir.join("real.json")).unwrap();
    symlink("real.json", dir.join("oats.json")).unwrap();
    refused(&oats, &dir, ErrorCode::InvalidManifest);
    assert!(oats.list().unwrap().is_empty());
    assert!(!oats.registry().dir().join("registry.json").exists());
}

/// An independent implementation of `oats.tree-exec.v1`, to check the format.
fn reference_digest(root: &Path) -> String {
    use sha2::{Digest as _, Sha256};
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::MetadataExt as _;
    fn collect(root: &Path, dir: &Path, out: &mut Vec<(Vec<u8>, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mut record = Vec::new();
            if meta.is_dir() {
                collect(root, &path, out);
                continue;
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                record.push(b'S');
                record.extend((relative.len() as u64).to_be_bytes());
                record.extend(&relative);
                record.extend((target.as_os_str().len() as u64).to_be_bytes());
                record.extend(target.as_os_str().as_bytes());
            } else {
                let content = std::fs::read(&path).unwrap();
                record.push(b'F');
                record.extend((relative.len() as u64).to_be_bytes());
                record.extend(&relative);
                record.push(u8::from(meta.mode() & 0o100 != 0));
                record.extend((content.len() as u64).to_be_bytes());
                record.extend(content);
            }
            out.push((relative, record));
        }
    }
    let mut records = Vec::new();
    collect(root, root, &mut records);
    records.sort();
    let mut hasher = Sha256::new();
    hasher.update(b"oats.tree-exec.v1\0");
    for (_, record) in records {
        hasher.update(record);
    }
    format!(
        "oats.tree-exec.v1:sha256-{}",
        hex::encode(hasher.finalize())
    )
}

#[test]
fn integrity_is_the_portable_tree_digest() {
    let bench = Bench::new();
    let (oats, _) = scripted(&bench);
    let dir = bench.fixture("tool", "tool");
    symlink("tool.mjs", dir.join("bin/alias.mjs")).unwrap();
    std::fs::write(dir.join("Zeta.md"), "upper case sorts first").unwrap();
    let first = oats.register(&dir).unwrap().entry.integrity;
    assert_eq!(first, reference_digest(&dir.canonicalize().unwrap()));

    // An empty directory does not count; the exec bit does; content does; a rename does.
    std::fs::create_dir(dir.join("empty")).unwrap();
    assert_eq!(oats.register(&dir).unwrap().entry.integrity, first);
    let script = dir.join("bin/tool.mjs");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = oats.register(&dir).unwrap().entry.integrity;
    assert_ne!(exec, first);
    assert_eq!(exec, reference_digest(&dir.canonicalize().unwrap()));
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(oats.register(&dir).unwrap().entry.integrity, first);
    std::fs::rename(dir.join("Zeta.md"), dir.join("zeta.md")).unwrap();
    assert_ne!(oats.register(&dir).unwrap().entry.integrity, first);
}

#[test]
fn the_registry_holds_one_entry_per_id_and_path() {
    let bench = Bench::new();
    let (oats, _) = scripted(&bench);
    let one = bench.fixture("tool", "one");
    let two = bench.fixture("tool", "two");
    oats.register(&one).unwrap();
    // The same id from another directory.
    assert_eq!(
        refused(&oats, &two, ErrorCode::DuplicateCapabilityId).subject,
        "acme.tool"
    );
    // Another id claiming the same command namespace.
    let mut other = manifest(&two);
    other["capability"] = json!("acme.other");
    write_manifest(&two, &other);
    assert_eq!(
        refused(&oats, &two, ErrorCode::DuplicateNamespace).subject,
        "command"
    );
    // Without the namespace it registers beside the first.
    other.as_object_mut().unwrap().remove("command");
    write_manifest(&two, &other);
    oats.register(&two).unwrap();
    let ids: Vec<String> = oats.list().unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(ids, vec!["acme.other", "acme.tool"]);
    // The directory now declares yet another id: refused until unregistered.
    other["capability"] = json!("acme.third");
    write_manifest(&two, &other);
    refused(&oats, &two, ErrorCode::DuplicateCapabilityId);
    oats.unregister("acme.other", false).unwrap();
    oats.register(&two).unwrap();

    // The file is canonical JSON with exactly the five fields.
    let bytes = std::fs::read(oats.registry().dir().join("registry.json")).unwrap();
    let value = sf_host::canonical::parse_canonical(&bytes).expect("canonical JSON");
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        text.contains(r#""protocol":"sf-oats-registry/1""#),
        "{text}"
    );
    assert!(
        text.contains(r#"{"id":"acme.third","integrity":"oats.tree-exec.v1:sha256-"#),
        "{text}"
    );
    drop(value);

    // A registry that is not what sf writes is refused and left alone.
    let file = oats.registry().dir().join("registry.json");
    std::fs::write(
        &file,
        text.replace("\"trusted\":false", "\"trusted\":\"yes\""),
    )
    .unwrap();
    let error = oats.list().unwrap_err();
    assert_eq!(error.code, ErrorCode::RegistryCorrupt, "{error}");
    assert_eq!(
        oats.register(&one).unwrap_err().code,
        ErrorCode::RegistryCorrupt
    );
    assert!(std::fs::read_to_string(&file).unwrap().contains("\"yes\""));
}

#[test]
fn the_state_directory_must_be_private() {
    let bench = Bench::new();
    let open = bench.root.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let error = Oats::new(
        &open,
        Arc::new(ScriptedExecutor::new()),
        OatsOptions::default(),
    )
    .unwrap_err();
    assert_eq!(error.code, ErrorCode::StateDirectory, "{error}");
}
