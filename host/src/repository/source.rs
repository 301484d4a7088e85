//! Source trees in Git's tree model: regular files, executables and symbolic links of any
//! bytes under directories; checking them against the tree rules and the repository's
//! limits, building their blobs and trees, and walking stored trees back with every object
//! re-hashed and every rule re-checked.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::time::Instant;

use crate::canonical::Digest;
use crate::contracts::tree_path::{self, EntryMode as Mode, Leaf, TreePolicy};
use crate::contracts::{EncodedObject, ObjectStore, ObjectStoreError, ObjectStoreExt};
use crate::git_object::{self, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::error::{Rejection, RepositoryError};
use super::identity::{
    MAX_TREE_LEVEL_BYTES, REPOSITORY_LIMITS, RepositoryLimits, RepositorySettings,
};
use super::tree_surgery::TreeIndex;

/// A text file as a caller gives it: a path and its text, stored with mode `100644`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceText {
    /// The file's path in the tree.
    pub path: String,
    /// The file's text.
    pub text: String,
}

impl From<SourceText> for SourceFile {
    fn from(file: SourceText) -> Self {
        SourceFile::new(file.path, Mode::Regular, file.text.into_bytes())
    }
}

/// One leaf of a source tree with its identities: a file (its bytes) or a symbolic link (its
/// target bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct SourceFile {
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
    /// The bytes: a file's content or a link's target.
    pub content: Vec<u8>,
}

impl std::fmt::Debug for SourceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceFile")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("blob", &self.blob)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl SourceFile {
    /// The leaf's identities computed from its content.
    pub fn new(path: String, mode: Mode, content: Vec<u8>) -> Self {
        Self {
            blob: git_object::object_id(ObjectKind::Blob, &content),
            sha256: Digest::of(&content),
            bytes: content.len() as u64,
            path,
            mode,
            content,
        }
    }

    /// A regular file holding `text`.
    pub fn text(path: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(path.into(), Mode::Regular, text.into().into_bytes())
    }

    /// The content as text, when it is UTF-8.
    pub fn as_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.content).ok()
    }
}

/// The files of one factory commit, sorted by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceSnapshot {
    /// The commit.
    pub commit: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// Every leaf of the tree, sorted by path.
    pub files: Vec<SourceFile>,
}

/// The file mode of the files of `sf-candidate/1` and `/2` manifests, which list text files
/// only.
pub const FILE_MODE: &str = "100644";

const LFS_POINTER_PREFIXES: [&str; 2] = [
    "version https://git-lfs.github.com/spec/",
    "version https://hawser.github.com/spec/",
];

/// Checks the text of an edit: what a proposal's `text` may hold (UTF-8 is the type's
/// guarantee). Files already in a tree are content and carry no such rule.
pub(crate) fn check_text(text: &str) -> Result<(), (Rejection, &'static str)> {
    if text.len() > REPOSITORY_LIMITS.max_file_bytes {
        return Err((
            Rejection::FileTooLarge,
            "the text is larger than the per-file limit",
        ));
    }
    if text.contains('\0') {
        return Err((Rejection::NulByte, "the edit's text holds a NUL character"));
    }
    if LFS_POINTER_PREFIXES
        .iter()
        .any(|prefix| text.starts_with(prefix))
    {
        return Err((
            Rejection::LfsPointer,
            "the edit's text is a Git LFS pointer",
        ));
    }
    Ok(())
}

/// One thing a source tree holds that it may not, with the rule in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFault {
    /// The reason, whose code names the rule.
    pub reason: Rejection,
    /// The path at fault, or `(the whole tree)` for a limit of the whole.
    pub path: String,
    /// The rule broken, in words.
    pub rule: String,
}

/// The path a limit of the whole tree is reported at.
pub const WHOLE_TREE: &str = "(the whole tree)";

impl SourceFault {
    pub(crate) fn new(reason: Rejection, path: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            reason,
            path: path.into(),
            rule: rule.into(),
        }
    }
}

