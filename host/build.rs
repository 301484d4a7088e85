//! Build script of sf-host: computes the collector closure.
//!
//! The collector closure is the `sha256:` of the canonical JSON
//! `{"collector":"sf-repository-collector/1","files":[{"path":"host/src/…","sha256":"sha256:…"},…],"sf":"<version>"}`
//! over the source files the repository collector is built from: starting at
//! `src/collector/mod.rs`, every module file a listed file declares (`mod x;`) or names by
//! path (`crate::a::b`, `super::c`), transitively, resolved to the deepest module file that
//! exists, and every file of the sf-contracts crate (`contracts/src/…`); paths are relative to
//! the workspace. `src/lib.rs` is left out (it only declares modules; following it would take in
//! every module of the crate), and the sf version is included instead. Records name this
//! digest, so they are never attributed to other code; any change to one of these files
//! changes it. The output is `$OUT_DIR/collector_closure.rs`, included by
//! `src/collector/closure.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

const ROOT_MODULE: &str = "collector/mod.rs";

/// The names sf-host's `lib.rs` re-exports from sf-git, whose files are not in the closure
/// (those it re-exports from sf-contracts and sf-io are, wholly).
const UNCOVERED_REEXPORTS: &[&str] = &["git_process", "foreign_repository"];
const COLLECTOR_NAME: &str = "sf-repository-collector/1";

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let src = manifest_dir.join("src");
    let files = closure_files(&src);
    let mut listed = BTreeMap::new();
    for file in &files {
        let bytes = std::fs::read(src.join(file)).expect("a listed source file is readable");
        listed.insert(
            format!("host/src/{file}"),
            format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
        );
    }
    // The contracts crate is the collector's vocabulary (its records, digests and encodings)
    // and sf-io its file access: every file of both is in the closure, so that no change to
    // them goes unattributed. sf-git is not, so the collector may not name it.
    for crate_dir in ["contracts", "io"] {
        let dir = manifest_dir.join("..").join(crate_dir).join("src");
        println!("cargo:rerun-if-changed=../{crate_dir}/src");
        for file in rust_files(&dir, "") {
            let bytes = std::fs::read(dir.join(&file)).expect("a source file is readable");
            listed.insert(
                format!("{crate_dir}/src/{file}"),
                format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
            );
        }
    }
    for file in &files {
        let text = std::fs::read_to_string(src.join(file)).expect("a listed source file");
        for name in UNCOVERED_REEXPORTS {
            assert!(
                !without_line_comments(&text).contains(&format!("crate::{name}")),
                "src/{file} names crate::{name}, whose crate is not in the collector closure"
            );
        }
        assert!(
            !text.contains("sf_git"),
            "src/{file} names sf_git, which is not in the collector closure"
        );
    }
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets it");
    // Canonical JSON by hand: keys in byte order, and every string here is plain ASCII
    // without quotes, backslashes or control characters (paths in the crate's grammar, hex
    // digests, a semantic version), so no string needs escaping.
    let entries: Vec<String> = listed
        .iter()
        .map(|(path, digest)| format!("{{\"path\":\"{path}\",\"sha256\":\"{digest}\"}}"))
        .collect();
    let document = format!(
        "{{\"collector\":\"{COLLECTOR_NAME}\",\"files\":[{}],\"sf\":\"{version}\"}}",
        entries.join(",")
    );
    for text in listed.keys().chain([&version]) {
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\'),
            "{text:?} would need escaping"
        );
    }
    let closure = format!(
        "sha256:{}",
        hex::encode(Sha256::digest(document.as_bytes()))
    );
    let mut out = String::new();
    out.push_str(
        "/// The source files of the collector closure with their `sha256:` digests, by path.\n",
    );
    out.push_str("pub const COLLECTOR_SOURCES: &[(&str, &str)] = &[\n");
    for (path, digest) in &listed {
        out.push_str(&format!("    ({path:?}, {digest:?}),\n"));
    }
    out.push_str("];\n");
    out.push_str("/// The collector closure computed at build time.\n");
    out.push_str(&format!(
        "pub const COLLECTOR_CLOSURE: &str = {closure:?};\n"
    ));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it"));
    std::fs::write(out_dir.join("collector_closure.rs"), out).expect("OUT_DIR is writable");
}

