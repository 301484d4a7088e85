//! A stored commit's tree looked up by path, one Git tree read (re-hashed and decoded) per
//! directory a lookup passes through, each read once: what a freeze asks of its base (is this
//! path a file, a directory, nothing) and what a proposal's priors need (the bytes at a path)
//! cost the paths asked, whatever the size of the tree.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::assurance::trusted::{TreeEntry as EntryKind, TreeLookup};
use crate::contracts::tree_path::EntryMode as Mode;
use crate::contracts::{ObjectStore, ObjectStoreExt as _, ReadScope};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity::MAX_TREE_LEVEL_BYTES;
use super::{Repository, RepositoryError, source};

/// The tree of a commit of a [`Repository`], looked up by path ([`Repository::tree_at`]).
///
/// As a [`TreeLookup`] (which cannot fail) a read that fails answers "nothing there" and is
/// kept: [`TreeAt::fault`] returns it, so a caller that used the lookup must ask for it and
/// refuse what it derived when there is one.
pub struct TreeAt<'r> {
    repository: &'r Repository,
    what: String,
    /// The entries of every directory read so far, by path (`""` the root).
    directories: RefCell<HashMap<String, Rc<Vec<TreeEntry>>>>,
    /// The root tree's id.
    root: ObjectId,
    fault: RefCell<Option<RepositoryError>>,
    /// One read scope for every lookup (a store may keep a reader open across them).
    _reads: ReadScope<'r, dyn ObjectStore>,
}

impl Repository {
    /// The tree of the factory commit `commit`, to be looked up by path.
    pub fn tree_at(&self, commit: &ObjectId) -> Result<TreeAt<'_>, RepositoryError> {
        let reads = self.store.read_scope();
        let root = self.factory_tree(commit)?;
        Ok(TreeAt {
            _reads: reads,
            repository: self,
            what: format!("commit {commit}"),
            directories: RefCell::default(),
            root,
            fault: RefCell::default(),
        })
    }
}

impl TreeAt<'_> {
    /// The kind of the entry at `path` (`""` is the root), or `None` when there is none.
    pub fn find(&self, path: &str) -> Result<Option<EntryKind>, RepositoryError> {
        if path.is_empty() {
            return Ok(Some(EntryKind::Directory));
        }
        Ok(self.locate(path)?.map(|entry| match entry.mode {
            EntryMode::Tree => EntryKind::Directory,
            _ => EntryKind::File,
        }))
    }

    /// The file or link at `path`: its mode and its bytes (a link's target), re-hashed
    /// against its id and within the repository's per-file limit; `None` when there is no
    /// entry there or it is a directory.
    pub fn read(&self, path: &str) -> Result<Option<(Mode, Vec<u8>)>, RepositoryError> {
        let Some(entry) = self.locate(path)? else {
            return Ok(None);
        };
        let mode = match entry.mode {
            EntryMode::File => Mode::Regular,
            EntryMode::Executable => Mode::Executable,
            EntryMode::Symlink => Mode::Symlink,
            _ => return Ok(None),
        };
        let repository = self.repository;
        let limit = repository.identity.settings().limits().max_file_bytes as u64;
        let body = source::read_verified(
            repository.store.as_ref(),
            &[entry.id],
            ObjectKind::Blob,
            limit,
            &format!("{}: {path}", self.what),
            repository.deadline(),
        )?
        .remove(0);
        Ok(Some((mode, body)))
    }

    /// The entry at `path` (not empty), or `None` when there is none.
    fn locate(&self, path: &str) -> Result<Option<TreeEntry>, RepositoryError> {
        let mut directory = String::new();
        let mut id = self.root;
        let mut names = path.split('/').peekable();
        while let Some(name) = names.next() {
            let entries = self.entries(&directory, id)?;
            let Some(entry) = entries.iter().find(|entry| entry.name == name) else {
                return Ok(None);
            };
            if names.peek().is_none() {
                return Ok(Some(entry.clone()));
            }
            if entry.mode != EntryMode::Tree {
                return Ok(None);
            }
            id = entry.id;
            if !directory.is_empty() {
                directory.push('/');
            }
            directory.push_str(name);
        }
        Ok(None)
    }

    /// The first read that failed while this tree was used as a [`TreeLookup`], if any
    /// (taken: asked again, it answers the next one).
    pub fn fault(&self) -> Result<(), RepositoryError> {
        match self.fault.take() {
            Some(fault) => Err(fault),
            None => Ok(()),
        }
    }

    /// The entries of directory `path` (tree `id`), read once.
    fn entries(&self, path: &str, id: ObjectId) -> Result<Rc<Vec<TreeEntry>>, RepositoryError> {
        if let Some(entries) = self.directories.borrow().get(path) {
            return Ok(Rc::clone(entries));
        }
        let repository = self.repository;
        let body = source::read_verified(
            repository.store.as_ref(),
            &[id],
            ObjectKind::Tree,
            MAX_TREE_LEVEL_BYTES,
            &self.what,
            repository.deadline(),
        )?
        .remove(0);
        let entries = git_object::decode_tree(&body).ok_or_else(|| {
            RepositoryError::corrupt(format!(
                "{}: tree {id} is not in Git's canonical form",
                self.what
            ))
        })?;
        let entries = Rc::new(entries);
        self.directories
            .borrow_mut()
            .insert(path.to_owned(), Rc::clone(&entries));
        Ok(entries)
    }
}

impl TreeLookup for TreeAt<'_> {
    fn entry(&self, path: &str) -> Option<EntryKind> {
        match self.find(path) {
            Ok(entry) => entry,
            Err(fault) => {
                self.fault.borrow_mut().get_or_insert(fault);
                None
            }
        }
    }
}