/// Describes faults one per line, each with its path, rule and code.
pub fn describe_faults(faults: &[SourceFault]) -> String {
    let mut text = format!(
        "{} path(s) break the rules of the tree model:",
        faults.len()
    );
    for fault in faults {
        text.push_str(&format!(
            "\n  {}: {} ({})",
            fault.path,
            fault.rule,
            fault.reason.code()
        ));
    }
    text
}

/// Checks a whole source tree (`files` sorted by path) against the tree rules of
/// [`tree_path`] and `limits`, returning every fault, sorted by path.
pub fn check_source(
    files: &[SourceFile],
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Vec<SourceFault> {
    let total: u64 = files.iter().map(|file| file.bytes).sum();
    check_listing(
        files.iter().map(|file| Listed {
            path: &file.path,
            mode: file.mode,
            bytes: file.bytes,
            content: &file.content,
        }),
        (files.len() as u64, total),
        limits,
        policy,
    )
}

/// One leaf of a tree as [`check_listing`] checks it: its path, mode and size, and for a link
/// its target (a file's bytes are not needed).
pub(crate) struct Listed<'a> {
    pub path: &'a str,
    pub mode: Mode,
    pub bytes: u64,
    pub content: &'a [u8],
}

impl Listed<'_> {
    fn leaf(&self) -> Leaf<'_> {
        match self.mode {
            Mode::Symlink => Leaf::Symlink(self.content),
            Mode::Regular | Mode::Executable => Leaf::File,
        }
    }
}

/// [`check_source`] of a listing whose leaves number `totals.0` and hold `totals.1` bytes:
/// the limits of the whole, each leaf's size, and the tree rules, every fault sorted by path.
pub(crate) fn check_listing<'a>(
    leaves: impl Iterator<Item = Listed<'a>>,
    totals: (u64, u64),
    limits: &RepositoryLimits,
    policy: TreePolicy,
) -> Vec<SourceFault> {
    let (count, total) = totals;
    let mut faults = Vec::new();
    if count > limits.max_files as u64 {
        faults.push(SourceFault::new(
            Rejection::TooManyFiles,
            WHOLE_TREE,
            format!(
                "holds {count} files; a tree holds at most {}",
                limits.max_files
            ),
        ));
    }
    if total > limits.max_source_bytes as u64 {
        faults.push(SourceFault::new(
            Rejection::SourceTooLarge,
            WHOLE_TREE,
            format!(
                "holds {total} bytes; a tree holds at most {}",
                limits.max_source_bytes
            ),
        ));
    }
    let leaves: Vec<Listed<'a>> = leaves.collect();
    for leaf in &leaves {
        if leaf.bytes > limits.max_file_bytes as u64 {
            faults.push(SourceFault::new(
                Rejection::FileTooLarge,
                leaf.path,
                format!(
                    "is {} bytes; a file holds at most {}",
                    leaf.bytes, limits.max_file_bytes
                ),
            ));
        }
    }
    for fault in tree_path::check_tree(leaves.iter().map(|leaf| (leaf.path, leaf.leaf())), policy) {
        let mut rule = fault.rule.describe().to_owned();
        if let Some(with) = &fault.with {
            rule.push_str(&format!(" ({with})"));
        }
        faults.push(SourceFault::new(
            Rejection::Tree(fault.rule),
            fault.path,
            rule,
        ));
    }
    faults.sort_by(|a, b| a.path.cmp(&b.path));
    faults
}

/// The first of `faults`, as a rejection of a proposal's resulting tree.
pub(crate) fn first_fault(faults: Vec<SourceFault>) -> Result<(), RepositoryError> {
    match faults.into_iter().next() {
        None => Ok(()),
        Some(fault) => Err(RepositoryError::rejected(
            fault.reason,
            format!("resulting source: {}", fault.path),
            fault.rule,
        )),
    }
}

/// The blobs and trees of a checked source tree, and its root tree id.
pub(crate) struct BuiltTree {
    pub tree: ObjectId,
    pub objects: Vec<EncodedObject>,
}

