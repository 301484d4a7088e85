//! Materialising the trees a collection runs: the base B from its repository snapshot, and
//! the Candidate's exported files checked against its manifest. Byte-exact: every file's
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

/// The Candidate's exported files, checked against its manifest: the listed files (versions
/// 1 and 2) or the content digest (version 3), building the recorded tree M^{tree}.
pub fn materialise_candidate(sealed: &SealedCandidate) -> Result<MaterialisedTree, String> {
    let mut files = Vec::with_capacity(sealed.files.len());
    for file in &sealed.files {
        files.push(SourceFile::new(
            file.path.clone(),
            file.mode,
            file.content.clone(),
        ));
    }
    files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    sealed
        .manifest
        .check_contents(&files, &crate::repository::contents_digest(&files))
        .map_err(|why| format!("Candidate: {why}"))?;
    check_files(&files, &sealed.manifest.tree, "Candidate")?;
    snapshot_of(&files, "Candidate")
}
