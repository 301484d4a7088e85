//! The Slice record (`sf-slice/1`): the one source of what a Candidate is sealed for. Its
//! digest binds every frozen part of a Slice (its id and revision, the repository and base,
//! the scope and protected paths, the acceptance, recipe and environment records, the harness
//! and the test files laid over both trees, and the executor configuration it was frozen
//! with), and a Candidate's manifest names that digest.
//!
//! [`FrozenSlice`] is a record together with everything it names, checked as a whole
//! ([`FrozenSlice::validate`]): freezing runs the same checks before anything is written, and
//! every command that reads a frozen Slice runs them again. [`authenticate`] is the check
//! that a sealed Candidate was sealed for exactly this Slice, made before any attempt starts.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::contracts::executor::EntryPlace;
use crate::git_object::ObjectId;
use crate::path_glob::{PathGlob, covering_text};
use crate::repository::{
    CANDIDATE_PROTOCOL, ClosedPath, ClosedPaths, FrozenInputs, ID_RULE, ProposalBounds,
    RepositoryIdentity, SealedCandidate, Slice, SliceBinding, check_protected, in_scope,
    is_valid_id, parse_protected,
};
use crate::snapshot::{SnapshotFile, snapshot_digest};

use super::acceptance::{Acceptance, CheckCommand, CwdFrom, Stage};
use super::environment::EnvironmentRecord;
use super::recipe::Recipe;
use super::trusted::{Closing, TreeEntry, TreeLookup, check_reachable};
use super::{AssuranceError, read_record, record_bytes, record_bytes_digest};

/// The protocol string of the Slice record.
pub const SLICE_PROTOCOL: &str = "sf-slice/1";

/// A frozen Slice's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct SliceRecord {
    /// The Slice's id; follows [`ID_RULE`].
    pub id: String,
    /// The Slice's revision (a positive safe integer).
    #[serde(deserialize_with = "canonical::positive")]
    pub revision: u64,
    /// The repository the Slice's base belongs to.
    pub repository: RepositoryIdentity,
    /// The base B every Candidate of the Slice is sealed on.
    pub base: ObjectId,
    /// The paths a proposal may touch (each a file, or a directory and everything below).
    pub scope: Vec<String>,
    /// The patterns of paths no proposal may create, change or delete, even inside the
    /// scope: the operator's, and every file of the overlay with the directories above it.
    pub protected: Vec<String>,
    /// The `sha256:` of the acceptance record's canonical bytes.
    pub acceptance: Digest,
    /// The `sha256:` of the recipe record's canonical bytes.
    pub recipe: Digest,
    /// The `sha256:` of the environment record's canonical bytes.
    pub environment: Digest,
    /// The snapshot digest of the harness (the empty snapshot's when there is none).
    pub harness: Digest,
    /// The snapshot digest of the test files laid over both stages' trees (the empty
    /// snapshot's when there are none).
    pub overlay: Digest,
    /// The executor configuration the Slice was frozen with (`{"type": …, …}`), so that a
    /// collection cannot run under another one.
    pub executor: Value,
    /// How large a proposal may be, when the Slice raises the default bounds (64 edits and
    /// 512 KiB) up to the hard cap; absent (`None`) for the default, so that a Slice frozen
    /// without it keeps its record and digest.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub bounds: Option<ProposalBounds>,
    /// Constructs no proposal may add to a file (`os._exit`, `atexit`, `sys.settrace`…),
    /// checked on the proposal at seal and again before a collection; absent when empty, so
    /// that a Slice frozen without them keeps its record and digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden: Vec<String>,
    /// The paths closed around the Slice's trusted test material (what a runner could load
    /// instead of a trusted file, before it, or beside it), as the freeze found them; absent
    /// when none, so that a Slice frozen without them keeps its record and digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed: Vec<ClosedPath>,
    /// Closed sub-paths the Slice opens again to proposals (never a stand-in); absent when
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open: Vec<String>,
}

canonical::literal_fields!(SliceRecord { "protocol": SLICE_PROTOCOL });

impl SliceRecord {
    /// The Slice as a Candidate names it.
    pub fn slice(&self) -> Slice {
        Slice {
            id: self.id.clone(),
            revision: self.revision,
        }
    }

    /// The protected-path patterns, parsed.
    pub fn protected_globs(&self) -> Result<Vec<PathGlob>, AssuranceError> {
        parse_protected(&self.protected)
            .map_err(|error| AssuranceError::invalid("slice.protected", error.to_string()))
    }

