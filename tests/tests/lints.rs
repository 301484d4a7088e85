//! The workspace's lints hold for every crate: each member takes the one `[workspace.lints]`
//! table, and every library, program and build script whose crate writes no `unsafe`
//! forbids it in its root, so that a later edit cannot bring unsafe code in unnoticed.
//! (Examples and integration tests are crates of their own that call the C library directly,
//! as a test of a sandbox must; they are not held to it.)

mod metadata_support;
mod source_files;

use std::path::Path;

use metadata_support::Workspace;
use source_files::sources;

/// Whether the Rust source `text` uses `unsafe` as code (a block, a function, an impl, a
/// trait or an attribute), as opposed to a word in a comment or a string.
fn uses_unsafe(text: &str) -> bool {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .any(|code| {
            [
                "unsafe {",
                "unsafe fn",
                "unsafe impl",
                "unsafe trait",
                "unsafe extern",
                "#[unsafe(",
            ]
            .iter()
            .any(|form| code.contains(form))
        })
}

#[test]
fn every_member_takes_the_workspace_lints() {
    let workspace = Workspace::read();
    for (name, package) in &workspace.packages {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap());
        let text = std::fs::read_to_string(manifest).unwrap();
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(
            table
                .get("lints")
                .and_then(|lints| lints.get("workspace"))
                .and_then(toml::Value::as_bool),
            Some(true),
            "{name}: its Cargo.toml says [lints] workspace = true"
        );
    }
}

#[test]
fn crates_without_unsafe_code_forbid_it() {
    let workspace = Workspace::read();
    let mut forbidding = 0;
    for (name, package) in &workspace.packages {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap());
        let src = manifest.parent().unwrap().join("src");
        let writes_unsafe = sources(&src)
            .iter()
            .any(|file| uses_unsafe(&std::fs::read_to_string(file).unwrap()));
        if writes_unsafe {
            continue;
        }
        for target in package["targets"].as_array().unwrap() {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|kind| kind.as_str())
                .collect();
            if kinds
                .iter()
                .any(|kind| ["example", "test", "bench"].contains(kind))
            {
                continue;
            }
            let root = Path::new(target["src_path"].as_str().unwrap());
            let text = std::fs::read_to_string(root).unwrap();
            assert!(
                text.lines()
                    .any(|line| line.trim() == "#![forbid(unsafe_code)]"),
                "{name}: {} writes no unsafe code, so it forbids it",
                root.display()
            );
            forbidding += 1;
        }
    }
    assert!(forbidding >= 10, "{forbidding} roots checked");
}

#[test]
fn unsafe_is_told_from_the_word() {
    assert!(uses_unsafe("let x = unsafe { f() };"));
    assert!(uses_unsafe("#[unsafe(no_mangle)]"));
    assert!(!uses_unsafe("// unsafe { here }"));
    assert!(!uses_unsafe("Self::UnsafeStore => \"unsafe-store\","));
}
