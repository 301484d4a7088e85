//! Puts the plugin's manifest beside the library cargo builds: the build script of every
//! plugin crate in this tree (each names it with `build = …`; a plugin outside the tree keeps
//! a copy, as `examples/out_of_tree_plugin/build.rs` does).
//!
//! sf reads a plugin's manifest file before it opens the library, and looks for it next to
//! the library: `lib<crate>.sf-plugin.json` beside `lib<crate>.so`. Cargo places the library
//! in `<target>/<profile>/`, three levels above this script's OUT_DIR
//! (`<target>/<profile>/build/<package>-<hash>/out`), so the manifest is copied there. The
//! same file is compiled into the library by `export_plugin!`, and sf refuses the plugin
//! unless the two are byte-identical.

#![forbid(unsafe_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=sf-plugin.json");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("sf-plugin.json");
    let bytes = std::fs::read(&manifest).expect("the plugin's sf-plugin.json");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let profile_dir = out_dir
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is <target>/<profile>/build/<package>-<hash>/out");
    let name = std::env::var("CARGO_PKG_NAME")
        .expect("CARGO_PKG_NAME")
        .replace('-', "_");
    let destination = profile_dir.join(format!("lib{name}.sf-plugin.json"));
    std::fs::write(&destination, bytes).expect("writing the manifest beside the library");
    // sf refuses plugin files that others may write; do not inherit a permissive umask.
    std::fs::set_permissions(&destination, std::fs::Permissions::from_mode(0o644))
        .expect("chmod 644 on the manifest");
}
