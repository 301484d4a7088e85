//! The programs a collection runs and the pins that name them: each stage's tree
//! (materialised byte-exactly) with the Slice's overlay of test files laid over it, as a
//! task's test patch is applied to both the base and the fix, so that the base runs the new
//! tests too and no Candidate decides what its tests are.
//!
//! The collector derives the pins itself, and the judge and the integration guard take them
//! from [`derive()`] as well, so that every party names the same runs.

use crate::assurance::{
    BasePins, CandidatePins, FrozenSlice, RepositoryPins, SlicePins, Stage, authenticate,
};
use crate::canonical::Digest;
use crate::repository::{SealedCandidate, SourceSnapshot, TreeContents, check_forbidden};
use crate::snapshot::{SnapshotFile, snapshot_digest};

use super::base::{MaterialisedTree, materialise_base, materialise_candidate};

/// What one collection of one Candidate under one Slice runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Programs {
    /// The pins every record of the collection is filed under.
    pub pins: RepositoryPins,
    /// The Slice record's digest.
    pub slice: Digest,
    /// The base's tree with the overlay: the program of every stage-base run.
    pub base: MaterialisedTree,
    /// The Candidate's tree with the overlay: the program of every stage-candidate run.
    pub candidate: MaterialisedTree,
}

impl Programs {
    /// The program of a run of `stage`.
    pub fn of(&self, stage: Stage) -> &MaterialisedTree {
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
/// ([`crate::assurance::authenticate`]), materialises both trees (the Candidate's from
/// `candidate`, the base from `base`, each byte-exact and as the manifest names it) and lays
/// the overlay over each; returns the programs and the pins naming them. Any failure is a
/// reason nothing may run.
pub fn derive(
    slice: &FrozenSlice,
    sealed: &SealedCandidate,
    base: &SourceSnapshot,
    candidate: &SourceSnapshot,
) -> Result<Programs, String> {
    let digest = slice.validate().map_err(|error| error.to_string())?;
    let manifest = &sealed.manifest;
    authenticate(&slice.record, &digest, &manifest.repository, sealed)
        .map_err(|error| error.to_string())?;
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
            snapshot: candidate_tree.digest,
            program: candidate_program.digest.clone(),
        },
        base: BasePins {
            commit: manifest.base_commit,
            tree: manifest.base_tree,
            snapshot: base_tree.digest,
            program: base_program.digest.clone(),
        },
        harness: record.harness.clone(),
        acceptance: record.acceptance.clone(),
        recipe: record.recipe.clone(),
        environment: record.environment.clone(),
    };
    Ok(Programs {
        pins,
        slice: digest,
        base: base_program,
        candidate: candidate_program,
    })
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
