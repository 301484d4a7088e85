//! A base too large to hold in memory, read twice: first the identities of its leaves (every
//! check of the tree made on them, its trees and tree record built from them, before anything
//! is created or written), then its bytes once more, each body re-hashed against the identity
//! the first read gave and stored a bounded batch at a time. A source that changed between
//! the two reads is refused, never stored.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::contracts::tree_path::EntryMode as Mode;
use crate::contracts::{EncodedObject, ObjectStore};
use crate::git_object::{EntryMode, ObjectId, ObjectKind};

use super::error::RepositoryError;
use super::imported::{ImportedCommit, check_commit};
use super::source::{SourceFile, WalkedLeaf, build_level};
use super::tree_record;

/// The most bytes of blobs one write of a streamed base hands the store. Each write is a pack
/// of the store's: few and large keeps the packs of a base from being merged again soon (a
/// store rolls its small packs up once they are many, which would rewrite the base inside a
/// later, unrelated command), within the memory a batch may take.
const BATCH_BYTES: usize = 16 * 1024 * 1024;
/// The most blobs one write of a streamed base hands the store.
const BATCH_BLOBS: usize = 65_536;

/// What a second read hands each leaf to: its path, its mode and its bytes.
pub type EachLeaf<'a> = dyn FnMut(&str, Mode, &[u8]) -> Result<(), RepositoryError> + 'a;

/// The second read of a base: its leaves' bytes once more.
pub trait LeafBytes {
    /// Reads every leaf again, in any order, handing each (its path, its mode and its
    /// bytes) to `each`, and stops at the first error, `each`'s or its own (a read that
    /// failed is `unavailable`, naming what was read).
    fn read_again(&mut self, each: &mut EachLeaf<'_>) -> Result<(), RepositoryError>;
}

/// A base read twice: the identities of its leaves from the first read (sorted by path),
/// where the second read comes from, and, for a commit of the team's repository, the
/// commit itself (its bytes, tree and parents, checked as [`ImportedCommit::check`] does).
#[derive(Clone)]
pub struct StreamedBase {
    /// Every leaf, sorted by path.
    pub leaves: Vec<WalkedLeaf>,
    /// The commit the leaves are the tree of, when the base is imported.
    pub commit: Option<ImportedHead>,
    /// The second read. Shared so that a request holding it can be cloned; it is read once.
    pub bytes: Arc<Mutex<dyn LeafBytes + Send>>,
}

impl std::fmt::Debug for StreamedBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedBase")
            .field("leaves", &self.leaves.len())
            .field("commit", &self.commit)
            .finish_non_exhaustive()
    }
}

impl PartialEq for StreamedBase {
    /// The same leaves and commit, read again from the same source.
    fn eq(&self, other: &Self) -> bool {
        self.leaves == other.leaves
            && self.commit == other.commit
            && Arc::ptr_eq(&self.bytes, &other.bytes)
    }
}

impl Eq for StreamedBase {}

/// A commit of the team's repository without the files of its tree: [`ImportedCommit`]'s
/// other parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedHead {
    /// The commit's id.
    pub commit: ObjectId,
    /// The commit's bytes, exactly as the source holds them.
    pub body: Vec<u8>,
    /// The tree the commit names.
    pub tree: ObjectId,
    /// The commit's parents.
    pub parents: Vec<ObjectId>,
}

impl ImportedHead {
    /// Checks that the parts agree, as [`ImportedCommit::check`] does.
    pub fn check(&self) -> Result<(), String> {
        check_commit(self.commit, &self.body, self.tree, &self.parents)
    }
}

/// The identities of `files`, sorted by path, without their bytes (a link keeps its target).
pub(super) fn leaves_of(files: &[SourceFile]) -> Vec<WalkedLeaf> {
    let mut leaves: Vec<WalkedLeaf> = files.iter().map(WalkedLeaf::of_file).collect();
    leaves.sort_by(|a, b| a.path.cmp(&b.path));
    leaves
}

impl ImportedCommit {
    /// The commit without its files.
    pub fn head(&self) -> ImportedHead {
        ImportedHead {
            commit: self.commit,
            body: self.body.clone(),
            tree: self.tree,
            parents: self.parents.clone(),
        }
    }

    /// The commit without its files, and its files' identities (sorted by path): what an
    /// [`ImportSource`](super::ImportSource) whose commit is in memory answers.
    pub fn split(&self) -> (ImportedHead, Vec<WalkedLeaf>) {
        (self.head(), leaves_of(&self.files))
    }
}

