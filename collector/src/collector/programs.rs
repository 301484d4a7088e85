//! The programs a collection runs and the pins that name them: each stage's tree with the
//! Slice's overlay of test files laid over it, as a task's test patch is applied to both the
//! base and the fix, so that the base runs the new tests too and no Candidate decides what
//! its tests are.
//!
//! A Candidate up to `sf-candidate/3` runs by value: both trees materialised byte-exactly in
//! memory, named by snapshot digests. An `sf-candidate/4` Candidate runs by reference: the
//! base as the tree store holds it, and for each stage a layer (the Candidate's edited
//! entries, the overlay) laid over it ([`ProgramTree`]), named by `sf-tree/1` digests that
//! are bound to the manifest's.
//!
//! The collector derives the pins itself, and the judge and the integration guard take them
//! from [`derive()`] as well, so that every party names the same runs.

use std::collections::BTreeMap;

use crate::assurance::trusted::{TreeEntry, TreeLookup, check_overlay};
use crate::assurance::{
    BasePins, CandidatePins, FrozenSlice, RepositoryPins, SlicePins, Stage, authenticate,
};
use crate::canonical::Digest;
use crate::contracts::ProgramTree;
use crate::contracts::executor::CheckedTree;
use crate::contracts::tree_digest::Directory;
use crate::repository::{
    EditedEntry, ManifestEntry, SealedCandidate, SourceSnapshot, TreeContents, check_forbidden,
};
use crate::snapshot::{SnapshotFile, holds_directory, snapshot_digest};
use crate::tree_store::StoredTree;

use super::base::{MaterialisedTree, materialise_base, materialise_candidate};

/// The trees a collection runs, as its caller read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CollectTrees {
    /// By value (`sf-candidate/1` to `/3`): the base's and M's files, whole
    /// (`Repository::snapshot`).
    Files {
        /// B's files.
        base: SourceSnapshot,
        /// M's files.
        candidate: SourceSnapshot,
    },
    /// By reference (`sf-candidate/4`).
    Stored(StoredTrees),
}

/// What an `sf-candidate/4` collection runs: the base as the tree store holds it, the base's
/// directories on every path a program's layer or a check's entry or working directory lies
/// on ([`tree_paths`]), and the Candidate's edited entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTrees {
    /// The base, materialised and verified; `None` when the programs are only named (a
    /// judgment), never run.
    pub base: Option<StoredTree>,
    /// The base's `sf-tree/1` directories (`Repository::tree_directories`).
    pub directories: BTreeMap<String, Directory>,
    /// The Candidate's edited entries (`Repository::edited_entries`).
    pub edits: Vec<EditedEntry>,
}

/// The paths of the base's tree whose directories a by-reference collection of `sealed`
/// under `slice` needs: the edited paths, and [`slice_paths`].
pub fn tree_paths(slice: &FrozenSlice, sealed: &SealedCandidate) -> Vec<String> {
    let mut paths: Vec<String> = sealed
        .manifest
        .edits
        .iter()
        .map(|edit| edit.path.clone())
        .collect();
    paths.extend(slice_paths(slice));
    paths
}

/// The paths of a base's tree whose directories any program of `slice` needs, whatever its
/// edits: the overlay's, and each process check's entry and working directory in the tree.
pub fn slice_paths(slice: &FrozenSlice) -> Vec<String> {
    use crate::assurance::acceptance::{CheckRun, CwdFrom};
    use crate::contracts::EntryPlace;
    let mut paths: Vec<String> = slice.overlay.iter().map(|file| file.path.clone()).collect();
    for check in slice.acceptance.process_checks() {
        match &check.run {
            CheckRun::Entry { entry, .. } if entry.place == EntryPlace::Program => {
                paths.push(entry.path.clone());
            }
            CheckRun::Command(command)
                if command.cwd.from == CwdFrom::Tree && !command.cwd.path.is_empty() =>
            {
                paths.push(command.cwd.path.clone());
            }
            _ => {}
        }
    }
    paths
}

/// What one stage's runs run, and its identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageProgram {
    /// Its files, by value, and their snapshot digest.
    Files(MaterialisedTree),
    /// A layer over the base, by reference; `runnable` only when the base is materialised on
    /// this host.
    Tree {
        /// The reference (its directory empty when not runnable).
        tree: ProgramTree,
        /// The checked tree: its digest, and the directories its entries are looked up in.
        checked: CheckedTree,
        /// Whether the base is on this host.
        runnable: bool,
    },
}

