//! Materialising the trees a collection runs: the base B and the Candidate M from their
//! repository snapshots, M's checked against its manifest. Byte-exact: every file's
//! bytes must give its recorded size, SHA-256 and Git blob id, and the Git tree built from
//! the files must be the recorded tree.

use crate::canonical::Digest;
use crate::git_object::{self, ObjectId, ObjectKind};
use crate::repository::source::{SourceFile, tree_id};
use crate::repository::{SealedCandidate, SourceSnapshot};
use crate::snapshot::{SnapshotFile, snapshot_digest};

/// A tree's files as a program snapshot, with its snapshot digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaterialisedTree {
    /// The tree's files with their bytes, sorted by path.
    pub files: Vec<SnapshotFile>,
    /// The snapshot digest of `files`.
    pub digest: Digest,
}

fn check_files(files: &[SourceFile], tree: &ObjectId, what: &str) -> Result<(), String> {
    for pair in files.windows(2) {
        if pair[0].path.as_bytes() >= pair[1].path.as_bytes() {
            return Err(format!(
                "{what}: the files are not in path order at {}",
                pair[1].path
            ));
        }
    }
    for file in files {
        let bytes = file.content.as_slice();
        if bytes.len() as u64 != file.bytes
            || Digest::of(bytes) != file.sha256
            || git_object::object_id(ObjectKind::Blob, bytes) != file.blob
        {
            return Err(format!(
                "{what}: {} does not give its recorded size, sha256 and blob id",
                file.path
            ));
        }
    }
    let rebuilt = tree_id(files);
    if rebuilt != *tree {
        return Err(format!(
            "{what}: the files build tree {rebuilt}, not {tree}"
        ));
    }
    Ok(())
}

fn snapshot_of(files: &[SourceFile], what: &str) -> Result<MaterialisedTree, String> {
    let files: Vec<SnapshotFile> = files
        .iter()
        .map(|file| SnapshotFile::new(file.path.clone(), file.mode, file.content.clone()))
        .collect();
    let digest = snapshot_digest(&files).map_err(|error| format!("{what}: {error}"))?;
    Ok(MaterialisedTree { files, digest })
}

/// The files of the base `snapshot`, which must be the snapshot of `commit` with `tree`,
/// byte-exactly, as fresh copies.
pub fn materialise_base(
    snapshot: &SourceSnapshot,
    commit: &ObjectId,
    tree: &ObjectId,
) -> Result<MaterialisedTree, String> {
    if snapshot.commit != *commit || snapshot.tree != *tree {
        return Err(format!(
            "the base snapshot is of commit {} with tree {}, not {commit} with {tree}",
            snapshot.commit, snapshot.tree
        ));
    }
    check_files(&snapshot.files, tree, "base")?;
    snapshot_of(&snapshot.files, "base")
}

/// The Candidate's files (`snapshot`, `Repository::snapshot` of M), checked against its
/// manifest: M's commit and tree, each file byte-exact, and what the manifest names beyond
/// the tree id (the listed files, the content digest, or the tree digest).
pub fn materialise_candidate(
    sealed: &SealedCandidate,
    snapshot: &SourceSnapshot,
) -> Result<MaterialisedTree, String> {
    let manifest = &sealed.manifest;
    if snapshot.commit != manifest.commit || snapshot.tree != manifest.tree {
        return Err(format!(
            "the Candidate snapshot is of commit {} with tree {}, not {} with {}",
            snapshot.commit, snapshot.tree, manifest.commit, manifest.tree
        ));
    }
    check_files(&snapshot.files, &manifest.tree, "Candidate")?;
    manifest
        .check_contents(
            &snapshot.files,
            &crate::repository::contents_digest(&snapshot.files),
        )
        .map_err(|why| format!("Candidate: {why}"))?;
    snapshot_of(&snapshot.files, "Candidate")
}
