//! The Rust sources of a directory, for the tests that read the code itself (the lints, the
//! crate sizes, the command line's modules).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, sorted; none when `dir` does not exist.
pub fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The non-empty lines of every `.rs` file below `dir`.
pub fn non_empty_lines(dir: &Path) -> usize {
    sources(dir)
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            text.lines().filter(|line| !line.trim().is_empty()).count()
        })
        .sum()
}