/// Builds the blobs and nested trees of `files` (already checked).
pub(crate) fn build_tree(files: &[SourceFile]) -> BuiltTree {
    let mut objects: Vec<EncodedObject> = files
        .iter()
        .map(|file| EncodedObject::new(ObjectKind::Blob, file.content.clone()))
        .collect();
    let tree = build_level(&leaf_entries(files), &mut objects);
    objects.sort_by_key(|object| object.id);
    objects.dedup_by_key(|object| object.id);
    BuiltTree { tree, objects }
}

/// The id of the tree [`build_tree`] builds from `files`, without their blobs: the tree's
/// entries name each file by its `blob` id either way, so a check of a tree's id need not
/// copy and hash every file's bytes once more.
pub(crate) fn tree_id(files: &[SourceFile]) -> ObjectId {
    build_level(&leaf_entries(files), &mut Vec::new())
}

fn leaf_entries(files: &[SourceFile]) -> Vec<(&str, EntryMode, ObjectId)> {
    files
        .iter()
        .map(|f| (f.path.as_str(), EntryMode::of_leaf(f.mode), f.blob))
        .collect()
}

fn build_level(
    entries: &[(&str, EntryMode, ObjectId)],
    objects: &mut Vec<EncodedObject>,
) -> ObjectId {
    let mut tree_entries = Vec::new();
    let mut directories: BTreeMap<&str, Vec<(&str, EntryMode, ObjectId)>> = BTreeMap::new();
    for &(path, mode, id) in entries {
        match path.split_once('/') {
            None => tree_entries.push(TreeEntry {
                mode,
                name: path.to_owned(),
                id,
            }),
            Some((directory, rest)) => directories
                .entry(directory)
                .or_default()
                .push((rest, mode, id)),
        }
    }
    for (name, children) in directories {
        let id = build_level(&children, objects);
        tree_entries.push(TreeEntry {
            mode: EntryMode::Tree,
            name: name.to_owned(),
            id,
        });
    }
    let object = EncodedObject::new(ObjectKind::Tree, git_object::encode_tree(&tree_entries));
    let id = object.id;
    objects.push(object);
    id
}

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
struct OwnedObjects<'a> {
    store: &'a dyn ObjectStore,
    what: &'a str,
    deadline: Instant,
}

impl ObjectSource for OwnedObjects<'_> {
    type Error = RepositoryError;

    fn read(
        &mut self,
        ids: &[ObjectId],
        kind: ObjectKind,
        budget: u64,
    ) -> Result<Vec<Vec<u8>>, RepositoryError> {
        read_verified(self.store, ids, kind, budget, self.what, self.deadline)
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

/// One leaf of a walked tree: a [`SourceFile`] without its bytes (a link keeps its target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WalkedLeaf {
    pub path: String,
    pub mode: Mode,
    pub blob: ObjectId,
    pub sha256: Digest,
    pub bytes: u64,
    /// A link's target; empty for a file.
    pub target: Vec<u8>,
}

