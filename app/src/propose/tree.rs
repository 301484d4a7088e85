//! A directory as a proposal's source (a checkout: its root's own `.git` is not part of it):
//! every path whose entry differs from the Slice's base (a path the directory does not hold
//! is removed), found by comparing the directory's
//! identities with the base's listing, then the changed files read again, each checked
//! against the identity the first read gave.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sf_host::git_object::ObjectId;
use sf_host::repository::{LeafBytes, Repository, WalkedLeaf};
use sf_host::source_dir::{SourceDirBytes, list_work_tree};

use super::changes::{After, Change};
use crate::error::{AppError, repository_error, source_dir_error};

/// The changes that make the base `base` hold the directory `dir`.
pub(super) fn changes(
    repository: &Repository,
    base: &ObjectId,
    dir: &Path,
) -> Result<Vec<Change>, AppError> {
    let limits = repository.identity().settings().limits();
    let leaves = list_work_tree(dir, &limits).map_err(|error| source_dir_error("--tree", error))?;
    // The base's blob ids come from its trees: no file of the base is read.
    let listing = repository
        .list_blob_ids(base)
        .map_err(|error| repository_error(&format!("the Slice's base {base}"), &error))?;
    let based: BTreeMap<&str, _> = listing
        .iter()
        .map(|(path, mode, blob)| (path.as_str(), (*mode, *blob)))
        .collect();
    let changed: BTreeMap<&str, _> = leaves
        .iter()
        .filter(|leaf| based.get(leaf.path.as_str()) != Some(&(leaf.mode, leaf.blob)))
        .map(|leaf| (leaf.path.as_str(), leaf))
        .collect();
    let held: BTreeSet<&str> = leaves.iter().map(|leaf| leaf.path.as_str()).collect();
    let mut changes: Vec<Change> = based
        .keys()
        .filter(|path| !held.contains(*path))
        .map(|path| Change {
            path: (*path).to_owned(),
            after: After::Absent,
        })
        .collect();
    SourceDirBytes::work_tree(dir, &limits)
        .read_again(&mut |path, mode, bytes| {
            if let Some(leaf) = changed.get(path) {
                if WalkedLeaf::of(path.to_owned(), mode, bytes) != **leaf {
                    return Err(sf_host::repository::RepositoryError::Conflict {
                        what: format!("--tree: {path} changed while sf read it; propose again"),
                    });
                }
                changes.push(Change {
                    path: path.to_owned(),
                    after: After::Entry(mode, bytes.to_vec()),
                });
            }
            Ok(())
        })
        .map_err(|error| {
            let mut app = repository_error("--tree", &error);
            app.code = "changed-while-read".into();
            app
        })?;
    if changes
        .iter()
        .filter(|change| change.after != After::Absent)
        .count()
        != changed.len()
    {
        return Err(AppError::new(
            "changed-while-read",
            "--tree: a file went away while sf read it; propose again",
        ));
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(changes)
}
