//! What a commit of a foreign Git repository changed against its first parent (`sf propose
//! --commit`): the two trees read level by level from the root, descending only where an
//! entry differs, then the changed files' blobs in one read. Every object is re-hashed by the
//! reader; an entry the tree model does not hold (a submodule) is refused, naming it.

use std::collections::{BTreeMap, BTreeSet};

use crate::contracts::tree_path::EntryMode as Mode;
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};
use crate::git_source::{GitSource, GitSourceError};
use crate::repository::tree_record::join;
use crate::repository::{ImportedHead, MAX_TREE_LEVEL_BYTES, RepositoryLimits, commit_heads};
use crate::repository::{MAX_IMPORTED_COMMIT_BYTES, SourceFault};

/// One path a commit changed: its entry after the commit (a file's or link's mode and bytes),
/// or `None` where the commit removed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitChange {
    /// The path in the tree.
    pub path: String,
    /// The entry after the commit.
    pub after: Option<(Mode, Vec<u8>)>,
}

/// A commit and what it changed against its first parent (everything, for a root commit),
/// sorted by path.
#[derive(Clone, Debug)]
pub struct CommitChanges {
    /// The commit.
    pub head: ImportedHead,
    /// The paths it changed.
    pub changes: Vec<CommitChange>,
}

impl GitSource {
    /// The commit `rev` names and what it changed against its first parent. At most
    /// `limits.max_files` paths and `limits.max_source_bytes` bytes of new content are read.
    pub fn commit_changes(
        &mut self,
        rev: &str,
        limits: &RepositoryLimits,
    ) -> Result<CommitChanges, GitSourceError> {
        let head = self.read_head(rev)?;
        let parent_tree = match head.parents.first() {
            None => None,
            Some(parent) => {
                let body = self.read_one(*parent, ObjectKind::Commit, MAX_IMPORTED_COMMIT_BYTES)?;
                let heads = commit_heads(&body).map_err(|rule| GitSourceError::Commit {
                    commit: *parent,
                    rule: rule.to_owned(),
                })?;
                Some(heads.tree)
            }
        };
        let mut leaves = Vec::new();
        self.diff_level(String::new(), parent_tree, Some(head.tree), &mut leaves)?;
        if leaves.len() > limits.max_files {
            return Err(unsupported(
                "(the commit)",
                format!(
                    "changes {} paths; a tree holds at most {}",
                    leaves.len(),
                    limits.max_files
                ),
            ));
        }
        let ids: Vec<ObjectId> = leaves
            .iter()
            .filter_map(|(_, after)| *after)
            .map(|(_, id)| id)
            .collect();
        let mut bodies = self
            .reader()
            .read(&ids, ObjectKind::Blob, limits.max_source_bytes as u64)?
            .into_iter();
        let mut changes = Vec::with_capacity(leaves.len());
        for (path, after) in leaves {
            let after = match after {
                None => None,
                // The reader answers one body per id asked, in order.
                Some((mode, id)) => Some((
                    mode,
                    bodies
                        .next()
                        .ok_or_else(|| unsupported(&path, format!("blob {id} was not answered")))?,
                )),
            };
            changes.push(CommitChange { path, after });
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(CommitChanges { head, changes })
    }

    /// Compares the trees `old` and `new` (either may be absent) at `prefix`, adding every
    /// leaf that differs: its path and its entry in `new` (mode and blob id), or `None`.
    fn diff_level(
        &mut self,
        prefix: String,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        leaves: &mut Vec<(String, Option<(Mode, ObjectId)>)>,
    ) -> Result<(), GitSourceError> {
        if old == new {
            return Ok(());
        }
        let by_name = |entries: Vec<TreeEntry>| -> BTreeMap<String, TreeEntry> {
            entries
                .into_iter()
                .map(|entry| (entry.name.clone(), entry))
                .collect()
        };
        let old = by_name(self.entries(&prefix, old)?);
        let new = by_name(self.entries(&prefix, new)?);
        let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        for name in names {
            let path = join(&prefix, name);
            let (before, after) = (old.get(name), new.get(name));
            if before == after {
                continue;
            }
            let tree = |entry: Option<&TreeEntry>| {
                entry
                    .filter(|entry| entry.mode == EntryMode::Tree)
                    .map(|entry| entry.id)
            };
            let leaf = |entry: Option<&TreeEntry>| {
                entry.and_then(|entry| leaf_mode(entry.mode).map(|mode| (mode, entry.id)))
            };
            // A directory on either side is compared below; a leaf on the new side is the
            // path's new entry, and a leaf only on the old side is removed.
            if tree(before).is_some() || tree(after).is_some() {
                self.diff_level(path.clone(), tree(before), tree(after), leaves)?;
            }
            match (leaf(before), leaf(after)) {
                (_, Some(entry)) => leaves.push((path, Some(entry))),
                (Some(_), None) => leaves.push((path, None)),
                (None, None) => {}
            }
        }
        Ok(())
    }

    /// The entries of tree `id` at `prefix` (none for an absent tree), in the tree model.
    fn entries(
        &mut self,
        prefix: &str,
        id: Option<ObjectId>,
    ) -> Result<Vec<TreeEntry>, GitSourceError> {
        let Some(id) = id else {
            return Ok(Vec::new());
        };
        let body = self.read_one(id, ObjectKind::Tree, MAX_TREE_LEVEL_BYTES)?;
        git_object::decode_tree(&body).ok_or_else(|| {
            unsupported(
                if prefix.is_empty() {
                    "(the root)"
                } else {
                    prefix
                },
                format!("tree {id} holds an entry the tree model does not (a submodule, say)"),
            )
        })
    }

    fn read_one(
        &mut self,
        id: ObjectId,
        kind: ObjectKind,
        budget: u64,
    ) -> Result<Vec<u8>, GitSourceError> {
        let mut bodies = self.reader().read(&[id], kind, budget)?;
        Ok(bodies.remove(0))
    }
}

fn leaf_mode(mode: EntryMode) -> Option<Mode> {
    match mode {
        EntryMode::File => Some(Mode::Regular),
        EntryMode::Executable => Some(Mode::Executable),
        EntryMode::Symlink => Some(Mode::Symlink),
        EntryMode::Tree => None,
    }
}

fn unsupported(path: &str, rule: String) -> GitSourceError {
    GitSourceError::Unsupported(vec![SourceFault::new(
        crate::repository::Rejection::UnsupportedEntry,
        path,
        rule,
    )])
}
