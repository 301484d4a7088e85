//! Walking stored trees back: every object read from the owned store (or a foreign
//! repository being imported) re-hashed against its id and of the kind expected, and every
//! rule of the tree model re-checked, whole or streaming in bounded memory.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use crate::canonical::Digest;
use crate::contracts::tree_path::{EntryMode as Mode, TreePolicy};
use crate::contracts::{ObjectStore, ObjectStoreError, ObjectStoreExt};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind};

use super::error::{Rejection, RepositoryError};
use super::identity::{MAX_TREE_LEVEL_BYTES, RepositoryLimits, RepositorySettings};
use super::source::{
    Listed, SourceFault, SourceFile, WHOLE_TREE, build_level, check_listing, describe_faults,
};
use super::tree_surgery::TreeIndex;

/// Reads objects ([`ObjectStoreExt::read_verified`]: one answer per id, each hashing to its
/// id) and checks each is of the expected kind; a missing object is `corrupt` (what names
/// what was being read), because a published ref named it.
pub(crate) fn read_verified(
    store: &dyn ObjectStore,
    ids: &[ObjectId],
    kind: ObjectKind,
    body_budget: u64,
    what: &str,
    deadline: Instant,
) -> Result<Vec<Vec<u8>>, RepositoryError> {
    let answers = store
        .read_verified(ids, body_budget, deadline)
        .map_err(|error| match error {
            ObjectStoreError::Corrupt { what: detail } => {
                RepositoryError::corrupt(format!("{detail} while reading {what}"))
            }
            other => other.into(),
        })?;
    ids.iter()
        .zip(answers)
        .map(|(id, answer)| {
            let object = answer.ok_or_else(|| {
                RepositoryError::corrupt(format!("{what}: {} {id} is missing", kind.as_str()))
            })?;
            if object.kind != kind {
                return Err(RepositoryError::corrupt(format!(
                    "{what}: object {id} is not the {} it should be",
                    kind.as_str()
                )));
            }
            Ok(object.body)
        })
        .collect()
}

/// Where a walk reads objects from: the owned store, or a foreign repository being
/// imported. `read` answers the bodies of `ids` (each already re-hashed against its id and
/// of `kind`) within `budget` bytes.
pub trait ObjectSource {
    /// Why a read failed.
    type Error;

    /// Reads `ids`, all of `kind`, within `budget` bytes of bodies.
    fn read(
        &mut self,
        ids: &[ObjectId],
        kind: ObjectKind,
        budget: u64,
    ) -> Result<Vec<Vec<u8>>, Self::Error>;
}

/// The owned store as an [`ObjectSource`]: a missing object is `corrupt`, because a ref
/// named it.
///
/// Each read gets the span the walk was given (from its start to its deadline), not what is
/// left of it: the bound is there for a Git process that hangs, and a tree of 100,000 files
/// takes many reads, each far within it, that together may take longer. The walk as a whole
/// is bounded by the repository's limits (files and bytes), so by as many spans as it has
/// reads.
struct OwnedObjects<'a> {
    store: &'a dyn ObjectStore,
    what: &'a str,
    per_read: Duration,
}

impl<'a> OwnedObjects<'a> {
    fn new(store: &'a dyn ObjectStore, what: &'a str, deadline: Instant) -> Self {
        Self {
            store,
            what,
            per_read: deadline.saturating_duration_since(Instant::now()),
        }
    }
}

impl ObjectSource for OwnedObjects<'_> {
    type Error = RepositoryError;

    fn read(
        &mut self,
        ids: &[ObjectId],
        kind: ObjectKind,
        budget: u64,
    ) -> Result<Vec<Vec<u8>>, RepositoryError> {
        let deadline = Instant::now() + self.per_read;
        read_verified(self.store, ids, kind, budget, self.what, deadline)
    }
}

/// Why a walk stopped: faults of the tree (every one found, sorted), or a read that failed.
#[derive(Debug)]
pub enum WalkError<E> {
    /// The tree holds entries the model does not; each is named.
    Faults(Vec<SourceFault>),
    /// Reading failed.
    Read(E),
}

