//! `sf export` writes each entry with its mode: a regular file 0644, an executable 0755 (less
//! the umask), a symbolic link as a link holding its target, all through directory
//! descriptors. The writer `sf export` uses, `sf_cli::write_export`, is tested here directly
//! with entries of every mode and hostile layouts; `cli_whole_tree` exports a sealed
//! Candidate holding them through the binary.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use sf_host::snapshot::SnapshotFile;
use sf_tests::{private_dir, tree_hash};

/// The process's file-mode creation mask, as the kernel reports it.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))
        .expect("/proc/self/status states the umask");
    u32::from_str_radix(mask.trim(), 8).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn link(path: &str, target: &str) -> SnapshotFile {
    SnapshotFile::symlink(path, target.as_bytes().to_vec())
}

fn entries() -> Vec<SnapshotFile> {
    vec![
        SnapshotFile::regular("README.md", b"# x\n".to_vec()),
        SnapshotFile::executable("bin/run.sh", b"#!/bin/sh\necho run\n".to_vec()),
        SnapshotFile::regular("src/lib.rs", b"pub fn f() {}\n".to_vec()),
        link("src/readme", "../README.md"),
        link("tools", "bin"),
        link("src/run", "../tools/run.sh"),
        link("later", "build/output"),
    ]
}

/// Asserts that nothing but `out` (if `exported`) appeared in `root`: no staging directory.
fn assert_only(root: &Path, exported: Option<&Path>) {
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        assert!(
            Some(path.as_path()) == exported || path.ends_with("outside"),
            "{} was left behind",
            path.display()
        );
    }
}

#[test]
fn every_entry_is_written_with_its_mode_and_links_as_links() {
    let (_dir, root) = private_dir();
    let out = root.join("out");
    sf_cli::write_export(&out, &entries()).unwrap();
    let mask = umask();
    assert_eq!(mode(&out.join("README.md")), 0o644 & !mask);
    assert_eq!(mode(&out.join("src/lib.rs")), 0o644 & !mask);
    assert_eq!(mode(&out.join("bin/run.sh")), 0o755 & !mask);
    assert_ne!(mode(&out.join("bin/run.sh")) & 0o100, 0, "executable");
    for (path, target) in [
        ("src/readme", "../README.md"),
        ("tools", "bin"),
        ("src/run", "../tools/run.sh"),
        ("later", "build/output"),
    ] {
        let at = out.join(path);
        assert!(
            std::fs::symlink_metadata(&at).unwrap().is_symlink(),
            "{path}"
        );
        assert_eq!(std::fs::read_link(&at).unwrap(), PathBuf::from(target));
    }
    // The links resolve inside the export, through each other.
    assert_eq!(std::fs::read(out.join("src/readme")).unwrap(), b"# x\n");
    assert_eq!(
        std::fs::read(out.join("src/run")).unwrap(),
        b"#!/bin/sh\necho run\n"
    );
    assert!(std::fs::metadata(out.join("tools")).unwrap().is_dir());
    assert!(
        !out.join("later").exists(),
        "a dangling link stays dangling"
    );
    // The executable runs as one (the export is a working tree).
    let ran = std::process::Command::new(out.join("src/run"))
        .output()
        .unwrap();
    assert_eq!(ran.stdout, b"run\n");
    assert_only(&root, Some(&out));
}

#[test]
fn entries_breaking_the_tree_rules_are_refused_before_anything_is_written() {
    let (_dir, root) = private_dir();
    let outside = root.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let before = tree_hash(&outside);
    let cases = [
        (link("up", "../outside"), None, "\"up\"", "link-escapes"),
        (link("abs", "/etc"), None, "\"abs\"", "absolute-link"),
        (
            link("d", "src"),
            Some(SnapshotFile::regular("d/planted", b"x".to_vec())),
            "\"d/planted\"",
            "file-directory-clash",
        ),
        (link(".git", "src"), None, "\".git\"", "git-segment"),
    ];
    for (bad, extra, path, rule) in cases {
        let mut files = entries();
        files.push(bad);
        files.extend(extra);
        let out = root.join("out");
        let error = sf_cli::write_export(&out, &files).unwrap_err();
        assert_eq!(error.code, "invalid-input", "{path}: {}", error.message);
        assert!(error.message.contains(path), "{}", error.message);
        assert!(error.message.contains(rule), "{}", error.message);
        assert!(!out.exists(), "{path}: something was written");
        assert_only(&root, None);
        assert_eq!(tree_hash(&outside), before);
    }
}

#[test]
fn an_existing_destination_is_kept_and_an_empty_one_replaced() {
    let (_dir, root) = private_dir();
    let out = root.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("mine"), "kept").unwrap();
    let error = sf_cli::write_export(&out, &entries()).unwrap_err();
    assert_eq!(error.code, "exists", "{}", error.message);
    assert_eq!(std::fs::read(out.join("mine")).unwrap(), b"kept");
    std::fs::remove_file(out.join("mine")).unwrap();
    sf_cli::write_export(&out, &entries()).unwrap();
    assert!(
        std::fs::symlink_metadata(out.join("tools"))
            .unwrap()
            .is_symlink()
    );
}