    /// The closed paths and the sub-paths opened again.
    pub fn closed_paths(&self) -> ClosedPaths {
        ClosedPaths {
            closed: self.closed.clone(),
            open: self.open.clone(),
        }
    }

    /// What a Candidate of this Slice is sealed for; `digest` is this record's.
    pub fn frozen_inputs(&self, digest: &Digest) -> FrozenInputs {
        FrozenInputs {
            forbidden: self.forbidden.clone(),
            closed_paths: self.closed_paths(),
            base: self.base,
            slice: self.slice(),
            scope: self.scope.clone(),
            acceptance: self.acceptance.clone(),
            recipe: self.recipe.clone(),
            environment: self.environment.clone(),
            binding: Some(SliceBinding {
                digest: digest.clone(),
                protected: self.protected.clone(),
            }),
            bounds: self.bounds.unwrap_or_default(),
        }
    }

    /// Checks the rules the types do not carry: the id grammar, a positive safe revision, the
    /// repository identity's own rules, the scope and the protected patterns (the frozen
    /// inputs' rules: the digest is not one of them), and an executor configuration that names
    /// its `type`.
    pub fn validate(&self) -> Result<(), AssuranceError> {
        if !is_valid_id(&self.id) {
            return Err(AssuranceError::invalid("slice.id", ID_RULE));
        }
        crate::repository::parse_repository_identity(&self.repository.to_canonical_bytes())
            .map_err(|error| AssuranceError::invalid("slice.repository", error.to_string()))?;
        let unbound = Digest::of(b"");
        self.frozen_inputs(&unbound)
            .validate()
            .map_err(|error| AssuranceError::invalid("slice", error.to_string()))?;
        check_reachable(&self.scope, &self.closed_paths())?;
        match &self.executor {
            Value::Object(map) if matches!(map.get("type"), Some(Value::String(tag)) if !tag.is_empty()) => {
                Ok(())
            }
            _ => Err(AssuranceError::invalid(
                "slice.executor",
                "is the executor configuration, an object with a string \"type\"",
            )),
        }
    }

    /// The record as a JSON value.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a Slice record holds only JSON values")
    }

    /// The canonical bytes of the record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        record_bytes(self, "slice")
    }

    /// The Slice digest: the `sha256:` of the canonical bytes.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_bytes_digest(self, "slice")
    }

    /// Parses a Slice record strictly and validates it.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let record: Self = read_record(bytes, "slice")?;
        record.validate()?;
        Ok(record)
    }
}

/// The patterns the overlay's files add to the protected ones: each file's path and every
/// directory above it (a proposal that made one of those a file would hide the test file).
/// Paths of the grammar hold no pattern characters, so each is a literal pattern.
pub fn overlay_protection(overlay: &[SnapshotFile]) -> BTreeSet<String> {
    protection_of(overlay.iter().map(|file| file.path.as_str()))
}

/// The patterns that protect the trusted files `paths`: each path and every directory above
/// it, each written as a pattern covering it ([`covering_text`]).
pub fn protection_of<'a>(paths: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut patterns = BTreeSet::new();
    for path in paths {
        let mut prefix = String::new();
        for segment in path.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(segment);
            patterns.insert(covering_text(&prefix));
        }
    }
    patterns
}

/// A frozen Slice: its record and everything the record names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrozenSlice {
    /// The Slice record; its digest is the Slice's.
    pub record: SliceRecord,
    /// The acceptance the record names.
    pub acceptance: Acceptance,
    /// The recipe the record names.
    pub recipe: Recipe,
    /// The environment record the record names.
    pub environment: EnvironmentRecord,
    /// The harness files (at `/sf/harness` in every run).
    pub harness: Vec<SnapshotFile>,
    /// The test files laid over both stages' trees.
    pub overlay: Vec<SnapshotFile>,
    /// Every input a process check names, by snapshot digest.
    pub inputs: BTreeMap<Digest, Vec<SnapshotFile>>,
}