/// Files already in memory, read again from there.
pub(super) struct InHand<'a>(pub(super) &'a [SourceFile]);

impl LeafBytes for InHand<'_> {
    fn read_again(&mut self, each: &mut EachLeaf<'_>) -> Result<(), RepositoryError> {
        self.0
            .iter()
            .try_for_each(|file| each(&file.path, file.mode, &file.content))
    }
}

/// The trees and tree record of checked `leaves`, without their blobs.
pub(super) struct BuiltBase {
    /// The root tree's id.
    pub tree: ObjectId,
    /// Every tree, then the tree record's objects.
    pub objects: Vec<EncodedObject>,
    /// The tree record's commit.
    pub record: ObjectId,
}

/// Builds the trees and the tree record of checked `leaves`; the error says why the record
/// could not be made.
pub(super) fn build_base(leaves: &[WalkedLeaf]) -> Result<BuiltBase, String> {
    let entries: Vec<(&str, EntryMode, ObjectId)> = leaves
        .iter()
        .map(|leaf| (leaf.path.as_str(), EntryMode::of_leaf(leaf.mode), leaf.blob))
        .collect();
    let mut objects = Vec::new();
    let tree = build_level(&entries, &mut objects);
    objects.sort_by_key(|object| object.id);
    objects.dedup_by_key(|object| object.id);
    let files: Vec<SourceFile> = leaves.iter().map(WalkedLeaf::source_file).collect();
    let records = tree_record::whole(&files)?;
    let record = tree_record::record_objects(&records, &Default::default())?;
    objects.extend(record.objects);
    Ok(BuiltBase {
        tree,
        objects,
        record: record.commit,
    })
}

/// Reads `bytes` again and writes every blob of `leaves` to `store`, a bounded batch at a
/// time, each body's blob id and mode checked against its leaf; a body that differs, a leaf
/// read twice or never, or a path the first read did not give is a `conflict` (the source
/// changed while sf read it). `what` names the source in that error.
pub(super) fn write_blobs(
    store: &dyn ObjectStore,
    leaves: &[WalkedLeaf],
    bytes: &mut dyn LeafBytes,
    what: &str,
    deadline: &dyn Fn() -> Instant,
) -> Result<(), RepositoryError> {
    let mut expected: BTreeMap<&str, &WalkedLeaf> = leaves
        .iter()
        .map(|leaf| (leaf.path.as_str(), leaf))
        .collect();
    let changed = |path: &str, how: &str| RepositoryError::Conflict {
        what: format!("{what}: {path} {how} while sf read it; read it again"),
    };
    let mut batch = Batch::default();
    bytes.read_again(&mut |path, mode, body| {
        let leaf = expected
            .remove(path)
            .ok_or_else(|| changed(path, "appeared or was read twice"))?;
        let object = EncodedObject::new(ObjectKind::Blob, body.to_vec());
        if leaf.mode != mode || object.id != leaf.blob {
            return Err(changed(path, "changed"));
        }
        batch.push(object, store, deadline)
    })?;
    if let Some(path) = expected.keys().next() {
        return Err(changed(path, "went away"));
    }
    batch.flush(store, deadline)
}

/// The blobs waiting to be written, each distinct blob once.
#[derive(Default)]
struct Batch {
    objects: Vec<EncodedObject>,
    bytes: usize,
    written: HashSet<ObjectId>,
}

impl Batch {
    fn push(
        &mut self,
        object: EncodedObject,
        store: &dyn ObjectStore,
        deadline: &dyn Fn() -> Instant,
    ) -> Result<(), RepositoryError> {
        if !self.written.insert(object.id) {
            return Ok(());
        }
        self.bytes += object.body.len();
        self.objects.push(object);
        if self.bytes >= BATCH_BYTES || self.objects.len() >= BATCH_BLOBS {
            self.flush(store, deadline)?;
        }
        Ok(())
    }

    fn flush(
        &mut self,
        store: &dyn ObjectStore,
        deadline: &dyn Fn() -> Instant,
    ) -> Result<(), RepositoryError> {
        if !self.objects.is_empty() {
            store.write_objects(&self.objects, deadline())?;
            self.objects.clear();
            self.bytes = 0;
        }
        Ok(())
    }
}