impl WalkedLeaf {
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
    let mut total = 0u64;
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
            total += body.len() as u64;
            let leaf = WalkedLeaf {
                path: path.clone(),
                mode: *mode,
                blob: *id,
                sha256: Digest::of(&body),
                bytes: body.len() as u64,
                target: if *mode == Mode::Symlink {
                    body.clone()
                } else {
                    Vec::new()
                },
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
    faults.extend(check_listing(
        leaves.iter().map(|leaf| Listed {
            path: &leaf.path,
            mode: leaf.mode,
            bytes: leaf.bytes,
            content: &leaf.target,
        }),
        (leaves.len() as u64, total),
        limits,
        policy,
    ));
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

/// Reads the owned tree `tree` back ([`walk_tree`] on the store); any fault is `corrupt`,
/// because sf wrote it. Files come back sorted by path.
pub(crate) fn read_tree(
    store: &dyn ObjectStore,
    tree: ObjectId,
    settings: &RepositorySettings,
    what: &str,
    deadline: Instant,
) -> Result<Vec<SourceFile>, RepositoryError> {
    read_tree_indexed(store, tree, settings, what, deadline).map(|(files, _)| files)
}

/// [`read_tree`] streaming ([`walk_streaming`]): every object re-hashed and every rule
/// checked, the blobs handed to `each` in path order and dropped; `each` may stop it.
pub(crate) fn stream_tree<B>(
    store: &dyn ObjectStore,
    tree: ObjectId,
    settings: &RepositorySettings,
    what: &str,
    deadline: Instant,
    each: impl FnMut(&WalkedLeaf, &[u8]) -> ControlFlow<B>,
) -> Result<ControlFlow<B, Walked>, RepositoryError> {
    let mut source = OwnedObjects {
        store,
        what,
        deadline,
    };
    walk_streaming(
        &mut source,
        tree,
        &settings.limits(),
        settings.policy(),
        each,
    )
    .map_err(|error| owned_walk_error(error, what))
}

fn owned_walk_error(error: WalkError<RepositoryError>, what: &str) -> RepositoryError {
    match error {
        WalkError::Read(error) => error,
        WalkError::Faults(faults) => {
            RepositoryError::corrupt(format!("{what}: {}", describe_faults(&faults)))
        }
    }
}

/// [`read_tree`], also giving the trees it read.
pub(crate) fn read_tree_indexed(
    store: &dyn ObjectStore,
    tree: ObjectId,
    settings: &RepositorySettings,
    what: &str,
    deadline: Instant,
) -> Result<(Vec<SourceFile>, TreeIndex), RepositoryError> {
    let mut source = OwnedObjects {
        store,
        what,
        deadline,
    };
    walk_indexed(&mut source, tree, &settings.limits(), settings.policy())
        .map_err(|error| owned_walk_error(error, what))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn nested_trees_match_git_layout() {
        let files = vec![
            SourceFile::text("a-b", "1"),
            SourceFile::text("a/x", "2"),
            SourceFile::new("a/y/z".into(), Mode::Executable, b"3".to_vec()),
            SourceFile::new("l".into(), Mode::Symlink, b"a/x".to_vec()),
        ];
        let built = build_tree(&files);
        assert_eq!(tree_id(&files), built.tree);
        // root, a, a/y, and four blobs
        assert_eq!(built.objects.len(), 7);
        assert!(built.objects.iter().all(EncodedObject::verify));
        assert!(built.objects.iter().any(|o| o.id == built.tree));
    }

    #[test]
    fn text_rules() {
        assert!(check_text("fine\n").is_ok());
        assert_eq!(check_text("a\0b").unwrap_err().0, Rejection::NulByte);
        assert_eq!(
            check_text("version https://git-lfs.github.com/spec/v1\noid sha256:x\nsize 1\n")
                .unwrap_err()
                .0,
            Rejection::LfsPointer
        );
    }

    #[test]
    fn every_fault_of_a_source_is_listed() {
        let limits = RepositoryLimits {
            max_files: 3,
            max_file_bytes: 4,
            ..REPOSITORY_LIMITS
        };
        let files = vec![
            SourceFile::text(".git/config", "x"),
            SourceFile::text("big", "12345"),
            SourceFile::new("out".into(), Mode::Symlink, b"../x".to_vec()),
            SourceFile::new("png".into(), Mode::Regular, vec![0x89, b'P', 0, 0xff]),
        ];
        let codes: Vec<(String, &str)> = check_source(&files, &limits, TreePolicy::default())
            .into_iter()
            .map(|fault| (fault.path, fault.reason.code()))
            .collect();
        assert_eq!(
            codes,
            [
                (WHOLE_TREE.to_owned(), "too-many-files"),
                (".git".to_owned(), "git-segment"),
                ("big".to_owned(), "file-too-large"),
                ("out".to_owned(), "link-escapes"),
            ]
        );
    }
}