/// Every `.rs` file below `dir`, as paths relative to it, in a stable order.
fn rust_files(dir: &Path, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|error| panic!("{dir:?}: {error}"));
    for entry in entries {
        let entry = entry.expect("a directory entry is readable");
        let name = entry
            .file_name()
            .into_string()
            .expect("source file names are UTF-8");
        let kind = entry.file_type().expect("a directory entry has a type");
        if kind.is_dir() {
            found.extend(rust_files(&entry.path(), &format!("{prefix}{name}/")));
        } else if kind.is_file() && name.ends_with(".rs") {
            found.insert(format!("{prefix}{name}"));
        }
    }
    found
}

/// The module path of a file under `src` (`repository/manifest.rs` → `[repository,
/// manifest]`, `collector/mod.rs` → `[collector]`).
fn module_of(file: &str) -> Vec<String> {
    let trimmed = file.strip_suffix(".rs").unwrap_or(file);
    let mut parts: Vec<String> = trimmed.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

/// The deepest existing module file for a module path, as a path relative to `src`.
fn resolve(src: &Path, path: &[String]) -> Option<String> {
    for depth in (1..=path.len()).rev() {
        let joined = path[..depth].join("/");
        for candidate in [format!("{joined}.rs"), format!("{joined}/mod.rs")] {
            if src.join(&candidate).is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The identifiers of a `::`-separated path starting at `at`.
fn path_at(text: &[u8], mut at: usize) -> Vec<String> {
    let mut parts = Vec::new();
    loop {
        let start = at;
        while at < text.len() && is_ident_byte(text[at]) {
            at += 1;
        }
        if at == start {
            break;
        }
        parts.push(String::from_utf8_lossy(&text[start..at]).into_owned());
        if text[at..].starts_with(b"::") {
            at += 2;
        } else {
            break;
        }
    }
    parts
}

/// Every occurrence of `prefix` (`crate::`, `super::`) that starts a path.
fn paths_after(text: &[u8], prefix: &[u8]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..]
        .windows(prefix.len())
        .position(|window| window == prefix)
    {
        let start = at + offset;
        at = start + prefix.len();
        if start > 0 && is_ident_byte(text[start - 1]) {
            continue;
        }
        found.push(path_at(text, at));
    }
    found
}

fn without_line_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn closure_files(src: &Path) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from([ROOT_MODULE.to_owned()]);
    while let Some(file) = queue.pop_front() {
        if file == "lib.rs" || !seen.insert(file.clone()) {
            continue;
        }
        let text = std::fs::read_to_string(src.join(&file))
            .unwrap_or_else(|error| panic!("reading src/{file}: {error}"));
        let code = without_line_comments(&text);
        let module = module_of(&file);
        let mut targets: Vec<Vec<String>> = Vec::new();
        for line in code.lines() {
            let line = line.trim();
            let declared = ["mod ", "pub mod ", "pub(crate) mod "]
                .iter()
                .find_map(|prefix| line.strip_prefix(prefix))
                .and_then(|rest| rest.strip_suffix(';'));
            if let Some(name) = declared {
                let mut path = module.clone();
                path.push(name.trim().to_owned());
                targets.push(path);
            }
        }
        for path in paths_after(code.as_bytes(), b"crate::") {
            targets.push(path);
        }
        for path in paths_after(code.as_bytes(), b"super::") {
            let mut parent = module.clone();
            parent.pop();
            parent.extend(path);
            targets.push(parent);
        }
        for target in targets {
            if let Some(resolved) = resolve(src, &target) {
                queue.push_back(resolved);
            }
        }
    }
    seen
}