/// Walks the tree `root` from `source`: every level read (within [`MAX_TREE_LEVEL_BYTES`]),
/// every entry checked (its mode one of the model's, its name UTF-8, every tree non-empty and
/// in Git's canonical form), then every blob read within `limits`, and the resulting files
/// checked against the tree rules with `policy`. Every fault found is reported, not only the
/// first; the files come back sorted by path, rebuilding to exactly `root`.
pub fn walk_tree<S: ObjectSource + ?Sized>(
    source: &mut S,
    root: ObjectId,
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Result<Vec<SourceFile>, WalkError<S::Error>> {
    walk_indexed(source, root, limits, policy).map(|(files, _)| files)
}

/// [`walk_tree`], also giving the trees it read.
pub(crate) fn walk_indexed<S: ObjectSource + ?Sized>(
    source: &mut S,
    root: ObjectId,
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Result<(Vec<SourceFile>, TreeIndex), WalkError<S::Error>> {
    let mut contents = Vec::new();
    let ControlFlow::Continue(walked) =
        walk_leaves(source, root, limits, policy, read_whole, |_, content| {
            contents.push(content.to_vec());
            ControlFlow::<Infallible>::Continue(())
        })?;
    let files = walked
        .leaves
        .into_iter()
        .zip(contents)
        .map(|(leaf, content)| SourceFile {
            path: leaf.path,
            mode: leaf.mode,
            blob: leaf.blob,
            sha256: leaf.sha256,
            bytes: leaf.bytes,
            content,
        })
        .collect();
    Ok((files, walked.index))
}

/// One leaf of a tree by its identities: a [`SourceFile`] without its bytes (a link keeps its
/// target). What a walk gives, and what a base too large to hold is checked and built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkedLeaf {
    /// The path in the tree.
    pub path: String,
    /// Regular, executable or symbolic link.
    pub mode: Mode,
    /// The Git blob id of the content.
    pub blob: ObjectId,
    /// The SHA-256 of the content.
    pub sha256: Digest,
    /// The content's length in bytes.
    pub bytes: u64,
    /// A link's target; empty for a file.
    pub target: Vec<u8>,
}

impl WalkedLeaf {
    /// The identities of `content` at `path` with `mode`.
    pub fn of(path: String, mode: Mode, content: &[u8]) -> Self {
        Self {
            blob: git_object::object_id(ObjectKind::Blob, content),
            sha256: Digest::of(content),
            bytes: content.len() as u64,
            target: link_target(mode, content),
            path,
            mode,
        }
    }

    /// The identities of a source file, which it holds already.
    pub fn of_file(file: &SourceFile) -> Self {
        Self {
            path: file.path.clone(),
            mode: file.mode,
            blob: file.blob,
            sha256: file.sha256.clone(),
            bytes: file.bytes,
            target: link_target(file.mode, &file.content),
        }
    }

    /// The leaf as a source file without its bytes (a link keeps its target).
    pub fn source_file(&self) -> SourceFile {
        SourceFile {
            path: self.path.clone(),
            mode: self.mode,
            blob: self.blob,
            sha256: self.sha256.clone(),
            bytes: self.bytes,
            content: self.target.clone(),
        }
    }
}

/// A link's target: its bytes; a file keeps none (its bytes are not part of its identities).
fn link_target(mode: Mode, content: &[u8]) -> Vec<u8> {
    if mode == Mode::Symlink {
        content.to_vec()
    } else {
        Vec::new()
    }
}

/// What [`walk_streaming`] read: every leaf, sorted by path, and every tree.
pub(crate) struct Walked {
    pub leaves: Vec<WalkedLeaf>,
    pub index: TreeIndex,
}

/// The most bytes of blobs one read of a streaming walk asks for (a file larger than this is
/// read alone, within the per-file limit).
const WALK_BATCH_BYTES: u64 = 32 * 1024 * 1024;
/// The most blobs one read of a streaming walk asks for.
const WALK_BATCH_BLOBS: usize = 4096;

/// [`walk_tree`] that holds no file's bytes beyond two reads: the blobs are read in path
/// order, a bounded batch at a time (at most [`WALK_BATCH_BLOBS`] and [`WALK_BATCH_BYTES`], or
/// one file alone within the per-file limit), each re-hashed and handed to `each` (its leaf,
/// then its bytes). The next batch is read on a thread of its own while this one is handed
/// out, so that the store's work (a Git process serving the read) and this walk's (hashing,
/// the caller's) overlap instead of taking turns. The checks are [`walk_tree`]'s.
///
/// `each` may stop the walk (`Break`): nothing more is read (the thread reading ahead stops
/// within a read), and the walk answers that `Break`, never a [`Walked`], since it checked
/// only part of the tree. A walk that cannot stop takes an `each` whose `Break` is
/// [`Infallible`].
pub(crate) fn walk_streaming<S, B>(
    source: &mut S,
    root: ObjectId,
    limits: &RepositoryLimits,
    policy: TreePolicy,
    each: impl FnMut(&WalkedLeaf, &[u8]) -> ControlFlow<B>,
) -> Result<ControlFlow<B, Walked>, WalkError<S::Error>>
where
    S: ObjectSource + Send + ?Sized,
    S::Error: Send,
{
    walk_leaves(source, root, limits, policy, read_ahead, each)
}

/// One read of a walk's blobs: the places of the blobs it asked for, in path order, and the
/// bodies answered, or why the read failed.
type BlobRead<E> = Result<(std::ops::Range<usize>, Vec<Vec<u8>>), E>;

/// How a walk reads its blobs: [`read_whole`] on this thread, or [`read_ahead`]; each read
/// is given to the function passed, which answers false to stop.
type ReadBlobs<S, E> =
    fn(&mut S, &[ObjectId], &RepositoryLimits, &mut dyn FnMut(BlobRead<E>) -> bool);

/// Reads `ids` in one read, within the tree's limit.
fn read_whole<S: ObjectSource + ?Sized>(
    source: &mut S,
    ids: &[ObjectId],
    limits: &RepositoryLimits,
    each: &mut dyn FnMut(BlobRead<S::Error>) -> bool,
) {
    if !ids.is_empty() {
        let budget = limits.max_source_bytes as u64;
        each(
            source
                .read(ids, ObjectKind::Blob, budget)
                .map(|bodies| (0..ids.len(), bodies)),
        );
    }
}

/// Reads `ids` in order, a batch at a time (see [`walk_streaming`]): a batch past its budget
/// is read again in halves, down to one file alone; the first read that fails ends it.
fn read_batches<S: ObjectSource + ?Sized>(
    source: &mut S,
    ids: &[ObjectId],
    limits: &RepositoryLimits,
    each: &mut dyn FnMut(BlobRead<S::Error>) -> bool,
) {
    let budget = WALK_BATCH_BYTES.max(limits.max_file_bytes as u64);
    let mut total = 0u64;
    let mut at = 0;
    let mut batch = WALK_BATCH_BLOBS;
    while at < ids.len() {
        let end = (at + batch).min(ids.len());
        let left = (limits.max_source_bytes as u64).saturating_sub(total);
        match source.read(&ids[at..end], ObjectKind::Blob, budget.min(left)) {
            Ok(bodies) => {
                total += bodies.iter().map(|body| body.len() as u64).sum::<u64>();
                if !each(Ok((at..end, bodies))) {
                    return;
                }
                at = end;
                batch = WALK_BATCH_BLOBS;
            }
            Err(_) if end - at > 1 => batch = (end - at) / 2,
            Err(error) => {
                each(Err(error));
                return;
            }
        }
    }
}

/// [`read_batches`] on a thread of its own, one read ahead of `each`.
fn read_ahead<S>(
    source: &mut S,
    ids: &[ObjectId],
    limits: &RepositoryLimits,
    each: &mut dyn FnMut(BlobRead<S::Error>) -> bool,
) where
    S: ObjectSource + Send + ?Sized,
    S::Error: Send,
{
    std::thread::scope(|scope| {
        let (sender, reads) = std::sync::mpsc::sync_channel(1);
        scope.spawn(move || {
            // A send fails once `each` has stopped (the receiver is dropped): so does this.
            read_batches(source, ids, limits, &mut |read| sender.send(read).is_ok());
        });
        for read in reads {
            if !each(read) {
                break;
            }
        }
    });
}

/// The walk of [`walk_tree`] and [`walk_streaming`]: the trees read level by level, then the
/// blobs with `read_blobs`, each leaf handed to `each`, which may stop the walk.
fn walk_leaves<S: ObjectSource + ?Sized, B>(
    source: &mut S,
    root: ObjectId,
    limits: &RepositoryLimits,
    policy: TreePolicy,
    read_blobs: ReadBlobs<S, S::Error>,
    mut each: impl FnMut(&WalkedLeaf, &[u8]) -> ControlFlow<B>,
) -> Result<ControlFlow<B, Walked>, WalkError<S::Error>> {
    let (index, mut blobs, mut faults) = walk_trees(source, root, limits)?;
    blobs.sort_by(|a, b| a.0.cmp(&b.0));
    let ids: Vec<ObjectId> = blobs.iter().map(|(_, _, id)| *id).collect();
    let mut leaves = Vec::with_capacity(blobs.len());
    let mut failed = None;
    let mut stopped = None;
    read_blobs(source, &ids, limits, &mut |read| {
        let (asked, bodies) = match read {
            Ok(read) => read,
            Err(error) => {
                failed = Some(error);
                return false;
            }
        };
        for ((path, mode, id), body) in blobs[asked].iter().zip(bodies) {
            let leaf = WalkedLeaf {
                path: path.clone(),
                mode: *mode,
                blob: *id,
                sha256: Digest::of(&body),
                bytes: body.len() as u64,
                target: link_target(*mode, &body),
            };
            let flow = each(&leaf, &body);
            leaves.push(leaf);
            if let ControlFlow::Break(stop) = flow {
                stopped = Some(stop);
                return false;
            }
        }
        true
    });
    if let Some(stop) = stopped {
        return Ok(ControlFlow::Break(stop));
    }
    if let Some(error) = failed {
        // The leaves are read and checked even when entries are at fault, so that a refusal
        // lists the faults of the tree rules beside those of the entries; a read that fails
        // then does not hide the entries' faults.
        if faults.is_empty() {
            return Err(WalkError::Read(error));
        }
        faults.sort_by(|a, b| a.path.cmp(&b.path));
        return Err(WalkError::Faults(faults));
    }
    faults.extend(check_leaves(&leaves, limits, policy));
    if !faults.is_empty() {
        faults.sort_by(|a, b| a.path.cmp(&b.path));
        return Err(WalkError::Faults(faults));
    }
    // Rebuilding from the leaves must give the tree that was read: a stored tree in any
    // other shape never qualifies. Each blob id was checked against the bytes read.
    let entries: Vec<(&str, EntryMode, ObjectId)> = leaves
        .iter()
        .map(|leaf| (leaf.path.as_str(), EntryMode::of_leaf(leaf.mode), leaf.blob))
        .collect();
    if build_level(&entries, &mut Vec::new()) != root {
        return Err(WalkError::Faults(vec![SourceFault::new(
            Rejection::UnsupportedEntry,
            "(the root)",
            format!("tree {root} is not the tree of its own files"),
        )]));
    }
    Ok(ControlFlow::Continue(Walked { leaves, index }))
}

/// Every fault of the tree `leaves` make (sorted by path), against `limits` and `policy`.
pub(crate) fn check_leaves(
    leaves: &[WalkedLeaf],
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Vec<SourceFault> {
    let total = leaves.iter().map(|leaf| leaf.bytes).sum();
    check_listing(
        leaves.iter().map(|leaf| Listed {
            path: &leaf.path,
            mode: leaf.mode,
            bytes: leaf.bytes,
            content: &leaf.target,
        }),
        (leaves.len() as u64, total),
        limits,
        policy,
    )
}

/// The trees of a walk, level by level: the index of every sound tree, every leaf (path,
/// mode, blob), and the faults of the entries.
#[allow(clippy::type_complexity)]
fn walk_trees<S: ObjectSource + ?Sized>(
    source: &mut S,
    root: ObjectId,
    limits: &RepositoryLimits,
) -> Result<(TreeIndex, Vec<(String, Mode, ObjectId)>, Vec<SourceFault>), WalkError<S::Error>> {
    let mut index = TreeIndex::default();
    let mut faults = Vec::new();
    let mut level: Vec<(String, ObjectId)> = vec![(String::new(), root)];
    let mut blobs: Vec<(String, Mode, ObjectId)> = Vec::new();
    // Every directory holds at least one leaf below it, and no path is deeper than its
    // bytes, so a tree within the limits has at most this many entries.
    let entry_cap = limits.max_files.saturating_mul(2).saturating_add(1);
    let mut entries_seen = 0usize;
    while !level.is_empty() {
        let ids: Vec<ObjectId> = level.iter().map(|(_, id)| *id).collect();
        let bodies = source
            .read(&ids, ObjectKind::Tree, MAX_TREE_LEVEL_BYTES)
            .map_err(WalkError::Read)?;
        let mut next = Vec::new();
        for ((prefix, id), body) in level.iter().zip(bodies) {
            let at = |name: &str| {
                if prefix.is_empty() {
                    name.to_owned()
                } else {
                    format!("{prefix}/{name}")
                }
            };
            let shown = if prefix.is_empty() {
                "(the root)"
            } else {
                prefix
            };
            let Some(raw) = git_object::split_tree(&body) else {
                faults.push(SourceFault::new(
                    Rejection::UnsupportedEntry,
                    shown,
                    format!("tree {id} is not a sequence of Git tree entries"),
                ));
                continue;
            };
            if raw.is_empty() && !prefix.is_empty() {
                faults.push(SourceFault::new(
                    Rejection::UnsupportedEntry,
                    shown,
                    "is an empty directory, which a tree of files cannot hold",
                ));
            }
            entries_seen += raw.len();
            if entries_seen > entry_cap {
                return Err(WalkError::Faults(vec![SourceFault::new(
                    Rejection::TooManyFiles,
                    WHOLE_TREE,
                    format!(
                        "holds more entries than a tree of at most {} files can",
                        limits.max_files
                    ),
                )]));
            }
            let mut sound = true;
            for entry in &raw {
                let name = String::from_utf8_lossy(&entry.name);
                let path = at(&name);
                if std::str::from_utf8(&entry.name).is_err() {
                    sound = false;
                    faults.push(SourceFault::new(
                        Rejection::UnsupportedEntry,
                        &path,
                        "has a name that is not UTF-8",
                    ));
                    continue;
                }
                match EntryMode::from_octal(&entry.mode).map(|mode| (mode, mode.leaf())) {
                    Some((_, Some(leaf))) => blobs.push((path, leaf, entry.id)),
                    Some((_, None)) => next.push((path, entry.id)),
                    None => {
                        sound = false;
                        let rule = if entry.mode == b"160000" {
                            "is a submodule (mode 160000); sf holds the files of one tree and \
                             never creates, materialises or runs a submodule"
                                .to_owned()
                        } else {
                            format!(
                                "has mode {}, which Git does not write for a file, link or \
                                 directory",
                                String::from_utf8_lossy(&entry.mode)
                            )
                        };
                        faults.push(SourceFault::new(Rejection::UnsupportedEntry, &path, rule));
                    }
                }
            }
            if sound {
                match git_object::decode_tree(&body) {
                    Some(entries) => index.insert(prefix.clone(), *id, entries),
                    None => faults.push(SourceFault::new(
                        Rejection::UnsupportedEntry,
                        shown,
                        format!(
                            "tree {id} is not in Git's canonical form (order, duplicates, a \
                             name holding / or NUL)"
                        ),
                    )),
                }
            }
        }
        level = next;
    }
    if blobs.len() > limits.max_files {
        return Err(WalkError::Faults(vec![SourceFault::new(
            Rejection::TooManyFiles,
            WHOLE_TREE,
            format!(
                "holds {} files; a tree holds at most {}",
                blobs.len(),
                limits.max_files
            ),
        )]));
    }
    Ok((index, blobs, faults))
}

/// The owned tree `tree` read back streaming ([`walk_streaming`]): every object re-hashed and
/// every rule checked (any fault is `corrupt`, because sf wrote it), the blobs handed to `each` in path order and dropped; `each` may stop it.
pub(crate) fn stream_tree<B>(
    store: &dyn ObjectStore,
    tree: ObjectId,
    settings: &RepositorySettings,
    what: &str,
    deadline: Instant,
    each: impl FnMut(&WalkedLeaf, &[u8]) -> ControlFlow<B>,
) -> Result<ControlFlow<B, Walked>, RepositoryError> {
    let mut source = OwnedObjects::new(store, what, deadline);
    walk_streaming(
        &mut source,
        tree,
        &settings.limits(),
        settings.policy(),
        each,
    )
    .map_err(|error| owned_walk_error(error, what))
}

/// The leaves of the owned tree `tree` by path, mode and blob id, read from its trees alone
/// (no blob is read), every tree re-hashed and its entries checked (a fault is `corrupt`).
pub(crate) fn tree_leaves(
    store: &dyn ObjectStore,
    tree: ObjectId,
    settings: &RepositorySettings,
    what: &str,
    deadline: Instant,
) -> Result<Vec<(String, Mode, ObjectId)>, RepositoryError> {
    let mut source = OwnedObjects::new(store, what, deadline);
    let (_, mut leaves, faults) = walk_trees(&mut source, tree, &settings.limits())
        .map_err(|error| owned_walk_error(error, what))?;
    if !faults.is_empty() {
        return Err(owned_walk_error(WalkError::Faults(faults), what));
    }
    leaves.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(leaves)
}

fn owned_walk_error(error: WalkError<RepositoryError>, what: &str) -> RepositoryError {
    match error {
        WalkError::Read(error) => error,
        WalkError::Faults(faults) => {
            RepositoryError::corrupt(format!("{what}: {}", describe_faults(&faults)))
        }
    }
}

/// The owned tree `tree` read back whole ([`walk_tree`] on the store; any fault is `corrupt`,
/// because sf wrote it), files sorted by path, with the trees it read.
pub(crate) fn read_tree_indexed(
    store: &dyn ObjectStore,
    tree: ObjectId,
    settings: &RepositorySettings,
    what: &str,
    deadline: Instant,
) -> Result<(Vec<SourceFile>, TreeIndex), RepositoryError> {
    let mut source = OwnedObjects::new(store, what, deadline);
    walk_indexed(&mut source, tree, &settings.limits(), settings.policy())
        .map_err(|error| owned_walk_error(error, what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use super::super::identity::REPOSITORY_LIMITS;
    use super::super::source::{BuiltTree, build_tree};

    /// Blobs in memory (each body its id's first byte, `bytes` long): an [`ObjectSource`]
    /// whose reads are counted and fail from the `fail_from`-th on (from 0), and which
    /// refuses a read of more than `most` ids as past its budget.
    struct Blobs {
        bytes: usize,
        reads: usize,
        fail_from: Option<usize>,
        most: usize,
    }

    impl ObjectSource for Blobs {
        type Error = String;

        fn read(
            &mut self,
            ids: &[ObjectId],
            _kind: ObjectKind,
            _budget: u64,
        ) -> Result<Vec<Vec<u8>>, String> {
            let read = self.reads;
            self.reads += 1;
            if self.fail_from.is_some_and(|from| read >= from) {
                return Err(format!("read {read} failed"));
            }
            if ids.len() > self.most {
                return Err("past the budget".to_owned());
            }
            Ok(ids
                .iter()
                .map(|id| vec![id.as_bytes()[0]; self.bytes])
                .collect())
        }
    }

    fn ids(count: usize) -> Vec<ObjectId> {
        (0..count)
            .map(|at| {
                let mut bytes = [0u8; 20];
                bytes[0] = (at % 251) as u8;
                bytes[1..9].copy_from_slice(&(at as u64).to_be_bytes());
                ObjectId::from_bytes(bytes)
            })
            .collect()
    }

    /// Every read `read_blobs` gives of `ids` from `source`, stopping after `keep` reads.
    fn reads(
        read_blobs: ReadBlobs<Blobs, String>,
        source: &mut Blobs,
        ids: &[ObjectId],
        keep: usize,
    ) -> Vec<BlobRead<String>> {
        let mut given = Vec::new();
        read_blobs(source, ids, &REPOSITORY_LIMITS, &mut |read| {
            given.push(read);
            given.len() < keep
        });
        given
    }

    /// Read ahead on a thread of its own, the batches come in order, each id once, as read on
    /// the calling thread; a batch past its budget is read again in halves.
    #[test]
    fn reads_ahead_give_every_blob_once_in_order() {
        let ids = ids(3 * WALK_BATCH_BLOBS + 5);
        let mut source = Blobs {
            bytes: 3,
            reads: 0,
            fail_from: None,
            most: WALK_BATCH_BLOBS / 2,
        };
        let given = reads(read_ahead, &mut source, &ids, usize::MAX);
        let mut next = 0;
        for read in given {
            let (asked, bodies) = read.unwrap();
            assert_eq!(asked.start, next);
            assert_eq!(asked.len(), bodies.len());
            for (id, body) in ids[asked.clone()].iter().zip(&bodies) {
                assert_eq!(*body, vec![id.as_bytes()[0]; 3]);
            }
            next = asked.end;
        }
        assert_eq!(next, ids.len());
        let mut whole = Blobs {
            bytes: 3,
            reads: 0,
            fail_from: None,
            most: usize::MAX,
        };
        let given = reads(read_whole, &mut whole, &ids, usize::MAX);
        assert_eq!(given.len(), 1);
        assert_eq!(given[0].as_ref().unwrap().1.len(), ids.len());
    }

    /// A read that fails (down to one blob alone) ends the reading: its error is the last
    /// thing given. A walk that
    /// stops taking reads stops the thread reading ahead within a read or two.
    #[test]
    fn reads_ahead_end_at_a_failure_or_when_no_longer_taken() {
        let ids = ids(10 * WALK_BATCH_BLOBS);
        let mut source = Blobs {
            bytes: 1,
            reads: 0,
            fail_from: Some(2),
            most: usize::MAX,
        };
        let given = reads(read_ahead, &mut source, &ids, usize::MAX);
        assert_eq!(given.len(), 3);
        assert!(given[..2].iter().all(Result::is_ok));
        assert_eq!(given[2], Err("read 14 failed".to_owned()));
        // The failing batch was read again in halves down to one blob: 4,096 to 1, 13 reads.
        assert_eq!(source.reads, 2 + 13);

        let mut source = Blobs {
            bytes: 1,
            reads: 0,
            fail_from: None,
            most: usize::MAX,
        };
        let given = reads(read_ahead, &mut source, &ids, 1);
        assert_eq!(given.len(), 1);
        assert!(source.reads <= 3, "{} reads of 10", source.reads);
    }

    /// A tree's objects in memory, its blob reads counted.
    struct Objects {
        by_id: BTreeMap<ObjectId, Vec<u8>>,
        blob_reads: usize,
    }

    impl ObjectSource for Objects {
        type Error = String;

        fn read(
            &mut self,
            ids: &[ObjectId],
            kind: ObjectKind,
            _budget: u64,
        ) -> Result<Vec<Vec<u8>>, String> {
            if kind == ObjectKind::Blob {
                self.blob_reads += 1;
            }
            ids.iter()
                .map(|id| self.by_id.get(id).cloned().ok_or(format!("{id} missing")))
                .collect()
        }
    }

    /// The streaming walk of `built` from memory through `each`, and how many blob reads it
    /// made.
    fn stream<B>(
        built: &BuiltTree,
        each: impl FnMut(&WalkedLeaf, &[u8]) -> ControlFlow<B>,
    ) -> (ControlFlow<B, Walked>, usize) {
        let mut source = Objects {
            by_id: built
                .objects
                .iter()
                .map(|object| (object.id, object.body.clone()))
                .collect(),
            blob_reads: 0,
        };
        let walked = walk_streaming(
            &mut source,
            built.tree,
            &REPOSITORY_LIMITS,
            TreePolicy::default(),
            each,
        );
        (walked.unwrap(), source.blob_reads)
    }

    /// A consumer that stops a streaming walk gets its `Break` back, not a walk, and the reading
    /// stops with it: of ten batches of blobs, at most the one handed out and the one or two read
    /// ahead meanwhile are read. A consumer that never stops is handed every file.
    #[test]
    fn a_streaming_walk_stops_when_its_consumer_does() {
        let files: Vec<SourceFile> = (0..10 * WALK_BATCH_BLOBS)
            .map(|at| SourceFile::text(format!("d{:02}/f{at:05}", at % 64), at.to_string()))
            .collect();
        let built = build_tree(&files);
        let mut handed = 0;
        let (walked, reads) = stream(&built, |leaf, _| {
            handed += 1;
            ControlFlow::Break(leaf.path.clone())
        });
        assert!(matches!(walked, ControlFlow::Break(ref path) if path == "d00/f00000"));
        assert_eq!(handed, 1);
        assert!(reads <= 3, "{reads} reads of 10");

        let mut handed = 0;
        let (walked, reads) = stream(&built, |_, _| {
            handed += 1;
            ControlFlow::<Infallible>::Continue(())
        });
        let ControlFlow::Continue(walked) = walked;
        assert_eq!((handed, walked.leaves.len()), (files.len(), files.len()));
        assert_eq!(reads, 10);
    }
}