impl StageProgram {
    /// The program's identity: a snapshot digest, or an `sf-tree/1` digest.
    pub fn digest(&self) -> &Digest {
        match self {
            Self::Files(tree) => &tree.digest,
            Self::Tree { checked, .. } => &checked.digest,
        }
    }

    /// Whether `path` is a file of the program.
    pub fn holds_file(&self, path: &str) -> bool {
        match self {
            Self::Files(tree) => tree.files.iter().any(|file| file.path == path),
            Self::Tree { checked, .. } => checked.holds_file(path),
        }
    }

    /// Whether `dir` is a directory of the program.
    pub fn holds_directory(&self, dir: &str) -> bool {
        match self {
            Self::Files(tree) => holds_directory(&tree.files, dir),
            Self::Tree { checked, .. } => checked.holds_directory(dir),
        }
    }
}

/// A checked program tree looked up by path, for [`check_overlay`].
impl TreeLookup for CheckedTree {
    fn entry(&self, path: &str) -> Option<TreeEntry> {
        if self.holds_file(path) {
            Some(TreeEntry::File)
        } else if self.holds_directory(path) {
            Some(TreeEntry::Directory)
        } else {
            None
        }
    }
}

/// What one collection of one Candidate under one Slice runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Programs {
    /// The pins every record of the collection is filed under.
    pub pins: RepositoryPins,
    /// The Slice record's digest.
    pub slice: Digest,
    /// The base's tree with the overlay: the program of every stage-base run.
    pub base: StageProgram,
    /// The Candidate's tree with the overlay: the program of every stage-candidate run.
    pub candidate: StageProgram,
}

impl Programs {
    /// The program of a run of `stage`.
    pub fn of(&self, stage: Stage) -> &StageProgram {
        match stage {
            Stage::Base => &self.base,
            Stage::Candidate => &self.candidate,
        }
    }
}

/// `tree` with `overlay`'s files laid over it: an overlay file replaces the tree's file of the
/// same path or is added. The result must be a valid snapshot (no file that is also a
/// directory, no names that differ only in case).
pub fn lay_over(
    tree: &MaterialisedTree,
    overlay: &[SnapshotFile],
    what: &str,
) -> Result<MaterialisedTree, String> {
    if overlay.is_empty() {
        return Ok(tree.clone());
    }
    let mut files: Vec<SnapshotFile> = tree
        .files
        .iter()
        .filter(|file| !overlay.iter().any(|laid| laid.path == file.path))
        .cloned()
        .collect();
    files.extend(overlay.iter().cloned());
    files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let digest = snapshot_digest(&files)
        .map_err(|error| format!("the overlay cannot be laid over the {what} tree: {error}"))?;
    Ok(MaterialisedTree { files, digest })
}

/// Checks `slice` as a whole and that `sealed` was sealed for it
/// ([`crate::assurance::authenticate`]), materialises both programs from `trees` (each
/// byte-exact, or bound to the manifest's tree digests) with the overlay laid over each, and
/// returns them and the pins naming them. Any failure is a reason nothing may run.
pub fn derive(
    slice: &FrozenSlice,
    sealed: &SealedCandidate,
    trees: &CollectTrees,
) -> Result<Programs, String> {
    let digest = slice.validate().map_err(|error| error.to_string())?;
    let manifest = &sealed.manifest;
    authenticate(&slice.record, &digest, &manifest.repository, sealed)
        .map_err(|error| error.to_string())?;
    let (base, candidate, snapshots, tree_identities) = match trees {
        CollectTrees::Files { base, candidate } => {
            let (base_program, candidate_program, snapshots) =
                by_value(slice, sealed, base, candidate)?;
            (base_program, candidate_program, snapshots, false)
        }
        CollectTrees::Stored(stored) => {
            let (base_program, candidate_program, snapshots) = by_reference(slice, sealed, stored)?;
            (base_program, candidate_program, snapshots, true)
        }
    };
    let record = &slice.record;
    let pins = RepositoryPins {
        repository: manifest.repository.clone(),
        slice: SlicePins {
            id: record.id.clone(),
            revision: record.revision,
            digest: digest.clone(),
        },
        candidate: CandidatePins {
            digest: sealed.digest.clone(),
            commit: manifest.commit,
            snapshot: snapshots.1,
            program: candidate.digest().clone(),
        },
        base: BasePins {
            commit: manifest.base_commit,
            tree: manifest.base_tree,
            snapshot: snapshots.0,
            program: base.digest().clone(),
        },
        harness: record.harness.clone(),
        acceptance: record.acceptance.clone(),
        recipe: record.recipe.clone(),
        environment: record.environment.clone(),
        tree_identities,
    };
    Ok(Programs {
        pins,
        slice: digest,
        base,
        candidate,
    })
}

