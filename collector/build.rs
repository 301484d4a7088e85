//! Build script of sf-collector: computes the collector closure.
//!
//! The collector closure is the `sha256:` of the canonical JSON
//! `{"collector":"sf-repository-collector/1","files":[{"path":"collector/src/…","sha256":"sha256:…"},…],"sf":"<version>"}`
//! over every source file of this crate and of the sf crates it depends on (sf-candidate,
//! sf-contracts and sf-io: what a sealed Candidate is, the records and encodings, the file
//! access), with paths relative to the workspace, sorted. The crate boundary decides what is
//! in it: Cargo lets the collector use nothing else of sf, so nothing else can write a record
//! it is attributed to, and an edit anywhere else (integration, delivery, import, the plugin
//! host, the command line) leaves it as it is. The output is `$OUT_DIR/collector_closure.rs`,
//! included by `src/collector/closure.rs`.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// The crates whose sources the closure holds, as directories of the workspace: this one
/// first, then its sf dependencies (tests/tests/layers.rs holds the list to Cargo's).
const CRATES: &[&str] = &["collector", "candidate", "contracts", "io"];
const COLLECTOR_NAME: &str = "sf-repository-collector/1";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it");
    let workspace = Path::new(&manifest_dir).join("..");
    let mut listed = BTreeMap::new();
    for crate_dir in CRATES {
        let src = workspace.join(crate_dir).join("src");
        println!("cargo:rerun-if-changed=../{crate_dir}/src");
        for file in rust_files(&src, "") {
            let bytes = std::fs::read(src.join(&file)).expect("a source file is readable");
            listed.insert(
                format!("{crate_dir}/src/{file}"),
                format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
            );
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets it");
    let document = canonical_document(&listed, &version);
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
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets it");
    std::fs::write(Path::new(&out_dir).join("collector_closure.rs"), out)
        .expect("OUT_DIR is writable");
}

/// Every `.rs` file below `dir`, as paths relative to it (with `prefix`), sorted.
fn rust_files(dir: &Path, prefix: &str) -> Vec<String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a source directory is readable")
        .map(|entry| entry.expect("a directory entry"))
        .collect();
    entries.sort_by_key(|entry| entry.file_name());
    let mut files = Vec::new();
    for entry in entries {
        let name = entry.file_name().into_string().expect("UTF-8 source names");
        let path = format!("{prefix}{name}");
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            files.extend(rust_files(&entry.path(), &format!("{path}/")));
        } else if kind.is_file() && name.ends_with(".rs") {
            files.push(path);
        }
    }
    files
}

/// The canonical JSON of the closure document, by hand: keys in byte order, and every string
/// here plain ASCII without quotes, backslashes or control characters (source paths, hex
/// digests, a semantic version), so that none needs escaping.
fn canonical_document(files: &BTreeMap<String, String>, version: &str) -> String {
    for text in files.keys().chain([&version.to_owned()]) {
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\'),
            "{text:?} would need escaping"
        );
    }
    let entries: Vec<String> = files
        .iter()
        .map(|(path, digest)| format!("{{\"path\":\"{path}\",\"sha256\":\"{digest}\"}}"))
        .collect();
    format!(
        "{{\"collector\":\"{COLLECTOR_NAME}\",\"files\":[{}],\"sf\":\"{version}\"}}",
        entries.join(",")
    )
}
