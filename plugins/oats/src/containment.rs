//! Containment: every declared path (skills, agents, inject, `helperInjection.path`, and the
//! script of every command and hook) exists and resolves inside the artifact after symbolic
//! links, and so does every symbolic link anywhere in the artifact.
//!
//! Lexical escapes (absolute, `..`, drive letters, `~`, backslash, NUL) are refused by the
//! manifest parser with `path-escape`. Here the file system is asked:
//! - a declared path that does not exist: `capability-not-self-contained`, naming the field
//!   and the file;
//! - a declared path whose real path leaves the root: `capability-not-self-contained`;
//! - a declared directory is walked: contained directory links are followed into their
//!   targets (a set of visited real directories stops cycles), and every entry's real path
//!   must stay inside; a broken link, or one that resolves outside, refuses the capability;
//! - every other link of the artifact must resolve inside too, because the whole artifact
//!   becomes the program a run reads.
//!
//! The check runs at registration and again before every run. A real path is only a
//! snapshot of the tree; the run itself never reads the live tree (it reads the bytes the
//! integrity walk hashed, see [`crate::artifact`]), so a link planted after this check cannot
//! widen what a run sees.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{ErrorCode, OatsError, Result};
use crate::grammar;
use crate::manifest::Manifest;

/// The most entries one containment walk visits.
pub const MAX_WALK_ENTRIES: usize = 100_000;

fn outside(field: &str, message: String) -> OatsError {
    OatsError::new(ErrorCode::NotSelfContained, field, message)
}

/// Checks every declared path of `manifest` and every link under `root`. `root` must be the
/// canonical path of the artifact.
pub fn check(root: &Path, manifest: &Manifest) -> Result<()> {
    for (field, path, must_be_file) in manifest.declared_paths() {
        check_declared(root, &field, &path, must_be_file)?;
    }
    check_links(root)
}

/// Checks one declared path.
pub fn check_declared(
    root: &Path,
    field: &str,
    declared: &str,
    must_be_file: Option<bool>,
) -> Result<()> {
    if let Some(problem) = grammar::lexical_escape(declared) {
        return Err(OatsError::new(
            ErrorCode::PathEscape,
            field,
            format!("{declared:?} {problem}"),
        ));
    }
    let joined = grammar::segments(declared)
        .iter()
        .fold(root.to_path_buf(), |path, segment| path.join(segment));
    if joined.symlink_metadata().is_err() {
        return Err(outside(
            field,
            format!(
                "{declared:?} does not exist in the capability directory {}; a capability must ship every file it declares",
                root.display()
            ),
        ));
    }
    let real = real_inside(root, &joined, field, declared)?;
    let metadata = fs::metadata(&real).map_err(|error| OatsError::io(real.display(), &error))?;
    match must_be_file {
        Some(true) if !metadata.is_file() => {
            return Err(outside(
                field,
                format!("{declared:?} is not a regular file"),
            ));
        }
        Some(false) if !metadata.is_dir() => {
            return Err(outside(field, format!("{declared:?} is not a directory")));
        }
        _ => {}
    }
    if metadata.is_dir() {
        let mut visited = BTreeSet::new();
        let mut budget = MAX_WALK_ENTRIES;
        walk(root, &real, field, declared, &mut visited, &mut budget)?;
    }
    Ok(())
}

/// The real path of `path`, which must exist and lie inside `root`.
fn real_inside(root: &Path, path: &Path, field: &str, declared: &str) -> Result<PathBuf> {
    let real = fs::canonicalize(path).map_err(|error| {
        outside(
            field,
            format!(
                "{declared:?}: {} cannot be resolved ({error}); a broken link is not self-contained",
                path.display()
            ),
        )
    })?;
    if !real.starts_with(root) {
        return Err(outside(
            field,
            format!(
                "{declared:?}: {} resolves to {}, outside the capability root {}; the path escapes its integrity boundary",
                path.display(),
                real.display(),
                root.display()
            ),
        ));
    }
    Ok(real)
}

fn walk(
    root: &Path,
    directory: &Path,
    field: &str,
    declared: &str,
    visited: &mut BTreeSet<PathBuf>,
    budget: &mut usize,
) -> Result<()> {
    if !visited.insert(directory.to_path_buf()) {
        return Ok(());
    }
    let entries =
        fs::read_dir(directory).map_err(|error| OatsError::io(directory.display(), &error))?;
    for entry in entries {
        let entry = entry.map_err(|error| OatsError::io(directory.display(), &error))?;
        *budget = budget.checked_sub(1).ok_or_else(|| {
            OatsError::new(
                ErrorCode::ArtifactTooLarge,
                field,
                format!("{declared:?} holds more than {MAX_WALK_ENTRIES} entries"),
            )
        })?;
        let path = entry.path();
        let real = real_inside(root, &path, field, declared)?;
        if fs::metadata(&real).is_ok_and(|metadata| metadata.is_dir()) {
            walk(root, &real, field, declared, visited, budget)?;
        }
    }
    Ok(())
}

/// Checks that every symbolic link under `root` (not following links while walking)
/// resolves inside `root`.
pub fn check_links(root: &Path) -> Result<()> {
    let mut stack = vec![root.to_path_buf()];
    let mut budget = MAX_WALK_ENTRIES;
    while let Some(directory) = stack.pop() {
        let entries =
            fs::read_dir(&directory).map_err(|error| OatsError::io(directory.display(), &error))?;
        for entry in entries {
            let entry = entry.map_err(|error| OatsError::io(directory.display(), &error))?;
            budget = budget.checked_sub(1).ok_or_else(|| {
                OatsError::new(
                    ErrorCode::ArtifactTooLarge,
                    root.display().to_string(),
                    format!("the artifact holds more than {MAX_WALK_ENTRIES} entries"),
                )
            })?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|error| OatsError::io(path.display(), &error))?;
            let relative = path
                .strip_prefix(root)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            if kind.is_symlink() {
                real_inside(root, &path, &relative, &relative)?;
            } else if kind.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(())
}