/// Both programs by value, and the snapshot digests of the base's and M's files.
fn by_value(
    slice: &FrozenSlice,
    sealed: &SealedCandidate,
    base: &SourceSnapshot,
    candidate: &SourceSnapshot,
) -> Result<(StageProgram, StageProgram, (Digest, Digest)), String> {
    let manifest = &sealed.manifest;
    let candidate_tree = materialise_candidate(sealed, candidate)?;
    let base_tree = materialise_base(base, &manifest.base_commit, &manifest.base_tree)?;
    if let TreeContents::Trees { base: named, .. } = &manifest.contents
        && crate::repository::tree_digest_of(&base.files)? != *named
    {
        return Err(format!(
            "the base's files do not have the tree digest {named} its Candidate records"
        ));
    }
    // The seal refused a proposal adding a forbidden construct; a Candidate sealed elsewhere
    // is checked here again, on its files and the base's.
    check_forbidden(
        manifest.edits.iter().map(|edit| {
            let path = edit.path.as_str();
            (
                path,
                bytes(&base_tree.files, path),
                bytes(&candidate_tree.files, path),
            )
        }),
        &slice.record.forbidden,
    )
    .map_err(|error| format!("Candidate {}: {error}", sealed.digest))?;
    let base_program = lay_over(&base_tree, &slice.overlay, "base")?;
    let candidate_program = lay_over(&candidate_tree, &slice.overlay, "Candidate")?;
    Ok((
        StageProgram::Files(base_program),
        StageProgram::Files(candidate_program),
        (base_tree.digest, candidate_tree.digest),
    ))
}

/// Both programs by reference, and the tree digests of B and M (the manifest's).
fn by_reference(
    slice: &FrozenSlice,
    sealed: &SealedCandidate,
    stored: &StoredTrees,
) -> Result<(StageProgram, StageProgram, (Digest, Digest)), String> {
    let manifest = &sealed.manifest;
    let TreeContents::Trees {
        base: base_digest,
        candidate: tree_digest,
    } = &manifest.contents
    else {
        return Err(format!(
            "Candidate {} is {}: only an sf-candidate/4 Candidate runs by reference",
            sealed.digest,
            manifest.protocol()
        ));
    };
    if let Some(base) = &stored.base
        && base.digest != *base_digest
    {
        return Err(format!(
            "the materialised base is tree {}, not the {base_digest} the Candidate records",
            base.digest
        ));
    }
    // The edited entries are the manifest's, path for path.
    let recorded = stored.edits.len() == manifest.edits.len()
        && stored
            .edits
            .iter()
            .zip(&manifest.edits)
            .all(|(entry, edit)| {
                let entry_of = |file: &Option<SnapshotFile>| {
                    file.as_ref().map(|file| ManifestEntry {
                        mode: file.mode,
                        sha256: Digest::of(&file.content),
                    })
                };
                entry.path == edit.path
                    && entry_of(&entry.prior) == edit.prior
                    && entry_of(&entry.next) == edit.next
            });
    if !recorded {
        return Err(format!(
            "the edited entries given are not the ones Candidate {} records",
            sealed.digest
        ));
    }
    check_forbidden(
        stored.edits.iter().map(|entry| {
            (
                entry.path.as_str(),
                content_of(&entry.prior),
                content_of(&entry.next),
            )
        }),
        &slice.record.forbidden,
    )
    .map_err(|error| format!("Candidate {}: {error}", sealed.digest))?;
    let (base_program, candidate_program) =
        layered(&slice.overlay, base_digest, stored, Some(tree_digest))?;
    Ok((
        base_program,
        candidate_program,
        (base_digest.clone(), tree_digest.clone()),
    ))
}

