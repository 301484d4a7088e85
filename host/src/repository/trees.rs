//! What a collection that takes its programs by reference reads of a Candidate: its base
//! streamed whole (every object re-hashed, for a store to keep), the base's directories on
//! given paths (from its tree record), and the Candidate's edited entries, before and after.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use crate::canonical::Digest;
use crate::contracts::ObjectStoreExt as _;
use crate::contracts::tree_digest::{self, Directory};
use crate::contracts::tree_path::EntryMode;
use crate::git_object::ObjectId;
use crate::snapshot::SnapshotFile;

use super::source::{self, SourceFile};
use super::tree_record;
use super::{EditedEntry, ManifestEntry, Repository, RepositoryError, SealedCandidate};

/// The entries of a commit's tree, without their bytes ([`Repository::list_files`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileListing {
    /// The commit.
    pub commit: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// Every leaf of the tree, sorted by path.
    pub files: Vec<ListedFile>,
}

/// One leaf of a [`FileListing`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedFile {
    /// The path in the tree.
    pub path: String,
    /// Regular, executable or symbolic link.
    pub mode: EntryMode,
    /// The SHA-256 of the content.
    pub sha256: Digest,
    /// The content's length in bytes.
    pub bytes: u64,
}

impl Repository {
    /// Streams every file and link of the factory commit `commit` (path order, each object
    /// re-hashed and every rule checked, as a whole read does) through `each` (its path, mode,
    /// SHA-256 and bytes), holding no file's bytes beyond two reads, and returns the tree's
    /// `sf-tree/1` digest computed from the bytes read. `each` may stop the stream (`Break`):
    /// nothing more is read, and the answer is that `Break`, never a digest.
    pub fn stream_files<B>(
        &self,
        commit: &ObjectId,
        mut each: impl FnMut(&str, EntryMode, &Digest, &[u8]) -> ControlFlow<B>,
    ) -> Result<ControlFlow<B, Digest>, RepositoryError> {
        let _reads = self.store.read_scope();
        let tree = self.factory_tree(commit)?;
        let walked = match source::stream_tree(
            self.store.as_ref(),
            tree,
            &self.identity.settings(),
            &format!("commit {commit}"),
            self.deadline(),
            |leaf, bytes| each(&leaf.path, leaf.mode, &leaf.sha256, bytes),
        )? {
            ControlFlow::Continue(walked) => walked,
            ControlFlow::Break(stop) => return Ok(ControlFlow::Break(stop)),
        };
        let digested = tree_digest::build(walked.leaves.iter().map(|leaf| {
            (
                leaf.path.as_str(),
                tree_record::leaf_node(&leaf.source_file()),
            )
        }))
        .map_err(|error| RepositoryError::corrupt(format!("commit {commit}: {error}")))?;
        Ok(ControlFlow::Continue(digested.root.hash))
    }

    /// Every file and link of the factory commit `commit` by its path, mode and Git blob id,
    /// read from the commit's trees alone (each re-hashed; no file's bytes are read): what
    /// a comparison with another tree's blob ids needs.
    pub fn list_blob_ids(
        &self,
        commit: &ObjectId,
    ) -> Result<Vec<(String, EntryMode, ObjectId)>, RepositoryError> {
        let _reads = self.store.read_scope();
        let tree = self.factory_tree(commit)?;
        source::tree_leaves(
            self.store.as_ref(),
            tree,
            &self.identity.settings(),
            &format!("commit {commit}"),
            self.deadline(),
        )
    }

    /// Every file and link of the factory commit `commit`, listed as [`Self::stream_files`]
    /// reads them (every object re-hashed, every rule checked): each entry's bytes are hashed
    /// and dropped, so the listing costs its entries, not the tree's bytes.
    pub fn list_files(&self, commit: &ObjectId) -> Result<FileListing, RepositoryError> {
        let tree = self.factory_tree(commit)?;
        let mut files = Vec::new();
        let streamed = self.stream_files(commit, |path, mode, sha256, bytes| {
            files.push(ListedFile {
                path: path.to_owned(),
                mode,
                sha256: sha256.clone(),
                bytes: bytes.len() as u64,
            });
            ControlFlow::<std::convert::Infallible>::Continue(())
        })?;
        let ControlFlow::Continue(_) = streamed;
        Ok(FileListing {
            commit: *commit,
            tree,
            files,
        })
    }

    /// The `sf-tree/1` directories of the factory commit `commit`'s tree that hold `paths`
    /// (each path's directory and every directory above it), from its tree record (each node
    /// bound to its Git tree), by path (`""` the root).
    pub fn tree_directories<'a>(
        &self,
        commit: &ObjectId,
        paths: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, Directory>, RepositoryError> {
        let _reads = self.store.read_scope();
        let tree = self.factory_tree(commit)?;
        let sparse = self.sparse_tree(
            tree,
            &tree_digest::touched(paths),
            &format!("commit {commit}"),
        )?;
        Ok(sparse.directories())
    }

    /// The entries of Candidate `sealed` at its edited paths, in its base and in M, each read
    /// from the Git trees (relying on no record) and re-hashed, and each what the manifest
    /// records (`corrupt` otherwise): what a layer over the base needs.
    pub fn edited_entries(
        &self,
        sealed: &SealedCandidate,
    ) -> Result<Vec<EditedEntry>, RepositoryError> {
        let _reads = self.store.read_scope();
        let manifest = &sealed.manifest;
        let paths: Vec<&str> = manifest.edits.iter().map(|e| e.path.as_str()).collect();
        let touched = tree_digest::touched(paths.iter().copied());
        let read = |tree: ObjectId, what: String| {
            let sparse = self.git_sparse(tree, &touched, &what)?;
            self.leaves_at(&sparse, paths.iter().copied(), &what)
        };
        let base = read(manifest.base_tree, format!("base {}", manifest.base_commit))?;
        let after = read(manifest.tree, format!("Candidate {}", sealed.digest))?;
        let snapshot = |file: &SourceFile| {
            SnapshotFile::new(file.path.clone(), file.mode, file.content.clone())
        };
        let mut entries = Vec::with_capacity(manifest.edits.len());
        for edit in &manifest.edits {
            let prior = base.get(&edit.path);
            let next = after.get(&edit.path);
            if prior.map(ManifestEntry::of) != edit.prior
                || next.map(ManifestEntry::of) != edit.next
            {
                return Err(RepositoryError::corrupt(format!(
                    "Candidate {}: the entries at {} are not the ones its manifest records",
                    sealed.digest, edit.path
                )));
            }
            entries.push(EditedEntry {
                path: edit.path.clone(),
                prior: prior.map(snapshot),
                next: next.map(snapshot),
            });
        }
        Ok(entries)
    }
}