impl FrozenSlice {
    /// Checks the Slice as a whole and returns its digest: the record is valid; the
    /// acceptance, recipe, environment, harness and overlay give the digests the record
    /// names, and every input a check names is here and gives its digest; every harness entry
    /// is a file of the harness; `entryInScope` is true exactly for the checks of stage
    /// candidate whose tree entry the scope covers; the overlay's paths are protected; and no
    /// input, harness or overlay file holds the expected stdout of a check (the answer key
    /// stays on the host, as a digest).
    pub fn validate(&self) -> Result<Digest, AssuranceError> {
        let record = &self.record;
        record.validate()?;
        self.acceptance.validate()?;
        self.recipe.validate()?;
        self.environment.validate()?;
        for (what, digest, named) in [
            ("acceptance", self.acceptance.digest()?, &record.acceptance),
            ("recipe", self.recipe.digest()?, &record.recipe),
            (
                "environment",
                self.environment.digest()?,
                &record.environment,
            ),
            (
                "harness",
                files_digest(&self.harness, "harness")?,
                &record.harness,
            ),
            (
                "overlay",
                files_digest(&self.overlay, "overlay")?,
                &record.overlay,
            ),
        ] {
            if digest != *named {
                return Err(AssuranceError::invalid(
                    format!("slice.{what}"),
                    format!("the Slice names {named}, but its {what} gives {digest}"),
                ));
            }
        }
        for (digest, files) in &self.inputs {
            if files_digest(files, "input")? != *digest {
                return Err(AssuranceError::invalid(
                    format!("input {digest}"),
                    "its files do not give its digest",
                ));
            }
        }
        let protected: BTreeSet<&str> = record.protected.iter().map(String::as_str).collect();
        if let Some(missing) = overlay_protection(&self.overlay)
            .into_iter()
            .find(|pattern| !protected.contains(pattern.as_str()))
        {
            return Err(AssuranceError::invalid(
                "slice.protected",
                format!("does not protect {missing:?}, a path of the overlay"),
            ));
        }
        if let Some(missing) =
            Closing::around_overlay(&self.acceptance, &self.overlay)?.missing_from(&record.closed)
        {
            return Err(AssuranceError::invalid(
                "slice.closed",
                format!(
                    "does not close \"{}\" ({} {}): the Slice was frozen before sf closed what \
                     a runner could load instead of its trusted tests or before them; freeze it \
                     again as a new revision",
                    missing.pattern,
                    missing.because.as_str(),
                    missing.protects
                ),
            ));
        }
        for check in self.acceptance.process_checks() {
            let field = format!("check {}", check.id);
            if !self.inputs.contains_key(&check.input) {
                return Err(AssuranceError::invalid(
                    format!("{field} input {}", check.input),
                    "the Slice does not hold this input",
                ));
            }
            if check.oats().is_some() {
                if !runs_node(&self.recipe.runtime) {
                    return Err(AssuranceError::invalid(
                        field,
                        format!(
                            "is an oats check, whose capability runs on Node, but the Slice's \
                             runtime is {}: freeze it with the executor's runtime = \"node\" \
                             (or a runtime table whose executable is node)",
                            self.recipe.runtime
                        ),
                    ));
                }
                continue;
            }
            if let Some(command) = check.command() {
                self.check_command(&field, command)?;
                if command
                    .timeout_ms
                    .is_some_and(|ms| ms > self.recipe.timeout_ms)
                {
                    return Err(AssuranceError::invalid(
                        format!("{field} timeoutMs"),
                        format!(
                            "is more than the recipe's {} ms: a check's timeout is at most the \
                             recipe's",
                            self.recipe.timeout_ms
                        ),
                    ));
                }
                continue;
            }
            let Some((entry, entry_in_scope, _)) = check.entry() else {
                continue;
            };
            if entry.place == EntryPlace::Harness
                && !self.harness.iter().any(|file| file.path == entry.path)
            {
                return Err(AssuranceError::invalid(
                    format!("{field} entry {}", entry.path),
                    "is not a file of the harness",
                ));
            }
            let rewritable = check.stage == Stage::Candidate
                && entry.place == EntryPlace::Program
                && in_scope(&entry.path, &record.scope);
            if rewritable != entry_in_scope {
                return Err(AssuranceError::invalid(
                    format!("{field} entryInScope"),
                    if rewritable {
                        "the entry is inside the scope, so the Candidate may rewrite what this \
                         check runs: move the entry into the harness, or declare \
                         \"entryInScope\": true if the check runs Candidate code on purpose"
                    } else {
                        "is true, but the Candidate cannot rewrite this entry: write false"
                    },
                ));
            }
        }
        self.check_answer_key()?;
        record.digest()
    }

    /// A command check's working directory in the harness is a directory of it.
    fn check_command(&self, field: &str, command: &CheckCommand) -> Result<(), AssuranceError> {
        let cwd = &command.cwd;
        if cwd.from == CwdFrom::Harness
            && !cwd.path.is_empty()
            && !crate::snapshot::holds_directory(&self.harness, &cwd.path)
        {
            return Err(AssuranceError::invalid(
                format!("{field} cwd {}", cwd.path),
                "is not a directory of the harness",
            ));
        }
        Ok(())
    }