/// The base (`base_digest`, materialised in `stored.base` or only named) and the base with
/// `stored.edits` applied, each with `overlay` laid over it, as programs by reference. The
/// edited tree must have the digest `expected` when one is given; the overlay must lay over
/// both trees.
pub(super) fn layered(
    overlay: &[SnapshotFile],
    base_digest: &Digest,
    stored: &StoredTrees,
    expected: Option<&Digest>,
) -> Result<(StageProgram, StageProgram), String> {
    // Without a materialised base the programs are only named: the directory is a
    // placeholder no run is given (`runnable` is false).
    let (dir, dev, ino) = stored.base.as_ref().map_or_else(
        || (std::path::PathBuf::from("/"), 0, 0),
        |base| (base.dir.clone(), base.dev, base.ino),
    );
    let program = |layer: Vec<SnapshotFile>, deleted: Vec<String>, what: &str| {
        let tree = ProgramTree {
            base: base_digest.clone(),
            dir: dir.clone(),
            dev,
            ino,
            directories: stored.directories.clone(),
            layer,
            deleted,
        };
        let checked = tree
            .check()
            .map_err(|error| format!("the {what} program: {error}"))?;
        Ok::<_, String>((tree, checked))
    };
    // M itself, the edits over the base: its digest must be the one expected.
    let changes: Vec<SnapshotFile> = stored.edits.iter().filter_map(|e| e.next.clone()).collect();
    let deletions: Vec<String> = stored
        .edits
        .iter()
        .filter(|entry| entry.next.is_none())
        .map(|entry| entry.path.clone())
        .collect();
    let (_, m) = program(changes.clone(), deletions.clone(), "Candidate's tree")?;
    if let Some(expected) = expected
        && m.digest != *expected
    {
        return Err(format!(
            "the base with the Candidate's edits gives tree {}, not the {expected} its \
             manifest records",
            m.digest
        ));
    }
    check_overlay(&m, overlay, "Candidate")?;
    let (_, base_tree) = program(Vec::new(), Vec::new(), "base's tree")?;
    check_overlay(&base_tree, overlay, "base")?;
    let laid = |layer: Vec<SnapshotFile>| -> Vec<SnapshotFile> {
        let mut layer: Vec<SnapshotFile> = layer
            .into_iter()
            .filter(|file| !overlay.iter().any(|laid| laid.path == file.path))
            .collect();
        layer.extend(overlay.iter().cloned());
        layer
    };
    let kept: Vec<String> = deletions
        .into_iter()
        .filter(|path| !overlay.iter().any(|laid| laid.path == *path))
        .collect();
    let runnable = stored.base.is_some();
    let stage = |(tree, checked): (ProgramTree, CheckedTree)| StageProgram::Tree {
        tree,
        checked,
        runnable,
    };
    let base_program = stage(program(laid(Vec::new()), Vec::new(), "base")?);
    let candidate_program = stage(program(laid(changes), kept, "Candidate")?);
    Ok((base_program, candidate_program))
}

/// An entry's bytes; none for an absent entry.
fn content_of(file: &Option<SnapshotFile>) -> &[u8] {
    file.as_ref().map_or(&[], |file| file.content.as_slice())
}

/// The bytes of `path` in `files`, empty when it is absent.
fn bytes<'f>(files: &'f [SnapshotFile], path: &str) -> &'f [u8] {
    files
        .iter()
        .find(|file| file.path == path)
        .map_or(&[], |file| file.content.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> SnapshotFile {
        SnapshotFile::regular(path, content.as_bytes().to_vec())
    }

    fn tree(files: Vec<SnapshotFile>) -> MaterialisedTree {
        let digest = snapshot_digest(&files).unwrap();
        MaterialisedTree { files, digest }
    }

    #[test]
    fn the_overlay_replaces_and_adds() {
        let base = tree(vec![file("src/a.py", "a"), file("tests/test_a.py", "old")]);
        let laid = lay_over(
            &base,
            &[file("tests/test_a.py", "new"), file("tests/test_b.py", "b")],
            "base",
        )
        .unwrap();
        assert_eq!(
            laid.files,
            vec![
                file("src/a.py", "a"),
                file("tests/test_a.py", "new"),
                file("tests/test_b.py", "b")
            ]
        );
        assert_eq!(laid.digest, snapshot_digest(&laid.files).unwrap());
        assert_eq!(lay_over(&base, &[], "base").unwrap(), base);
    }

    #[test]
    fn an_overlay_that_clashes_with_the_tree_is_refused() {
        let base = tree(vec![file(
            "tests",
            "a file where the overlay needs a directory",
        )]);
        let error = lay_over(&base, &[file("tests/test_a.py", "t")], "base").unwrap_err();
        assert!(error.contains("base"), "{error}");
    }
}
