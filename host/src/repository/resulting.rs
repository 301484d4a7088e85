//! The tree a proposal leaves, checked against the tree rules and the repository's limits in
//! proportion to the change.
//!
//! The base is a factory commit's tree, which kept every rule when it was made. So the
//! resulting tree can break a rule only where the proposal changed something, and the check
//! looks there: the written paths' own rules and sizes, the totals of the whole (from the
//! tree record), a written path beneath a leaf or a leaf where a directory is, names new to a
//! directory beside names that differ only in case, and, in a tree holding links, any change
//! of an entry's kind that a link's resolution could pass through. Whatever the quick check
//! cannot clear, it does not decide: the whole resulting tree is then listed (its trees and
//! link targets, not its files' bytes) and checked by the same rules as a tree read whole, so
//! that a rejection names exactly the fault a whole check names.

use std::collections::{BTreeMap, BTreeSet};

use crate::contracts::tree_digest::{Node, Totals};
use crate::contracts::tree_path::{self, EntryMode as Mode};
use crate::git_object::{EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity::RepositorySettings;
use super::proposal::Resolved;
use super::source::{self, Listed};
use super::sparse::SparseTree;
use super::{Repository, RepositoryError};

/// A leaf as [`Repository::list_tree`] lists it: its mode, its size (0 for a file of the
/// base, which is within the limits), and a link's target.
type ListedLeaf = (Mode, u64, Vec<u8>);

impl Repository {
    /// Checks the tree `resolved` leaves on `base`: `directories` are the resulting tree's
    /// directories on the changed paths (their Git entries), `totals` its totals.
    pub(crate) fn check_resulting(
        &self,
        base: &SparseTree,
        resolved: &[Resolved],
        directories: &BTreeMap<String, (ObjectId, Vec<TreeEntry>)>,
        totals: Totals,
        what: &str,
    ) -> Result<(), RepositoryError> {
        let settings = self.identity.settings();
        if quick_check(base, resolved, directories, totals, &settings) {
            return Ok(());
        }
        let mut leaves = self.list_tree(base.tree, what)?;
        for edit in resolved {
            leaves.remove(&edit.path);
            if let Some(next) = &edit.next {
                leaves.insert(
                    edit.path.clone(),
                    (next.mode, next.bytes, next.content.clone()),
                );
            }
        }
        source::first_fault(source::check_listing(
            leaves.iter().map(|(path, (mode, bytes, content))| Listed {
                path,
                mode: *mode,
                bytes: *bytes,
                content,
            }),
            (totals.leaves, totals.bytes),
            &settings.limits(),
            settings.policy(),
        ))
    }

    /// Every leaf of the stored tree `root`: its mode, and for a link its target (a file's
    /// size and bytes are left out: a factory commit's files are within the limits). Every
    /// tree and link read is re-hashed.
    fn list_tree(
        &self,
        root: ObjectId,
        what: &str,
    ) -> Result<BTreeMap<String, ListedLeaf>, RepositoryError> {
        let mut leaves = BTreeMap::new();
        let mut links = Vec::new();
        self.walk_levels(
            root,
            what,
            |_| true,
            |dir, _, entries| {
                for entry in entries {
                    let path = super::tree_record::join(dir, &entry.name);
                    match entry.mode.leaf() {
                        None => {}
                        Some(Mode::Symlink) => links.push((path, entry.id)),
                        Some(mode) => {
                            leaves.insert(path, (mode, 0, Vec::new()));
                        }
                    }
                }
            },
        )?;
        let ids: Vec<ObjectId> = links.iter().map(|(_, id)| *id).collect();
        let targets = source::read_verified(
            self.store.as_ref(),
            &ids,
            ObjectKind::Blob,
            (tree_path::MAX_LINK_TARGET_BYTES as u64).saturating_mul(ids.len() as u64),
            what,
            self.deadline(),
        )?;
        for ((path, _), target) in links.into_iter().zip(targets) {
            leaves.insert(path, (Mode::Symlink, target.len() as u64, target));
        }
        Ok(leaves)
    }
}

/// Whether the resulting tree certainly keeps every rule, judged from the changed paths
/// (module documentation); `false` when it may not.
fn quick_check(
    base: &SparseTree,
    resolved: &[Resolved],
    directories: &BTreeMap<String, (ObjectId, Vec<TreeEntry>)>,
    totals: Totals,
    settings: &RepositorySettings,
) -> bool {
    let limits = settings.limits();
    let policy = settings.policy();
    if totals.leaves > limits.max_files as u64 || totals.bytes > limits.max_source_bytes as u64 {
        return false;
    }
    let written: BTreeMap<&str, Mode> = resolved
        .iter()
        .filter_map(|edit| {
            edit.next
                .as_ref()
                .map(|next| (edit.path.as_str(), next.mode))
        })
        .collect();
    let deleted: BTreeSet<&str> = resolved
        .iter()
        .filter(|edit| edit.next.is_none())
        .map(|edit| edit.path.as_str())
        .collect();
    for edit in resolved {
        let Some(next) = &edit.next else { continue };
        if next.bytes > limits.max_file_bytes as u64
            || tree_path::check_path(&edit.path, Some(next.mode)).is_err()
        {
            return false;
        }
        // Nothing beneath a leaf that stays, or one written.
        for (at, _) in edit.path.match_indices('/') {
            let prefix = &edit.path[..at];
            let base_leaf = base
                .node(prefix)
                .is_some_and(|node| !matches!(node, Node::Directory { .. }));
            if written.contains_key(prefix) || (base_leaf && !deleted.contains(prefix)) {
                return false;
            }
        }
        // A leaf where a directory was only when everything below it is deleted.
        if let Some(Node::Directory { totals, .. }) = base.node(&edit.path) {
            let below = format!("{}/", edit.path);
            let gone = deleted
                .iter()
                .filter(|path| path.starts_with(below.as_str()))
                .count() as u64;
            if gone != totals.leaves {
                return false;
            }
        }
    }
    // A tree holding links: any change of an entry's kind may change where a link resolves,
    // except a file where nothing was (resolution stops at a file) or a file kept a file.
    if totals.links > 0 {
        let is_file = |mode: Option<Mode>| matches!(mode, Some(Mode::Regular | Mode::Executable));
        let kind_changed = resolved.iter().any(|edit| {
            let prior = edit.prior.as_ref().map(|file| file.mode);
            let next = edit.next.as_ref().map(|file| file.mode);
            !(is_file(next) && (prior.is_none() || is_file(prior)))
        });
        // Under a policy allowing case collisions, names colliding in two directories that
        // differ only in case are not siblings; a link among them is refused, so check whole.
        if kind_changed || policy.allow_case_collisions {
            return false;
        }
    }
    // Names new to a directory, beside names that differ only in case.
    for (dir, (_, entries)) in directories {
        let before: BTreeSet<&str> = base
            .index
            .get(dir)
            .map(|(_, entries)| entries.iter().map(|entry| entry.name.as_str()).collect())
            .unwrap_or_default();
        if entries
            .iter()
            .all(|entry| before.contains(entry.name.as_str()))
        {
            continue;
        }
        let mut spellings: BTreeMap<String, Vec<&TreeEntry>> = BTreeMap::new();
        for entry in entries {
            spellings
                .entry(entry.name.to_lowercase())
                .or_default()
                .push(entry);
        }
        for group in spellings.values().filter(|group| group.len() > 1) {
            let new = group
                .iter()
                .any(|entry| !before.contains(entry.name.as_str()));
            let link = group.iter().any(|entry| entry.mode == EntryMode::Symlink);
            if new && (link || !policy.allow_case_collisions) {
                return false;
            }
        }
    }
    true
}