    /// Refuses a file a run can read whose text is a check's expected stdout in any spelling
    /// ([`spellings`]): the expected stdout is held on the host as a digest and never where a
    /// Candidate could read it.
    fn check_answer_key(&self) -> Result<(), AssuranceError> {
        let expected: BTreeMap<&Digest, &str> = self
            .acceptance
            .process_checks()
            .filter_map(|check| {
                check
                    .expectation
                    .stdout_digest
                    .as_ref()
                    .map(|digest| (digest, check.id.as_str()))
            })
            .filter(|(digest, _)| **digest != Digest::of(b""))
            .collect();
        let readable = self
            .inputs
            .values()
            .flatten()
            .map(|file| ("input", file))
            .chain(self.harness.iter().map(|file| ("harness", file)))
            .chain(self.overlay.iter().map(|file| ("overlay", file)));
        if expected.is_empty() {
            return Ok(());
        }
        // A spelling is at least half and at most twice the file's length (CRLF and LF
        // endings), so a file more than twice the longest stdout cannot spell one.
        let longest = self.recipe.output_limit.saturating_mul(2).saturating_add(3);
        for (place, file) in readable.filter(|(_, file)| file.content.len() as u64 <= longest) {
            let found = spellings(&file.content)
                .into_iter()
                .find_map(|spelling| expected.get(&Digest::of(&spelling)));
            if let Some(check) = found {
                return Err(AssuranceError::invalid(
                    format!("{place} file {}", file.path),
                    format!(
                        "holds the expected stdout of check {check}, which a Candidate could \
                         read: keep the expected output on the host as the check's \
                         stdoutDigest only"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks what needs the base's files: every tree entry of a check the Candidate cannot
    /// rewrite (of stage base, or outside the scope) is a file of `tree`, the base with the
    /// overlay laid over it ([`Overlaid`]).
    pub fn check_entries_in(&self, tree: &dyn TreeLookup) -> Result<(), AssuranceError> {
        for check in self.acceptance.process_checks() {
            let Some((entry, false, _)) = check.entry() else {
                continue;
            };
            if entry.place != EntryPlace::Program {
                continue;
            }
            let path = &entry.path;
            if tree.entry(path) != Some(TreeEntry::File) {
                return Err(AssuranceError::invalid(
                    format!("check {} entry {path}", check.id),
                    "is not a file of the base (or of the overlay), and the Candidate cannot \
                     create it",
                ));
            }
        }
        Ok(())
    }
}

/// The spellings of `bytes` whose text is the same once line endings (CRLF, CR, LF), a final
/// newline, white space at the ends of lines and a UTF-8 byte-order mark are ignored: the
/// bytes themselves, and the text with LF, CRLF or CR endings, with a final newline or
/// without, with the mark or without, with each line's trailing white space or without it.
/// Only a digest of the expected stdout is known, so the comparison is over these spellings
/// of the file rather than over the answer's own normal form.
pub fn spellings(bytes: &[u8]) -> Vec<Vec<u8>> {
    let text = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|byte| matches!(byte, b'\r' | b'\n'))
            .unwrap_or(rest.len());
        lines.push(&rest[..end]);
        rest = match rest.get(end..end + 2) {
            Some(b"\r\n") => &rest[end + 2..],
            _ => rest.get(end + 1..).unwrap_or(&[]),
        };
    }
    while lines.last().is_some_and(|line| line.is_empty()) {
        lines.pop();
    }
    let trimmed: Vec<&[u8]> = lines
        .iter()
        .map(|line| {
            let end = line
                .iter()
                .rposition(|byte| !byte.is_ascii_whitespace())
                .map_or(0, |at| at + 1);
            &line[..end]
        })
        .collect();
    let mut spellings = vec![bytes.to_vec()];
    for lines in [&lines, &trimmed] {
        for ending in [&b"\n"[..], b"\r\n", b"\r"] {
            let body = lines.join(ending);
            for mark in [&b""[..], b"\xef\xbb\xbf"] {
                let mut spelling = mark.to_vec();
                spelling.extend_from_slice(&body);
                if !lines.is_empty() {
                    spellings.push([&spelling[..], ending].concat());
                }
                spellings.push(spelling);
            }
        }
    }
    spellings.sort();
    spellings.dedup();
    spellings
}

fn files_digest(files: &[SnapshotFile], what: &str) -> Result<Digest, AssuranceError> {
    snapshot_digest(files).map_err(|error| AssuranceError::invalid(what, error.to_string()))
}

/// Checks that `sealed` was sealed for exactly this Slice (`digest` is the record's) in the
/// repository `repository`: its manifest is of version 2 and names this repository, the
/// Slice's id, revision and digest, its scope and protected paths, its base and its
/// acceptance, recipe and environment digests, and no edit touches a protected path. Anything
/// else is an error naming the field, raised before any attempt starts.
pub fn authenticate(
    slice: &SliceRecord,
    digest: &Digest,
    repository: &RepositoryIdentity,
    sealed: &SealedCandidate,
) -> Result<(), AssuranceError> {
    let manifest = &sealed.manifest;
    let refuse = |field: &str, detail: String| {
        Err(AssuranceError::invalid(
            format!("Candidate {} {field}", sealed.digest),
            detail,
        ))
    };
    let Some(binding) = &manifest.binding else {
        return refuse(
            "protocol",
            format!(
                "is {}, which names no Slice digest; seal the proposal again for this Slice \
                 (it is then {CANDIDATE_PROTOCOL})",
                manifest.protocol()
            ),
        );
    };
    if manifest.repository != *repository {
        return refuse(
            "repository",
            "was sealed in another repository than the one it is opened from".into(),
        );
    }
    if slice.repository != *repository {
        return refuse(
            "repository",
            format!(
                "the Slice {} was frozen for another repository ({} at {})",
                slice.id, slice.repository.product_id, slice.repository.path
            ),
        );
    }
    if binding.digest != *digest {
        return refuse(
            "slice.digest",
            format!(
                "was sealed for Slice {} ({} revision {}), not this Slice {digest} ({} revision \
                 {})",
                binding.digest,
                manifest.slice.id,
                manifest.slice.revision,
                slice.id,
                slice.revision
            ),
        );
    }
    let frozen = manifest.frozen();
    let expected = slice.frozen_inputs(digest);
    for (field, differs) in [
        ("slice", frozen.slice != expected.slice),
        ("scope", frozen.scope != expected.scope),
        ("protected", frozen.binding != expected.binding),
        ("bounds", frozen.bounds != expected.bounds),
        ("base", frozen.base != expected.base),
        ("acceptance", frozen.acceptance != expected.acceptance),
        ("recipe", frozen.recipe != expected.recipe),
        ("environment", frozen.environment != expected.environment),
    ] {
        if differs {
            return refuse(
                field,
                format!("is not the Slice's {field}, though the Slice digest is named"),
            );
        }
    }
    let edits = || manifest.edits.iter().map(|edit| edit.path.as_str());
    let closed = slice.closed_paths();
    check_protected(edits(), &slice.protected_globs()?)
        .and_then(|()| closed.parse()?.check(edits()))
        .map_err(|error| {
            AssuranceError::invalid(format!("Candidate {}", sealed.digest), error.to_string())
        })
}

/// Whether the runtime executable at `path` is Node (`node` or `nodejs`), the runtime an
/// oats capability's scripts need.
fn runs_node(path: &str) -> bool {
    matches!(
        std::path::Path::new(path)
            .file_name()
            .and_then(|name| name.to_str()),
        Some("node" | "nodejs")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_found_in_every_spelling() {
        let answer = Digest::of(b"6\n");
        let two_lines = Digest::of(b"a b\n  c\n");
        for file in [
            &b"6\n"[..],
            b"6",
            b"6\r\n",
            b"6\r",
            b"\xef\xbb\xbf6\n",
            b"6  \n",
            b"6\t\r\n\r\n",
            b"\xef\xbb\xbf6 \r\n\n",
        ] {
            assert!(
                spellings(file).iter().any(|s| Digest::of(s) == answer),
                "{:?}",
                String::from_utf8_lossy(file)
            );
        }
        for file in [
            &b"a b\r\n  c\r\n"[..],
            b"a b   \n  c",
            b"\xef\xbb\xbfa b\r  c \r",
        ] {
            assert!(
                spellings(file).iter().any(|s| Digest::of(s) == two_lines),
                "{:?}",
                String::from_utf8_lossy(file)
            );
        }
        for file in [&b"66\n"[..], b"6\n6\n", b" 6\n", b""] {
            assert!(
                !spellings(file).iter().any(|s| Digest::of(s) == answer),
                "{:?}",
                String::from_utf8_lossy(file)
            );
        }
    }
}
